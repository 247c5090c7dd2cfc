#!/usr/bin/env python3
"""Write a mulchain circuit's .r1cs and witness .wtns directly, without circom.

Usage:  python bench/mulchain_r1cs.py K OUT_DIR [--curve bn128|bls12381]

circom needs many minutes (and the wasm witness calculator) for a 2^20 mulchain on
2 cores; timing ``cuzk-tasks setup`` and the provers at that size only needs the
constraint system and one witness.  The files are the ones circom writes for
tests/fixtures/circuits/mulchain_template.circom's ``MulChain(N)``, N = 2^K - 3, so the
Groth16 domain is exactly 2^K: the same wires (0 = one, 1 = c, 2 = b public, 3 = a,
4.. = x[1..N-1]), the same constraints (x[i-1] * b = x[i] - i, written as circom does:
A = -x[i-1], B = b, C = i - x[i]) and the witness for a = 3, b = 11: both checked
identical to circom's at K = 16.  Only the wire labels (section 3) are not circom's, and
there is no .wasm.  Standard library only.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

PRIMES = {  # the scalar fields r (circom --prime)
    "bn128": 21888242871839275222246405745257275088548364400416034343698204186575808495617,
    "bls12381": 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001,
}
N8 = 32


def _section(stype: int, payload: bytes) -> bytes:
    return struct.pack("<IQ", stype, len(payload)) + payload


def write_files(k: int, out: Path, curve: str = "bn128", a: int = 3, b: int = 11) -> int:
    """Write out/circuit.r1cs and out/witness.wtns; returns the number of constraints."""
    r = PRIMES[curve]
    n = (1 << k) - 3
    if n < 2:
        raise SystemExit(f"K={k} too small")
    n_wires = n + 3

    def fe(v: int) -> bytes:
        return (v % r).to_bytes(N8, "little")

    def x_wire(i: int) -> int:  # wire of x[i], i = 0..N
        return 3 if i == 0 else 1 if i == n else 3 + i

    minus_one, one = fe(-1), fe(1)
    term = struct.Struct("<II")  # nTerms = 1, wire (then the coefficient)
    parts = []
    for i in range(1, n + 1):
        parts += [term.pack(1, x_wire(i - 1)), minus_one, term.pack(1, 2), one,
                  term.pack(2, 0), fe(i), struct.pack("<I", x_wire(i)), minus_one]
    header = (struct.pack("<I", N8) + r.to_bytes(N8, "little")
              + struct.pack("<IIIIQI", n_wires, 1, 1, 1, n_wires, n))
    labels = b"".join(struct.pack("<Q", w) for w in range(n_wires))
    out.mkdir(parents=True, exist_ok=True)
    (out / "circuit.r1cs").write_bytes(b"r1cs" + struct.pack("<II", 1, 3) + _section(1, header)
                                       + _section(2, b"".join(parts)) + _section(3, labels))

    witness = [0] * n_wires
    witness[0], witness[2], witness[3] = 1, b, a
    x = a
    for i in range(1, n + 1):
        x = (x * b + i) % r
        witness[x_wire(i)] = x
    wtns_header = struct.pack("<I", N8) + r.to_bytes(N8, "little") + struct.pack("<I", n_wires)
    (out / "witness.wtns").write_bytes(b"wtns" + struct.pack("<II", 2, 2) + _section(1, wtns_header)
                                       + _section(2, b"".join(fe(v) for v in witness)))
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("k", type=int, help="log2 of the Groth16 domain (N = 2^K - 3 constraints)")
    ap.add_argument("out", type=Path, help="directory for circuit.r1cs and witness.wtns")
    ap.add_argument("--curve", choices=sorted(PRIMES), default="bn128")
    args = ap.parse_args(argv)
    n = write_files(args.k, args.out, args.curve)
    print(f"wrote {args.out}/circuit.r1cs ({n} constraints) and witness.wtns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
