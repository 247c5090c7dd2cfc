"""BLS12-381 end to end on the Python side: readers, curve mismatches, the prover's
refusal, vkey export and verification, against the committed snarkjs fixtures
(tests/fixtures/bls12381/, made by regenerate.sh with circom --prime bls12381)."""

from __future__ import annotations

import copy
import json
import shutil
import struct
import time
import types

import pytest

from cuzk_tasks.errors import FormatError, ProofError, VerificationError
from cuzk_tasks.groth16.formats import jsonio
from cuzk_tasks.groth16 import points
from cuzk_tasks.groth16.curves import BLS12_381, BN254
from cuzk_tasks.groth16.prover import prove_start, witness_values
from cuzk_tasks.groth16.formats.r1cs import read_r1cs
from cuzk_tasks.groth16.reference.curve import g1_of, g2_of
from cuzk_tasks.groth16.reference.field import fq2_ops, sqrt_mod
from cuzk_tasks.groth16.verifier import export_verification_key, verify, verify_files
from cuzk_tasks.groth16.formats.wtns import read_wtns
from cuzk_tasks.groth16.formats.zkey import coef_value, read_zkey

from support.snarkjs_tool import (BLS12381_FIXTURES, fixture_dir, requires_snarkjs, run_snarkjs,
                          snarkjs_verify)

C = BLS12_381
G1, G2 = g1_of(C), g2_of(C)
MULCHAIN = "bls12381/mulchain"


def _load(name, file):
    return json.loads((fixture_dir(name) / file).read_text())


def _fixture(name=MULCHAIN):
    return (_load(name, "verification_key.json"), _load(name, "public.json"),
            _load(name, "proof.json"))


def _sections(data):
    n = struct.unpack_from("<I", data, 8)[0]
    pos, out = 12, {}
    for _ in range(n):
        t, size = struct.unpack_from("<IQ", data, pos)
        out[t] = pos + 12
        pos += 12 + size
    return out


def _patched(tmp_path, name, file, section, offset, new):
    dst = tmp_path / file.replace("circuit", "patched")
    data = bytearray((fixture_dir(name) / file).read_bytes())
    at = _sections(bytes(data))[section] + offset
    data[at:at + len(new)] = new
    dst.write_bytes(bytes(data))
    return dst


# ------------------------------------------------------------------ readers ---

@pytest.mark.parametrize("name", BLS12381_FIXTURES)
def test_read_zkey_wtns_r1cs(name):
    d = fixture_dir(name)
    with read_zkey(d / "circuit.zkey") as zk:
        assert zk.curve is C and zk.q == C.q and zk.r == C.r
        assert (zk.n8q, zk.n8r) == (48, 32)
        nv, npub = zk.n_vars, zk.n_public
        assert zk.ic.shape == (npub + 1, 12) and zk.a_points.shape == (nv, 12)
        assert zk.b2_points.shape == (nv, 24) and zk.h_points.shape == (zk.domain_size, 12)
        assert zk.c_points.shape == (nv - npub - 1, 12)
        for p in (zk.alpha1, zk.beta1, zk.delta1):
            assert G1.is_on_curve(p) and p is not None
        for p in (zk.beta2, zk.gamma2, zk.delta2):
            assert G2.is_on_curve(p) and p is not None
        for arr in (zk.ic, zk.a_points, zk.b1_points, zk.c_points, zk.h_points):
            for row in arr[:20]:
                assert G1.is_on_curve(points.g1_affine_from_mont(row, C))
        for row in zk.b2_points[:10]:
            assert G2.is_on_curve(points.g2_affine_from_mont(row, C))
        raw = zk.header_points_mont()
        assert raw["alpha1"].shape == (12,) and raw["delta2"].shape == (24,)
        assert points.g1_affine_from_mont(raw["alpha1"], C) == zk.alpha1
        assert (points.g1_affine_to_mont(zk.alpha1, C) == raw["alpha1"]).all()
        assert (points.g2_affine_to_mont(zk.delta2, C) == raw["delta2"]).all()
        assert all(0 <= coef_value(rec["value"], C) < C.r for rec in zk.coefs[:20])
    w = read_wtns(d / "witness.wtns")
    assert w.curve is C and w.prime == C.r
    r1 = read_r1cs(d / "circuit.r1cs")
    assert r1.curve is C and r1.n_wires == len(w)
    assert r1.is_satisfied(w.as_ints()) is None
    bad = w.as_ints()
    bad[-1] = (bad[-1] + 1) % C.r
    assert r1.is_satisfied(bad) is not None


def test_zkey_unknown_r_for_bls_q(tmp_path):
    # q = BLS12-381's, r replaced by BN254's: no such curve; the error names the field
    p = _patched(tmp_path, MULCHAIN, "circuit.zkey", 2, 4 + 48 + 4, BN254.r.to_bytes(32, "little"))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert ei.value.field == "r" and str(p) in str(ei.value)
    assert "BLS12-381" in str(ei.value) and "unsupported curve" in str(ei.value)


def test_wtns_and_r1cs_of_a_base_field(tmp_path):
    p = _patched(tmp_path, MULCHAIN, "witness.wtns", 1, 4, C.q.to_bytes(48, "little")[:32])
    with pytest.raises(FormatError) as ei:      # 32 bytes of q: no known prime, not echoed
        read_wtns(p)
    assert ei.value.field == "prime" and "another prime field" in str(ei.value)
    p = _patched(tmp_path, MULCHAIN, "circuit.r1cs", 1, 4, (2 ** 255 - 19).to_bytes(32, "little"))
    with pytest.raises(FormatError) as ei:
        read_r1cs(p)
    assert ei.value.field == "prime" and "bls12381 (BLS12-381)" in str(ei.value)


# ------------------------------------------------------- curve mismatches ---

def test_witness_of_another_curve_is_refused_naming_both():
    bls_zkey = fixture_dir(MULCHAIN) / "circuit.zkey"
    bn_wtns = fixture_dir("mulchain") / "witness.wtns"
    zk = read_zkey(bls_zkey)
    with pytest.raises(FormatError) as ei:
        read_wtns(bn_wtns, zkey=zk)
    msg = str(ei.value)
    assert ei.value.field == "prime"
    assert str(bn_wtns) in msg and str(bls_zkey) in msg
    assert "BN254 (bn128)" in msg and "BLS12-381 (bls12381)" in msg
    # the same check guards the prover's entry (a Witness read without the zkey)
    with pytest.raises(FormatError, match="different curves"):
        witness_values(read_wtns(bn_wtns), zk)
    # and the other way round
    bn_zk = read_zkey(fixture_dir("mulchain") / "circuit.zkey")
    with pytest.raises(FormatError, match=r"BLS12-381 \(bls12381\).*BN254 \(bn128\)"):
        read_wtns(fixture_dir(MULCHAIN) / "witness.wtns", zkey=bn_zk)


@pytest.mark.parametrize("name", BLS12381_FIXTURES)
def test_the_native_prover_makes_valid_bls12_381_proofs(name):
    """The native core on BLS12-381: a proof of the fixture's witness verifies, its public
    signals are snarkjs's, and a tampered copy is refused."""
    from cuzk_tasks.groth16.prover import prove

    zk = read_zkey(fixture_dir(name) / "circuit.zkey")
    w = read_wtns(fixture_dir(name) / "witness.wtns", zkey=zk)
    proof, public = prove(zk, w, backend="cpu")
    assert proof["curve"] == "bls12381" and proof["protocol"] == "groth16"
    assert public == _load(name, "public.json")
    vkey = _load(name, "verification_key.json")
    assert verify(vkey, public, proof)
    bad = dict(proof, pi_a=proof["pi_c"])
    assert verify(vkey, public, bad) is False


@requires_snarkjs
@pytest.mark.parametrize("name", BLS12381_FIXTURES)
def test_snarkjs_accepts_native_bls12_381_proofs_and_refuses_tampered_ones(name, tmp_path):
    from cuzk_tasks.groth16.prover import prove

    zk = read_zkey(fixture_dir(name) / "circuit.zkey")
    proof, public = prove(zk, read_wtns(fixture_dir(name) / "witness.wtns", zkey=zk), backend="cpu")
    vkey = _load(name, "verification_key.json")
    assert snarkjs_verify(tmp_path, vkey, public, proof)
    assert not snarkjs_verify(tmp_path, vkey, public, dict(proof, pi_a=proof["pi_c"]))
    tampered = [str((int(public[0]) + 1) % BLS12_381.r)] + public[1:]
    assert not snarkjs_verify(tmp_path, vkey, tampered, proof)
    assert verify(vkey, tampered, proof) is False


def test_a_backend_without_the_curve_refuses_bls12_381_clearly():
    """A backend proves the curves it lists: a BLS12-381 zkey on one that lists BN254 only is
    refused before any backend work, naming what to use instead."""
    from cuzk_tasks.groth16.backends.gpu import GpuBackend
    from cuzk_tasks.groth16.prover import require_backend_curve

    assert BLS12_381 in GpuBackend.curves  # the GPU backend proves both (emulated in CI)
    zk = read_zkey(fixture_dir(MULCHAIN) / "circuit.zkey")
    stand_in = types.SimpleNamespace(name="gpu", curves=(BN254,))
    with pytest.raises(ProofError, match="the gpu backend does not prove BLS12-381 yet.*use the cpu backend"):
        require_backend_curve(stand_in, zk)
    w = read_wtns(fixture_dir(MULCHAIN) / "witness.wtns", zkey=zk)
    with pytest.raises(ProofError, match="does not prove BLS12-381"):
        prove_start(zk, w, backend=stand_in)


# ---------------------------------------------------------------- verifier ---

@pytest.mark.parametrize("name", BLS12381_FIXTURES)
def test_export_verification_key_matches_snarkjs(name):
    vk = export_verification_key(read_zkey(fixture_dir(name) / "circuit.zkey"))
    expected = _load(name, "verification_key.json")
    assert vk["curve"] == "bls12381"
    assert vk == expected and list(vk) == list(expected)
    assert jsonio.dumps_json(vk) == (fixture_dir(name) / "verification_key.json").read_text()


@pytest.mark.parametrize("name", BLS12381_FIXTURES)
def test_fixture_proofs_verify(name):
    vkey, public, proof = _fixture(name)
    t0 = time.perf_counter()
    assert verify(vkey, public, proof) is True
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert verify(vkey, public, proof) is True
    again = time.perf_counter() - t0
    print(f"{name}: verify {first * 1000:.0f} ms (first), {again * 1000:.0f} ms (key's subgroup "
          "checks cached)")
    assert again < 3.0
    d = fixture_dir(name)
    assert verify_files(d / "verification_key.json", d / "public.json", d / "proof.json") is True


def test_json_roundtrip_byte_for_byte(tmp_path):
    d = fixture_dir(MULCHAIN)
    proof = _load(MULCHAIN, "proof.json")
    again = jsonio.proof_to_json(*jsonio.proof_from_json(proof, d / "proof.json", curve=C), curve=C)
    assert again == proof and list(again) == list(proof)
    jsonio.dump_json(again, tmp_path / "proof.json")
    assert (tmp_path / "proof.json").read_bytes() == (d / "proof.json").read_bytes()


def _g1_point_outside_subgroup():
    x = 1
    while True:
        y = sqrt_mod(x ** 3 + C.b, C.q)
        if y is not None and not G1.in_subgroup((x, y)):
            return (x, y)
        x += 1


def _g2_point_outside_subgroup():
    f2, q, x0 = fq2_ops(C), C.q, 1
    while True:
        x = (x0, 0)
        rhs = f2.add(f2.mul(f2.mul(x, x), x), C.b2)
        a1 = f2.pow(rhs, (q - 3) // 4)
        alpha = f2.mul(a1, f2.mul(a1, rhs))
        x_ = f2.mul(a1, rhs)
        y = (f2.mul((0, 1), x_) if alpha == (q - 1, 0)
             else f2.mul(f2.pow(f2.add((1, 0), alpha), (q - 1) // 2), x_))
        if f2.mul(y, y) == rhs:
            return (x, y)
        x0 += 1


def test_invalid_points_and_public_inputs_raise():
    vkey, public, proof = _fixture()
    bad = copy.deepcopy(proof)
    bad["pi_a"][0] = str((int(bad["pi_a"][0]) + 1) % C.q)
    with pytest.raises(VerificationError, match="pi_a: point is not on the curve"):
        verify(vkey, public, bad)
    bad = copy.deepcopy(proof)
    bad["pi_c"] = jsonio.g1_to_json(_g1_point_outside_subgroup())  # on E(Fq), cofactor part
    with pytest.raises(VerificationError, match="pi_c: point is not in the G1 subgroup"):
        verify(vkey, public, bad)
    bad = copy.deepcopy(proof)
    bad["pi_b"] = jsonio.g2_to_json(_g2_point_outside_subgroup())
    with pytest.raises(VerificationError, match="pi_b: point is not in the G2 subgroup"):
        verify(vkey, public, bad)
    bad_pub = list(public)
    bad_pub[1] = str(int(bad_pub[1]) + C.r)  # same residue, not canonical
    with pytest.raises(VerificationError, match=r"public signal \[1\].*>= r"):
        verify(vkey, bad_pub, proof)
    # BN254's r is below BLS12-381's: a value in [r_BN, r_BLS) is a valid signal here
    assert verify(vkey, [str(BN254.r), public[1]], proof) is False


def test_curve_names_must_agree():
    vkey, public, proof = _fixture()
    bad = dict(proof, curve="bn128")
    with pytest.raises(VerificationError, match=r"proof is for BN254 \(bn128\) but the verification "
                                                r"key is for BLS12-381"):
        verify(vkey, public, bad)
    bn_vkey = _load("mulchain", "verification_key.json")
    with pytest.raises(VerificationError, match="curve"):
        verify(bn_vkey, public, proof)
    with pytest.raises(FormatError) as ei:
        jsonio.vkey_from_json(dict(vkey, curve="bls12377"), "vk.json")
    assert ei.value.field == "curve" and "bls12381 (BLS12-381)" in str(ei.value)
    assert jsonio.vkey_from_json(dict(vkey, curve="BLS12-381")).curve is C  # as snarkjs normalises


# ------------------------------------------------------- against snarkjs ---
# (tampered proofs and public inputs, ours and snarkjs's verdicts: test_verifier.py's
# test_snarkjs_agrees_on_tampered_proofs runs on this curve's mulchain too)

@pytest.mark.snarkjs
@requires_snarkjs
def test_snarkjs_zkey_export_matches_ours(tmp_path):
    name = "bls12381/poseidon"
    zkey = tmp_path / "circuit.zkey"
    shutil.copy(fixture_dir(name) / "circuit.zkey", zkey)
    proc = run_snarkjs("zkey", "export", "verificationkey", zkey, tmp_path / "vk.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "vk.json").read_text()) == export_verification_key(read_zkey(zkey))


# ----------------------------------------------- the reference prover (oracle) ---

def _reference_proof(name, r, s):
    from cuzk_tasks.groth16.reference import groth16 as ref

    zk = read_zkey(fixture_dir(name) / "circuit.zkey")
    w = read_wtns(fixture_dir(name) / "witness.wtns", zkey=zk).as_ints()
    a, b1, c, h, _ = ref.prove_start_reference(zk, w)
    b2 = ref.b2_reference(zk, w)
    pi = ref.assemble_proof_reference(zk, a, b1, c, h, b2, r, s)
    return jsonio.proof_to_json(*pi, curve=zk.curve), [str(v) for v in w[1:zk.n_public + 1]]


def test_reference_prover_makes_valid_bls12_381_proofs():
    """The pure-Python oracle proves on BLS12-381 (QAP and H with BLS12-381's roots, MSMs
    on its G1/G2): the proofs verify and differ with r, s; a wrong witness does not."""
    vkey, public, _ = _fixture()
    proof, pub = _reference_proof(MULCHAIN, 12345, 67890)
    assert pub == public and proof["curve"] == "bls12381"
    assert verify(vkey, public, proof) is True
    other, _ = _reference_proof(MULCHAIN, 1, 2)
    assert other["pi_a"] != proof["pi_a"] and verify(vkey, public, other) is True


@pytest.mark.snarkjs
@requires_snarkjs
def test_snarkjs_accepts_reference_bls12_381_proof(tmp_path):
    vkey, public, _ = _fixture()
    proof, _ = _reference_proof(MULCHAIN, 424242, 171717)
    assert snarkjs_verify(tmp_path, vkey, public, proof)
    bad = copy.deepcopy(proof)
    bad["pi_c"] = proof["pi_a"]
    assert not snarkjs_verify(tmp_path, vkey, public, bad) and verify(vkey, public, bad) is False


# -------------------------------------------------------------------- CLI ---

def test_cli_witness_vkey_prove_and_verify(tmp_path, capsys):
    from cuzk_tasks.cli import main as cli_main

    d = fixture_dir(MULCHAIN)
    assert cli_main(["witness", str(d / "circuit.wasm"), str(d / "input.json"),
                     str(tmp_path / "w.wtns")]) == 0
    assert (tmp_path / "w.wtns").read_bytes() == (d / "witness.wtns").read_bytes()
    assert cli_main(["vkey", str(d / "circuit.zkey"), str(tmp_path / "vk.json")]) == 0
    assert (tmp_path / "vk.json").read_text() == (d / "verification_key.json").read_text()
    assert cli_main(["verify", str(tmp_path / "vk.json"), str(d / "public.json"),
                     str(d / "proof.json")]) == 0
    public = _load(MULCHAIN, "public.json")
    public[0] = str(int(public[0]) + 1)
    jsonio.dump_json(public, tmp_path / "bad.json")
    assert cli_main(["verify", str(tmp_path / "vk.json"), str(tmp_path / "bad.json"),
                     str(d / "proof.json")]) == 1
    capsys.readouterr()
    assert cli_main(["prove", str(d / "circuit.zkey"), str(tmp_path / "w.wtns"),
                     str(tmp_path / "p.json"), str(tmp_path / "pub.json")]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["curve"] == "bls12381"
    assert cli_main(["verify", str(tmp_path / "vk.json"), str(tmp_path / "pub.json"),
                     str(tmp_path / "p.json")]) == 0
    # a BN254 witness for the BLS12-381 zkey: refused naming both files
    assert cli_main(["prove", str(d / "circuit.zkey"), str(fixture_dir("mulchain") / "witness.wtns"),
                     str(tmp_path / "p.json"), str(tmp_path / "pub.json")]) == 2
    err = capsys.readouterr().err
    assert "different curves" in err and "mulchain/witness.wtns" in err and "bls12381/mulchain" in err


def test_pipeline_prover_proves_bls12_381_and_refuses_mismatched_witnesses(tmp_path):
    """Groth16Prover (what the prove and finalize tasks call) reads the witness with the
    resident zkey: a mismatched curve names both files; a BLS12-381 job is proved."""
    from types import SimpleNamespace

    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.pipeline.provers import Groth16Prover

    zk = read_zkey(fixture_dir(MULCHAIN) / "circuit.zkey")
    # the prover opens witnesses only inside the input roots (cuzk_tasks.paths.open_input)
    settings = load_settings(env={"CUZK_SPOOL_DIR": str(tmp_path),
                                  "CUZK_ALLOWED_INPUT_ROOTS": str(fixture_dir("mulchain").parent)})
    ctx = SimpleNamespace(resident=SimpleNamespace(get=lambda name: zk), backend="cpu",
                          backend_name="cpu", settings=settings)
    prover = Groth16Prover(ctx)
    bn_wtns = str(fixture_dir("mulchain") / "witness.wtns")
    with pytest.raises(FormatError, match="different curves") as ei:
        prover.prove_start("bls-mulchain", bn_wtns)
    assert bn_wtns in str(ei.value) and zk.path in str(ei.value)
    witness = str(fixture_dir(MULCHAIN) / "witness.wtns")
    partial = prover.prove_start("bls-mulchain", witness)
    assert partial["curve"] == "bls12381"
    proof, public = prover.prove_finish("bls-mulchain", json.loads(json.dumps(partial)), witness)
    assert verify(_load(MULCHAIN, "verification_key.json"), public, proof)
