"""Runaway and failing witness generation, and the spool, through real processes (issue 24):
redis-server, one CPU worker (2 pool processes), one device worker on the CPU backend.

Circuits: ``mulchain`` (the fixture), ``runaway`` and ``trapping`` (the mulchain zkey with a
hand-written wasm whose init never returns / traps: tests/support/runaway_wasm.py) and
``slow_test`` (mulchain, its prove slowed by the test instrument
CUZK_TEST_PROVE_DELAY_MS so witnesses wait in the spool).  The witness time limit is 3 s
(CUZK_WITNESS_TIME_LIMIT_S), max deliveries 2.  The spool is a 4 MiB tmpfs when this process
may mount one (the full-disk test needs it), else a plain directory.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest
from support import instruments
from support.processes import Cluster, write_circuits_toml
from support.runaway_wasm import write_wasm

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "runawayhost"
WITNESS_LIMIT_S = 3
MAX_DELIVERIES = 2

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


def _circuit_dir(base, name, behaviour):
    d = base / name
    d.mkdir()
    from cuzk_tasks.groth16.formats.zkey import read_zkey_header

    shutil.copy(FIX / "mulchain" / "circuit.zkey", d / "circuit.zkey")
    # as many wires as the zkey has: the CPU worker checks the pair at start
    write_wasm(d / "circuit.wasm", behaviour, wires=read_zkey_header(d / "circuit.zkey").n_vars)
    return d


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from cuzk_tasks.settings.config import load_settings
    from support.redis_server import RedisServer

    base = tmp_path_factory.mktemp("runaway")
    spool = base / "spool"
    spool.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(spool)],
                             capture_output=True).returncode == 0
    config = write_circuits_toml(base / "cuzk.toml", {
        "mulchain": ("test-mul", FIX / "mulchain"),
        "slow_test": ("test-slow", FIX / "mulchain"),
        "runaway": ("test-runaway", _circuit_dir(base, "runaway", "loop")),
        "trapping": ("test-trap", _circuit_dir(base, "trapping", "trap")),
    })
    server = RedisServer()
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(config),
        "CUZK_REDIS_URL": server.url,
        "CUZK_PREFIX": "runaway",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": "0.25",
        "CUZK_HEARTBEAT_TTL_S": "1.5",
        "CUZK_MAX_DELIVERIES": str(MAX_DELIVERIES),
        "CUZK_WITNESS_TIME_LIMIT_S": str(WITNESS_LIMIT_S),
        "CUZK_SPOOL_DIR": str(spool),
        "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),
        # TEST INSTRUMENT: witnesses of slow_test wait in the spool while the device proves
        "CUZK_TEST_PROVE_DELAY_MS": "slow_test=1500",
    })
    c = Cluster(base, env, load_settings(env=env), ROOT)
    c.spool, c.spool_mounted = spool, mounted
    try:
        c.start("cpu", "--cpu", "--concurrency", "2")
        c.start("dev0", "--device", "0", "--backend", "cpu")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if {w["worker_id"] for w in c.store.live_device_workers()} == {f"{HOST}:dev0"} \
                    and len(_pool(c)) == 2:
                break
            for name, proc in c.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{c.logs()}"
            time.sleep(0.1)
        else:
            pytest.fail("workers did not come up\n" + c.logs())
        yield c
    finally:
        c.stop_all()
        server.stop()
        if mounted:
            subprocess.run(["umount", "-l", str(spool)], check=False)


def _pool(c):
    """Pids of the CPU worker's pool processes (its main process's children)."""
    pid = c.procs["cpu"].pid
    out = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return sorted(out)


def _input():
    return {"input": json.loads((FIX / "mulchain" / "input.json").read_text())}


def _job_error(c, job_id, timeout=60):
    from cuzk_tasks.errors import JobError

    with pytest.raises(JobError) as info:
        c.client.wait(job_id, timeout=timeout)
    return str(info.value)


def _assert_proves(c, n=2):
    from cuzk_tasks.groth16 import verify

    job = c.client.submit("mulchain", [_input()] * n)
    result = c.client.wait(job, timeout=60)
    vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    assert len(result["proofs"]) == n
    assert all(verify(vk, p["public"], p["proof"]) for p in result["proofs"])


def test_a_wasm_that_never_returns_fails_its_job_and_the_worker_lives_on(cluster):
    c = cluster
    pool = _pool(c)
    t0 = time.monotonic()
    job = c.client.submit("runaway", [_input()])
    error = _job_error(c, job)
    took = time.monotonic() - t0
    assert f"witness generation exceeded {WITNESS_LIMIT_S} s" in error, error
    assert "circuit 'runaway'" in error and "internal error" not in error
    part = c.store.get_partition(job, 0)
    # failed cleanly on its first delivery: no kill, no re-drive
    assert (part["state"], part["attempt"], part["synth_deliveries"]) == ("failed", 0, 1)
    assert WITNESS_LIMIT_S <= took < WITNESS_LIMIT_S + 20, took
    assert c.procs["cpu"].poll() is None and _pool(c) == pool  # no pool process was replaced
    _assert_proves(c)


def test_a_trapping_wasm_fails_its_job_naming_the_cause(cluster):
    c = cluster
    error = _job_error(c, c.client.submit("trapping", [_input()]))
    assert "circuit 'trapping'" in error and "wasm trap: wasm `unreachable` instruction " \
        "executed" in error, error
    assert "internal error" not in error and "backtrace" not in error


def test_a_synthesize_whose_process_keeps_dying_fails_after_max_deliveries(cluster):
    """kill -9 of the pool process running synthesize (what the hard time limit, or the OOM
    killer, does): the message is redelivered; each delivery counts and after
    MAX_DELIVERIES the partition and its job fail instead of being redelivered for ever."""
    from cuzk_tasks.errors import JobError

    c = cluster
    job = c.client.submit("runaway", [_input()])
    kills, seen = 0, 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and kills < MAX_DELIVERIES + 3:
        part = c.store.get_partition(job, 0)
        if part["state"] not in ("pending", "synthesizing"):
            break
        delivered = part.get("synth_deliveries") or 0
        if part["state"] == "synthesizing" and delivered > seen:
            seen = delivered
            for pid in _pool(c):  # whichever runs it: the worker forks new ones
                os.kill(pid, signal.SIGKILL)
            kills += 1
        time.sleep(0.02)
    with pytest.raises(JobError) as info:
        c.client.wait(job, timeout=30)
    error = str(info.value)
    assert f"synthesize was delivered {MAX_DELIVERIES + 1} times without finishing" in error, \
        f"{error}\n{c.logs()}"
    assert kills == MAX_DELIVERIES
    assert c.store.get_partition(job, 0)["synth_deliveries"] == MAX_DELIVERIES + 1
    # the worker has replaced its pool processes and goes on
    _assert_proves(c)


def test_a_cancelled_jobs_witnesses_leave_the_spool(cluster):
    c = cluster
    n = 6
    job = c.client.submit("slow_test", [_input()] * n)
    job_dir = c.spool / job
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # several witnesses wait for the (slow) device
        if job_dir.is_dir() and len(list(job_dir.glob("*.wtns"))) >= 3:
            break
        time.sleep(0.05)
    else:
        pytest.fail("witnesses did not pile up in the spool\n" + c.logs())
    assert c.client.cancel(job)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and job_dir.exists():
        time.sleep(0.1)
    assert not job_dir.exists(), (sorted(os.listdir(job_dir)), c.logs())


def test_a_full_spool_disk_is_waited_out_not_a_failed_job(cluster):
    c = cluster
    if not c.spool_mounted:
        pytest.skip("no tmpfs for the spool (mounting needs root)")
    filler = c.spool / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    try:
        job = c.client.submit("mulchain", [_input()])
        log = c.base / "cpu.log"
        # waited out in the task for SPOOL_FULL_WAIT_S, then handed back to the queue
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and \
                "partition queued again (attempt 1)" not in log.read_text():
            time.sleep(0.1)
        text = log.read_text()
        assert "spool disk full: no room for a witness of" in text, c.logs()
        assert f"bytes ({c.spool}); retrying in" in text, c.logs()  # the log names the dir
        assert "partition queued again (attempt 1)" in text, c.logs()
        assert c.store.get_job(job)["state"] == "running"
    finally:
        filler.unlink()
    result = c.client.wait(job, timeout=60)
    assert len(result["proofs"]) == 1
    part = c.store.get_partition(job, 0)
    assert part["outage_retries"] >= 1 and part["attempt"] >= 1
    assert part["last_outage"].startswith("spool disk full: no room for a witness of")
    assert str(c.spool) not in part["last_outage"]  # what a caller may read names no server path
    assert part["synth_deliveries"] == 1  # the handed-back deliveries do not count
