"""BENCH ONLY: a prover that proves nothing -- a calibrated busy-wait instead (bench/pipeline.py).

Selected by ``CUZK_PROVER=busywait:BusyWaitProver`` with ``bench/`` on the workers'
``PYTHONPATH``, and configured by ``CUZK_BENCH_BUSYWAIT="T_MS,F_MS[,monolithic][,sleep]"``:
prove_start spins T ms ("GPU" time; ``sleep``: the host thread blocks instead, as it
does while a real device computes), finalize spins F ms; ``monolithic`` spins the F ms
inside prove_start too (the device holds the CPU tail, as in cuzk before the split) and
leaves finalize nothing to do.  The "proof" stored is ``{"bench": true}``.
"""

from __future__ import annotations

import os
import time

ENV = "CUZK_BENCH_BUSYWAIT"


def busy_wait(ms):
    """Spin (not sleep) for ``ms`` milliseconds: a stand-in for compute."""
    deadline = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < deadline:
        pass


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

    def prove_start(self, circuit, witness_path):
        if self.host_sleeps:
            time.sleep(self.gpu_ms / 1000.0)  # the device computes while the host thread blocks
        else:
            busy_wait(self.gpu_ms)
        if self.monolithic:
            busy_wait(self.finalize_ms)
        return {"bench": True}

    def prove_finish(self, circuit, partial, witness_path):
        if not self.monolithic:
            busy_wait(self.finalize_ms)
        return {"bench": True}, []
