"""A big job does not starve the jobs after it (issue 24), through real processes: a
redis-server, one device worker (CPU backend) and one CPU worker, ``job_window`` 4.

* a 60-partition job submitted first and a 1-partition job of the same priority right
  after: the small one is done while the big one still runs (before chunked release it
  waited behind all 60 synthesize and prove messages);
* a 6,000-partition job cancelled: another job submitted then is done within seconds (its
  queued messages once cost a delivery each: minutes at 100,000 partitions).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import time

import pytest

from support import instruments
from support.processes import Cluster, write_circuits_toml

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "fairhost"
WINDOW = 4

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from cuzk_tasks.settings.config import load_settings
    from support.redis_server import RedisServer

    server = RedisServer()  # of this module's own: Celery's queue keys are not prefixed
    base = tmp_path_factory.mktemp("fair")
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(base / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain"),
            "slow_test": ("test-slow", FIX / "mulchain")})),  # TEST-ONLY: a slow prove
        "CUZK_REDIS_URL": server.url,
        "CUZK_PREFIX": "fair",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": "0.25",
        "CUZK_HEARTBEAT_TTL_S": "1.5",
        "CUZK_SPOOL_DIR": str(base / "spool"),
        "CUZK_THREADS": "1",
        "CUZK_JOB_WINDOW": str(WINDOW),
        **instruments.env(env.get("PYTHONPATH", "")),
        # TEST INSTRUMENTS: every prove takes a while, slow_test's much longer
        "CUZK_TEST_PROVE_DELAY_MS": "slow_test=3000,150",
    })
    c = Cluster(base, env, load_settings(env=env), ROOT)
    try:
        c.start("dev0", "--device", "0", "--backend", "cpu")
        c.start("cpu", "--cpu", "--concurrency", "1")
        deadline = time.monotonic() + 90
        while f"{HOST}:dev0" not in {w["worker_id"] for w in c.store.live_device_workers()}:
            for name, proc in c.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{c.logs()}"
            assert time.monotonic() < deadline, "the device worker did not come up\n" + c.logs()
            time.sleep(0.1)
        yield c
    finally:
        c.stop_all()
        server.stop()


def _wait_state(c, job_id, states, timeout):
    deadline = time.monotonic() + timeout
    while True:
        job = c.store.get_job(job_id)
        if job and job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"job {job_id}: still {job and job['state']}\n{c.logs()}"
        time.sleep(0.05)


def test_a_small_job_after_a_big_one_of_the_same_priority_is_done_first(cluster):
    c = cluster
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    big = c.client.submit("mulchain", [{"input": inputs}] * 60, priority=5)
    small = c.client.submit("mulchain", [{"input": inputs}], priority=5)
    assert len(c.client.wait(small, timeout=120)["proofs"]) == 1
    at_small = c.store.get_job(big)
    # 60 x 150 ms of proving alone: the big job is far from done when the small one is
    assert at_small["state"] == "running" and at_small["n_done"] < 60, at_small
    assert len(c.client.wait(big, timeout=240)["proofs"]) == 60
    # the window held: never more than WINDOW of the big job's messages released ahead
    assert c.store.get_job(big)["n_released"] == 60


def test_after_cancelling_a_big_job_another_starts_within_seconds(cluster):
    c = cluster
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    big = c.client.submit("slow_test", [{"input": inputs}] * 6000, priority=5)
    _wait_state(c, big, ("running",), timeout=60)
    t0 = time.monotonic()
    assert c.client.cancel(big)
    cancel_s = time.monotonic() - t0
    status = c.client.status(big, limit=10)
    assert status["state"] == "cancelled" and status["counts"].get("cancelled", 0) >= 5990, status
    small = c.client.submit("mulchain", [{"input": inputs}], priority=5)
    t1 = time.monotonic()
    # the device may first finish the one slow_test prove it runs (3 s)
    assert len(c.client.wait(small, timeout=60)["proofs"]) == 1
    waited = time.monotonic() - t1
    assert waited < 15, f"the next job waited {waited:.1f} s behind the cancelled one"
    assert cancel_s < 10, cancel_s
