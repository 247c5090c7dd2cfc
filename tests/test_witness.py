"""In-process circom witness generation (wasmtime) vs snarkjs."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk_tasks.errors import CuzkError, FormatError, WitnessError
from cuzk_tasks.groth16.formats.binfile import BN254_R as R
from cuzk_tasks.groth16.curves import BLS12_381
from cuzk_tasks.groth16.formats.r1cs import read_r1cs
from cuzk_tasks.groth16.witness import (WitnessCalculator, fnv1a64,
                                        generate_witness, get_calculator,
                                        load_input_json)
from cuzk_tasks.groth16.formats.wtns import limbs_to_ints, read_wtns

from support.snarkjs_tool import (BLS12381_FIXTURES, FIXTURES, fixture_dir, requires_snarkjs,
                          run_snarkjs)

ALL = FIXTURES + ["assert_fail"]


def calc(name) -> WitnessCalculator:
    return get_calculator(fixture_dir(name) / "circuit.wasm")


def write_input(tmp_path, obj, fname="input.json"):
    p = tmp_path / fname
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def test_fnv1a64_known():
    # FNV-1a 64 test vectors
    assert fnv1a64("") == 0xCBF29CE484222325
    assert fnv1a64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a64("foobar") == 0x85944171F73967E8


@pytest.mark.parametrize("name", ALL)
def test_witness_matches_fixture(name, tmp_path):
    d = fixture_dir(name)
    wc = calc(name)
    expected = (d / "witness.wtns").read_bytes()
    assert wc.prime == R and wc.version[0] == 2
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == expected
    values = wc.calculate_file(d / "input.json")
    assert values.shape == (wc.witness_size, 4) and values.dtype == np.dtype("<u8")
    np.testing.assert_array_equal(values, read_wtns(d / "witness.wtns").values)
    out = tmp_path / "w.wtns"
    assert generate_witness(d / "circuit.wasm", d / "input.json", out) == wc.witness_size
    assert out.read_bytes() == expected


def test_calculator_is_reused_and_survives_failure():
    d = fixture_dir("assert_fail")
    wc = calc("assert_fail")
    assert get_calculator(d / "circuit.wasm") is wc
    good = load_input_json(d / "input.json")
    with pytest.raises(WitnessError):
        wc.calculate_file(d / "input_bad.json")
    assert wc.calculate_wtns(good) == (d / "witness.wtns").read_bytes()
    assert wc.calculate_wtns(good) == (d / "witness.wtns").read_bytes()


def _count_instances(monkeypatch) -> list:
    """A list that grows by one for every wasm instance made from now on."""
    import wasmtime

    made, real = [], wasmtime.Instance
    monkeypatch.setattr(wasmtime, "Instance", lambda *args: made.append(1) or real(*args))
    return made


def test_a_calculation_runs_in_the_instance_the_last_one_left(monkeypatch):
    """circom's init resets an instance (snarkjs reuses its own): a kept instance computes
    every witness a fresh one does, and the page faults of a fresh memory are saved."""
    wasm = fixture_dir("mulchain") / "circuit.wasm"
    kept, fresh = WitnessCalculator(wasm), WitnessCalculator(wasm, keep_instance_mib=0)
    made = _count_instances(monkeypatch)
    inputs = [{"a": str(977 * i + 3), "b": hex(31337 * i + 5)} for i in range(6)]
    by_kept = [kept.calculate_wtns(inp) for inp in inputs]
    kept_made = len(made)
    by_fresh = [fresh.calculate_wtns(inp) for inp in inputs]
    assert by_kept == by_fresh and len(set(by_kept)) == len(inputs)
    assert kept_made <= 1  # the bulk helper, once
    assert len(made) - kept_made >= len(inputs)


@pytest.mark.parametrize("keep_mib", [0, 1e-6])
def test_no_instance_is_kept_past_its_bound(monkeypatch, keep_mib):
    wc = WitnessCalculator(fixture_dir("poseidon") / "circuit.wasm", keep_instance_mib=keep_mib)
    made = _count_instances(monkeypatch)
    good = load_input_json(fixture_dir("poseidon") / "input.json")
    for _ in range(3):
        assert wc.calculate_wtns(good) == (fixture_dir("poseidon") / "witness.wtns").read_bytes()
    assert len(made) >= 3


def test_the_instance_of_a_failed_calculation_is_dropped(monkeypatch):
    d = fixture_dir("assert_fail")
    wc = WitnessCalculator(d / "circuit.wasm")
    good = load_input_json(d / "input.json")
    assert wc.calculate_wtns(good) == (d / "witness.wtns").read_bytes()
    made = _count_instances(monkeypatch)
    assert wc.calculate_wtns(good) == (d / "witness.wtns").read_bytes()
    assert not made  # the last success's instance
    with pytest.raises(WitnessError):
        wc.calculate_file(d / "input_bad.json")
    before = len(made)
    assert wc.calculate_wtns(good) == (d / "witness.wtns").read_bytes()
    assert len(made) > before  # a fresh one: the failed one's state is gone


def _child_witness(wc, inputs, made, queue):
    before = len(made)
    queue.put((wc.calculate_wtns(inputs), len(made) - before))


def test_a_forked_child_does_not_use_its_parents_kept_instance(monkeypatch):
    import multiprocessing

    wasm = fixture_dir("mulchain") / "circuit.wasm"
    wc = WitnessCalculator(wasm)
    inputs = {"a": "5", "b": "7"}
    expected = wc.calculate_wtns(inputs)  # the parent keeps its instance
    made = _count_instances(monkeypatch)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_witness, args=(wc, inputs, made, queue))
    child.start()
    try:
        witness, child_made = queue.get(timeout=30)
    finally:
        child.join(10)
    assert witness == expected and child_made >= 1
    assert wc.calculate_wtns(inputs) == expected and not made  # the parent's is still kept


@pytest.mark.parametrize("a,b,ea,eb", [
    (3, 11, 3, 11),
    ("3", "11", 3, 11),
    ("0x3", "0xb", 3, 11),
    (-5, "-7", R - 5, R - 7),
    ([3], [[11]], 3, 11),             # nested arrays flatten
    (str(R + 3), 11, 3, 11),           # reduced mod r
    (True, " 11 ", 1, 11),            # JS BigInt semantics
    ("0b11", "0o13", 3, 11),
    (1e3, "", 1000, 0),
])
def test_input_formats(a, b, ea, eb, tmp_path):
    wc = calc("mulchain")
    vals = limbs_to_ints(wc.calculate({"a": a, "b": b}))
    # mulchain: x0 = a, x_i = x_{i-1} * b + i, c = x_30; witness [1, c, b, a, ...]
    x = ea
    for i in range(1, 31):
        x = (x * eb + i) % R
    assert vals[:4] == [1, x, eb, ea]


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=-(1 << 300), max_value=1 << 300),
       st.integers(min_value=0, max_value=R - 1))
def test_random_inputs_satisfy_r1cs(a, b):
    r1 = _r1cs("mulchain")
    wc = calc("mulchain")
    vals = limbs_to_ints(wc.calculate({"a": str(a), "b": hex(b)}))
    assert vals[3] == a % R and vals[2] == b
    assert r1.is_satisfied(vals) is None


_R1CS = {}


def _r1cs(name):
    if name not in _R1CS:
        _R1CS[name] = read_r1cs(fixture_dir(name) / "circuit.r1cs")
    return _R1CS[name]


def test_poseidon_random_satisfies_r1cs():
    wc = calc("poseidon")
    r1 = _r1cs("poseidon")
    inp = load_input_json(fixture_dir("poseidon") / "input.json")
    keys = list(inp)
    for seed in range(3):
        rnd = {k: str((seed + 1) * 1234567891011 + i) for i, k in enumerate(keys)}
        if isinstance(inp[keys[0]], list):
            rnd = {k: [str(seed * 7 + j) for j in range(len(v))] for k, v in inp.items()}
        assert r1.is_satisfied(limbs_to_ints(wc.calculate(rnd))) is None


# ----------------------------------------------------------------- snarkjs
@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name,inp", [
    ("mulchain", None), ("poseidon", None), ("mulchain_1k", None), ("assert_fail", None),
    ("mulchain", {"a": "-5", "b": "0x1f"}),
    ("mulchain", {"a": 12345678901234567890123, "b": [" 7 "]}),
    ("mulchain", {"a": "", "b": str(R + 2)}),
])
def test_witness_matches_fresh_snarkjs(name, inp, tmp_path):
    d = fixture_dir(name)
    input_path = d / "input.json" if inp is None else write_input(tmp_path, inp)
    out = tmp_path / "snarkjs.wtns"
    proc = run_snarkjs("wtns", "calculate", d / "circuit.wasm", input_path, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = tmp_path / "ours.wtns"
    with pytest.warns(UserWarning) if inp and isinstance(inp.get("a"), int) else \
            _nullcontext():
        generate_witness(d / "circuit.wasm", input_path, ours)
    assert ours.read_bytes() == out.read_bytes()


# BLS12-381 circuits (circom --prime bls12381): the calculator takes the prime from the
# wasm, so the same code gives snarkjs's bytes; inputs that reduce differently mod the two
# scalar fields (negative, >= BN254's r) show the prime really is BLS12-381's.
@pytest.mark.parametrize("name", BLS12381_FIXTURES)
def test_bls12381_witness_matches_fixture(name, tmp_path):
    d = fixture_dir(name)
    wc = calc(name)
    assert wc.prime == BLS12_381.r != R
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == (d / "witness.wtns").read_bytes()
    out = tmp_path / "w.wtns"
    generate_witness(d / "circuit.wasm", d / "input.json", out)
    assert out.read_bytes() == (d / "witness.wtns").read_bytes()
    assert read_wtns(out).curve is BLS12_381


@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name,inp", [
    ("bls12381/mulchain", {"a": "-5", "b": "0x1f"}),
    ("bls12381/mulchain", {"a": str(R + 2), "b": str(BLS12_381.r + 3)}),
    ("bls12381/poseidon", {"x": "-1", "y": str(R)}),
])
def test_bls12381_witness_matches_fresh_snarkjs(name, inp, tmp_path):
    d = fixture_dir(name)
    input_path = write_input(tmp_path, inp)
    out = tmp_path / "snarkjs.wtns"
    proc = run_snarkjs("wtns", "calculate", d / "circuit.wasm", input_path, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = tmp_path / "ours.wtns"
    generate_witness(d / "circuit.wasm", input_path, ours)
    assert ours.read_bytes() == out.read_bytes()
    r1 = read_r1cs(d / "circuit.r1cs")
    assert r1.curve is BLS12_381 and r1.is_satisfied(read_wtns(ours).as_ints()) is None


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ----------------------------------------------------------------- errors
def _err(tmp_path, name, obj, exc=WitnessError):
    p = write_input(tmp_path, obj)
    with pytest.raises(exc) as ei:
        generate_witness(fixture_dir(name) / "circuit.wasm", p, tmp_path / "w.wtns")
    assert isinstance(ei.value, CuzkError)
    assert str(p) in str(ei.value)
    assert not (tmp_path / "w.wtns").exists()
    return str(ei.value)


def test_missing_signal(tmp_path):
    msg = _err(tmp_path, "mulchain", {"a": "3"})
    assert "missing input signal" in msg and "1 of the circuit's 2" in msg


def test_missing_signal_named_with_sym(tmp_path):
    # a circom .sym file next to the wasm lets us name the missing signal
    wasm = tmp_path / "circuit.wasm"
    shutil.copy(fixture_dir("mulchain") / "circuit.wasm", wasm)
    (tmp_path / "circuit.sym").write_text(
        "1,1,0,main.c\n2,2,0,main.b\n3,3,0,main.a\n4,4,0,main.x[0]\n")
    p = write_input(tmp_path, {"a": "3"})
    with pytest.raises(WitnessError) as ei:
        WitnessCalculator(wasm).calculate_file(p)
    msg = str(ei.value)
    assert str(p) in msg and "'b'" in msg and "1 value" in msg
    assert "'x'" not in msg and "'a'" not in msg


def test_extra_signal(tmp_path):
    msg = _err(tmp_path, "mulchain", {"a": "3", "b": "11", "zz": "1"})
    assert "'zz'" in msg and "not an input" in msg


def test_wrong_array_size(tmp_path):
    msg = _err(tmp_path, "mulchain", {"a": ["3", "4"], "b": "11"})
    assert "'a'" in msg and "2 value(s)" in msg and "expects 1" in msg


@pytest.mark.parametrize("bad", ["1.5", "abc", None, "-0x5", 1.5, {"k": 1}])
def test_bad_values(tmp_path, bad):
    msg = _err(tmp_path, "mulchain", {"a": bad, "b": "11"})
    assert "'a" in msg


def test_bad_json(tmp_path):
    msg = _err(tmp_path, "mulchain", '{"a": "3", "b": ', exc=FormatError)
    assert "json" in msg
    msg = _err(tmp_path, "mulchain", '[1, 2]', exc=FormatError)
    assert "json" in msg


def test_assert_failure_carries_circom_message(tmp_path):
    d = fixture_dir("assert_fail")
    with pytest.raises(WitnessError) as ei:
        generate_witness(d / "circuit.wasm", d / "input_bad.json", tmp_path / "w.wtns")
    e = ei.value
    assert str(d / "input_bad.json") in str(e)
    assert "Assert Failed." in str(e)
    assert "Error in template AssertFail_0 line: 10" in str(e)
    assert e.code == 4
    assert e.circom_message == "Assert Failed.\nError in template AssertFail_0 line: 10"


def test_missing_wasm(tmp_path):
    with pytest.raises(FormatError) as ei:
        WitnessCalculator(tmp_path / "nope.wasm")
    assert "nope.wasm" in str(ei.value)
    bad = tmp_path / "bad.wasm"
    bad.write_bytes(b"\0asmjunk")
    with pytest.raises(FormatError) as ei:
        WitnessCalculator(bad)
    assert "bad.wasm" in str(ei.value)


_GROWTH_SCRIPT = r"""
import json, os, sys
from cuzk_tasks.errors import WitnessError
from cuzk_tasks.groth16.witness import get_calculator

fixtures = sys.argv[1]
good = get_calculator(os.path.join(fixtures, "poseidon", "circuit.wasm"))
good_input = json.load(open(os.path.join(fixtures, "poseidon", "input.json")))
bad = get_calculator(os.path.join(fixtures, "assert_fail", "circuit.wasm"))
bad_input = json.load(open(os.path.join(fixtures, "assert_fail", "input_bad.json")))


def rss_mib():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def once(i):
    if i % 4 == 3:  # a failing calculation (a circuit assert) must not leak either
        try:
            bad.calculate(bad_input)
        except WitnessError:
            return
        raise SystemExit("assert_fail's bad input did not fail")
    good.calculate(good_input)


for i in range(20):  # warm-up: allocator pools, caches
    once(i)
before = rss_mib()
for i in range(200):
    once(i)
print(json.dumps({"before": before, "after": rss_mib()}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc")
def test_two_hundred_witnesses_in_one_process_do_not_grow_it(tmp_path):
    """Issue 11: every calculation's wasm store is freed (it used to live as long as the
    process: about 0.2 MB per Poseidon witness, ~36 MB over these 200)."""
    import subprocess
    import sys

    script = tmp_path / "growth.py"
    script.write_text(_GROWTH_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, str(script), os.path.join(root, "tests", "fixtures")],
                         capture_output=True, text=True, timeout=300, cwd=root,
                         env=dict(os.environ, PYTHONPATH=root + os.pathsep
                                  + os.environ.get("PYTHONPATH", "")))
    assert out.returncode == 0, out.stderr[-3000:]
    rss = json.loads(out.stdout.strip().splitlines()[-1])
    assert rss["after"] - rss["before"] < 4.0, rss


# --- runaway and trapping wasm (issue 24) -------------------------------------------------

@pytest.fixture(scope="module")
def misbehaving(tmp_path_factory):
    """``{"loop": path, "trap": path}``: hand-written circom-ABI modules whose init never
    returns / traps (tests/support/runaway_wasm.py)."""
    from support.runaway_wasm import write_wasm

    d = tmp_path_factory.mktemp("wasm")
    return {b: write_wasm(d / f"{b}.wasm", b) for b in ("loop", "trap")}


def _epoch_threads():
    import threading

    return [t for t in threading.enumerate() if t.name == "cuzk-wasm-epoch"]


def test_a_wasm_that_never_returns_stops_at_its_time_limit(misbehaving):
    import time

    from cuzk_tasks.errors import WitnessTimeoutError

    wc = WitnessCalculator(misbehaving["loop"])
    t0 = time.monotonic()
    with pytest.raises(WitnessTimeoutError) as e:
        wc.calculate({"a": 1}, "in.json", time_limit_s=0.5)
    took = time.monotonic() - t0
    assert 0.5 <= took < 5, took
    assert str(e.value) == (f"in.json: witness generation exceeded 0.5 s in "
                            f"{misbehaving['loop']} (witness_time_limit_s)")
    # the calculator stays usable, and the ticker thread stops once nothing runs
    with pytest.raises(WitnessTimeoutError):
        wc.calculate({"a": 1}, time_limit_s=0.2)
    deadline = time.monotonic() + 5
    while _epoch_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _epoch_threads()


def test_the_time_limit_comes_from_the_environment(misbehaving, monkeypatch):
    from cuzk_tasks.errors import WitnessTimeoutError

    monkeypatch.setenv("CUZK_WITNESS_TIME_LIMIT_S", "0.3")
    wc = WitnessCalculator(misbehaving["loop"])
    with pytest.raises(WitnessTimeoutError, match="exceeded 0.3 s"):
        wc.calculate({"a": 1})
    monkeypatch.setenv("CUZK_WITNESS_TIME_LIMIT_S", "soon")
    with pytest.raises(CuzkError, match="CUZK_WITNESS_TIME_LIMIT_S must be a positive number"):
        wc.calculate({"a": 1})


def test_interrupt_stops_a_running_wasm_from_another_thread(misbehaving):
    import threading
    import time

    from cuzk_tasks.errors import WitnessInterrupted

    wc = WitnessCalculator(misbehaving["loop"])
    timer = threading.Timer(0.3, wc.interrupt)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(WitnessInterrupted, match="interrupted"):
        wc.calculate({"a": 1}, time_limit_s=60)
    assert time.monotonic() - t0 < 5
    timer.join()
    assert wc.interrupt() == 0  # nothing runs any more
    # a calculation begun after the interrupt has its whole limit again
    with pytest.raises(WitnessError, match="exceeded 0.3 s"):
        wc.calculate({"a": 1}, time_limit_s=0.3)


def test_one_calculation_timing_out_leaves_another_on_the_same_engine_alone(misbehaving):
    """The epoch is the engine's: a tick that ends one store's deadline must not end
    another's (each store's deadline is its own limit in ticks)."""
    import threading
    import time

    from cuzk_tasks.errors import WitnessTimeoutError

    wc = WitnessCalculator(misbehaving["loop"])
    errors = {}

    def run(name, limit):
        try:
            wc.calculate({"a": 1}, time_limit_s=limit)
        except WitnessError as exc:
            errors[name] = (exc, time.monotonic())

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=("short", 0.3)),
               threading.Thread(target=run, args=("long", 2.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert isinstance(errors["short"][0], WitnessTimeoutError)
    assert isinstance(errors["long"][0], WitnessTimeoutError)
    assert "exceeded 2 s" in str(errors["long"][0])
    assert errors["long"][1] - t0 >= 2.0  # not cut short by the other one's deadline


def test_a_trapping_wasm_is_a_witness_error_naming_the_file(misbehaving):
    wc = WitnessCalculator(misbehaving["trap"])
    with pytest.raises(WitnessError) as e:
        wc.calculate({"a": 1}, "in.json")
    assert str(e.value) == (f"in.json: witness generation failed in {misbehaving['trap']}: "
                            "wasm trap: wasm `unreachable` instruction executed")
    assert "backtrace" not in str(e.value)


def test_real_circuits_compute_the_same_witness_under_the_time_limit():
    """The epoch checks change nothing computed (and cost no measurable time: issue 24)."""
    d = fixture_dir("poseidon")
    wc = calc("poseidon")
    assert wc.calculate_wtns(load_input_json(d / "input.json"), time_limit_s=30) == \
        (d / "witness.wtns").read_bytes()


def _child_calculates(wc, queue):
    try:
        wc.calculate({"a": 1}, time_limit_s=0.3)
        queue.put("returned")
    except WitnessError as exc:
        queue.put(type(exc).__name__)


def test_a_forked_child_keeps_its_own_time_limits(misbehaving):
    """A pool process forked while its parent was calculating (the parent's ticker thread
    does not exist in the child, and its lock may have been held) still stops its wasm."""
    import multiprocessing
    import threading
    import time

    wc = WitnessCalculator(misbehaving["loop"])
    parent = threading.Thread(target=lambda: pytest.raises(WitnessError, wc.calculate,
                                                           {"a": 1}, time_limit_s=3))
    parent.start()
    time.sleep(0.5)  # the parent's calculation runs, its ticker thread too
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_calculates, args=(wc, queue))
    child.start()
    try:
        assert queue.get(timeout=20) == "WitnessTimeoutError"
    finally:
        child.join(5)
        if child.is_alive():
            child.kill()
        parent.join(10)


# --- the bulk helper: no Python call per wire or per input value (issue 25) ----------------

def _abi(tmp_path, name="abi", **options) -> WitnessCalculator:
    from support.abi_wasm import write_wasm

    return WitnessCalculator(write_wasm(tmp_path / f"{name}.wasm", **options), cache_dir=None)


def test_a_witness_costs_a_constant_number_of_calls_into_wasm(monkeypatch):
    """wasmtime-py spends 20-90 us on each Python->wasm call: a witness of 1,000 wires (or a
    million) takes a dozen, not one per wire and input value."""
    import wasmtime

    d = fixture_dir("mulchain_1k")
    wc = calc("mulchain_1k")
    inputs = load_input_json(d / "input.json")
    wc.calculate(inputs)
    calls = []
    real = wasmtime.Func.__call__

    def counted(self, *args):
        calls.append(1)
        return real(self, *args)

    monkeypatch.setattr(wasmtime.Func, "__call__", counted)
    assert wc.calculate_wtns(inputs) == (d / "witness.wtns").read_bytes()
    assert wc.witness_size > 1000 and len(calls) < 30, len(calls)


def test_a_witness_read_in_many_batches_is_the_same(monkeypatch):
    from cuzk_tasks.groth16 import witness

    d = fixture_dir("mulchain_1k")
    monkeypatch.setattr(witness, "BULK_CHUNK_BYTES", 32 * 97 + 5)  # 97 wires a call
    assert calc("mulchain_1k").calculate_wtns(load_input_json(d / "input.json")) == \
        (d / "witness.wtns").read_bytes()


@pytest.mark.parametrize("export_memory", [True, False])
def test_the_bulk_helper_needs_only_the_abi_functions(tmp_path, export_memory):
    """A module without an exported memory (or getSharedRWMemoryStart) works the same."""
    wc = _abi(tmp_path, export_memory=export_memory, wires=6)
    values = wc.calculate({"a": 1, "b": [2], "c": "3"})
    assert limbs_to_ints(values) == [7 * i + 1 for i in range(6)]


def test_a_circom_error_setting_inputs_in_bulk_names_its_signal(tmp_path):
    wc = _abi(tmp_path, reject_call=2)  # the second value set: b's
    with pytest.raises(WitnessError) as e:
        wc.calculate({"a": 1, "b": 2, "c": 3}, "in.json")
    assert str(e.value) == (f"in.json: witness generation failed in {wc.wasm_path} "
                            "(setting input signal 'b'): Signal already set.")
    assert e.value.code == 3


def test_errors_come_in_the_order_the_values_are_set(tmp_path):
    """A bad value after one the circuit refuses: the refusal is the error (as when each
    value was set as soon as it was parsed); without the refusal, the bad value."""
    inputs = {"a": 1, "b": 2, "c": "1.5"}
    with pytest.raises(WitnessError, match="setting input signal 'b'"):
        _abi(tmp_path, "refuses", reject_call=2).calculate(inputs, "in.json")
    with pytest.raises(WitnessError, match=r"in.json: input signal 'c'\[0\]: '1.5' is not"):
        _abi(tmp_path, "accepts").calculate(inputs, "in.json")


def test_an_export_of_another_type_than_circoms_is_a_format_error(tmp_path):
    with pytest.raises(FormatError, match=r"getWitness is not a function \(i32\) -> \(\)"):
        _abi(tmp_path, get_witness_result=True)


def test_the_time_limit_and_interrupt_stop_a_wire_inside_the_bulk_read(tmp_path):
    """The helper's loop and the circuit's getWitness it calls run under the same deadline."""
    import threading
    import time

    from cuzk_tasks.errors import WitnessInterrupted, WitnessTimeoutError

    wc = _abi(tmp_path, wires=5, loop_at_wire=3)
    t0 = time.monotonic()
    with pytest.raises(WitnessTimeoutError, match="exceeded 0.3 s"):
        wc.calculate({"a": 1, "b": 2, "c": 3}, "in.json", time_limit_s=0.3)
    assert time.monotonic() - t0 < 5
    timer = threading.Timer(0.3, wc.interrupt)
    timer.start()
    with pytest.raises(WitnessInterrupted):
        wc.calculate({"a": 1, "b": 2, "c": 3}, "in.json", time_limit_s=60)
    timer.join()
