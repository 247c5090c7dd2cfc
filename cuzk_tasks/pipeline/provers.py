"""The compute of the prove and finalize stages, behind one small interface.

:class:`Groth16Prover` is the product: ``prove_start`` runs the NTTs and G1 MSMs of
:func:`cuzk_tasks.groth16.prover.prove_start` on the worker's backend (the GPU or the native
CPU core), ``prove_finish`` the G2 MSM, assembly and self-verification.  The pipeline calls
these and nothing else, so each stage has one path.  A test or a benchmark swaps the
whole prover through the ``prover`` setting (``CUZK_PROVER=module:Class``, the module on
``PYTHONPATH``): ``tests/support/instruments.py`` (delays and a poison pill around the real one),
``bench/busywait.py`` (a calibrated busy-wait instead of proving).  A prover is built once
per process with its :class:`~cuzk_tasks.pipeline.Context`.
"""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from ..paths import open_input


class Groth16Prover:
    """snarkjs-compatible Groth16 on the context's backend and resident zkeys."""

    def __init__(self, ctx):
        self.ctx = ctx

    @property
    def backend_name(self) -> str:
        """``gpu`` or ``cpu``: where prove_start computes (a wrong GPU result is a device
        fault, a wrong CPU one a bad witness)."""
        return getattr(self.ctx.backend, "name", self.ctx.backend_name)

    def _open(self, witness_path):
        """The witness opened the one way a worker opens a submitted file (a confined regular
        file, no symlink followed: :func:`cuzk_tasks.paths.open_input`)."""
        return open_input(witness_path, self.ctx.settings, "witness_ref")

    def prove_start(self, circuit: str, witness_path: str) -> dict:
        """The partial proof (JSON-able) of the witness at ``witness_path`` (a confined real
        path) for ``circuit``."""
        # lazy: groth16 loads numpy and the native core, which a client never needs (it
        # imports this module with the pipeline, for submit_job)
        from ..groth16.prover import prove_start
        from ..groth16.formats.wtns import read_wtns

        zkey = self.ctx.resident.get(circuit)
        witness = read_wtns(witness_path, zkey=zkey, fileobj=self._open(witness_path))
        try:
            return prove_start(zkey, witness, backend=self.ctx.backend).to_json()
        finally:
            witness.close()

    def prove_finish(self, circuit: str, partial: dict, witness_path: str) -> tuple:
        """``(proof, public)`` JSON of a partial from :meth:`prove_start`; raises
        SelfVerificationError for a proof that does not verify."""
        # lazy: as in prove_start (numpy and the native core)
        from ..groth16.prover import PartialProof, prove_finish
        from ..groth16.formats.wtns import read_wtns

        zkey = self.ctx.resident.get(circuit)
        witness = read_wtns(witness_path, zkey=zkey, fileobj=self._open(witness_path))
        try:
            return prove_finish(PartialProof.from_json(partial), zkey, witness)
        finally:
            witness.close()


def load_prover(ctx):
    """The prover named by ``ctx.settings.prover``: ``groth16`` or ``module:Class``."""
    spec = ctx.settings.prover
    if spec == "groth16":
        return Groth16Prover(ctx)
    module, _, name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"prover: cannot load {spec!r} ({type(exc).__name__}: {exc}); "
                          "expected 'groth16' or 'module:Class' importable here") from None
    return cls(ctx)
