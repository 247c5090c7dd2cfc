"""Reading and rewriting wasm binaries, as far as the witness generator's speed-ups need it
(:mod:`.wasm_montgomery`, :mod:`.wasm_inline`): LEB128 numbers, a module's sections, its
function names, types and bodies, the instructions of a body, and the module with some bodies
replaced.  Anything outside what these understand raises :class:`NotRecognised`, which the
speed-ups turn into "leave the module as it is"."""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

SECTION_TYPE, SECTION_IMPORT, SECTION_FUNCTION = 1, 2, 3
SECTION_CODE, SECTION_DATA = 10, 11
I32, I64 = 0x7F, 0x7E


class NotRecognised(Exception):
    """The module is not one these readers understand (internal: never leaves a speed-up)."""


# -- reading a module ----------------------------------------------------------------------

def _leb(data: bytes, pos: int, signed: bool) -> Tuple[int, int]:
    """A LEB128 at ``pos``: (value, position after it)."""
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise NotRecognised("truncated LEB128")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if signed and byte & 0x40:
                result -= 1 << shift
            return result, pos


def read_u(data: bytes, pos: int) -> Tuple[int, int]:
    """An unsigned LEB128 at ``pos``: (value, position after it)."""
    return _leb(data, pos, signed=False)


def read_s(data: bytes, pos: int) -> Tuple[int, int]:
    """A signed LEB128 at ``pos``: (value, position after it)."""
    return _leb(data, pos, signed=True)


def leb_u(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def leb_s(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40):
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def read_bytes(data: bytes, pos: int) -> Tuple[bytes, int]:
    n, pos = read_u(data, pos)
    return data[pos:pos + n], pos + n


class Module:
    """The sections of a wasm module, as far as the speed-ups need them."""

    def __init__(self, wasm: bytes):
        if wasm[:8] != b"\0asm\x01\0\0\0":
            raise NotRecognised("not a wasm module")
        self.wasm = wasm
        self.sections: List[Tuple[int, int, int]] = []  # (id, payload start, payload end)
        pos = 8
        while pos < len(wasm):
            sid = wasm[pos]
            size, start = read_u(wasm, pos + 1)
            end = start + size
            if end > len(wasm):
                raise NotRecognised("truncated section")
            self.sections.append((sid, start, end))
            pos = end

    def section(self, sid: int) -> Optional[Tuple[int, int]]:
        for s, start, end in self.sections:
            if s == sid:
                return start, end
        return None

    def function_names(self) -> Dict[str, int]:
        for sid, start, end in self.sections:
            if sid != 0:
                continue
            label, pos = read_bytes(self.wasm, start)
            if label != b"name":
                continue
            while pos < end:
                sub, pos = self.wasm[pos], pos + 1
                size, pos = read_u(self.wasm, pos)
                if sub == 1:
                    names, p = {}, pos
                    count, p = read_u(self.wasm, p)
                    for _ in range(count):
                        index, p = read_u(self.wasm, p)
                        name, p = read_bytes(self.wasm, p)
                        names[name.decode("utf-8", "replace")] = index
                    return names
                pos += size
        return {}

    def _vector(self, sid: int, what: str) -> Tuple[int, int]:
        """A required section's entry count and where its first entry starts."""
        sec = self.section(sid)
        if sec is None:
            raise NotRecognised(f"no {what} section")
        return read_u(self.wasm, sec[0])

    def types(self) -> List[Tuple[bytes, bytes]]:
        count, pos = self._vector(SECTION_TYPE, "type")
        types = []
        for _ in range(count):
            if self.wasm[pos] != 0x60:
                raise NotRecognised("a type other than a plain function type")
            params, pos = read_bytes(self.wasm, pos + 1)
            results, pos = read_bytes(self.wasm, pos)
            types.append((params, results))
        return types

    def imported_functions(self) -> int:
        sec = self.section(SECTION_IMPORT)
        if sec is None:
            return 0
        count, pos = read_u(self.wasm, sec[0])
        functions = 0
        for _ in range(count):
            _, pos = read_bytes(self.wasm, pos)
            _, pos = read_bytes(self.wasm, pos)
            kind, pos = self.wasm[pos], pos + 1
            if kind == 0x00:  # function: type index
                functions += 1
                _, pos = read_u(self.wasm, pos)
            elif kind in (0x01, 0x02):  # table (reftype, limits) or memory (limits)
                if kind == 0x01:
                    pos += 1
                flags, pos = self.wasm[pos], pos + 1
                _, pos = read_u(self.wasm, pos)
                if flags & 1:
                    _, pos = read_u(self.wasm, pos)
            elif kind == 0x03:  # global: valtype, mutability
                pos += 2
            else:
                raise NotRecognised(f"import kind {kind}")
        return functions

    def function_types(self) -> List[int]:
        count, pos = self._vector(SECTION_FUNCTION, "function")
        out = []
        for _ in range(count):
            t, pos = read_u(self.wasm, pos)
            out.append(t)
        return out

    def code_entries(self) -> List[Tuple[int, int]]:
        """Each defined function's body: (start, end) of its bytes after the size."""
        count, pos = self._vector(SECTION_CODE, "code")
        out = []
        for _ in range(count):
            size, pos = read_u(self.wasm, pos)
            out.append((pos, pos + size))
            pos += size
        return out

    def data_at(self, address: int, n: int) -> Optional[bytes]:
        """``n`` bytes at ``address`` of memory 0 as its active data segments set them."""
        sec = self.section(SECTION_DATA)
        if sec is None:
            return None
        count, pos = read_u(self.wasm, sec[0])
        for _ in range(count):
            flags, pos = read_u(self.wasm, pos)
            if flags == 1:  # passive
                data, pos = read_bytes(self.wasm, pos)
                continue
            if flags == 2:
                memory, pos = read_u(self.wasm, pos)
            elif flags == 0:
                memory = 0
            else:
                raise NotRecognised(f"data segment flags {flags}")
            if self.wasm[pos] != 0x41:  # i32.const <offset> end: circom's only form
                raise NotRecognised("a data segment offset that is not a constant")
            offset, pos = read_s(self.wasm, pos + 1)
            if self.wasm[pos] != 0x0B:
                raise NotRecognised("a data segment offset that is not a constant")
            data, pos = read_bytes(self.wasm, pos + 1)
            if memory == 0 and offset <= address and address + n <= offset + len(data):
                return data[address - offset:address - offset + n]
        return None

    def with_bodies(self, bodies: Dict[int, bytes]) -> bytes:
        """The module with the given functions' bodies (function index -> body bytes)."""
        imported = self.imported_functions()
        start, end = self.section(SECTION_CODE)
        entries = self.code_entries()
        payload = bytearray(leb_u(len(entries)))
        for i, (a, b) in enumerate(entries):
            body = bodies.get(i + imported, self.wasm[a:b])
            payload += leb_u(len(body)) + body
        header_start = next(p for p in _section_header_starts(self.wasm) if p[1] == start)[0]
        return (self.wasm[:header_start] + bytes([SECTION_CODE]) + leb_u(len(payload))
                + bytes(payload) + self.wasm[end:])


def _section_header_starts(wasm: bytes):
    """(header start, payload start) of every section."""
    pos = 8
    while pos < len(wasm):
        size, start = read_u(wasm, pos + 1)
        yield pos, start
        pos = start + size



# -- the instructions of a body --------------------------------------------------------------

#: block types that are one byte: empty, i32, i64, f32, f64, v128, funcref, externref
_BLOCK_TYPE_BYTES = frozenset((0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F))
_ONE_U32 = frozenset((0x0C, 0x0D, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x3F, 0x40,
                      0xD2))
_NO_IMMEDIATE = frozenset((0x00, 0x01, 0x05, 0x0B, 0x0F, 0x1A, 0x1B, 0xD1)) | \
    frozenset(range(0x45, 0xC5))
#: 0xFC-prefixed: saturating truncations and wide arithmetic take no immediate; bulk memory
#: and table operations take one or two
_FC_IMMEDIATES = {**{i: 0 for i in (0, 1, 2, 3, 4, 5, 6, 7, 19, 20, 21, 22)},
                  8: 2, 9: 1, 10: 2, 11: 1, 12: 2, 13: 1, 14: 2, 15: 1, 16: 1, 17: 1}

OP_BLOCK, OP_LOOP, OP_IF, OP_END, OP_BR, OP_RETURN, OP_CALL = 0x02, 0x03, 0x04, 0x0B, 0x0C, \
    0x0F, 0x10
OP_LOCAL_GET, OP_LOCAL_SET, OP_LOCAL_TEE = 0x20, 0x21, 0x22


def body_locals(body: bytes) -> Tuple[List[int], int]:
    """A function body's declared locals, one value type each, and where its code starts."""
    groups, pos = read_u(body, 0)
    types: List[int] = []
    for _ in range(groups):
        count, pos = read_u(body, pos)
        if pos >= len(body) or count > 50000:
            raise NotRecognised("bad local declarations")
        types += [body[pos]] * count
        pos += 1
    return types, pos


def encode_locals(types: List[int]) -> bytes:
    """Local declarations for ``types`` (runs of one type grouped)."""
    groups: List[Tuple[int, int]] = []
    for t in types:
        if groups and groups[-1][1] == t:
            groups[-1] = (groups[-1][0] + 1, t)
        else:
            groups.append((1, t))
    return leb_u(len(groups)) + b"".join(leb_u(n) + bytes([t]) for n, t in groups)


def _immediate_kinds() -> List[int]:
    """For each opcode, the shape of its immediates (how :func:`instructions` reads them):
    0 none, 1 a LEB128, 2 a call's function, 3 a memory argument, 4 a block type, 5 and 6
    four and eight bytes, 7 br_table's depths, 8 call_indirect's type and table, 9 select's
    types, 10 a heap type, 11 an 0xFC-prefixed instruction; -1 one it does not know."""
    kinds = [-1] * 256
    for op in _NO_IMMEDIATE:
        kinds[op] = 0
    for op in _ONE_U32:
        kinds[op] = 1
    kinds[OP_CALL] = 2
    for op in range(0x28, 0x3F):
        kinds[op] = 3
    for op in (OP_BLOCK, OP_LOOP, OP_IF):
        kinds[op] = 4
    kinds[0x41] = kinds[0x42] = 1  # a signed LEB128 is skipped like an unsigned one
    kinds[0x43], kinds[0x44] = 5, 6
    kinds[0x0E], kinds[0x11], kinds[0x1C], kinds[0xD0], kinds[0xFC] = 7, 8, 9, 10, 11
    return kinds


_KINDS = _immediate_kinds()


def instructions(code: bytes, pos: int = 0) -> Iterator[Tuple[int, int, int, int]]:
    """``(opcode, start, end, immediate)`` of every instruction of ``code`` from ``pos`` on:
    ``immediate`` is the first immediate where the opcode has a number (a call's function,
    a local's index, a br's depth, a block's type, a load's offset), else 0; 0xFC-prefixed
    opcodes come as 0xFC00 + their number.  Raises NotRecognised on an instruction outside
    the MVP, bulk memory, sign extension, saturating truncation and wide arithmetic.
    """
    kinds, n = _KINDS, len(code)
    try:
        while pos < n:
            start, op = pos, code[pos]
            pos += 1
            kind, value = kinds[op], 0
            if kind in (1, 2):
                value, pos = (read_s if op in (0x41, 0x42) else read_u)(code, pos)
            elif kind == 3:
                align, pos = read_u(code, pos)
                if align & 0x40:
                    _, pos = read_u(code, pos)
                value, pos = read_u(code, pos)
            elif kind == 4:
                if code[pos] in _BLOCK_TYPE_BYTES:
                    value, pos = code[pos], pos + 1
                else:
                    value, pos = read_s(code, pos)
            elif kind == 5 or kind == 6:
                pos += 4 if kind == 5 else 8
            elif kind == 7:
                count, pos = read_u(code, pos)
                for _ in range(count + 1):
                    _, pos = read_u(code, pos)
            elif kind == 8:
                value, pos = read_u(code, pos)
                _, pos = read_u(code, pos)
            elif kind == 9:
                count, pos = read_u(code, pos)
                pos += count
            elif kind == 10:
                pos += 1
            elif kind == 11:
                sub, pos = read_u(code, pos)
                if sub not in _FC_IMMEDIATES:
                    raise NotRecognised(f"instruction 0xFC {sub}")
                for _ in range(_FC_IMMEDIATES[sub]):
                    _, pos = read_u(code, pos)
                op = 0xFC00 + sub
            elif kind != 0:
                raise NotRecognised(f"instruction 0x{op:02x}")
            if pos > n:
                raise NotRecognised("truncated instruction")
            yield op, start, pos, value
    except IndexError:
        raise NotRecognised("truncated instruction") from None


def call_sites(code: bytes) -> List[Tuple[int, int, int]]:
    """``(start, end, function index)`` of every ``call`` in ``code`` (a body after its
    locals)."""
    return [(start, end, index) for op, start, end, index in instructions(code)
            if op == OP_CALL]
