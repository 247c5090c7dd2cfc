"""The native pairing (pairing.hpp, cuzk_pairing / cuzk_pairing_check) against the
pure-Python reference pairing, the oracle, on BN254 and BLS12-381."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from cuzk_tasks.errors import NativeCoreError
from cuzk_tasks.groth16.formats import jsonio
from cuzk_tasks.groth16.backends import native as N
from cuzk_tasks.groth16 import points as P
from cuzk_tasks.groth16 import verifier
from cuzk_tasks.groth16.curves import BLS12_381, BN254
from cuzk_tasks.groth16.reference import tower as T
from cuzk_tasks.groth16.reference.curve import g1_of, g2_of
from cuzk_tasks.groth16.reference.pairing import pairing_of

from support.snarkjs_tool import fixture_dir

CURVES = [BN254, BLS12_381]
# (fixture, curve): a BN254 and a BLS12-381 proof with its key and public signals
PROOFS = [("poseidon", BN254), ("mulchain", BN254), ("bls12381/poseidon", BLS12_381)]


def _ids(curve):
    return curve.name


def _rows(curve, g1_points, g2_points):
    return P.g1_rows_to_mont(g1_points, curve), P.g2_rows_to_mont(g2_points, curve)


def _random_points(curve, rng):
    a, b = rng.randrange(1, curve.r), rng.randrange(1, curve.r)
    g1, g2 = g1_of(curve), g2_of(curve)
    return g1.mul(g1.generator, a), g2.mul(g2.generator, b)


def _fixture(name):
    d = fixture_dir(name)
    return tuple(json.loads((d / f).read_text())
                 for f in ("verification_key.json", "public.json", "proof.json"))


def _proof_pairs(name, curve):
    """The 4 pairs of the Groth16 check of fixture ``name`` (as the reference verifier builds them)."""
    vkey, public, proof = _fixture(name)
    vk = jsonio.vkey_from_json(vkey)
    pub = jsonio.public_from_json(public, curve=curve)
    pi_a, pi_b, pi_c = jsonio.proof_from_json(proof, curve=curve)
    g1 = g1_of(curve)
    vk_x = vk.ic[0]
    for s, ic in zip(pub, vk.ic[1:]):
        vk_x = g1.add(vk_x, g1.mul(ic, s))
    return [(g1_of(curve).neg(pi_a), pi_b), (vk.alpha1, vk.beta2), (vk_x, vk.gamma2),
            (pi_c, vk.delta2)]


@pytest.mark.parametrize("curve", CURVES, ids=_ids)
def test_single_pairing_equals_the_reference(curve):
    rng = random.Random(1300 + curve.q % 1000)
    for _ in range(2):
        p, q = _random_points(curve, rng)
        assert N.pairing(*_rows(curve, [p], [q]), curve) == pairing_of(curve).pairing(p, q)


@pytest.mark.parametrize("curve", CURVES, ids=_ids)
def test_pairing_of_the_generators_is_not_one(curve):
    g1, g2 = g1_of(curve).generator, g2_of(curve).generator
    e = N.pairing(*_rows(curve, [g1], [g2]), curve)
    assert not T.tower(curve).fq12_is_one(e)
    assert e == pairing_of(curve).pairing(g1, g2)


@pytest.mark.parametrize("curve", CURVES, ids=_ids)
def test_bilinearity(curve):
    rng = random.Random(7 + curve.r % 1000)
    g1, g2 = g1_of(curve), g2_of(curve)
    p, q = _random_points(curve, rng)
    a, b = rng.randrange(1, curve.r), rng.randrange(1, curve.r)
    e_pq = N.pairing(*_rows(curve, [p], [q]), curve)
    e_ab = N.pairing(*_rows(curve, [g1.mul(p, a)], [g2.mul(q, b)]), curve)
    assert e_ab == T.tower(curve).fq12_pow(e_pq, a * b % curve.r)
    # and the target group has order r
    assert T.tower(curve).fq12_is_one(T.tower(curve).fq12_pow(e_pq, curve.r))


@pytest.mark.parametrize("curve", CURVES, ids=_ids)
def test_multi_pairing_is_the_product_of_single_pairings(curve):
    rng = random.Random(99 + curve.q % 997)
    (p1, q1), (p2, q2), (p3, q3) = (_random_points(curve, rng) for _ in range(3))
    tw = T.tower(curve)
    singles = [N.pairing(*_rows(curve, [p], [q]), curve) for p, q in ((p1, q1), (p2, q2), (p3, q3))]
    product = tw.fq12_mul(tw.fq12_mul(singles[0], singles[1]), singles[2])
    assert N.pairing(*_rows(curve, [p1, p2, p3], [q1, q2, q3]), curve) == product


@pytest.mark.parametrize("name,curve", PROOFS, ids=[n for n, _ in PROOFS])
def test_pairing_check_accepts_a_valid_proof_and_rejects_a_tampered_one(name, curve):
    pairs = _proof_pairs(name, curve)
    g1, g2 = _rows(curve, [p for p, _ in pairs], [q for _, q in pairs])
    assert N.pairing_check(g1, g2, curve)
    # C -> 2C: still a valid group element, but the equation no longer holds
    pairs[3] = (g1_of(curve).double(pairs[3][0]), pairs[3][1])
    g1, g2 = _rows(curve, [p for p, _ in pairs], [q for _, q in pairs])
    assert not N.pairing_check(g1, g2, curve)
    assert not pairing_of(curve).pairing_check(pairs)


@pytest.mark.parametrize("name,curve", PROOFS, ids=[n for n, _ in PROOFS])
def test_verify_on_the_native_core_matches_the_reference(name, curve, monkeypatch):
    vkey, public, proof = _fixture(name)
    assert verifier.verify(vkey, public, proof)
    tampered = json.loads(json.dumps(proof))
    c = jsonio.proof_from_json(proof, curve=curve)[2]
    tampered["pi_c"] = jsonio.g1_to_json(g1_of(curve).double(c))
    wrong_public = [str((int(public[0]) + 1) % curve.r)] + public[1:]
    assert not verifier.verify(vkey, public, tampered)
    assert not verifier.verify(vkey, wrong_public, proof)
    # the reference path (no native core) agrees
    monkeypatch.setattr(N, "available", lambda: False)
    assert verifier.verify(vkey, public, proof)
    assert not verifier.verify(vkey, public, tampered)


@pytest.mark.parametrize("name,curve", PROOFS, ids=[n for n, _ in PROOFS])
def test_native_alphabeta_is_snarkjs_vk_alphabeta_12(name, curve):
    """snarkjs wrote e(alpha, beta) into the key: the native value is that element."""
    vkey = _fixture(name)[0]
    vk = jsonio.vkey_from_json(vkey)
    e = N.pairing(*_rows(curve, [vk.alpha1], [vk.beta2]), curve)
    assert e == pairing_of(curve).gt_from_json(vkey["vk_alphabeta_12"])


@pytest.mark.parametrize("curve", CURVES, ids=_ids)
def test_a_point_at_infinity_contributes_one(curve):
    rng = random.Random(5)
    (p, q), (p2, q2) = _random_points(curve, rng), _random_points(curve, rng)
    one = T.FQ12_ONE
    assert N.pairing(*_rows(curve, [None], [q]), curve) == one
    assert N.pairing(*_rows(curve, [p], [None]), curve) == one
    assert N.pairing(*_rows(curve, [None], [None]), curve) == one
    e = N.pairing(*_rows(curve, [p], [q]), curve)
    assert N.pairing(*_rows(curve, [p, None, p2], [q, q2, None]), curve) == e
    assert N.pairing_check(*_rows(curve, [None, p], [q, None]), curve)
    assert not N.pairing_check(*_rows(curve, [p, None], [q, q2]), curve)
    L = N.fq_limbs(curve)
    empty = (np.zeros((0, 2 * L), np.uint64), np.zeros((0, 4 * L), np.uint64))
    assert N.pairing_check(*empty, curve)


@pytest.mark.parametrize("curve", CURVES, ids=_ids)
def test_bad_points_are_refused(curve):
    rng = random.Random(11)
    p, q = _random_points(curve, rng)
    g1, g2 = _rows(curve, [p], [q])
    off = g1.copy()
    off[0, 0] ^= 1  # x changed: not on the curve
    with pytest.raises(NativeCoreError, match="not on the curve"):
        N.pairing_check(off, g2, curve)
    big = g2.copy()
    big[0, :] = np.iinfo(np.uint64).max  # >= q
    with pytest.raises(NativeCoreError, match="canonical"):
        N.pairing(g1, big, curve)
    with pytest.raises(ValueError, match="1 G1 points but 2 G2 points"):
        N.pairing_check(g1, np.vstack([g2, g2]), curve)


@pytest.mark.parametrize("curve", CURVES, ids=_ids)
def test_g2_subgroup_test_on_the_native_core_accepts_g2_points(curve):
    """A fresh proof's B goes through the native [lambda]Q test (the points outside G2 are
    refused in test_verifier.py and test_bls12381.py)."""
    rng = random.Random(21)
    g2 = g2_of(curve)
    for _ in range(3):
        q = g2.mul(g2.generator, rng.randrange(1, curve.r))
        assert jsonio.g2_from_json(jsonio.g2_to_json(q), curve=curve) == q
        assert pairing_of(curve).g2_in_subgroup(q)
