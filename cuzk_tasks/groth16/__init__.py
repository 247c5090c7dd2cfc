"""Pure Groth16 proving library (snarkjs-compatible; BN254 and BLS12-381: see :mod:`.curves`).

It never imports Celery or Redis: the pipeline builds on it, not the reverse.

Typical use::

    from cuzk_tasks.groth16 import read_zkey, read_wtns, prove
    zkey = read_zkey("circuit.zkey")
    proof, public = prove(zkey, read_wtns("witness.wtns", expected_length=zkey.n_vars))

The names below load on first use (PEP 562), so that importing one light submodule (the
CLI's whole-file prove: :mod:`.backends.native_prove`) does not import numpy with the prover.
"""

import importlib

#: public name -> the submodule that defines it
_EXPORTS = {
    "PartialProof": "prover", "prove": "prover", "prove_start": "prover",
    "prove_finish": "prover",
    "read_wtns": "formats.wtns", "write_wtns": "formats.wtns",
    "read_zkey": "formats.zkey",
    "export_verification_key": "verifier", "verify": "verifier",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
