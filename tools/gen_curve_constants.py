#!/usr/bin/env python3
"""Generate ``cuzk_tasks/native/include/cuzk/{bn254,bls12_381}_constants.cuh``.

Every curve constant used by the native (CPU and CUDA) core is derived here
from first principles; the only inputs per curve are the curve parameter
(BN u, BLS x), which must reproduce the two primes

* q: the base-field modulus (Fq, coordinates of G1/G2 points),
* r: the scalar-field modulus (Fr, group order, QAP arithmetic).

Usage::

    python tools/gen_curve_constants.py            # (re)write both headers
    python tools/gen_curve_constants.py --check    # exit 1 if a header is stale
    python tools/gen_curve_constants.py --stdout --curve bls12_381   # print one header

Stdlib only.  Output is deterministic.
"""
import argparse
import fractions
import math
import os
import sys

# ---- BN254 (alt_bn128, snarkjs "bn128") ------------------------------------
# BN curve parameter u: q = 36u^4 + 36u^3 + 24u^2 + 6u + 1, r = 36u^4 + 36u^3 + 18u^2 + 6u + 1.
BN_U = 4965661367192848881
Q = 21888242871839275222246405745257275088696311157297823662689037894645226208583
R = 21888242871839275222246405745257275088548364400416034343698204186575808495617

# ---- BLS12-381 (snarkjs "bls12381") -------------------------------------------
# BLS12 curve parameter x: r = x^4 - x^2 + 1, q = (x - 1)^2 r / 3 + x.
BLS_X = -0xd201000000010000
BLS_Q = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
BLS_R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
# standard generators (checked on the curve and of order r below)
BLS_G1 = (0x17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb,
          0x08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1)
BLS_G2 = ((0x024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8,
           0x13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e),
          (0x0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801,
           0x0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be))

MONT_R = 1 << 256  # BN254 (4 limbs); each field's own R is 2^(64 * limbs)
MAX_LOG2 = 28
# snarkjs / ffjavascript value of the primitive 2^28-th root of unity of Fr.
EXPECTED_W28 = 19103219067921713944291392827692070036145651957329286315305642004821462161904

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(HERE, os.pardir, "cuzk_tasks", "native", "include", "cuzk")
HEADER = os.path.join(INCLUDE, "bn254_constants.cuh")
BLS_HEADER = os.path.join(INCLUDE, "bls12_381_constants.cuh")


def is_probable_prime(n):
    if n < 2:
        return False
    small = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37]
    for p in small:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def n_limbs(p):
    """64-bit limbs of p's field elements: the fewest that leave a spare top bit (no-carry CIOS)."""
    return (p.bit_length() + 1 + 63) // 64


def limbs(x, n=4):
    assert 0 <= x < (1 << (64 * n))
    return [(x >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(n)]


def to_mont(x, p):
    return x * (1 << (64 * n_limbs(p))) % p


def legendre(a, p):
    return pow(a, (p - 1) // 2, p)


def fq2_mul(a, b, p):
    # Fq2 = Fq[u]/(u^2 + 1)
    return ((a[0] * b[0] - a[1] * b[1]) % p, (a[0] * b[1] + a[1] * b[0]) % p)


def fq2_inv(a, p):
    norm = (a[0] * a[0] + a[1] * a[1]) % p
    ninv = pow(norm, p - 2, p)
    return (a[0] * ninv % p, (-a[1]) * ninv % p)


def fq2_pow(a, e, p):
    r = (1, 0)
    while e:
        if e & 1:
            r = fq2_mul(r, a, p)
        a = fq2_mul(a, a, p)
        e >>= 1
    return r


def naf(e):
    """Non-adjacent form of e > 0, most significant digit first (digits -1, 0, 1)."""
    digits = []
    while e:
        d = (2 - (e & 3)) if e & 1 else 0
        e -= d
        digits.append(d)
        e >>= 1
    return digits[::-1]


def _pairing(q, family, twist, xi_k, x, ate):
    """The optimal ate pairing's constants (pairing.hpp): the tower Fq6 = Fq2[v]/(v^3 - xi),
    Fq12 = Fq6[w]/(w^2 - v) with xi = xi_k + u, the signed loop parameters as NAF digits,
    and the Frobenius coefficients FROB[n-1][k] = xi^(k (q^n - 1)/6), n = 1..3, k = 0..5."""
    xi = (xi_k, 1)
    # xi must be neither a square nor a cube in Fq2, so that v^3 - xi and w^2 - v are
    # irreducible: xi^((q^2-1)/2) != 1 and xi^((q^2-1)/3) != 1
    assert fq2_pow(xi, (q * q - 1) // 2, q) != (1, 0)
    assert (q * q - 1) % 3 == 0 and fq2_pow(xi, (q * q - 1) // 3, q) != (1, 0)
    assert (q - 1) % 6 == 0
    frob = [[fq2_pow(xi, k * (q ** n - 1) // 6, q) for k in range(6)] for n in (1, 2, 3)]
    for n in range(3):
        assert frob[n][0] == (1, 0)
    for k in range(6):  # q^2-power coefficients lie in Fq (xi^((q^2-1)/6) is a norm)
        assert frob[1][k][1] == 0
    return {"FAMILY": family, "TWIST": twist, "XI_K": xi_k, "X": x, "ATE": ate,
            "ATE_NAF": naf(abs(ate)), "X_NAF": naf(abs(x)), "FROB": frob}


def _field(p):
    n = n_limbs(p)
    mont = 1 << (64 * n)
    d = {"MOD": p, "LIMBS": n, "BITS": p.bit_length(), "ONE": mont % p, "R2": mont * mont % p,
         "INV": (-pow(p, -1, 1 << 64)) % (1 << 64)}
    assert (p * d["INV"]) % (1 << 64) == (1 << 64) - 1
    assert (p >> (64 * (n - 1))) < 0x7FFFFFFFFFFFFFFE  # the no-carry CIOS condition
    return d


def _roots(r, expected_max_log2):
    """ffjavascript's roots of unity: nqr = the smallest quadratic non-residue >= 2,
    ROOTS[s] = nqr^((r-1)/2^s) with 2^s || r-1, ROOTS[k-1] = ROOTS[k]^2."""
    s, t = 0, r - 1
    while t % 2 == 0:
        t //= 2
        s += 1
    assert s == expected_max_log2, s
    nqr = 2
    while legendre(nqr, r) != r - 1:
        nqr += 1
    top = pow(nqr, t, r)
    roots = [pow(top, 1 << (s - k), r) for k in range(s + 1)]
    for k, w in enumerate(roots):
        assert pow(w, 1 << k, r) == 1
        if k > 0:
            assert pow(w, 1 << (k - 1), r) == r - 1  # primitive
    return nqr, roots


class _Fq2:
    """Just enough Fq2 = Fq[u]/(u^2 + 1) for the generator checks."""

    def __init__(self, q):
        self.q = q

    def add(self, a, b):
        return ((a[0] + b[0]) % self.q, (a[1] + b[1]) % self.q)

    def sub(self, a, b):
        return ((a[0] - b[0]) % self.q, (a[1] - b[1]) % self.q)

    def mul(self, a, b):
        return fq2_mul(a, b, self.q)

    def inv(self, a):
        return fq2_inv(a, self.q)

    def const(self, k):
        return (k % self.q, 0)


class _Fq(_Fq2):
    def add(self, a, b):
        return (a + b) % self.q

    def sub(self, a, b):
        return (a - b) % self.q

    def mul(self, a, b):
        return a * b % self.q

    def inv(self, a):
        return pow(a, self.q - 2, self.q)

    def const(self, k):
        return k % self.q


def _on_curve(F, pt, b):
    x, y = pt
    return F.mul(y, y) == F.add(F.mul(F.mul(x, x), x), b)


def _affine_add(F, p1, p2):
    """p1 + p2 on y^2 = x^3 + b (None = infinity)."""
    if p1 is None or p2 is None:
        return p2 if p1 is None else p1
    if p1[0] == p2[0]:
        if p1[1] != p2[1] or p1[1] == F.const(0):
            return None
        lam = F.mul(F.mul(F.const(3), F.mul(p1[0], p1[0])), F.inv(F.add(p1[1], p1[1])))
    else:
        lam = F.mul(F.sub(p2[1], p1[1]), F.inv(F.sub(p2[0], p1[0])))
    x3 = F.sub(F.sub(F.mul(lam, lam), p1[0]), p2[0])
    return (x3, F.sub(F.mul(lam, F.sub(p1[0], x3)), p1[1]))


def _scalar_mul(F, pt, k):
    """k * pt (double-and-add; None = infinity)."""
    acc = None
    while k:
        if k & 1:
            acc = _affine_add(F, acc, pt)
        pt = _affine_add(F, pt, pt)
        k >>= 1
    return acc


def _order_divides(F, pt, k):
    """k * pt == infinity."""
    return _scalar_mul(F, pt, k) is None


GLV_BITS = 128  # both curves' half scalars are below 2^GLV_BITS (checked in _glv)


def _glv(q, r, generator):
    """The G1 endomorphism phi(x, y) = (beta x, y) = lambda P (beta, lambda cube roots of
    unity in Fq and Fr), and the short basis (a1, b1), (a2, b2) of the lattice
    {(a, b): a + b lambda = 0 mod r} (GLV, CRYPTO 2001, section 4), with which
    k = k1 + k2 lambda (mod r), c1 = floor(k g1 / 2^256), c2 = floor(k g2 / 2^256),
    k1 = k - c1 a1 - c2 a2, k2 = -c1 b1 - c2 b2, where g1 = floor(b2 2^256 / r) and
    g2 = floor(-b1 2^256 / r)."""
    F = _Fq(q)
    beta = next(b for b in (pow(h, (q - 1) // 3, q) for h in range(2, 64)) if b != 1)
    image = (beta * generator[0] % q, generator[1])
    lams = {lam for lam in (pow(h, (r - 1) // 3, r) for h in range(2, 64)) if lam != 1}
    (lam,) = [lam for lam in lams if _scalar_mul(F, generator, lam) == image]
    # extended Euclid on (r, lambda) until the remainder drops below sqrt(r)
    root = math.isqrt(r)
    rows = [(r, 0), (lam, 1)]
    while rows[-1][0] >= root:
        (r0, t0), (r1, t1) = rows[-2], rows[-1]
        rows.append((r0 - (r0 // r1) * r1, t0 - (r0 // r1) * t1))
    (rl, tl), (rl1, tl1) = rows[-2], rows[-1]
    (r0, t0), (r1, t1) = rows[-2], rows[-1]
    rl2, tl2 = r0 - (r0 // r1) * r1, t0 - (r0 // r1) * t1
    a1, b1 = rl1, -tl1
    a2, b2 = min(((rl, -tl), (rl2, -tl2)), key=lambda v: v[0] ** 2 + v[1] ** 2)
    assert (a1 + b1 * lam) % r == 0 and (a2 + b2 * lam) % r == 0
    assert a1 * b2 - a2 * b1 == r  # the basis spans the lattice, positively oriented
    g1, g2 = (b2 << 256) // r, (-b1 << 256) // r
    assert g1 >= 0 and g2 >= 0
    # (k, 0) = e1 v1 + e2 v2 + (k1, k2)... exactly: (k1, k2) = e1 (a1, b1) + e2 (a2, b2) with
    # e1 = k b2 / r - c1 and e2 = -k b1 / r - c2 in [0, 1 + r / 2^256) (the floor, plus
    # k / 2^256 from g1, g2 being floored), so both halves are below 2^GLV_BITS:
    e = fractions.Fraction(r, 1 << 256) + 1
    assert e * (abs(a1) + abs(a2)) < 1 << GLV_BITS and e * (abs(b1) + abs(b2)) < 1 << GLV_BITS
    return {"BETA": beta, "LAMBDA": lam, "A1": a1, "B1": b1, "A2": a2, "B2": b2,
            "G1": g1, "G2": g2, "BITS": GLV_BITS}


def _add_domain(c, r, max_log2):
    """The NTT tables: NQR, MAX_LOG2, ROOTS[k], ROOTS_INV[k], INV_2K[k] for k = 0..max_log2."""
    c["NQR"], c["ROOTS"] = _roots(r, max_log2)
    c["MAX_LOG2"] = max_log2
    c["ROOTS_INV"] = [pow(w, r - 2, r) for w in c["ROOTS"]]
    c["INV_2K"] = [pow(1 << k, r - 2, r) for k in range(max_log2 + 1)]


def compute_bn254():
    """Return a dict describing all BN254 constants."""
    u = BN_U
    assert Q == 36 * u**4 + 36 * u**3 + 24 * u**2 + 6 * u + 1
    assert R == 36 * u**4 + 36 * u**3 + 18 * u**2 + 6 * u + 1
    assert is_probable_prime(Q) and is_probable_prime(R)
    assert Q.bit_length() == 254 and R.bit_length() == 254
    c = {"FQ": _field(Q), "FR": _field(R)}
    assert c["FQ"]["LIMBS"] == 4 and c["FR"]["LIMBS"] == 4
    # curves
    b1 = 3
    assert Q % 4 == 3  # -1 is a non-residue, so u^2 + 1 is irreducible over Fq
    b2 = fq2_mul((3, 0), fq2_inv((9, 1), Q), Q)
    assert fq2_mul(b2, (9, 1), Q) == (3, 0)
    c["G1_B"] = b1
    c["G2_B"] = b2
    # generators (standard BN254 / EIP-196/197); checked on-curve below
    g1 = (1, 2)
    assert (g1[1] ** 2 - g1[0] ** 3 - b1) % Q == 0
    _add_domain(c, R, MAX_LOG2)
    c["GLV"] = _glv(Q, R, g1)
    c["PAIRING"] = _pairing(Q, "bn", "D", 9, u, 6 * u + 2)
    assert c["ROOTS"][MAX_LOG2] == EXPECTED_W28, (c["NQR"], c["ROOTS"][MAX_LOG2])
    return c


compute = compute_bn254


def compute_bls12_381():
    """Return a dict describing all BLS12-381 constants (same keys as compute_bn254)."""
    x = BLS_X
    r = x**4 - x**2 + 1
    q = (x - 1) ** 2 * r // 3 + x
    assert (x - 1) ** 2 * r % 3 == 0
    assert (q, r) == (BLS_Q, BLS_R)
    assert is_probable_prime(q) and is_probable_prime(r)
    assert q.bit_length() == 381 and r.bit_length() == 255
    c = {"FQ": _field(q), "FR": _field(r)}
    assert c["FQ"]["LIMBS"] == 6 and c["FR"]["LIMBS"] == 4
    assert q % 4 == 3  # Fq2 = Fq[u]/(u^2 + 1)
    c["G1_B"] = 4
    c["G2_B"] = (4, 4)  # 4 (1 + u): the M-type sextic twist
    F1, F2 = _Fq(q), _Fq2(q)
    assert _on_curve(F1, BLS_G1, 4) and _on_curve(F2, BLS_G2, (4, 4))
    assert _order_divides(F1, BLS_G1, r) and _order_divides(F2, BLS_G2, r)
    _add_domain(c, r, 32)
    c["GLV"] = _glv(q, r, BLS_G1)
    c["PAIRING"] = _pairing(q, "bls12", "M", 1, x, x)
    return c


def hx(v):
    return "0x%016xULL" % v


def limb_list(x, n=4):
    return "{" + ", ".join(hx(v) for v in limbs(x, n)) + "}"


CURVES = {
    # name: (compute, macro prefix, header, title)
    "bn254": (compute_bn254, "CUZK", HEADER, "BN254"),
    "bls12_381": (compute_bls12_381, "CUZK_BLS12_381", BLS_HEADER, "BLS12-381"),
}


def render(curve="bn254"):
    fn, pfx, header, title = CURVES[curve]
    c = fn()
    guard = "CUZK_%s_CONSTANTS_CUH" % curve.upper()
    q, r = c["FQ"]["MOD"], c["FR"]["MOD"]
    nq, nr = c["FQ"]["LIMBS"], c["FR"]["LIMBS"]
    out = []
    w = out.append
    w("// DO NOT EDIT: generated by tools/gen_curve_constants.py from the %s moduli." % title)
    w("// Regenerate with:  python tools/gen_curve_constants.py")
    w("// Check with:       python tools/gen_curve_constants.py --check")
    w("//")
    w("// Multi-limb values are 64-bit limbs, little-endian (limb 0 least significant):")
    w("// Fq %d limbs, Fr %d limbs.  \"Montgomery\" means x * 2^(64 * limbs) mod p.  Each" % (nq, nr))
    w("// value is given limb by limb and as a comma list (<NAME>_LIMBS).  Plain macros only,")
    w("// so that host C++, nvcc and NVRTC can all consume this file.")
    w("#ifndef %s" % guard)
    w("#define %s" % guard)
    w("")

    def value(name, x, n):
        for i, v in enumerate(limbs(x, n)):
            w("#define %s%s %s" % (name, i, hx(v)))
        w("#define %sLIMBS %s" % (name if name.endswith("_") else name + "_", ", ".join(hx(v) for v in limbs(x, n))))

    for name, label in (("FQ", "base field Fq"), ("FR", "scalar field Fr")):
        d = c[name]
        n = d["LIMBS"]
        P = "%s_%s" % (pfx, name)
        w("// ---- %s ----" % label)
        w("// p = %d" % d["MOD"])
        w("#define %s_LIMBS %d" % (P, n))
        w("#define %s_BITS %d" % (P, d["BITS"]))
        value(P + "_P", d["MOD"], n)
        w("// one in Montgomery form: 2^%d mod p" % (64 * n))
        value(P + "_ONE", d["ONE"], n)
        w("// 2^%d mod p (to convert into Montgomery form)" % (128 * n))
        value(P + "_R2_", d["R2"], n)
        w("// -p^-1 mod 2^64")
        w("#define %s_INV %s" % (P, hx(d["INV"])))
        w("")
    w("// ---- curves: y^2 = x^3 + b ----")
    w("// G1 over Fq, b = %d (Montgomery)" % c["G1_B"])
    value(pfx + "_G1_B", to_mont(c["G1_B"], q), nq)
    b2 = c["G2_B"]
    if curve == "bn254":
        w("// G2 over Fq2 = Fq[u]/(u^2+1), b' = 3/(9+u) (Montgomery)")
    else:
        w("// G2 over Fq2 = Fq[u]/(u^2+1), b' = 4(1+u) (Montgomery)")
    w("//   c0 = %d" % b2[0])
    w("//   c1 = %d" % b2[1])
    value(pfx + "_G2_B_C0_", to_mont(b2[0], q), nq)
    value(pfx + "_G2_B_C1_", to_mont(b2[1], q), nq)
    w("")
    m = c["MAX_LOG2"]
    w("// ---- Fr roots of unity (snarkjs / ffjavascript convention) ----")
    w("// nqr = %d (smallest quadratic non-residue >= 2)" % c["NQR"])
    w("// w%d = nqr^((r-1)/2^%d) = %d" % (m, m, c["ROOTS"][m]))
    w("// ROOTS[k] = w%d^(2^(%d-k)), a primitive 2^k-th root of unity, k = 0..%d" % (m, m, m))
    w("#define %s_FR_MAX_LOG2 %d" % (pfx, m))
    for key, doc in (("ROOTS", "ROOTS[k] (Montgomery)"),
                     ("ROOTS_INV", "ROOTS[k]^-1 (Montgomery)"),
                     ("INV_2K", "(2^k)^-1 (Montgomery)")):
        w("// %s, as an initializer for uint64_t[%d][%d]" % (doc, m + 1, nr))
        w("#define %s_FR_%s_MONT { \\" % (pfx, key))
        vals = c[key]
        for k, v in enumerate(vals):
            sep = "," if k < len(vals) - 1 else ""
            w("    %s%s /* k=%d */ \\" % (limb_list(to_mont(v, r), nr), sep, k))
        w("}")
    w("")
    _render_glv(w, value, pfx, c["GLV"], q, nq)
    w("")
    _render_pairing(w, value, pfx, c["PAIRING"], q, nq)
    w("")
    w("#endif  // %s" % guard)
    return "\n".join(out) + "\n"


def _render_glv(w, value, pfx, d, q, nq):
    """The GLV section of a header (see _glv)."""
    w("// ---- G1 endomorphism (msm_cpu.hpp's GLV split) ----")
    w("// phi(x, y) = (beta x, y) = lambda (x, y) on G1; beta^3 = 1 in Fq, lambda^3 = 1 in Fr")
    w("// lambda = %d" % d["LAMBDA"])
    value(pfx + "_GLV_BETA_", to_mont(d["BETA"], q), nq)
    w("// k = k1 + k2 lambda (mod r): c1 = floor(k g1 / 2^256), c2 = floor(k g2 / 2^256),")
    w("// k1 = k - c1 a1 - c2 a2, k2 = -c1 b1 - c2 b2, |k1|, |k2| < 2^%d" % d["BITS"])
    w("#define %s_GLV_BITS %d" % (pfx, d["BITS"]))
    for key in ("A1", "B1", "A2", "B2", "G1", "G2"):
        v = d[key]
        w("// %s = %d" % (key.lower(), v))
        if key[0] in "AB":
            w("#define %s_GLV_%s_NEG %d" % (pfx, key, 1 if v < 0 else 0))
        value(pfx + "_GLV_%s_" % key, abs(v), 4)


def _render_pairing(w, value, pfx, d, q, nq):
    """The pairing section of a header (see _pairing)."""
    k = d["XI_K"]
    w("// ---- pairing (pairing.hpp): tower, loop parameters, Frobenius ----")
    w("// Fq6 = Fq2[v]/(v^3 - xi), Fq12 = Fq6[w]/(w^2 - v), xi = %d + u" % k)
    w("#define %s_XI_K %d" % (pfx, k))
    w("// %s family; %s-type twist (G2 b' = b %s xi)"
      % (d["FAMILY"].upper(), d["TWIST"], "/" if d["TWIST"] == "D" else "*"))
    w("#define %s_PAIRING_BN %d" % (pfx, 1 if d["FAMILY"] == "bn" else 0))
    w("#define %s_TWIST_M %d" % (pfx, 1 if d["TWIST"] == "M" else 0))
    for key, name, val in (("ATE", "Miller loop parameter", d["ATE"]),
                           ("X", "curve parameter x (final exponentiation)", d["X"])):
        digits = d[key + "_NAF"]
        w("// %s = %d: sign, then |value| in NAF, most significant digit first" % (name, val))
        w("#define %s_%s_NEG %d" % (pfx, key, 1 if val < 0 else 0))
        w("#define %s_%s_NAF_LEN %d" % (pfx, key, len(digits)))
        w("#define %s_%s_NAF {%s}" % (pfx, key, ", ".join(str(x) for x in digits)))
    w("// FROB[n-1][k] = xi^(k (q^n - 1)/6) (Fq2, c0 then c1, Montgomery), as an")
    w("// initializer for uint64_t[3][6][%d]" % (2 * nq))
    w("#define %s_FQ12_FROB_MONT { \\" % pfx)
    for n, row in enumerate(d["FROB"]):
        w("    { \\")
        for kk, (c0, c1) in enumerate(row):
            sep = "," if kk < 5 else ""
            w("        {%s}%s /* n=%d k=%d */ \\" % (
                ", ".join(hx(v) for v in limbs(to_mont(c0, q), nq) + limbs(to_mont(c1, q), nq)),
                sep, n + 1, kk))
        w("    }%s \\" % ("," if n < 2 else ""))
    w("}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a checked-in header differs")
    ap.add_argument("--stdout", action="store_true", help="print instead of writing")
    ap.add_argument("--curve", choices=sorted(CURVES) + ["all"], default="all",
                    help="which header (default: all; with --output: bn254)")
    ap.add_argument("--output", help="header path (one curve only; default: the checked-in header)")
    args = ap.parse_args(argv)
    curves = sorted(CURVES) if args.curve == "all" else [args.curve]
    if args.output and args.curve == "all":
        curves = ["bn254"]
    status = 0
    for curve in curves:
        text = render(curve)
        path = os.path.normpath(args.output or CURVES[curve][2])
        if args.stdout:
            sys.stdout.write(text)
            continue
        if args.check:
            try:
                with open(path, "r", encoding="utf-8") as fh:
                    current = fh.read()
            except FileNotFoundError:
                print("%s: missing (run python tools/gen_curve_constants.py)" % path, file=sys.stderr)
                status = 1
                continue
            if current != text:
                print("%s: stale (run python tools/gen_curve_constants.py)" % path, file=sys.stderr)
                status = 1
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
