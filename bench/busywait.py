"""BENCH ONLY: a prover that proves nothing -- a calibrated busy-wait instead (bench/pipeline.py).

Selected by ``CUZK_PROVER=busywait:BusyWaitProver`` with ``bench/`` on the workers'
``PYTHONPATH``, and configured by ``CUZK_BENCH_BUSYWAIT="T_MS,F_MS[,monolithic][,sleep]"``:
prove_start spins T ms ("GPU" time; ``sleep``: the host thread blocks instead, as it
does while a real device computes), finalize spins F ms; ``monolithic`` spins the F ms
inside prove_start too (the device holds the CPU tail, as in cuzk before the split) and
leaves finalize nothing to do.  The "proof" stored is ``{"bench": true}``.

With ``CUZK_BENCH_DEVICE_LOG`` naming a directory, each process appends its "GPU" computes to
``device-<pid>.log`` there, one ``start end`` line (Unix seconds) per prove_start: the
device's own view of when it computed, from which bench/pipeline.py takes how long the
device waited between two partitions.  A compute's line is written at the start of the
next one, inside its T ms, so the record costs the hand-over nothing.
"""

from __future__ import annotations

import os
import pathlib
import time

ENV = "CUZK_BENCH_BUSYWAIT"
DEVICE_LOG_ENV = "CUZK_BENCH_DEVICE_LOG"


def busy_wait(ms):
    """Spin (not sleep) for ``ms`` milliseconds: a stand-in for compute."""
    deadline = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < deadline:
        pass


class DeviceLog:
    """The "GPU" computes of this process, logged to ``CUZK_BENCH_DEVICE_LOG`` (a directory;
    unset: not logged).  A compute's line is written at the start of the next one, inside
    its T ms."""

    def __init__(self):
        self.directory = os.environ.get(DEVICE_LOG_ENV)
        self.last = None  # (start, end) not yet written

    def compute(self, ms, host_sleeps=False):
        """T = ``ms`` of "GPU" time: spin, or (``host_sleeps``) block as the host thread does
        while a real device computes."""
        start = time.time()
        deadline = time.perf_counter() + ms / 1000.0
        self._write_last()  # inside this compute's T ms: the hand-over pays nothing for it
        if host_sleeps:
            time.sleep(max(0.0, deadline - time.perf_counter()))
        else:
            busy_wait((deadline - time.perf_counter()) * 1000.0)
        self.last = (start, time.time())

    def extend_last(self):
        """The last compute ends now (the device went on with more work)."""
        self.last = (self.last[0], time.time())

    def _write_last(self):
        if not self.directory or self.last is None:
            return
        with open(pathlib.Path(self.directory) / f"device-{os.getpid()}.log", "a") as f:
            f.write("%.6f %.6f\n" % self.last)
        self.last = None


def read_device_log(path):
    """``[(start, end), ...]`` (Unix seconds) of a ``device-<pid>.log``, in order."""
    spans = []
    for line in pathlib.Path(path).read_text().splitlines():
        start, end = line.split()
        spans.append((float(start), float(end)))
    return spans


def parse(spec):
    """``(T_ms, F_ms, monolithic, host_sleeps)`` of a CUZK_BENCH_BUSYWAIT value."""
    fields = [f.strip() for f in (spec or "").split(",")]
    try:
        return float(fields[0]), float(fields[1]), "monolithic" in fields[2:], "sleep" in fields[2:]
    except (IndexError, ValueError):
        raise SystemExit(f"{ENV}={spec!r}: expected 'T_MS,F_MS[,monolithic][,sleep]'") from None


class BusyWaitProver:
    backend_name = "cpu"

    def __init__(self, ctx):
        self.ctx = ctx
        self.gpu_ms, self.finalize_ms, self.monolithic, self.host_sleeps = parse(os.environ.get(ENV))
        self.device_log = DeviceLog()

    def prove_start(self, circuit, witness_path):
        self.device_log.compute(self.gpu_ms, self.host_sleeps)
        if self.monolithic:
            busy_wait(self.finalize_ms)
            self.device_log.extend_last()  # the device holds the CPU tail too
        return {"bench": True}

    def prove_finish(self, circuit, partial, witness_path):
        if not self.monolithic:
            busy_wait(self.finalize_ms)
        return {"bench": True}, []
