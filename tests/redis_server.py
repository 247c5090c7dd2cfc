"""Start a throwaway real ``redis-server`` for tests.

``RedisServer()`` runs ``redis-server`` on a free localhost port in a temporary
directory with persistence off (no RDB snapshots, no AOF), waits until it answers
PING, and ``stop()`` terminates it and removes the directory.  Also a context manager.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time


def have_redis_server() -> bool:
    """True when a ``redis-server`` executable is on PATH."""
    return shutil.which("redis-server") is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    def __init__(self, start_timeout_s: float = 10.0):
        if not have_redis_server():
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.dir = tempfile.mkdtemp(prefix="cuzk-redis-")
        self.proc = None
        self.port = None
        for _ in range(5):  # the free port can be taken between probing and binding
            self.port = _free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                 "--dir", self.dir, "--save", "", "--appendonly", "no",
                 "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning",
                 "--logfile", ""],
                cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + start_timeout_s
            while time.monotonic() < deadline and self.proc.poll() is None:
                if _ping(self.port):
                    return
                time.sleep(0.02)
            out = b""
            if self.proc.poll() is None:
                self.proc.kill()
            else:
                out = self.proc.stdout.read() if self.proc.stdout else b""
            self.proc.wait()
            if b"Address already in use" not in out:
                break
        shutil.rmtree(self.dir, ignore_errors=True)
        raise RuntimeError(f"redis-server did not answer PING on port {self.port}: "
                           f"{out.decode(errors='replace')[-2000:]}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
