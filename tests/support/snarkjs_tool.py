"""Tiny helper for tests that call the pinned snarkjs (tools/node).

Install the tooling with ``npm ci --prefix tools/node``.  Tests that need it
should be decorated with ``@requires_snarkjs`` (and ``@pytest.mark.snarkjs``).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "tools" / "node" / "node_modules"
SNARKJS = NODE_MODULES / ".bin" / "snarkjs"
CIRCOM = NODE_MODULES / ".bin" / "circom2"
FIXTURES_DIR = ROOT / "tests" / "fixtures"

# Fixtures with a full set of files (r1cs, wasm, zkey, input, wtns, proof,
# public, verification key).  ``assert_fail`` is separate: it has no proof
# and an extra ``input_bad.json`` whose witness computation fails.
FIXTURES = ["mulchain", "mulchain_1k", "poseidon"]

# The same file set over BLS12-381 (circom --prime bls12381, snarkjs curve "bls12381"),
# in tests/fixtures/bls12381/<name>/.  Kept apart: tests over FIXTURES assume BN254.
BLS12381_FIXTURES = ["bls12381/mulchain", "bls12381/poseidon"]

# Files present in every directory named in FIXTURES.
FIXTURE_FILES = [
    "circuit.r1cs",
    "circuit.wasm",
    "circuit.zkey",
    "input.json",
    "witness.wtns",
    "proof.json",
    "public.json",
    "verification_key.json",
]


def fixture_dir(name: str) -> pathlib.Path:
    """Directory of the committed fixture ``name`` (e.g. ``"mulchain"``)."""
    return FIXTURES_DIR / name


def have_snarkjs() -> bool:
    """True when node is on PATH and tools/node has been installed."""
    return SNARKJS.exists() and shutil.which("node") is not None


def run_snarkjs(*args, timeout: float = 300, check: bool = False,
                cwd=None) -> subprocess.CompletedProcess:
    """Run ``snarkjs *args``; returns the CompletedProcess (text mode).

    Arguments are converted with ``str()`` so ``pathlib.Path`` is fine.
    snarkjs writes its log (including ``[ERROR] snarkJS: ...``) to stdout
    with ANSI colour codes; ``NO_COLOR``/``FORCE_COLOR=0`` are set to reduce
    them, but callers matching messages should still strip escape codes
    (see :func:`strip_ansi`).
    """
    env = dict(os.environ)
    env.setdefault("NO_COLOR", "1")
    env.setdefault("FORCE_COLOR", "0")
    return subprocess.run(
        [str(SNARKJS), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        cwd=cwd,
        env=env,
    )


def snarkjs_verify(tmp_path, vkey: dict, public: list, proof: dict) -> bool:
    """``snarkjs groth16 verify`` on the given JSON objects (written, as snarkjs writes
    them, into ``tmp_path``): True iff snarkjs accepts the proof."""
    from cuzk_tasks.groth16.formats import jsonio

    jsonio.dump_json(vkey, tmp_path / "vk.json")
    jsonio.dump_json(public, tmp_path / "pub.json")
    jsonio.dump_json(proof, tmp_path / "proof.json")
    proc = run_snarkjs("groth16", "verify", tmp_path / "vk.json", tmp_path / "pub.json",
                       tmp_path / "proof.json", timeout=120)
    return proc.returncode == 0


def strip_ansi(text: str) -> str:
    """Remove ANSI colour escape sequences (snarkjs colours its log)."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


requires_snarkjs = pytest.mark.skipif(
    not have_snarkjs(),
    reason="snarkjs not installed: run npm ci --prefix tools/node",
)
