"""Helpers shared by the tests that run real service processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time


def start_logged(argv, log_path, env, cwd):
    """Start ``argv`` in its own process group (stop it with :func:`stop_process_group`),
    stdout and stderr into ``log_path``."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def worker_argv(*args):
    """``python -m cuzk_tasks worker ARGS``."""
    return [sys.executable, "-m", "cuzk_tasks", "worker", *args]


def stop_process_group(proc, grace=8.0, sig=signal.SIGTERM):
    """Signal a process group (started with start_new_session), wait ``grace`` seconds, then
    kill it.  Returns the exit code, or None when it had to be killed."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return proc.wait()
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)
        return None


def ctrl_c(proc, timeout=20):
    """Send SIGINT to ``proc`` (which must still run: else the assertion shows its output) and
    return its ``(stdout, stderr)`` once it has ended; killed if it outlives ``timeout``."""
    try:
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def child_pids(pid) -> list[int]:
    """The pids of ``pid``'s children (every thread's, from /proc); [] once it is gone."""
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def dump_stacks(procs, gap_s=0.3):
    """Ask worker processes for their stacks (SIGUSR2: cuzk_tasks.service.worker.STACK_DUMP_SIGNAL,
    faulthandler in the parent and every pool process) so a test that times out shows in the
    logs where each process was.  One process at a time: they share a log file."""

    for proc in procs:
        if proc.poll() is not None:
            continue
        for pid in [proc.pid, *child_pids(proc.pid)]:
            try:
                os.kill(pid, signal.SIGUSR2)
            except ProcessLookupError:
                pass
            time.sleep(gap_s)


def write_circuits_toml(path, circuits):
    """A settings file registering ``{name: (kind, fixture_dir)}`` circuits; returns ``path``."""
    lines = []
    for name, (kind, d) in circuits.items():
        lines += [f"[circuits.{name}]", f'kind = "{kind}"', f'zkey = "{d / "circuit.zkey"}"',
                  f'wasm = "{d / "circuit.wasm"}"', "priority = 5", ""]
    path.write_text("\n".join(lines))
    return path


class Cluster:
    """Worker processes of one test (``start(name, *worker args)``), their logs under
    ``base``, and a :class:`cuzk_tasks.client.Client` on ``settings``."""

    def __init__(self, base, env, settings, cwd):
        from cuzk_tasks.client import Client

        self.base = base
        self.env = env
        self.settings = settings
        self.cwd = cwd
        self.procs = {}
        self.client = Client(settings=settings)
        self.store = self.client.store

    def start(self, name, *args, env=None, wrap=None):
        """Start worker ``name`` with ``args``; ``env`` instead of the cluster's, ``wrap``: a
        function of the argv returning the argv to run (another host, tests/support/netns.py)."""
        argv = worker_argv(*args)
        if wrap is not None:
            argv = wrap(argv)
        proc = start_logged(argv, self.base / f"{name}.log", env or self.env, self.cwd)
        self.procs[name] = proc
        return proc

    def start_stack(self, devices=1, cpu_concurrency=2):
        """The usual stack: ``devices`` CPU-backend device workers ``dev0``.. and one CPU
        worker ``cpu``, started and registered (:meth:`await_roles`)."""
        for n in range(devices):
            self.start(f"dev{n}", "--device", str(n), "--backend", "cpu")
        self.start("cpu", "--cpu", "--concurrency", str(cpu_concurrency))
        self.await_roles()

    def await_roles(self, roles=("device", "cpu"), timeout=60.0):
        """Until a live worker of each of ``roles`` is registered; fails early, with the
        logs, when a worker process exits meanwhile."""
        deadline = time.monotonic() + timeout
        while {w["role"] for w in self.store.all_workers() if w.get("online")} != set(roles):
            assert time.monotonic() < deadline, f"workers did not come up\n{self.logs()}"
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{self.logs()}"
            time.sleep(0.1)

    def logs(self, tail=3000):
        out = []
        for name in self.procs:
            text = (self.base / f"{name}.log").read_text(errors="replace")
            out.append(f"----- {name} -----\n{text[-tail:]}")
        return "\n".join(out)

    def stop_all(self):
        for proc in self.procs.values():
            stop_process_group(proc)


def busy_shown_idle(snap):
    """Workers a snapshot shows idle although one of its partitions is in proving."""
    workers = {w.get("worker_id") or w.get("id"): w for w in snap.get("workers", [])}
    bad = []
    for job in snap.get("jobs", []):
        for part in job.get("partitions", []):
            if part.get("state") != "proving" or not part.get("worker"):
                continue
            w = workers.get(part["worker"])
            if w is not None and w.get("state") == "idle":
                bad.append((part["worker"], job.get("id"), part.get("idx")))
    return bad


class SnapshotPoller(threading.Thread):
    """Samples the status snapshot (one atomic read) until ``stop`` is set: ``violations``
    lists every proving worker shown idle.  Samples that meet a Redis outage are skipped
    (``outages`` counts them)."""

    def __init__(self, store):
        super().__init__(daemon=True)
        self.store = store
        self.stop = threading.Event()
        self.count = 0
        self.outages = 0
        self.violations = []
        self.busy_seen = 0

    def run(self):
        import redis

        while not self.stop.is_set():
            try:
                snap = self.store.snapshot()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                self.outages += 1
                time.sleep(0.05)
                continue
            self.count += 1
            self.violations += busy_shown_idle(snap)
            self.busy_seen += sum(1 for w in snap.get("workers", []) if w.get("state") == "proving")
            time.sleep(0.005)
