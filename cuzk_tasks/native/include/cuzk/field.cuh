// N x 64-bit limb Montgomery prime field (N = 4: BN254 Fq/Fr, BLS12-381 Fr;
// N = 6: BLS12-381 Fq), shared by host and device code, and its quadratic
// extension Fq2T.
//
// Template parameter P supplies (see CUZK_FIELD_PARAMS below):
//   N, BITS     limb count, bit length of the modulus
//   mod(i)      modulus limb i, little-endian
//   one(i)      limb i of 2^(64N) mod p (one in Montgomery form)
//   r2(i)       limb i of 2^(128N) mod p
//   INV         -p^-1 mod 2^64
//
// Elements are always kept fully reduced (< p) in Montgomery form unless a
// function name says otherwise.  The multiplication is CIOS with the
// "no-carry" shortcut, which is valid because the top limb of p is below
// (2^64 - 1)/2 - 1 (true for all four primes).  Host x86-64 4- and 6-limb
// fields use the MULX/ADX kernels (field_x86_64.hpp); other limb counts, and
// the device, the portable loop.
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

// Limb i of a constant given as its limbs (the generated <NAME>_LIMBS lists).
// Callers index it with a loop counter of a fully unrolled loop, so it folds to
// an immediate on the host and on the device.
CUZK_HD CUZK_INLINE constexpr uint64_t limb_at(int i, uint64_t a0, uint64_t a1, uint64_t a2,
                                               uint64_t a3, uint64_t a4 = 0, uint64_t a5 = 0) {
    return i == 0 ? a0 : i == 1 ? a1 : i == 2 ? a2 : i == 3 ? a3 : i == 4 ? a4 : a5;
}

// Field parameters struct NAME from the generated macros PFX_LIMBS, PFX_BITS,
// PFX_P_LIMBS, PFX_ONE_LIMBS, PFX_R2_LIMBS and PFX_INV (see gen_curve_constants.py).
#define CUZK_FIELD_PARAMS(NAME, PFX)                                                  \
    struct NAME {                                                                     \
        static constexpr int N = PFX##_LIMBS;                                         \
        static constexpr int BITS = PFX##_BITS;                                       \
        static constexpr uint64_t INV = PFX##_INV;                                    \
        CUZK_HD CUZK_INLINE static constexpr uint64_t mod(int i) {                    \
            return limb_at(i, PFX##_P_LIMBS);                                         \
        }                                                                             \
        CUZK_HD CUZK_INLINE static constexpr uint64_t one(int i) {                    \
            return limb_at(i, PFX##_ONE_LIMBS);                                       \
        }                                                                             \
        CUZK_HD CUZK_INLINE static constexpr uint64_t r2(int i) {                     \
            return limb_at(i, PFX##_R2_LIMBS);                                        \
        }                                                                             \
    }

template <class P>
struct Field {
    static constexpr int N = P::N;        // 64-bit limbs
    static constexpr int BITS = P::BITS;  // bit length of the modulus
    uint64_t v[N];

    static_assert(N >= 1 && N <= 6, "limb_at holds up to 6 limbs");
    static_assert(P::mod(N - 1) < 0x7ffffffffffffffeULL, "no-carry Montgomery needs a spare top bit");

    // ---- constructors -------------------------------------------------
    CUZK_HD CUZK_INLINE static Field zero() {
        Field r;
        CUZK_UNROLL for (int i = 0; i < N; ++i) r.v[i] = 0;
        return r;
    }
    CUZK_HD CUZK_INLINE static Field one() {
        Field r;
        CUZK_UNROLL for (int i = 0; i < N; ++i) r.v[i] = P::one(i);
        return r;
    }
    CUZK_HD CUZK_INLINE static Field modulus_limbs() {
        Field r;
        CUZK_UNROLL for (int i = 0; i < N; ++i) r.v[i] = P::mod(i);
        return r;
    }
    // Raw limbs, no conversion.
    CUZK_HD CUZK_INLINE static Field from_raw(const uint64_t* l) {
        Field r;
        CUZK_UNROLL for (int i = 0; i < N; ++i) r.v[i] = l[i];
        return r;
    }
    CUZK_HD CUZK_INLINE void to_raw(uint64_t* l) const {
        CUZK_UNROLL for (int i = 0; i < N; ++i) l[i] = v[i];
    }
    // Standard-form limbs (< p) -> Montgomery form.
    CUZK_HD CUZK_INLINE static Field from_standard(const uint64_t* l) {
        Field r2;
        CUZK_UNROLL for (int i = 0; i < N; ++i) r2.v[i] = P::r2(i);
        return mul(from_raw(l), r2);
    }
    // Montgomery form -> standard form limbs.
    CUZK_HD CUZK_INLINE void to_standard(uint64_t* l) const { standard().to_raw(l); }
    CUZK_HD CUZK_INLINE Field standard() const {
        Field u = zero();
        u.v[0] = 1;
        return mul(*this, u);
    }

    // ---- predicates ---------------------------------------------------
    CUZK_HD CUZK_INLINE bool is_zero() const {
        uint64_t acc = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) acc |= v[i];
        return acc == 0;
    }
    CUZK_HD CUZK_INLINE bool is_one() const { return eq(*this, one()); }
    CUZK_HD CUZK_INLINE static bool eq(const Field& a, const Field& b) {
        uint64_t acc = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) acc |= a.v[i] ^ b.v[i];
        return acc == 0;
    }
    // True if raw limbs are < p (i.e. a canonical representative).
    CUZK_HD CUZK_INLINE static bool is_canonical(const uint64_t* l) {
        uint64_t t, b = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) b = sub_borrow(l[i], P::mod(i), b, &t);
        return b != 0;
    }

    // ---- internal: conditional subtract p (input < 2p) -------------------
    CUZK_HD CUZK_INLINE static Field reduce_once(const Field& a) {
        Field s;
        uint64_t b = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) b = sub_borrow(a.v[i], P::mod(i), b, &s.v[i]);
        // b == 1 -> a < p, keep a
        const uint64_t mask = (uint64_t)0 - b;
        Field r;
        CUZK_UNROLL for (int i = 0; i < N; ++i) r.v[i] = (a.v[i] & mask) | (s.v[i] & ~mask);
        return r;
    }

    // ---- arithmetic ---------------------------------------------------
    CUZK_HD CUZK_INLINE static Field add(const Field& a, const Field& b) {
        Field t;
        uint64_t c = 0;  // a + b < 2p < 2^(64N): no carry out of the top limb
        CUZK_UNROLL for (int i = 0; i < N; ++i) c = add_carry(a.v[i], b.v[i], c, &t.v[i]);
        return reduce_once(t);
    }
    CUZK_HD CUZK_INLINE static Field dbl(const Field& a) { return add(a, a); }
    CUZK_HD CUZK_INLINE static Field sub(const Field& a, const Field& b) {
        Field t;
        uint64_t br = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) br = sub_borrow(a.v[i], b.v[i], br, &t.v[i]);
        const uint64_t mask = (uint64_t)0 - br;  // add p back if we borrowed
        uint64_t c = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) c = add_carry(t.v[i], P::mod(i) & mask, c, &t.v[i]);
        return t;
    }
    CUZK_HD CUZK_INLINE static Field neg(const Field& a) {
        if (a.is_zero()) return a;
        Field t;
        uint64_t br = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) br = sub_borrow(P::mod(i), a.v[i], br, &t.v[i]);
        return t;
    }

#if defined(CUZK_FIELD_ASM)
    // {p, -p^-1 mod 2^64} for the 4- and 6-limb MULX/ADX kernels (limb_at is 0
    // past the last limb, so both tables are well-formed for either N).
    static constexpr uint64_t kAsmConsts[5] = {P::mod(0), P::mod(1), P::mod(2), P::mod(3),
                                               P::INV};
    static constexpr uint64_t kAsmConsts6[7] = {P::mod(0), P::mod(1), P::mod(2), P::mod(3),
                                                P::mod(4), P::mod(5), P::INV};
#endif

    // Montgomery product a*b*2^-(64N) mod p.
    CUZK_HD CUZK_INLINE static Field mul(const Field& a, const Field& b) {
#if defined(CUZK_FIELD_ASM)
        if constexpr (N == 4) {
            if (__builtin_expect(x86::g_has_adx, 1)) {
                Field r;
                x86::mont_mul_adx(r.v, a.v, b.v, kAsmConsts);
                return r;
            }
        } else if constexpr (N == 6) {
            if (__builtin_expect(x86::g_has_adx, 1)) {
                Field r;
                x86::mont_mul_adx6(r.v, a.v, b.v, kAsmConsts6);
                return r;
            }
        }
#endif
        return mul_portable(a, b);
    }

    // Portable CIOS, "no-carry" variant.
#if defined(CUZK_FIELD_ASM)
    __attribute__((noinline))
#endif
    CUZK_HD static Field mul_portable(const Field& a, const Field& b) {
        uint64_t t[N];
        CUZK_UNROLL for (int j = 0; j < N; ++j) t[j] = 0;
        CUZK_UNROLL for (int i = 0; i < N; ++i) {
            const uint64_t bi = b.v[i];
            uint64_t A, C, lo;
            lo = mac(a.v[0], bi, t[0], 0, &A);
            const uint64_t m = lo * P::INV;
            mac(m, P::mod(0), lo, 0, &C);
            CUZK_UNROLL for (int j = 1; j < N; ++j) {
                lo = mac(a.v[j], bi, t[j], A, &A);
                t[j - 1] = mac(m, P::mod(j), lo, C, &C);
            }
            t[N - 1] = C + A;
        }
        return reduce_once(from_raw(t));
    }
    CUZK_HD CUZK_INLINE static Field sqr(const Field& a) { return mul(a, a); }

    // a^e with e given as `limbs` little-endian limbs (plain integer, not Montgomery).
    CUZK_HD static Field pow(const Field& a, const uint64_t* e, int limbs = N) {
        Field r = one();
        for (int i = limbs - 1; i >= 0; --i) {
            for (int bit = 63; bit >= 0; --bit) {
                r = sqr(r);
                if ((e[i] >> bit) & 1) r = mul(r, a);
            }
        }
        return r;
    }
    // Multiplicative inverse by Fermat (a^(p-2)); inv(0) = 0.
    CUZK_HD static Field inv(const Field& a) {
        uint64_t e[N];
        uint64_t br = sub_borrow(P::mod(0), 2, 0, &e[0]);
        CUZK_UNROLL for (int i = 1; i < N; ++i) br = sub_borrow(P::mod(i), 0, br, &e[i]);
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

// Quadratic extension F[u]/(u^2 + 1) (both curves' Fq2: -1 is a non-residue
// because q = 3 mod 4).  Same interface as Field<> so the curve templates accept it.
template <class F>
struct Fq2T {
    typedef F Base;
    static constexpr int N = 2 * F::N;  // limbs of c0 then c1
    F c0, c1;

    CUZK_HD CUZK_INLINE static Fq2T make(const F& a, const F& b) {
        Fq2T r;
        r.c0 = a;
        r.c1 = b;
        return r;
    }
    CUZK_HD CUZK_INLINE static Fq2T zero() { return make(F::zero(), F::zero()); }
    CUZK_HD CUZK_INLINE static Fq2T one() { return make(F::one(), F::zero()); }
    // 2 F::N raw limbs: c0, c1
    CUZK_HD CUZK_INLINE static Fq2T from_raw(const uint64_t* l) {
        return make(F::from_raw(l), F::from_raw(l + F::N));
    }
    CUZK_HD CUZK_INLINE void to_raw(uint64_t* l) const {
        c0.to_raw(l);
        c1.to_raw(l + F::N);
    }
    CUZK_HD CUZK_INLINE static bool is_canonical(const uint64_t* l) {
        return F::is_canonical(l) && F::is_canonical(l + F::N);
    }
    CUZK_HD CUZK_INLINE bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    CUZK_HD CUZK_INLINE static bool eq(const Fq2T& a, const Fq2T& b) {
        return F::eq(a.c0, b.c0) && F::eq(a.c1, b.c1);
    }
    CUZK_HD CUZK_INLINE static Fq2T add(const Fq2T& a, const Fq2T& b) {
        return make(F::add(a.c0, b.c0), F::add(a.c1, b.c1));
    }
    CUZK_HD CUZK_INLINE static Fq2T sub(const Fq2T& a, const Fq2T& b) {
        return make(F::sub(a.c0, b.c0), F::sub(a.c1, b.c1));
    }
    CUZK_HD CUZK_INLINE static Fq2T dbl(const Fq2T& a) { return make(F::dbl(a.c0), F::dbl(a.c1)); }
    CUZK_HD CUZK_INLINE static Fq2T neg(const Fq2T& a) { return make(F::neg(a.c0), F::neg(a.c1)); }
    // Karatsuba: 3 base-field multiplications.
    CUZK_HD CUZK_INLINE static Fq2T mul(const Fq2T& a, const Fq2T& b) {
        F t0 = F::mul(a.c0, b.c0);
        F t1 = F::mul(a.c1, b.c1);
        F t2 = F::mul(F::add(a.c0, a.c1), F::add(b.c0, b.c1));
        return make(F::sub(t0, t1), F::sub(F::sub(t2, t0), t1));
    }
    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u
    CUZK_HD CUZK_INLINE static Fq2T sqr(const Fq2T& a) {
        F t = F::mul(a.c0, a.c1);
        return make(F::mul(F::add(a.c0, a.c1), F::sub(a.c0, a.c1)), F::dbl(t));
    }
    // 1/(a0 + a1 u) = (a0 - a1 u)/(a0^2 + a1^2); inv(0) = 0.
    CUZK_HD static Fq2T inv(const Fq2T& a) {
        F n = F::add(F::sqr(a.c0), F::sqr(a.c1));
        F ni = F::inv(n);
        return make(F::mul(a.c0, ni), F::neg(F::mul(a.c1, ni)));
    }
    CUZK_HD CUZK_INLINE Fq2T operator+(const Fq2T& o) const { return add(*this, o); }
    CUZK_HD CUZK_INLINE Fq2T operator-(const Fq2T& o) const { return sub(*this, o); }
    CUZK_HD CUZK_INLINE Fq2T operator*(const Fq2T& o) const { return mul(*this, o); }
    CUZK_HD CUZK_INLINE Fq2T operator-() const { return neg(*this); }
    CUZK_HD CUZK_INLINE bool operator==(const Fq2T& o) const { return eq(*this, o); }
    CUZK_HD CUZK_INLINE bool operator!=(const Fq2T& o) const { return !eq(*this, o); }
};

}  // namespace cuzk

#endif  // CUZK_FIELD_CUH
