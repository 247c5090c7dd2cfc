"""Chaos: faults of Redis under real processes, no mocks (issue 11).

A redis-server with AOF (``appendfsync always``), two device workers (CPU backend) and one
CPU worker.  Each scenario runs jobs through one fault and asserts: every job is done and
every proof verifies; one completion per partition (counters and ``partition_done``
events: no duplicate proofs); no status sample shows a proving worker as idle.

The worker faults -- kill -9 of a device worker mid-prove, of the whole CPU worker in
synthesize and in finalize -- are in tests/test_pipeline_e2e.py.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import time

import instruments
import pytest
from processes import Cluster, SnapshotPoller, write_circuits_toml

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "chaoshost"
HB_INTERVAL, HB_TTL = 0.25, 1.5

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture(scope="module")
def aof_redis():
    """redis-server with an append-only file synced on every write, which the tests kill -9,
    restart on the same files, pause and resume."""
    from cuzk_tasks.local_redis import LocalRedis

    server = LocalRedis(aof=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cluster(aof_redis, tmp_path_factory):
    from cuzk_tasks.config import load_settings

    base = tmp_path_factory.mktemp("chaos")
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(base / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain")})),
        "CUZK_REDIS_URL": aof_redis.url,
        "CUZK_PREFIX": "chaos",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL),
        "CUZK_HEARTBEAT_TTL_S": str(HB_TTL),
        "CUZK_SPOOL_DIR": str(base / "spool"),
        "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),  # the TEST INSTRUMENTS below
        # TEST INSTRUMENTS: keep partitions in prove_start and finalize across the fault
        "CUZK_TEST_PROVE_DELAY_MS": "300",
        "CUZK_TEST_FINALIZE_DELAY_MS": "200",
    })
    c = Cluster(base, env, load_settings(env=env), ROOT)
    try:
        c.start("dev0", "--device", "0", "--backend", "cpu")
        c.start("dev1", "--device", "1", "--backend", "cpu")
        c.start("cpu", "--cpu", "--concurrency", "2")
        deadline = time.monotonic() + 60
        while {w["worker_id"] for w in c.store.live_device_workers()} < {f"{HOST}:dev0", f"{HOST}:dev1"}:
            for name, proc in c.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{c.logs()}"
            assert time.monotonic() < deadline, "device workers did not come up\n" + c.logs()
            time.sleep(0.1)
        yield c
    finally:
        c.stop_all()


def _completed(store):
    return sum(v for k, v in store.snapshot()["counters"].items() if k.startswith("completed:"))


def _done_events(store, jobs):
    """``(job, idx)`` of every partition_done event of ``jobs``, duplicates kept."""
    out = []
    for _, fields in store.redis.xrange(store.keys.events()):
        if fields.get("type") == "partition_done" and fields.get("job") in jobs:
            out.append((fields["job"], int(fields["idx"])))
    return out


def _run_through(c, fault, n_jobs=3, n_parts=4):
    """Submit jobs, run ``fault()`` once partitions are in prove_start and finalize, then
    check the outcome.  Returns seconds from the end of the fault to the last job done."""
    from cuzk_tasks.groth16 import verify

    vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    before = _completed(c.store)
    poller = SnapshotPoller(c.store)
    poller.start()
    try:
        jobs = [c.client.submit("mulchain", [{"input": inputs}] * n_parts) for _ in range(n_jobs)]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = {p["state"] for j in jobs for p in c.store.list_partitions(j)}
            if "gpu" in states and states & {"finalizing", "synthesizing", "pending"}:
                break
            time.sleep(0.01)
        fault()
        ended = time.monotonic()
        results = [c.client.wait(j, timeout=90) for j in jobs]
        took = time.monotonic() - ended
    finally:
        poller.stop.set()
        poller.join(5)
    for result in results:
        assert len(result["proofs"]) == n_parts
        for item in result["proofs"]:
            assert verify(vk, item["public"], item["proof"])
    assert _completed(c.store) - before == n_jobs * n_parts
    done = _done_events(c.store, set(jobs))
    assert sorted(done) == sorted(set(done)) and len(done) == n_jobs * n_parts
    assert poller.count > 0 and not poller.violations, poller.violations[:5]
    for name, proc in c.procs.items():
        assert proc.poll() is None, f"{name} died in the fault\n{c.logs()}"
    parts = [p for j in jobs for p in c.store.list_partitions(j)]
    print(f"  re-driven stages: {sum(p.get('lost_messages') or 0 for p in parts)}, "
          f"re-dispatches: {sum(p.get('redispatches') or 0 for p in parts)}, "
          f"status samples: {poller.count} ({poller.outages} in the outage)")
    return took


def test_redis_kill9_and_a_restart_on_its_aof(cluster, aof_redis):
    def fault():
        aof_redis.kill()
        time.sleep(2)
        aof_redis.restart()

    took = _run_through(cluster, fault)
    print(f"redis kill -9 + AOF restart: all jobs done {took:.1f} s after the restart")
    assert took < 2 * HB_TTL + 30, cluster.logs()


def test_redis_paused_longer_than_the_heartbeat_ttl(cluster, aof_redis):
    def fault():
        aof_redis.proc.send_signal(signal.SIGSTOP)
        time.sleep(2 * HB_TTL)
        aof_redis.proc.send_signal(signal.SIGCONT)

    took = _run_through(cluster, fault)
    print(f"redis SIGSTOP {2 * HB_TTL:.1f} s: all jobs done {took:.1f} s after SIGCONT")
    assert took < 2 * HB_TTL + 30, cluster.logs()
