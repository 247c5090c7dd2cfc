"""The Fq12 extension tower of a pairing-friendly curve, on plain Python ints.

    Fq2  = Fq[u]  / (u^2 + 1)
    Fq6  = Fq2[v] / (v^3 - xi),   xi = k + u   (k = 9 on BN254, k = 1 on BLS12-381)
    Fq12 = Fq6[w] / (w^2 - v)

:class:`Tower` holds one curve's tower (:func:`tower` gives it, cached); both curves
cuzk-tasks knows use u^2 = -1 and a non-residue of the form k + u, which is what the
formulas below assume (the constructor refuses anything else).  The module-level
functions (``fq12_mul``, ``FROBENIUS_COEFFS``, ...) are BN254's tower, as before.

Representation (chosen for speed: flat tuples of ints, no objects):

* Fq2  : ``(c0, c1)``                      meaning c0 + c1*u
* Fq6  : 6-tuple ``(a0, a1, b0, b1, c0, c1)`` meaning A + B*v + C*v^2, A = (a0, a1), ...
* Fq12 : 12-tuple, first the Fq6 coefficient of 1, then the one of w.

The flat Fq12 order is exactly the memory order of ffjavascript's ``Gt``
elements, so :func:`fq12_to_nested` gives the ``[[[c0, c1] x3] x2]`` nesting of
``F12.toObject`` (used for ``vk_alphabeta_12``).

Functions return fully reduced values (every int in [0, q)). Internally
products are accumulated unreduced and reduced once at the end.
"""

import functools
from functools import lru_cache

from ..curves import BN254

FQ6_ZERO = (0,) * 6
FQ6_ONE = (1, 0, 0, 0, 0, 0)
FQ12_ZERO = (0,) * 12
FQ12_ONE = (1,) + (0,) * 11

# An Fq12 element is sum over k = 0..5 of C_k * w^k (C_k in Fq2), where the flat
# layout stores C_0, C_2, C_4 (coefficients of 1, v, v^2) then C_1, C_3, C_5.
# (w^k)^(q^n) = w^k * xi^(k (q^n - 1) / 6), and Fq2 elements are conjugated for
# odd n.
_W_POWER_OF_SLOT = (0, 2, 4, 1, 3, 5)


class Tower:
    """Fq2/Fq6/Fq12 arithmetic over Fq with v^3 = xi = k + u."""

    def __init__(self, q, xi, beta=-1):
        if beta % q != q - 1 or xi[1] % q != 1:
            raise ValueError(f"Tower supports u^2 = -1 and xi = k + u, got beta={beta}, xi={xi}")
        self.q = q
        self.k = xi[0] % q
        self.xi = (self.k, 1)

    @functools.cached_property
    def frobenius_coeffs(self):
        """frobenius_coeffs[n][k] = xi^(k (q^n - 1)/6), n = 1, 2, 3.  Computed on first use:
        the powers take tens of ms, which every importer of the oracle (the CLI's prove
        path, for the vkey's JSON) would otherwise pay at start-up."""
        q = self.q
        return {n: tuple(self.fq2_pow(self.xi, k * (q ** n - 1) // 6) for k in range(6))
                for n in (1, 2, 3)}

    # ----------------------------------------------------------------- Fq2 ---

    def fq2_pow(self, a, e):
        Q = self.q
        r0, r1 = 1, 0
        b0, b1 = a[0] % Q, a[1] % Q
        while e:
            if e & 1:
                r0, r1 = (r0 * b0 - r1 * b1) % Q, (r0 * b1 + r1 * b0) % Q
            b0, b1 = (b0 * b0 - b1 * b1) % Q, (2 * b0 * b1) % Q
            e >>= 1
        return (r0, r1)

    # ----------------------------------------------------------------- Fq6 ---

    def f6mul_raw(self, a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5):
        """Karatsuba product in Fq6, returned unreduced (6 ints, any sign)."""
        k = self.k
        # t0 = A0*B0, t1 = A1*B1, t2 = A2*B2 (Fq2 products)
        t0r = a0 * b0 - a1 * b1
        t0i = a0 * b1 + a1 * b0
        t1r = a2 * b2 - a3 * b3
        t1i = a2 * b3 + a3 * b2
        t2r = a4 * b4 - a5 * b5
        t2i = a4 * b5 + a5 * b4
        # (A1+A2)(B1+B2) - t1 - t2
        x0 = a2 + a4
        x1 = a3 + a5
        y0 = b2 + b4
        y1 = b3 + b5
        sr = x0 * y0 - x1 * y1 - t1r - t2r
        si = x0 * y1 + x1 * y0 - t1i - t2i
        # c0 = t0 + xi*s      (xi*(r + i u) = (k r - i) + (r + k i)u)
        c0r = t0r + k * sr - si
        c0i = t0i + sr + k * si
        # c1 = (A0+A1)(B0+B1) - t0 - t1 + xi*t2
        x0 = a0 + a2
        x1 = a1 + a3
        y0 = b0 + b2
        y1 = b1 + b3
        c1r = x0 * y0 - x1 * y1 - t0r - t1r + k * t2r - t2i
        c1i = x0 * y1 + x1 * y0 - t0i - t1i + t2r + k * t2i
        # c2 = (A0+A2)(B0+B2) - t0 - t2 + t1
        x0 = a0 + a4
        x1 = a1 + a5
        y0 = b0 + b4
        y1 = b1 + b5
        c2r = x0 * y0 - x1 * y1 - t0r - t2r + t1r
        c2i = x0 * y1 + x1 * y0 - t0i - t2i + t1i
        return c0r, c0i, c1r, c1i, c2r, c2i

    def f6mul01_raw(self, a0, a1, a2, a3, a4, a5, m0r, m0i, m1r, m1i):
        """X * (M0 + M1 v) for X in Fq6 (a sparse product), unreduced:
        c0 = X0 M0 + xi X2 M1, c1 = X0 M1 + X1 M0, c2 = X1 M1 + X2 M0."""
        k = self.k
        t0r = a0 * m0r - a1 * m0i
        t0i = a0 * m0i + a1 * m0r
        t1r = a2 * m1r - a3 * m1i
        t1i = a2 * m1i + a3 * m1r
        ur = a4 * m1r - a5 * m1i  # X2 M1
        ui = a4 * m1i + a5 * m1r
        sr = a0 + a2
        si = a1 + a3
        pr = m0r + m1r
        pi = m0i + m1i
        return (t0r + k * ur - ui, t0i + ur + k * ui,
                sr * pr - si * pi - t0r - t1r, sr * pi + si * pr - t0i - t1i,
                t1r + a4 * m0r - a5 * m0i, t1i + a4 * m0i + a5 * m0r)

    # coefficient-wise operations, the same for Fq6 and Fq12 tuples
    def _add(self, a, b):
        Q = self.q
        return tuple((x + y) % Q for x, y in zip(a, b))

    def _sub(self, a, b):
        Q = self.q
        return tuple((x - y) % Q for x, y in zip(a, b))

    def _neg(self, a):
        Q = self.q
        return tuple(-x % Q for x in a)

    fq6_add, fq6_sub, fq6_neg = _add, _sub, _neg
    fq12_add, fq12_sub, fq12_neg = _add, _sub, _neg

    def fq6_mul(self, a, b):
        Q = self.q
        return tuple(x % Q for x in self.f6mul_raw(*a, *b))

    def fq6_sqr(self, a):
        return self.fq6_mul(a, a)

    def fq6_mul_by_v(self, a):
        """a * v: (A, B, C) -> (xi*C, A, B)."""
        Q, k = self.q, self.k
        c0, c1 = a[4], a[5]
        return ((k * c0 - c1) % Q, (c0 + k * c1) % Q, a[0], a[1], a[2], a[3])

    def fq6_inv(self, a):
        Q, k = self.q, self.k
        a0, a1, b0, b1, c0, c1 = a
        # t0 = A^2 - xi*B*C ; t1 = xi*C^2 - A*B ; t2 = B^2 - A*C
        bc_r = b0 * c0 - b1 * c1
        bc_i = b0 * c1 + b1 * c0
        t0r = (a0 * a0 - a1 * a1 - (k * bc_r - bc_i)) % Q
        t0i = (2 * a0 * a1 - (bc_r + k * bc_i)) % Q
        cc_r = c0 * c0 - c1 * c1
        cc_i = 2 * c0 * c1
        t1r = (k * cc_r - cc_i - (a0 * b0 - a1 * b1)) % Q
        t1i = (cc_r + k * cc_i - (a0 * b1 + a1 * b0)) % Q
        t2r = (b0 * b0 - b1 * b1 - (a0 * c0 - a1 * c1)) % Q
        t2i = (2 * b0 * b1 - (a0 * c1 + a1 * c0)) % Q
        # norm = A*t0 + xi*(C*t1 + B*t2)   (an Fq2 element)
        ur = c0 * t1r - c1 * t1i + b0 * t2r - b1 * t2i
        ui = c0 * t1i + c1 * t1r + b0 * t2i + b1 * t2r
        nr = (a0 * t0r - a1 * t0i + k * ur - ui) % Q
        ni = (a0 * t0i + a1 * t0r + ur + k * ui) % Q
        d = nr * nr + ni * ni
        if d % Q == 0:
            raise ZeroDivisionError("inverse of zero in Fq6")
        d = pow(d, -1, Q)
        ir, ii = nr * d % Q, -ni * d % Q
        return (
            (t0r * ir - t0i * ii) % Q, (t0r * ii + t0i * ir) % Q,
            (t1r * ir - t1i * ii) % Q, (t1r * ii + t1i * ir) % Q,
            (t2r * ir - t2i * ii) % Q, (t2r * ii + t2i * ir) % Q,
        )

    # ---------------------------------------------------------------- Fq12 ---

    def fq12_eq(self, a, b):
        Q = self.q
        return all((x - y) % Q == 0 for x, y in zip(a, b))

    def fq12_is_one(self, a):
        return self.fq12_eq(a, FQ12_ONE)

    def fq12_mul(self, a, b):
        """(A0 + A1 w)(B0 + B1 w) = A0B0 + v*A1B1 + ((A0+A1)(B0+B1) - A0B0 - A1B1) w."""
        Q, k, f6 = self.q, self.k, self.f6mul_raw
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 = a
        b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11 = b
        p0, p1, p2, p3, p4, p5 = f6(a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5)
        q0, q1, q2, q3, q4, q5 = f6(a6, a7, a8, a9, a10, a11, b6, b7, b8, b9, b10, b11)
        s0, s1, s2, s3, s4, s5 = f6(
            a0 + a6, a1 + a7, a2 + a8, a3 + a9, a4 + a10, a5 + a11,
            b0 + b6, b1 + b7, b2 + b8, b3 + b9, b4 + b10, b5 + b11)
        # v * (q0..q5) = (xi*Q2, Q0, Q1)
        return (
            (p0 + k * q4 - q5) % Q, (p1 + q4 + k * q5) % Q,
            (p2 + q0) % Q, (p3 + q1) % Q,
            (p4 + q2) % Q, (p5 + q3) % Q,
            (s0 - p0 - q0) % Q, (s1 - p1 - q1) % Q,
            (s2 - p2 - q2) % Q, (s3 - p3 - q3) % Q,
            (s4 - p4 - q4) % Q, (s5 - p5 - q5) % Q,
        )

    def fq12_sqr(self, a):
        """Complex squaring: (A + Bw)^2 = (A+B)(A+vB) - AB - vAB + 2AB w."""
        Q, k, f6 = self.q, self.k, self.f6mul_raw
        a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5 = a
        m0, m1, m2, m3, m4, m5 = (x % Q for x in f6(a0, a1, a2, a3, a4, a5,
                                                    b0, b1, b2, b3, b4, b5))
        # A + v*B = (a0 + xi*b4, a1.., a2 + b0, a4 + b2)
        vb0 = k * b4 - b5
        vb1 = b4 + k * b5
        s0, s1, s2, s3, s4, s5 = f6(
            a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5,
            a0 + vb0, a1 + vb1, a2 + b0, a3 + b1, a4 + b2, a5 + b3)
        # c0 = s - m - v*m ; v*m = (xi*m2, m0, m1)
        return (
            (s0 - m0 - k * m4 + m5) % Q, (s1 - m1 - m4 - k * m5) % Q,
            (s2 - m2 - m0) % Q, (s3 - m3 - m1) % Q,
            (s4 - m4 - m2) % Q, (s5 - m5 - m3) % Q,
            2 * m0 % Q, 2 * m1 % Q, 2 * m2 % Q, 2 * m3 % Q, 2 * m4 % Q, 2 * m5 % Q,
        )

    def fq12_conj(self, a):
        """The q^6-power Frobenius (w -> -w); equals the inverse on the cyclotomic subgroup."""
        Q = self.q
        return a[:6] + tuple(-x % Q for x in a[6:])

    def fq12_inv(self, a):
        """(A + Bw)^-1 = (A - Bw) / (A^2 - v B^2)."""
        A, B = a[:6], a[6:]
        d = self.fq6_sub(self.fq6_sqr(A), self.fq6_mul_by_v(self.fq6_sqr(B)))
        di = self.fq6_inv(d)
        return self.fq6_mul(A, di) + self.fq6_neg(self.fq6_mul(B, di))

    def fq12_pow(self, a, e):
        """a^e for an integer e (negative e uses the inverse)."""
        if e < 0:
            a, e = self.fq12_inv(a), -e
        result = FQ12_ONE
        for bit in bin(e)[2:]:
            result = self.fq12_sqr(result)
            if bit == "1":
                result = self.fq12_mul(result, a)
        return result

    def fq12_scale_fq2(self, a, c):
        """Multiply every Fq2 coefficient of a (Fq6 or Fq12 flat tuple) by c in Fq2."""
        Q = self.q
        c0, c1 = c
        out = []
        for i in range(0, len(a), 2):
            x, y = a[i], a[i + 1]
            out.append((x * c0 - y * c1) % Q)
            out.append((x * c1 + y * c0) % Q)
        return tuple(out)

    # ------------------------------------------------------------ Frobenius

    def fq12_frobenius(self, a, n=1):
        """a^(q^n)."""
        n %= 12
        if n == 0:
            return tuple(a)
        if n not in self.frobenius_coeffs:
            # compose from the precomputed ones
            result = a
            while n > 0:
                step = 3 if n >= 3 else n
                result = self.fq12_frobenius(result, step)
                n -= step
            return result
        Q = self.q
        coeffs = self.frobenius_coeffs[n]
        odd = n & 1
        out = []
        for slot in range(6):
            x, y = a[2 * slot], a[2 * slot + 1]
            if odd:
                y = -y
            c0, c1 = coeffs[_W_POWER_OF_SLOT[slot]]
            out.append((x * c0 - y * c1) % Q)
            out.append((x * c1 + y * c0) % Q)
        return tuple(out)

    # ---------------------------------------------------------- conversions

    def fq12_from_nested(self, n):
        Q = self.q
        return tuple(int(x) % Q for half in n for pair in half for x in pair)


@lru_cache(maxsize=None)
def tower(curve):
    """The Fq12 tower of ``curve`` (a :class:`~cuzk_tasks.groth16.curves.Curve`)."""
    return Tower(curve.q, curve.fq6_non_residue, curve.fq2_non_residue)


def fq12_to_nested(a):
    """Flat 12-tuple -> ((c0, c1) x3) x2 nesting (ffjavascript's F12.toObject order)."""
    return tuple(tuple((a[6 * h + 2 * i], a[6 * h + 2 * i + 1]) for i in range(3)) for h in range(2))


# --------------------------------------------- BN254's tower, as module names

_BN = tower(BN254)
Q = _BN.q


def __getattr__(name):
    """``FROBENIUS_COEFFS`` (BN254's ``Tower.frobenius_coeffs``), computed when first read."""
    if name == "FROBENIUS_COEFFS":
        return _BN.frobenius_coeffs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


fq2_pow = _BN.fq2_pow
fq6_add, fq6_sub, fq6_neg = _BN.fq6_add, _BN.fq6_sub, _BN.fq6_neg
fq6_mul, fq6_sqr, fq6_mul_by_v, fq6_inv = _BN.fq6_mul, _BN.fq6_sqr, _BN.fq6_mul_by_v, _BN.fq6_inv
fq12_add, fq12_sub, fq12_neg = _BN.fq12_add, _BN.fq12_sub, _BN.fq12_neg
fq12_eq, fq12_is_one = _BN.fq12_eq, _BN.fq12_is_one
fq12_mul, fq12_sqr, fq12_conj, fq12_inv = _BN.fq12_mul, _BN.fq12_sqr, _BN.fq12_conj, _BN.fq12_inv
fq12_pow, fq12_scale_fq2, fq12_frobenius = _BN.fq12_pow, _BN.fq12_scale_fq2, _BN.fq12_frobenius
fq12_from_nested = _BN.fq12_from_nested
conjugate = fq12_conj
frobenius = fq12_frobenius
