"""TEST ONLY: a hand-written circom-2-ABI witness generator whose behaviour a test chooses,
for what the compiled fixture circuits never do.

:func:`write_wasm` writes a module (wat2wasm of :func:`wat`) over BN254's r, n32 = 8, with
``inputs`` input signals of one value each (every name is an input: getInputSignalSize
answers 1) and ``wires`` witness values: wire ``i`` is ``7 * i + 1``.  Options:

* ``reject_call``: the k-th setInputSignal call (1-based) raises circom's exception 3
  ("Signal already set.") through the runtime's exceptionHandler;
* ``export_memory``: False leaves out the exported memory and getSharedRWMemoryStart (circom
  before 2.1, or a stripped module: only the ABI's functions reach the shared buffer);
* ``get_witness_result``: True gives getWitness an i32 result (not circom's ABI);
* ``loop_at_wire``: getWitness of this wire never returns (a runaway inside the bulk read).
"""

from __future__ import annotations

import pathlib

BN254_R = 21888242871839275222246405745257275088548364400416034343698204186575808495617


def _i32(w: int) -> int:
    return w - (1 << 32) if w >= 1 << 31 else w


def wat(inputs: int = 3, wires: int = 5, reject_call: int = 0, export_memory: bool = True,
        get_witness_result: bool = False, loop_at_wire: int = -1) -> str:
    prime = "\n".join(f"    (i32.store (i32.const {4 * j}) "
                      f"(i32.const {_i32((BN254_R >> (32 * j)) & 0xFFFFFFFF)}))"
                      for j in range(8))
    memory = '(memory (export "memory") 1)' if export_memory else "(memory 1)"
    start = ('(func (export "getSharedRWMemoryStart") (result i32) (i32.const 0))'
             if export_memory else "")
    result = "(result i32)" if get_witness_result else ""
    ret = "(i32.const 0)" if get_witness_result else ""
    return f"""(module
  (import "runtime" "exceptionHandler" (func $exc (param i32)))
  {memory}
  (global $calls (mut i32) (i32.const 0))
  (func (export "getVersion") (result i32) (i32.const 2))
  (func (export "getMinorVersion") (result i32) (i32.const 1))
  (func (export "getPatchVersion") (result i32) (i32.const 0))
  (func (export "getFieldNumLen32") (result i32) (i32.const 8))
  {start}
  (func (export "getRawPrime")
{prime})
  (func (export "readSharedRWMemory") (param $i i32) (result i32)
    (i32.load (i32.mul (local.get $i) (i32.const 4))))
  (func (export "writeSharedRWMemory") (param $i i32) (param $v i32)
    (i32.store (i32.mul (local.get $i) (i32.const 4)) (local.get $v)))
  (func (export "getInputSize") (result i32) (i32.const {inputs}))
  (func (export "getWitnessSize") (result i32) (i32.const {wires}))
  (func (export "getInputSignalSize") (param i32 i32) (result i32) (i32.const 1))
  (func (export "setInputSignal") (param i32 i32 i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (if (i32.eq (global.get $calls) (i32.const {reject_call}))
      (then (call $exc (i32.const 3)))))
  (func (export "getWitness") (param $i i32) {result}
    (if (i32.eq (local.get $i) (i32.const {loop_at_wire}))
      (then (loop $forever (br $forever))))
    (i32.store (i32.const 0) (i32.add (i32.mul (local.get $i) (i32.const 7)) (i32.const 1)))
    (memory.fill (i32.const 4) (i32.const 0) (i32.const 28))
    {ret})
  (func (export "getMessageChar") (result i32) (i32.const 0))
  (func (export "init") (param i32))
)
"""


def write_wasm(path, **options) -> pathlib.Path:
    """Write the module of ``options`` (see :func:`wat`) to ``path``; returns the path."""
    import wasmtime

    path = pathlib.Path(path)
    path.write_bytes(wasmtime.wat2wasm(wat(**options)))
    return path
