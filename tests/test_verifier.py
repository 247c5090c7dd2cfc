"""Groth16 verification, verification-key export and snarkjs JSON shapes."""

from __future__ import annotations

import copy
import json
import time

import pytest

from cuzk_tasks.errors import CuzkError, FormatError, VerificationError
from cuzk_tasks.groth16.formats import jsonio
from cuzk_tasks.groth16.curves import curve_by_name
from cuzk_tasks.groth16.reference.curve import G1, G2, g1_of
from cuzk_tasks.groth16.reference.field import FQ, FR
from cuzk_tasks.groth16.verifier import export_verification_key, verify, verify_files
from cuzk_tasks.groth16.formats.zkey import read_zkey

from support.snarkjs_tool import FIXTURES, fixture_dir, requires_snarkjs, snarkjs_verify


def _load(name, file):
    return json.loads((fixture_dir(name) / file).read_text())


def _fixture(name):
    return (_load(name, "verification_key.json"), _load(name, "public.json"),
            _load(name, "proof.json"))


# A point on the twist that is not in G2: the first x = (k, 0), k = 1, 2, ... with a square rhs.
def _twist_point_outside_g2():
    from cuzk_tasks.groth16.reference import tower as T
    from cuzk_tasks.groth16.reference.field import fq2_add, fq2_mul
    x0 = 1
    while True:
        x = (x0, 0)
        rhs = fq2_add(fq2_mul(fq2_mul(x, x), x), G2.b)
        a1 = T.fq2_pow(rhs, (FQ - 3) // 4)
        alpha = fq2_mul(a1, fq2_mul(a1, rhs))
        x_ = fq2_mul(a1, rhs)
        if alpha == (FQ - 1, 0):
            y = fq2_mul((0, 1), x_)
        else:
            y = fq2_mul(T.fq2_pow(fq2_add((1, 0), alpha), (FQ - 1) // 2), x_)
        if fq2_mul(y, y) == rhs:
            return (x, y)
        x0 += 1


# ---------------------------------------------------------- vkey export ---

@pytest.mark.parametrize("name", FIXTURES)
def test_export_verification_key_matches_snarkjs(name):
    zkey = read_zkey(fixture_dir(name) / "circuit.zkey")
    vk = export_verification_key(zkey)
    expected = _load(name, "verification_key.json")
    assert vk == expected
    assert list(vk) == list(expected)  # same key order
    assert jsonio.dumps_json(vk) == (fixture_dir(name) / "verification_key.json").read_text()


# ---------------------------------------------------------------- verify ---

@pytest.mark.parametrize("name", FIXTURES)
def test_verify_accepts_fixture_proofs(name):
    vkey, public, proof = _fixture(name)
    assert verify(vkey, public, proof) is True
    d = fixture_dir(name)
    assert verify_files(d / "verification_key.json", d / "public.json", d / "proof.json") is True


def test_verify_speed():
    vkey, public, proof = _fixture("mulchain")
    verify(vkey, public, proof)
    t0 = time.perf_counter()
    assert verify(vkey, public, proof)
    assert time.perf_counter() - t0 < 1.0


def test_wrong_but_well_formed_proof_is_false():
    vkey, public, proof = _fixture("mulchain")
    a = jsonio.g1_from_json(proof["pi_a"])
    bad = copy.deepcopy(proof)
    bad["pi_a"] = jsonio.g1_to_json(G1.add(a, G1.generator))  # valid point, wrong proof
    assert verify(vkey, public, bad) is False
    bad = copy.deepcopy(proof)
    bad["pi_c"] = jsonio.g1_to_json(G1.generator)
    assert verify(vkey, public, bad) is False
    bad = copy.deepcopy(proof)
    bad["pi_b"] = jsonio.g2_to_json(G2.generator)
    assert verify(vkey, public, bad) is False
    bad = copy.deepcopy(proof)
    bad["pi_a"], bad["pi_c"] = proof["pi_c"], proof["pi_a"]
    assert verify(vkey, public, bad) is False


def test_tampered_public_input_is_false():
    vkey, public, proof = _fixture("mulchain")
    for i in range(len(public)):
        bad = list(public)
        bad[i] = str((int(bad[i]) + 1) % FR)
        assert verify(vkey, bad, proof) is False


def test_off_curve_coordinate_raises():
    vkey, public, proof = _fixture("mulchain")
    for key in ("pi_a", "pi_c"):
        bad = copy.deepcopy(proof)
        bad[key][0] = str((int(bad[key][0]) + 1) % FQ)
        with pytest.raises(VerificationError, match=f"{key}: point is not on the curve"):
            verify(vkey, public, bad)
    bad = copy.deepcopy(proof)
    bad["pi_b"][0][1] = str((int(bad["pi_b"][0][1]) + 1) % FQ)
    with pytest.raises(VerificationError, match="pi_b: point is not on the curve"):
        verify(vkey, public, bad)


def test_pi_b_outside_subgroup_raises():
    vkey, public, proof = _fixture("mulchain")
    bad = copy.deepcopy(proof)
    bad["pi_b"] = jsonio.g2_to_json(_twist_point_outside_g2())
    with pytest.raises(VerificationError, match="pi_b: point is not in the G2 subgroup"):
        verify(vkey, public, bad)


def test_public_input_not_below_r_raises():
    vkey, public, proof = _fixture("mulchain")
    bad = list(public)
    bad[1] = str(int(bad[1]) + FR)  # same residue, but not canonical
    with pytest.raises(VerificationError, match=r"public signal \[1\].*>= r"):
        verify(vkey, bad, proof)
    bad[1] = str(FR)
    with pytest.raises(VerificationError, match=r"\[1\]"):
        verify(vkey, bad, proof)


def test_public_input_count_mismatch_raises():
    vkey, public, proof = _fixture("mulchain")
    with pytest.raises(VerificationError, match="expects 2, got 1"):
        verify(vkey, public[:1], proof)
    with pytest.raises(VerificationError, match="expects 2, got 3"):
        verify(vkey, public + ["1"], proof)


@pytest.mark.parametrize("bad_value", ["-1", "0x10", "1.5", "", " 1", None, True, 1.0])
def test_non_decimal_public_input_raises(bad_value):
    vkey, public, proof = _fixture("mulchain")
    bad = list(public)
    bad[0] = bad_value
    with pytest.raises(VerificationError, match=r"public signal \[0\]"):
        verify(vkey, bad, proof)
    with pytest.raises(FormatError, match=r"public signal \[0\]"):
        jsonio.public_from_json(bad, "public.json")


def test_malformed_proof_shapes():
    vkey, public, proof = _fixture("mulchain")
    cases = []
    bad = copy.deepcopy(proof)
    bad["pi_a"][2] = "2"  # projective, z != 1
    cases.append((bad, "pi_a"))
    bad = copy.deepcopy(proof)
    bad["pi_b"][2] = ["1", "1"]
    cases.append((bad, "pi_b"))
    bad = copy.deepcopy(proof)
    bad["pi_c"][1] = "12abc"
    cases.append((bad, r"pi_c\[1\]"))
    bad = copy.deepcopy(proof)
    bad["pi_a"][0] = str(int(bad["pi_a"][0]) + FQ)  # >= q
    cases.append((bad, r"pi_a\[0\]"))
    bad = copy.deepcopy(proof)
    del bad["pi_c"]
    cases.append((bad, "pi_c"))
    bad = copy.deepcopy(proof)
    bad["pi_b"] = bad["pi_b"][0]
    cases.append((bad, "pi_b"))
    bad = copy.deepcopy(proof)
    bad["protocol"] = "plonk"
    cases.append((bad, "protocol"))
    for bad, field in cases:
        with pytest.raises(FormatError, match=field):
            jsonio.proof_from_json(bad, "proof.json")
        with pytest.raises(VerificationError, match=field):
            verify(vkey, public, bad)


def test_malformed_vkey_raises():
    vkey, public, proof = _fixture("mulchain")
    bad = copy.deepcopy(vkey)
    bad["IC"] = bad["IC"][:-1]
    with pytest.raises(VerificationError, match="IC"):
        verify(bad, public, proof)
    bad = copy.deepcopy(vkey)
    bad["vk_gamma_2"][1][0] = str((int(bad["vk_gamma_2"][1][0]) + 1) % FQ)
    with pytest.raises(VerificationError, match="vk_gamma_2: point is not on the curve"):
        verify(bad, public, proof)


def test_verify_files_errors(tmp_path):
    d = fixture_dir("mulchain")
    broken = tmp_path / "proof.json"
    broken.write_text("{not json")
    with pytest.raises(FormatError, match="proof.json"):
        verify_files(d / "verification_key.json", d / "public.json", broken)
    bad = _load("mulchain", "public.json")
    bad[0] = str(FR + 5)
    pub = tmp_path / "public.json"
    jsonio.dump_json(bad, pub)
    with pytest.raises(VerificationError, match=r"public.json: public signal \[0\]"):
        verify_files(d / "verification_key.json", pub, d / "proof.json")
    with pytest.raises(CuzkError):
        verify_files(d / "verification_key.json", d / "proof.json", d / "proof.json")


# ------------------------------------------------------------------ jsonio ---

@pytest.mark.parametrize("name", FIXTURES)
def test_json_roundtrip_byte_for_byte(name, tmp_path):
    d = fixture_dir(name)
    proof = _load(name, "proof.json")
    parsed = jsonio.proof_from_json(proof, d / "proof.json")
    again = jsonio.proof_to_json(*parsed)
    assert again == proof and list(again) == list(proof)
    jsonio.dump_json(again, tmp_path / "proof.json")
    assert (tmp_path / "proof.json").read_bytes() == (d / "proof.json").read_bytes()

    public = _load(name, "public.json")
    again = jsonio.public_to_json(jsonio.public_from_json(public))
    assert again == public
    jsonio.dump_json(again, tmp_path / "public.json")
    assert (tmp_path / "public.json").read_bytes() == (d / "public.json").read_bytes()

    vkey = _load(name, "verification_key.json")
    vk = jsonio.vkey_from_json(vkey, d / "verification_key.json")
    again = jsonio.vkey_to_json(vk.n_public, vk.alpha1, vk.beta2, vk.gamma2, vk.delta2,
                                vk.alphabeta_12, vk.ic)
    assert again == vkey


def test_infinity_shapes():
    assert jsonio.g1_to_json(None) == ["0", "1", "0"]
    assert jsonio.g2_to_json(None) == [["0", "0"], ["1", "0"], ["0", "0"]]
    assert jsonio.g1_from_json(["0", "1", "0"]) is None
    assert jsonio.g2_from_json([["0", "0"], ["1", "0"], ["0", "0"]]) is None


# ------------------------------------------------------- against snarkjs ---

@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", ["mulchain", "bls12381/mulchain"])
def test_snarkjs_agrees_on_tampered_proofs(tmp_path, name):
    vkey, public, proof = _fixture(name)
    curve = curve_by_name(vkey["curve"])
    g1 = g1_of(curve)
    # our re-serialised proof still verifies with snarkjs
    again = jsonio.proof_to_json(*jsonio.proof_from_json(proof, curve=curve), curve=curve)
    assert snarkjs_verify(tmp_path, vkey, public, again)

    bad = copy.deepcopy(proof)
    bad["pi_a"] = jsonio.g1_to_json(g1.add(jsonio.g1_from_json(proof["pi_a"], curve=curve),
                                           g1.generator))
    assert verify(vkey, public, bad) is False
    assert not snarkjs_verify(tmp_path, vkey, public, bad)

    bad_pub = list(public)
    bad_pub[0] = str(int(bad_pub[0]) + 1)
    assert verify(vkey, bad_pub, proof) is False
    assert not snarkjs_verify(tmp_path, vkey, bad_pub, proof)

    bad = copy.deepcopy(proof)
    bad["pi_a"][0] = str(int(bad["pi_a"][0]) + 1)
    with pytest.raises(VerificationError):
        verify(vkey, public, bad)
    assert not snarkjs_verify(tmp_path, vkey, public, bad)

    bad_pub = list(public)
    bad_pub[1] = str(int(bad_pub[1]) + curve.r)
    with pytest.raises(VerificationError):
        verify(vkey, bad_pub, proof)
    assert not snarkjs_verify(tmp_path, vkey, bad_pub, proof)
