"""The optimal ate pairing of BN254 and BLS12-381 exactly as snarkjs computes it, on Python ints.

:func:`pairing_of` gives a curve's :class:`Pairing` (cached); the module-level functions
(:func:`pairing`, :func:`pairing_check`, :func:`g2_in_subgroup`, ...) are BN254's, as
before.  Conventions (all checked against snarkjs 0.7.6 / ffjavascript 0.3.1 /
wasmcurves):

* G2 lives on a sextic twist E'(Fq2) of E, untwisted into E(Fq12) by
  psi(x, y) = (x w^2, y w^3) on BN254's D-type twist y^2 = x^3 + b/xi, and by
  psi(x, y) = (x / w^2, y / w^3) on BLS12-381's M-type twist y^2 = x^3 + b xi
  (w^2 = v, v^3 = xi, so w^6 = xi).  The line through T with slope lam, evaluated at P
  and divided by yp (an Fq factor; the M-type line is also multiplied by w^3, which lies
  in Fq4; both are killed by the final exponentiation):
    D-type: 1 + (lam (-xp/yp)) w + ((lam xT - yT)/yp) v w
    M-type: (lam xT - yT)/yp + (lam (-xp/yp)) v + v w
* BN254: Miller loop over the bits of 6x + 2 (x = 4965661367192848881), then the two
  Frobenius line additions with pi(Q) and -pi^2(Q).  BLS12-381: Miller loop over the bits
  of |x| (x = -0xd201000000010000), then the conjugate (x < 0).
* Final exponentiation: the easy part (q^6 - 1)(q^2 + 1), then a hard part that raises
  to m (q^4 - q^2 + 1)/r instead of (q^4 - q^2 + 1)/r:
    BN254: Fuentes-Castaneda et al. (libff / ffjavascript), m = 2x(6x^2 + 3x + 1);
    BLS12-381: the chain of the zkcrypto bls12_381 crate (wasmcurves), m = 3.
  So :meth:`Pairing.pairing` returns e(P, Q)^m where e is the "textbook" reduced optimal
  ate pairing; this is what snarkjs puts in ``vk_alphabeta_12``.  ``m`` is prime to r,
  so pairing *checks* (product == 1) are unaffected.  :meth:`Pairing.pairing_textbook`
  gives the plain e(P, Q); ``tests/test_pairing.py`` checks the relation.

Points are affine tuples as in :mod:`.curve` (``None`` is infinity).
"""

import functools
from functools import lru_cache

from ..curves import BN254
from . import tower as _tower
from .curve import g1_of, g2_of


def _naf(e):
    digits = []
    while e:
        if e & 1:
            d = 2 - (e & 3)
            e -= d
        else:
            d = 0
        digits.append(d)
        e >>= 1
    return digits[::-1]


class _PairState:
    """Per-pair Miller-loop state: the running point T and P's normalised coords."""

    __slots__ = ("xq", "iy", "tx0", "tx1", "ty0", "ty1", "q", "Q", "mul_line")

    def __init__(self, p, q, modulus, mul_line):
        Q = modulus
        xp, yp = p
        iy = pow(yp, -1, Q)
        self.Q = Q
        self.iy = iy
        self.xq = -xp * iy % Q  # -xp / yp
        (self.tx0, self.tx1), (self.ty0, self.ty1) = q
        self.q = q
        self.mul_line = mul_line

    def double(self, f):
        Q = self.Q
        x0, x1, y0, y1 = self.tx0, self.tx1, self.ty0, self.ty1
        # lam = 3 x^2 / (2 y)
        n0 = 3 * (x0 * x0 - x1 * x1)
        n1 = 6 * x0 * x1
        d0, d1 = _f2inv(2 * y0, 2 * y1, Q)
        l0 = (n0 * d0 - n1 * d1) % Q
        l1 = (n0 * d1 + n1 * d0) % Q
        return self._step(f, l0, l1, x0, x1, y0, y1, x0, x1)

    def add(self, f, q):
        Q = self.Q
        (qx0, qx1), (qy0, qy1) = q
        x0, x1, y0, y1 = self.tx0, self.tx1, self.ty0, self.ty1
        dx0, dx1 = (qx0 - x0) % Q, (qx1 - x1) % Q
        if dx0 == 0 and dx1 == 0:
            if (qy0 - y0) % Q == 0 and (qy1 - y1) % Q == 0:
                return self.double(f)
            # vertical line (T = -Q): its value lies in Fq6, killed by the
            # final exponentiation; T becomes infinity (only at the very end).
            self.tx0 = None
            return f
        d0, d1 = _f2inv(dx0, dx1, Q)
        n0, n1 = qy0 - y0, qy1 - y1
        l0 = (n0 * d0 - n1 * d1) % Q
        l1 = (n0 * d1 + n1 * d0) % Q
        return self._step(f, l0, l1, x0, x1, y0, y1, qx0, qx1)

    def _step(self, f, l0, l1, x0, x1, y0, y1, ox0, ox1):
        Q = self.Q
        xq, iy = self.xq, self.iy
        # lam (-xp/yp) and (lam xT - yT)/yp
        m0r, m0i = l0 * xq % Q, l1 * xq % Q
        m1r = (l0 * x0 - l1 * x1 - y0) * iy % Q
        m1i = (l0 * x1 + l1 * x0 - y1) * iy % Q
        # new T = (lam^2 - xT - xO, lam (xT - x3) - yT)
        x3r = (l0 * l0 - l1 * l1 - x0 - ox0) % Q
        x3i = (2 * l0 * l1 - x1 - ox1) % Q
        ex0, ex1 = x0 - x3r, x1 - x3i
        self.ty0 = (l0 * ex0 - l1 * ex1 - y0) % Q
        self.ty1 = (l0 * ex1 + l1 * ex0 - y1) % Q
        self.tx0, self.tx1 = x3r, x3i
        return self.mul_line(f, m0r, m0i, m1r, m1i)


def _f2inv(a0, a1, Q):
    d = pow((a0 * a0 + a1 * a1) % Q, -1, Q)
    return a0 * d % Q, -a1 * d % Q


def _f2mul(a0, a1, b0, b1, Q):
    return (a0 * b0 - a1 * b1) % Q, (a0 * b1 + a1 * b0) % Q


class Pairing:
    """The pairing, final exponentiation and G1/G2 subgroup tests of one curve."""

    def __init__(self, curve):
        self.curve = curve
        self.q = q = curve.q
        self.r = r = curve.r
        self.tower = _tower.tower(curve)
        self.g1 = g1_of(curve)
        self.g2 = g2_of(curve)
        self._ate_bits = bin(abs(curve.ate_loop_count))[3:]  # skip the leading 1
        self._ate_negative = curve.ate_loop_count < 0
        self._x_naf = _naf(abs(curve.x))
        self._mul_line = self._mul_by_line_d if curve.twist == "D" else self._mul_by_line_m
        if curve.family == "bn":
            x = curve.x
            self.gt_exponent = 2 * x * (6 * x * x + 3 * x + 1)
            self._hard_part = self._hard_part_bn
        elif curve.family == "bls12":
            self.gt_exponent = 3
            self._hard_part = self._hard_part_bls12
        else:
            raise ValueError(f"{curve.name}: no pairing for curve family {curve.family!r}")
        """snarkjs's pairing equals pairing_textbook ** gt_exponent."""
        self.hard_part_exponent = (q ** 4 - q ** 2 + 1) // r
        # pi acts on G2 as multiplication by q mod r: 6x^2 on BN, x on BLS12 (signed,
        # the short representative)
        lam = q % r
        self.g2_eigenvalue = lam - r if lam > r // 2 else lam

    # -------------------------------------------------------------- twist maps

    def _twist_frobenius_constants(self, power):
        """The Frobenius endomorphism on the twist: pi(x, y) = (conj(x) c_x, conj(y) c_y),
        c_x = xi^((q-1)/3), c_y = xi^((q-1)/2) on a D-type twist (psi multiplies by w^2,
        w^3), their inverses on an M-type twist (psi divides by them); likewise pi^2 with
        q^2 - 1 and no conjugation.  ``power``: 1 or 2."""
        q, xi, T = self.q, self.curve.fq6_non_residue, self.tower
        e = q ** power - 1
        consts = [T.fq2_pow(xi, e // 3), T.fq2_pow(xi, e // 2)]
        if self.curve.twist == "M":
            consts = [_f2inv(c0, c1, q) for c0, c1 in consts]
        return consts

    # computed on first use: big-int powers that importing the oracle should not pay (pi^2
    # only the Miller loop needs; pi also the G2 subgroup test of every parsed proof)
    _frobenius1 = functools.cached_property(lambda self: self._twist_frobenius_constants(1))
    _frobenius2 = functools.cached_property(lambda self: self._twist_frobenius_constants(2))

    def g2_frobenius(self, point):
        """pi(Q) on the twist (acts as multiplication by q on G2)."""
        Q = self.q
        c_x, c_y = self._frobenius1
        (x0, x1), (y0, y1) = point
        return _f2mul(x0, -x1, *c_x, Q), _f2mul(y0, -y1, *c_y, Q)

    def g2_frobenius2(self, point):
        Q = self.q
        c_x, c_y = self._frobenius2
        (x0, x1), (y0, y1) = point
        return _f2mul(x0, x1, *c_x, Q), _f2mul(y0, y1, *c_y, Q)

    # -------------------------------------------------------------------- lines

    def _mul_by_line_d(self, f, m0r, m0i, m1r, m1i):
        """f * (1 + L w) with L = M0 + M1 v (a sparse Fq6 element):
        (F0 + F1 w)(1 + L w) = (F0 + v F1 L) + (F1 + F0 L) w."""
        Q, k, mul01 = self.q, self.tower.k, self.tower.f6mul01_raw
        a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5 = f
        g0r, g0i, g1r, g1i, g2r, g2i = mul01(b0, b1, b2, b3, b4, b5, m0r, m0i, m1r, m1i)
        h0r, h0i, h1r, h1i, h2r, h2i = mul01(a0, a1, a2, a3, a4, a5, m0r, m0i, m1r, m1i)
        # v * G = (xi G2, G0, G1)
        return (
            (a0 + k * g2r - g2i) % Q, (a1 + g2r + k * g2i) % Q,
            (a2 + g0r) % Q, (a3 + g0i) % Q,
            (a4 + g1r) % Q, (a5 + g1i) % Q,
            (b0 + h0r) % Q, (b1 + h0i) % Q,
            (b2 + h1r) % Q, (b3 + h1i) % Q,
            (b4 + h2r) % Q, (b5 + h2i) % Q,
        )

    def _mul_by_line_m(self, f, m0r, m0i, m1r, m1i):
        """f * (L0 + v w) with L0 = M1 + M0 v:
        (F0 + F1 w)(L0 + v w) = (F0 L0 + v^2 F1) + (v F0 + F1 L0) w,
        v (A, B, C) = (xi C, A, B) and v^2 (A, B, C) = (xi B, xi C, A)."""
        Q, k, mul01 = self.q, self.tower.k, self.tower.f6mul01_raw
        a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5 = f
        h0r, h0i, h1r, h1i, h2r, h2i = mul01(a0, a1, a2, a3, a4, a5, m1r, m1i, m0r, m0i)
        g0r, g0i, g1r, g1i, g2r, g2i = mul01(b0, b1, b2, b3, b4, b5, m1r, m1i, m0r, m0i)
        return (
            (h0r + k * b2 - b3) % Q, (h0i + b2 + k * b3) % Q,
            (h1r + k * b4 - b5) % Q, (h1i + b4 + k * b5) % Q,
            (h2r + b0) % Q, (h2i + b1) % Q,
            (g0r + k * a4 - a5) % Q, (g0i + a4 + k * a5) % Q,
            (g1r + a0) % Q, (g1i + a1) % Q,
            (g2r + a2) % Q, (g2i + a3) % Q,
        )

    # -------------------------------------------------------------- Miller loop

    def miller_loop_multi(self, pairs):
        """Product of the Miller loops over pairs (with BN's Frobenius steps, BLS12's
        conjugation).  Pairs with a point at infinity contribute 1.  The result still
        needs :meth:`final_exponentiation`."""
        T = self.tower
        states = [_PairState(p, q, self.q, self._mul_line)
                  for p, q in pairs if p is not None and q is not None]
        f = _tower.FQ12_ONE
        if not states:
            return f
        first = True
        for bit in self._ate_bits:
            if not first:
                f = T.fq12_sqr(f)
            first = False
            for st in states:
                f = st.double(f)
            if bit == "1":
                for st in states:
                    f = st.add(f, st.q)
        if self.curve.family == "bn":
            for st in states:
                q1 = self.g2_frobenius(st.q)
                (x0, x1), (y0, y1) = self.g2_frobenius2(st.q)
                mq2 = ((x0, x1), (-y0 % self.q, -y1 % self.q))
                f = st.add(f, q1)
                if st.tx0 is not None:
                    f = st.add(f, mq2)
        if self._ate_negative:
            f = T.fq12_conj(f)
        return f

    def miller_loop(self, p_g1, q_g2):
        return self.miller_loop_multi([(p_g1, q_g2)])

    # ----------------------------------------------------- final exponentiation

    def _cyclotomic_exp_x(self, a):
        """a^x for a in the cyclotomic subgroup (inverse = conjugate), x the curve parameter."""
        T = self.tower
        a_inv = T.fq12_conj(a)
        r = _tower.FQ12_ONE
        first = True
        for d in self._x_naf:
            if not first:
                r = T.fq12_sqr(r)
            first = False
            if d == 1:
                r = T.fq12_mul(r, a)
            elif d == -1:
                r = T.fq12_mul(r, a_inv)
        return T.fq12_conj(r) if self.curve.x < 0 else r

    def final_exponentiation_easy(self, f):
        """f^((q^6 - 1)(q^2 + 1)): lands in the cyclotomic subgroup."""
        T = self.tower
        f1 = T.fq12_mul(T.fq12_conj(f), T.fq12_inv(f))
        return T.fq12_mul(T.fq12_frobenius(f1, 2), f1)

    def _hard_part_bn(self, f):
        """f^(m (q^4 - q^2 + 1)/r): the exponent
          q^3(12x^3+6x^2+4x-1) + q^2(12x^3+6x^2+6x) + q(12x^3+6x^2+4x) + (12x^3+12x^2+6x+1)
        equals m * (q^4 - q^2 + 1)/r exactly, m = 2x(6x^2 + 3x + 1)."""
        T, exp_x = self.tower, self._cyclotomic_exp_x
        conj, mul, sqr, frob = T.fq12_conj, T.fq12_mul, T.fq12_sqr, T.fq12_frobenius
        a = exp_x(f)                        # f^x
        a2 = sqr(a)                         # f^(2x)
        a6 = mul(sqr(a2), a2)               # f^(6x)
        b = exp_x(a6)                       # f^(6x^2)
        c = exp_x(sqr(b))                   # f^(12x^3)
        k = mul(mul(c, b), a6)              # f^(12x^3 + 6x^2 + 6x)
        l = mul(k, conj(a2))                # f^(12x^3 + 6x^2 + 4x)
        n = mul(mul(k, b), f)               # f^(12x^3 + 12x^2 + 6x + 1)
        t = mul(l, conj(f))                 # f^(12x^3 + 6x^2 + 4x - 1)
        return mul(mul(frob(t, 3), frob(k, 2)), mul(frob(l, 1), n))

    def _hard_part_bls12(self, f):
        """f^(3 (q^4 - q^2 + 1)/r), the step order of wasmcurves' (zkcrypto's) chain:
        the exponent  q^3 (x-1)^2 + q^2 x (x-1)^2 + q (x^4 - 2x^3 + 2x - 1)
        + (x^5 - 2x^4 + 2x^2 - x + 3)  equals 3 (q^4 - q^2 + 1)/r exactly."""
        T, exp_x = self.tower, self._cyclotomic_exp_x
        conj, mul, sqr, frob = T.fq12_conj, T.fq12_mul, T.fq12_sqr, T.fq12_frobenius
        t1 = conj(sqr(f))                   # f^-2
        t3 = exp_x(f)                       # f^x
        t4 = sqr(t3)                        # f^2x
        t5 = mul(t1, t3)                    # f^(x-2)
        t1 = exp_x(t5)                      # f^(x^2-2x)
        t0 = exp_x(t1)                      # f^(x^3-2x^2)
        t6 = mul(exp_x(t0), t4)             # f^(x^4-2x^3+2x)
        t4 = mul(mul(exp_x(t6), conj(t5)), f)   # f^(x^5-2x^4+2x^2-x+3)
        t1 = frob(mul(t1, f), 3)            # f^(q^3 (x-1)^2)
        t6 = frob(mul(t6, conj(f)), 1)      # f^(q (x^4-2x^3+2x-1))
        t3 = frob(mul(t3, t0), 2)           # f^(q^2 (x^3-2x^2+x))
        return mul(mul(mul(t3, t1), t6), t4)

    def final_exponentiation(self, f):
        """snarkjs/ffjavascript's final exponentiation: f^(m (q^12 - 1)/r), m = gt_exponent."""
        return self._hard_part(self.final_exponentiation_easy(f))

    def final_exponentiation_textbook(self, f):
        """f^((q^12 - 1)/r) (slow; for tests and cross-checks)."""
        return self.tower.fq12_pow(self.final_exponentiation_easy(f), self.hard_part_exponent)

    def pairing(self, p_g1, q_g2):
        """e(P, Q) exactly as snarkjs/ffjavascript computes it (flat Fq12 12-tuple)."""
        return self.final_exponentiation(self.miller_loop(p_g1, q_g2))

    def pairing_textbook(self, p_g1, q_g2):
        return self.final_exponentiation_textbook(self.miller_loop(p_g1, q_g2))

    def pairing_check(self, pairs):
        """True iff prod e(P_i, Q_i) == 1 (one multi-Miller loop, one final exponentiation)."""
        return self.tower.fq12_is_one(self.final_exponentiation(self.miller_loop_multi(list(pairs))))

    def gt_to_json(self, a):
        """Fq12 -> [[[c0, c1] x3] x2] of decimal strings (ffjavascript's Gt.toObject)."""
        return [[[str(c0), str(c1)] for c0, c1 in half] for half in _tower.fq12_to_nested(a)]

    def gt_from_json(self, obj):
        return self.tower.fq12_from_nested(obj)

    # ------------------------------------------------------- subgroup tests

    def g1_in_subgroup(self, point):
        """Membership in the order-r subgroup of E(Fq), for a point already on the curve:
        always on BN254 (cofactor 1), r * P == O (Jacobian) otherwise."""
        if point is None or self.g1_cofactor_is_one:
            return True
        return g1_mul_jacobian(point, self.r, self.q) is None

    @property
    def g1_cofactor_is_one(self):
        # E(Fq) has q + 1 - t points with trace t = q + 1 - r on BN curves (#E = r)
        return self.curve.family == "bn"

    def g2_in_subgroup(self, point):
        """Membership in the order-r subgroup G2 of the twist, for a point already on the twist.

        Uses pi(Q) == [lambda] Q with lambda = q mod r (6x^2 on BN, Galbraith-Scott; x on
        BLS12, Scott 2021/1130 section 4), shorter than the textbook [r] Q == O test; falls
        back to the textbook test on degenerate additions.
        """
        if point is None:
            return True
        lam = self.g2_eigenvalue
        res = g2_mul_jacobian(point, abs(lam), self.q)
        if res is None:
            return self.g2.in_subgroup(point)
        (X0, X1), (Y0, Y1), (Z0, Z1) = res
        if Z0 == 0 and Z1 == 0:
            return False  # [lambda]Q = O but pi(Q) != O
        Q = self.q
        if lam < 0:
            Y0, Y1 = -Y0 % Q, -Y1 % Q
        (fx0, fx1), (fy0, fy1) = self.g2_frobenius(point)
        ZZ0, ZZ1 = (Z0 * Z0 - Z1 * Z1) % Q, 2 * Z0 * Z1 % Q
        ZZZ0, ZZZ1 = (ZZ0 * Z0 - ZZ1 * Z1) % Q, (ZZ0 * Z1 + ZZ1 * Z0) % Q
        return (
            (fx0 * ZZ0 - fx1 * ZZ1 - X0) % Q == 0 and (fx0 * ZZ1 + fx1 * ZZ0 - X1) % Q == 0
            and (fy0 * ZZZ0 - fy1 * ZZZ1 - Y0) % Q == 0 and (fy0 * ZZZ1 + fy1 * ZZZ0 - Y1) % Q == 0
        )


@lru_cache(maxsize=None)
def pairing_of(curve):
    """The :class:`Pairing` of ``curve`` (a :class:`~cuzk_tasks.groth16.curves.Curve`)."""
    return Pairing(curve)


# --------------------------------------------------- Jacobian scalar multiples

def g1_mul_jacobian(p, k, Q):
    """k * p on y^2 = x^3 + b over F_Q for affine p and 0 <= k < the order of p (a
    subgroup test may pass the order itself), returned affine; double-and-add in Jacobian
    coordinates, one inversion."""
    if p is None or k == 0:
        return None
    if k == 1:
        return p
    px, py = p
    X, Y, Z = px, py, 1
    for bit in bin(k)[3:]:
        # dbl-2009-l
        A = X * X % Q
        B = Y * Y % Q
        C = B * B % Q
        D = 2 * ((X + B) ** 2 - A - C) % Q
        E = 3 * A
        F = E * E % Q
        Z = 2 * Y * Z % Q
        X = (F - 2 * D) % Q
        Y = (E * (D - X) - 8 * C) % Q
        if bit == "1":
            if Z == 0:
                X, Y, Z = px, py, 1
                continue
            ZZ = Z * Z % Q
            U2 = px * ZZ % Q
            S2 = py * Z * ZZ % Q
            H = (U2 - X) % Q
            rr = (S2 - Y) % Q
            if H == 0:
                if rr == 0:  # T == P: a doubling (k >= the order of p)
                    X, Y, Z = _g1_jacobian_double(px, py, Q)
                    continue
                X, Y, Z = 1, 1, 0
                continue
            HH = H * H % Q
            HHH = H * HH % Q
            V = X * HH % Q
            X = (rr * rr - HHH - 2 * V) % Q
            Y = (rr * (V - X) - Y * HHH) % Q
            Z = Z * H % Q
    if Z == 0:
        return None
    zi = pow(Z, -1, Q)
    zi2 = zi * zi % Q
    return (X * zi2 % Q, Y * zi2 * zi % Q)


def _g1_jacobian_double(x, y, Q):
    if y == 0:
        return 1, 1, 0
    lam = 3 * x * x * pow(2 * y, -1, Q) % Q
    x3 = (lam * lam - 2 * x) % Q
    return x3, (lam * (x - x3) - y) % Q, 1


def g2_mul_jacobian(point, k, Q):
    """k * point on the twist over F_Q^2 = F_Q[u]/(u^2 + 1) (affine in, Jacobian (X, Y, Z)
    of Fq2 pairs out); None if a degenerate addition (T = +-point) shows up, so the caller
    can fall back."""
    (px0, px1), (py0, py1) = point
    X0, X1, Y0, Y1, Z0, Z1 = px0, px1, py0, py1, 1, 0
    for bit in bin(k)[3:]:
        # doubling (a = 0)
        A0, A1 = (X0 * X0 - X1 * X1) % Q, 2 * X0 * X1 % Q
        B0, B1 = (Y0 * Y0 - Y1 * Y1) % Q, 2 * Y0 * Y1 % Q
        C0, C1 = (B0 * B0 - B1 * B1) % Q, 2 * B0 * B1 % Q
        s0, s1 = X0 + B0, X1 + B1
        D0, D1 = 2 * (s0 * s0 - s1 * s1 - A0 - C0) % Q, 2 * (2 * s0 * s1 - A1 - C1) % Q
        E0, E1 = 3 * A0, 3 * A1
        F0, F1 = (E0 * E0 - E1 * E1) % Q, 2 * E0 * E1 % Q
        nX0, nX1 = (F0 - 2 * D0) % Q, (F1 - 2 * D1) % Q
        d0, d1 = D0 - nX0, D1 - nX1
        nY0, nY1 = (E0 * d0 - E1 * d1 - 8 * C0) % Q, (E0 * d1 + E1 * d0 - 8 * C1) % Q
        nZ0, nZ1 = 2 * (Y0 * Z0 - Y1 * Z1) % Q, 2 * (Y0 * Z1 + Y1 * Z0) % Q
        X0, X1, Y0, Y1, Z0, Z1 = nX0, nX1, nY0, nY1, nZ0, nZ1
        if bit == "1":
            # mixed addition with the affine base point
            ZZ0, ZZ1 = (Z0 * Z0 - Z1 * Z1) % Q, 2 * Z0 * Z1 % Q
            U0, U1 = (px0 * ZZ0 - px1 * ZZ1) % Q, (px0 * ZZ1 + px1 * ZZ0) % Q
            t0, t1 = (Z0 * ZZ0 - Z1 * ZZ1) % Q, (Z0 * ZZ1 + Z1 * ZZ0) % Q
            S0, S1 = (py0 * t0 - py1 * t1) % Q, (py0 * t1 + py1 * t0) % Q
            H0, H1 = (U0 - X0) % Q, (U1 - X1) % Q
            if H0 == 0 and H1 == 0:
                return None
            HH0, HH1 = (H0 * H0 - H1 * H1) % Q, 2 * H0 * H1 % Q
            I0, I1 = 4 * HH0, 4 * HH1
            J0, J1 = (H0 * I0 - H1 * I1) % Q, (H0 * I1 + H1 * I0) % Q
            r0, r1 = 2 * (S0 - Y0), 2 * (S1 - Y1)
            V0, V1 = (X0 * I0 - X1 * I1) % Q, (X0 * I1 + X1 * I0) % Q
            nX0 = (r0 * r0 - r1 * r1 - J0 - 2 * V0) % Q
            nX1 = (2 * r0 * r1 - J1 - 2 * V1) % Q
            d0, d1 = V0 - nX0, V1 - nX1
            nY0 = (r0 * d0 - r1 * d1 - 2 * (Y0 * J0 - Y1 * J1)) % Q
            nY1 = (r0 * d1 + r1 * d0 - 2 * (Y0 * J1 + Y1 * J0)) % Q
            s0, s1 = Z0 + H0, Z1 + H1
            nZ0 = (s0 * s0 - s1 * s1 - ZZ0 - HH0) % Q
            nZ1 = (2 * s0 * s1 - ZZ1 - HH1) % Q
            X0, X1, Y0, Y1, Z0, Z1 = nX0, nX1, nY0, nY1, nZ0, nZ1
    return (X0, X1), (Y0, Y1), (Z0, Z1)


# ------------------------------------------------- BN254's, as module names

_BN = pairing_of(BN254)
Q = BN254.q
BN_X = BN254.x
"""The BN parameter x (a.k.a. z / u) of BN254."""
ATE_LOOP_COUNT = BN254.ate_loop_count
SNARKJS_GT_EXPONENT = _BN.gt_exponent
"""snarkjs's pairing equals textbook_pairing ** SNARKJS_GT_EXPONENT (BN254)."""
HARD_PART_EXPONENT = _BN.hard_part_exponent

g2_frobenius = _BN.g2_frobenius
miller_loop_multi = _BN.miller_loop_multi
miller_loop = _BN.miller_loop
final_exponentiation_easy = _BN.final_exponentiation_easy
final_exponentiation = _BN.final_exponentiation
final_exponentiation_textbook = _BN.final_exponentiation_textbook
pairing = _BN.pairing
pairing_textbook = _BN.pairing_textbook
pairing_check = _BN.pairing_check
gt_to_json = _BN.gt_to_json
gt_from_json = _BN.gt_from_json
g2_in_subgroup = _BN.g2_in_subgroup
