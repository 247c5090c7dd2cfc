"""Reader/writer for circom/snarkjs witness files (``.wtns``, version 2).

Layout::

    "wtns" | uint32 version=2 | uint32 nSections=2
    section 1 (size 8+n8): uint32 n8 | prime (n8 bytes LE) | uint32 nWitness
    section 2 (size n8*nWitness): nWitness values, n8 bytes LE, standard form

The prime is the scalar field r of the circuit's curve (BN254 or BLS12-381, both
n8 = 32).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from cuzk_tasks.errors import FormatError
from cuzk_tasks.paths import atomic_output
from ..curves import CURVES, curve_from_primes, known_curves
from .binfile import BN254_R, BinFile, MappedFileOwner
from ..points import ints_to_limb_array as ints_to_limbs, limb_array_to_ints as limbs_to_ints  # noqa: F401 (re-exported)
from .wtnsfile import WTNS_MAGIC, wtns_header
from .zkey import limbs_ge

N8 = 32  # the scalar fields of every supported curve are 32-byte (n8r)
assert all(c.n8r == N8 for c in CURVES)
_KNOWN_PRIMES = {p: f"the {c.snarkjs_name} {what}" for c in CURVES
                 for p, what in ((c.q, "base field q"), (c.r, "scalar field r"))}


@dataclass
class Witness(MappedFileOwner):
    path: str
    prime: int
    n8: int
    values: np.ndarray  # (n, 4) uint64, standard form, zero-copy view
    _bin: Optional[BinFile] = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def curve(self):
        """The curve whose scalar field the witness is over (a :class:`.curves.Curve`)."""
        return curve_from_primes(None, self.prime)

    def as_ints(self) -> list:
        """Values as Python ints (slow; small witnesses / tests)."""
        return limbs_to_ints(self.values)


def check_witness_curve(prime: int, source, zkey) -> None:
    """The one check that a witness (over ``prime``, read from ``source``) and ``zkey`` are for
    the same curve: FormatError naming both files and both curves otherwise.  The readers,
    the prover and synthesize all call this."""
    if prime == zkey.r:
        return
    found = curve_from_primes(None, prime)
    what = (f"{found} (its scalar field r)" if found is not None
            else _KNOWN_PRIMES.get(prime, "another prime field"))
    raise FormatError(source, "prime",
                      f"witness is for {what} but zkey {zkey.path} is for {zkey.curve}: "
                      "the witness and the zkey are for different curves")


def read_wtns(path, expected_prime: int | None = None,
              expected_length: int | None = None, zkey=None, fileobj=None) -> Witness:
    """Read and validate a .wtns file over the scalar field of a supported curve
    (BN254 or BLS12-381; ``Witness.curve`` says which).

    ``zkey``: the zkey the witness is for; its curve (:func:`check_witness_curve`) and
    ``nVars`` (as ``expected_length``) are checked.  ``expected_prime`` pins the prime.
    ``fileobj``: the file already open (binary; ``path`` names it in messages), taken over
    and closed (see :class:`~.binfile.BinFile`).
    """
    bf = BinFile(path, WTNS_MAGIC, (2,), fileobj=fileobj)
    try:
        p = bf.path
        s1 = bf.section(1, "header")
        if s1.size < 4:
            raise FormatError(p, "section 1 (header)",
                              f"size is {s1.size} bytes, too small")
        n8 = struct.unpack("<I", bf.read(s1, 0, 4))[0]
        if s1.size != 8 + n8:
            raise FormatError(p, "section 1 (header)",
                              f"size is {s1.size} bytes, expected {8 + n8} for n8={n8}")
        hdr = bf.read(s1)
        prime = int.from_bytes(hdr[4:4 + n8], "little")
        n_witness = struct.unpack_from("<I", hdr, 4 + n8)[0]
        # named only when well known: never echo the file's bytes
        found = _KNOWN_PRIMES.get(prime, "another prime field")
        if expected_prime is not None and prime != expected_prime:
            raise FormatError(p, "prime", f"witness is for {found}, expected prime {expected_prime}")
        if zkey is not None:
            check_witness_curve(prime, p, zkey)
        elif curve_from_primes(None, prime) is None:
            base_of = curve_from_primes(prime, None)
            expected = (f"{base_of.snarkjs_name} scalar field r = {base_of.r}" if base_of
                        else f"the scalar field r of {known_curves()}")
            raise FormatError(p, "prime", f"witness is for {found}, expected {expected}")
        if n8 != N8:
            raise FormatError(p, "n8", f"field element size is {n8}, expected 32")
        s2 = bf.section(2, "witness values", n_witness * n8)
        if zkey is not None and expected_length is None:
            expected_length = zkey.n_vars
        if expected_length is not None and n_witness != expected_length:
            raise FormatError(p, "nWitness",
                              f"witness has {n_witness} values, zkey expects "
                              f"nVars={expected_length}")
        values = bf.array(s2, "<u8", n_witness * 4, shape=(n_witness, 4))
        bad = np.flatnonzero(limbs_ge(values, prime))
        if len(bad):
            i = int(bad[0])
            raise FormatError(p, "values",
                              f"witness value #{i} is not reduced: >= prime "
                              f"({len(bad)} such values)")
        bf.release_file()
        return Witness(path=p, prime=prime, n8=n8, values=values, _bin=bf)
    except BaseException:
        bf.close()
        raise


def wtns_bytes(values, prime: int = BN254_R) -> bytes:
    """Serialise a witness exactly as snarkjs/circom do (version 2, 2 sections).

    ``values`` is an (n, 4) uint64 array of standard-form limbs or a sequence
    of Python ints.
    """
    if isinstance(values, np.ndarray):
        arr = np.ascontiguousarray(values, dtype="<u8")
        if arr.ndim != 2 or arr.shape[1] != N8 // 8:
            raise ValueError(f"values must have shape (n, 4), got {arr.shape}")
        n = arr.shape[0]
        data = arr.tobytes()
    else:
        vals = [int(v) for v in values]
        n = len(vals)
        data = b"".join(v.to_bytes(N8, "little") for v in vals)
    return wtns_header(N8, prime, n) + data


def write_wtns(path, values, prime: int = BN254_R) -> None:
    data = wtns_bytes(values, prime)
    with atomic_output(path) as f:
        f.write(data)
