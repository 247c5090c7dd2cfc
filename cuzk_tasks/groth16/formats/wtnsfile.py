"""The bytes of a ``.wtns`` file from its values already packed (n8 bytes each, little
endian, standard form), without numpy: ``cuzk-tasks witness`` writes its output with this and
never imports numpy (~0.1-0.4 s of its start).  :mod:`.wtns` reads and writes the same
layout from numpy arrays through :func:`wtns_header`.

Layout (iden3 binary container, version 2, two sections)::

    "wtns" | uint32 version=2 | uint32 nSections=2
    section 1 (uint32 type=1, uint64 size=8+n8): uint32 n8 | prime (n8 bytes LE) | uint32 n
    section 2 (uint32 type=2, uint64 size=n8*n): the n values
"""

from __future__ import annotations

import struct

WTNS_MAGIC = b"wtns"
WTNS_VERSION = 2

_FILE_HEADER = struct.Struct("<4sII")    # magic, version, section count (as binfile.py)
_SECTION_HEADER = struct.Struct("<IQ")  # section type, payload bytes


def wtns_header(n8: int, prime: int, n: int) -> bytes:
    """Everything of the file before its values: the file header, section 1 and the header
    of section 2 (its size: ``n * n8`` bytes of values follow)."""
    field = struct.pack("<I", n8) + prime.to_bytes(n8, "little") + struct.pack("<I", n)
    return (_FILE_HEADER.pack(WTNS_MAGIC, WTNS_VERSION, 2)
            + _SECTION_HEADER.pack(1, len(field)) + field
            + _SECTION_HEADER.pack(2, n * n8))


def wtns_file_bytes(packed, n8: int, prime: int) -> bytes:
    """The whole file of the values ``packed`` (bytes-like, a multiple of ``n8`` bytes)."""
    if len(packed) % n8:
        raise ValueError(f"{len(packed)} bytes of values is not a multiple of n8={n8}")
    return wtns_header(n8, prime, len(packed) // n8) + packed  # bytes + bytearray: one copy
