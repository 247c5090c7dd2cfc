"""A valid, deterministic input for circomlib's EdDSAPoseidonVerifier (benchmarks only).

circomlibjs (the JS that signs) is not installed, so the signature is computed here:
Poseidon as circomlib's ``PoseidonEx`` computes it, with the round constants read from the
circuit's own ``poseidon_constants.circom`` (no transcribed constants to get wrong), and
BabyJubJub twisted-Edwards arithmetic.  The verifier checks ``S*B8 == R8 + (8*h)*A`` with
``h = Poseidon(R8x, R8y, Ax, Ay, M)``, so for any secret scalar ``a`` and nonce ``r``:
``A = a*B8``, ``R8 = r*B8``, ``S = r + 8*h*a (mod l)`` is a valid signature.  The scalars
are derived from a fixed seed; they are not secret and this is not a signer for real use.

Standard library only.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

P = 21888242871839275222246405745257275088548364400416034343698204186575808495617
SUBORDER = 2736030358979909402780800718157159386076813972158567259200215660948447373041
BABY_A, BABY_D = 168700, 168696
BASE8 = (5299619240641551281634865583518297030282874472190772894086521144482721001553,
         16950150798460657717958625567821834550301663161624707787222815936182638968203)
N_ROUNDS_P = [56, 57, 56, 60, 60, 63, 64, 63, 60, 66, 60, 65, 70, 60, 64, 68]
N_ROUNDS_F = 8


def _constants(text: str, function: str, t: int) -> list:
    """The flat list of numbers POSEIDON_<function>(t) returns in poseidon_constants.circom."""
    start = text.index(f"function POSEIDON_{function}(t)")
    end = text.find("\nfunction ", start + 1)
    body = text[start:end if end > 0 else len(text)]
    m = re.search(rf"t\s*==\s*{t}\s*\)\s*{{(.*?)}}\s*(else|$)", body, re.S)
    if m is None:
        raise ValueError(f"POSEIDON_{function}({t}) not found")
    return [int(x, 0) for x in re.findall(r"0x[0-9a-fA-F]+|\b\d+\b", m.group(1))]


class Poseidon:
    """circomlib's Poseidon(nInputs) (optimized form, as PoseidonEx computes it)."""

    def __init__(self, n_inputs: int, constants_circom: Path):
        text = Path(constants_circom).read_text()
        t = self.t = n_inputs + 1
        self.n_p = N_ROUNDS_P[t - 2]
        self.C = _constants(text, "C", t)
        self.S = _constants(text, "S", t)
        m, p = _constants(text, "M", t), _constants(text, "P", t)
        self.M = [m[i * t:(i + 1) * t] for i in range(t)]
        self.Pm = [p[i * t:(i + 1) * t] for i in range(t)]
        assert len(self.C) == t * N_ROUNDS_F + self.n_p, len(self.C)
        assert len(self.S) == self.n_p * (2 * t - 1), len(self.S)

    @staticmethod
    def _sigma(x):
        return pow(x, 5, P)

    def _ark(self, s, off):
        return [(x + self.C[off + i]) % P for i, x in enumerate(s)]

    def _mix(self, s, m):
        t = self.t
        return [sum(m[j][i] * s[j] for j in range(t)) % P for i in range(t)]

    def __call__(self, inputs) -> int:
        t, C, S, half = self.t, self.C, self.S, N_ROUNDS_F // 2
        s = self._ark([0] + [int(x) % P for x in inputs], 0)
        for r in range(half - 1):
            s = self._mix(self._ark([self._sigma(x) for x in s], (r + 1) * t), self.M)
        s = self._mix(self._ark([self._sigma(x) for x in s], half * t), self.Pm)
        for r in range(self.n_p):
            s0 = (self._sigma(s[0]) + C[(half + 1) * t + r]) % P
            base = (2 * t - 1) * r
            new0 = (S[base] * s0 + sum(S[base + i] * s[i] for i in range(1, t))) % P
            s = [new0] + [(s[i] + s0 * S[base + t + i - 1]) % P for i in range(1, t)]
        for r in range(half - 1):
            s = self._ark([self._sigma(x) for x in s], (half + 1) * t + self.n_p + r * t)
            s = self._mix(s, self.M)
        s = [self._sigma(x) for x in s]
        return sum(self.M[j][0] * s[j] for j in range(t)) % P


def baby_add(p1, p2):
    (x1, y1), (x2, y2) = p1, p2
    k = BABY_D * x1 * x2 * y1 * y2 % P
    x3 = (x1 * y2 + y1 * x2) * pow(1 + k, -1, P) % P
    y3 = (y1 * y2 - BABY_A * x1 * x2) * pow(1 - k, -1, P) % P
    return x3, y3


def baby_mul(pt, e: int):
    acc, cur = (0, 1), pt
    while e:
        if e & 1:
            acc = baby_add(acc, cur)
        cur = baby_add(cur, cur)
        e >>= 1
    return acc


def _scalar(tag: bytes) -> int:
    return int.from_bytes(hashlib.sha512(b"cuzk-tasks bench eddsa " + tag).digest(),
                          "big") % SUBORDER


def eddsa_poseidon_input(circomlib_circuits: Path, message: int = 1234567890) -> dict:
    """{"enabled", "Ax", "Ay", "S", "R8x", "R8y", "M"} for EdDSAPoseidonVerifier()."""
    poseidon5 = Poseidon(5, Path(circomlib_circuits) / "poseidon_constants.circom")
    a, r = _scalar(b"secret"), _scalar(b"nonce")
    A, R8 = baby_mul(BASE8, a), baby_mul(BASE8, r)
    h = poseidon5([R8[0], R8[1], A[0], A[1], message])
    S = (r + 8 * h * a) % SUBORDER
    # the verifier's own equation, as a self-check before the circuit sees it
    assert baby_mul(BASE8, S) == baby_add(R8, baby_mul(A, 8 * h))
    return {"enabled": "1", "Ax": str(A[0]), "Ay": str(A[1]), "S": str(S),
            "R8x": str(R8[0]), "R8y": str(R8[1]), "M": str(message)}


if __name__ == "__main__":   # self-check against circomlibjs's published test vector
    lib = Path(__file__).resolve().parent.parent / "tools/node/node_modules/circomlib/circuits"
    h = Poseidon(2, lib / "poseidon_constants.circom")([1, 2])
    assert h == 0x115cc0f5e7d690413df64c6b9662e9cf2a3617f2743245519e19607a4417189a, hex(h)
    print("poseidon([1,2]) ok;", eddsa_poseidon_input(lib))
