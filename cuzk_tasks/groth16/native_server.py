"""circom's C++ witness generator kept running between witnesses: how one is built, and one
running server process.

circom's own ``main()`` computes one witness and exits, so each witness pays again for loading
the circuit's ``.dat`` and for the kernel zeroing every page of the signal memory on first
touch (a third of a SHA-256-2048 witness).  ``cuzk_tasks/native/circom/witness_server.cpp`` is
another ``main()`` for the same generated code: linked with circom's objects (and circom's
``main.cpp`` compiled under ``-Dmain=circom_generated_main``, for its loaders), it answers one
witness request after another from the same memory.  :func:`build_server` writes it next to
the binary as ``<binary>.server``; :class:`~.native_witness.NativeWitnessGenerator` uses it
whenever it is there and not older than the binary and its ``.dat``.

The protocol is in the C++ file's header.  A request is a private directory holding
``input.json``; the answer names the witness's size and prime, the values are in
``witness.bin``, what the circuit printed in ``stdout``/``stderr`` -- so a failing server is
read exactly as a failing one-shot binary is (exit status, circom's own diagnostic lines).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence, Union

from ..errors import CuzkError, FormatError

#: what follows the binary's path in its server's path
SERVER_SUFFIX = ".server"

#: the server's source, shipped with the package
SOURCE = Path(__file__).resolve().parent.parent / "native" / "circom" / "witness_server.cpp"

#: objects circom's Makefile leaves next to the binary that the server links besides
#: ``<name>.o`` (its ``main.o`` is not one: the server brings its own main)
CIRCOM_OBJECTS = ("calcwit.o", "fr.o", "fr_asm.o")

#: flags of circom's own Makefile
CXXFLAGS = ("-std=c++11", "-O3")


def server_path(binary_path) -> str:
    """Where the server of circom's generator at ``binary_path`` lives."""
    return os.fspath(binary_path) + SERVER_SUFFIX


def usable_server(binary_path: str, dat_path: str) -> Optional[str]:
    """The server of ``binary_path`` when it is there, executable, and built after the binary
    and its ``.dat`` (a circuit rebuilt since would get the old circuit's witness); else None."""
    path = server_path(binary_path)
    try:
        built = os.stat(path).st_mtime_ns
        newest_input = max(os.stat(binary_path).st_mtime_ns, os.stat(dat_path).st_mtime_ns)
    except OSError:
        return None
    if built < newest_input or not os.access(path, os.X_OK):
        return None
    return path


def build_server(binary_path, *, cxx: str = "g++", objects: Optional[Sequence] = None,
                 cxxflags: Sequence[str] = CXXFLAGS) -> str:
    """Build the witness server of circom's generator at ``binary_path`` (in the ``<name>_cpp``
    directory ``circom --c`` wrote, after ``make``: its ``main.cpp``, headers and objects) and
    write it to ``<binary_path>.server``; returns that path.  ``objects`` replaces the objects
    of that directory (``<name>.o``, calcwit.o, fr.o, fr_asm.o) when they were built elsewhere.
    A missing file is a FormatError naming it; a failed compile a CuzkError quoting the
    compiler's last lines."""
    binary = os.path.abspath(os.fspath(binary_path))
    d, name = os.path.split(binary)
    main_cpp = os.path.join(d, "main.cpp")
    if not os.path.isfile(main_cpp):
        raise FormatError(main_cpp, "file", "no such file: build the server in the directory "
                          "circom --c wrote (<name>_cpp), next to the binary make built there")
    objs: List[str] = ([os.fspath(o) for o in objects] if objects is not None else
                       [os.path.join(d, name + ".o"), *(os.path.join(d, o) for o in CIRCOM_OBJECTS)])
    for obj in objs:
        if not os.path.isfile(obj):
            raise FormatError(obj, "file", f"no such file: run make -C {d} first")
    if shutil.which(cxx) is None:
        raise CuzkError(f"{cxx} not found: a witness server is built with the C++ compiler "
                        "that builds circom's generator (Debian: g++ nasm libgmp-dev "
                        "nlohmann-json3-dev)")
    out = server_path(binary)
    with tempfile.TemporaryDirectory(prefix=".cuzk-server-", dir=d) as tmp:
        main_o = os.path.join(tmp, "circom_main.o")
        server_o = os.path.join(tmp, "witness_server.o")
        linked = os.path.join(tmp, "server")
        _compile([cxx, *cxxflags, "-w", "-I", d, "-Dmain=circom_generated_main", "-c",
                  main_cpp, "-o", main_o])
        _compile([cxx, *cxxflags, "-I", d, "-c", str(SOURCE), "-o", server_o])
        _compile([cxx, "-o", linked, server_o, main_o, *objs, "-lgmp", "-pthread",
                  "-Wl,-z,noexecstack"])
        os.replace(linked, out)  # atomic: a running worker sees the old server or the new
    return out


def _compile(argv: List[str]):
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-20:])
        raise CuzkError(f"building the witness server failed: {' '.join(argv)} exited "
                        f"{proc.returncode}:\n{tail}")


def kill_group(proc: subprocess.Popen):
    """SIGKILL the process group of ``proc`` (its own: ``start_new_session``) while ``proc`` is
    not reaped yet -- after that its pid may name another process."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # gone already (a reaped group leader's pid is no longer a group we own)


class Answer:
    """A server's answer to one request: ``ok`` with the witness's ``count``, bytes per value
    ``n8`` and ``prime``; else why not: ``timed_out`` (it was killed at the limit),
    ``garbled`` (it answered something else and was killed), or it is gone with its exit
    ``status``."""

    def __init__(self, ok: bool, count: int = 0, n8: int = 0, prime: int = 0,
                 status: Optional[int] = None, timed_out: bool = False, garbled: bool = False):
        self.ok, self.count, self.n8, self.prime = ok, count, n8, prime
        self.status, self.timed_out, self.garbled = status, timed_out, garbled


class WitnessServer:
    """One running server process, owned by the process that started it; one request at a
    time.  Its process group is its own (``kill`` takes everything it started)."""

    def __init__(self, path: str, dat_path: str, idle_s: float):
        self.idle_s = float(idle_s)
        self.owner = os.getpid()
        self.witnesses = 0
        self.last_used = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                [path, dat_path, f"{self.idle_s:g}", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                bufsize=0, start_new_session=True, close_fds=True)
        except OSError as exc:
            raise CuzkError(f"cannot start {path} ({exc.strerror or exc})") from None

    def fresh_enough(self, max_witnesses: int) -> bool:
        """Whether the next request may go to this server: it runs, belongs to this process
        (not a fork's parent), has witnesses left, and is not about to exit idle."""
        return (self.proc.poll() is None and self.owner == os.getpid()
                and self.witnesses < max_witnesses
                and time.monotonic() - self.last_used < 0.8 * self.idle_s)

    def request(self, work: Union[str, os.PathLike], limit_s: float) -> Answer:
        """Have the server compute the witness of ``work``/input.json; the answer, or the
        server's death (it is then reaped) -- killed with its group past ``limit_s``."""
        deadline = time.monotonic() + limit_s
        try:
            self.proc.stdin.write(os.fsencode(work) + b"\n")
        except (BrokenPipeError, OSError):
            return self._gone()
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                self.proc.wait()
                return Answer(False, timed_out=True)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return self._gone()
            line += chunk
        self.witnesses += 1
        self.last_used = time.monotonic()
        fields = line.decode("ascii", "replace").split()
        try:
            if fields[0] != "ok" or len(fields) != 4:
                raise ValueError
            return Answer(True, int(fields[1]), int(fields[2]), int(fields[3], 16))
        except (ValueError, IndexError):
            self.kill()
            return Answer(False, status=self.proc.wait(), garbled=True)

    def _gone(self) -> Answer:
        self.kill()  # a server that closed its answers but lives is of no further use
        return Answer(False, status=self.proc.wait())

    def kill(self):
        """SIGKILL the server's process group (:func:`kill_group`)."""
        kill_group(self.proc)

    def close(self):
        """End the server: end of input, then its group is killed; it is reaped."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.kill()
        self.proc.wait()
