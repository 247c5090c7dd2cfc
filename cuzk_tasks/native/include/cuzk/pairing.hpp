// The optimal ate pairing of BN254 and BLS12-381 on the host: the Fq6/Fq12 tower
// over the curve bundle's Fq2, a multi-Miller loop with lines evaluated in
// homogeneous projective coordinates (no inversion in the loop), and the final
// exponentiation with the hard part in the cyclotomic subgroup.
//
// It computes exactly what the reference (cuzk_tasks/groth16/reference/pairing.py,
// the test oracle) and snarkjs compute: e(P, Q)^m with snarkjs's hard-part chains
// (BN254: Fuentes-Castaneda, m = 2x(6x^2 + 3x + 1); BLS12-381: the zkcrypto chain,
// m = 3).  The Miller loop differs from the reference's by factors in proper
// subfields (projective scaling, NAF vertical lines), which the final
// exponentiation kills, so the reduced values are equal.
//
// Tower (as in the reference): Fq6 = Fq2[v]/(v^3 - xi), Fq12 = Fq6[w]/(w^2 - v),
// xi = k + u.  Every curve constant comes from the generated <curve>_constants.cuh
// (tools/gen_curve_constants.py): k, the twist type, the loop parameters in NAF
// and the Frobenius coefficients.
//
// Host only (it uses the standard library), unlike field.cuh / curve.cuh.
// Points must be on the curve and in the order-r subgroups (the callers check):
// the loop's additions are not complete for other points.
#ifndef CUZK_PAIRING_HPP
#define CUZK_PAIRING_HPP

#include <stdint.h>

#include <vector>

#include "curve.cuh"

namespace cuzk {

// Per-curve pairing constants from the generated macros with prefix PFX.
#define CUZK_PAIRING_PARAMS(PFX)                                                       \
    static constexpr int XI_K = PFX##_XI_K;                                            \
    static constexpr bool BN = PFX##_PAIRING_BN;                                       \
    static constexpr bool TWIST_M = PFX##_TWIST_M;                                     \
    static constexpr bool ATE_NEG = PFX##_ATE_NEG;                                     \
    static constexpr int ATE_NAF_LEN = PFX##_ATE_NAF_LEN;                              \
    static constexpr int8_t ATE_NAF[ATE_NAF_LEN] = PFX##_ATE_NAF;                      \
    static constexpr bool X_NEG = PFX##_X_NEG;                                         \
    static constexpr int X_NAF_LEN = PFX##_X_NAF_LEN;                                  \
    static constexpr int8_t X_NAF[X_NAF_LEN] = PFX##_X_NAF;                            \
    static constexpr uint64_t FROB[3][6][2 * PFX##_FQ_LIMBS] = PFX##_FQ12_FROB_MONT;

template <class C>
struct PairingParams;
template <>
struct PairingParams<BN254> {
    CUZK_PAIRING_PARAMS(CUZK)
};
template <>
struct PairingParams<BLS12_381> {
    CUZK_PAIRING_PARAMS(CUZK_BLS12_381)
};
#undef CUZK_PAIRING_PARAMS

template <class C>
struct Pairing {
    typedef typename C::Fq Fq;
    typedef typename C::Fq2 Fq2;
    typedef PairingParams<C> P;
    typedef typename C::G1::Affine G1Affine;
    typedef typename C::G2::Affine G2Affine;
    static constexpr int L = Fq::N;
    static_assert(!(P::BN && P::TWIST_M), "the BN Frobenius steps assume a D-type twist");

    struct Fq6 {
        Fq2 c0, c1, c2;  // c0 + c1 v + c2 v^2
    };
    struct Fq12 {
        Fq6 c0, c1;  // c0 + c1 w
    };

    // ------------------------------------------------------------ Fq, Fq2
    // k * a for the small constant k of xi (an add chain: cheaper than a product).
    static constexpr int XI_K_TOP = P::XI_K >= 8 ? 3 : P::XI_K >= 4 ? 2 : P::XI_K >= 2 ? 1 : 0;
    static_assert(P::XI_K >= 1 && P::XI_K < 16, "xi = k + u with a small k");
    static Fq mul_k(const Fq& a) {
        Fq r = a;
        for (int bit = XI_K_TOP - 1; bit >= 0; --bit) {
            r = Fq::dbl(r);
            if ((P::XI_K >> bit) & 1) r = Fq::add(r, a);
        }
        return r;
    }
    // a * xi = (k a0 - a1) + (a0 + k a1) u
    static Fq2 mul_xi(const Fq2& a) {
        if (P::XI_K == 1) return Fq2::make(Fq::sub(a.c0, a.c1), Fq::add(a.c0, a.c1));
        return Fq2::make(Fq::sub(mul_k(a.c0), a.c1), Fq::add(a.c0, mul_k(a.c1)));
    }
    static Fq2 mul_fq(const Fq2& a, const Fq& s) {
        return Fq2::make(Fq::mul(a.c0, s), Fq::mul(a.c1, s));
    }
    static Fq2 conj2(const Fq2& a) { return Fq2::make(a.c0, Fq::neg(a.c1)); }
    // a/2 without a multiplication: halving commutes with the Montgomery map.
    static Fq half(const Fq& a) {
        const uint64_t odd = (uint64_t)0 - (a.v[0] & 1);
        Fq t;
        uint64_t c = 0;  // a + p < 2^(64L): the modulus leaves a spare top bit
        for (int i = 0; i < L; ++i) c = add_carry(a.v[i], Fq::modulus_limbs().v[i] & odd, c, &t.v[i]);
        for (int i = 0; i < L - 1; ++i) t.v[i] = (t.v[i] >> 1) | (t.v[i + 1] << 63);
        t.v[L - 1] >>= 1;
        return t;
    }
    static Fq2 half2(const Fq2& a) { return Fq2::make(half(a.c0), half(a.c1)); }
    static Fq2 frob_coeff(int n, int k) { return Fq2::from_raw(P::FROB[n - 1][k]); }

    // ---------------------------------------------------------------- Fq6
    static Fq6 make6(const Fq2& a, const Fq2& b, const Fq2& c) {
        Fq6 r;
        r.c0 = a;
        r.c1 = b;
        r.c2 = c;
        return r;
    }
    static Fq6 add6(const Fq6& a, const Fq6& b) {
        return make6(a.c0 + b.c0, a.c1 + b.c1, a.c2 + b.c2);
    }
    static Fq6 sub6(const Fq6& a, const Fq6& b) {
        return make6(a.c0 - b.c0, a.c1 - b.c1, a.c2 - b.c2);
    }
    static Fq6 neg6(const Fq6& a) { return make6(-a.c0, -a.c1, -a.c2); }
    // a * v: (A, B, C) -> (xi C, A, B)
    static Fq6 mul_v(const Fq6& a) { return make6(mul_xi(a.c2), a.c0, a.c1); }
    // Karatsuba: 6 Fq2 products.
    static Fq6 mul6(const Fq6& a, const Fq6& b) {
        Fq2 t0 = a.c0 * b.c0, t1 = a.c1 * b.c1, t2 = a.c2 * b.c2;
        Fq2 c0 = t0 + mul_xi((a.c1 + a.c2) * (b.c1 + b.c2) - t1 - t2);
        Fq2 c1 = (a.c0 + a.c1) * (b.c0 + b.c1) - t0 - t1 + mul_xi(t2);
        Fq2 c2 = (a.c0 + a.c2) * (b.c0 + b.c2) - t0 - t2 + t1;
        return make6(c0, c1, c2);
    }
    // a * (b0 + b1 v): 5 Fq2 products.
    static Fq6 mul6_by_01(const Fq6& a, const Fq2& b0, const Fq2& b1) {
        Fq2 t0 = a.c0 * b0, t1 = a.c1 * b1;
        Fq2 c0 = t0 + mul_xi(a.c2 * b1);
        Fq2 c1 = (a.c0 + a.c1) * (b0 + b1) - t0 - t1;
        Fq2 c2 = t1 + a.c2 * b0;
        return make6(c0, c1, c2);
    }
    // a * (b1 v)
    static Fq6 mul6_by_1(const Fq6& a, const Fq2& b1) {
        return make6(mul_xi(a.c2 * b1), a.c0 * b1, a.c1 * b1);
    }
    static Fq6 mul6_by_fq2(const Fq6& a, const Fq2& s) {
        return make6(a.c0 * s, a.c1 * s, a.c2 * s);
    }
    static Fq6 inv6(const Fq6& a) {
        Fq2 t0 = Fq2::sqr(a.c0) - mul_xi(a.c1 * a.c2);
        Fq2 t1 = mul_xi(Fq2::sqr(a.c2)) - a.c0 * a.c1;
        Fq2 t2 = Fq2::sqr(a.c1) - a.c0 * a.c2;
        Fq2 n = a.c0 * t0 + mul_xi(a.c2 * t1 + a.c1 * t2);
        Fq2 ni = Fq2::inv(n);
        return make6(t0 * ni, t1 * ni, t2 * ni);
    }

    // --------------------------------------------------------------- Fq12
    static Fq12 make12(const Fq6& a, const Fq6& b) {
        Fq12 r;
        r.c0 = a;
        r.c1 = b;
        return r;
    }
    static Fq12 one12() {
        Fq6 z = make6(Fq2::zero(), Fq2::zero(), Fq2::zero());
        Fq6 o = make6(Fq2::one(), Fq2::zero(), Fq2::zero());
        return make12(o, z);
    }
    static bool is_one12(const Fq12& a) {
        const Fq2* x = &a.c0.c0;
        if (x[0] != Fq2::one()) return false;
        for (int i = 1; i < 6; ++i)
            if (!x[i].is_zero()) return false;
        return true;
    }
    // Karatsuba over Fq6: 3 Fq6 products.
    static Fq12 mul12(const Fq12& a, const Fq12& b) {
        Fq6 t0 = mul6(a.c0, b.c0), t1 = mul6(a.c1, b.c1);
        Fq6 s = mul6(add6(a.c0, a.c1), add6(b.c0, b.c1));
        return make12(add6(t0, mul_v(t1)), sub6(sub6(s, t0), t1));
    }
    // Complex squaring: (A + Bw)^2 = (A+B)(A+vB) - AB - vAB + 2AB w.
    static Fq12 sqr12(const Fq12& a) {
        Fq6 ab = mul6(a.c0, a.c1);
        Fq6 s = mul6(add6(a.c0, a.c1), add6(a.c0, mul_v(a.c1)));
        return make12(sub6(sub6(s, ab), mul_v(ab)), add6(ab, ab));
    }
    static Fq12 conj12(const Fq12& a) { return make12(a.c0, neg6(a.c1)); }
    // (A + Bw)^-1 = (A - Bw) / (A^2 - v B^2)
    static Fq12 inv12(const Fq12& a) {
        Fq6 d = inv6(sub6(mul6(a.c0, a.c0), mul_v(mul6(a.c1, a.c1))));
        return make12(mul6(a.c0, d), neg6(mul6(a.c1, d)));
    }
    // a^(q^n), n = 1, 2, 3: the Fq2 coefficient of w^j is conjugated for odd n and
    // multiplied by xi^(j (q^n - 1)/6); the slots c0.c0, c0.c1, c0.c2, c1.c0, c1.c1,
    // c1.c2 hold the coefficients of w^0, w^2, w^4, w^1, w^3, w^5.
    static Fq12 frob12(const Fq12& a, int n) {
        static const int kWPower[6] = {0, 2, 4, 1, 3, 5};
        Fq12 r;
        const Fq2* x = &a.c0.c0;
        Fq2* y = &r.c0.c0;
        for (int s = 0; s < 6; ++s) {
            Fq2 c = (n & 1) ? conj2(x[s]) : x[s];
            y[s] = s == 0 ? c : c * frob_coeff(n, kWPower[s]);
        }
        return r;
    }
    // Granger-Scott squaring, valid in the cyclotomic subgroup (f^(q^4 - q^2 + 1) = 1,
    // which the easy part of the final exponentiation lands in): Fq12 as Fq4^3, three
    // Fq4 squarings; about half the cost of sqr12.
    static Fq12 cyclotomic_sqr(const Fq12& a) {
        const Fq2 &z0 = a.c0.c0, &z4 = a.c0.c1, &z3 = a.c0.c2;
        const Fq2 &z2 = a.c1.c0, &z1 = a.c1.c1, &z5 = a.c1.c2;
        Fq2 t0, t1, t2, t3, t4, t5;
        fq4_sqr(z0, z1, &t0, &t1);
        fq4_sqr(z2, z3, &t2, &t3);
        fq4_sqr(z4, z5, &t4, &t5);
        Fq12 r;
        r.c0.c0 = triple_minus_double(t0, z0);        // 3 t0 - 2 z0
        r.c1.c1 = triple_plus_double(t1, z1);         // 3 t1 + 2 z1
        r.c1.c0 = triple_plus_double(mul_xi(t5), z2); // 3 xi t5 + 2 z2
        r.c0.c2 = triple_minus_double(t4, z3);        // 3 t4 - 2 z3
        r.c0.c1 = triple_minus_double(t2, z4);        // 3 t2 - 2 z4
        r.c1.c2 = triple_plus_double(t3, z5);         // 3 t3 + 2 z5
        return r;
    }
    // (a + b y)^2 in Fq4 = Fq2[y]/(y^2 - xi): (a^2 + xi b^2) + 2ab y, with 2ab as
    // (a + b)^2 - a^2 - b^2: three squarings and one product by xi
    static void fq4_sqr(const Fq2& a, const Fq2& b, Fq2* c0, Fq2* c1) {
        Fq2 a2 = Fq2::sqr(a), b2 = Fq2::sqr(b);
        *c0 = a2 + mul_xi(b2);
        *c1 = Fq2::sqr(a + b) - a2 - b2;
    }
    static Fq2 triple_minus_double(const Fq2& t, const Fq2& z) { return Fq2::dbl(t - z) + t; }
    static Fq2 triple_plus_double(const Fq2& t, const Fq2& z) { return Fq2::dbl(t + z) + t; }

    // f * (c0 + c3 w + c4 v w): a D-type line
    static Fq12 mul_by_034(const Fq12& f, const Fq2& c0, const Fq2& c3, const Fq2& c4) {
        Fq6 a = mul6_by_fq2(f.c0, c0);
        Fq6 b = mul6_by_01(f.c1, c3, c4);
        Fq6 e = mul6_by_01(add6(f.c0, f.c1), c0 + c3, c4);
        return make12(add6(a, mul_v(b)), sub6(e, add6(a, b)));
    }
    // f * (c0 + c1 v + c4 v w): an M-type line
    static Fq12 mul_by_014(const Fq12& f, const Fq2& c0, const Fq2& c1, const Fq2& c4) {
        Fq6 a = mul6_by_01(f.c0, c0, c1);
        Fq6 b = mul6_by_1(f.c1, c4);
        Fq6 e = mul6_by_01(add6(f.c0, f.c1), c0, c1 + c4);
        return make12(add6(a, mul_v(b)), sub6(e, add6(a, b)));
    }

    // --------------------------------------------------------- Miller loop
    // T = (X : Y : Z) on the twist, x = X/Z, y = Y/Z (homogeneous).
    struct Proj {
        Fq2 X, Y, Z;
    };
    // One pair: P's coordinates, Q and -Q (for the NAF's -1 digits), the running T.
    struct PairState {
        Fq xp, yp;
        G2Affine q, neg_q;
        Proj t;
    };
    // A line c0 + c1 v + c2 v w (M) or c0 + c1 w + c2 v w (D) before the factors of
    // P's coordinates: for D, c0 is scaled by yp and c1 by xp; for M, c2 by yp and
    // c1 by xp (Costello-Lange-Naehrig, "Faster pairing computations on curves with
    // high-degree twists"; the arkworks formulas).
    static Fq12 mul_line(const Fq12& f, const PairState& s, const Fq2& c0, const Fq2& c1,
                         const Fq2& c2) {
        if (P::TWIST_M) return mul_by_014(f, c0, mul_fq(c1, s.xp), mul_fq(c2, s.yp));
        return mul_by_034(f, mul_fq(c0, s.yp), mul_fq(c1, s.xp), c2);
    }
    // T <- 2T; f <- f * (tangent at T)(P).  The tangent, times 2yZ^2, is
    // 2YZ yp - 3X^2 xp w + (Y^2 - 3b'Z^2) v w (D-type; the M-type line is the same
    // coefficients on other slots); the formulas give its negative.
    static Fq12 double_step(const Fq12& f, PairState& s) {
        Proj& t = s.t;
        Fq2 a = half2(t.X * t.Y);
        Fq2 b = Fq2::sqr(t.Y);
        Fq2 c = Fq2::sqr(t.Z);
        Fq2 e = C::G2::b() * (Fq2::dbl(c) + c);
        Fq2 f3 = Fq2::dbl(e) + e;
        Fq2 g = half2(b + f3);
        Fq2 h = Fq2::sqr(t.Y + t.Z) - (b + c);
        Fq2 i = e - b;
        Fq2 j = Fq2::sqr(t.X);
        Fq2 e2 = Fq2::sqr(e);
        t.X = a * (b - f3);
        t.Y = Fq2::sqr(g) - (Fq2::dbl(e2) + e2);
        t.Z = b * h;
        Fq2 j3 = Fq2::dbl(j) + j;
        if (P::TWIST_M) return mul_line(f, s, i, j3, -h);
        return mul_line(f, s, -h, j3, i);
    }
    // T <- T + R (R affine, R != +-T); f <- f * (line through T and R)(P).
    static Fq12 add_step(const Fq12& f, PairState& s, const G2Affine& r) {
        Proj& t = s.t;
        Fq2 theta = t.Y - r.y * t.Z;
        Fq2 lambda = t.X - r.x * t.Z;
        Fq2 c = Fq2::sqr(theta);
        Fq2 d = Fq2::sqr(lambda);
        Fq2 e = lambda * d;
        Fq2 ff = t.Z * c;
        Fq2 g = t.X * d;
        Fq2 h = e + ff - Fq2::dbl(g);
        t.X = lambda * h;
        t.Y = theta * (g - h) - e * t.Y;
        t.Z = t.Z * e;
        Fq2 j = theta * r.x - lambda * r.y;
        if (P::TWIST_M) return mul_line(f, s, j, -theta, lambda);
        return mul_line(f, s, lambda, -theta, j);
    }
    // pi(Q) = (conj(x) xi^((q-1)/3), conj(y) xi^((q-1)/2)) on the D-type twist.
    static G2Affine g2_frobenius(const G2Affine& q) {
        G2Affine r;
        r.x = conj2(q.x) * frob_coeff(1, 2);
        r.y = conj2(q.y) * frob_coeff(1, 3);
        return r;
    }

    // prod_i f_i(P_i) over the pairs without a point at infinity (they contribute 1);
    // the result still needs final_exp.
    static Fq12 miller_loop(const G1Affine* p, const G2Affine* q, uint64_t n) {
        std::vector<PairState> st;
        st.reserve(n);
        for (uint64_t i = 0; i < n; ++i) {
            if (p[i].is_inf() || q[i].is_inf()) continue;
            PairState s;
            s.xp = p[i].x;
            s.yp = p[i].y;
            s.q = q[i];
            s.neg_q = C::G2::neg(q[i]);
            s.t.X = q[i].x;
            s.t.Y = q[i].y;
            s.t.Z = Fq2::one();
            st.push_back(s);
        }
        Fq12 f = one12();
        if (st.empty()) return f;
        // the leading digit 1 is T = Q itself
        for (int k = 1; k < P::ATE_NAF_LEN; ++k) {
            if (k > 1) f = sqr12(f);
            for (PairState& s : st) f = double_step(f, s);
            const int d = P::ATE_NAF[k];
            if (d != 0)
                for (PairState& s : st) f = add_step(f, s, d > 0 ? s.q : s.neg_q);
        }
        if (P::BN) {
            // the optimal ate's extra lines: T + pi(Q), then (T + pi(Q)) - pi^2(Q)
            for (PairState& s : st) {
                G2Affine q1 = g2_frobenius(s.q);
                G2Affine q2 = C::G2::neg(g2_frobenius(q1));
                f = add_step(f, s, q1);
                f = add_step(f, s, q2);
            }
        }
        if (P::ATE_NEG) f = conj12(f);
        return f;
    }

    // ------------------------------------------------ final exponentiation
    // a^|x| (then conjugated when x < 0) for a in the cyclotomic subgroup, where the
    // inverse is the conjugate.
    static Fq12 exp_by_x(const Fq12& a) {
        const Fq12 a_inv = conj12(a);
        Fq12 r = a;  // the leading NAF digit is 1
        for (int k = 1; k < P::X_NAF_LEN; ++k) {
            r = cyclotomic_sqr(r);
            if (P::X_NAF[k] == 1) r = mul12(r, a);
            else if (P::X_NAF[k] == -1) r = mul12(r, a_inv);
        }
        return P::X_NEG ? conj12(r) : r;
    }
    // f^((q^6 - 1)(q^2 + 1))
    static Fq12 final_exp_easy(const Fq12& f) {
        Fq12 f1 = mul12(conj12(f), inv12(f));
        return mul12(frob12(f1, 2), f1);
    }
    // The reference's _hard_part_bn, step for step.
    static Fq12 hard_part_bn(const Fq12& f) {
        Fq12 a = exp_by_x(f);
        Fq12 a2 = cyclotomic_sqr(a);
        Fq12 a6 = mul12(cyclotomic_sqr(a2), a2);
        Fq12 b = exp_by_x(a6);
        Fq12 c = exp_by_x(cyclotomic_sqr(b));
        Fq12 k = mul12(mul12(c, b), a6);
        Fq12 l = mul12(k, conj12(a2));
        Fq12 n = mul12(mul12(k, b), f);
        Fq12 t = mul12(l, conj12(f));
        return mul12(mul12(frob12(t, 3), frob12(k, 2)), mul12(frob12(l, 1), n));
    }
    // The reference's _hard_part_bls12 (the zkcrypto chain), step for step.
    static Fq12 hard_part_bls12(const Fq12& f) {
        Fq12 t1 = conj12(cyclotomic_sqr(f));
        Fq12 t3 = exp_by_x(f);
        Fq12 t4 = cyclotomic_sqr(t3);
        Fq12 t5 = mul12(t1, t3);
        t1 = exp_by_x(t5);
        Fq12 t0 = exp_by_x(t1);
        Fq12 t6 = mul12(exp_by_x(t0), t4);
        t4 = mul12(mul12(exp_by_x(t6), conj12(t5)), f);
        t1 = frob12(mul12(t1, f), 3);
        t6 = frob12(mul12(t6, conj12(f)), 1);
        t3 = frob12(mul12(t3, t0), 2);
        return mul12(mul12(mul12(t3, t1), t6), t4);
    }
    static Fq12 final_exp(const Fq12& f) {
        Fq12 g = final_exp_easy(f);
        return P::BN ? hard_part_bn(g) : hard_part_bls12(g);
    }

    static Fq12 pairing(const G1Affine* p, const G2Affine* q, uint64_t n) {
        return final_exp(miller_loop(p, q, n));
    }
    static bool pairing_check(const G1Affine* p, const G2Affine* q, uint64_t n) {
        return is_one12(pairing(p, q, n));
    }
};

}  // namespace cuzk

#endif  // CUZK_PAIRING_HPP
