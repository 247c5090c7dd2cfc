// 4 x 64-bit limb Montgomery prime field, shared by host and device code.
//
// Template parameter P supplies (all static constexpr uint64_t):
//   P0..P3      modulus, little-endian limbs (must be < 2^254 - see below)
//   ONE0..ONE3  2^256 mod p (one in Montgomery form)
//   R2_0..R2_3  2^512 mod p
//   INV         -p^-1 mod 2^64
//
// Elements are always kept fully reduced (< p) in Montgomery form unless a
// function name says otherwise.  The multiplication is CIOS with the
// "no-carry" shortcut, which is valid because the top limb of p is below
// (2^64 - 1)/2 - 1 (true for both BN254 primes, which are < 2^254).
//
// No C++ standard library here: this file is compiled by NVRTC too.
#ifndef CUZK_FIELD_CUH
#define CUZK_FIELD_CUH

#include "compat.cuh"

// Host x86-64 builds get MULX/ADX assembly for the multiplication, selected at
// run time (see field_x86_64.hpp).  Define CUZK_NO_ASM to disable.
#if defined(CUZK_HOST_X86) && !defined(CUZK_NO_ASM)
#define CUZK_FIELD_ASM 1
#include "field_x86_64.hpp"
#endif

namespace cuzk {

template <class P>
struct Field {
    uint64_t v[4];

    static_assert(P::P3 < 0x7ffffffffffffffeULL, "no-carry Montgomery needs a spare top bit");

    // ---- constructors -------------------------------------------------
    CUZK_HD CUZK_INLINE static Field zero() {
        Field r;
        r.v[0] = 0; r.v[1] = 0; r.v[2] = 0; r.v[3] = 0;
        return r;
    }
    CUZK_HD CUZK_INLINE static Field one() {
        Field r;
        r.v[0] = P::ONE0; r.v[1] = P::ONE1; r.v[2] = P::ONE2; r.v[3] = P::ONE3;
        return r;
    }
    CUZK_HD CUZK_INLINE static Field modulus_limbs() {
        Field r;
        r.v[0] = P::P0; r.v[1] = P::P1; r.v[2] = P::P2; r.v[3] = P::P3;
        return r;
    }
    // Raw limbs, no conversion.
    CUZK_HD CUZK_INLINE static Field from_raw(const uint64_t* l) {
        Field r;
        r.v[0] = l[0]; r.v[1] = l[1]; r.v[2] = l[2]; r.v[3] = l[3];
        return r;
    }
    CUZK_HD CUZK_INLINE void to_raw(uint64_t* l) const {
        l[0] = v[0]; l[1] = v[1]; l[2] = v[2]; l[3] = v[3];
    }
    // Standard-form limbs (< p) -> Montgomery form.
    CUZK_HD CUZK_INLINE static Field from_standard(const uint64_t* l) {
        Field r2;
        r2.v[0] = P::R2_0; r2.v[1] = P::R2_1; r2.v[2] = P::R2_2; r2.v[3] = P::R2_3;
        return mul(from_raw(l), r2);
    }
    // Montgomery form -> standard form limbs.
    CUZK_HD CUZK_INLINE void to_standard(uint64_t* l) const {
        Field u = zero();
        u.v[0] = 1;
        mul(*this, u).to_raw(l);
    }
    CUZK_HD CUZK_INLINE Field standard() const {
        Field u = zero();
        u.v[0] = 1;
        return mul(*this, u);
    }

    // ---- predicates ---------------------------------------------------
    CUZK_HD CUZK_INLINE bool is_zero() const {
        return (v[0] | v[1] | v[2] | v[3]) == 0;
    }
    CUZK_HD CUZK_INLINE bool is_one() const {
        return v[0] == P::ONE0 && v[1] == P::ONE1 && v[2] == P::ONE2 && v[3] == P::ONE3;
    }
    CUZK_HD CUZK_INLINE static bool eq(const Field& a, const Field& b) {
        return ((a.v[0] ^ b.v[0]) | (a.v[1] ^ b.v[1]) | (a.v[2] ^ b.v[2]) | (a.v[3] ^ b.v[3])) == 0;
    }
    // True if raw limbs are < p (i.e. a canonical representative).
    CUZK_HD CUZK_INLINE static bool is_canonical(const uint64_t* l) {
        uint64_t t, b = 0;
        b = sub_borrow(l[0], P::P0, b, &t);
        b = sub_borrow(l[1], P::P1, b, &t);
        b = sub_borrow(l[2], P::P2, b, &t);
        b = sub_borrow(l[3], P::P3, b, &t);
        return b != 0;
    }

    // ---- internal: conditional subtract p (input < 2p) -------------------
    CUZK_HD CUZK_INLINE static Field reduce_once(const Field& a) {
        Field s;
        uint64_t b = 0;
        b = sub_borrow(a.v[0], P::P0, b, &s.v[0]);
        b = sub_borrow(a.v[1], P::P1, b, &s.v[1]);
        b = sub_borrow(a.v[2], P::P2, b, &s.v[2]);
        b = sub_borrow(a.v[3], P::P3, b, &s.v[3]);
        // b == 1 -> a < p, keep a
        uint64_t mask = (uint64_t)0 - b;
        Field r;
        r.v[0] = (a.v[0] & mask) | (s.v[0] & ~mask);
        r.v[1] = (a.v[1] & mask) | (s.v[1] & ~mask);
        r.v[2] = (a.v[2] & mask) | (s.v[2] & ~mask);
        r.v[3] = (a.v[3] & mask) | (s.v[3] & ~mask);
        return r;
    }

    // ---- arithmetic ---------------------------------------------------
    CUZK_HD CUZK_INLINE static Field add(const Field& a, const Field& b) {
        Field t;
        uint64_t c = 0;  // a + b < 2p < 2^255: no carry out of limb 3
        c = add_carry(a.v[0], b.v[0], c, &t.v[0]);
        c = add_carry(a.v[1], b.v[1], c, &t.v[1]);
        c = add_carry(a.v[2], b.v[2], c, &t.v[2]);
        add_carry(a.v[3], b.v[3], c, &t.v[3]);
        return reduce_once(t);
    }
    CUZK_HD CUZK_INLINE static Field dbl(const Field& a) { return add(a, a); }
    CUZK_HD CUZK_INLINE static Field sub(const Field& a, const Field& b) {
        Field t;
        uint64_t br = 0;
        br = sub_borrow(a.v[0], b.v[0], br, &t.v[0]);
        br = sub_borrow(a.v[1], b.v[1], br, &t.v[1]);
        br = sub_borrow(a.v[2], b.v[2], br, &t.v[2]);
        br = sub_borrow(a.v[3], b.v[3], br, &t.v[3]);
        uint64_t mask = (uint64_t)0 - br;  // add p back if we borrowed
        uint64_t c = 0;
        c = add_carry(t.v[0], P::P0 & mask, c, &t.v[0]);
        c = add_carry(t.v[1], P::P1 & mask, c, &t.v[1]);
        c = add_carry(t.v[2], P::P2 & mask, c, &t.v[2]);
        add_carry(t.v[3], P::P3 & mask, c, &t.v[3]);
        return t;
    }
    CUZK_HD CUZK_INLINE static Field neg(const Field& a) {
        if (a.is_zero()) return a;
        Field t;
        uint64_t br = 0;
        br = sub_borrow(P::P0, a.v[0], br, &t.v[0]);
        br = sub_borrow(P::P1, a.v[1], br, &t.v[1]);
        br = sub_borrow(P::P2, a.v[2], br, &t.v[2]);
        sub_borrow(P::P3, a.v[3], br, &t.v[3]);
        return t;
    }

#if defined(CUZK_FIELD_ASM)
    static constexpr uint64_t kAsmConsts[5] = {P::P0, P::P1, P::P2, P::P3, P::INV};
#endif

    // Montgomery product a*b*2^-256 mod p.
    CUZK_HD CUZK_INLINE static Field mul(const Field& a, const Field& b) {
#if defined(CUZK_FIELD_ASM)
        if (__builtin_expect(x86::g_has_adx, 1)) {
            Field r;
            x86::mont_mul_adx(r.v, a.v, b.v, kAsmConsts);
            return r;
        }
        return mul_portable(a, b);
#else
        return mul_portable(a, b);
#endif
    }

    // Portable CIOS, "no-carry" variant.
#if defined(CUZK_FIELD_ASM)
    __attribute__((noinline))
#endif
    CUZK_HD static Field mul_portable(const Field& a, const Field& b) {
        const uint64_t p0 = P::P0, p1 = P::P1, p2 = P::P2, p3 = P::P3;
        uint64_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#pragma unroll
#elif defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 4
#endif
        for (int i = 0; i < 4; ++i) {
            const uint64_t bi = b.v[i];
            uint64_t A, C, lo;
            lo = mac(a.v[0], bi, t0, 0, &A);
            const uint64_t m = lo * P::INV;
            mac(m, p0, lo, 0, &C);
            lo = mac(a.v[1], bi, t1, A, &A);
            t0 = mac(m, p1, lo, C, &C);
            lo = mac(a.v[2], bi, t2, A, &A);
            t1 = mac(m, p2, lo, C, &C);
            lo = mac(a.v[3], bi, t3, A, &A);
            t2 = mac(m, p3, lo, C, &C);
            t3 = C + A;
        }
        Field r;
        r.v[0] = t0; r.v[1] = t1; r.v[2] = t2; r.v[3] = t3;
        return reduce_once(r);
    }
    CUZK_HD CUZK_INLINE static Field sqr(const Field& a) { return mul(a, a); }

    // a^e with e given as 4 little-endian limbs (plain integer, not Montgomery).
    CUZK_HD static Field pow(const Field& a, const uint64_t* e) {
        Field r = one();
        for (int i = 3; i >= 0; --i) {
            for (int bit = 63; bit >= 0; --bit) {
                r = sqr(r);
                if ((e[i] >> bit) & 1) r = mul(r, a);
            }
        }
        return r;
    }
    // Multiplicative inverse by Fermat (a^(p-2)); inv(0) = 0.
    CUZK_HD static Field inv(const Field& a) {
        uint64_t e[4];
        uint64_t br = sub_borrow(P::P0, 2, 0, &e[0]);
        br = sub_borrow(P::P1, 0, br, &e[1]);
        br = sub_borrow(P::P2, 0, br, &e[2]);
        sub_borrow(P::P3, 0, br, &e[3]);
        return pow(a, e);
    }

    // ---- operators ------------------------------------------------------
    CUZK_HD CUZK_INLINE Field operator+(const Field& o) const { return add(*this, o); }
    CUZK_HD CUZK_INLINE Field operator-(const Field& o) const { return sub(*this, o); }
    CUZK_HD CUZK_INLINE Field operator*(const Field& o) const { return mul(*this, o); }
    CUZK_HD CUZK_INLINE Field operator-() const { return neg(*this); }
    CUZK_HD CUZK_INLINE bool operator==(const Field& o) const { return eq(*this, o); }
    CUZK_HD CUZK_INLINE bool operator!=(const Field& o) const { return !eq(*this, o); }
};

}  // namespace cuzk

#endif  // CUZK_FIELD_CUH
