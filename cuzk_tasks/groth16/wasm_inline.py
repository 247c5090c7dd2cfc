"""Small functions of a circom witness generator inlined at their calls, before wasmtime
compiles it.

Why: circom's generated code calls its runtime's small helpers (``Fr_copy``, ``Fr_toNormal``,
``Fr_isNegative``, ``Fr_int_gt``, ``Fr_getLsb32``, ...) hundreds of thousands of times per
witness, each a few loads and a branch; Cranelift does not inline wasm functions (V8, under
snarkjs, does), so a call's own cost was most of theirs: on sha256_512, inlining them took
about 15 % off the witness time.

How: a function is inlined where it is called when its code is at most
:data:`MAX_INLINED_CODE_BYTES`, it has at most one result, it does not call itself and its
locals are numbers.  At each call the arguments are stored into fresh locals of the caller
(one set per caller and callee), the callee's own locals are zeroed (a wasm call starts them at
zero), and its code follows inside a ``block`` of its result type: its local indices moved to
the caller's new locals, each ``return`` a ``br`` out of that block, its final ``end`` that
block's.  Branch depths inside it stay right, since the block stands where the function's own
body was.  :data:`ROUNDS` passes, so a helper whose own calls were inlined in one pass (and
still fits) is inlined in the next.  Function indices, exports and names do not change, so the
circom ABI and the other rewrites (:mod:`.wasm_montgomery`, applied first) are unaffected.

Anything the instruction reader does not know (:mod:`.wasm_binary`) leaves the module as it
is (None)."""

from __future__ import annotations

from typing import Dict, List, Optional

from .wasm_binary import (OP_BLOCK, OP_BR, OP_CALL, OP_END, OP_IF, OP_LOCAL_GET, OP_LOCAL_SET,
                          OP_LOCAL_TEE, OP_LOOP, OP_RETURN, Module, NotRecognised, body_locals,
                          call_sites, encode_locals, instructions, leb_u)

#: names the inlining in the compiled module cache's entry names (bump when it changes)
TAG = "inl1"

#: the largest code (bytes, locals excluded) of a function inlined at its calls: circom's
#: runtime helpers named above are 20-150 bytes; its Montgomery product, the circuit's
#: templates and the witness ABI are far larger and stay calls
MAX_INLINED_CODE_BYTES = 160

#: the largest caller (code bytes) calls are inlined into: circom's functions that compute
#: constant tables (Poseidon's, 30-300 KB of code, each run once per template) would grow
#: several times over and take seconds to compile, for nothing at run time
MAX_CALLER_CODE_BYTES = 8 * 1024

#: inlining passes (a helper calling helpers becomes small enough after one)
ROUNDS = 2

_ZERO = {0x7F: b"\x41\x00", 0x7E: b"\x42\x00",  # i32.const 0, i64.const 0
         0x7D: b"\x43" + bytes(4), 0x7C: b"\x44" + bytes(8)}  # f32.const 0, f64.const 0


class _Function:
    """A defined function's parts: parameter and local types, results, code."""

    def __init__(self, index: int, params: List[int], results: bytes, locals_: List[int],
                 code: bytes):
        self.index, self.params, self.results = index, params, results
        self.locals, self.code = locals_, code
        # (start, end, function index) of its calls; a function too big to inline into is
        # not read (it is copied as it is)
        self.calls = call_sites(code) if len(code) <= MAX_CALLER_CODE_BYTES else None

    @classmethod
    def parse(cls, index: int, params: bytes, results: bytes, body: bytes) -> "_Function":
        locals_, start = body_locals(body)
        return cls(index, list(params), results, locals_, body[start:])

    def inlinable(self) -> bool:
        return (len(self.code) <= MAX_INLINED_CODE_BYTES and len(self.results) <= 1
                and all(t in _ZERO for t in self.params + self.locals)
                and self.calls is not None
                and all(index != self.index for _, _, index in self.calls))

    def body(self) -> bytes:
        return encode_locals(self.locals) + self.code


def inline(wasm: bytes) -> Optional[bytes]:
    """``wasm`` with its small functions inlined at their calls (above); None when nothing was
    inlined or the module is not one it reads."""
    try:
        module = Module(wasm)
        imported = module.imported_functions()
        types, ftypes = module.types(), module.function_types()
        entries = module.code_entries()
        if len(ftypes) != len(entries):
            return None
        functions = [_Function.parse(imported + i, *types[ftypes[i]], wasm[a:b])
                     for i, (a, b) in enumerate(entries)]
        changed = set()
        for _ in range(ROUNDS):
            callees = {f.index: f for f in functions if f.inlinable()}
            rewritten = [_inline_calls(f, callees) for f in functions]
            changed.update(f.index for f, new in zip(functions, rewritten) if new is not None)
            functions = [new if new is not None else f for f, new in zip(functions, rewritten)]
        if not changed:
            return None
        return module.with_bodies({f.index: f.body() for f in functions if f.index in changed})
    except NotRecognised:
        return None


def _inline_calls(caller: _Function, callees: Dict[int, _Function]) -> Optional[_Function]:
    """``caller`` with its calls to ``callees`` inlined (a new _Function), or None if it
    calls none of them."""
    if caller.calls is None:
        return None
    sites = [(start, end, callees[index]) for start, end, index in caller.calls
             if index in callees and index != caller.index]
    if not sites:
        return None
    new_locals = list(caller.locals)
    inlined: Dict[int, bytes] = {}  # callee -> its code with its locals placed in the caller
    out, copied = bytearray(), 0
    for start, end, callee in sites:
        if callee.index not in inlined:
            inlined[callee.index] = _inlined(callee, len(caller.params) + len(new_locals))
            new_locals += callee.params + callee.locals
        out += caller.code[copied:start]
        out += inlined[callee.index]
        copied = end
    out += caller.code[copied:]
    return _Function(caller.index, caller.params, caller.results, new_locals, bytes(out))


def _inlined(callee: _Function, base: int) -> bytes:
    """The code that replaces a call to ``callee`` whose locals start at ``base`` in the
    caller (its arguments are on the stack)."""
    out = bytearray()
    for i in reversed(range(len(callee.params))):  # the last argument is on top
        out += bytes([OP_LOCAL_SET]) + leb_u(base + i)
    for j, t in enumerate(callee.locals):
        out += _ZERO[t] + bytes([OP_LOCAL_SET]) + leb_u(base + len(callee.params) + j)
    out += bytes([OP_BLOCK, callee.results[0] if callee.results else 0x40])
    depth = 0  # blocks open inside the callee's code (0: at its top level)
    for op, start, end, value in instructions(callee.code):
        if op in (OP_LOCAL_GET, OP_LOCAL_SET, OP_LOCAL_TEE):
            out += bytes([op]) + leb_u(base + value)
            continue
        if op == OP_RETURN:
            out += bytes([OP_BR]) + leb_u(depth)
            continue
        out += callee.code[start:end]
        if op in (OP_BLOCK, OP_LOOP, OP_IF):
            depth += 1
        elif op == OP_END:
            depth -= 1
    if depth != -1:  # the function's own end closes the block
        raise NotRecognised("unbalanced blocks")
    return bytes(out)

