"""Helpers shared by the tests that run real service processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


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


def dump_stacks(procs, gap_s=0.3):
    """Ask worker processes for their stacks (SIGUSR2: cuzk_tasks.worker.STACK_DUMP_SIGNAL,
    faulthandler in the parent and every pool process) so a test that times out shows in the
    logs where each process was.  One process at a time: they share a log file."""
    import time

    def children(pid):
        found = []
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    found += [int(c) for c in f.read().split()]
        except OSError:
            pass
        return found

    for proc in procs:
        if proc.poll() is not None:
            continue
        for pid in [proc.pid, *children(proc.pid)]:
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
