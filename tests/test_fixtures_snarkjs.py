"""Sanity checks that the committed snarkjs/circom fixtures are consistent.

The fixtures are produced by ``tests/fixtures/regenerate.sh``; these tests
use the pinned snarkjs itself (``npm ci --prefix tools/node``) and are
skipped when it is not installed.
"""

from __future__ import annotations

import json

import pytest

from support.snarkjs_tool import (BLS12381_FIXTURES, FIXTURE_FILES, FIXTURES, FIXTURES_DIR,
                          fixture_dir, requires_snarkjs, run_snarkjs,
                          strip_ansi)


def _ok(proc) -> None:
    assert proc.returncode == 0, (
        f"snarkjs failed (rc={proc.returncode})\nstdout:\n{proc.stdout}\n"
        f"stderr:\n{proc.stderr}")


@pytest.mark.parametrize("name", FIXTURES + BLS12381_FIXTURES)
def test_fixture_files_present(name):
    d = fixture_dir(name)
    for f in FIXTURE_FILES:
        assert (d / f).is_file(), f"missing {d / f}"
        assert (d / f).stat().st_size > 0


def test_assert_fail_files_present():
    d = fixture_dir("assert_fail")
    for f in ["circuit.r1cs", "circuit.wasm", "circuit.zkey", "input.json",
              "input_bad.json", "witness.wtns", "verification_key.json"]:
        assert (d / f).is_file(), f"missing {d / f}"


def test_fixtures_total_size_small():
    # 5.04 MiB with the BLS12-381 fixtures, of which the two poseidon circuit.wasm files
    # (circomlib's Poseidon, one per prime) are 3.3 MiB
    total = sum(p.stat().st_size for p in FIXTURES_DIR.rglob("*")
                if p.is_file() and ".cache" not in p.parts)
    assert total <= 6 * 1024 * 1024, f"fixtures are {total} bytes"


def test_mulchain_has_two_public_signals():
    pub = json.loads((fixture_dir("mulchain") / "public.json").read_text())
    inp = json.loads((fixture_dir("mulchain") / "input.json").read_text())
    assert len(pub) == 2
    assert pub[1] == inp["b"]          # [c, b]: outputs first, then inputs
    vk = json.loads(
        (fixture_dir("mulchain") / "verification_key.json").read_text())
    assert vk["nPublic"] == 2 and len(vk["IC"]) == 3


@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", FIXTURES + BLS12381_FIXTURES)
def test_groth16_verify(name):
    d = fixture_dir(name)
    p = run_snarkjs("groth16", "verify", d / "verification_key.json",
                    d / "public.json", d / "proof.json")
    _ok(p)
    assert "OK" in strip_ansi(p.stdout)


@pytest.mark.snarkjs
@requires_snarkjs
def test_groth16_verify_rejects_tampered_public(tmp_path):
    d = fixture_dir("mulchain")
    pub = json.loads((d / "public.json").read_text())
    pub[0] = str(int(pub[0]) + 1)
    (tmp_path / "public.json").write_text(json.dumps(pub))
    p = run_snarkjs("groth16", "verify", d / "verification_key.json",
                    tmp_path / "public.json", d / "proof.json")
    assert p.returncode != 0
    assert "Invalid proof" in strip_ansi(p.stdout + p.stderr)


@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", FIXTURES + ["assert_fail"] + BLS12381_FIXTURES)
def test_wtns_check(name):
    d = fixture_dir(name)
    _ok(run_snarkjs("wtns", "check", d / "circuit.r1cs", d / "witness.wtns"))


@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", FIXTURES + BLS12381_FIXTURES)
def test_public_matches_witness(name, tmp_path):
    d = fixture_dir(name)
    out = tmp_path / "witness.json"
    _ok(run_snarkjs("wtns", "export", "json", d / "witness.wtns", out))
    w = json.loads(out.read_text())
    pub = json.loads((d / "public.json").read_text())
    assert w[0] == "1"
    assert w[1:1 + len(pub)] == pub


@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", FIXTURES + ["assert_fail"] + BLS12381_FIXTURES)
def test_verification_key_matches_zkey(name, tmp_path):
    d = fixture_dir(name)
    out = tmp_path / "vk.json"
    _ok(run_snarkjs("zkey", "export", "verificationkey", d / "circuit.zkey",
                    out))
    assert json.loads(out.read_text()) == json.loads(
        (d / "verification_key.json").read_text())


@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", FIXTURES + ["assert_fail"] + BLS12381_FIXTURES)
def test_wtns_calculate_reproduces_witness(name, tmp_path):
    d = fixture_dir(name)
    out = tmp_path / "w.wtns"
    _ok(run_snarkjs("wtns", "calculate", d / "circuit.wasm",
                    d / "input.json", out))
    assert out.read_bytes() == (d / "witness.wtns").read_bytes()


@pytest.mark.snarkjs
@requires_snarkjs
def test_assert_fail_bad_input_message(tmp_path):
    d = fixture_dir("assert_fail")
    p = run_snarkjs("wtns", "calculate", d / "circuit.wasm",
                    d / "input_bad.json", tmp_path / "bad.wtns")
    assert p.returncode != 0
    out = strip_ansi(p.stdout + p.stderr)
    assert "Assert Failed" in out
    assert "Error in template AssertFail_0 line: 10" in out
