"""Short-Weierstrass curves y^2 = x^3 + b over Fq (G1) and Fq2 (G2), affine, Python ints.

Points are affine tuples in standard (non-Montgomery) form: ``(x, y)`` for G1 and
``((x0, x1), (y0, y1))`` for G2; ``None`` is the point at infinity.
"""

from . import field as F


class _FqOps:
    zero, one = 0, 1

    @staticmethod
    def add(a, b):
        return (a + b) % F.FQ

    @staticmethod
    def sub(a, b):
        return (a - b) % F.FQ

    @staticmethod
    def mul(a, b):
        return a * b % F.FQ

    @staticmethod
    def neg(a):
        return -a % F.FQ

    @staticmethod
    def inv(a):
        return F.inv(a, F.FQ)

    @staticmethod
    def small(k):
        return k % F.FQ


class _Fq2Ops:
    zero, one = F.FQ2_ZERO, F.FQ2_ONE
    add = staticmethod(F.fq2_add)
    sub = staticmethod(F.fq2_sub)
    mul = staticmethod(F.fq2_mul)
    neg = staticmethod(F.fq2_neg)
    inv = staticmethod(F.fq2_inv)

    @staticmethod
    def small(k):
        return (k % F.FQ, 0)


class Curve:
    """Affine arithmetic on y^2 = x^3 + b (a = 0) over a field given by ``ops``."""

    def __init__(self, name, ops, b, generator):
        self.name = name
        self.f = ops
        self.b = b
        self.generator = generator

    def is_on_curve(self, p):
        if p is None:
            return True
        f = self.f
        x, y = p
        return f.sub(f.mul(y, y), f.add(f.mul(f.mul(x, x), x), self.b)) == f.zero

    def neg(self, p):
        return None if p is None else (p[0], self.f.neg(p[1]))

    def double(self, p):
        if p is None:
            return None
        f = self.f
        x, y = p
        if y == f.zero:
            return None
        slope = f.mul(f.mul(f.small(3), f.mul(x, x)), f.inv(f.mul(f.small(2), y)))
        x3 = f.sub(f.mul(slope, slope), f.mul(f.small(2), x))
        return (x3, f.sub(f.mul(slope, f.sub(x, x3)), y))

    def add(self, p, q):
        if p is None:
            return q
        if q is None:
            return p
        f = self.f
        if p[0] == q[0]:
            return self.double(p) if p[1] == q[1] else None
        slope = f.mul(f.sub(q[1], p[1]), f.inv(f.sub(q[0], p[0])))
        x3 = f.sub(f.sub(f.mul(slope, slope), p[0]), q[0])
        return (x3, f.sub(f.mul(slope, f.sub(p[0], x3)), p[1]))

    def mul(self, p, k):
        """k·p for k taken mod r (points of the prime-order subgroup)."""
        return _mul_unreduced(self, p, k % F.FR)

    def msm(self, points, scalars):
        """Sum of scalars[i] * points[i], by double-and-add (reference, slow)."""
        acc = None
        for p, k in zip(points, scalars):
            acc = self.add(acc, self.mul(p, k))
        return acc


G1 = Curve("G1", _FqOps, 3, (1, 2))

G2_B = F.fq2_mul((3, 0), F.fq2_inv(F.XI))
"""The twist's b' = 3 / (9 + u)."""

G2 = Curve(
    "G2",
    _Fq2Ops,
    G2_B,
    (
        (
            10857046999023057135944570762232829481370756359578518086990519993285655852781,
            11559732032986387107991004021392285783925812861821192530917403151452391805634,
        ),
        (
            8495653923123431417604973247489272438418190587263600148770280649306958101930,
            4082367875863433681332203403145435568316851327593401208105741076214120093531,
        ),
    ),
)


def is_in_g2_subgroup(p):
    """r * p == infinity (G2 on the twist has a large cofactor, so this matters)."""
    return _mul_unreduced(G2, p, F.FR) is None


def _mul_unreduced(curve, p, k):
    """k·p by double-and-add, k not reduced (so it can test the subgroup order itself)."""
    acc = None
    addend = p
    while k:
        if k & 1:
            acc = curve.add(acc, addend)
        addend = curve.double(addend)
        k >>= 1
    return acc
