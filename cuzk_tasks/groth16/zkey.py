"""Reader for snarkjs Groth16 proving keys (``.zkey``).

Sections (snarkjs ``zkey_utils``)::

    1  header          uint32 protocol id (1 = groth16)
    2  groth16 header  n8q, q, n8r, r, nVars, nPublic, domainSize,
                       alpha1, beta1, beta2, gamma2, delta1, delta2
    3  IC              (nPublic+1) G1
    4  coefficients    uint32 nCoefs, then nCoefs x (u32 matrix, u32 constraint,
                       u32 signal, n8r-byte value)
    5  A               nVars G1
    6  B1              nVars G1
    7  B2              nVars G2
    8  C               (nVars-nPublic-1) G1
    9  H               domainSize G1
    10 contributions   (variable; not needed for proving)

All curve points are stored affine, coordinates in Montgomery form
(R = 2^256) little-endian; a point at infinity is all zero bytes.  G2
coordinates are stored x.c0, x.c1, y.c0, y.c1.  The coefficient values are
stored as Montgomery(coef * R) i.e. coef * R^2 mod r.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np

from ..errors import FormatError
from . import points
from .binfile import BN254_Q, BN254_R, BinFile, MappedFileOwner

ZKEY_MAGIC = b"zkey"
ZKEY_VERSIONS = (1,)
PROTOCOL_GROTH16 = 1

N8 = 32  # bytes per field element (BN254 q and r)
G1_BYTES = 2 * N8
G2_BYTES = 4 * N8
COEF_DTYPE = np.dtype([("matrix", "<u4"), ("constraint", "<u4"),
                       ("signal", "<u4"), ("value", "<u8", (4,))])
assert COEF_DTYPE.itemsize == 44

HEADER_SIZE_GROTH16 = 4 + N8 + 4 + N8 + 4 + 4 + 4 + 3 * G1_BYTES + 3 * G2_BYTES

_R2_INV_R = pow(1 << 512, -1, BN254_R)  # undoes the R^2 of section-4 coefficients

G1Point = Optional[Tuple[int, int]]
G2Point = Optional[Tuple[Tuple[int, int], Tuple[int, int]]]

SEC_HEADER, SEC_GROTH16, SEC_IC, SEC_COEFS, SEC_A, SEC_B1, SEC_B2, SEC_C, \
    SEC_H, SEC_CONTRIB = range(1, 11)

_SECTION_NAMES = {
    SEC_HEADER: "header", SEC_GROTH16: "groth16 header", SEC_IC: "IC",
    SEC_COEFS: "coefficients", SEC_A: "A", SEC_B1: "B1", SEC_B2: "B2",
    SEC_C: "C", SEC_H: "H", SEC_CONTRIB: "contributions",
}


def _g1_from_bytes(b: bytes) -> G1Point:
    return points.g1_affine_from_mont(np.frombuffer(b, dtype="<u8"))


def _g2_from_bytes(b: bytes) -> G2Point:
    return points.g2_affine_from_mont(np.frombuffer(b, dtype="<u8"))


def limbs_ge(values: np.ndarray, bound: int) -> np.ndarray:
    """Vectorised ``value >= bound`` for (n, 4) little-endian uint64 limbs."""
    v = np.asarray(values)
    b = [(bound >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(4)]
    ge = np.ones(v.shape[0], dtype=bool)      # equal so far => ">="
    for i in range(4):                         # least significant first
        li = v[:, i]
        bi = np.uint64(b[i])
        ge = (li > bi) | ((li == bi) & ge)
    return ge


@dataclass
class ZKey(MappedFileOwner):
    path: str
    n8q: int
    q: int
    n8r: int
    r: int
    n_vars: int
    n_public: int
    domain_size: int
    log_domain_size: int
    alpha1: G1Point
    beta1: G1Point
    beta2: G2Point
    gamma2: G2Point
    delta1: G1Point
    delta2: G2Point
    # big arrays: zero-copy uint64 views, Montgomery form as stored
    ic: Optional[np.ndarray] = None
    a_points: Optional[np.ndarray] = None
    b1_points: Optional[np.ndarray] = None
    b2_points: Optional[np.ndarray] = None
    c_points: Optional[np.ndarray] = None
    h_points: Optional[np.ndarray] = None
    coefs: Optional[np.ndarray] = None
    n_coefs: int = 0
    has_contributions: bool = False
    header_raw: bytes = field(default=b"", repr=False)
    _bin: Optional[BinFile] = field(default=None, repr=False)

    def header_points_mont(self) -> dict:
        """Header points as raw Montgomery limbs exactly as stored.

        Returns ``{"alpha1": (8,) uint64, "beta1": (8,), "beta2": (16,),
        "gamma2": (16,), "delta1": (8,), "delta2": (16,)}`` (copies).
        """
        off = 4 + N8 + 4 + N8 + 12
        out = {}
        for name, size in (("alpha1", G1_BYTES), ("beta1", G1_BYTES),
                           ("beta2", G2_BYTES), ("gamma2", G2_BYTES),
                           ("delta1", G1_BYTES), ("delta2", G2_BYTES)):
            out[name] = np.frombuffer(self.header_raw, dtype="<u8",
                                      count=size // 8, offset=off).copy()
            off += size
        return out

    @property
    def n_private_c(self) -> int:
        return self.n_vars - self.n_public - 1

    def drop_pages(self, *names: str) -> None:
        """Let the OS reclaim the mapped pages of the named arrays (e.g. ``"a_points"``).

        The arrays stay valid: their pages are re-read from the file when
        touched again.  The prover calls this after each step to bound its
        peak RSS.
        """
        if self._bin is None:
            return
        for name in names:
            array = getattr(self, name)
            if array is not None:
                self._bin.drop_pages(array)


def _parse_header(bf: BinFile) -> ZKey:
    path = bf.path
    sec1 = bf.section(SEC_HEADER, "header")
    if sec1.size < 4:
        raise FormatError(path, "section 1 (header)",
                          f"size is {sec1.size} bytes, expected 4")
    protocol = struct.unpack("<I", bf.read(sec1, 0, 4))[0]
    if protocol != PROTOCOL_GROTH16:
        names = {2: "plonk", 10: "fflonk"}
        raise FormatError(path, "protocol",
                          f"zkey is for protocol {names.get(protocol, protocol)} "
                          f"(id {protocol}), expected groth16 (id 1)")
    if sec1.size != 4:
        raise FormatError(path, "section 1 (header)",
                          f"size is {sec1.size} bytes, expected 4")

    sec2 = bf.section(SEC_GROTH16, "groth16 header")
    if sec2.size < 4:
        raise FormatError(path, "section 2 (groth16 header)",
                          f"size {sec2.size} is too small")
    raw = bf.read(sec2)
    n8q = struct.unpack_from("<I", raw, 0)[0]
    if n8q != N8:
        raise FormatError(path, "n8q",
                          f"base field element size is {n8q} bytes, expected 32 "
                          f"(unsupported curve, expected bn128)")
    if sec2.size < 4 + n8q + 4:
        raise FormatError(path, "section 2 (groth16 header)",
                          f"size {sec2.size} is too small")
    q = int.from_bytes(raw[4:4 + n8q], "little")
    if q != BN254_Q:
        raise FormatError(path, "q", f"unsupported curve: prime {q} (expected bn128)")
    n8r = struct.unpack_from("<I", raw, 4 + n8q)[0]
    if n8r != N8:
        raise FormatError(path, "n8r",
                          f"scalar field element size is {n8r} bytes, expected 32 "
                          f"(unsupported curve, expected bn128)")
    if sec2.size != HEADER_SIZE_GROTH16:
        raise FormatError(path, "section 2 (groth16 header)",
                          f"size is {sec2.size} bytes, expected "
                          f"{HEADER_SIZE_GROTH16}")
    r = int.from_bytes(raw[4 + n8q + 4:4 + n8q + 4 + n8r], "little")
    if r != BN254_R:
        raise FormatError(path, "r", f"unsupported curve: prime {r} (expected bn128)")
    off = 4 + n8q + 4 + n8r
    n_vars, n_public, domain_size = struct.unpack_from("<III", raw, off)
    off += 12
    if domain_size == 0 or domain_size & (domain_size - 1):
        raise FormatError(path, "domainSize",
                          f"domainSize {domain_size} is not a power of two")
    if n_public + 1 > n_vars:
        raise FormatError(path, "nPublic",
                          f"nPublic={n_public} needs nVars > nPublic, nVars={n_vars}")
    pts = []
    for size in (G1_BYTES, G1_BYTES, G2_BYTES, G2_BYTES, G1_BYTES, G2_BYTES):
        pts.append(raw[off:off + size])
        off += size
    zk = ZKey(
        path=path, n8q=n8q, q=q, n8r=n8r, r=r, n_vars=n_vars, n_public=n_public,
        domain_size=domain_size, log_domain_size=domain_size.bit_length() - 1,
        alpha1=_g1_from_bytes(pts[0]), beta1=_g1_from_bytes(pts[1]),
        beta2=_g2_from_bytes(pts[2]), gamma2=_g2_from_bytes(pts[3]),
        delta1=_g1_from_bytes(pts[4]), delta2=_g2_from_bytes(pts[5]),
        header_raw=bytes(raw),
    )
    zk.has_contributions = bf.has(SEC_CONTRIB)
    return zk


def _expected_sizes(zk: ZKey) -> dict:
    return {
        SEC_IC: (zk.n_public + 1) * G1_BYTES,
        SEC_A: zk.n_vars * G1_BYTES,
        SEC_B1: zk.n_vars * G1_BYTES,
        SEC_B2: zk.n_vars * G2_BYTES,
        SEC_C: (zk.n_vars - zk.n_public - 1) * G1_BYTES,
        SEC_H: zk.domain_size * G1_BYTES,
    }


def _check_sections(bf: BinFile, zk: ZKey) -> dict:
    secs = {}
    for stype, size in _expected_sizes(zk).items():
        secs[stype] = bf.section(stype, _SECTION_NAMES[stype], size)
    sc = bf.section(SEC_COEFS, "coefficients")
    if sc.size < 4:
        raise FormatError(bf.path, "section 4 (coefficients)",
                          f"size is {sc.size} bytes, too small for nCoefs")
    n_coefs = struct.unpack("<I", bf.read(sc, 0, 4))[0]
    want = 4 + n_coefs * COEF_DTYPE.itemsize
    if sc.size != want:
        raise FormatError(bf.path, "section 4 (coefficients)",
                          f"size is {sc.size} bytes, expected {want} "
                          f"for nCoefs={n_coefs}")
    zk.n_coefs = n_coefs
    secs[SEC_COEFS] = sc
    return secs


def _open(path) -> BinFile:
    return BinFile(path, ZKEY_MAGIC, ZKEY_VERSIONS)


def read_zkey_header(path) -> ZKey:
    """Header and section-table validation only; no big section is mapped."""
    with _open(path) as bf:
        zk = _parse_header(bf)
        _check_sections(bf, zk)
    return zk


def read_zkey(path, validate_coefs: bool = True) -> ZKey:
    """Read and validate a Groth16 zkey; big sections are zero-copy views."""
    bf = _open(path)
    try:
        zk = _parse_header(bf)
        secs = _check_sections(bf, zk)
        zk.ic = bf.array(secs[SEC_IC], "<u8", (zk.n_public + 1) * 8,
                         shape=(zk.n_public + 1, 8))
        zk.a_points = bf.array(secs[SEC_A], "<u8", zk.n_vars * 8, shape=(zk.n_vars, 8))
        zk.b1_points = bf.array(secs[SEC_B1], "<u8", zk.n_vars * 8, shape=(zk.n_vars, 8))
        zk.b2_points = bf.array(secs[SEC_B2], "<u8", zk.n_vars * 16,
                                shape=(zk.n_vars, 16))
        nc = zk.n_vars - zk.n_public - 1
        zk.c_points = bf.array(secs[SEC_C], "<u8", nc * 8, shape=(nc, 8))
        zk.h_points = bf.array(secs[SEC_H], "<u8", zk.domain_size * 8,
                               shape=(zk.domain_size, 8))
        zk.coefs = bf.array(secs[SEC_COEFS], COEF_DTYPE, zk.n_coefs, start=4)
        if validate_coefs:
            _validate_coefs(zk)
        bf.release_file()
        zk._bin = bf
    except BaseException:
        bf.close()
        raise
    return zk


def _validate_coefs(zk: ZKey):
    c = zk.coefs
    if c.size == 0:
        return
    fld = "section 4 (coefficients)"
    bad = np.flatnonzero(c["matrix"] > 1)
    if bad.size:
        i = int(bad[0])
        raise FormatError(zk.path, fld,
                          f"coefficient #{i} has matrix {int(c['matrix'][i])}, "
                          f"expected 0 (A) or 1 (B) ({bad.size} bad records)")
    bad = np.flatnonzero(c["constraint"] >= zk.domain_size)
    if bad.size:
        i = int(bad[0])
        raise FormatError(zk.path, fld,
                          f"coefficient #{i} has constraint {int(c['constraint'][i])}, "
                          f"expected < domainSize={zk.domain_size} "
                          f"({bad.size} bad records)")
    bad = np.flatnonzero(c["signal"] >= zk.n_vars)
    if bad.size:
        i = int(bad[0])
        raise FormatError(zk.path, fld,
                          f"coefficient #{i} has signal {int(c['signal'][i])}, "
                          f"expected < nVars={zk.n_vars} ({bad.size} bad records)")
    bad = np.flatnonzero(limbs_ge(c["value"], zk.r))
    if bad.size:
        i = int(bad[0])
        raise FormatError(zk.path, fld,
                          f"coefficient #{i} value is not reduced mod r "
                          f"({bad.size} bad records)")


def coef_value(raw_limbs) -> int:
    """Standard-form coefficient from a raw stored value (coef * R^2 mod r)."""
    return points.limbs_to_int(raw_limbs) * _R2_INV_R % BN254_R
