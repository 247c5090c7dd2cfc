"""The command line on runaway work and broken files (issue 24): Ctrl-C stops a wasm that
never returns (exit 130, one line), a trapping wasm or a corrupt zkey is one line naming the
file, never a traceback.  Each runs ``python -m cuzk_tasks`` as a real subprocess."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

from support.processes import ctrl_c
from support.runaway_wasm import write_wasm

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def _cli(*args, env=None):
    return [sys.executable, "-m", "cuzk_tasks", *map(str, args)]


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("CUZK_WITNESS_TIME_LIMIT_S", None)
    env.update(extra)
    return env


@pytest.fixture
def input_json(tmp_path):
    path = tmp_path / "input.json"
    path.write_text('{"a": 1}')
    return path


def test_ctrl_c_stops_a_wasm_that_never_returns(tmp_path, input_json):
    wasm = write_wasm(tmp_path / "loop.wasm", "loop")
    out = tmp_path / "w.wtns"
    proc = subprocess.Popen(_cli("witness", wasm, input_json, out), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # well inside the wasm's endless loop (start-up + compile take < 3 s)
    sent = time.monotonic()
    _, stderr = ctrl_c(proc)
    took = time.monotonic() - sent
    assert proc.returncode == 130, stderr
    assert stderr == "cuzk-tasks witness: interrupted\n"
    assert took < 5, took
    assert not out.exists() and list(tmp_path.glob("w.wtns*")) == []  # no half-written file


def test_the_witness_time_limit_applies_to_the_command_line(tmp_path, input_json):
    wasm = write_wasm(tmp_path / "loop.wasm", "loop")
    done = subprocess.run(_cli("witness", wasm, input_json, tmp_path / "w.wtns"), cwd=ROOT,
                          env=_env(CUZK_WITNESS_TIME_LIMIT_S="1"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"cuzk-tasks witness: error: {input_json}: witness generation "
                           f"exceeded 1 s in {wasm} (witness_time_limit_s)\n")


def test_a_trapping_wasm_is_one_line_without_a_traceback(tmp_path, input_json):
    wasm = write_wasm(tmp_path / "trap.wasm", "trap")
    done = subprocess.run(_cli("witness", wasm, input_json, tmp_path / "w.wtns"), cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"cuzk-tasks witness: error: {input_json}: witness generation "
                           f"failed in {wasm}: wasm trap: wasm `unreachable` instruction "
                           "executed\n")


def test_prove_on_corrupt_point_data_names_the_zkey_and_section(tmp_path):
    from cuzk_tasks.groth16.formats.zkey import read_zkey

    d = FIX / "mulchain"
    data = bytearray((d / "circuit.zkey").read_bytes())
    point = read_zkey(d / "circuit.zkey").a_points[1].tobytes()
    at = data.find(point)
    assert at > 0
    data[at:at + 32] = b"\xff" * 32  # an x coordinate >= the field modulus
    bad = tmp_path / "bad.zkey"
    bad.write_bytes(bytes(data))
    done = subprocess.run(_cli("prove", bad, d / "witness.wtns", tmp_path / "p.json",
                               tmp_path / "pub.json", "--backend", "cpu"),
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"cuzk-tasks prove: error: {bad}: A points: point data "
                                  "rejected by the prover (native G1 MSM failed (status 3)")
