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
(R = 2^(8 n8q): 2^256 on BN254, 2^384 on BLS12-381) little-endian; a point at
infinity is all zero bytes.  G2 coordinates are stored x.c0, x.c1, y.c0, y.c1.  The
coefficient values are stored as Montgomery(coef * R) i.e. coef * R^2 mod r
(R = 2^(8 n8r) = 2^256 on both curves).

The curve is the one whose primes the groth16 header names (:mod:`.curves`:
BN254 = snarkjs "bn128", BLS12-381 = "bls12381"); ``ZKey.curve`` says which, and the
point arrays have ``2 * curve.n64q`` (G1) and ``4 * curve.n64q`` (G2) limbs per row.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, Tuple

import numpy as np

from cuzk_tasks.errors import FormatError
from .. import points
from ..curves import BN254, CURVES, Curve, curve_from_primes, known_curves
from .binfile import BinFile, MappedFileOwner

ZKEY_MAGIC = b"zkey"
ZKEY_VERSIONS = (1,)
PROTOCOL_GROTH16 = 1

N8 = 32  # bytes per BN254 field element (q and r); see header_size() for any curve
G1_BYTES = 2 * N8
G2_BYTES = 4 * N8
COEF_N8R = 32  # section-4 values are n8r = 32 bytes on every supported curve
assert all(c.n8r == COEF_N8R for c in CURVES)
COEF_DTYPE = np.dtype([("matrix", "<u4"), ("constraint", "<u4"),
                       ("signal", "<u4"), ("value", "<u8", (COEF_N8R // 8,))])
assert COEF_DTYPE.itemsize == 44


def header_size(curve: Curve) -> int:
    """Size of the groth16 header (section 2) of a zkey for ``curve``."""
    return (4 + curve.n8q + 4 + curve.n8r + 4 + 4 + 4
            + 3 * curve.g1_bytes + 3 * curve.g2_bytes)


HEADER_SIZE_GROTH16 = header_size(BN254)

G1Point = Optional[Tuple[int, int]]
G2Point = Optional[Tuple[Tuple[int, int], Tuple[int, int]]]

SEC_HEADER, SEC_GROTH16, SEC_IC, SEC_COEFS, SEC_A, SEC_B1, SEC_B2, SEC_C, \
    SEC_H, SEC_CONTRIB = range(1, 11)

_SECTION_NAMES = {
    SEC_HEADER: "header", SEC_GROTH16: "groth16 header", SEC_IC: "IC",
    SEC_COEFS: "coefficients", SEC_A: "A", SEC_B1: "B1", SEC_B2: "B2",
    SEC_C: "C", SEC_H: "H", SEC_CONTRIB: "contributions",
}


def _g1_from_bytes(b: bytes, curve: Curve) -> G1Point:
    return points.g1_affine_from_mont(np.frombuffer(b, dtype="<u8"), curve)


def _g2_from_bytes(b: bytes, curve: Curve) -> G2Point:
    return points.g2_affine_from_mont(np.frombuffer(b, dtype="<u8"), curve)


def limbs_ge(values: np.ndarray, bound: int) -> np.ndarray:
    """Vectorised ``value >= bound`` for (n, k) little-endian uint64 limbs (bound < 2^(64 k))."""
    v = np.asarray(values)
    k = v.shape[1]
    b = [(bound >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(k)]
    ge = np.ones(v.shape[0], dtype=bool)      # equal so far => ">="
    for i in range(k):                         # least significant first
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
    curve: Curve = BN254
    header_raw: bytes = field(default=b"", repr=False)
    _bin: Optional[BinFile] = field(default=None, repr=False)

    def header_points_mont(self) -> dict:
        """Header points as raw Montgomery limbs exactly as stored.

        Returns ``{"alpha1": (8,) uint64, "beta1": (8,), "beta2": (16,),
        "gamma2": (16,), "delta1": (8,), "delta2": (16,)}`` (copies; on BN254, 12 and 24
        limbs on BLS12-381).
        """
        c = self.curve
        off = 4 + c.n8q + 4 + c.n8r + 12
        g1, g2 = c.g1_bytes, c.g2_bytes
        out = {}
        for name, size in (("alpha1", g1), ("beta1", g1), ("beta2", g2), ("gamma2", g2),
                           ("delta1", g1), ("delta2", g2)):
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
    sizes = sorted({c.n8q for c in CURVES})
    if n8q not in sizes:
        raise FormatError(path, "n8q",
                          f"base field element size is {n8q} bytes, expected "
                          f"{' or '.join(map(str, sizes))} (unsupported curve, expected one of "
                          f"{known_curves()})")
    if sec2.size < 4 + n8q + 4:
        raise FormatError(path, "section 2 (groth16 header)",
                          f"size {sec2.size} is too small")
    q = int.from_bytes(raw[4:4 + n8q], "little")
    by_q = curve_from_primes(q, None)
    if by_q is None or by_q.n8q != n8q:
        raise FormatError(path, "q", f"unsupported curve: prime {q} (expected one of "
                                     f"{known_curves()})")
    n8r = struct.unpack_from("<I", raw, 4 + n8q)[0]
    if n8r != by_q.n8r:
        raise FormatError(path, "n8r",
                          f"scalar field element size is {n8r} bytes, expected {by_q.n8r} "
                          f"for {by_q} (q = its base field)")
    if sec2.size != header_size(by_q):
        raise FormatError(path, "section 2 (groth16 header)",
                          f"size is {sec2.size} bytes, expected "
                          f"{header_size(by_q)} for {by_q}")
    r = int.from_bytes(raw[4 + n8q + 4:4 + n8q + 4 + n8r], "little")
    curve = curve_from_primes(q, r)
    if curve is None:
        raise FormatError(path, "r", f"unsupported curve: prime {r} is not the scalar field of "
                                     f"{by_q} whose base field q is (expected one of "
                                     f"{known_curves()})")
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
    g1, g2 = curve.g1_bytes, curve.g2_bytes
    for size in (g1, g1, g2, g2, g1, g2):
        pts.append(raw[off:off + size])
        off += size
    zk = ZKey(
        path=path, n8q=n8q, q=q, n8r=n8r, r=r, n_vars=n_vars, n_public=n_public,
        domain_size=domain_size, log_domain_size=domain_size.bit_length() - 1,
        alpha1=_g1_from_bytes(pts[0], curve), beta1=_g1_from_bytes(pts[1], curve),
        beta2=_g2_from_bytes(pts[2], curve), gamma2=_g2_from_bytes(pts[3], curve),
        delta1=_g1_from_bytes(pts[4], curve), delta2=_g2_from_bytes(pts[5], curve),
        curve=curve, header_raw=bytes(raw),
    )
    zk.has_contributions = bf.has(SEC_CONTRIB)
    return zk


def _expected_sizes(zk: ZKey) -> dict:
    g1, g2 = zk.curve.g1_bytes, zk.curve.g2_bytes
    return {
        SEC_IC: (zk.n_public + 1) * g1,
        SEC_A: zk.n_vars * g1,
        SEC_B1: zk.n_vars * g1,
        SEC_B2: zk.n_vars * g2,
        SEC_C: (zk.n_vars - zk.n_public - 1) * g1,
        SEC_H: zk.domain_size * g1,
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
        g1 = 2 * zk.curve.n64q   # limbs per G1 row (8 on BN254, 12 on BLS12-381)
        g2 = 2 * g1

        def rows(stype, n, width):
            return bf.array(secs[stype], "<u8", n * width, shape=(n, width))

        zk.ic = rows(SEC_IC, zk.n_public + 1, g1)
        zk.a_points = rows(SEC_A, zk.n_vars, g1)
        zk.b1_points = rows(SEC_B1, zk.n_vars, g1)
        zk.b2_points = rows(SEC_B2, zk.n_vars, g2)
        zk.c_points = rows(SEC_C, zk.n_vars - zk.n_public - 1, g1)
        zk.h_points = rows(SEC_H, zk.domain_size, g1)
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


@lru_cache(maxsize=None)
def _r2_inv_r(curve: Curve) -> int:
    return pow(curve.mont_r_r ** 2, -1, curve.r)  # undoes the R^2 of section-4 coefficients


def coef_value(raw_limbs, curve: Curve = BN254) -> int:
    """Standard-form coefficient from a raw stored value (coef * R^2 mod r)."""
    return points.limbs_to_int(raw_limbs) * _r2_inv_r(curve) % curve.r
