"""TEST ONLY: tiny hand-written circom-2-ABI witness generators that misbehave.

:func:`write_wasm` writes a ``.wasm`` module (wat2wasm of the text below) that exports
what :class:`cuzk_tasks.groth16.witness.WitnessCalculator` calls -- ``getVersion`` (2),
``getFieldNumLen32`` (8), ``getRawPrime`` (BN254's r, so a BN254 zkey such as the mulchain
fixture's accepts it), the shared-memory accessors, ``getInputSize``/``getWitnessSize``,
``getInputSignalSize`` (every name is an input of one value) ... -- and whose ``init`` does
what ``behaviour`` says:

* ``"loop"``: never returns (a runaway witness generator);
* ``"trap"``: executes ``unreachable`` (a wasm trap, as a miscompiled circuit might).
"""

from __future__ import annotations

import pathlib

BN254_R = 21888242871839275222246405745257275088548364400416034343698204186575808495617

_INIT = {
    "loop": "(loop $forever (br $forever))",
    "trap": "unreachable",
}


def _prime_stores() -> str:
    words = [(BN254_R >> (32 * j)) & 0xFFFFFFFF for j in range(8)]
    return "\n".join(f"    (i32.store (i32.const {4 * j}) (i32.const {w - (1 << 32) if w >= 1 << 31 else w}))"
                     for j, w in enumerate(words))


def wat(behaviour: str, wires: int = 2) -> str:
    """The module's text (wasm text format); ``getWitnessSize`` says ``wires``."""
    init = _INIT[behaviour]
    return f"""(module
  (import "runtime" "exceptionHandler" (func $exc (param i32)))
  (memory (export "memory") 1)
  (func (export "getVersion") (result i32) (i32.const 2))
  (func (export "getMinorVersion") (result i32) (i32.const 1))
  (func (export "getPatchVersion") (result i32) (i32.const 0))
  (func (export "getFieldNumLen32") (result i32) (i32.const 8))
  (func (export "getSharedRWMemoryStart") (result i32) (i32.const 0))
  (func (export "getRawPrime")
{_prime_stores()})
  (func (export "readSharedRWMemory") (param $i i32) (result i32)
    (i32.load (i32.mul (local.get $i) (i32.const 4))))
  (func (export "writeSharedRWMemory") (param $i i32) (param $v i32)
    (i32.store (i32.mul (local.get $i) (i32.const 4)) (local.get $v)))
  (func (export "getInputSize") (result i32) (i32.const 1))
  (func (export "getWitnessSize") (result i32) (i32.const {wires}))
  (func (export "getInputSignalSize") (param i32 i32) (result i32) (i32.const 1))
  (func (export "setInputSignal") (param i32 i32 i32))
  (func (export "getWitness") (param i32))
  (func (export "getMessageChar") (result i32) (i32.const 0))
  (func (export "init") (param i32)
    {init})
)
"""


def write_wasm(path, behaviour: str, wires: int = 2) -> pathlib.Path:
    """Write the ``behaviour`` module to ``path``; returns the path."""
    import wasmtime

    path = pathlib.Path(path)
    path.write_bytes(wasmtime.wat2wasm(wat(behaviour, wires)))
    return path
