"""Conversions between numpy limb arrays (as stored in zkeys) and Python-int points.

Zkey and native-core coordinates are little-endian 64-bit limbs in Montgomery form,
``curve.n64q`` limbs per Fq element (4 on BN254, 6 on BLS12-381) with R =
``curve.mont_r_q`` (2^256, 2^384).  Python-side points (reference, JSON, proof
assembly) are affine tuples of standard-form ints with ``None`` for infinity, the same
convention as :mod:`cuzk_tasks.groth16.reference.curve`.  Every function takes the
curve, BN254 by default.
"""

from functools import lru_cache

import numpy as np

from .curves import BN254
from .reference.field import fq2_ops


@lru_cache(maxsize=None)
def _r_inv_q(curve):
    return pow(curve.mont_r_q, -1, curve.q)


def limbs_to_int(limbs):
    """Little-endian uint64 limbs (any length) to a Python int."""
    return int.from_bytes(np.ascontiguousarray(limbs, dtype="<u8").tobytes(), "little")


def int_to_limbs(value, n_limbs=4):
    return np.frombuffer(int(value).to_bytes(8 * n_limbs, "little"), dtype="<u8").copy()


def ints_to_limb_array(values, n_limbs=4):
    """A sequence of ints to an (n, n_limbs) little-endian uint64 array."""
    buf = b"".join(int(v).to_bytes(8 * n_limbs, "little") for v in values)
    return np.frombuffer(buf, dtype="<u8").reshape(len(values), n_limbs).copy()


def limb_array_to_ints(array):
    """An (n, k) little-endian uint64 array (k limbs per value) to a list of ints."""
    array = np.ascontiguousarray(array, dtype="<u8")
    width = 8 * (array.shape[1] if array.ndim == 2 else 4)
    raw = array.tobytes()
    return [int.from_bytes(raw[i:i + width], "little") for i in range(0, len(raw), width)]


def fq_from_mont(limbs, curve=BN254):
    return limbs_to_int(limbs) * _r_inv_q(curve) % curve.q


def fq_to_mont_limbs(value, curve=BN254):
    return int_to_limbs(value * curve.mont_r_q % curve.q, curve.n64q)


def _fq2_from_mont(limbs, curve):
    n = curve.n64q
    return (fq_from_mont(limbs[0:n], curve), fq_from_mont(limbs[n:2 * n], curve))


def g1_affine_from_mont(row, curve=BN254):
    """One zkey G1 row (2 n64q limbs, Montgomery) to an affine point; zeros mean infinity."""
    row = np.asarray(row)
    if not row.any():
        return None
    n = curve.n64q
    return (fq_from_mont(row[0:n], curve), fq_from_mont(row[n:2 * n], curve))


def g2_affine_from_mont(row, curve=BN254):
    """One zkey G2 row (x.c0, x.c1, y.c0, y.c1; 4 n64q limbs) to an affine point."""
    row = np.asarray(row)
    if not row.any():
        return None
    n = curve.n64q
    return (_fq2_from_mont(row[0:2 * n], curve), _fq2_from_mont(row[2 * n:4 * n], curve))


def g1_affine_to_mont(point, curve=BN254):
    if point is None:
        return np.zeros(2 * curve.n64q, dtype="<u8")
    return np.concatenate([fq_to_mont_limbs(point[0], curve), fq_to_mont_limbs(point[1], curve)])


def g2_affine_to_mont(point, curve=BN254):
    if point is None:
        return np.zeros(4 * curve.n64q, dtype="<u8")
    (x0, x1), (y0, y1) = point
    return np.concatenate([fq_to_mont_limbs(v, curve) for v in (x0, x1, y0, y1)])


def g1_rows_to_mont(pts, curve=BN254):
    """Affine G1 points (``None`` = infinity) to an (n, 2 n64q) Montgomery array in one
    pass (the native pairing's and MSM's input rows)."""
    q, R = curve.q, curve.mont_r_q
    values = [c * R % q for p in pts for c in ((0, 0) if p is None else p)]
    return ints_to_limb_array(values, curve.n64q).reshape(len(pts), 2 * curve.n64q)


def g2_rows_to_mont(pts, curve=BN254):
    """Affine G2 points to an (n, 4 n64q) Montgomery array (x.c0, x.c1, y.c0, y.c1)."""
    q, R = curve.q, curve.mont_r_q
    values = [c * R % q for p in pts
              for c in ((0, 0, 0, 0) if p is None else (*p[0], *p[1]))]
    return ints_to_limb_array(values, curve.n64q).reshape(len(pts), 4 * curve.n64q)


def g1_jacobian_to_affine(limbs, curve=BN254):
    """Native-core G1 result (X, Y, Z Jacobian, Montgomery) to an affine point."""
    n, q = curve.n64q, curve.q
    x, y, z = (fq_from_mont(limbs[i:i + n], curve) for i in (0, n, 2 * n))
    if z == 0:
        return None
    z_inv = pow(z, -1, q)
    z_inv2 = z_inv * z_inv % q
    return (x * z_inv2 % q, y * z_inv2 * z_inv % q)


def g2_jacobian_to_affine(limbs, curve=BN254):
    f2, n = fq2_ops(curve), curve.n64q
    x = _fq2_from_mont(limbs[0:2 * n], curve)
    y = _fq2_from_mont(limbs[2 * n:4 * n], curve)
    z = _fq2_from_mont(limbs[4 * n:6 * n], curve)
    if z == (0, 0):
        return None
    z_inv = f2.inv(z)
    z_inv2 = f2.mul(z_inv, z_inv)
    return (f2.mul(x, z_inv2), f2.mul(f2.mul(y, z_inv2), z_inv))
