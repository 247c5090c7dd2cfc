"""The curve descriptors (cuzk_tasks/groth16/curves.py), recomputed from first principles.

Nothing here is copied from curves.py: each value is checked by what defines it (the
family's polynomials in x, the curve equations, group orders, non-residuosity, the order
of the root of unity), without primality tests.
"""

from __future__ import annotations

import pytest

from cuzk_tasks.groth16 import curves
from cuzk_tasks.groth16.curves import BLS12_381, BN254, curve_by_name, curve_from_primes
from cuzk_tasks.groth16.reference.curve import g1_of, g2_of
from cuzk_tasks.groth16.reference.field import Fq2Ops

BOTH = pytest.mark.parametrize("curve", [BN254, BLS12_381], ids=lambda c: c.name)


def test_bn254_primes_from_x():
    x = BN254.x
    assert BN254.q == 36 * x ** 4 + 36 * x ** 3 + 24 * x ** 2 + 6 * x + 1
    assert BN254.r == 36 * x ** 4 + 36 * x ** 3 + 18 * x ** 2 + 6 * x + 1
    assert BN254.ate_loop_count == 6 * x + 2


def test_bls12_381_primes_from_x():
    x = BLS12_381.x
    assert x == -(2 ** 63 + 2 ** 62 + 2 ** 60 + 2 ** 57 + 2 ** 48 + 2 ** 16)
    assert BLS12_381.r == x ** 4 - x ** 2 + 1
    assert 3 * (BLS12_381.q - x) == (x - 1) ** 2 * BLS12_381.r
    assert BLS12_381.ate_loop_count == x


@BOTH
def test_sizes_follow_wasmcurves_rule(curve):
    # n64 = floor((bitLength(p - 1) - 1) / 64) + 1, n8 = 8 n64
    for p, n8 in ((curve.q, curve.n8q), (curve.r, curve.n8r)):
        assert n8 == 8 * (((p - 1).bit_length() - 1) // 64 + 1)
    assert curve.mont_r_q == 2 ** (8 * curve.n8q) and curve.mont_r_r == 2 ** (8 * curve.n8r)
    assert curve.g1_bytes == 2 * curve.n8q and curve.g2_bytes == 4 * curve.n8q


@BOTH
def test_tower_non_residues(curve):
    q = curve.q
    # u^2 = -1 needs -1 to be a non-square mod q (q = 3 mod 4)
    assert curve.fq2_non_residue == -1 and q % 4 == 3
    assert pow(q - 1, (q - 1) // 2, q) == q - 1
    # xi must be neither a square nor a cube in Fq2 (so v^3 = xi and w^6 = xi define Fq6, Fq12)
    f2 = Fq2Ops(q, -1)
    xi = curve.fq6_non_residue
    assert f2.pow(xi, (q * q - 1) // 2) != (1, 0)
    assert f2.pow(xi, (q * q - 1) // 3) != (1, 0)


@BOTH
def test_twist_and_generators(curve):
    q = curve.q
    f2 = Fq2Ops(q, -1)
    xi = curve.fq6_non_residue
    # b' = b / xi (D-type) or b * xi (M-type), recomputed with Fq2 arithmetic
    expected = f2.mul(f2.small(curve.b), f2.inv(xi) if curve.twist == "D" else xi)
    assert curve.b2 == expected
    g1, g2 = g1_of(curve), g2_of(curve)
    x, y = curve.g1
    assert (y * y - x ** 3 - curve.b) % q == 0
    assert g1.is_on_curve(curve.g1) and g2.is_on_curve(curve.g2)
    # r * G = O and G != O: both generate groups of order r (r is prime)
    assert g1.mul_unreduced(curve.g1, curve.r) is None
    assert g2.mul_unreduced(curve.g2, curve.r) is None
    # the other twist type would not hold this generator
    other = f2.mul(f2.small(curve.b), xi if curve.twist == "D" else f2.inv(xi))
    (gx, gy) = curve.g2
    assert f2.sub(f2.mul(gy, gy), f2.add(f2.mul(f2.mul(gx, gx), gx), other)) != (0, 0)


def test_twist_types():
    assert BN254.twist == "D" and BLS12_381.twist == "M"
    assert BN254.fq6_non_residue == (9, 1) and BLS12_381.fq6_non_residue == (1, 1)


@BOTH
def test_root_of_unity_is_ffjavascripts(curve):
    r, s, w, nqr = curve.r, curve.two_adicity, curve.root_of_unity, curve.fr_nqr
    assert (r - 1) % 2 ** s == 0 and ((r - 1) // 2 ** s) % 2 == 1
    # ffjavascript's nqr: the smallest c >= 2 that is not a square mod r
    assert pow(nqr, (r - 1) // 2, r) == r - 1
    assert all(pow(c, (r - 1) // 2, r) == 1 for c in range(2, nqr))
    assert w == pow(nqr, (r - 1) >> s, r)
    # primitive 2^s-th root of unity
    assert pow(w, 2 ** s, r) == 1 and pow(w, 2 ** (s - 1), r) == r - 1


def test_known_two_adicities():
    assert BN254.two_adicity == 28 and BLS12_381.two_adicity == 32


def test_lookup():
    assert curve_by_name("bn128") is BN254 and curve_by_name("BN254") is BN254
    assert curve_by_name("alt_bn128") is BN254
    assert curve_by_name("bls12381") is BLS12_381 and curve_by_name("BLS12-381") is BLS12_381
    assert curve_by_name("bls12377") is None and curve_by_name(None) is None
    assert curve_from_primes(BN254.q, BN254.r) is BN254
    assert curve_from_primes(None, BLS12_381.r) is BLS12_381
    assert curve_from_primes(BLS12_381.q, None) is BLS12_381
    assert curve_from_primes(BN254.q, BLS12_381.r) is None
    assert curve_from_primes(None, None) is None
    assert "bn128 (BN254)" in curves.known_curves() and "bls12381 (BLS12-381)" in curves.known_curves()


def test_descriptors_are_frozen():
    with pytest.raises(AttributeError):
        BN254.q = 5  # type: ignore[misc]
