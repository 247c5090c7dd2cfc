"""cuzk_tasks/service/preflight.py: a worker stops at start, in one line, on an operator's
usual mistakes -- a Redis that evicts keys, a spool or results directory it cannot write --
instead of losing or failing jobs later (issue 49).  Real redis-server, real worker
processes (``cuzk-tasks worker``) for the refusals."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from support.processes import write_circuits_toml

from cuzk_tasks.errors import ConfigError
from cuzk_tasks.service import preflight
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.state import StateStore

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)",
                allow_module_level=True)


@pytest.fixture
def server():
    from support.redis_server import RedisServer

    s = RedisServer()
    try:
        yield s
    finally:
        s.stop()


def _env(server, tmp_path, **more):
    env = dict(os.environ)
    env.update({"CUZK_CONFIG": str(write_circuits_toml(tmp_path / "cuzk.toml", {
                    "mulchain": ("test-mul", FIX / "mulchain")})),
                "CUZK_REDIS_URL": server.url, "CUZK_PREFIX": "pre", "CUZK_HOSTNAME": "prehost",
                "CUZK_SPOOL_DIR": str(tmp_path / "spool"), "CUZK_THREADS": "1"})
    env.update(more)
    return env


def _worker(env, *args, wrap=()):
    """``cuzk-tasks worker ARGS`` run to its end (it must refuse to start): (rc, stderr)."""
    done = subprocess.run([*wrap, sys.executable, "-m", "cuzk_tasks", "worker", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr


def _one_error_line(stderr, needle):
    lines = [line for line in stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and needle in lines[0], stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("args", [("--cpu",), ("--device", "0", "--backend", "cpu")])
def test_a_worker_refuses_a_redis_that_evicts_keys(server, tmp_path, args):
    import redis

    client = redis.Redis.from_url(server.url)
    client.config_set("maxmemory-policy", "allkeys-lru")
    env = _env(server, tmp_path)
    rc, stderr = _worker(env, *args)
    assert rc == 2, stderr[-3000:]
    line = _one_error_line(stderr, "evicts keys (maxmemory-policy allkeys-lru)")
    assert "maxmemory-policy noeviction" in line
    store = StateStore.from_settings(load_settings(env=env))
    assert store.all_workers() == []  # it never registered


def test_no_eviction_passes_and_a_missing_directory_is_made(server, tmp_path):
    settings = load_settings(env=_env(server, tmp_path, CUZK_RESULTS_DIR=str(tmp_path / "r" / "s")))
    store = StateStore.from_settings(settings)
    assert store.eviction_policy() == "noeviction"
    preflight.check_cpu_worker(settings, store)
    assert (tmp_path / "spool").is_dir() and (tmp_path / "r" / "s").is_dir()
    assert os.listdir(tmp_path / "spool") == []  # the probe file is gone


def test_a_directory_that_cannot_be_made_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match=r"^results_dir .*/file/results: this worker cannot "
                                          r"write there \(Not a directory\); .*CUZK_RESULTS_DIR"):
        preflight.check_writable_dir(str(blocker / "results"), "results_dir", "CUZK_RESULTS_DIR")


def _read_only_wrap(path):
    """A command prefix that runs its command with ``path`` mounted read-only (a private
    mount namespace: root and util-linux's unshare), or None where that cannot be made."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            f"mount --bind {path} {path} && mount -o remount,bind,ro {path} "
                            f"&& ! touch {path}/x 2>/dev/null"], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind {path} {path} && mount -o remount,bind,ro {path} && exec "$@"', "sh"]


@pytest.mark.parametrize("setting, env_name", [("spool_dir", "CUZK_SPOOL_DIR"),
                                               ("results_dir", "CUZK_RESULTS_DIR")])
def test_a_cpu_worker_refuses_a_read_only_directory(server, tmp_path, setting, env_name):
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:  # the owner's write bit suffices without root
        ro.chmod(0o555)
        wrap, reason = (), "Permission denied"
    else:
        wrap, reason = _read_only_wrap(str(ro)), "Read-only file system"
        if wrap is None:
            pytest.skip("cannot mount a directory read-only here (needs unshare and mount)")
    env = _env(server, tmp_path, **{env_name: str(ro)})
    rc, stderr = _worker(env, "--cpu", wrap=wrap)
    assert rc == 2, stderr[-3000:]
    line = _one_error_line(stderr, f"{setting} {ro}: this worker cannot write there ({reason})")
    assert env_name in line
    store = StateStore.from_settings(load_settings(env=env))
    assert store.all_workers() == []


def _toml(tmp_path, zkey, wasm):
    path = tmp_path / "mixed.toml"
    path.write_text(f'[circuits.mixed]\nkind = "test"\nzkey = "{zkey}"\nwasm = "{wasm}"\n')
    return str(path)


@pytest.mark.parametrize("zkey, wasm, needle", [
    (FIX / "mulchain" / "circuit.zkey", FIX / "poseidon" / "circuit.wasm",
     "circuit 'mixed': wasm {wasm} computes {wires} wires but zkey {zkey} has nVars={nvars}: "
     "the two are not of the same circuit"),
    (FIX / "bls12381" / "mulchain" / "circuit.zkey", FIX / "mulchain" / "circuit.wasm",
     "circuit 'mixed': wasm {wasm}: prime: witness is for BN254"),
    (FIX / "mulchain" / "missing.zkey", FIX / "mulchain" / "circuit.wasm",
     "circuit 'mixed': zkey {zkey}: "),
], ids=["wires", "curve", "no-zkey"])
def test_a_cpu_worker_refuses_a_circuit_whose_files_do_not_belong_together(
        server, tmp_path, zkey, wasm, needle):
    """Before, the worker started and every job of the circuit failed at synthesize."""
    from cuzk_tasks.groth16.formats.zkey import read_zkey_header
    from cuzk_tasks.groth16.witness import WitnessCalculator

    env = _env(server, tmp_path, CUZK_CONFIG=_toml(tmp_path, zkey, wasm))
    rc, stderr = _worker(env, "--cpu")
    assert rc == 2, stderr[-3000:]
    wires = WitnessCalculator(str(wasm)).witness_size
    nvars = read_zkey_header(str(zkey)).n_vars if zkey.exists() else None
    _one_error_line(stderr, needle.format(wasm=wasm, zkey=zkey, wires=wires, nvars=nvars))
    assert StateStore.from_settings(load_settings(env=env)).all_workers() == []


def test_a_device_worker_reads_only_the_zkey(tmp_path):
    """A device worker never runs the witness generator: a mismatched wasm is the CPU
    worker's to refuse; a zkey that does not read is both's."""
    settings = load_settings(env={"CUZK_CONFIG": _toml(
        tmp_path, FIX / "mulchain" / "circuit.zkey", FIX / "poseidon" / "circuit.wasm")})
    preflight.check_circuits(settings, witness=False)
    with pytest.raises(ConfigError, match="computes .* wires but zkey"):
        preflight.check_circuits(settings, witness=True)


def test_a_device_worker_refuses_a_backend_that_cannot_start(server, tmp_path):
    """``--backend gpu`` without CuPy, or with CuPy and no GPU (CI installs the extra)."""
    import importlib.util

    cupy = importlib.util.find_spec("cupy") is not None
    if cupy and preflight.in_child(_gpu_count)["count"]:
        pytest.skip("a GPU is visible here: the GPU backend may start")
    env = _env(server, tmp_path)
    rc, stderr = _worker(env, "--device", "0", "--backend", "gpu")
    assert rc == 2, stderr[-3000:]
    _one_error_line(stderr, "backend gpu: " if cupy else
                    "backend gpu: the GPU backend needs CuPy, which is not installed")
    assert StateStore.from_settings(load_settings(env=env)).all_workers() == []


def _gpu_count():
    from cuzk_tasks.groth16.backends.gpu import device_count

    return {"count": device_count()}


def test_a_check_child_that_dies_is_reported():
    checked = preflight.in_child(lambda: os.kill(os.getpid(), 9))
    assert checked == {"problems": ["the start-up check of circuits and backend died (signal 9)"]}


def test_the_cpu_workers_check_returns_each_circuits_input_map(tmp_path):
    settings = load_settings(env={"CUZK_CONFIG": str(write_circuits_toml(tmp_path / "c.toml", {
        "mulchain": ("m", FIX / "mulchain"), "poseidon": ("p", FIX / "poseidon")}))})
    maps = preflight.check_circuits(settings, witness=True)["input_maps"]
    assert maps["mulchain"] == {"a": 1, "b": 1}
    assert set(maps["poseidon"]) == set(json.loads((FIX / "poseidon" / "input.json").read_text()))
