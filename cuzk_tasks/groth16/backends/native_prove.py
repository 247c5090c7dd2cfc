"""``cuzk-tasks prove`` on the CPU core in one native call, without numpy.

The native core reads the zkey and the witness file itself, proves, self-verifies and
returns the proof's coordinates as decimal text (``cuzk_prove_files`` in
``cuzk_tasks/native/include/cuzk/prove_cpu.hpp``).  A small proof then costs the
interpreter, this module and the proof, where the numpy path (:mod:`.prover`) first pays
for importing numpy, several times a 2^10-constraint proof on its own.

It is a fast path, not a second prover with its own rules: whenever the native call
declines (a file it cannot open, a layout it does not accept, a witness that does not
satisfy the circuit), :func:`prove_files` raises :class:`NativeCoreError` and the caller
proves with :mod:`.prover`, whose readers name the file, the field and what was expected.
Given the same r and s both produce the same proof (tests/test_native_prove.py).

Why a second road: measured 2026-12-05 on a 2-core machine, ``python -c "from
cuzk_tasks.cli import main; main()" prove tests/fixtures/mulchain_1k/circuit.zkey
tests/fixtures/mulchain_1k/witness.wtns p.json q.json --backend cpu``, medians of 5
alternating fresh processes: 38.6 ms on this road against 136.1 ms with the stage prover
(``cli._prove_natively`` replaced by ``lambda a: None``), 3.5x; ``python -c pass`` 20.7 ms.
"""

import ctypes

from cuzk_tasks.errors import NativeCoreError
from ..formats.proof_json import proof_to_json, public_to_json
from .native_lib import CURVE_NAMES, check, lib

#: the step timings cuzk_prove_files measures, in its order (prover.py's step names)
STEPS = ("load", "evaluate_ab", "compute_h", "msm_h", "msm_a", "msm_b1", "msm_c", "msm_b2",
         "assemble", "self_verify")


def _point(line: str, coordinates: int):
    """A point from one line of the native text: None (infinity) or a tuple of ints."""
    if line == "inf":
        return None
    values = [int(v) for v in line.split()]
    if len(values) != coordinates:
        raise NativeCoreError(f"native prove returned a malformed point ({len(values)} "
                              f"coordinates, expected {coordinates})")
    return tuple(values)


def prove_files(zkey_path, witness_path, threads: int, verify: bool = True, r=None, s=None):
    """Prove ``witness_path`` under ``zkey_path``; returns ``(proof, public, timings_ms)``,
    proof.json and public.json as snarkjs writes them.

    ``r`` and ``s`` are drawn by the native core (getrandom) unless given (tests only).
    Raises :class:`NativeCoreError` (its ``status`` says why) when the native core is not
    built or declines the files; then prove with :mod:`.prover` instead.
    """
    core = lib()
    rs = None
    if r is not None or s is not None:
        limbs = [(value >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for value in (r, s) for i in range(4)]
        rs = (ctypes.c_uint64 * 8)(*limbs)
    curve_id = ctypes.c_int(-1)
    text = ctypes.c_void_p()
    length = ctypes.c_uint64()
    timings = (ctypes.c_double * len(STEPS))()
    status = core.cuzk_prove_files(str(zkey_path).encode(), str(witness_path).encode(), rs,
                                   1 if verify else 0, int(threads), ctypes.byref(curve_id),
                                   ctypes.byref(text), ctypes.byref(length), timings)
    try:
        check(status, "whole-file prove")
        lines = ctypes.string_at(text.value, length.value).decode("ascii").splitlines()
    finally:
        if text.value:
            core.cuzk_free(text)
    curve = CURVE_NAMES[curve_id.value]  # the snarkjs name, as proof.json spells it
    pi_a, pi_c = _point(lines[0], 2), _point(lines[2], 2)
    pi_b = _point(lines[1], 4)
    if pi_b is not None:
        pi_b = ((pi_b[0], pi_b[1]), (pi_b[2], pi_b[3]))
    proof = proof_to_json(pi_a, pi_b, pi_c, curve=curve)
    return proof, public_to_json(int(v) for v in lines[3:]), dict(zip(STEPS, timings))
