"""The optimal ate pairing on BN254 (snarkjs's "bn128"), on plain Python ints.

Conventions (all checked against snarkjs 0.7.6 / ffjavascript 0.3.1 / wasmcurves):

* G2 lives on the D-type sextic twist E'(Fq2): y^2 = x^3 + 3/xi, xi = 9 + u,
  untwisted into E(Fq12) by psi(x, y) = (x w^2, y w^3)   (w^2 = v, v^3 = xi).
* Miller loop over the bits of 6x + 2 (x = 4965661367192848881), followed by
  the two Frobenius line additions with pi(Q) and -pi^2(Q).
* Final exponentiation: the easy part (q^6 - 1)(q^2 + 1), then the hard part
  in the Fuentes-Castaneda et al. form used by libff / ffjavascript, which
  raises to  m * (q^4 - q^2 + 1)/r  with  m = 2x(6x^2 + 3x + 1)  instead of
  (q^4 - q^2 + 1)/r.  So :func:`pairing` returns e(P, Q)^m where e is the
  "textbook" reduced optimal ate pairing; this is what snarkjs puts in
  ``vk_alphabeta_12``.  ``m`` is prime to r, so pairing *checks* (product == 1)
  are unaffected.  :func:`pairing_textbook` gives the plain e(P, Q).

Points are affine tuples as in :mod:`.curve` (``None`` is infinity).
"""

from .field import FQ, FR, XI
from . import tower as T

Q = FQ

BN_X = 4965661367192848881
"""The BN parameter x (a.k.a. z / u) of BN254."""

ATE_LOOP_COUNT = 6 * BN_X + 2
_ATE_BITS = bin(ATE_LOOP_COUNT)[3:]  # skip the leading 1

SNARKJS_GT_EXPONENT = 2 * BN_X * (6 * BN_X * BN_X + 3 * BN_X + 1)
"""snarkjs's pairing equals textbook_pairing ** SNARKJS_GT_EXPONENT."""

HARD_PART_EXPONENT = (Q ** 4 - Q ** 2 + 1) // FR

# Frobenius constants for G2 on the twist: pi(x, y) = (conj(x) g12, conj(y) g13),
# pi^2(x, y) = (x g22, y g23) with g_nk = xi^(k (q^n - 1)/6).
_G12 = T.fq2_pow(XI, (Q - 1) // 3)
_G13 = T.fq2_pow(XI, (Q - 1) // 2)
_G22 = T.fq2_pow(XI, (Q * Q - 1) // 3)
_G23 = T.fq2_pow(XI, (Q * Q - 1) // 2)


def _f2mul(a0, a1, b0, b1):
    return (a0 * b0 - a1 * b1) % Q, (a0 * b1 + a1 * b0) % Q


def _f2inv(a0, a1):
    d = pow((a0 * a0 + a1 * a1) % Q, -1, Q)
    return a0 * d % Q, -a1 * d % Q


def g2_frobenius(point):
    """pi(Q) on the twist (acts as multiplication by q on G2)."""
    (x0, x1), (y0, y1) = point
    return _f2mul(x0, -x1, *_G12), _f2mul(y0, -y1, *_G13)


def _g2_frobenius2(point):
    (x0, x1), (y0, y1) = point
    return _f2mul(x0, x1, *_G22), _f2mul(y0, y1, *_G23)


# ------------------------------------------------------------------ lines ---

def _mul_by_line(f, m0r, m0i, m1r, m1i):
    """f * (1 + L w) with L = M0 + M1 v (a sparse Fq6 element).

    (F0 + F1 w)(1 + L w) = (F0 + v F1 L) + (F1 + F0 L) w.
    """
    a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5 = f
    # X*L for X in Fq6, L = (M0, M1, 0):
    #   c0 = X0 M0 + xi X2 M1, c1 = X0 M1 + X1 M0, c2 = X1 M1 + X2 M0
    # --- F1 * L
    t0r = b0 * m0r - b1 * m0i
    t0i = b0 * m0i + b1 * m0r
    t1r = b2 * m1r - b3 * m1i
    t1i = b2 * m1i + b3 * m1r
    ur = b4 * m1r - b5 * m1i  # X2 M1
    ui = b4 * m1i + b5 * m1r
    g0r = t0r + 9 * ur - ui
    g0i = t0i + ur + 9 * ui
    sr = b0 + b2
    si = b1 + b3
    pr = m0r + m1r
    pi = m0i + m1i
    g1r = sr * pr - si * pi - t0r - t1r
    g1i = sr * pi + si * pr - t0i - t1i
    g2r = t1r + b4 * m0r - b5 * m0i
    g2i = t1i + b4 * m0i + b5 * m0r
    # --- F0 * L
    t0r = a0 * m0r - a1 * m0i
    t0i = a0 * m0i + a1 * m0r
    t1r = a2 * m1r - a3 * m1i
    t1i = a2 * m1i + a3 * m1r
    ur = a4 * m1r - a5 * m1i
    ui = a4 * m1i + a5 * m1r
    h0r = t0r + 9 * ur - ui
    h0i = t0i + ur + 9 * ui
    sr = a0 + a2
    si = a1 + a3
    h1r = sr * pr - si * pi - t0r - t1r
    h1i = sr * pi + si * pr - t0i - t1i
    h2r = t1r + a4 * m0r - a5 * m0i
    h2i = t1i + a4 * m0i + a5 * m0r
    # v * G = (xi G2, G0, G1)
    return (
        (a0 + 9 * g2r - g2i) % Q, (a1 + g2r + 9 * g2i) % Q,
        (a2 + g0r) % Q, (a3 + g0i) % Q,
        (a4 + g1r) % Q, (a5 + g1i) % Q,
        (b0 + h0r) % Q, (b1 + h0i) % Q,
        (b2 + h1r) % Q, (b3 + h1i) % Q,
        (b4 + h2r) % Q, (b5 + h2i) % Q,
    )


class _PairState:
    """Per-pair Miller-loop state: the running point T and P's normalised coords."""

    __slots__ = ("xq", "iy", "tx0", "tx1", "ty0", "ty1", "q")

    def __init__(self, p, q):
        xp, yp = p
        iy = pow(yp, -1, Q)
        self.iy = iy
        self.xq = -xp * iy % Q  # -xp / yp
        (self.tx0, self.tx1), (self.ty0, self.ty1) = q
        self.q = q

    # The line through T with slope lam, evaluated at P and divided by yp
    # (an Fq factor, killed by the final exponentiation):
    #   l = 1 + (lam * (-xp/yp)) w + ((lam xT - yT)/yp) v w

    def double(self, f):
        x0, x1, y0, y1 = self.tx0, self.tx1, self.ty0, self.ty1
        # lam = 3 x^2 / (2 y)
        n0 = 3 * (x0 * x0 - x1 * x1)
        n1 = 6 * x0 * x1
        d0, d1 = _f2inv(2 * y0, 2 * y1)
        l0 = (n0 * d0 - n1 * d1) % Q
        l1 = (n0 * d1 + n1 * d0) % Q
        return self._step(f, l0, l1, x0, x1, y0, y1, x0, x1)

    def add(self, f, q):
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
        d0, d1 = _f2inv(dx0, dx1)
        n0, n1 = qy0 - y0, qy1 - y1
        l0 = (n0 * d0 - n1 * d1) % Q
        l1 = (n0 * d1 + n1 * d0) % Q
        return self._step(f, l0, l1, x0, x1, y0, y1, qx0, qx1)

    def _step(self, f, l0, l1, x0, x1, y0, y1, ox0, ox1):
        xq, iy = self.xq, self.iy
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
        return _mul_by_line(f, m0r, m0i, m1r, m1i)


def miller_loop_multi(pairs):
    """Product of the Miller loops f_{6x+2,Q}(P) (with the Frobenius steps) over pairs.

    Pairs with a point at infinity contribute 1. The result still needs
    :func:`final_exponentiation`.
    """
    states = [_PairState(p, q) for p, q in pairs if p is not None and q is not None]
    f = T.FQ12_ONE
    if not states:
        return f
    first = True
    for bit in _ATE_BITS:
        if not first:
            f = T.fq12_sqr(f)
        first = False
        for st in states:
            f = st.double(f)
        if bit == "1":
            for st in states:
                f = st.add(f, st.q)
    for st in states:
        q1 = g2_frobenius(st.q)
        (x0, x1), (y0, y1) = _g2_frobenius2(st.q)
        mq2 = ((x0, x1), (-y0 % Q, -y1 % Q))
        f = st.add(f, q1)
        if st.tx0 is not None:
            f = st.add(f, mq2)
    return f


def miller_loop(p_g1, q_g2):
    return miller_loop_multi([(p_g1, q_g2)])


# ------------------------------------------------------ final exponentiation

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


_X_NAF = _naf(BN_X)


def _cyclotomic_exp_x(a):
    """a^x for a in the cyclotomic subgroup (inverse = conjugate)."""
    a_inv = T.fq12_conj(a)
    r = T.FQ12_ONE
    first = True
    for d in _X_NAF:
        if not first:
            r = T.fq12_sqr(r)
        first = False
        if d == 1:
            r = T.fq12_mul(r, a)
        elif d == -1:
            r = T.fq12_mul(r, a_inv)
    return r


def final_exponentiation_easy(f):
    """f^((q^6 - 1)(q^2 + 1)): lands in the cyclotomic subgroup."""
    f1 = T.fq12_mul(T.fq12_conj(f), T.fq12_inv(f))
    return T.fq12_mul(T.fq12_frobenius(f1, 2), f1)


def final_exponentiation(f):
    """snarkjs/ffjavascript's final exponentiation: f^(m (q^12 - 1)/r), m = SNARKJS_GT_EXPONENT.

    The hard part raises to
      q^3(12x^3+6x^2+4x-1) + q^2(12x^3+6x^2+6x) + q(12x^3+6x^2+4x) + (12x^3+12x^2+6x+1)
    which equals m * (q^4 - q^2 + 1)/r exactly.
    """
    f = final_exponentiation_easy(f)
    conj, mul, sqr, frob = T.fq12_conj, T.fq12_mul, T.fq12_sqr, T.fq12_frobenius
    a = _cyclotomic_exp_x(f)            # f^x
    a2 = sqr(a)                         # f^(2x)
    a6 = mul(sqr(a2), a2)               # f^(6x)
    b = _cyclotomic_exp_x(a6)           # f^(6x^2)
    c = _cyclotomic_exp_x(sqr(b))       # f^(12x^3)
    k = mul(mul(c, b), a6)              # f^(12x^3 + 6x^2 + 6x)
    l = mul(k, conj(a2))                # f^(12x^3 + 6x^2 + 4x)
    n = mul(mul(k, b), f)               # f^(12x^3 + 12x^2 + 6x + 1)
    t = mul(l, conj(f))                 # f^(12x^3 + 6x^2 + 4x - 1)
    return mul(mul(frob(t, 3), frob(k, 2)), mul(frob(l, 1), n))


def final_exponentiation_textbook(f):
    """f^((q^12 - 1)/r) (slow; for tests and cross-checks)."""
    return T.fq12_pow(final_exponentiation_easy(f), HARD_PART_EXPONENT)


def pairing(p_g1, q_g2):
    """e(P, Q) exactly as snarkjs/ffjavascript computes it (flat Fq12 12-tuple)."""
    return final_exponentiation(miller_loop(p_g1, q_g2))


def pairing_textbook(p_g1, q_g2):
    return final_exponentiation_textbook(miller_loop(p_g1, q_g2))


def pairing_check(pairs):
    """True iff prod e(P_i, Q_i) == 1 (one multi-Miller loop, one final exponentiation)."""
    return T.fq12_is_one(final_exponentiation(miller_loop_multi(list(pairs))))


def gt_to_json(a):
    """Fq12 -> [[[c0, c1] x3] x2] of decimal strings (ffjavascript's Gt.toObject)."""
    return [[[str(c0), str(c1)] for c0, c1 in half] for half in T.fq12_to_nested(a)]


def gt_from_json(obj):
    return T.fq12_from_nested(obj)


# --------------------------------------------------------- G2 subgroup test ---

_SIX_X_SQ = 6 * BN_X * BN_X  # = q mod r: pi acts on G2 as multiplication by this


def _g2_jacobian_mul(point, k):
    """k * point (affine in, Jacobian (X, Y, Z) of Fq2 pairs out); None if a
    degenerate addition (T = +-point) shows up, so the caller can fall back."""
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


def g2_in_subgroup(point):
    """Membership in the order-r subgroup G2 of the twist, for a point already on the twist.

    Uses the BN criterion pi(Q) == [6x^2] Q (pi = the twisted Frobenius;
    6x^2 = q mod r), half the length of the textbook [r] Q == O test; falls
    back to the textbook test on degenerate additions.
    """
    if point is None:
        return True
    res = _g2_jacobian_mul(point, _SIX_X_SQ)
    if res is None:
        from .curve import is_in_g2_subgroup
        return is_in_g2_subgroup(point)
    (X0, X1), (Y0, Y1), (Z0, Z1) = res
    if Z0 == 0 and Z1 == 0:
        return False  # [6x^2]Q = O but pi(Q) != O
    (fx0, fx1), (fy0, fy1) = g2_frobenius(point)
    ZZ0, ZZ1 = (Z0 * Z0 - Z1 * Z1) % Q, 2 * Z0 * Z1 % Q
    ZZZ0, ZZZ1 = (ZZ0 * Z0 - ZZ1 * Z1) % Q, (ZZ0 * Z1 + ZZ1 * Z0) % Q
    return (
        (fx0 * ZZ0 - fx1 * ZZ1 - X0) % Q == 0 and (fx0 * ZZ1 + fx1 * ZZ0 - X1) % Q == 0
        and (fy0 * ZZZ0 - fy1 * ZZZ1 - Y0) % Q == 0 and (fy0 * ZZZ1 + fy1 * ZZZ0 - Y1) % Q == 0
    )
