#!/usr/bin/env python3
"""BENCH ONLY: sleeping stand-ins for the three stages' compute, so a benchmark's cores run
only the orchestration (bench/scale.py).

* :class:`SleepProver` (``CUZK_PROVER=sleepers:SleepProver``, ``bench/`` on the workers'
  ``PYTHONPATH``): prove_start sleeps the device time its circuit's name gives --
  ``sleep500`` sleeps 500 ms (the host thread blocks, as it does while a GPU computes) --
  and prove_finish sleeps F ms; neither reads the witness.  The "proof" stored is
  ``{"bench": true}``.
* a synthesize stand-in: ``python bench/sleepers.py worker --cpu ...`` runs the product's
  CPU worker (``cuzk_tasks.cli.main``, unchanged) after connecting a Celery ``task_prerun``
  handler that sleeps S ms in the pool process before each synthesize task's body.  The
  body itself is the product's: synth_begin, the 32 KB fixture witness read, synth_end
  (which routes the partition) -- only the witness generation is replaced by the sleep.

``CUZK_BENCH_SLEEP="S_MS,F_MS"`` sets the synthesize and finalize sleeps (default 0,0).
The production code has no branch for any of this: the prover is swapped through the
``prover`` setting (cuzk_tasks/pipeline/provers.py) and the synthesize sleep is a Celery signal
handler of this launcher.
"""

from __future__ import annotations

import os
import re
import sys
import time

ENV = "CUZK_BENCH_SLEEP"
CIRCUIT_RE = re.compile(r"sleep(\d+)")


def parse(spec):
    """``(synthesize_ms, finalize_ms)`` of a CUZK_BENCH_SLEEP value (empty: no sleep)."""
    if not spec:
        return 0.0, 0.0
    try:
        synth, fin = (float(f) for f in spec.split(","))
    except ValueError:
        raise SystemExit(f"{ENV}={spec!r}: expected 'SYNTHESIZE_MS,FINALIZE_MS'") from None
    if synth < 0 or fin < 0:
        raise SystemExit(f"{ENV}={spec!r}: sleeps must be >= 0 ms")
    return synth, fin


def device_ms(circuit):
    """The device time, ms, that a bench circuit's name gives (``sleep500`` -> 500)."""
    m = CIRCUIT_RE.fullmatch(circuit or "")
    if not m:
        raise SystemExit(f"SleepProver: circuit {circuit!r}: expected a name 'sleep<ms>'")
    return float(m.group(1))


class SleepProver:
    backend_name = "cpu"

    def __init__(self, ctx):
        self.ctx = ctx
        _, self.finalize_ms = parse(os.environ.get(ENV))

    def prove_start(self, circuit, witness_path):
        time.sleep(device_ms(circuit) / 1000.0)  # the device computes, the host thread blocks
        return {"bench": True}

    def prove_finish(self, circuit, partial, witness_path):
        if self.finalize_ms:
            time.sleep(self.finalize_ms / 1000.0)
        return {"bench": True}, []


def install_synthesize_sleep(ms):
    """Sleep ``ms`` in the pool process before every synthesize task of this worker."""
    from celery import signals

    from cuzk_tasks.service.task_names import TASK_SYNTHESIZE

    @signals.task_prerun.connect(weak=False)
    def _sleep(sender=None, **_kwargs):
        if getattr(sender, "name", None) == TASK_SYNTHESIZE:
            time.sleep(ms / 1000.0)


def main(argv=None):
    """``cuzk-tasks ARGV`` (a worker), with the synthesize sleep of CUZK_BENCH_SLEEP."""
    synth_ms, _ = parse(os.environ.get(ENV))
    if synth_ms:
        install_synthesize_sleep(synth_ms)
    from cuzk_tasks.cli import main as cli_main

    return cli_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
