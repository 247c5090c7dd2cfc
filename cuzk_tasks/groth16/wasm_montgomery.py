"""Faster field arithmetic for circom witness generators: the circom runtime's Montgomery
multiplication (``Fr_F1m_mul``) and conversion out of Montgomery form
(``Fr_F1m_fromMontgomery``) rewritten with four 64-bit limbs, through wasm's wide arithmetic
(``i64.mul_wide_u``, ``i64.add128``, ``i64.sub128``), in place of circom's eight 32-bit limbs.

Why: on circuits that compute (SHA-256 above all) these two functions are most of the
witness time under wasmtime (Cranelift makes slow code of the 32-bit limbs' carry chains):
``perf`` on sha256_512 put 37 % of the time in ``Fr_F1m_mul`` and 8 % in the reduction.

Same results, bit for bit, for every input, not only reduced ones.  For ``x, y < 2^256``
circom's ``Fr_F1m_mul`` returns ``t = (x*y + m*q) / R`` (``R = 2^256``, ``m = -x*y/q mod R``,
unique whatever the limb size), less ``q`` when that overflows 256 bits or is ``>= q``; its
``fromMontgomery(x)`` is the same with ``y = 1`` (``t <= q``, less ``q`` when ``>= q``).  The
rewritten bodies compute exactly that (``tests/test_wasm_montgomery.py`` checks them against
Python integers, and the witnesses against snarkjs's, byte for byte).

Where their bodies are byte for byte circom's, ``Fr_F1m_add`` and ``Fr_F1m_sub`` get 64-bit
bodies too (2-3 % of a SHA-256 witness: they called three 32-bit-limb helpers each), and
``Fr_mod`` a fast path for operands below 2^64 in front of its own code (:data:`MOD_FAST_WAT`;
6-9 %: SHA-256's rotations compute an index with ``%`` for every bit).

Only what is recognised is touched: the name section must name both functions, their types
must be circom's, and ``Fr_F1m_mul``'s body must read a 256-bit odd ``q`` from the module's
data whose ``-q^-1 mod 2^32`` is the constant the body multiplies by.  Anything else (another
circom runtime, a stripped name section, a field wider than 256 bits, a wasmtime without
wide arithmetic) gives None: the module runs as it is.  Scratch memory that circom's
``fromMontgomery`` wrote (its copy of ``x``, the reduction's carries) is left alone: nothing
else in the runtime reads it.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .wasm_binary import I32, Module, NotRecognised, leb_s, leb_u, read_u

#: names the rewrite in the compiled module cache's entry names (bump when the bodies change)
TAG = "m64v3"

_MUL, _FROM = "Fr_F1m_mul", "Fr_F1m_fromMontgomery"
_ADD, _SUB = "Fr_F1m_add", "Fr_F1m_sub"  # rewritten too when their bodies are circom's own
_INT_ADD, _INT_SUB, _INT_GTE = "Fr_int_add", "Fr_int_sub", "Fr_int_gte"
_MOD = "Fr_mod"  # given a fast path where its body is circom's own
_COPY_S2L, _TO_NORMAL, _INT_DIV = "Fr_rawCopyS2L", "Fr_toNormal", "Fr_int_div"
_M64 = (1 << 64) - 1


def supported() -> bool:
    """Whether this wasmtime can run the rewritten code (wide arithmetic, wasmtime >= 26)."""
    try:
        import wasmtime  # lazy: reading and rewriting bytes needs no wasmtime, only this does
    except ImportError:  # pragma: no cover - the witness needs wasmtime anyway
        return False
    # a setter-only property: look on the class (reading it on an instance raises)
    return hasattr(wasmtime.Config, "wasm_wide_arithmetic")


def rewrite(wasm: bytes) -> Optional[bytes]:
    """``wasm`` with the two functions rewritten; None when it is not recognised (above).
    An engine that runs the result needs ``Config.wasm_wide_arithmetic = True``."""
    try:
        module = Module(wasm)
        found = _recognise(module)
        if found is None:
            return None
        indices, q = found
        bodies = dict(_bodies(q))
        if _MOD in indices:
            a, b = module.code_entries()[indices[_MOD] - module.imported_functions()]
            bodies[_MOD] = _mod_body(module.wasm[a:b])
        return module.with_bodies({index: bodies[name] for name, index in indices.items()})
    except NotRecognised:
        return None


def _recognise(module: Module) -> Optional[Tuple[Dict[str, int], int]]:
    """({function name: index} of the functions to rewrite, the prime q), or None: always
    Fr_F1m_mul and Fr_F1m_fromMontgomery, and Fr_F1m_add and Fr_F1m_sub where their
    bodies are exactly circom's (:func:`_circom_add_sub`) for that q."""
    names = module.function_names()
    if _MUL not in names or _FROM not in names:
        return None
    imported = module.imported_functions()
    ftypes, types, code = module.function_types(), module.types(), module.code_entries()
    mul, frm = names[_MUL] - imported, names[_FROM] - imported
    if not (0 <= mul < len(code) and 0 <= frm < len(code)) or len(ftypes) != len(code):
        return None
    if types[ftypes[mul]] != (bytes([I32] * 3), b"") or \
            types[ftypes[frm]] != (bytes([I32] * 2), b""):
        return None
    body = module.wasm[code[mul][0]:code[mul][1]]
    # circom's body reads q's limbs with `i32.const 0; i64.load32_u align offset=<q+4k>`
    at = body.find(b"\x41\x00\x35")
    if at < 0:
        return None
    _, p = read_u(body, at + 3)  # alignment
    address, _ = read_u(body, p)
    raw = module.data_at(address, 32)
    if raw is None:
        return None
    q = int.from_bytes(raw, "little")
    if q.bit_length() < 250 or not q & 1:
        return None
    np32 = (-pow(q, -1, 1 << 32)) % (1 << 32)
    if b"\x42" + leb_s(np32) not in body:  # i64.const -q^-1 mod 2^32
        return None
    found = {_MUL: names[_MUL], _FROM: names[_FROM]}
    expected = _circom_add_sub(names, address)
    for name, want in expected.items():
        index = names[name] - imported
        if 0 <= index < len(code) and types[ftypes[index]] == (bytes([I32] * 3), b"") \
                and module.wasm[code[index][0]:code[index][1]] == want:
            found[name] = names[name]
    mod = _circom_mod(names)
    if mod is not None:
        index = names[_MOD] - imported
        if 0 <= index < len(code) and module.wasm[code[index][0]:code[index][1]] == mod:
            found[_MOD] = names[_MOD]
    return found, q


def _circom_add_sub(names: Dict[str, int], q_address: int) -> Dict[str, bytes]:
    """The bodies circom gives Fr_F1m_add and Fr_F1m_sub (q at ``q_address``), byte for byte:
    ``r = x + y``, less q when that carries or is ``>= q``; ``r = x - y``, plus q when that
    borrows (both mod 2^256).  {} when the module lacks the functions they call."""
    if not all(n in names for n in (_ADD, _SUB, _INT_ADD, _INT_SUB, _INT_GTE)):
        return {}

    def call(name):
        return b"\x10" + leb_u(names[name])

    xyr = b"\x20\x00\x20\x01\x20\x02"  # local.get x, y, r
    r_q = b"\x20\x02\x41" + leb_s(q_address)  # local.get r; i32.const q
    r_minus_q = r_q + b"\x20\x02" + call(_INT_SUB) + b"\x1a"  # r = r - q; drop the borrow
    add = (b"\x00" + xyr + call(_INT_ADD) + b"\x04\x40" + r_minus_q + b"\x05"
           + r_q + call(_INT_GTE) + b"\x04\x40" + r_minus_q + b"\x0b\x0b\x0b")
    sub = (b"\x00" + xyr + call(_INT_SUB) + b"\x04\x40"
           + r_q + b"\x20\x02" + call(_INT_ADD) + b"\x1a\x0b\x0b")
    return {_ADD: add, _SUB: sub}


def _circom_mod(names: Dict[str, int]) -> Optional[bytes]:
    """The body circom gives ``Fr_mod(r, a, b)``, byte for byte: each operand converted in
    place to a long value in normal form (a short one through ``Fr_rawCopyS2L``), ``r`` made
    long, then ``Fr_int_div(a + 8, b + 8, 16, r + 8)``: the quotient to scratch at 16, the
    remainder to ``r``.  None when the module lacks the functions it calls."""
    if not all(n in names for n in (_MOD, _COPY_S2L, _TO_NORMAL, _INT_DIV)):
        return None

    def call(name):
        return b"\x10" + leb_u(names[name])

    long_type = b"\x41" + leb_s(-(1 << 31)) + b"\x36\x02\x04"  # i32.store offset=4 0x80000000

    def to_long(p: bytes) -> bytes:  # p: local.get of the operand
        return (p + b"\x2d\x00\x07\x41\x80\x01\x71\x04\x40\x05"  # if not long:
                + p + b"\x41\x08\x6a" + p + b"\x34\x02\x00" + call(_COPY_S2L)
                + p + long_type + b"\x0b" + p + call(_TO_NORMAL))

    r, a, b = b"\x20\x00", b"\x20\x01", b"\x20\x02"
    return (b"\x00" + to_long(a) + to_long(b) + r + long_type
            + a + b"\x41\x08\x6a" + b + b"\x41\x08\x6a\x41\x10" + r + b"\x41\x08\x6a"
            + call(_INT_DIV) + b"\x0b")


#: Fr_mod's fast path: both operands positive and below 2^64 (a short value > 0, or a long
#: one in normal form with its three high limbs zero), b not zero (b is a when r is b: circom's
#: Fr_int_div copies a over r before it reads b).  It makes every write the
#: body would (the operands made long in place, r's type, Fr_int_div's copy of b at 160, its
#: zeroed scratch at 256, the quotient at 16, the remainder at r + 8), with 64-bit division
#: instead of Fr_int_div's byte-wise long division; only Fr_int_div's own product scratch
#: (288) is not written, which nothing but Fr_int_div reads, after writing it.  SHA-256's
#: rotations compute ``(i + r) % n`` this way for every bit.
MOD_FAST_WAT = """
(func (param $r i32) (param $a i32) (param $b i32)
  (local $x i64) (local $y i64) (local $a_short i32) (local $b_short i32)
  (block $slow
    {operand_a}
    {operand_b}
    ;; Fr_int_div copies a to r before it reads b: with r = b it divides a by itself
    (if (i32.eq (local.get $r) (local.get $b)) (then (local.set $y (local.get $x))))
    (br_if $slow (i64.eqz (local.get $y)))
    {make_long_a}
    {make_long_b}
    (i32.store offset=4 (local.get $r) (i32.const 0x80000000))
    (i64.store offset=160 (i32.const 0) (local.get $y))
    (i64.store offset=168 (i32.const 0) (i64.const 0))
    (i64.store offset=176 (i32.const 0) (i64.const 0))
    (i64.store offset=184 (i32.const 0) (i64.const 0))
    (i64.store offset=16 (i32.const 0) (i64.div_u (local.get $x) (local.get $y)))
    (i64.store offset=24 (i32.const 0) (i64.const 0))
    (i64.store offset=32 (i32.const 0) (i64.const 0))
    (i64.store offset=40 (i32.const 0) (i64.const 0))
    (i64.store offset=256 (i32.const 0) (i64.const 0))
    (i64.store offset=264 (i32.const 0) (i64.const 0))
    (i64.store offset=272 (i32.const 0) (i64.const 0))
    (i64.store offset=280 (i32.const 0) (i64.const 0))
    (i64.store offset=8 (local.get $r) (i64.rem_u (local.get $x) (local.get $y)))
    (i64.store offset=16 (local.get $r) (i64.const 0))
    (i64.store offset=24 (local.get $r) (i64.const 0))
    (i64.store offset=32 (local.get $r) (i64.const 0))
    (return)))
"""


def _mod_fast_wat() -> str:
    def operand(p, v, short):
        return f"""(if (i32.and (i32.load8_u offset=7 (local.get {p})) (i32.const 128))
      (then
        (br_if $slow (i32.and (i32.load8_u offset=7 (local.get {p})) (i32.const 64)))
        (br_if $slow (i64.ne (i64.or (i64.or (i64.load offset=16 (local.get {p}))
                                             (i64.load offset=24 (local.get {p})))
                                     (i64.load offset=32 (local.get {p}))) (i64.const 0)))
        (local.set {v} (i64.load offset=8 (local.get {p}))))
      (else
        (br_if $slow (i32.le_s (i32.load (local.get {p})) (i32.const 0)))
        (local.set {v} (i64.extend_i32_u (i32.load (local.get {p}))))
        (local.set {short} (i32.const 1))))"""

    def make_long(p, v, short):
        return f"""(if (local.get {short}) (then
      (i64.store offset=8 (local.get {p}) (local.get {v}))
      (i64.store offset=16 (local.get {p}) (i64.const 0))
      (i64.store offset=24 (local.get {p}) (i64.const 0))
      (i64.store offset=32 (local.get {p}) (i64.const 0))
      (i32.store offset=4 (local.get {p}) (i32.const 0x80000000))))"""

    return MOD_FAST_WAT.format(operand_a=operand("$a", "$x", "$a_short"),
                               operand_b=operand("$b", "$y", "$b_short"),
                               make_long_a=make_long("$a", "$x", "$a_short"),
                               make_long_b=make_long("$b", "$y", "$b_short"))


_MOD_FAST: List[bytes] = []


def _mod_body(circoms: bytes) -> bytes:
    """Fr_mod's new body: the fast path, then circom's own code (which has no locals)."""
    if not _MOD_FAST:
        import wasmtime  # lazy: reading and rewriting bytes needs no wasmtime, only this does

        wasm = wasmtime.wat2wasm(f"(module (memory 1) {_mod_fast_wat()})")
        (a, b), = Module(wasm).code_entries()
        _MOD_FAST.append(wasm[a:b - 1])  # its locals and code, less the final `end`
    return _MOD_FAST[0] + circoms[1:]  # circom's code after its (empty) locals


# -- the new bodies --------------------------------------------------------------------------

def _const(v: int) -> str:
    return f"(i64.const {v - (1 << 64) if v >= 1 << 63 else v})"


def _reduce_steps(q: List[int], np: int) -> List[str]:
    """One Montgomery reduction step on t0..t5: t = (t + m*q) / 2^64, m from t0."""
    out = [f"(local.set $m (i64.mul (local.get $t0) {_const(np)}))",
           f"(i64.mul_wide_u (local.get $m) {_const(q[0])})",
           "(local.set $hi) (local.set $lo)",
           "(i64.add128 (local.get $lo) (local.get $hi) (local.get $t0) (i64.const 0))",
           "(local.set $c) (drop)"]
    for j in range(1, 4):
        out += [f"(i64.mul_wide_u (local.get $m) {_const(q[j])})",
                "(local.set $hi) (local.set $lo)",
                f"(i64.add128 (local.get $lo) (local.get $hi) (local.get $t{j}) (i64.const 0))",
                "(local.set $hi) (local.set $lo)",
                "(i64.add128 (local.get $lo) (local.get $hi) (local.get $c) (i64.const 0))",
                f"(local.set $c) (local.set $t{j - 1})"]
    out += ["(i64.add128 (local.get $t4) (i64.const 0) (local.get $c) (i64.const 0))",
            "(local.set $c) (local.set $t3)",
            "(local.set $t4 (i64.add (local.get $t5) (local.get $c)))",
            "(local.set $t5 (i64.const 0))"]
    return out


def _final_subtract(q: List[int], out: str) -> List[str]:
    """Store t0..t3 (less q when t4 is set or t >= q) at ``out``."""
    lines = ["(local.set $c (i64.const 0))"]
    for j in range(4):
        lines += [f"(i64.sub128 (local.get $t{j}) (i64.const 0) {_const(q[j])} (i64.const 0))",
                  "(local.set $hi) (local.set $lo)",
                  "(i64.sub128 (local.get $lo) (local.get $hi) (local.get $c) (i64.const 0))",
                  f"(local.set $hi) (local.set $s{j})",
                  "(local.set $c (i64.and (local.get $hi) (i64.const 1)))"]
    lines.append("(if (i32.or (i64.ne (local.get $t4) (i64.const 0)) (i64.eqz (local.get $c)))"
                 " (then " + " ".join(f"(local.set $t{j} (local.get $s{j}))" for j in range(4))
                 + "))")
    lines += [f"(i64.store offset={8 * j} (local.get {out}) (local.get $t{j}))" for j in range(4)]
    return lines


_LOCALS = ("(local $x0 i64) (local $x1 i64) (local $x2 i64) (local $x3 i64) (local $yi i64) "
           "(local $t0 i64) (local $t1 i64) (local $t2 i64) (local $t3 i64) (local $t4 i64) "
           "(local $t5 i64) (local $lo i64) (local $hi i64) (local $c i64) (local $m i64) "
           "(local $s0 i64) (local $s1 i64) (local $s2 i64) (local $s3 i64)")


def _add_sub(ql: List[int]) -> List[str]:
    """``Fr_F1m_add(x, y, r)`` and ``Fr_F1m_sub(x, y, r)`` as :func:`_circom_add_sub` says;
    every limb is read before r is written (r may alias x or y)."""
    add = ["(func $add (param $x i32) (param $y i32) (param $r i32) " + _LOCALS,
           "(local.set $c (i64.const 0))"]
    for j in range(4):  # t = x + y, carry c
        add += [f"(i64.add128 (i64.load offset={8 * j} (local.get $x)) (i64.const 0) "
                f"(i64.load offset={8 * j} (local.get $y)) (i64.const 0))",
                "(local.set $hi) (local.set $lo)",
                "(i64.add128 (local.get $lo) (local.get $hi) (local.get $c) (i64.const 0))",
                f"(local.set $c) (local.set $t{j})"]
    add += ["(local.set $t4 (local.get $c))"]
    add += _final_subtract(ql, "$r") + [")"]
    sub = ["(func $sub (param $x i32) (param $y i32) (param $r i32) " + _LOCALS,
           "(local.set $c (i64.const 0))"]
    for j in range(4):  # t = x - y, borrow c
        sub += [f"(i64.sub128 (i64.load offset={8 * j} (local.get $x)) (i64.const 0) "
                f"(i64.load offset={8 * j} (local.get $y)) (i64.const 0))",
                "(local.set $hi) (local.set $lo)",
                "(i64.sub128 (local.get $lo) (local.get $hi) (local.get $c) (i64.const 0))",
                f"(local.set $hi) (local.set $t{j})",
                "(local.set $c (i64.and (local.get $hi) (i64.const 1)))"]
    sub += ["(if (i64.ne (local.get $c) (i64.const 0)) (then (local.set $c (i64.const 0))"]
    for j in range(4):  # t += q, carry dropped
        sub += [f"(i64.add128 (local.get $t{j}) (i64.const 0) {_const(ql[j])} (i64.const 0))",
                "(local.set $hi) (local.set $lo)",
                "(i64.add128 (local.get $lo) (local.get $hi) (local.get $c) (i64.const 0))",
                f"(local.set $c) (local.set $t{j})"]
    sub += ["))"]
    sub += [f"(i64.store offset={8 * j} (local.get $r) (local.get $t{j}))" for j in range(4)]
    return add + sub + [")"]


def bodies_wat(q: int) -> str:
    """A module whose functions 0 to 3 are the new ``Fr_F1m_mul(x, y, r)``,
    ``Fr_F1m_fromMontgomery(x, r)``, ``Fr_F1m_add(x, y, r)`` and ``Fr_F1m_sub(x, y, r)`` for
    the prime ``q`` (exported as ``mul``, ``from``, ``add`` and ``sub``)."""
    ql = [(q >> (64 * i)) & _M64 for i in range(4)]
    np = (-pow(q, -1, 1 << 64)) % (1 << 64)
    mul = ["(func $mul (param $x i32) (param $y i32) (param $r i32) " + _LOCALS]
    # every limb of x is read before r is written: circom calls it with r aliasing x or y
    mul += [f"(local.set $x{j} (i64.load offset={8 * j} (local.get $x)))" for j in range(4)]
    for i in range(4):  # CIOS: t += x * y_i, then one reduction step
        mul += [f"(local.set $yi (i64.load offset={8 * i} (local.get $y)))",
                "(local.set $c (i64.const 0))"]
        for j in range(4):
            mul += [f"(i64.mul_wide_u (local.get $x{j}) (local.get $yi))",
                    "(local.set $hi) (local.set $lo)",
                    f"(i64.add128 (local.get $lo) (local.get $hi) (local.get $t{j}) (i64.const 0))",
                    "(local.set $hi) (local.set $lo)",
                    "(i64.add128 (local.get $lo) (local.get $hi) (local.get $c) (i64.const 0))",
                    f"(local.set $c) (local.set $t{j})"]
        mul += ["(i64.add128 (local.get $t4) (i64.const 0) (local.get $c) (i64.const 0))",
                "(local.set $t5) (local.set $t4)"]
        mul += _reduce_steps(ql, np)
    mul += _final_subtract(ql, "$r") + [")"]
    frm = ["(func $from (param $x i32) (param $r i32) " + _LOCALS]
    frm += [f"(local.set $t{j} (i64.load offset={8 * j} (local.get $x)))" for j in range(4)]
    for _ in range(4):
        frm += _reduce_steps(ql, np)
    frm += _final_subtract(ql, "$r") + [")"]
    return ("(module (memory (export \"memory\") 1)\n" + "\n".join(mul) + "\n" + "\n".join(frm)
            + "\n" + "\n".join(_add_sub(ql)) + "\n"
            + "".join(f'(export "{e}" (func ${e}))' for e in ("mul", "from", "add", "sub"))
            + ")")


_BODIES: Dict[int, Dict[str, bytes]] = {}


def _bodies(q: int) -> Dict[str, bytes]:
    """The two bodies' bytes (locals and code) for ``q``, assembled once per process."""
    if q not in _BODIES:
        import wasmtime  # lazy: reading and rewriting bytes needs no wasmtime, only this does

        try:
            wasm = wasmtime.wat2wasm(bodies_wat(q))
        except Exception as exc:  # noqa: BLE001 - a wat parser without wide arithmetic
            raise NotRecognised(f"cannot assemble the new bodies: {exc}") from None
        entries = Module(wasm).code_entries()
        _BODIES[q] = {name: wasm[a:b] for name, (a, b) in zip((_MUL, _FROM, _ADD, _SUB), entries)}
    return _BODIES[q]
