"""Compiled wasm modules cached across processes (issue 25 item 2): cuzk_tasks/groth16/
wasm_cache.py through WitnessCalculator, with real processes sharing one cache directory."""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import stat
import subprocess
import sys
import time

import pytest

from cuzk_tasks.settings import defaults
from cuzk_tasks.groth16.wasm_cache import entry_name, wasmtime_version
from cuzk_tasks.groth16.witness import WitnessCalculator, load_input_json

from support.snarkjs_tool import fixture_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One calculation in a fresh process: waits for the file `go` (after printing "ready"),
# then prints the SHA-256 of the .wtns; wasm_cache's log lines go to stderr.
_CHILD = r"""
import hashlib, logging, os, sys, time
logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
from cuzk_tasks.groth16.witness import WitnessCalculator, load_input_json
wasm, inp, cache, go = sys.argv[1:5]
print("ready", flush=True)
while go != "-" and not os.path.exists(go):
    time.sleep(0.005)
wc = WitnessCalculator(wasm, cache_dir=cache)
print(hashlib.sha256(wc.calculate_wtns(load_input_json(inp))).hexdigest(), flush=True)
"""


def _child(name, cache, go="-"):
    d = fixture_dir(name)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.path.join(ROOT, "tests"))
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(d / "circuit.wasm"),
                             str(d / "input.json"), str(cache), str(go)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)


def _finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return out.split()[-1], err


def _expected(name):
    return hashlib.sha256((fixture_dir(name) / "witness.wtns").read_bytes()).hexdigest()


def _entry(cache, name):
    return cache / entry_name((fixture_dir(name) / "circuit.wasm").read_bytes(),
                              WitnessCalculator.compile_settings())


def _cwasm(cache):
    return sorted(p.name for p in cache.iterdir() if p.name.endswith(".cwasm"))


def test_a_second_process_loads_the_compiled_module_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first, err = _finish(_child("poseidon", cache))
    assert first == _expected("poseidon")
    assert f"compiled {fixture_dir('poseidon') / 'circuit.wasm'}" in err
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    entry = _entry(cache, "poseidon")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert len(_cwasm(cache)) == 2  # the circuit and the bulk helper

    second, err = _finish(_child("poseidon", cache))
    assert second == first
    assert f"loaded {fixture_dir('poseidon') / 'circuit.wasm'} from {entry}" in err
    assert "loaded the bulk helper" in err
    assert "compiled" not in err  # neither module was compiled again


def test_concurrent_writers_of_one_entry_all_succeed_and_leave_one_valid_entry(tmp_path):
    """Four processes compile the same circuit into the same empty cache at the same moment
    (each waits for the go file after its imports)."""
    cache, go = tmp_path / "cache", tmp_path / "go"
    procs = [_child("poseidon", cache, go) for _ in range(4)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    go.touch()
    results = [_finish(p) for p in procs]
    assert {h for h, _ in results} == {_expected("poseidon")}
    wasm = fixture_dir("poseidon") / "circuit.wasm"
    assert sum(f"compiled {wasm}" in err for _, err in results) >= 2  # they did race
    assert len(_cwasm(cache)) == 2
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp-")]
    # the entry left is whole: the next process loads it
    again, err = _finish(_child("poseidon", cache))
    assert again == _expected("poseidon") and "compiled" not in err


def _other_settings(data, wasm):
    import wasmtime

    return wasmtime.Module(wasmtime.Engine(), wasm).serialize()  # no epoch interruption


def _other_version(data, wasm):
    # the engine section names the wasmtime major version, then the target triple
    major = wasmtime_version().split(".")[0].encode()
    triple = f"{platform.machine()}-unknown-linux-gnu".encode()
    needle = bytes([len(major)]) + major + bytes([len(triple)]) + triple
    if needle not in data:
        pytest.skip("the serialized module's version field is not where this test looks")
    older = str(int(major) - 1).encode()
    return data.replace(needle, bytes([len(older)]) + older + bytes([len(triple)]) + triple, 1)


@pytest.mark.parametrize("damage", [
    lambda data, wasm: b"not a compiled module",
    lambda data, wasm: data[:len(data) // 2],  # a writer killed half-way (no rename, but say)
    _other_settings,
    _other_version,  # the same key after a wasmtime upgrade that kept the version string
], ids=["garbage", "truncated", "other-engine-settings", "other-wasmtime-version"])
def test_a_stale_or_damaged_entry_is_compiled_again_and_replaced(tmp_path, caplog, damage):
    cache = tmp_path / "cache"
    d = fixture_dir("mulchain")
    wasm = (d / "circuit.wasm").read_bytes()
    expected = (d / "witness.wtns").read_bytes()
    WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
    entry = _entry(cache, "mulchain")
    entry.write_bytes(damage(entry.read_bytes(), wasm))

    caplog.set_level(logging.DEBUG, logger="cuzk_tasks.groth16.wasm_cache")
    wc = WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == expected
    stale = [r for r in caplog.records if "stale or damaged" in r.getMessage()]
    assert len(stale) == 1 and stale[0].levelno == logging.INFO, caplog.text
    assert str(entry) in stale[0].getMessage()
    assert any("compiled" in r.getMessage() for r in caplog.records)

    caplog.clear()  # replaced by a whole entry: the next calculator loads it
    WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
    assert any(f"loaded {d / 'circuit.wasm'} from" in r.getMessage() for r in caplog.records)
    assert not any("compiled" in r.getMessage() for r in caplog.records)
    assert len(_cwasm(cache)) == 2


def test_an_entry_of_another_wasmtime_version_is_left_alone(tmp_path):
    """After an upgrade the key differs: the old entry is not read (nor deleted: another
    installation on the host may still use it)."""
    cache = tmp_path / "cache"
    d = fixture_dir("mulchain")
    WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
    entry = _entry(cache, "mulchain")
    old = cache / entry.name.replace(f"wasmtime{wasmtime_version()}", "wasmtime1.0.0")
    assert old != entry
    os.replace(entry, old)
    old.write_bytes(b"an entry of wasmtime 1.0.0")
    wc = WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == \
        (d / "witness.wtns").read_bytes()
    assert entry.exists() and old.read_bytes() == b"an entry of wasmtime 1.0.0"


def test_an_entry_others_may_write_is_never_loaded(tmp_path, caplog):
    cache = tmp_path / "cache"
    d = fixture_dir("mulchain")
    WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
    entry = _entry(cache, "mulchain")
    entry.chmod(0o666)
    caplog.set_level(logging.DEBUG, logger="cuzk_tasks.groth16.wasm_cache")
    wc = WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == \
        (d / "witness.wtns").read_bytes()
    assert any("ignored" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records), caplog.text
    assert not any("loaded" in r.getMessage() and "circuit.wasm" in r.getMessage()
                   for r in caplog.records)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600  # replaced by a private one


def test_a_directory_others_may_write_turns_the_cache_off(tmp_path, caplog):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    d = fixture_dir("mulchain")
    caplog.set_level(logging.DEBUG, logger="cuzk_tasks.groth16.wasm_cache")
    for _ in range(2):
        wc = WitnessCalculator(d / "circuit.wasm", cache_dir=cache)
        assert wc.calculate_wtns(load_input_json(d / "input.json")) == \
            (d / "witness.wtns").read_bytes()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not used" in warnings[0].getMessage()  # once a process
    assert list(cache.iterdir()) == []


def test_a_cache_directory_that_cannot_be_made_is_no_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    d = fixture_dir("mulchain")
    wc = WitnessCalculator(d / "circuit.wasm", cache_dir=blocker / "cache")
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == \
        (d / "witness.wtns").read_bytes()


def test_the_witness_command_compiles_once(tmp_path):
    """``cuzk-tasks witness`` uses the cache named by CUZK_WASM_CACHE_DIR: the second run
    loads the module (``-v`` logs the cache's debug lines)."""
    d = fixture_dir("mulchain_1k")
    env = dict(os.environ, PYTHONPATH=ROOT, CUZK_WASM_CACHE_DIR=str(tmp_path / "cache"))
    errs = []
    for i in range(2):
        out = tmp_path / f"w{i}.wtns"
        proc = subprocess.run([sys.executable, "-m", "cuzk_tasks", "-v", "witness",
                               str(d / "circuit.wasm"), str(d / "input.json"), str(out)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert out.read_bytes() == (d / "witness.wtns").read_bytes()
        errs.append(proc.stderr)
    assert "wasm cache: compiled" in errs[0]
    assert "wasm cache: loaded" in errs[1] and "compiled" not in errs[1]


@pytest.mark.parametrize("env, expected", [
    ({"CUZK_WASM_CACHE_DIR": "/var/cache/x"}, "/var/cache/x"),
    ({"CUZK_WASM_CACHE_DIR": ""}, None),
    ({"CUZK_WASM_CACHE_DIR": " off "}, None),
    ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/cuzk-tasks/wasm"),
    ({"XDG_CACHE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.cache/cuzk-tasks/wasm"),
    ({"HOME": "/home/u"}, "/home/u/.cache/cuzk-tasks/wasm"),
])
def test_the_cache_directory_comes_from_the_environment(monkeypatch, env, expected):
    for name in ("CUZK_WASM_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert defaults.wasm_cache_dir() == expected


def test_old_temporary_files_of_dead_writers_are_swept(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    old, fresh = cache / ".tmp-dead.cwasm", cache / ".tmp-busy.cwasm"
    for p in (old, fresh):
        p.write_bytes(b"half a module")
    past = time.time() - 2 * 3600
    os.utime(old, (past, past))
    WitnessCalculator(fixture_dir("mulchain") / "circuit.wasm", cache_dir=cache)  # writes
    assert not old.exists() and fresh.exists()
