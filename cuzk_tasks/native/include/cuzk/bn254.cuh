// BN254 fields: Fq (base), Fr (scalar) and Fq2 = Fq[u]/(u^2 + 1).
// Host and device; constants come from the generated bn254_constants.cuh.
#ifndef CUZK_BN254_CUH
#define CUZK_BN254_CUH

#include "compat.cuh"
#include "bn254_constants.cuh"
#include "field.cuh"

namespace cuzk {

struct FqParams {
    static constexpr uint64_t P0 = CUZK_FQ_P0, P1 = CUZK_FQ_P1, P2 = CUZK_FQ_P2, P3 = CUZK_FQ_P3;
    static constexpr uint64_t ONE0 = CUZK_FQ_ONE0, ONE1 = CUZK_FQ_ONE1, ONE2 = CUZK_FQ_ONE2,
                              ONE3 = CUZK_FQ_ONE3;
    static constexpr uint64_t R2_0 = CUZK_FQ_R2_0, R2_1 = CUZK_FQ_R2_1, R2_2 = CUZK_FQ_R2_2,
                              R2_3 = CUZK_FQ_R2_3;
    static constexpr uint64_t INV = CUZK_FQ_INV;
};

struct FrParams {
    static constexpr uint64_t P0 = CUZK_FR_P0, P1 = CUZK_FR_P1, P2 = CUZK_FR_P2, P3 = CUZK_FR_P3;
    static constexpr uint64_t ONE0 = CUZK_FR_ONE0, ONE1 = CUZK_FR_ONE1, ONE2 = CUZK_FR_ONE2,
                              ONE3 = CUZK_FR_ONE3;
    static constexpr uint64_t R2_0 = CUZK_FR_R2_0, R2_1 = CUZK_FR_R2_1, R2_2 = CUZK_FR_R2_2,
                              R2_3 = CUZK_FR_R2_3;
    static constexpr uint64_t INV = CUZK_FR_INV;
};

typedef Field<FqParams> Fq;
typedef Field<FrParams> Fr;

// Fq2 element c0 + c1*u with u^2 = -1.  Same interface as Field<> so the curve
// templates accept it.
struct Fq2 {
    Fq c0, c1;

    CUZK_HD CUZK_INLINE static Fq2 make(const Fq& a, const Fq& b) {
        Fq2 r;
        r.c0 = a;
        r.c1 = b;
        return r;
    }
    CUZK_HD CUZK_INLINE static Fq2 zero() { return make(Fq::zero(), Fq::zero()); }
    CUZK_HD CUZK_INLINE static Fq2 one() { return make(Fq::one(), Fq::zero()); }
    // 8 raw limbs: c0[4], c1[4]
    CUZK_HD CUZK_INLINE static Fq2 from_raw(const uint64_t* l) {
        return make(Fq::from_raw(l), Fq::from_raw(l + 4));
    }
    CUZK_HD CUZK_INLINE void to_raw(uint64_t* l) const {
        c0.to_raw(l);
        c1.to_raw(l + 4);
    }
    CUZK_HD CUZK_INLINE bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    CUZK_HD CUZK_INLINE static bool eq(const Fq2& a, const Fq2& b) {
        return Fq::eq(a.c0, b.c0) && Fq::eq(a.c1, b.c1);
    }
    CUZK_HD CUZK_INLINE static Fq2 add(const Fq2& a, const Fq2& b) {
        return make(Fq::add(a.c0, b.c0), Fq::add(a.c1, b.c1));
    }
    CUZK_HD CUZK_INLINE static Fq2 sub(const Fq2& a, const Fq2& b) {
        return make(Fq::sub(a.c0, b.c0), Fq::sub(a.c1, b.c1));
    }
    CUZK_HD CUZK_INLINE static Fq2 dbl(const Fq2& a) { return make(Fq::dbl(a.c0), Fq::dbl(a.c1)); }
    CUZK_HD CUZK_INLINE static Fq2 neg(const Fq2& a) { return make(Fq::neg(a.c0), Fq::neg(a.c1)); }
    // Karatsuba: 3 Fq multiplications.
    CUZK_HD CUZK_INLINE static Fq2 mul(const Fq2& a, const Fq2& b) {
        Fq t0 = Fq::mul(a.c0, b.c0);
        Fq t1 = Fq::mul(a.c1, b.c1);
        Fq t2 = Fq::mul(Fq::add(a.c0, a.c1), Fq::add(b.c0, b.c1));
        return make(Fq::sub(t0, t1), Fq::sub(Fq::sub(t2, t0), t1));
    }
    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u
    CUZK_HD CUZK_INLINE static Fq2 sqr(const Fq2& a) {
        Fq t = Fq::mul(a.c0, a.c1);
        return make(Fq::mul(Fq::add(a.c0, a.c1), Fq::sub(a.c0, a.c1)), Fq::dbl(t));
    }
    // 1/(a0 + a1 u) = (a0 - a1 u)/(a0^2 + a1^2); inv(0) = 0.
    CUZK_HD static Fq2 inv(const Fq2& a) {
        Fq n = Fq::add(Fq::sqr(a.c0), Fq::sqr(a.c1));
        Fq ni = Fq::inv(n);
        return make(Fq::mul(a.c0, ni), Fq::neg(Fq::mul(a.c1, ni)));
    }
    CUZK_HD CUZK_INLINE Fq2 operator+(const Fq2& o) const { return add(*this, o); }
    CUZK_HD CUZK_INLINE Fq2 operator-(const Fq2& o) const { return sub(*this, o); }
    CUZK_HD CUZK_INLINE Fq2 operator*(const Fq2& o) const { return mul(*this, o); }
    CUZK_HD CUZK_INLINE Fq2 operator-() const { return neg(*this); }
    CUZK_HD CUZK_INLINE bool operator==(const Fq2& o) const { return eq(*this, o); }
    CUZK_HD CUZK_INLINE bool operator!=(const Fq2& o) const { return !eq(*this, o); }
};

}  // namespace cuzk

#endif  // CUZK_BN254_CUH
