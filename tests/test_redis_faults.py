"""Chaos: Redis errors that are outages, not crashes (issue 24), under real processes.

A redis-server WITHOUT persistence, one device worker (CPU backend) and one CPU worker,
short heartbeats.  Each scenario puts Redis in one failing state while the workers run and
asserts that every worker process survives it and that a job submitted during or after it
completes once Redis answers normally again:

* ``test_a_busy_script_kills_no_worker``: a Lua script runs past ``lua-time-limit``, so
  Redis answers every other client ``BUSY`` until it ends;
* ``test_redis_at_maxmemory_kills_no_worker``: ``maxmemory`` below what is used, with
  ``noeviction``: writes answer ``OOM`` until it is raised;
* ``test_redis_read_only_for_a_while_kills_no_worker``: Redis made a replica for a while
  (a demoted primary): writes answer ``READONLY``;
* ``test_redis_back_empty_workers_register_again``: Redis killed -9 and started again empty
  on the same port: the workers register again (role, queue, device) within a heartbeat
  or two and new jobs complete, nothing restarted;
* ``test_sigterm_while_redis_is_gone_stops_a_worker_in_bounded_time``: SIGTERM to each
  worker while Redis is down: it exits within seconds, not only by SIGKILL.

One scenario: ``python -m pytest -q tests/test_redis_faults.py -k busy``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time

import pytest
from support import instruments
from support.processes import Cluster, write_circuits_toml

pytestmark = [pytest.mark.slow, pytest.mark.chaos]

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "faulthost"
#: a TTL longer than the BUSY script: a by-name submit made during it finds a CPU worker online
HB_INTERVAL, HB_TTL = 0.25, 6.0
WORKERS = {"dev0": ("--device", "0", "--backend", "cpu"),
           "cpu": ("--cpu", "--concurrency", "2")}

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture
def redis_server():
    """A throwaway redis-server without persistence: killed and restarted, it comes back empty."""
    from support.redis_server import RedisServer

    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cluster(redis_server, tmp_path):
    from cuzk_tasks.settings.config import load_settings

    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(tmp_path / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain")})),
        "CUZK_REDIS_URL": redis_server.url,
        "CUZK_PREFIX": "faults",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL),
        "CUZK_HEARTBEAT_TTL_S": str(HB_TTL),
        "CUZK_SPOOL_DIR": str(tmp_path / "spool"),
        "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),
        # TEST INSTRUMENTS: stages in flight (and acknowledged) across the fault
        "CUZK_TEST_PROVE_DELAY_MS": "300",
        "CUZK_TEST_FINALIZE_DELAY_MS": "200",
    })
    c = Cluster(tmp_path, env, load_settings(env=env), ROOT)
    try:
        for name, args in WORKERS.items():
            c.start(name, *args)
        _await_workers(c, 60)
        yield c
    finally:
        c.stop_all()


def _await_workers(c, timeout):
    """Until the device worker is routable and the CPU worker online with its role."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            workers = {w["worker_id"]: w for w in c.store.all_workers()}
        except Exception:  # noqa: BLE001 - Redis may still be in its fault
            workers = {}
        devices = {w["worker_id"] for w in c.store.live_device_workers(list(workers.values()))} \
            if workers else set()
        cpu = [w for w in workers.values() if w.get("role") == "cpu" and w.get("online")]
        if f"{HOST}:dev0" in devices and cpu:
            return
        _assert_alive(c)
        assert time.monotonic() < deadline, f"workers not (back) online: {workers}\n{c.logs()}"
        time.sleep(0.1)


def _assert_alive(c):
    for name, proc in c.procs.items():
        assert proc.poll() is None, f"{name} exited (code {proc.returncode})\n{c.logs()}"


def _await_state(c, job, state, timeout=30):
    deadline = time.monotonic() + timeout
    while state not in {p["state"] for p in c.store.list_partitions(job)}:
        assert time.monotonic() < deadline, f"no partition of {job} reached {state}\n{c.logs()}"
        time.sleep(0.01)


def _by_name_client(c):
    """A client without the circuit registry: its submit goes by name to a CPU worker."""
    from cuzk_tasks.client import Client

    return Client(settings=c.settings.replace(circuits={}))


def _submit_in_threads(*clients):
    """Each client submits a job of 2 partitions, all at once; their ids, in order."""
    ids, errors = [None] * len(clients), []

    def submit(i, client):
        try:
            ids[i] = client.submit("mulchain", [{"input": _inputs()}] * 2)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=submit, args=(i, cl)) for i, cl in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors and all(ids), errors
    return ids


def _inputs():
    return json.loads((FIX / "mulchain" / "input.json").read_text())


def _job_completes(c, job, timeout=60):
    from cuzk_tasks.groth16 import verify

    result = c.client.wait(job, timeout=timeout)
    vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    assert result["proofs"] and all(verify(vk, p["public"], p["proof"]) for p in result["proofs"])


def _log(c, name) -> str:
    return (c.base / f"{name}.log").read_text(errors="replace")


def _logged(c, word) -> int:
    """How often ``word`` stands in the cluster's worker logs."""
    return sum(_log(c, name).count(word) for name in c.procs)


def _no_unrecoverable(c):
    for name in c.procs:
        log = _log(c, name)
        assert "Unrecoverable error" not in log, f"{name}\n{log[-3000:]}"


def _operator(server):
    """A client of its own, as an operator's (or another application's) would be: not the
    cluster's, whose connections the fault is meant to meet.  Replies decoded."""
    import redis

    return redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True,
                       socket_timeout=30)


def _errorstats(server) -> str:
    """The error reply counts Redis has seen (INFO errorstats), as one text."""
    return str(_operator(server).info("errorstats"))


#: a script that keeps Redis busy for 4 s (Redis answers every other client BUSY meanwhile)
BUSY_SCRIPT = ("local t = tonumber(redis.call('TIME')[1]) + 4 "
               "while tonumber(redis.call('TIME')[1]) < t do end return 1")


def test_a_busy_script_kills_no_worker(cluster, redis_server):
    c = cluster
    # BUSY after 100 ms of script, not Redis's 5 s default: the same reply, a shorter test
    assert _operator(redis_server).config_set("lua-time-limit", 100)
    before = c.client.submit("mulchain", [{"input": _inputs()}] * 4)
    _await_state(c, before, "proving")
    busy = threading.Thread(target=_operator(redis_server).eval, args=(BUSY_SCRIPT, 0))
    busy.start()
    time.sleep(1.0)  # 3 s of BUSY left
    # submitted while Redis answers BUSY: the client rides it out too, with the registry
    # and by name (a CPU worker creates the job)
    during = _submit_in_threads(c.client, _by_name_client(c))
    busy.join(30)
    for job in (before, *during, c.client.submit("mulchain", [{"input": _inputs()}] * 2)):
        _job_completes(c, job)
    _assert_alive(c)
    _no_unrecoverable(c)
    busy_seen = _logged(c, "BUSY")
    assert busy_seen, "no worker met the BUSY reply: the test did not test it\n" + c.logs()


def test_redis_at_maxmemory_kills_no_worker(cluster, redis_server):
    c = cluster
    before = c.client.submit("mulchain", [{"input": _inputs()}] * 4)
    _await_state(c, before, "proving")
    used = int(c.store.redis.info("memory")["used_memory"])
    # below what is used, nothing to evict: every write that could grow memory answers OOM
    operator = _operator(redis_server)
    assert operator.config_set("maxmemory-policy", "noeviction")
    assert operator.config_set("maxmemory", used // 2)
    submitted = []
    late = threading.Thread(target=lambda: submitted.append(
        c.client.submit("mulchain", [{"input": _inputs()}] * 2)))
    late.start()
    try:
        deadline = time.monotonic() + 30
        while "errorstat_OOM" not in _errorstats(redis_server):
            assert time.monotonic() < deadline, "no command met OOM"
            time.sleep(0.1)
        time.sleep(3.0)  # heartbeats, transitions and the consumers meet OOM a while
        _assert_alive(c)
    finally:
        assert operator.config_set("maxmemory", 0)
    late.join(60)
    assert submitted, "the submit made at maxmemory did not return once memory was freed"
    for job in (before, submitted[0], c.client.submit("mulchain", [{"input": _inputs()}] * 2)):
        _job_completes(c, job)
    _assert_alive(c)
    _no_unrecoverable(c)
    oom = _logged(c, "OutOfMemoryError")
    assert oom, "no worker met the OOM reply: the test did not test it\n" + c.logs()


def test_redis_read_only_for_a_while_kills_no_worker(cluster, redis_server):
    """Redis turned into a replica (of a primary that is not there), as a demoted primary
    is in a failover: every write answers READONLY, and blocked reads are unblocked with an
    error, until it is a primary again."""
    c = cluster
    before = c.client.submit("mulchain", [{"input": _inputs()}] * 4)
    _await_state(c, before, "proving")
    operator = _operator(redis_server)
    assert operator.replicaof("127.0.0.1", 1)
    try:
        deadline = time.monotonic() + 30
        while "errorstat_READONLY" not in _errorstats(redis_server):
            assert time.monotonic() < deadline, "no command met READONLY"
            time.sleep(0.1)
        time.sleep(3.0)
        _assert_alive(c)
    finally:
        assert operator.replicaof("NO", "ONE")
    for job in (before, c.client.submit("mulchain", [{"input": _inputs()}] * 2)):
        _job_completes(c, job)
    _assert_alive(c)
    _no_unrecoverable(c)


def test_redis_back_empty_workers_register_again(cluster, redis_server):
    """Redis killed -9 without persistence and started again, empty, on the same port: every
    job it held is gone ("no such job"), and within a few heartbeats the workers -- none
    restarted -- are registered again with role, queue and the device's resident zkeys, the
    device routable, and new jobs complete: submitted with the registry, and by name
    through a CPU worker."""
    from cuzk_tasks.errors import JobError

    c = cluster
    old = c.client.submit("mulchain", [{"input": _inputs()}] * 2)
    _job_completes(c, old)
    pids = {name: proc.pid for name, proc in c.procs.items()}
    resident = c.store.get_worker(f"{HOST}:dev0")["resident"]
    assert resident == ["mulchain"], resident
    redis_server.kill()
    time.sleep(1.0)
    redis_server.restart()
    assert c.store.redis.dbsize() == 0
    back = time.monotonic()
    _await_workers(c, 30)
    print(f"workers registered again {time.monotonic() - back:.1f} s after the restart")
    dev0 = c.store.get_worker(f"{HOST}:dev0")
    assert (dev0["role"], dev0["device"], dev0["resident"]) == ("device", 0, resident), dev0
    with pytest.raises(JobError, match="no such job"):
        c.client.wait(old, timeout=5)
    _job_completes(c, c.client.submit("mulchain", [{"input": _inputs()}] * 2))
    # by name: the client has no registry, a CPU worker (found online with its role and
    # queue) creates the job
    _job_completes(c, _by_name_client(c).submit("mulchain", [{"input": _inputs()}] * 2))
    assert {name: proc.pid for name, proc in c.procs.items()} == pids
    _assert_alive(c)
    _no_unrecoverable(c)
    log = (c.base / "dev0.log").read_text(errors="replace")
    assert "registered again" in log, log[-3000:]


#: how long a worker may take to stop on SIGTERM while Redis is gone
STOP_BOUND_S = 15.0


def test_sigterm_while_redis_is_gone_stops_a_worker_in_bounded_time(cluster, redis_server):
    """SIGTERM to each worker while Redis is down (killed, not back): each exits within
    STOP_BOUND_S -- its consumer's reconnect loop, heartbeat, sweeper and the last
    "offline" write do not wait out the outage -- instead of needing SIGKILL."""
    c = cluster
    _job_completes(c, c.client.submit("mulchain", [{"input": _inputs()}] * 2))
    redis_server.kill()
    time.sleep(5.0)  # every loop has met the outage; Celery's reconnect waits 2 s, then 4 s
    took = {}
    for name, proc in c.procs.items():
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_BOUND_S + 30)
        except subprocess.TimeoutExpired:
            pass
        took[name] = time.monotonic() - t0 if proc.poll() is not None else None
    redis_server.restart()  # for the fixture's teardown
    print(f"stopped after (s): {took}")
    assert all(t is not None and t < STOP_BOUND_S for t in took.values()), \
        f"stop times {took} (None: still running)\n{c.logs()}"


def test_a_device_proving_across_a_long_outage_shows_its_true_state_at_once(redis_server,
                                                                            tmp_path):
    """Issue 27 item 4: an outage longer than the device's retry window (here 1 s) while it
    proves: its prove_end is given up, so its worker hash would stay "proving" a run that is
    over.  Within a heartbeat or two of Redis answering again the worker shows its true
    state -- heartbeat.lua ends the stale record (worker_idle, reason stale) -- long before
    the sweeper re-drives the partition (two sweeps a TTL apart); the job then completes."""
    from cuzk_tasks.settings.config import load_settings

    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(tmp_path / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain")})),
        "CUZK_REDIS_URL": redis_server.url, "CUZK_PREFIX": "stale", "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL), "CUZK_HEARTBEAT_TTL_S": "10",
        "CUZK_REDIS_OUTAGE_S": "1", "CUZK_SPOOL_DIR": str(tmp_path / "spool"),
        "CUZK_THREADS": "1", **instruments.env(env.get("PYTHONPATH", "")),
        "CUZK_TEST_PROVE_DELAY_MS": "2000",  # TEST INSTRUMENT: the run spans the outage
    })
    c = Cluster(tmp_path, env, load_settings(env=env), ROOT)
    try:
        for name, args in WORKERS.items():
            c.start(name, *args)
        _await_workers(c, 60)
        worker_id = f"{HOST}:dev0"
        job = c.client.submit("mulchain", [{"input": _inputs()}])
        deadline = time.monotonic() + 60
        while (c.store.get_worker(worker_id) or {}).get("stored_state") != "proving":
            assert time.monotonic() < deadline, c.logs()
            time.sleep(0.02)
        token = c.store.get_worker(worker_id)["token"]
        operator = _operator(redis_server)
        assert operator.replicaof("127.0.0.1", 1)  # every write answers READONLY
        try:
            time.sleep(2.0 + 1.0 + 2.0)  # the run ends, its prove_end gives up after 1 s
        finally:
            assert operator.replicaof("NO", "ONE")
        back = time.monotonic()
        while True:
            worker = c.store.get_worker(worker_id)
            if worker.get("token") != token:
                break
            assert time.monotonic() - back < 3.0, f"still shown proving {token}: {worker}"
            time.sleep(0.02)
        stale = [f for _, f in c.store.events("0-0", count=10000)
                 if f["type"] == "worker_idle" and f.get("reason") == "stale"]
        assert [f["token"] for f in stale] == [token], (stale, c.logs())
        _job_completes(c, job, timeout=90)
        _assert_alive(c)
        _no_unrecoverable(c)
    finally:
        c.stop_all()
