"""Conversions between numpy limb arrays (as stored in zkeys) and Python-int points.

Zkey and native-core coordinates are little-endian 4×64-bit limbs in Montgomery
form (R = 2^256).  Python-side points (reference, JSON, proof assembly) are
affine tuples of standard-form ints with ``None`` for infinity, the same
convention as :mod:`cuzk_tasks.groth16.reference.curve`.
"""

import numpy as np

from .reference.field import FQ, MONT_R

_R_INV_Q = pow(MONT_R, -1, FQ)


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


def fq_from_mont(limbs):
    return limbs_to_int(limbs) * _R_INV_Q % FQ


def fq_to_mont_limbs(value):
    return int_to_limbs(value * MONT_R % FQ)


def g1_affine_from_mont(row):
    """One zkey G1 row (8 limbs, Montgomery) to an affine point; zeros mean infinity."""
    row = np.asarray(row)
    if not row.any():
        return None
    return (fq_from_mont(row[0:4]), fq_from_mont(row[4:8]))


def g2_affine_from_mont(row):
    row = np.asarray(row)
    if not row.any():
        return None
    return (
        (fq_from_mont(row[0:4]), fq_from_mont(row[4:8])),
        (fq_from_mont(row[8:12]), fq_from_mont(row[12:16])),
    )


def g1_affine_to_mont(point):
    if point is None:
        return np.zeros(8, dtype="<u8")
    return np.concatenate([fq_to_mont_limbs(point[0]), fq_to_mont_limbs(point[1])])


def g2_affine_to_mont(point):
    if point is None:
        return np.zeros(16, dtype="<u8")
    (x0, x1), (y0, y1) = point
    return np.concatenate([fq_to_mont_limbs(v) for v in (x0, x1, y0, y1)])


def _fq2_from_mont(limbs8):
    return (fq_from_mont(limbs8[0:4]), fq_from_mont(limbs8[4:8]))


def g1_jacobian_to_affine(limbs12):
    """Native-core G1 result (X, Y, Z Jacobian, Montgomery) to an affine point."""
    x, y, z = (fq_from_mont(limbs12[i:i + 4]) for i in (0, 4, 8))
    if z == 0:
        return None
    z_inv = pow(z, -1, FQ)
    z_inv2 = z_inv * z_inv % FQ
    return (x * z_inv2 % FQ, y * z_inv2 * z_inv % FQ)


def g2_jacobian_to_affine(limbs24):
    from .reference.field import fq2_inv, fq2_mul

    x = _fq2_from_mont(limbs24[0:8])
    y = _fq2_from_mont(limbs24[8:16])
    z = _fq2_from_mont(limbs24[16:24])
    if z == (0, 0):
        return None
    z_inv = fq2_inv(z)
    z_inv2 = fq2_mul(z_inv, z_inv)
    return (fq2_mul(x, z_inv2), fq2_mul(fq2_mul(y, z_inv2), z_inv))
