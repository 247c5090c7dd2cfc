// Short Weierstrass curves y^2 = x^3 + b (a = 0) over a template field F.
// Host and device.  F must provide the Field<> interface (zero, one, add, sub,
// dbl, neg, mul, sqr, inv, is_zero, eq).
//
// Representations:
//   Affine   (x, y);          infinity = (0, 0)  (never on the curve since b != 0)
//   Jacobian (X, Y, Z):        x = X/Z^2,  y = Y/Z^3;        infinity: Z = 0
//   XYZZ     (X, Y, ZZ, ZZZ):  x = X/ZZ,   y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity: ZZ = 0
// All coordinates are in Montgomery form.
//
// The curves themselves are bundles (struct BN254, struct BLS12_381: Fq, Fr,
// Fq2, G1, G2) made by CUZK_CURVE_BUNDLE from their generated constants in
// bn254.cuh and bls12_381.cuh, which this header includes at its end, so that
// including curve.cuh gives every curve.
#ifndef CUZK_CURVE_CUH
#define CUZK_CURVE_CUH

#include "compat.cuh"
#include "field.cuh"

namespace cuzk {

template <class F>
struct AffinePoint {
    F x, y;
    CUZK_HD CUZK_INLINE static AffinePoint infinity() {
        AffinePoint p;
        p.x = F::zero();
        p.y = F::zero();
        return p;
    }
    CUZK_HD CUZK_INLINE bool is_inf() const { return x.is_zero() && y.is_zero(); }
};

template <class F>
struct JacobianPoint {
    F X, Y, Z;
    CUZK_HD CUZK_INLINE static JacobianPoint infinity() {
        JacobianPoint p;
        p.X = F::one();
        p.Y = F::one();
        p.Z = F::zero();
        return p;
    }
    CUZK_HD CUZK_INLINE bool is_inf() const { return Z.is_zero(); }
};

template <class F>
struct XYZZPoint {
    F X, Y, ZZ, ZZZ;
    CUZK_HD CUZK_INLINE static XYZZPoint infinity() {
        XYZZPoint p;
        p.X = F::one();
        p.Y = F::one();
        p.ZZ = F::zero();
        p.ZZZ = F::zero();
        return p;
    }
    CUZK_HD CUZK_INLINE bool is_inf() const { return ZZ.is_zero(); }
};

// Params: b() (the curve constant, Montgomery) and typedef Scalar (the field
// of the group order, whose elements the MSM scalars are).
template <class F, class Params>
struct Curve {
    typedef F Field;
    typedef typename Params::Scalar Scalar;
    typedef AffinePoint<F> Affine;
    typedef JacobianPoint<F> Jacobian;
    typedef XYZZPoint<F> XYZZ;

    CUZK_HD CUZK_INLINE static F b() { return Params::b(); }

    // Both coordinates' limbs below the modulus (the zkey's points as stored, read as is).
    CUZK_HD CUZK_INLINE static bool is_canonical(const Affine& p) {
        return F::is_canonical(reinterpret_cast<const uint64_t*>(&p.x)) &&
               F::is_canonical(reinterpret_cast<const uint64_t*>(&p.y));
    }
    CUZK_HD static bool is_on_curve(const Affine& p) {
        if (p.is_inf()) return true;
        F y2 = F::sqr(p.y);
        F x3 = F::mul(F::sqr(p.x), p.x);
        return F::eq(y2, F::add(x3, b()));
    }
    CUZK_HD CUZK_INLINE static Affine neg(const Affine& p) {
        if (p.is_inf()) return p;
        Affine r;
        r.x = p.x;
        r.y = F::neg(p.y);
        return r;
    }

    // ------------------------------------------------------------------
    // Jacobian
    // ------------------------------------------------------------------
    CUZK_HD CUZK_INLINE static Jacobian to_jacobian(const Affine& p) {
        if (p.is_inf()) return Jacobian::infinity();
        Jacobian r;
        r.X = p.x;
        r.Y = p.y;
        r.Z = F::one();
        return r;
    }
    CUZK_HD CUZK_INLINE static Jacobian neg(const Jacobian& p) {
        Jacobian r = p;
        r.Y = F::neg(p.Y);
        return r;
    }
    // dbl-2009-l
    CUZK_HD static Jacobian dbl(const Jacobian& p) {
        if (p.is_inf() || p.Y.is_zero()) return Jacobian::infinity();
        F A = F::sqr(p.X);
        F B = F::sqr(p.Y);
        F C = F::sqr(B);
        F D = F::dbl(F::sub(F::sub(F::sqr(F::add(p.X, B)), A), C));
        F E = F::add(F::dbl(A), A);
        F Fv = F::sqr(E);
        Jacobian r;
        r.X = F::sub(Fv, F::dbl(D));
        F C8 = F::dbl(F::dbl(F::dbl(C)));
        r.Y = F::sub(F::mul(E, F::sub(D, r.X)), C8);
        r.Z = F::dbl(F::mul(p.Y, p.Z));
        return r;
    }
    // add-2007-bl, complete w.r.t. infinity and doubling.
    CUZK_HD static Jacobian add(const Jacobian& p, const Jacobian& q) {
        if (p.is_inf()) return q;
        if (q.is_inf()) return p;
        F Z1Z1 = F::sqr(p.Z);
        F Z2Z2 = F::sqr(q.Z);
        F U1 = F::mul(p.X, Z2Z2);
        F U2 = F::mul(q.X, Z1Z1);
        F S1 = F::mul(F::mul(p.Y, q.Z), Z2Z2);
        F S2 = F::mul(F::mul(q.Y, p.Z), Z1Z1);
        F H = F::sub(U2, U1);
        F rr = F::dbl(F::sub(S2, S1));
        if (H.is_zero()) {
            if (rr.is_zero()) return dbl(p);
            return Jacobian::infinity();
        }
        F I = F::sqr(F::dbl(H));
        F J = F::mul(H, I);
        F V = F::mul(U1, I);
        Jacobian r;
        r.X = F::sub(F::sub(F::sqr(rr), J), F::dbl(V));
        r.Y = F::sub(F::mul(rr, F::sub(V, r.X)), F::dbl(F::mul(S1, J)));
        r.Z = F::mul(F::sub(F::sub(F::sqr(F::add(p.Z, q.Z)), Z1Z1), Z2Z2), H);
        return r;
    }
    // madd-2007-bl: Jacobian + affine.
    CUZK_HD static Jacobian add_mixed(const Jacobian& p, const Affine& q) {
        if (q.is_inf()) return p;
        if (p.is_inf()) return to_jacobian(q);
        F Z1Z1 = F::sqr(p.Z);
        F U2 = F::mul(q.x, Z1Z1);
        F S2 = F::mul(F::mul(q.y, p.Z), Z1Z1);
        F H = F::sub(U2, p.X);
        F rr = F::dbl(F::sub(S2, p.Y));
        if (H.is_zero()) {
            if (rr.is_zero()) return dbl(p);
            return Jacobian::infinity();
        }
        F HH = F::sqr(H);
        F I = F::dbl(F::dbl(HH));
        F J = F::mul(H, I);
        F V = F::mul(p.X, I);
        Jacobian r;
        r.X = F::sub(F::sub(F::sqr(rr), J), F::dbl(V));
        r.Y = F::sub(F::mul(rr, F::sub(V, r.X)), F::dbl(F::mul(p.Y, J)));
        r.Z = F::sub(F::sub(F::sqr(F::add(p.Z, H)), Z1Z1), HH);
        return r;
    }
    CUZK_HD static Affine to_affine(const Jacobian& p) {
        if (p.is_inf()) return Affine::infinity();
        F zi = F::inv(p.Z);
        F zi2 = F::sqr(zi);
        Affine r;
        r.x = F::mul(p.X, zi2);
        r.y = F::mul(p.Y, F::mul(zi2, zi));
        return r;
    }
    CUZK_HD static bool eq(const Jacobian& p, const Jacobian& q) {
        if (p.is_inf() || q.is_inf()) return p.is_inf() && q.is_inf();
        F Z1Z1 = F::sqr(p.Z), Z2Z2 = F::sqr(q.Z);
        if (!F::eq(F::mul(p.X, Z2Z2), F::mul(q.X, Z1Z1))) return false;
        return F::eq(F::mul(p.Y, F::mul(Z2Z2, q.Z)), F::mul(q.Y, F::mul(Z1Z1, p.Z)));
    }

    // ------------------------------------------------------------------
    // XYZZ (cheapest mixed addition: 8M + 2S)
    // ------------------------------------------------------------------
    CUZK_HD CUZK_INLINE static XYZZ to_xyzz(const Affine& p) {
        if (p.is_inf()) return XYZZ::infinity();
        XYZZ r;
        r.X = p.x;
        r.Y = p.y;
        r.ZZ = F::one();
        r.ZZZ = F::one();
        return r;
    }
    // mdbl-2008-s-1: double an affine point.
    CUZK_HD static XYZZ xyzz_dbl_affine(const Affine& p) {
        if (p.is_inf() || p.y.is_zero()) return XYZZ::infinity();
        F U = F::dbl(p.y);
        F V = F::sqr(U);
        F W = F::mul(U, V);
        F S = F::mul(p.x, V);
        F x2 = F::sqr(p.x);
        F M = F::add(F::dbl(x2), x2);
        XYZZ r;
        r.X = F::sub(F::sqr(M), F::dbl(S));
        r.Y = F::sub(F::mul(M, F::sub(S, r.X)), F::mul(W, p.y));
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }
    // dbl-2008-s-1
    CUZK_HD static XYZZ xyzz_dbl(const XYZZ& p) {
        if (p.is_inf() || p.Y.is_zero()) return XYZZ::infinity();
        F U = F::dbl(p.Y);
        F V = F::sqr(U);
        F W = F::mul(U, V);
        F S = F::mul(p.X, V);
        F x2 = F::sqr(p.X);
        F M = F::add(F::dbl(x2), x2);
        XYZZ r;
        r.X = F::sub(F::sqr(M), F::dbl(S));
        r.Y = F::sub(F::mul(M, F::sub(S, r.X)), F::mul(W, p.Y));
        r.ZZ = F::mul(V, p.ZZ);
        r.ZZZ = F::mul(W, p.ZZZ);
        return r;
    }
    // madd-2008-s: XYZZ + affine, complete w.r.t. infinity and doubling.
    CUZK_HD static XYZZ xyzz_add_mixed(const XYZZ& p, const Affine& q) {
        if (q.is_inf()) return p;
        if (p.is_inf()) return to_xyzz(q);
        F U2 = F::mul(q.x, p.ZZ);
        F S2 = F::mul(q.y, p.ZZZ);
        F P = F::sub(U2, p.X);
        F R = F::sub(S2, p.Y);
        if (P.is_zero()) {
            if (R.is_zero()) return xyzz_dbl_affine(q);
            return XYZZ::infinity();
        }
        F PP = F::sqr(P);
        F PPP = F::mul(P, PP);
        F Q = F::mul(p.X, PP);
        XYZZ r;
        r.X = F::sub(F::sub(F::sqr(R), PPP), F::dbl(Q));
        r.Y = F::sub(F::mul(R, F::sub(Q, r.X)), F::mul(p.Y, PPP));
        r.ZZ = F::mul(p.ZZ, PP);
        r.ZZZ = F::mul(p.ZZZ, PPP);
        return r;
    }
    // XYZZ - affine
    CUZK_HD CUZK_INLINE static XYZZ xyzz_sub_mixed(const XYZZ& p, const Affine& q) {
        return xyzz_add_mixed(p, neg(q));
    }
    // add-2008-s: XYZZ + XYZZ, complete w.r.t. infinity and doubling.
    CUZK_HD static XYZZ xyzz_add(const XYZZ& p, const XYZZ& q) {
        if (q.is_inf()) return p;
        if (p.is_inf()) return q;
        F U1 = F::mul(p.X, q.ZZ);
        F U2 = F::mul(q.X, p.ZZ);
        F S1 = F::mul(p.Y, q.ZZZ);
        F S2 = F::mul(q.Y, p.ZZZ);
        F P = F::sub(U2, U1);
        F R = F::sub(S2, S1);
        if (P.is_zero()) {
            if (R.is_zero()) return xyzz_dbl(p);
            return XYZZ::infinity();
        }
        F PP = F::sqr(P);
        F PPP = F::mul(P, PP);
        F Q = F::mul(U1, PP);
        XYZZ r;
        r.X = F::sub(F::sub(F::sqr(R), PPP), F::dbl(Q));
        r.Y = F::sub(F::mul(R, F::sub(Q, r.X)), F::mul(S1, PPP));
        r.ZZ = F::mul(F::mul(p.ZZ, q.ZZ), PP);
        r.ZZZ = F::mul(F::mul(p.ZZZ, q.ZZZ), PPP);
        return r;
    }
    // (X, Y, ZZ, ZZZ) -> Jacobian with Z = ZZZ: X' = X*ZZ^2, Y' = Y*ZZZ^2.
    CUZK_HD static Jacobian xyzz_to_jacobian(const XYZZ& p) {
        if (p.is_inf()) return Jacobian::infinity();
        Jacobian r;
        r.X = F::mul(p.X, F::sqr(p.ZZ));
        r.Y = F::mul(p.Y, F::sqr(p.ZZZ));
        r.Z = p.ZZZ;
        return r;
    }
    CUZK_HD static XYZZ jacobian_to_xyzz(const Jacobian& p) {
        if (p.is_inf()) return XYZZ::infinity();
        XYZZ r;
        r.X = p.X;
        r.Y = p.Y;
        r.ZZ = F::sqr(p.Z);
        r.ZZZ = F::mul(r.ZZ, p.Z);
        return r;
    }
    CUZK_HD static Affine xyzz_to_affine(const XYZZ& p) {
        if (p.is_inf()) return Affine::infinity();
        F zzzi = F::inv(p.ZZZ);
        F zi = F::mul(zzzi, p.ZZ);  // 1/z
        Affine r;
        r.x = F::mul(p.X, F::sqr(zi));
        r.y = F::mul(p.Y, zzzi);
        return r;
    }

    // ------------------------------------------------------------------
    // Scalar multiplication (simple double-and-add; for tests / small use).
    // k: Scalar::N little-endian limbs, plain integer (any value of that width).
    // ------------------------------------------------------------------
    CUZK_HD static Jacobian mul(const Affine& p, const uint64_t* k) {
        Jacobian acc = Jacobian::infinity();
        for (int i = Scalar::N - 1; i >= 0; --i) {
            for (int bit = 63; bit >= 0; --bit) {
                acc = dbl(acc);
                if ((k[i] >> bit) & 1) acc = add_mixed(acc, p);
            }
        }
        return acc;
    }
};

// The curve bundle struct NAME from the generated macros with prefix PFX
// (PFX_FQ_*, PFX_FR_*, PFX_G1_B_LIMBS, PFX_G2_B_C{0,1}_LIMBS, PFX_FR_MAX_LOG2):
// G1 is y^2 = x^3 + b over Fq, G2 the twist over Fq2 = Fq[u]/(u^2 + 1).
#define CUZK_CURVE_BUNDLE(NAME, PFX)                                                  \
    struct NAME {                                                                     \
        CUZK_FIELD_PARAMS(FqParams, PFX##_FQ);                                        \
        CUZK_FIELD_PARAMS(FrParams, PFX##_FR);                                        \
        typedef Field<FqParams> Fq;                                                   \
        typedef Field<FrParams> Fr;                                                   \
        typedef Fq2T<Fq> Fq2;                                                         \
        struct G1Params {                                                             \
            typedef Fr Scalar;                                                        \
            CUZK_HD CUZK_INLINE static Fq b() {                                       \
                const uint64_t l[Fq::N] = {PFX##_G1_B_LIMBS};                         \
                return Fq::from_raw(l);                                               \
            }                                                                         \
        };                                                                            \
        struct G2Params {                                                             \
            typedef Fr Scalar;                                                        \
            CUZK_HD CUZK_INLINE static Fq2 b() {                                      \
                const uint64_t l[Fq2::N] = {PFX##_G2_B_C0_LIMBS, PFX##_G2_B_C1_LIMBS};  \
                return Fq2::from_raw(l);                                              \
            }                                                                         \
        };                                                                            \
        typedef Curve<Fq, G1Params> G1;                                               \
        typedef Curve<Fq2, G2Params> G2;                                              \
        static constexpr uint32_t FR_MAX_LOG2 = PFX##_FR_MAX_LOG2;                    \
    }

}  // namespace cuzk

// Every curve (each of these includes this header first; the guards make the
// order irrelevant).
#include "bn254.cuh"
#include "bls12_381.cuh"

#endif  // CUZK_CURVE_CUH
