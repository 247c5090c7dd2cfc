"""The prover end to end: native against the reference, and against snarkjs."""

import json
import shutil

import numpy as np
import pytest

from cuzk_tasks.cli import main as cli_main
from cuzk_tasks.errors import FormatError, ProofError
from cuzk_tasks.groth16.formats import jsonio
from cuzk_tasks.groth16.prover import PartialProof, prove, prove_finish, prove_start
from cuzk_tasks.groth16.reference import groth16 as ref
from cuzk_tasks.groth16.reference.curve import G1, G2
from cuzk_tasks.groth16.reference.field import FR
from cuzk_tasks.groth16.verifier import export_verification_key, verify
from cuzk_tasks.groth16.formats.wtns import read_wtns, write_wtns
from cuzk_tasks.groth16.formats.zkey import read_zkey
from support.snarkjs_tool import FIXTURES, fixture_dir, requires_snarkjs, run_snarkjs


def load(name):
    zkey = read_zkey(fixture_dir(name) / "circuit.zkey")
    witness = read_wtns(fixture_dir(name) / "witness.wtns", expected_length=zkey.n_vars)
    return zkey, witness


def witness_ints(witness):
    raw = witness.values.tobytes()
    return [int.from_bytes(raw[i:i + 32], "little") for i in range(0, len(raw), 32)]


def test_prove_start_matches_reference_step_by_step():
    zkey, witness = load("mulchain")
    partial = prove_start(zkey, witness, backend="cpu")
    a, b1, c, h, _ = ref.prove_start_reference(zkey, witness_ints(witness))
    assert (partial.a, partial.b1, partial.c, partial.h) == (a, b1, c, h)
    assert partial.public_signals == [int(v) for v in json.loads(
        (fixture_dir("mulchain") / "public.json").read_text())]


def test_fixed_blinding_gives_the_reference_proof():
    zkey, witness = load("mulchain")
    w = witness_ints(witness)
    r, s = 12345, 67890
    proof, public = prove_finish(prove_start(zkey, witness, backend="cpu"), zkey, witness, r=r, s=s)
    a, b1, c, h, _ = ref.prove_start_reference(zkey, w)
    b2 = ref.b2_reference(zkey, w)
    expected = ref.assemble_proof_reference(zkey, a, b1, c, h, b2, r, s)
    assert proof == jsonio.proof_to_json(*expected)
    # Independent check of the assembly against the paper's formula for π_A.
    pi_a = G1.add(G1.add(zkey.alpha1, a), G1.mul(zkey.delta1, r))
    assert proof["pi_a"][:2] == [str(pi_a[0]), str(pi_a[1])]
    assert G2.is_on_curve(expected[1])


@pytest.mark.parametrize("name", FIXTURES)
def test_prove_verifies_with_our_verifier(name):
    zkey, witness = load(name)
    proof, public = prove(zkey, witness, backend="cpu")
    vkey = json.loads((fixture_dir(name) / "verification_key.json").read_text())
    assert public == json.loads((fixture_dir(name) / "public.json").read_text())
    assert verify(vkey, public, proof)
    assert proof["protocol"] == "groth16" and proof["curve"] == "bn128"


def test_two_proofs_differ_because_r_and_s_are_random():
    zkey, witness = load("mulchain")
    first, _ = prove(zkey, witness, backend="cpu")
    second, _ = prove(zkey, witness, backend="cpu")
    assert first["pi_a"] != second["pi_a"]


def test_partial_proof_survives_json_round_trip():
    zkey, witness = load("poseidon")
    partial = prove_start(zkey, witness, backend="cpu")
    restored = PartialProof.from_json(json.loads(json.dumps(partial.to_json())))
    assert restored == partial
    proof, public = prove_finish(restored, zkey, witness)
    assert verify(export_verification_key(zkey), public, proof)


def test_unsatisfying_witness_is_an_error_never_a_proof(tmp_path):
    zkey, witness = load("mulchain")
    values = witness.values.copy()
    values[-1, 0] ^= 1  # a private intermediate signal no longer satisfies its constraint
    bad = tmp_path / "bad.wtns"
    write_wtns(bad, values)
    with pytest.raises(ProofError, match="self-verification"):
        prove(zkey, read_wtns(bad), backend="cpu")


def test_witness_of_wrong_length_names_both_files():
    zkey, _ = load("mulchain")
    _, other = load("poseidon")
    with pytest.raises(FormatError) as info:
        prove_start(zkey, other, backend="cpu")
    message = str(info.value)
    assert "poseidon" in message and "nVars" in message and "mulchain" in message


def test_partial_from_other_zkey_is_refused():
    zkey, witness = load("mulchain")
    other_zkey, other_witness = load("poseidon")
    partial = prove_start(other_zkey, other_witness, backend="cpu")
    with pytest.raises(ProofError, match="different zkey"):
        prove_finish(partial, zkey, witness)


def test_witness_first_value_must_be_one(tmp_path):
    zkey, witness = load("mulchain")
    values = witness.values.copy()
    values[0, 0] = 2
    bad = tmp_path / "w.wtns"
    write_wtns(bad, values)
    with pytest.raises(FormatError, match=r"witness\[0\]"):
        prove_start(zkey, read_wtns(bad), backend="cpu")


# --- CLI and snarkjs interop -------------------------------------------------

@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", FIXTURES)
def test_cli_proof_verifies_with_snarkjs(name, tmp_path):
    d = fixture_dir(name)
    assert cli_main(["prove", str(d / "circuit.zkey"), str(d / "witness.wtns"),
                     str(tmp_path / "proof.json"), str(tmp_path / "public.json")]) == 0
    result = run_snarkjs("groth16", "verify", d / "verification_key.json",
                         tmp_path / "public.json", tmp_path / "proof.json")
    assert result.returncode == 0, result.stdout + result.stderr
    # Tampering with a public signal must make snarkjs reject our proof too.
    public = json.loads((tmp_path / "public.json").read_text())
    public[0] = str((int(public[0]) + 1) % FR)
    (tmp_path / "public_bad.json").write_text(json.dumps(public))
    result = run_snarkjs("groth16", "verify", d / "verification_key.json",
                         tmp_path / "public_bad.json", tmp_path / "proof.json")
    assert result.returncode != 0


def test_cli_verify_and_vkey(tmp_path, capsys):
    d = fixture_dir("poseidon")
    assert cli_main(["verify", str(d / "verification_key.json"), str(d / "public.json"),
                     str(d / "proof.json")]) == 0
    proof = json.loads((d / "proof.json").read_text())
    proof["pi_a"], proof["pi_c"] = proof["pi_c"], proof["pi_a"]
    (tmp_path / "swapped.json").write_text(json.dumps(proof))
    assert cli_main(["verify", str(d / "verification_key.json"), str(d / "public.json"),
                     str(tmp_path / "swapped.json")]) == 1
    assert cli_main(["vkey", str(d / "circuit.zkey"), str(tmp_path / "vk.json")]) == 0
    assert json.loads((tmp_path / "vk.json").read_text()) == json.loads(
        (d / "verification_key.json").read_text())


def test_cli_witness_then_prove(tmp_path):
    d = fixture_dir("mulchain")
    assert cli_main(["witness", str(d / "circuit.wasm"), str(d / "input.json"), str(tmp_path / "w.wtns")]) == 0
    assert (tmp_path / "w.wtns").read_bytes() == (d / "witness.wtns").read_bytes()
    assert cli_main(["prove", str(d / "circuit.zkey"), str(tmp_path / "w.wtns"),
                     str(tmp_path / "p.json"), str(tmp_path / "pub.json")]) == 0
    assert cli_main(["verify", str(d / "verification_key.json"), str(tmp_path / "pub.json"),
                     str(tmp_path / "p.json")]) == 0


def test_cli_bad_input_is_a_clear_error(tmp_path, capsys):
    d = fixture_dir("mulchain")
    truncated = tmp_path / "truncated.zkey"
    truncated.write_bytes((d / "circuit.zkey").read_bytes()[:1000])
    code = cli_main(["prove", str(truncated), str(d / "witness.wtns"),
                     str(tmp_path / "p.json"), str(tmp_path / "pub.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "truncated.zkey" in err and "error" in err
    assert not (tmp_path / "p.json").exists()


def _rewrite_sections(src, dst, order):
    """Copy an iden3 binary file with its sections written in ``order``."""
    from cuzk_tasks.groth16.formats.binfile import BinFile, write_bin_header, write_section

    with BinFile(src, b"zkey", (1,)) as bf:
        payloads = {t: bf.read(secs[0]) for t, secs in bf.sections.items()}
    assert sorted(order) == sorted(payloads)
    body = b"".join(write_section(t, payloads[t]) for t in order)
    dst.write_bytes(write_bin_header(b"zkey", 1, len(order)) + body)


def test_zkey_sections_in_any_order_prove_the_same(tmp_path):
    src = fixture_dir("mulchain") / "circuit.zkey"
    shuffled = tmp_path / "shuffled.zkey"
    _rewrite_sections(src, shuffled, [9, 4, 10, 7, 1, 5, 3, 8, 2, 6])
    assert shuffled.read_bytes() != src.read_bytes()
    original, reordered = read_zkey(src), read_zkey(shuffled)
    for name in ("ic", "a_points", "b1_points", "b2_points", "c_points", "h_points"):
        assert np.array_equal(getattr(original, name), getattr(reordered, name)), name
    assert np.array_equal(original.coefs, reordered.coefs)
    witness = read_wtns(fixture_dir("mulchain") / "witness.wtns")
    r, s = 5, 7
    assert prove_finish(prove_start(reordered, witness, backend="cpu"), reordered, witness, r=r, s=s) == \
        prove_finish(prove_start(original, witness, backend="cpu"), original, witness, r=r, s=s)
