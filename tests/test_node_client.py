"""A Node.js service uses the service by name with celery-node, as docs/client.md "Other
languages" says (issue 49 item 8): tests/node/cuzk_client.js, run by node against a real
stack (redis-server, a CPU-backend device worker, a CPU worker), submits, reads status and
result, cancels, consumes its job's on_done callback with a celery-node worker, and verifies
the proofs with snarkjs.  Skipped without node and ``npm ci --prefix tools/node``."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest
from support import instruments
from support.processes import Cluster, write_circuits_toml

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
CELERY_NODE = ROOT / "tools" / "node" / "node_modules" / "celery-node"


@pytest.fixture
def stack(tmp_path):
    from support.redis_server import RedisServer

    from cuzk_tasks.settings.config import load_settings

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    if shutil.which("node") is None or not CELERY_NODE.is_dir():
        pytest.skip("node and celery-node are not installed: npm ci --prefix tools/node")
    server = RedisServer()
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(tmp_path / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain"), "slow": ("test-slow", FIX / "mulchain")})),
        "CUZK_REDIS_URL": server.url, "CUZK_PREFIX": "node", "CUZK_HOSTNAME": "nodehost",
        "CUZK_SPOOL_DIR": str(tmp_path / "spool"), "CUZK_THREADS": "1",
        # TEST INSTRUMENT: the job the client cancels is still running when it does
        **instruments.env(env.get("PYTHONPATH", "")), "CUZK_TEST_PROVE_DELAY_MS": "slow=3000",
    })
    c = Cluster(tmp_path, env, load_settings(env=env), ROOT)
    try:
        c.start_stack()
        yield c
    finally:
        c.stop_all()
        server.stop()


def test_a_node_service_submits_reads_cancels_and_gets_its_callback(stack):
    c = stack
    run = subprocess.run(
        ["node", str(ROOT / "tests" / "node" / "cuzk_client.js"), c.settings.broker_url,
         c.settings.result_backend, str(FIX / "mulchain" / "verification_key.json"),
         str(FIX / "mulchain" / "input.json")],
        capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}\n{c.logs()}"
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["first_status"] in ("pending", "running", "done"), out
    assert out["result_state"] == "done" and out["verified"] == [True, True], out
    assert out["callback"] == {"state": "done", "proofs": 2}, out
    assert out["cancel"]["state"] == "cancelled" and out["cancel"]["cancelled"] is True, out
    assert out["cancel_again"]["cancelled"] is False, out
    assert out["cancel_again"]["state"] == "cancelled", out
    assert out["refusal"]["type"] == "CuzkError", out
    assert out["refusal"]["message"].startswith("circuit: unknown circuit 'nope'"), out
    assert c.store.get_job(out["job_id"])["state"] == "done"
