"""The circom runtime's Montgomery arithmetic on 64-bit limbs (issue 25: the witness's speed):
cuzk_tasks/groth16/wasm_montgomery.py -- the new bodies against Python integers, the rewritten
circuits' witnesses against snarkjs's byte for byte, and modules it must leave alone."""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess

import pytest

wasmtime = pytest.importorskip("wasmtime")

from cuzk_tasks.groth16 import wasm_inline, wasm_montgomery  # noqa: E402
from cuzk_tasks.groth16.witness import WitnessCalculator, load_input_json  # noqa: E402

from support.snarkjs_tool import NODE_MODULES, fixture_dir, have_snarkjs, run_snarkjs  # noqa: E402

pytestmark = pytest.mark.skipif(not wasm_montgomery.supported(),
                                reason="this wasmtime has no wide arithmetic")

BN254_R = 21888242871839275222246405745257275088548364400416034343698204186575808495617
BLS12_381_R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
R = 1 << 256
FIXTURES = ["mulchain", "mulchain_1k", "poseidon", "assert_fail", "bls12381/mulchain",
            "bls12381/poseidon"]


def circom_mul(q, x, y):
    """What circom's Fr_F1m_mul gives for any x, y < 2^256: (x*y + m*q) / R, less q once if
    that overflows 256 bits or is >= q."""
    m = (-x * y * pow(q, -1, R)) % R
    t = (x * y + m * q) // R
    return (t - q) % R if t >= R or t >= q else t


def circom_add(q, x, y):
    """circom's Fr_F1m_add: x + y mod 2^256, less q (mod 2^256) when that carries or is >= q."""
    t = x + y
    return (t - q) % R if t >= R or t >= q else t


def circom_sub(q, x, y):
    """circom's Fr_F1m_sub: x - y mod 2^256, plus q (mod 2^256) when that borrows."""
    return (x - y + q) % R if x < y else x - y


def _bodies(q):
    config = wasmtime.Config()
    config.wasm_wide_arithmetic = True
    engine = wasmtime.Engine(config)
    store = wasmtime.Store(engine)
    inst = wasmtime.Instance(store, wasmtime.Module(engine, wasmtime.wat2wasm(
        wasm_montgomery.bodies_wat(q))), [])
    ex = inst.exports(store)
    mem = ex["memory"]

    def put(addr, v):
        mem.write(store, v.to_bytes(32, "little"), addr)

    def get(addr):
        return int.from_bytes(mem.read(store, addr, addr + 32), "little")

    def mul(x, y, alias=None):
        put(0, x)
        put(32, y)
        out = {None: 64, "x": 0, "y": 32}[alias]
        ex["mul"](store, 0, 32, out)
        return get(out)

    def from_montgomery(x, alias=False):
        put(0, x)
        out = 0 if alias else 64
        ex["from"](store, 0, out)
        return get(out)

    def binary(name):
        def run(x, y, alias=None):
            put(0, x)
            put(32, y)
            out = {None: 64, "x": 0, "y": 32}[alias]
            ex[name](store, 0, 32, out)
            return get(out)
        return run

    return mul, from_montgomery, binary("add"), binary("sub")


@pytest.mark.parametrize("q", [BN254_R, BLS12_381_R], ids=["bn254", "bls12-381"])
def test_the_new_bodies_give_circoms_results_for_every_input(q):
    mul, from_montgomery, add, sub = _bodies(q)
    rng = random.Random(25)
    edges = [0, 1, 2, q - 1, q, q + 1, R - q, R - 1, (R - 1) // 2, 1 << 255]
    pairs = [(x, y) for x in edges for y in edges]
    pairs += [(rng.randrange(q), rng.randrange(q)) for _ in range(2000)]
    pairs += [(rng.randrange(R), rng.randrange(R)) for _ in range(2000)]  # unreduced too
    for x, y in pairs:
        assert mul(x, y) == circom_mul(q, x, y), (hex(x), hex(y))
        assert from_montgomery(x) == circom_mul(q, x, 1), hex(x)
        assert add(x, y) == circom_add(q, x, y), (hex(x), hex(y))
        assert sub(x, y) == circom_sub(q, x, y), (hex(x), hex(y))
    for x, y in pairs[:200]:  # circom passes r aliasing x or y (Fr_mul: F1m_mul(c, r, r))
        assert mul(x, y, alias="x") == mul(x, y, alias="y") == circom_mul(q, x, y)
        assert from_montgomery(x, alias=True) == circom_mul(q, x, 1)
        assert add(x, y, alias="x") == add(x, y, alias="y") == circom_add(q, x, y)
        assert sub(x, y, alias="x") == sub(x, y, alias="y") == circom_sub(q, x, y)


@pytest.mark.parametrize("q,name", [(BN254_R, "poseidon"), (BLS12_381_R, "bls12381/poseidon")],
                         ids=["bn254", "bls12-381"])
def test_the_python_models_are_circoms_own_add_and_sub(q, name):
    """circom_add and circom_sub (above) model circom's runtime: check them against the
    runtime's own Fr_F1m_add / Fr_F1m_sub bodies, run through a copy of the module that
    exports them (the rewrite recognises exactly those bodies)."""
    wasm = (fixture_dir(name) / "circuit.wasm").read_bytes()
    names = _function_names(wasm)
    exported = _with_exports(wasm, {"rt_add": names["Fr_F1m_add"], "rt_sub": names["Fr_F1m_sub"]})
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    mod = wasmtime.Module(engine, exported)
    imports = [wasmtime.Func(store, imp.type, lambda *a: None) for imp in mod.imports]
    ex = wasmtime.Instance(store, mod, imports).exports(store)
    mem, scratch = ex["memory"], 1 << 16  # far above circom's runtime constants
    rng = random.Random(26)
    edges = [0, 1, q - 1, q, q + 1, R - q, R - 1, 1 << 255]
    pairs = [(x, y) for x in edges for y in edges]
    pairs += [(rng.randrange(R), rng.randrange(R)) for _ in range(300)]
    for x, y in pairs:
        mem.write(store, x.to_bytes(32, "little"), scratch)
        mem.write(store, y.to_bytes(32, "little"), scratch + 32)
        for fn, model in (("rt_add", circom_add), ("rt_sub", circom_sub)):
            ex[fn](store, scratch, scratch + 32, scratch + 64)
            got = int.from_bytes(mem.read(store, scratch + 64, scratch + 96), "little")
            assert got == model(q, x, y), (fn, hex(x), hex(y))


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_circuit_is_rewritten_and_its_witness_is_snarkjss(name):
    d = fixture_dir(name)
    wc = WitnessCalculator(d / "circuit.wasm", cache_dir=None)
    assert wc.fast_montgomery
    if name == "assert_fail":
        return  # its committed witness is of no input; its error is tested in test_witness
    inputs = load_input_json(d / "input.json")
    assert wc.calculate_wtns(inputs) == (d / "witness.wtns").read_bytes()


def _sections(wasm):
    """[(id, bytes of the whole section)] of a module."""
    out, pos = [], 8
    while pos < len(wasm):
        size, p = _leb(wasm, pos + 1)
        out.append((wasm[pos], wasm[pos:p + size]))
        pos = p + size
    return out


def _leb(data, pos):
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _leb_bytes(value):
    out = bytearray()
    while True:
        b, value = value & 0x7F, value >> 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _payload(section):
    _, pos = _leb(section, 1)
    return section[pos:]


def _function_names(wasm):
    """{name: function index} from the module's name section."""
    for sid, sec in _sections(wasm):
        body = _payload(sec)
        if sid != 0 or not body.startswith(b"\x04name"):
            continue
        pos = 5
        while pos < len(body):
            sub, (size, pos) = body[pos], _leb(body, pos + 1)
            if sub == 1:
                count, p = _leb(body, pos)
                names = {}
                for _ in range(count):
                    index, p = _leb(body, p)
                    n, p = _leb(body, p)
                    names[body[p:p + n].decode()] = index
                    p += n
                return names
            pos += size
    raise AssertionError("no function names")


def _with_exports(wasm, extra):
    """The module with functions exported under new names ({name: function index})."""
    out = [wasm[:8]]
    for sid, sec in _sections(wasm):
        if sid == 7:
            body = _payload(sec)
            count, pos = _leb(body, 0)
            entries = body[pos:] + b"".join(_leb_bytes(len(n)) + n.encode() + b"\x00"
                                            + _leb_bytes(i) for n, i in extra.items())
            body = _leb_bytes(count + len(extra)) + entries
            sec = b"\x07" + _leb_bytes(len(body)) + body
        out.append(sec)
    return b"".join(out)


def _without_names(wasm):
    return wasm[:8] + b"".join(s for sid, s in _sections(wasm)
                               if not (sid == 0 and b"\x04name" in s[:12]))


def _renamed(wasm, old, new):
    assert len(old) == len(new)
    assert wasm.count(old) == 1
    return wasm.replace(old, new)


@pytest.mark.parametrize("change", [
    lambda w: _without_names(w),
    lambda w: _renamed(w, b"Fr_F1m_mul", b"Fr_F1m_mux"),
    lambda w: w.replace(b"\x42\xff\xff\xff\xff\x0e", b"\x42\xfe\xff\xff\xff\x0e"),  # np32
    lambda w: w[:len(w) // 2],
    lambda w: b"not a module",
], ids=["no-name-section", "renamed", "other-np32", "truncated", "garbage"])
def test_a_module_it_does_not_recognise_is_left_alone(change, tmp_path):
    wasm = (fixture_dir("poseidon") / "circuit.wasm").read_bytes()
    assert wasm_montgomery.rewrite(wasm) is not None
    changed = change(wasm)
    assert changed != wasm
    assert wasm_montgomery.rewrite(changed) is None


def test_a_stripped_circuit_runs_as_it_is_and_gives_the_same_witness(tmp_path):
    d = fixture_dir("poseidon")
    stripped = tmp_path / "circuit.wasm"
    stripped.write_bytes(_without_names((d / "circuit.wasm").read_bytes()))
    wc = WitnessCalculator(stripped, cache_dir=None)
    assert not wc.fast_montgomery
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == \
        (d / "witness.wtns").read_bytes()


def test_without_wide_arithmetic_the_module_is_not_rewritten(monkeypatch):
    monkeypatch.setattr(wasm_montgomery, "supported", lambda: False)
    d = fixture_dir("poseidon")
    wasm = (d / "circuit.wasm").read_bytes()
    assert "wide" not in WitnessCalculator.compile_settings()
    assert WitnessCalculator.prepared(wasm) == wasm_inline.inline(wasm)
    wc = WitnessCalculator(d / "circuit.wasm", cache_dir=None)
    assert not wc.fast_montgomery
    assert wc.calculate_wtns(load_input_json(d / "input.json")) == \
        (d / "witness.wtns").read_bytes()


@pytest.mark.slow
@pytest.mark.skipif(not have_snarkjs(), reason="needs node and tools/node (snarkjs, circom2)")
def test_a_sha256_circuit_gives_snarkjss_witness_byte_for_byte(tmp_path):
    """circomlib's SHA-256 (bit decompositions, 32-bit sums, Montgomery products of long
    values): what the rewrite speeds up most, for several random messages."""
    shutil.copytree(NODE_MODULES / "circomlib" / "circuits", tmp_path / "circomlib")
    (tmp_path / "sha.circom").write_text(
        'pragma circom 2.0.0;\ninclude "circomlib/sha256/sha256.circom";\n'
        "component main = Sha256(64);\n")
    # circom2 is WASI: it sees paths relative to its cwd only
    proc = subprocess.run(["node", str(NODE_MODULES / "circom2" / "cli.js"), "sha.circom",
                           "--wasm", "-l", ".", "-o", "."], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wasm = tmp_path / "sha_js" / "sha.wasm"
    wc = WitnessCalculator(wasm, cache_dir=None)
    assert wc.fast_montgomery
    rng = random.Random(256)
    for i in range(3):
        inp = tmp_path / f"input{i}.json"
        inp.write_text(json.dumps({"in": [rng.randrange(2) for _ in range(64)]}))
        ours = wc.calculate_wtns(load_input_json(inp))
        run_snarkjs("wtns", "calculate", str(wasm), str(inp), str(tmp_path / "s.wtns"),
                    check=True)
        assert ours == (tmp_path / "s.wtns").read_bytes()


def _runtime_instance(wasm, exports, wide):
    config = wasmtime.Config()
    config.wasm_wide_arithmetic = wide
    engine = wasmtime.Engine(config)
    store = wasmtime.Store(engine)
    module = wasmtime.Module(engine, _with_exports(wasm, exports))
    imports = [wasmtime.Func(store, imp.type, lambda *a: None) for imp in module.imports]
    return store, wasmtime.Instance(store, module, imports).exports(store)


def _element(value, kind, q):
    """circom's 40-byte element: a short int32, or a long value (normal or Montgomery)."""
    if kind == "short":
        return struct.pack("<iI", value, 0) + bytes(32)
    if kind == "long":
        return struct.pack("<iI", 0, 0x80000000) + value.to_bytes(32, "little")
    return struct.pack("<iI", 0, 0xC0000000) + (value * (1 << 256) % q).to_bytes(32, "little")


@pytest.mark.parametrize("name", ["poseidon", "bls12381/poseidon"])
def test_fr_mods_fast_path_writes_what_circoms_body_writes(name):
    """Fr_mod with the fast path against circom's own, on the same memory: every operand
    shape (short positive, zero and negative; long small, at 2^64 and beyond; Montgomery),
    every aliasing of r, a and b; the whole low memory and the operands compared after
    (all but Fr_int_div's product scratch at 288..320, which only it reads)."""
    from cuzk_tasks.groth16.wasm_binary import Module

    wasm = (fixture_dir(name) / "circuit.wasm").read_bytes()
    names = _function_names(wasm)
    fast = wasm_montgomery.rewrite(wasm)
    assert fast is not None
    # the same rewritten module with circom's own Fr_mod: only the fast path differs
    index = names["Fr_mod"] - Module(wasm).imported_functions()
    a, b = Module(wasm).code_entries()[index]
    fa, fb = Module(fast).code_entries()[index]
    assert fast[fa:fb] != wasm[a:b]
    circoms = Module(fast).with_bodies({names["Fr_mod"]: wasm[a:b]})
    q = BN254_R if name == "poseidon" else BLS12_381_R
    runs = [_runtime_instance(w, {"rt_mod": names["Fr_mod"]}, True) for w in (circoms, fast)]
    base = 1 << 20
    operands = [(v, "short") for v in (1, 5, 31, 32, 2**31 - 1, 0, -1, -7)]
    operands += [(v, "long") for v in (0, 1, 7, 32, 2**40 + 3, 2**64 - 1, 2**64, 2**200 + 9,
                                       q - 1)]
    operands += [(v, "montgomery") for v in (3, 2**70 + 1)]
    layouts = [(0, 40, 80), (0, 0, 40), (40, 0, 40), (0, 40, 40), (0, 0, 0), (80, 40, 0)]
    checked = 0
    for a in operands:
        for b in operands:
            for r_at, a_at, b_at in layouts:
                if a_at == b_at and a != b:
                    continue
                after = []
                for store, ex in runs:
                    mem = ex["memory"]
                    # Fr_int_div's scratch (quotient, copy of b, ...): filled, so that a
                    # write it misses shows
                    mem.write(store, b"\xa5" * 32, 16)
                    mem.write(store, b"\xa5" * 160, 160)
                    mem.write(store, bytes(160), base)
                    mem.write(store, _element(*a, q), base + a_at)
                    mem.write(store, _element(*b, q), base + b_at)
                    try:
                        ex["rt_mod"](store, base + r_at, base + a_at, base + b_at)
                    except wasmtime.Trap as trap:  # by zero: circom's Fr_int_div traps
                        after.append("integer divide by zero" in str(trap))
                        continue
                    low = mem.read(store, 0, 8192)
                    after.append((low[:288] + low[320:], mem.read(store, base, base + 160)))
                    checked += 1
                assert after[0] == after[1], (a, b, (r_at, a_at, b_at))
    assert checked > 1000
