"""Prime fields Fq, Fr and the quadratic extension Fq2 = Fq[u]/(u^2 - beta), for any curve.

:class:`FqOps` and :class:`Fq2Ops` are the field operations of one curve
(:func:`fq_ops`, :func:`fq2_ops` give a curve's, cached).  The module-level names
(``FQ``, ``FR``, ``fq2_mul``, ``XI``, ...) are BN254's, as they always were: the native
core's tests and the BN254 fast paths use them.
"""

from functools import lru_cache

from ..curves import BN254

FQ = BN254.q
"""Base field modulus q of BN254 (alt_bn128, snarkjs's "bn128")."""

FR = BN254.r
"""Scalar field modulus r (the group order)."""

MONT_R = BN254.mont_r_q
"""Montgomery radix used by snarkjs/ffjavascript and by our native core for BN254 (2^256;
BLS12-381's base field uses 2^384, see :attr:`Curve.mont_r_q`)."""


def to_mont(x, m):
    return x * MONT_R % m


def from_mont(x, m):
    return x * pow(MONT_R, -1, m) % m


def inv(x, m):
    if x % m == 0:
        raise ZeroDivisionError("inverse of zero")
    return pow(x, -1, m)


def is_quadratic_residue(x, m):
    return x % m == 0 or pow(x, (m - 1) // 2, m) == 1


def sqrt_mod(x, m):
    """Square root mod a prime m = 3 mod 4 (BN254's and BLS12-381's q), or None."""
    if m % 4 != 3:
        raise ValueError("sqrt_mod needs a prime = 3 mod 4")
    x %= m
    y = pow(x, (m + 1) // 4, m)
    return y if y * y % m == x else None


def sqrt_fq(x):
    """Square root in BN254's Fq, or None when x is not a square."""
    return sqrt_mod(x, FQ)


class FqOps:
    """Arithmetic in the prime field Fq (elements are ints in [0, q))."""

    zero, one = 0, 1

    def __init__(self, q):
        self.q = q

    def add(self, a, b):
        return (a + b) % self.q

    def sub(self, a, b):
        return (a - b) % self.q

    def mul(self, a, b):
        return a * b % self.q

    def neg(self, a):
        return -a % self.q

    def inv(self, a):
        return inv(a, self.q)

    def small(self, k):
        return k % self.q


class Fq2Ops:
    """Arithmetic in Fq2 = Fq[u]/(u^2 - beta); elements are (c0, c1) meaning c0 + c1*u."""

    zero, one = (0, 0), (1, 0)

    def __init__(self, q, beta):
        self.q = q
        self.beta = beta  # kept small (-1): no reduction needed, cheap products

    def add(self, a, b):
        q = self.q
        return ((a[0] + b[0]) % q, (a[1] + b[1]) % q)

    def sub(self, a, b):
        q = self.q
        return ((a[0] - b[0]) % q, (a[1] - b[1]) % q)

    def neg(self, a):
        q = self.q
        return (-a[0] % q, -a[1] % q)

    def mul(self, a, b):
        q = self.q
        return ((a[0] * b[0] + self.beta * a[1] * b[1]) % q, (a[0] * b[1] + a[1] * b[0]) % q)

    def sqr(self, a):
        return self.mul(a, a)

    def scale(self, a, k):
        q = self.q
        return (a[0] * k % q, a[1] * k % q)

    def inv(self, a):
        q = self.q
        n_inv = inv((a[0] * a[0] - self.beta * a[1] * a[1]) % q, q)
        return (a[0] * n_inv % q, -a[1] * n_inv % q)

    def conj(self, a):
        return (a[0], -a[1] % self.q)

    def pow(self, a, e):
        result = self.one
        base = (a[0] % self.q, a[1] % self.q)
        while e:
            if e & 1:
                result = self.mul(result, base)
            base = self.mul(base, base)
            e >>= 1
        return result

    def small(self, k):
        return (k % self.q, 0)


@lru_cache(maxsize=None)
def fq_ops(curve):
    return FqOps(curve.q)


@lru_cache(maxsize=None)
def fr_ops(curve):
    return FqOps(curve.r)


@lru_cache(maxsize=None)
def fq2_ops(curve):
    return Fq2Ops(curve.q, curve.fq2_non_residue)


# --- BN254's Fq2 = Fq[u] / (u^2 + 1), as module functions ---

_BN_FQ2 = fq2_ops(BN254)

FQ2_ZERO = Fq2Ops.zero
FQ2_ONE = Fq2Ops.one

fq2_add = _BN_FQ2.add
fq2_sub = _BN_FQ2.sub
fq2_neg = _BN_FQ2.neg
fq2_mul = _BN_FQ2.mul
fq2_sqr = _BN_FQ2.sqr
fq2_scale = _BN_FQ2.scale
fq2_inv = _BN_FQ2.inv
fq2_conj = _BN_FQ2.conj

XI = BN254.fq6_non_residue
"""BN254's non-residue 9 + u defining the sextic twist and the Fq6/Fq12 tower."""
