"""The compose stack on a real Docker engine (CPU profile).

Needs what ``ops/ci/docker-setup.sh`` sets up (``.ci/run`` runs it before pytest): Debian's
docker.io engine started so that it can never pull, the pinned compose v2 plugin, and local
stand-ins for the base images built from Debian packages.  Nothing is pulled: the cpu image
is built from the repository (classic builder) on the python stand-in, passed through the
Dockerfile's PYTHON_IMAGE build arg; the redis service runs the redis stand-in
(REDIS_IMAGE).  Without an engine every test here skips, saying how to enable them.

One compose project of its own (random name), the status page published on a free
loopback port only, torn down with ``down -v`` at the end whatever happens.  In order:
``up -d --build --wait`` (every health check passes, one-shots included, no restarts); the
sample job proves and its proofs verify on the host (the project's verifier and snarkjs);
``/``, ``/api/status`` and ``/metrics`` answer on the published port; a second ``up``
queues no new demo job; a job survives a restart of the redis container in its middle;
with ``--scale worker-prover-cpu=2`` both replicas prove; after ``up --force-recreate``
the provers keep their worker ids and no ghost stays registered past
CUZK_WORKER_RETIRE_S.

Not covered here: the GPU profile (no NVIDIA runtime on CI) and the monitoring profile
(its Prometheus and Grafana images cannot be built from Debian packages and are never
pulled) -- tests/test_compose.py checks those files statically.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from cuzk_tasks.dev.local_redis import free_port
from support.docker_engine import engine_setup

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parent.parent
VK = ROOT / "cuzk_tasks" / "data" / "mulchain_1k" / "verification_key.json"
INPUT = "/srv/circuits/mulchain_1k/input.json"
RETIRE_S = 10              # CUZK_WORKER_RETIRE_S of the test stack
HB_TTL_S, HB_INTERVAL_S = 15, 5   # defaults.HEARTBEAT_TTL_S / HEARTBEAT_INTERVAL_S
PASSWORD = "ci" + secrets.token_hex(16)
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy


def _setup():
    """The setup script's record (docker binary, stand-in image names), or skip."""
    env, why_not = engine_setup()
    if env is None:
        pytest.skip(why_not)
    return env


class Stack:
    def __init__(self, setup, base: pathlib.Path):
        self.docker = setup.get("DOCKER", "docker")
        self.project = "cuzkci" + secrets.token_hex(4)
        self.port = free_port()
        # only these variables reach compose: nothing from the caller's shell or a .env
        empty = base / "empty.env"
        empty.write_text("")
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": os.environ.get("HOME", str(base)),
                    "DOCKER_BUILDKIT": "0",  # classic builder: BuildKit would fetch a frontend
                    "REDIS_PASSWORD": PASSWORD,
                    "CUZK_WEB_PORT": str(self.port),  # on 127.0.0.1 (CUZK_WEB_PUBLISH)
                    "CUZK_IMAGE": "cuzk-ci-tasks",
                    "PYTHON_IMAGE": setup["PYTHON_IMAGE"],
                    "REDIS_IMAGE": setup["REDIS_IMAGE"],
                    "CUZK_WORKER_RETIRE_S": str(RETIRE_S)}
        self.base_cmd = [self.docker, "compose", "-p", self.project,
                         "-f", str(ROOT / "docker-compose.yml"), "--env-file", str(empty)]
        self.timings = {}

    def compose(self, *args, timeout=600, check=True, what=None):
        t0 = time.monotonic()
        proc = subprocess.run([*self.base_cmd, *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        self.timings[what or " ".join(args[:2])] = round(time.monotonic() - t0, 1)
        if check and proc.returncode != 0:
            pytest.fail(f"docker compose {' '.join(args)}: exit {proc.returncode}\n"
                        f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}\n{self.diagnostics()}")
        return proc

    def up(self, *args, what=None):
        return self.compose("up", "-d", "--pull", "never", "--wait", "--wait-timeout", "300",
                            *args, what=what)

    def diagnostics(self):
        ps = subprocess.run([*self.base_cmd, "ps", "-a"], cwd=ROOT, env=self.env,
                            capture_output=True, text=True, timeout=60).stdout
        logs = subprocess.run([*self.base_cmd, "logs", "--no-color", "--tail", "40"], cwd=ROOT,
                              env=self.env, capture_output=True, text=True, timeout=60).stdout
        try:  # the last health probes of every container with a failed one among them
            health = {c["Name"]: c["State"]["Health"]["Log"][-5:] for c in self.containers()
                      if any(probe["ExitCode"] != 0
                             for probe in c["State"].get("Health", {}).get("Log") or [])}
        except Exception as exc:
            health = repr(exc)
        try:
            workers = [(w["id"], w["role"], w["state"], w.get("outstanding"))
                       for w in self.status()["workers"]]
        except Exception as exc:  # the web service may be down: still show the rest
            workers = repr(exc)
        return (f"--- ps ---\n{ps}\n--- health probes of the containers not healthy ---\n"
                f"{health}\n--- registered workers (id, role, state, outstanding) ---\n"
                f"{workers}\n--- logs (tail) ---\n{logs[-8000:]}")

    def logs(self, service):
        return self.compose("logs", "--no-color", service, what=f"logs {service}").stdout

    def containers(self):
        """[docker inspect dict] of every container of the project, one-shots included."""
        ids = self.compose("ps", "-a", "-q").stdout.split()
        if not ids:
            return []
        out = subprocess.run([self.docker, "inspect", *ids], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        return json.loads(out)

    def get(self, path, timeout=10):
        with DIRECT.open(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as resp:
            return resp.status, resp.read().decode()

    def get_json(self, path):
        return json.loads(self.get(path)[1])

    def status(self):
        return self.get_json("/api/status")

    def wait_for(self, check, what, timeout):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = check()
                if last:
                    return last
            except (OSError, urllib.error.URLError, ValueError) as exc:  # web restarting
                last = exc
            time.sleep(1)
        pytest.fail(f"timed out after {timeout} s waiting for {what} (last: {last!r})\n"
                    + self.diagnostics())

    def job(self, job_id):
        return self.get_json(f"/api/jobs/{job_id}")

    def wait_done(self, job_id, timeout=240):
        seen = {}

        def finished():
            seen["doc"] = doc = self.job(job_id)
            return doc["job"]["state"] in ("done", "failed", "cancelled") and doc

        def stuck():
            doc = seen.get("doc") or {"job": {}, "partitions": []}
            parts = [(p["idx"], p["state"], p["worker"], p["attempt"]) for p in doc["partitions"]
                     if p["state"] != "done"]
            restarts = {_service(c): c["RestartCount"] for c in self.containers()}
            return f"job {job_id} {doc['job']}; not done (idx, state, worker, attempt): " \
                   f"{parts[:10]}; container restarts: {restarts}"

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if finished():
                    break
            except (OSError, urllib.error.URLError, ValueError):  # web restarting
                pass
            time.sleep(1)
        else:
            pytest.fail(f"timed out after {timeout} s: {stuck()}\n{self.diagnostics()}")
        doc = seen["doc"]
        assert doc["job"]["state"] == "done", stuck()
        return doc

    def submit(self, n, request_id):
        """A job of ``n`` sample partitions, submitted from inside the worker-cpu container."""
        proc = self.compose("exec", "-T", "worker-cpu", "cuzk-tasks", "submit", "mulchain_1k",
                            *[INPUT] * n, "--request-id", request_id, what=f"submit {request_id}")
        return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    setup = _setup()
    st = Stack(setup, tmp_path_factory.mktemp("docker"))
    t0 = time.monotonic()
    try:
        # Every cuzk service builds the same image.  BuildKit shares identical concurrent
        # builds; the classic builder used here (offline) runs them side by side, each
        # compiling the native core: build one first, and up's builds are cache hits.
        st.compose("build", "worker-cpu", check=False, what="build one service")
        st.up_result = st.compose("up", "-d", "--build", "--pull", "never", "--wait",
                                  "--wait-timeout", "400", check=False, what="up --build")
        yield st
    finally:
        st.compose("down", "-v", "--remove-orphans", "--timeout", "20", check=False, what="down -v")
        st.timings["module total"] = round(time.monotonic() - t0, 1)
        print(f"\ndocker stack timings (s): {st.timings}")


def _service(container):
    return container["Config"]["Labels"]["com.docker.compose.service"]


def test_up_build_wait_starts_every_service_healthy(stack):
    """`up -d --build --wait` exits 0: the image builds offline on the stand-ins, the workers'
    health checks pass under docker-init (init: true), and the one-shots' exits are fine."""
    up = stack.up_result
    assert up.returncode == 0, f"up --wait: exit {up.returncode}\n{up.stderr[-4000:]}\n" \
                               + stack.diagnostics()
    by_service = {}
    for c in stack.containers():
        by_service.setdefault(_service(c), []).append(c)
    assert set(by_service) == {"redis", "circuits-init", "web", "worker-cpu",
                               "worker-prover-cpu", "demo-submit"}
    for name in ("redis", "web", "worker-cpu", "worker-prover-cpu"):
        for c in by_service[name]:
            assert c["State"]["Status"] == "running", (name, c["State"])
            assert c["State"]["Health"]["Status"] == "healthy", (name, c["State"]["Health"])
            assert c["RestartCount"] == 0, f"{name} restarted {c['RestartCount']} times"
            if name != "redis":
                assert c["HostConfig"]["Init"] is True  # the docker-init case of the check
    for name in ("circuits-init", "demo-submit"):
        state = by_service[name][0]["State"]
        assert state["Status"] == "exited" and state["ExitCode"] == 0, (name, state)
    # built from the stand-in (never pulled): the image's base layers are the stand-in's
    assert "circuits-init: /srv/circuits: copied" in stack.logs("circuits-init")


def test_web_starts_without_control_socket_error_and_no_log_has_the_password(stack):
    web = stack.logs("web")
    assert "Booting worker" in web or "Listening at" in web, web[-2000:]
    assert "Control server error" not in web and "Permission denied" not in web, web[-2000:]
    everything = stack.compose("logs", "--no-color", what="logs all").stdout
    assert PASSWORD not in everything


def _demo_job_id(stack):
    ids = re.findall(r"\b([0-9a-f]{32})\b", stack.logs("demo-submit"))
    assert ids, stack.logs("demo-submit")
    return ids


def test_demo_job_proves_and_the_proofs_verify_on_the_host(stack, tmp_path):
    from cuzk_tasks.groth16 import verify
    from support.snarkjs_tool import have_snarkjs, run_snarkjs, strip_ansi

    job_id = _demo_job_id(stack)[-1]
    doc = stack.wait_done(job_id, timeout=180)
    assert doc["job"]["n_done"] == 2 and doc["job"]["circuit"] == "mulchain_1k"
    status, body = stack.get(f"/api/jobs/{job_id}/result")
    assert status == 200
    proofs = json.loads(body)["proofs"]
    assert len(proofs) == 2
    vk = json.loads(VK.read_text())
    for item in proofs:
        assert verify(vk, item["public"], item["proof"])
    if have_snarkjs():  # the reference verifier too (installed by .ci/run)
        for item in proofs:
            (tmp_path / "proof.json").write_text(json.dumps(item["proof"]))
            (tmp_path / "public.json").write_text(json.dumps(item["public"]))
            out = run_snarkjs("groth16", "verify", VK, tmp_path / "public.json",
                              tmp_path / "proof.json", timeout=120)
            assert out.returncode == 0 and "OK" in strip_ansi(out.stdout), out.stdout + out.stderr
    # a tampered public input is rejected (the check can fail)
    bad = [str(int(proofs[0]["public"][0]) + 1), *proofs[0]["public"][1:]]
    assert not verify(vk, bad, proofs[0]["proof"])
    stack.demo_job = job_id


def test_status_page_api_and_metrics_on_the_published_port(stack):
    from prometheus_client.parser import text_string_to_metric_families

    status, page = stack.get("/")
    assert status == 200 and "<html" in page.lower()
    snap = stack.status()
    roles = sorted(w["role"] for w in snap["workers"] if w["state"] != "offline")
    assert roles == ["cpu", "device"], snap["workers"]
    assert [w["id"] for w in snap["workers"] if w["role"] == "device"] == ["prover-cpu-0:dev0"]
    assert snap["counters"]["jobs_done"].get("demo-mulchain-1k", 0) >= 1
    status, text = stack.get("/metrics")
    assert status == 200
    done = [s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "cuzk_proofs_completed_total" and s.labels.get("kind") == "demo-mulchain-1k"]
    assert done and done[0] >= 2, done
    for page in ("/", "/api/status", "/metrics"):
        assert PASSWORD not in stack.get(page)[1], page


def _all_jobs(snap):
    return {j["id"] for j in snap.get("jobs", []) + snap.get("recent_jobs", [])}


def test_up_again_queues_no_new_demo_job(stack):
    before = _all_jobs(stack.status())
    first = _demo_job_id(stack)[-1]
    stack.up(what="up again")  # a plain `up`, as an operator runs it after a change
    # and demo-submit run afresh for certain (a plain `up` may leave an exited one-shot be)
    stack.compose("up", "-d", "--pull", "never", "--no-deps", "--force-recreate", "demo-submit",
                  what="demo-submit again")
    ids = stack.wait_for(lambda: re.findall(r"\b([0-9a-f]{32})\b", stack.logs("demo-submit")),
                         "the recreated demo-submit's job id", 120)
    assert set(ids) == {first}, f"demo-submit queued a new job: {ids} (first: {first})"
    assert _all_jobs(stack.status()) == before


def test_job_completes_across_a_redis_restart(stack):
    """A message kombu recorded in 'unacked' that no worker runs after the restart would wait
    for the visibility timeout (1 h); the sweeper finds its stage held by no one.

    Both workers are frozen (``docker compose pause``) as soon as the first partition is done,
    so the job is certainly mid-flight when Redis restarts, however fast the machine proves:
    their in-flight tasks and prefetched messages are held across the restart, and the
    workers meet a new Redis connection when they thaw."""
    from cuzk_tasks.groth16 import verify

    n = 60
    workers = ("worker-cpu", "worker-prover-cpu")
    job_id = stack.submit(n, "ci-redis-restart")
    deadline = time.monotonic() + 120
    while int(stack.job(job_id)["job"]["n_done"] or 0) < 1:
        assert time.monotonic() < deadline, "no partition done in 120 s\n" + stack.diagnostics()
        time.sleep(0.1)
    stack.compose("pause", *workers, what="pause workers")
    try:
        done = int(stack.job(job_id)["job"]["n_done"])
        assert done < n, f"all {n} partitions done before the workers were paused: grow n"
        stack.compose("restart", "--timeout", "20", "redis", what="restart redis")
    finally:
        stack.compose("unpause", *workers, what="unpause workers")
    doc = stack.wait_done(job_id, timeout=240)  # ~8 s without the restart on a 2-core host
    # docker marks a container unhealthy while it is paused, until its next probe passes
    # (up to one 15 s interval later): the tests after this one start from a healthy stack
    stack.wait_for(lambda: all(c["State"]["Health"]["Status"] == "healthy"
                               for c in stack.containers() if _service(c) in workers),
                   "the workers healthy again after the pause", HB_TTL_S + 60)
    assert doc["job"]["n_done"] == n and not doc["job"]["n_failed"], doc["job"]
    proofs = json.loads(stack.get(f"/api/jobs/{job_id}/result")[1])["proofs"]
    vk = json.loads(VK.read_text())
    assert len(proofs) == n and all(verify(vk, p["public"], p["proof"]) for p in proofs)


def test_two_prover_replicas_both_prove(stack):
    stack.up("--no-recreate", "--scale", "worker-prover-cpu=2", what="scale provers 2")
    live = lambda: sorted(w["id"] for w in stack.status()["workers"]  # noqa: E731
                          if w["role"] == "device" and w["state"] != "offline")
    stack.wait_for(lambda: live() == ["prover-cpu-0:dev0", "prover-cpu-1:dev0"],
                   "two device workers online", 60)
    job_id = stack.submit(24, "ci-two-provers")
    doc = stack.wait_done(job_id)
    provers = {p["worker"] for p in doc["partitions"]}
    assert provers == {"prover-cpu-0:dev0", "prover-cpu-1:dev0"}, provers


def test_force_recreate_keeps_prover_ids_and_leaves_no_ghost(stack):
    before = stack.status()["workers"]
    devices = sorted(w["id"] for w in before if w["role"] == "device")
    cpu_before = {w["id"] for w in before if w["role"] == "cpu"}
    assert devices == ["prover-cpu-0:dev0", "prover-cpu-1:dev0"]
    stack.up("--force-recreate", "--scale", "worker-prover-cpu=2", what="up --force-recreate")
    t0 = time.monotonic()

    def settled():
        workers = stack.status()["workers"]
        listed = sorted(w["id"] for w in workers)
        live = sorted(w["id"] for w in workers if w["state"] != "offline")
        cpu = [w for w in workers if w["role"] == "cpu"]
        return (listed == live and len(cpu) == 1 and cpu[0]["id"] not in cpu_before
                and sorted(w["id"] for w in workers if w["role"] == "device") == devices
                and listed)

    # an old worker's heartbeat lapses (TTL), then it is retired RETIRE_S later by a sweep
    listed = stack.wait_for(settled, "only the recreated workers registered",
                            HB_TTL_S + RETIRE_S + 2 * HB_INTERVAL_S + 90)
    stack.timings["ghosts gone after recreate"] = round(time.monotonic() - t0, 1)
    assert len(listed) == 3
    # and the recreated provers prove under their old ids
    doc = stack.wait_done(stack.submit(8, "ci-after-recreate"))
    assert {p["worker"] for p in doc["partitions"]} <= set(devices)
