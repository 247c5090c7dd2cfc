"""Short-Weierstrass curves y^2 = x^3 + b over Fq (G1) and Fq2 (G2), affine, Python ints.

Points are affine tuples in standard (non-Montgomery) form: ``(x, y)`` for G1 and
``((x0, x1), (y0, y1))`` for G2; ``None`` is the point at infinity.

:func:`g1_of` and :func:`g2_of` give any curve's groups (cached); the module-level
``G1``, ``G2``, ``G2_B`` and :func:`is_in_g2_subgroup` are BN254's, as before.
"""

from functools import lru_cache

from ..curves import BN254
from .field import fq2_ops, fq_ops


class Curve:
    """Affine arithmetic on y^2 = x^3 + b (a = 0) over a field given by ``ops``,
    for the subgroup of prime order ``order``."""

    def __init__(self, name, ops, b, generator, order):
        self.name = name
        self.f = ops
        self.b = b
        self.generator = generator
        self.order = order

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
        return self.mul_unreduced(p, k % self.order)

    def mul_unreduced(self, p, k):
        """k·p by double-and-add, k >= 0 not reduced (so it can test the subgroup order itself)."""
        acc = None
        addend = p
        while k:
            if k & 1:
                acc = self.add(acc, addend)
            addend = self.double(addend)
            k >>= 1
        return acc

    def in_subgroup(self, p):
        """order * p == infinity (the textbook test; slow, see :mod:`.pairing` for fast ones)."""
        return self.mul_unreduced(p, self.order) is None

    def msm(self, points, scalars):
        """Sum of scalars[i] * points[i], by double-and-add (reference, slow)."""
        acc = None
        for p, k in zip(points, scalars):
            acc = self.add(acc, self.mul(p, k))
        return acc


@lru_cache(maxsize=None)
def g1_of(curve):
    """G1 of ``curve``: y^2 = x^3 + b over Fq."""
    return Curve(f"{curve.name} G1", fq_ops(curve), curve.b, curve.g1, curve.r)


@lru_cache(maxsize=None)
def g2_of(curve):
    """G2 of ``curve``: the sextic twist y^2 = x^3 + b' over Fq2."""
    return Curve(f"{curve.name} G2", fq2_ops(curve), curve.b2, curve.g2, curve.r)


G1 = g1_of(BN254)
G2 = g2_of(BN254)

G2_B = BN254.b2
"""BN254's twist b' = 3 / (9 + u)."""


def is_in_g2_subgroup(p):
    """r * p == infinity on BN254's twist (G2 has a large cofactor, so this matters)."""
    return G2.in_subgroup(p)
