"""cuzk_tasks/service/request_lane.py: by-name requests never wait behind stage work (issue 49).

Real processes: a redis-server, a CPU-backend device worker and a CPU worker of ONE pool
process, kept busy by a priority-0 job whose every finalize takes FINALIZE_DELAY_MS (a test
instrument).  A plain Celery app then sends ``cuzk.status`` and ``cuzk.submit`` by name, at
the lowest message priority, and times each round trip.  Before the lane, such a request
waited for the pool process to finish a stage, and behind the stage messages of the job
(which queue kombu read first changed with the CPU worker's hash seed); so the CPU worker
is started under several ``PYTHONHASHSEED`` values here.
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
HOST = "lanehost"
FINALIZE_DELAY_MS = 1500
BUSY_PARTITIONS = 12  # at one pool process: about 18 s of finalizes
ROUND_TRIP_LIMIT_S = 1.0

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)",
                allow_module_level=True)


@pytest.fixture(params=["0", "1", "2"], ids=lambda seed: f"hashseed{seed}")
def stack(request, tmp_path):
    from support.redis_server import RedisServer

    from cuzk_tasks.settings.config import load_settings

    server = RedisServer()
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(tmp_path / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain")})),
        "CUZK_REDIS_URL": server.url, "CUZK_PREFIX": "lane", "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": "0.25", "CUZK_HEARTBEAT_TTL_S": "1.5",
        "CUZK_SPOOL_DIR": str(tmp_path / "spool"), "CUZK_ALLOWED_INPUT_ROOTS": str(FIX),
        "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),
        "CUZK_TEST_FINALIZE_DELAY_MS": str(FINALIZE_DELAY_MS),
    })
    settings = load_settings(env=env)
    c = Cluster(tmp_path, env, settings, ROOT)
    try:
        c.start("dev0", "--device", "0", "--backend", "cpu")
        c.start("cpu", "--cpu", "--concurrency", "1",
                env=dict(env, PYTHONHASHSEED=request.param))
        c.await_roles()
        yield c
    finally:
        c.stop_all()
        server.stop()


def test_requests_answer_at_once_while_stages_fill_the_cpu_worker(stack):
    from celery import Celery

    c = stack
    good = {"input": json.loads((FIX / "mulchain" / "input.json").read_text())}
    busy = c.client.submit("mulchain", [good] * BUSY_PARTITIONS, priority=0)
    deadline = time.monotonic() + 60
    while c.store.partition_fields(busy, 0, "state")[0] not in ("finalizing", "done"):
        assert time.monotonic() < deadline, c.logs()  # the pool process is in its first finalize
        time.sleep(0.02)
    caller = Celery("caller", broker=c.settings.broker_url, backend=c.settings.result_backend,
                    set_as_current=False)
    times, jobs, states = [], [], []
    for i in range(25):
        if i % 5 == 4:
            call = ("cuzk.submit", {"circuit": "mulchain", "partitions": [good], "priority": 9})
        else:
            call = ("cuzk.status", {"job_id": busy})
        t0 = time.monotonic()
        reply = caller.send_task(call[0], kwargs=call[1], queue=c.settings.cpu_queue,
                                 priority=9).get(timeout=60)
        times.append(round(time.monotonic() - t0, 3))
        if call[0] == "cuzk.submit":
            jobs.append(reply)
        else:
            states.append(reply["state"])
        time.sleep(0.1)
    assert max(times) < ROUND_TRIP_LIMIT_S, (times, states, c.logs())
    # timed while the busy job ran: every status saw it running
    assert set(states) == {"running"} and c.store.get_job(busy)["state"] == "running", states
    for job in [busy, *jobs]:  # and the work itself completes
        result = c.client.wait(job, timeout=120)
        assert result["state"] == "done" and result["proofs"], result
