"""Reader for circom constraint systems (``.r1cs``, version 1).

Sections::

    1 header       uint32 n8 | prime (n8 bytes) | uint32 nWires | uint32 nPubOut
                   | uint32 nPubIn | uint32 nPrvIn | uint64 nLabels
                   | uint32 mConstraints
    2 constraints  mConstraints x (A, B, C); each linear combination is
                   uint32 nTerms, then nTerms x (uint32 wireId, n8-byte coef)
    3 wire2label   nWires x uint64
    4, 5           custom gates (PLONK only; ignored here)

The prime is the scalar field r of the circuit's curve (``circom --prime bn128`` or
``bls12381``); ``R1CS.curve`` says which.  Coefficients are stored in standard
(non-Montgomery) form.  This reader turns
constraints into Python dicts and is meant for small circuits (tests, checks).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from cuzk_tasks.errors import FormatError
from ..curves import curve_from_primes, known_curves
from .binfile import BinFile

R1CS_MAGIC = b"r1cs"
LinearCombination = Dict[int, int]
Constraint = Tuple[LinearCombination, LinearCombination, LinearCombination]


@dataclass
class R1CS:
    path: str
    n8: int
    prime: int
    n_wires: int
    n_pub_out: int
    n_pub_in: int
    n_prv_in: int
    n_labels: int
    n_constraints: int
    constraints: List[Constraint] = field(default_factory=list, repr=False)
    wire2label: Optional[np.ndarray] = field(default=None, repr=False)

    @property
    def curve(self):
        """The curve whose scalar field the circuit is over (None for another prime,
        read with ``expected_prime=None``)."""
        return curve_from_primes(None, self.prime)

    @property
    def n_public(self) -> int:
        """Public signals as snarkjs counts them (outputs + public inputs)."""
        return self.n_pub_out + self.n_pub_in

    def is_satisfied(self, witness: Sequence[int]) -> Optional[int]:
        """Index of the first constraint A*B != C under ``witness``, or None."""
        p = self.prime
        w = [int(x) for x in witness]
        if len(w) < self.n_wires:
            raise ValueError(f"witness has {len(w)} values, circuit has "
                             f"{self.n_wires} wires")

        def ev(lc):
            return sum(c * w[i] for i, c in lc.items()) % p

        for k, (a, b, c) in enumerate(self.constraints):
            if ev(a) * ev(b) % p != ev(c):
                return k
        return None


ANY_CURVE = "any supported curve"


def _read_header(bf: BinFile, expected_prime) -> R1CS:
    """Section 1 of an open r1cs file, checked (see :func:`read_r1cs` for ``expected_prime``)."""
    p = bf.path
    s1 = bf.section(1, "header")
    if s1.size < 4:
        raise FormatError(p, "section 1 (header)", f"size {s1.size} too small")
    n8 = struct.unpack("<I", bf.read(s1, 0, 4))[0]
    want = 4 + n8 + 4 * 4 + 8 + 4
    if s1.size != want:
        raise FormatError(p, "section 1 (header)",
                          f"size is {s1.size} bytes, expected {want} for n8={n8}")
    hdr = bf.read(s1)
    prime = int.from_bytes(hdr[4:4 + n8], "little")
    if expected_prime == ANY_CURVE:
        if curve_from_primes(None, prime) is None:
            raise FormatError(p, "prime", f"circuit is for prime {prime}, expected the scalar "
                                          f"field r of {known_curves()}")
    elif expected_prime is not None and prime != expected_prime:
        raise FormatError(p, "prime",
                          f"circuit is for prime {prime}, expected {expected_prime}")
    n_wires, n_pub_out, n_pub_in, n_prv_in, n_labels, m = struct.unpack_from(
        "<IIIIQI", hdr, 4 + n8)
    return R1CS(path=p, n8=n8, prime=prime, n_wires=n_wires, n_pub_out=n_pub_out,
                n_pub_in=n_pub_in, n_prv_in=n_prv_in, n_labels=n_labels, n_constraints=m)


def read_r1cs(path, expected_prime=ANY_CURVE) -> R1CS:
    """Read a circuit.  ``expected_prime``: by default the scalar field r of a supported
    curve (BN254 or BLS12-381); an int pins it; None accepts any prime."""
    with BinFile(path, R1CS_MAGIC, (1,)) as bf:
        r = _read_header(bf, expected_prime)
        p, n8, prime, n_wires, m = bf.path, r.n8, r.prime, r.n_wires, r.n_constraints
        s2 = bf.section(2, "constraints")
        data = bf.read(s2)
        pos = 0
        term = 4 + n8
        cons: List[Constraint] = []
        try:
            for k in range(m):
                lcs = []
                for _ in range(3):
                    (nt,) = struct.unpack_from("<I", data, pos)
                    pos += 4
                    if pos + nt * term > len(data):
                        raise struct.error("overrun")
                    lc = {}
                    for _ in range(nt):
                        (wire,) = struct.unpack_from("<I", data, pos)
                        if wire >= n_wires:
                            raise FormatError(p, "section 2 (constraints)",
                                              f"constraint {k} uses wire {wire}, "
                                              f"nWires={n_wires}")
                        coef = int.from_bytes(data[pos + 4:pos + term], "little")
                        lc[wire] = (lc.get(wire, 0) + coef) % prime
                        pos += term
                    lcs.append(lc)
                cons.append((lcs[0], lcs[1], lcs[2]))
        except struct.error:
            raise FormatError(p, "section 2 (constraints)",
                              f"section ends inside constraint {len(cons)} of {m}") \
                from None
        if pos != len(data):
            raise FormatError(p, "section 2 (constraints)",
                              f"{len(data) - pos} trailing bytes after {m} constraints")
        r.constraints = cons

        if bf.has(3):
            s3 = bf.section(3, "wire2label", n_wires * 8)
            r.wire2label = np.frombuffer(bf.read(s3), dtype="<u8").copy()
        return r


def read_r1cs_raw(path, expected_prime=ANY_CURVE) -> Tuple[R1CS, bytes]:
    """The header and the raw constraint section (section 2, unparsed) of a circuit.

    For circuits too big for :func:`read_r1cs`'s dicts: the native setup walks the
    section itself (and checks it)."""
    with BinFile(path, R1CS_MAGIC, (1,)) as bf:
        r = _read_header(bf, expected_prime)
        return r, bf.read(bf.section(2, "constraints"))
