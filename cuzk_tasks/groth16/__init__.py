"""Pure Groth16 proving library (snarkjs-compatible; BN254, and BLS12-381 for everything
but proving: see :mod:`.curves`).

It never imports Celery or Redis: the pipeline builds on it, not the reverse.

Typical use::

    from cuzk_tasks.groth16 import read_zkey, read_wtns, prove
    zkey = read_zkey("circuit.zkey")
    proof, public = prove(zkey, read_wtns("witness.wtns", expected_length=zkey.n_vars))
"""

from .prover import PartialProof, prove, prove_finish, prove_start
from .wtns import read_wtns, write_wtns
from .zkey import read_zkey
from .verifier import export_verification_key, verify

__all__ = [
    "PartialProof", "prove", "prove_start", "prove_finish",
    "read_zkey", "read_wtns", "write_wtns",
    "export_verification_key", "verify",
]
