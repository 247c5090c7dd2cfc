"""TEST ONLY: the product's prover with instruments, for the tests that run real workers.

Selected by ``CUZK_PROVER=support.instruments:InstrumentedProver`` with ``tests/`` on the workers'
``PYTHONPATH`` (:data:`ENV` gives both); the production code has no branch for any of it.
Each instrument is an environment variable of the worker:

* ``CUZK_TEST_PROVE_DELAY_MS``: sleep before prove_start computes, ``"250"`` (ms, every
  circuit) or ``"slow=4000,mulchain=200"`` (ms per circuit name);
* ``CUZK_TEST_FINALIZE_DELAY_MS``: sleep after finalize has made the proof, before it is
  stored (finalizers then overlap the device's next prove);
* ``CUZK_TEST_POISON_CIRCUIT``: prove_start of that circuit kills its process (os._exit),
  the poison-pill path.
"""

from __future__ import annotations

import logging
import os
import pathlib
import time

from cuzk_tasks.pipeline.provers import Groth16Prover

log = logging.getLogger("tests.instruments")

PROVE_DELAY_ENV = "CUZK_TEST_PROVE_DELAY_MS"
FINALIZE_DELAY_ENV = "CUZK_TEST_FINALIZE_DELAY_MS"
POISON_CIRCUIT_ENV = "CUZK_TEST_POISON_CIRCUIT"
TESTS = pathlib.Path(__file__).resolve().parent.parent


def env(base_pythonpath=""):
    """The worker environment that selects this prover (add the instruments' own vars)."""
    path = os.pathsep.join(p for p in (str(TESTS.parent), str(TESTS), base_pythonpath) if p)
    return {"CUZK_PROVER": "support.instruments:InstrumentedProver", "PYTHONPATH": path}


def prove_delay_ms(spec, circuit):
    """Parse ``"250"`` (every circuit) or ``"slow=4000,mulchain=200"`` (per circuit)."""
    if not spec:
        return 0.0
    default = 0.0
    for item in spec.split(","):
        name, sep, value = item.strip().rpartition("=")
        if not sep:
            default = float(value)
        elif name == circuit:
            return float(value)
    return default


class InstrumentedProver(Groth16Prover):
    def prove_start(self, circuit, witness_path):
        if os.environ.get(POISON_CIRCUIT_ENV) == circuit:
            log.error("TEST INSTRUMENT %s=%s: killing this worker process", POISON_CIRCUIT_ENV,
                      circuit)
            os._exit(86)
        delay = prove_delay_ms(os.environ.get(PROVE_DELAY_ENV), circuit)
        if delay:
            time.sleep(delay / 1000.0)
        return super().prove_start(circuit, witness_path)

    def prove_finish(self, circuit, partial, witness_path):
        proof = super().prove_finish(circuit, partial, witness_path)
        delay = float(os.environ.get(FINALIZE_DELAY_ENV) or 0)
        if delay:
            time.sleep(delay / 1000.0)
        return proof
