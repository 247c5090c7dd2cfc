"""``cuzk-tasks demo``: the whole service on this machine, proving a bundled circuit.

It starts a private Redis server (unless ``--redis`` names one), a CPU worker
and one device worker per detected GPU (two CPU-backend device workers when
there is none), submits a few jobs of the bundled ``mulchain_1k`` circuit,
shows progress, checks every proof, and shuts everything down -- also on
Ctrl-C.  With ``--keep-running`` the stack stays up until Ctrl-C.
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from ..client import Client
from ..errors import CuzkError
from ..groth16.backends.gpu import device_count
from ..groth16.verifier import verify
from ..settings.config import load_settings
from ..settings.redis_url import redact
from ..state import JobState, WorkerRole
from ..web.serve import gunicorn_argv, web_env
from .local_redis import LocalRedis, free_port

DEMO_CIRCUIT_DIR = pathlib.Path(__file__).resolve().parent.parent / "data" / "mulchain_1k"
DEMO_CIRCUIT = "mulchain_1k"
DEMO_KIND = "demo-mulchain-1k"


def _say(message):
    print(f"[demo] {message}", flush=True)


def _write_config(workdir: pathlib.Path, redis_url: str, heartbeat_ttl_s: float) -> pathlib.Path:
    config = workdir / "cuzk.toml"
    config.write_text(
        f'redis_url = "{redis_url}"\n'
        f'spool_dir = "{workdir / "spool"}"\n'
        f'results_dir = "{workdir / "results"}"\n'
        f"heartbeat_interval_s = {max(0.5, heartbeat_ttl_s / 5)}\n"
        f"heartbeat_ttl_s = {heartbeat_ttl_s}\n\n"
        f"[circuits.{DEMO_CIRCUIT}]\n"
        f'kind = "{DEMO_KIND}"\n'
        f'zkey = "{DEMO_CIRCUIT_DIR / "circuit.zkey"}"\n'
        f'wasm = "{DEMO_CIRCUIT_DIR / "circuit.wasm"}"\n'
        f"priority = 5\n")
    return config


class ProcessGroup:
    """The demo's child processes, stopped in reverse order on exit."""

    def __init__(self, logdir: pathlib.Path):
        self.logdir = logdir
        self.procs = []

    def start(self, name, argv, env):
        log = open(self.logdir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        log.close()
        self.procs.append((name, proc))
        return proc

    def check_alive(self):
        for name, proc in self.procs:
            if proc.poll() is not None:
                tail = (self.logdir / f"{name}.log").read_text(errors="replace")[-1500:]
                raise CuzkError(f"{name} exited with code {proc.returncode}:\n{tail}")

    def stop(self, timeout_s=15.0):
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # Celery: warm shutdown
        deadline = time.monotonic() + timeout_s
        for _, proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def _progress_line(snapshot, jobs):
    done = total = 0
    for job in jobs:
        done += int(job.get("n_done") or 0)
        total += int(job.get("n_partitions") or 0)
    workers = []
    for w in snapshot.get("workers", []):
        if w.get("role") != "device":
            continue
        label = w.get("worker_id") or w.get("id")
        if w.get("state") == "proving":
            workers.append(f"{label}: proving {w.get('job', '')[:8]}#{w.get('partition', '')}")
        else:
            workers.append(f"{label}: {w.get('state')}")
    return f"{done}/{total} partitions done | " + " | ".join(sorted(workers))


def _start_web(procs, env, workdir):
    """The status page (gunicorn, as ``cuzk-tasks web`` runs it) on a free loopback port."""
    port = free_port()
    procs.start("web", gunicorn_argv(), web_env(env, bind=f"127.0.0.1:{port}", workers=1))
    return f"http://127.0.0.1:{port}/"


def _wait_web(procs, url, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            with urllib.request.urlopen(url + "healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise CuzkError(f"the status page did not come up within {timeout_s:.0f} s")


class _Terminated(KeyboardInterrupt):
    """SIGTERM (a plain ``kill``): shut down exactly as on Ctrl-C."""


def _raise_terminated(_signum, _frame):
    raise _Terminated()


def _workers_up(store, settings, devices) -> bool:
    """Whether the CPU worker and all ``devices`` device workers have registered."""
    cpu = any(w.get("role") == WorkerRole.CPU.value and w.get("online")
              and w.get("queue") == settings.cpu_queue for w in store.all_workers())
    return cpu and len(store.live_device_workers()) >= devices


def run_demo(jobs=3, partitions=4, redis_url=None, keep_running=False, timeout_s=300.0):
    """Run the demo; returns 0 when every job completed with valid proofs."""
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="cuzk-demo-"))
    (workdir / "spool").mkdir()
    (workdir / "results").mkdir()
    procs = ProcessGroup(workdir)
    redis = None
    interrupted = False
    on_term = None
    if threading.current_thread() is threading.main_thread():
        on_term = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        if redis_url is None:
            redis = LocalRedis()
            redis_url = redis.url
            _say(f"started redis-server {redis.executable} on {redis_url}")
        config = _write_config(workdir, redis_url, heartbeat_ttl_s=5.0)
        env = dict(os.environ, CUZK_CONFIG=str(config))
        for name in ("CUZK_REDIS_URL", "CUZK_BROKER_URL", "CUZK_RESULT_BACKEND", "CUZK_STATE_URL"):
            env.pop(name, None)
        gpus = device_count()
        python = [sys.executable, "-m", "cuzk_tasks"]
        procs.start("worker-cpu", python + ["worker", "--cpu", "--concurrency", "2"], env)
        if gpus:
            devices = [(n, "gpu") for n in range(gpus)]
            _say(f"{gpus} GPU(s) found: one GPU worker each")
        else:
            devices = [(0, "cpu"), (1, "cpu")]
            _say("no GPU found: two device workers on the native CPU backend")
        for ordinal, backend in devices:
            procs.start(f"worker-dev{ordinal}",
                        python + ["worker", "--device", str(ordinal), "--backend", backend], env)
        web_url = _start_web(procs, env, workdir)
        settings = load_settings(config, env={})
        client = Client(settings=settings)
        store = client.store

        deadline = time.monotonic() + 60
        while not _workers_up(store, settings, len(devices)):
            procs.check_alive()  # a worker that stopped at start (its preflight) stops the demo
            if time.monotonic() > deadline:
                raise CuzkError(f"workers did not come up within 60 s; logs in {workdir}")
            time.sleep(0.2)
        _say(f"workers are up (logs in {workdir})")
        _wait_web(procs, web_url)
        _say(f"status page: {web_url}")
        # what a client needs (docs/client.md): Client(URL).submit(NAME, ...)
        _say(f"redis: {redact(redis_url)}")  # a password given with --redis is not printed
        _say(f"circuits: {', '.join(sorted(settings.circuits))}")

        job_ids, started = [], time.monotonic()
        for j in range(jobs):
            parts = [{"input": {"a": str(secrets.randbelow(10**6) + 2), "b": str(secrets.randbelow(10**6) + 2)}}
                     for _ in range(partitions)]
            job_ids.append(client.submit(DEMO_CIRCUIT, parts, request_id=f"demo-{workdir.name}-{j}"))
        _say(f"submitted {jobs} jobs x {partitions} partitions of {DEMO_CIRCUIT} ({DEMO_KIND})")

        last = None
        deadline = time.monotonic() + timeout_s
        while True:
            procs.check_alive()
            current = [store.get_job(j) for j in job_ids]
            states = [job["state"] for job in current]
            line = _progress_line(store.snapshot(), current)
            if line != last:
                _say(line)
                last = line
            if all(JobState(s).terminal for s in states):
                break
            if time.monotonic() > deadline:
                raise CuzkError(f"jobs did not finish within {timeout_s:.0f} s; logs in {workdir}")
            time.sleep(0.25)
        elapsed = time.monotonic() - started

        vkey = json.loads((DEMO_CIRCUIT_DIR / "verification_key.json").read_text())
        verified, failed_jobs = 0, 0
        for job_id in job_ids:
            job = store.get_job(job_id)
            if job["state"] != JobState.DONE:
                _say(f"job {job_id}: {job['state']}: {job.get('error', '')}")
                failed_jobs += 1
                continue
            result = client.result(job_id)
            valid = [verify(vkey, item["public"], item["proof"]) for item in result["proofs"]]
            verified += sum(valid)
            failed_jobs += not all(valid)
            _say(f"job {job_id}: done, {len(valid)} proofs, "
                 f"{'all verify' if all(valid) else f'{len(valid) - sum(valid)} INVALID'}")
        # only proofs that verified count: a failed job must not look like throughput
        _say(f"{verified} of {jobs * partitions} proofs verified in {elapsed:.1f} s "
             f"({verified / elapsed:.1f} verified proofs/s); results in {workdir / 'results'}")
        ok = failed_jobs == 0 and verified == jobs * partitions
        if not ok:
            _say(f"FAILED: {failed_jobs} of {jobs} jobs did not produce valid proofs "
                 f"(logs in {workdir})")
        if keep_running:
            _say(f"stack is up: submit to {redact(redis_url)} with cuzk_tasks.client.Client "
                 "(docs/client.md); Ctrl-C to stop")
            while True:
                procs.check_alive()
                time.sleep(1)
        return 0 if ok else 1
    except KeyboardInterrupt as exc:
        interrupted = True
        terminated = isinstance(exc, _Terminated)
        _say(f"{'SIGTERM' if terminated else 'Ctrl-C'}: shutting down")
        return 143 if terminated else 130
    finally:
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
        procs.stop()
        if redis is not None:
            redis.stop()
        if not interrupted:
            _say("stopped workers and redis")
