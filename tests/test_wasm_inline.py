"""Small functions inlined at their calls before a circuit is compiled (issue 25: the witness's
speed): cuzk_tasks/groth16/wasm_inline.py -- the same results as the module as it was, on
hand-written functions that stress what inlining must keep (returns from inside blocks,
branches to the function's end, locals that start at zero on every call, arguments in order,
recursion), and on every fixture circuit against snarkjs's witnesses."""

from __future__ import annotations

import pytest

wasmtime = pytest.importorskip("wasmtime")

from cuzk_tasks.groth16 import wasm_binary, wasm_inline  # noqa: E402
from cuzk_tasks.groth16.witness import WitnessCalculator, load_input_json  # noqa: E402

from support.snarkjs_tool import fixture_dir  # noqa: E402

FIXTURES = ["mulchain", "mulchain_1k", "poseidon", "bls12381/mulchain", "bls12381/poseidon"]

#: helpers of every shape inlining must get right, and callers that use them in loops
WAT = r"""
(module
  (memory (export "memory") 1)
  ;; a return from inside two blocks, and one from the top level
  (func $clamp (param $x i32) (param $hi i32) (result i32)
    (block (block
      (br_if 1 (i32.lt_s (local.get $x) (i32.const 0)))
      (if (i32.gt_s (local.get $x) (local.get $hi)) (then (return (local.get $hi))))))
    (if (i32.lt_s (local.get $x) (i32.const 0)) (then (return (i32.const 0))))
    (local.get $x))
  ;; a local that must start at zero on every call, and a loop
  (func $popcount (param $v i64) (result i32) (local $n i32)
    (block $done (loop $next
      (br_if $done (i64.eqz (local.get $v)))
      (local.set $n (i32.add (local.get $n) (i32.wrap_i64 (i64.and (local.get $v) (i64.const 1)))))
      (local.set $v (i64.shr_u (local.get $v) (i64.const 1)))
      (br $next)))
    (local.get $n))
  ;; a br to the function's own end with a value, arguments in order, no result
  (func $sub_store (param $at i32) (param $a i32) (param $b i32)
    (i32.store (local.get $at) (i32.sub (local.get $a) (local.get $b))))
  (func $pick (param $c i32) (param $a f64) (param $b f64) (result f64) (local $t f64)
    (local.set $t (local.get $a))
    (br_if 0 (local.get $t) (local.get $c))
    (drop)
    (local.get $b))
  ;; recursion: never inlined into itself
  (func $fact (param $n i64) (result i64)
    (if (result i64) (i64.le_u (local.get $n) (i64.const 1))
      (then (i64.const 1))
      (else (i64.mul (local.get $n) (call $fact (i64.sub (local.get $n) (i64.const 1)))))))
  (func (export "run") (param $x i32) (result i64) (local $i i32) (local $acc i64)
    (loop $l
      (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u
        (call $clamp (i32.sub (local.get $x) (i32.mul (local.get $i) (i32.const 7)))
                     (i32.const 40)))))
      (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u
        (call $popcount (i64.mul (i64.extend_i32_u (local.get $i)) (i64.const 0x9E3779B97F4A7C15))))))
      (call $sub_store (i32.const 64) (local.get $x) (local.get $i))
      (local.set $acc (i64.add (local.get $acc) (i64.load32_s (i32.const 64))))
      (local.set $acc (i64.add (local.get $acc)
        (i64.trunc_f64_s (call $pick (i32.and (local.get $i) (i32.const 1))
                                     (f64.const 1000) (f64.const 3)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 50))))
    (i64.add (local.get $acc) (call $fact (i64.extend_i32_u (i32.and (local.get $x) (i32.const 15))))))
)
"""


def _run(wasm: bytes, xs):
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    run = wasmtime.Instance(store, wasmtime.Module(engine, wasm), []).exports(store)["run"]
    return [run(store, x) for x in xs]


def _calls(wasm: bytes, callee=None):
    """How many calls the module's code makes (to function ``callee`` only: a name)."""
    module = wasm_binary.Module(wasm)
    index = module.function_names()[callee] if callee else None
    count = 0
    for a, b in module.code_entries():
        _, start = wasm_binary.body_locals(wasm[a:b])
        count += sum(1 for _, _, i in wasm_binary.call_sites(wasm[a:b][start:])
                     if index is None or i == index)
    return count


def test_inlined_functions_give_the_same_results():
    wasm = wasmtime.wat2wasm(WAT)
    inlined = wasm_inline.inline(wasm)
    assert inlined is not None
    assert _calls(wasm) == 6 and _calls(inlined) == 2  # fact's own call and run's call to it
    xs = [-5, 0, 1, 7, 33, 40, 41, 299, 10**6, -(2**31)]
    assert _run(inlined, xs) == _run(wasm, xs)


def test_a_module_with_nothing_to_inline_or_an_unknown_instruction_is_left_alone():
    plain = wasmtime.wat2wasm('(module (func (export "f") (result i32) (i32.const 1)))')
    assert wasm_inline.inline(plain) is None
    simd = wasmtime.wat2wasm(
        '(module (func $g (result i32) (i32.const 2))'
        ' (func (export "f") (result i32) (drop (v128.const i64x2 1 2)) (call $g)))')
    assert wasm_inline.inline(simd) is None


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_circuit_is_inlined_and_its_witness_is_snarkjss(name, monkeypatch):
    d = fixture_dir(name)
    wasm = (d / "circuit.wasm").read_bytes()
    inlined = wasm_inline.inline(wasm)
    assert inlined is not None
    assert _calls(inlined, "Fr_copy") < _calls(wasm, "Fr_copy")
    expected = (d / "witness.wtns").read_bytes()
    inputs = load_input_json(d / "input.json")
    assert WitnessCalculator(d / "circuit.wasm", cache_dir=None).calculate_wtns(inputs) == expected
    # inlined alone, without the Montgomery rewrite
    from cuzk_tasks.groth16 import wasm_montgomery

    monkeypatch.setattr(wasm_montgomery, "supported", lambda: False)
    assert WitnessCalculator.prepared(wasm) == inlined
    assert WitnessCalculator(d / "circuit.wasm", cache_dir=None).calculate_wtns(inputs) == expected


def test_a_sped_up_module_that_does_not_validate_is_compiled_as_it_was(monkeypatch, caplog):
    """A rewrite's bug must not make a circuit unusable: the circuit runs unchanged."""
    d = fixture_dir("mulchain")

    def broken(wasm):  # valid sections, an invalid body: calls a function that is not there
        module = wasm_binary.Module(wasm)
        first = module.imported_functions()
        return module.with_bodies({first: b"\x00\x10\xff\xff\x03\x0b"})

    monkeypatch.setattr(wasm_inline, "inline", broken)
    with caplog.at_level("WARNING"):
        wc = WitnessCalculator(d / "circuit.wasm", cache_dir=None)
    assert "does not validate" in caplog.text
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == \
        (d / "witness.wtns").read_bytes()
