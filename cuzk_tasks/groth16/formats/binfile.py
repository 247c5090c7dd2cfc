"""The iden3 binary container used by .zkey, .wtns and .r1cs files.

Layout (all integers little-endian)::

    magic     4 bytes   e.g. b"zkey", b"wtns", b"r1cs"
    version   uint32
    nSections uint32
    nSections times:
        type  uint32
        size  uint64
        data  `size` bytes

Sections may appear in any order.  Whether a section type may repeat is a
property of the concrete format; by default it may not.

:class:`BinFile` parses only the section table with ordinary reads (cheap even
for multi-GB files) and maps the file read-only with :mod:`mmap` the first time
an array view is requested, so big sections become zero-copy numpy views.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from cuzk_tasks.errors import FormatError
from ..curves import BN254

BN254_Q, BN254_R = BN254.q, BN254.r  # the BN254 "bn128" primes (re-exported; see .curves)

_FILE_HEADER = struct.Struct("<4sII")
_SECTION_HEADER = struct.Struct("<IQ")



@dataclass(frozen=True)
class Section:
    type: int
    offset: int  # absolute file offset of the section data
    size: int


class BinFile:
    """A parsed iden3 binary container.

    Parameters
    ----------
    path:
        The file.
    magic:
        Expected 4-byte magic (``b"zkey"`` ...).
    versions:
        Accepted version numbers.
    repeatable:
        Section types that may occur more than once.
    fileobj:
        The file, already open for binary reading (``path`` then only names it in
        messages); the BinFile owns it from here on and closes it.  A worker passes the
        file :func:`cuzk_tasks.paths.open_input` opened.
    """

    def __init__(self, path, magic: bytes, versions: Iterable[int],
                 repeatable: Iterable[int] = (), fileobj=None):
        self.path = os.fspath(path)
        self._mm: mmap.mmap | None = None
        self._views = 0
        if fileobj is not None:
            self._f = fileobj
        else:
            try:
                self._f = open(self.path, "rb")
            except FileNotFoundError:
                raise FormatError(self.path, "file", "no such file") from None
            except OSError as exc:  # strerror only: str(exc) repeats the path
                raise FormatError(self.path, "file",
                                  f"cannot open: {exc.strerror or type(exc).__name__}") from None
        try:
            self._parse(magic, tuple(versions), frozenset(repeatable))
        except BaseException:
            self._f.close()
            raise

    # -- parsing ---------------------------------------------------------
    def _parse(self, magic: bytes, versions: tuple, repeatable: frozenset):
        f = self._f
        self.file_size = os.fstat(f.fileno()).st_size
        hdr = f.read(_FILE_HEADER.size)
        if len(hdr) < 4:
            raise FormatError(self.path, "magic",
                              f"file is {self.file_size} bytes, too short for a "
                              f"{magic.decode()} file")
        if hdr[:4] != magic:  # never echo the bytes found: the file may be anyone's
            raise FormatError(self.path, "magic",
                              f"not a .{magic.decode()} file (bad magic: the first 4 bytes "
                              f"are not {magic.decode()!r})")
        if len(hdr) < _FILE_HEADER.size:
            raise FormatError(self.path, "header",
                              "file truncated inside the file header")
        self.magic, self.version, n_sections = _FILE_HEADER.unpack(hdr)
        if self.version not in versions:
            raise FormatError(self.path, "version",
                              f"unsupported {magic.decode()} version {self.version} "
                              f"(supported: {', '.join(map(str, versions))})")
        self.sections: dict[int, list[Section]] = {}
        pos = _FILE_HEADER.size
        for i in range(n_sections):
            sh = f.read(_SECTION_HEADER.size)
            if len(sh) < _SECTION_HEADER.size:
                raise FormatError(self.path, f"section #{i + 1} header",
                                  f"file truncated: {n_sections} sections declared, "
                                  f"file ends at byte {self.file_size} before "
                                  f"section #{i + 1}")
            stype, size = _SECTION_HEADER.unpack(sh)
            pos += _SECTION_HEADER.size
            if pos + size > self.file_size:
                raise FormatError(self.path, f"section {stype}",
                                  f"truncated: section {stype} declares {size} bytes "
                                  f"at offset {pos} but the file has only "
                                  f"{self.file_size - pos} bytes left")
            if stype in self.sections and stype not in repeatable:
                raise FormatError(self.path, f"section {stype}",
                                  "section appears more than once")
            self.sections.setdefault(stype, []).append(Section(stype, pos, size))
            pos += size
            f.seek(pos)
        self.n_sections = n_sections

    # -- access ----------------------------------------------------------
    def has(self, stype: int) -> bool:
        return stype in self.sections

    def section(self, stype: int, name: str | None = None,
                expected_size: int | None = None) -> Section:
        """The single section of ``stype``; FormatError if missing or mis-sized."""
        label = f"section {stype}" + (f" ({name})" if name else "")
        secs = self.sections.get(stype)
        if not secs:
            raise FormatError(self.path, label, "required section is missing")
        sec = secs[0]
        if expected_size is not None and sec.size != expected_size:
            raise FormatError(self.path, label,
                              f"size is {sec.size} bytes, expected {expected_size} "
                              f"from the header")
        return sec

    def read(self, sec: Section, start: int = 0, length: int | None = None) -> bytes:
        """Plain read of (part of) a section, no mapping."""
        if length is None:
            length = sec.size - start
        if start < 0 or start + length > sec.size:
            raise FormatError(self.path, f"section {sec.type}",
                              f"read of {length} bytes at {start} exceeds the "
                              f"section size {sec.size}")
        if self._f.closed:
            data = bytes(self.mm[sec.offset + start:sec.offset + start + length])
        else:
            self._f.seek(sec.offset + start)
            data = self._f.read(length)
        if len(data) != length:  # file shrank under us
            raise FormatError(self.path, f"section {sec.type}", "file truncated")
        return data

    @property
    def mm(self) -> mmap.mmap:
        if self._mm is None:
            if self.file_size == 0:
                raise FormatError(self.path, "file", "empty file")
            self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mm

    def array(self, sec: Section, dtype, count: int, start: int = 0,
              shape: tuple | None = None) -> np.ndarray:
        """Zero-copy read-only numpy view of ``count`` items of ``dtype`` in a section."""
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize * count
        if start + nbytes > sec.size:
            raise FormatError(self.path, f"section {sec.type}",
                              f"needs {start + nbytes} bytes, section has {sec.size}")
        if count == 0:
            arr = np.empty(0, dtype=dtype)
        else:
            arr = np.frombuffer(self.mm, dtype=dtype, count=count,
                                offset=sec.offset + start)
        if shape is not None:
            arr = arr.reshape(shape)
        return arr

    def drop_pages(self, array: np.ndarray) -> None:
        """Tell the kernel it may drop the mapped pages behind ``array``.

        The mapping is read-only and file-backed, so the pages are simply
        re-read on the next access; dropping them after a step has consumed a
        section keeps the prover's peak RSS near the size of one section
        instead of the whole zkey.
        """
        if self._mm is None or array.size == 0 or not hasattr(self._mm, "madvise"):
            return
        base = np.frombuffer(self._mm, dtype=np.uint8, count=1).ctypes.data
        start = array.ctypes.data - base
        end = start + array.nbytes
        if start < 0 or end > len(self._mm):
            return  # not a view of this mapping (e.g. a copy)
        page = mmap.PAGESIZE
        start = -(-start // page) * page  # only whole pages inside the array
        end = end // page * page
        if end > start:
            self._mm.madvise(mmap.MADV_DONTNEED, start, end - start)

    def release_file(self):
        """Close the file handle, keeping only the mapping (no fd is leaked
        by readers whose result is never explicitly closed)."""
        if self.file_size > 0:
            _ = self.mm
        if not self._f.closed:
            self._f.close()

    def close(self):
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                # numpy views still reference the mapping; it is released
                # when the last view is garbage collected.
                pass
            self._mm = None
        if not self._f.closed:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class MappedFileOwner:
    """Mixin for reader results that keep their :class:`BinFile` in ``_bin``:
    ``close()`` and use as a context manager."""

    def close(self):
        if self._bin is not None:
            self._bin.close()
            self._bin = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_uint(data: bytes, n8: int) -> int:
    return int.from_bytes(data[:n8], "little")


def write_bin_header(magic: bytes, version: int, n_sections: int) -> bytes:
    return _FILE_HEADER.pack(magic, version, n_sections)


def write_section(stype: int, payload: bytes) -> bytes:
    return _SECTION_HEADER.pack(stype, len(payload)) + payload
