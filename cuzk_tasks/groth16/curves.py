"""The pairing-friendly curves cuzk-tasks knows, as snarkjs/ffjavascript define them.

One frozen :class:`Curve` per curve: :data:`BN254` (snarkjs ``"bn128"``, alt_bn128) and
:data:`BLS12_381` (snarkjs ``"bls12381"``).  Everything curve-specific that the readers,
the reference oracle and the verifier need lives here, so they take a curve as a
parameter instead of hard-coding BN254.

Where the values come from (read in tools/node/node_modules, not copied from there):

* q, r, the generators and b: ffjavascript ``src/bn128.js`` / ``src/bls12381.js`` and
  wasmcurves ``src/bn128/build_bn128.js`` / ``src/bls12381/build_bls12381.js``.
* The towers: both curves use Fq2 = Fq[u]/(u^2 + 1) (wasmcurves ``build_f2m`` with
  ``f1m_neg`` as the non-residue multiplication), Fq6 = Fq2[v]/(v^3 - xi) and
  Fq12 = Fq6[w]/(w^2 - v); xi = 9 + u on BN254, xi = 1 + u on BLS12-381 (``_mulNR``).
* The twist: BN254's G2 is on the D-type twist y^2 = x^3 + b/xi, BLS12-381's on the
  M-type twist y^2 = x^3 + b*xi (wasmcurves' ``pG2b`` = 4 + 4u).  :attr:`Curve.b2` is
  derived from b and xi here, not written down.
* The Miller-loop parameter: 6x + 2 for BN254 (x = 4965661367192848881), x itself for
  BLS12-381 (x = -0xd201000000010000, wasmcurves' ``ateLoopCount`` with
  ``isLoopNegative``).
* The NTT roots: ffjavascript's ``F1Field`` takes the smallest quadratic non-residue
  ``nqr`` of r (searching 2, 3, ...) and the primitive 2^s-th root of unity
  ``nqr^((r - 1) / 2^s)`` with 2^s the largest power of two dividing r - 1; they are
  derived here by that rule.

Montgomery form in snarkjs files uses R = 2^(8 * n8) for each field (n8 = bytes per
element, a multiple of 8): 2^256 for both scalar fields and BN254's base field,
2^384 for BLS12-381's base field.

``tests/test_curves.py`` checks every value from first principles (generators on the
curve and of order r, the non-residues, the twist equation, the root's order, the curve
parameter's relation to q and r).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Tuple

Fq2Element = Tuple[int, int]


def _two_adicity(n: int) -> int:
    s = 0
    while n % 2 == 0:
        n //= 2
        s += 1
    return s


def _smallest_non_residue(p: int) -> int:
    """ffjavascript's ``nqr``: the smallest c >= 2 with c^((p-1)/2) != 1 (Euler)."""
    c = 2
    while pow(c, (p - 1) // 2, p) == 1:
        c += 1
    return c


@dataclass(frozen=True, eq=False)  # identity: one object per curve, cheap to hash
class Curve:
    """One pairing-friendly curve y^2 = x^3 + b (a = 0) with its twist, tower and fields."""

    name: str                    # "BN254", "BLS12-381"
    snarkjs_name: str            # "curve" in snarkjs JSON: "bn128", "bls12381"
    family: str                  # "bn" or "bls12": selects the Miller loop and final exponentiation
    q: int                       # base field prime
    r: int                       # scalar field prime (order of G1, G2, GT)
    n8q: int                     # bytes per Fq element in snarkjs files
    n8r: int                     # bytes per Fr element
    b: int                       # G1: y^2 = x^3 + b
    g1: Tuple[int, int]          # G1 generator, affine
    g2: Tuple[Fq2Element, Fq2Element]  # G2 generator on the twist, affine
    fq2_non_residue: int         # u^2 = fq2_non_residue (as an element of Fq)
    fq6_non_residue: Fq2Element  # xi: v^3 = xi, and w^6 = xi
    twist: str                   # "D" (b' = b/xi) or "M" (b' = b*xi)
    x: int                       # the family parameter (BN u, BLS x), signed
    ate_loop_count: int          # the Miller loop runs over the bits of |ate_loop_count|
    aliases: Tuple[str, ...] = ()  # other names snarkjs accepts (normalised: upper case, alnum)
    # derived in __post_init__
    b2: Fq2Element = field(init=False)
    two_adicity: int = field(init=False)
    fr_nqr: int = field(init=False)
    root_of_unity: int = field(init=False)

    def __post_init__(self):
        q = self.q
        x0, x1 = self.fq6_non_residue
        if self.twist == "D":      # b / xi, with 1/xi = conj(xi) / norm(xi) when u^2 = -1
            norm_inv = pow((x0 * x0 - self.fq2_non_residue * x1 * x1) % q, -1, q)
            b2 = (self.b * x0 * norm_inv % q, -self.b * x1 * norm_inv % q)
        elif self.twist == "M":    # b * xi
            b2 = (self.b * x0 % q, self.b * x1 % q)
        else:
            raise ValueError(f"{self.name}: twist must be 'D' or 'M', got {self.twist!r}")
        object.__setattr__(self, "b2", b2)
        s = _two_adicity(self.r - 1)
        nqr = _smallest_non_residue(self.r)
        object.__setattr__(self, "two_adicity", s)
        object.__setattr__(self, "fr_nqr", nqr)
        object.__setattr__(self, "root_of_unity", pow(nqr, (self.r - 1) >> s, self.r))

    # ------------------------------------------------------------------ derived
    @property
    def n64q(self) -> int:
        """64-bit limbs per Fq element."""
        return self.n8q // 8

    @property
    def n64r(self) -> int:
        return self.n8r // 8

    @property
    def mont_r_q(self) -> int:
        """The Montgomery radix of Fq in snarkjs files: 2^(8 n8q)."""
        return 1 << (8 * self.n8q)

    @property
    def mont_r_r(self) -> int:
        return 1 << (8 * self.n8r)

    @property
    def g1_bytes(self) -> int:
        """Bytes of one affine G1 point in a zkey (x, y)."""
        return 2 * self.n8q

    @property
    def g2_bytes(self) -> int:
        """Bytes of one affine G2 point in a zkey (x.c0, x.c1, y.c0, y.c1)."""
        return 4 * self.n8q

    def __str__(self) -> str:
        return f"{self.name} ({self.snarkjs_name})"

    def __repr__(self) -> str:
        return f"Curve({self.name})"


BN254 = Curve(
    name="BN254",
    snarkjs_name="bn128",
    family="bn",
    q=21888242871839275222246405745257275088696311157297823662689037894645226208583,
    r=21888242871839275222246405745257275088548364400416034343698204186575808495617,
    n8q=32,
    n8r=32,
    b=3,
    g1=(1, 2),
    g2=(
        (10857046999023057135944570762232829481370756359578518086990519993285655852781,
         11559732032986387107991004021392285783925812861821192530917403151452391805634),
        (8495653923123431417604973247489272438418190587263600148770280649306958101930,
         4082367875863433681332203403145435568316851327593401208105741076214120093531),
    ),
    fq2_non_residue=-1,
    fq6_non_residue=(9, 1),
    twist="D",
    x=4965661367192848881,
    ate_loop_count=6 * 4965661367192848881 + 2,
    aliases=("BN128", "BN254", "ALTBN128"),
)
"""BN254 (alt_bn128), snarkjs's ``"bn128"``."""

BLS12_381 = Curve(
    name="BLS12-381",
    snarkjs_name="bls12381",
    family="bls12",
    q=int("1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241"
          "eabfffeb153ffffb9feffffffffaaab", 16),
    r=0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001,
    n8q=48,
    n8r=32,
    b=4,
    g1=(
        3685416753713387016781088315183077757961620795782546409894578378688607592378376318836054947676345821548104185464507,
        1339506544944476473020471379941921221584933875938349620426543736416511423956333506472724655353366534992391756441569,
    ),
    g2=(
        (352701069587466618187139116011060144890029952792775240219908644239793785735715026873347600343865175952761926303160,
         3059144344244213709971259814753781636986470325476647558659373206291635324768958432433509563104347017837885763365758),
        (1985150602287291935568054521177171638300868978215655730859378665066344726373823718423869104263333984641494340347905,
         927553665492332455747201965776037880757740193453592970025027978793976877002675564980949289727957565575433344219582),
    ),
    fq2_non_residue=-1,
    fq6_non_residue=(1, 1),
    twist="M",
    x=-0xd201000000010000,
    ate_loop_count=-0xd201000000010000,
    aliases=("BLS12381",),
)
"""BLS12-381, snarkjs's ``"bls12381"``."""

CURVES = (BN254, BLS12_381)


def normalize_name(name: str) -> str:
    """ffjavascript's ``getCurveFromName`` normalisation: upper case, letters and digits
    only (``"bls12-381"`` -> ``"BLS12381"``)."""
    return "".join(re.findall(r"[A-Za-z0-9]+", name.upper()))


def curve_by_name(name) -> Optional[Curve]:
    """The curve snarkjs means by ``name`` (``"bn128"``, ``"BN254"``, ``"bls12381"``, ...),
    or None when it names no curve cuzk-tasks knows."""
    if not isinstance(name, str):
        return None
    norm = normalize_name(name)
    for curve in CURVES:
        if norm in curve.aliases:
            return curve
    return None


def curve_from_primes(q: Optional[int], r: Optional[int]) -> Optional[Curve]:
    """The curve with base field q and scalar field r, or None.  Either prime may be None
    (a .wtns or .r1cs file only names r): the other one decides."""
    if q is None and r is None:
        return None
    for curve in CURVES:
        if (q is None or q == curve.q) and (r is None or r == curve.r):
            return curve
    return None


def known_curves() -> str:
    """``"bn128 (BN254), bls12381 (BLS12-381)"``: for error messages."""
    return ", ".join(f"{c.snarkjs_name} ({c.name})" for c in CURVES)
