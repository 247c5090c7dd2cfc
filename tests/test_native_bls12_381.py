"""Differential tests of the native core on BLS12-381 (``curve="bls12381"``) against plain
Python integer arithmetic written here, and, where it is there (cuzk_tasks.groth16.curves
with the curve-generic reference oracle), against that oracle too.

Fq is 381 bits (6 limbs, R = 2^384), Fr 255 bits (4 limbs, R = 2^256), Fq2 = Fq[u]/(u^2+1),
G1: y^2 = x^3 + 4, G2: y^2 = x^3 + 4(1+u).  The NTT roots are ffjavascript's: 5 is the
smallest quadratic non-residue mod r, w_32 = 5^((r-1)/2^32).
"""

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk_tasks.errors import NativeCoreError
from cuzk_tasks.groth16.backends import native as N

CURVE = "bls12381"
Q = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
RQ, RR = 1 << 384, 1 << 256  # Montgomery radices
G1_GEN = (0x17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb,
          0x08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1)
G2_GEN = ((0x024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8,
           0x13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e),
          (0x0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801,
           0x0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be))

# ---------------------------------------------------------------------------- Python math


def fq2_mul(a, b):
    return ((a[0] * b[0] - a[1] * b[1]) % Q, (a[0] * b[1] + a[1] * b[0]) % Q)


def fq2_inv(a):
    if a == (0, 0):
        return (0, 0)
    ni = pow(a[0] * a[0] + a[1] * a[1], -1, Q)
    return (a[0] * ni % Q, -a[1] * ni % Q)


class Fp:
    """Fq (or Fr) as plain ints."""

    def __init__(self, m):
        self.m = m
        self.zero, self.one = 0, 1

    def add(self, a, b):
        return (a + b) % self.m

    def sub(self, a, b):
        return (a - b) % self.m

    def mul(self, a, b):
        return a * b % self.m

    def inv(self, a):
        return pow(a, -1, self.m) if a else 0

    def const(self, k):
        return k % self.m


class Fp2:
    zero, one = (0, 0), (1, 0)

    def add(self, a, b):
        return ((a[0] + b[0]) % Q, (a[1] + b[1]) % Q)

    def sub(self, a, b):
        return ((a[0] - b[0]) % Q, (a[1] - b[1]) % Q)

    def mul(self, a, b):
        return fq2_mul(a, b)

    def inv(self, a):
        return fq2_inv(a)

    def const(self, k):
        return (k % Q, 0)


class PyCurve:
    """Affine y^2 = x^3 + b over F; None is the point at infinity."""

    def __init__(self, F, b, generator):
        self.F, self.b, self.generator = F, b, generator

    def on_curve(self, p):
        F = self.F
        return p is None or F.mul(p[1], p[1]) == F.add(F.mul(F.mul(p[0], p[0]), p[0]), self.b)

    def neg(self, p):
        return None if p is None else (p[0], self.F.sub(self.F.zero, p[1]))

    def add(self, p, q):
        F = self.F
        if p is None or q is None:
            return q if p is None else p
        if p[0] == q[0]:
            if p[1] != q[1] or p[1] == F.zero:
                return None
            lam = F.mul(F.mul(F.const(3), F.mul(p[0], p[0])), F.inv(F.add(p[1], p[1])))
        else:
            lam = F.mul(F.sub(q[1], p[1]), F.inv(F.sub(q[0], p[0])))
        x3 = F.sub(F.sub(F.mul(lam, lam), p[0]), q[0])
        return (x3, F.sub(F.mul(lam, F.sub(p[0], x3)), p[1]))

    def double(self, p):
        return self.add(p, p)

    def mul(self, p, k):
        acc = None
        while k:
            if k & 1:
                acc = self.add(acc, p)
            p = self.add(p, p)
            k >>= 1
        return acc

    def msm(self, pts, scalars):
        acc = None
        for p, s in zip(pts, scalars):
            acc = self.add(acc, self.mul(p, s % R))
        return acc


FQ_, FR_, FQ2_ = Fp(Q), Fp(R), Fp2()
G1 = PyCurve(FQ_, 4, G1_GEN)
G2 = PyCurve(FQ2_, (4, 4), G2_GEN)

# ffjavascript's roots of unity of Fr, from first principles
NQR = next(a for a in range(2, 100) if pow(a, (R - 1) // 2, R) == R - 1)
S = 32
W_MAX = pow(NQR, (R - 1) >> S, R)


def root(k):
    return pow(W_MAX, 1 << (S - k), R)


def naive_ntt(v, w):
    n = len(v)
    return [sum(v[j] * pow(w, i * j, R) for j in range(n)) % R for i in range(n)]


def naive_intt(v, log_n):
    n = 1 << log_n
    ninv = pow(n, -1, R)
    return [x * ninv % R for x in naive_ntt(v, pow(root(log_n), -1, R))]


def naive_h(a, b, log_n):
    """snarkjs's H: A, B, C = A*B interpolated on the domain, evaluated on the odd coset
    g w^i (g = root(log_n + 1)); h_i = A'B' - C'."""
    n = 1 << log_n
    c = [x * y % R for x, y in zip(a, b)]
    g, w = root(log_n + 1), root(log_n)
    out = []
    coefs = [naive_intt(v, log_n) for v in (a, b, c)]
    for i in range(n):
        x = g * pow(w, i, R) % R
        ev = [sum(cf[j] * pow(x, j, R) for j in range(n)) % R for cf in coefs]
        out.append((ev[0] * ev[1] - ev[2]) % R)
    return out


# ---------------------------------------------------------------------------- limbs


def to_limbs(x, n):
    return [(x >> (64 * i)) & (2**64 - 1) for i in range(n)]


def from_limbs(row):
    return sum(int(v) << (64 * i) for i, v in enumerate(row))


def arr(values, n=4):
    return np.array([to_limbs(v, n) for v in values], dtype=np.uint64).reshape(-1, n)


def ints(a):
    return [from_limbs(r) for r in np.asarray(a).reshape(len(a), -1)]


FIELDS = {  # name: (field id, limbs, python field, to-Montgomery of a Python value)
    "Fr": (N.FIELD_FR, 4, FR_, lambda x: [x * RR % R]),
    "Fq": (N.FIELD_FQ, 6, FQ_, lambda x: [x * RQ % Q]),
    "Fq2": (N.FIELD_FQ2, 12, FQ2_, lambda x: [x[0] * RQ % Q, x[1] * RQ % Q]),
}


def mont_rows(name, values):
    _, width, _, tm = FIELDS[name]
    per = width // len(tm(FIELDS[name][2].zero))
    return np.array([sum((to_limbs(c, per) for c in tm(v)), []) for v in values],
                    dtype=np.uint64).reshape(-1, width)


def from_mont_rows(name, a):
    _, width, _, tm = FIELDS[name]
    if name == "Fr":
        return [from_limbs(r) * pow(RR, -1, R) % R for r in a]
    if name == "Fq":
        return [from_limbs(r) * pow(RQ, -1, Q) % Q for r in a]
    return [(from_limbs(r[:6]) * pow(RQ, -1, Q) % Q, from_limbs(r[6:]) * pow(RQ, -1, Q) % Q) for r in a]


def fq_m(x):
    return to_limbs(x * RQ % Q, 6)


def g1_row(p):
    return np.zeros(12, dtype=np.uint64) if p is None else np.array(fq_m(p[0]) + fq_m(p[1]), dtype=np.uint64)


def g2_row(p):
    if p is None:
        return np.zeros(24, dtype=np.uint64)
    return np.array(fq_m(p[0][0]) + fq_m(p[0][1]) + fq_m(p[1][0]) + fq_m(p[1][1]), dtype=np.uint64)


def g1_rows(pts):
    return np.array([g1_row(p) for p in pts], dtype=np.uint64).reshape(-1, 12)


def g2_rows(pts):
    return np.array([g2_row(p) for p in pts], dtype=np.uint64).reshape(-1, 24)


def _fq(limbs):
    return from_limbs(limbs) * pow(RQ, -1, Q) % Q


def g1_from_row(row):
    row = [int(v) for v in row]
    if not any(row):
        return None
    return (_fq(row[:6]), _fq(row[6:12]))


def g2_from_row(row):
    row = [int(v) for v in row]
    if not any(row):
        return None
    return ((_fq(row[:6]), _fq(row[6:12])), (_fq(row[12:18]), _fq(row[18:24])))


def g1_from_jac(j):
    """Jacobian (18 limbs) -> affine, in Python."""
    X, Y, Z = (_fq([int(v) for v in j[6 * i:6 * i + 6]]) for i in range(3))
    if Z == 0:
        return None
    zi = pow(Z, -1, Q)
    return (X * zi * zi % Q, Y * zi * zi * zi % Q)


def g2_from_jac(j):
    c = [_fq([int(v) for v in j[6 * i:6 * i + 6]]) for i in range(6)]
    X, Y, Z = (c[0], c[1]), (c[2], c[3]), (c[4], c[5])
    if Z == (0, 0):
        return None
    zi = fq2_inv(Z)
    zi2 = fq2_mul(zi, zi)
    return (fq2_mul(X, zi2), fq2_mul(Y, fq2_mul(zi2, zi)))


def g1_msm(pts, scalars, threads=2):
    return g1_from_jac(N.g1_msm(g1_rows(pts), arr(scalars), threads=threads, curve=CURVE))


def g2_msm(pts, scalars, threads=2):
    return g2_from_jac(N.g2_msm(g2_rows(pts), arr(scalars), threads=threads, curve=CURVE))


# ---------------------------------------------------------------------------- sanity of the test's own math


def test_python_math_is_the_curve():
    assert G1.on_curve(G1_GEN) and G2.on_curve(G2_GEN)
    assert G1.mul(G1_GEN, R) is None and G2.mul(G2_GEN, R) is None
    assert G1.mul(G1_GEN, R - 1) == G1.neg(G1_GEN)
    assert NQR == 5 and pow(W_MAX, 1 << 31, R) == R - 1
    assert N.fq_limbs(CURVE) == 6 and N.fq_limbs() == 4


# ---------------------------------------------------------------------------- fields

BINARY = {N.OP_ADD: "add", N.OP_SUB: "sub", N.OP_MUL: "mul"}


def _edge(name):
    F = FIELDS[name][2]
    if name == "Fq2":
        e = [0, 1, 2, Q - 1, Q - 2, (Q - 1) // 2, RQ % Q, 2**380 % Q]
        return [(a, b) for a in e for b in (0, 1, Q - 1, 2**64 - 1)]
    m = F.m
    big = RQ if name == "Fq" else RR
    return [0, 1, 2, m - 1, m - 2, (m - 1) // 2, (m + 1) // 2, big % m, 2**(m.bit_length() - 1), 2**64 - 1]


def _check_field_ops(name, xs, ys):
    fid, _, F, _ = FIELDS[name]
    ma, mb = mont_rows(name, xs), mont_rows(name, ys)
    for op, fn in BINARY.items():
        got = from_mont_rows(name, N.field_op(fid, op, ma, mb, curve=CURVE))
        assert got == [getattr(F, fn)(a, b) for a, b in zip(xs, ys)], (name, fn)
    unary = {
        N.OP_SQR: lambda a: F.mul(a, a),
        N.OP_INV: F.inv,
        N.OP_NEG: lambda a: F.sub(F.zero, a),
        N.OP_DBL: lambda a: F.add(a, a),
    }
    for op, fn in unary.items():
        assert from_mont_rows(name, N.field_op(fid, op, ma, curve=CURVE)) == [fn(a) for a in xs], (name, op)
    inv = from_mont_rows(name, N.field_op(fid, N.OP_INV, ma, curve=CURVE))
    for a, ai in zip(xs, inv):
        assert F.mul(a, ai) == (F.zero if a in (0, (0, 0)) else F.one)


@pytest.mark.parametrize("name", FIELDS)
def test_field_ops_on_edge_values(name):
    edge = _edge(name)
    xs = [a for a in edge for _ in edge]
    ys = [b for _ in edge for b in edge]
    _check_field_ops(name, xs, ys)


def _elements(name):
    if name == "Fq2":
        c = st.integers(min_value=0, max_value=Q - 1)
        return st.tuples(c, c)
    return st.integers(min_value=0, max_value=FIELDS[name][2].m - 1)


@pytest.mark.parametrize("name", FIELDS)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_field_ops_random(name, data):
    xs = data.draw(st.lists(_elements(name), min_size=1, max_size=30))
    ys = data.draw(st.lists(_elements(name), min_size=len(xs), max_size=len(xs)))
    _check_field_ops(name, xs, ys)


@pytest.mark.parametrize("name", FIELDS)
def test_montgomery_conversions(name):
    fid, width, F, _ = FIELDS[name]
    rnd = random.Random(5)
    if name == "Fq2":
        xs = _edge(name) + [(rnd.randrange(Q), rnd.randrange(Q)) for _ in range(50)]
        std = np.array([to_limbs(a, 6) + to_limbs(b, 6) for a, b in xs], dtype=np.uint64)
    else:
        xs = _edge(name) + [rnd.randrange(F.m) for _ in range(100)]
        std = arr(xs, width)
    mt = N.to_mont(fid, std, curve=CURVE)
    assert np.array_equal(mt, mont_rows(name, xs))
    assert np.array_equal(N.from_mont(fid, mt, curve=CURVE), std)
    if name == "Fr":
        assert np.array_equal(N.fr_to_mont(std, curve=CURVE), mt)
        assert np.array_equal(N.fr_from_mont(mt, curve=CURVE), std)
    if name == "Fq":
        assert np.array_equal(N.fq_to_mont(std, curve=CURVE), mt)
        assert np.array_equal(N.fq_from_mont(mt, curve=CURVE), std)


def test_noncanonical_inputs_and_bad_arguments_are_rejected():
    with pytest.raises(NativeCoreError, match="canonical"):
        N.field_op(N.FIELD_FR, N.OP_ADD, arr([R]), arr([0]), curve=CURVE)
    with pytest.raises(NativeCoreError, match="canonical"):
        N.fq_to_mont(arr([Q], 6), curve=CURVE)
    # a BN254 modulus is a canonical BLS12-381 Fr element, and the other way round not
    bn_r = 21888242871839275222246405745257275088548364400416034343698204186575808495617
    N.field_op(N.FIELD_FR, N.OP_ADD, arr([bn_r]), arr([0]), curve=CURVE)
    with pytest.raises(NativeCoreError, match="canonical"):
        N.field_op(N.FIELD_FR, N.OP_ADD, arr([bn_r]), arr([0]))
    with pytest.raises(NativeCoreError, match="canonical"):
        N.field_op(N.FIELD_FQ2, N.OP_NEG, np.array([to_limbs(1, 6) + to_limbs(Q, 6)], dtype=np.uint64),
                   curve=CURVE)
    with pytest.raises(NativeCoreError, match="canonical"):
        N.g1_msm(np.full((1, 12), 2**64 - 1, dtype=np.uint64), arr([1]), curve=CURVE)
    with pytest.raises(ValueError, match="unknown curve"):
        N.fr_ntt(arr([1]), curve="bls12_377")
    with pytest.raises(ValueError):  # BN254-shaped bases on BLS12-381
        N.g1_msm(np.zeros((3, 8), dtype=np.uint64), arr([1, 2, 3]), curve=CURVE)
    with pytest.raises(ValueError):
        N.field_op(N.FIELD_FQ, N.OP_NEG, arr([1], 4), curve=CURVE)


def test_the_native_abi_rejects_an_unknown_curve_id():
    x = arr([1])
    out = np.zeros_like(x)
    p = x.ctypes.data_as(N._u64p)
    assert N.lib().cuzk_field_op(2, N.FIELD_FR, N.OP_ADD, p, p, out.ctypes.data_as(N._u64p), 1) == 2
    assert N.lib().cuzk_field_op(-1, N.FIELD_FR, N.OP_ADD, p, p, out.ctypes.data_as(N._u64p), 1) == 2


# ---------------------------------------------------------------------------- curve ops


@pytest.fixture(scope="module")
def g1_points():
    rnd = random.Random(11)
    return [G1.mul(G1_GEN, rnd.randrange(1, R)) for _ in range(16)]


@pytest.fixture(scope="module")
def g2_points():
    rnd = random.Random(12)
    return [G2.mul(G2_GEN, rnd.randrange(1, R)) for _ in range(5)]


SCALARS = (0, 1, 2, 12345, R - 1, R - 2, R, 2**255 - 1, 2**256 - 1)


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_point_ops(group, g1_points, g2_points):
    C, pts, row, back, op, check = {
        "G1": (G1, g1_points, g1_row, g1_from_row, N.g1_point_op, N.g1_check_points),
        "G2": (G2, g2_points, g2_row, g2_from_row, N.g2_point_op, N.g2_check_points),
    }[group]
    p, q = pts[0], pts[1]
    rp, rq, inf = row(p), row(q), row(None)

    def run(o, a, b=None):
        return back(op(o, a, b, curve=CURVE))

    assert run(N.POINT_ADD, rp, rq) == C.add(p, q)
    assert run(N.POINT_ADD, rp, rp) == C.double(p)
    assert run(N.POINT_ADD, rp, row(C.neg(p))) is None
    assert run(N.POINT_ADD, rp, inf) == p
    assert run(N.POINT_ADD, inf, rq) == q
    assert run(N.POINT_ADD, inf, inf) is None
    assert run(N.POINT_DBL, rp) == C.double(p)
    assert run(N.POINT_DBL, inf) is None
    assert run(N.POINT_NEG, rp) == C.neg(p)
    assert run(N.POINT_NEG, inf) is None
    for k in SCALARS:
        want = C.mul(p, k)
        assert run(N.POINT_MUL, rp, np.array(to_limbs(k, 4), dtype=np.uint64)) == want, k
        assert C.on_curve(want)
    assert run(N.POINT_MUL, row(C.generator), np.array(to_limbs(R, 4), dtype=np.uint64)) is None
    check(np.array([row(x) for x in pts + [None]], dtype=np.uint64), curve=CURVE)
    with pytest.raises(NativeCoreError, match="point 1"):
        if group == "G1":
            bad = (p[0], (p[1] + 1) % Q)
        else:
            bad = (p[0], (p[1][0], (p[1][1] + 1) % Q))
        check(np.array([row(p), row(bad)], dtype=np.uint64), curve=CURVE)


def test_check_points_uses_this_curves_b(g1_points, g2_points):
    """A point on y^2 = x^3 + 3 (BN254's b) is not on BLS12-381's G1, and G2's b is 4(1+u)."""
    x = 5
    while pow((x**3 + 3) % Q, (Q - 1) // 2, Q) != 1:
        x += 1
    y2 = (x**3 + 3) % Q
    y = pow(y2, (Q + 1) // 4, Q)  # Q = 3 mod 4
    assert y * y % Q == y2
    with pytest.raises(NativeCoreError, match="not on the curve"):
        N.g1_check_points(g1_row((x, y)).reshape(1, -1), curve=CURVE)
    N.g2_check_points(g2_row(g2_points[0]).reshape(1, -1), curve=CURVE)
    # (x, y) over Fq with y^2 = x^3 + 4 is on G1's curve, not on the twist (b = 4(1+u))
    x = 1
    while pow((x**3 + 4) % Q, (Q - 1) // 2, Q) != 1:
        x += 1
    y = pow((x**3 + 4) % Q, (Q + 1) // 4, Q)
    N.g1_check_points(g1_row((x, y)).reshape(1, -1), curve=CURVE)
    with pytest.raises(NativeCoreError, match="not on the curve"):
        N.g2_check_points(g2_row(((x, 0), (y, 0))).reshape(1, -1), curve=CURVE)


def test_to_affine_from_jacobian(g1_points, g2_points):
    p = g1_points[3]
    z = 5
    jac = np.array(fq_m(p[0] * z * z % Q) + fq_m(p[1] * z**3 % Q) + fq_m(z), dtype=np.uint64)
    assert g1_from_row(N.g1_to_affine(jac, curve=CURVE)) == p
    assert g1_from_row(N.g1_to_affine(np.zeros(18, dtype=np.uint64), curve=CURVE)) is None
    q = g2_points[0]
    zz = (3, 7)
    z2 = fq2_mul(zz, zz)
    X, Y = fq2_mul(q[0], z2), fq2_mul(q[1], fq2_mul(z2, zz))
    jac2 = np.array(fq_m(X[0]) + fq_m(X[1]) + fq_m(Y[0]) + fq_m(Y[1]) + fq_m(zz[0]) + fq_m(zz[1]),
                    dtype=np.uint64)
    assert g2_from_row(N.g2_to_affine(jac2, curve=CURVE)) == q


# ---------------------------------------------------------------------------- MSM

EDGE_SCALARS = [0, 1, 2, R - 1, R - 2, (R - 1) // 2, 2**254, 2**128 - 1, 2**64, 2**64 - 1]


def scalar_strategy():
    return st.one_of(st.sampled_from(EDGE_SCALARS), st.integers(min_value=0, max_value=R - 1))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_g1_msm_small_random(g1_points, data):
    n = data.draw(st.integers(min_value=1, max_value=10))
    idx = data.draw(st.lists(st.integers(min_value=-1, max_value=len(g1_points) - 1), min_size=n, max_size=n))
    pts = [None if i < 0 else g1_points[i] for i in idx]  # repeats and infinity included
    scalars = data.draw(st.lists(scalar_strategy(), min_size=n, max_size=n))
    threads = data.draw(st.sampled_from([1, 2, 3]))
    assert g1_msm(pts, scalars, threads) == G1.msm(pts, scalars)


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_g2_msm_small_random(g2_points, data):
    n = data.draw(st.integers(min_value=1, max_value=4))
    idx = data.draw(st.lists(st.integers(min_value=-1, max_value=len(g2_points) - 1), min_size=n, max_size=n))
    pts = [None if i < 0 else g2_points[i] for i in idx]
    scalars = data.draw(st.lists(scalar_strategy(), min_size=n, max_size=n))
    assert g2_msm(pts, scalars) == G2.msm(pts, scalars)


def test_msm_degenerate_inputs(g1_points, g2_points):
    for C, msm, p in ((G1, g1_msm, g1_points[0]), (G2, g2_msm, g2_points[0])):
        assert msm([p], [0]) is None
        assert msm([p], [1]) == p
        assert msm([p], [R - 1]) == C.neg(p)
        assert msm([p], [R]) is None  # scalars are reduced mod r
        assert msm([p], [R + 3]) == C.mul(p, 3)
        assert msm([p], [2**256 - 1]) == C.mul(p, (2**256 - 1) % R)
        assert msm([None, None], [5, 7]) is None
        assert msm([p, C.neg(p)], [9, 9]) is None
        assert msm([p, None, p], [1, 5, R - 1]) is None
    assert g1_from_jac(N.g1_msm(np.zeros((0, 12), dtype=np.uint64), arr([]), curve=CURVE)) is None


def progression(C, start, step, n):
    p, q = C.mul(C.generator, start), C.mul(C.generator, step)
    out = []
    for _ in range(n):
        out.append(p)
        p = C.add(p, q)
    return out


def progression_expected(C, start, step, scalars):
    return C.mul(C.generator, sum(s * (start + i * step) for i, s in enumerate(scalars)) % R)


def _scalar_sets(n, rnd):
    return {
        "random": [rnd.randrange(R) for _ in range(n)],
        "edge": [rnd.choice(EDGE_SCALARS) for _ in range(n)],
        "all_equal": [R - 7] * n,
        "all_zero": [0] * n,
        "small": [rnd.randrange(4) for _ in range(n)],
        "bits_and_negatives": [rnd.choice([0, 1, R - 1, rnd.randrange(R)]) for _ in range(n)],
        "top_bit": [rnd.randrange(2**254, R) for _ in range(n)],  # 255-bit scalars
    }


@pytest.fixture(scope="module")
def g1_progression():
    return progression(G1, 987654321, 1234567, 2100)


@pytest.mark.parametrize("n", [1, 33, 600, 2100])
def test_g1_msm_large(g1_progression, n):
    rnd = random.Random(n)
    bases = g1_rows(g1_progression[:n])
    for name, scalars in _scalar_sets(n, rnd).items():
        want = progression_expected(G1, 987654321, 1234567, scalars)
        for threads in (1, 3):
            got = g1_from_jac(N.g1_msm(bases, arr(scalars), threads=threads, curve=CURVE))
            assert got == want, (n, name, threads)


@pytest.mark.parametrize("window", [2, 5, 15, 17])
def test_g1_msm_forced_window_sizes(g1_progression, monkeypatch, window):
    """Every recoding width agrees, including widths dividing 255 (5, 15, 17)."""
    monkeypatch.setenv("CUZK_MSM_WINDOW", str(window))
    rnd = random.Random(window)
    n = 700
    bases = g1_rows(g1_progression[:n])
    for name, scalars in _scalar_sets(n, rnd).items():
        got = g1_from_jac(N.g1_msm(bases, arr(scalars), threads=2, curve=CURVE))
        assert got == progression_expected(G1, 987654321, 1234567, scalars), (window, name)


def test_g1_msm_with_infinity_and_repeated_bases(g1_progression):
    rnd = random.Random(3)
    n = 1500
    pts = [g1_progression[i % 40] if i % 7 else None for i in range(n)]
    scalars = [rnd.randrange(R) for _ in range(n)]
    k = sum(s * (987654321 + (i % 40) * 1234567) for i, s in enumerate(scalars) if i % 7) % R
    assert g1_msm(pts, scalars, 2) == G1.mul(G1_GEN, k)
    same = [g1_progression[0]] * 900
    sc = [rnd.choice([1, 2, R - 1, 5]) for _ in range(900)]
    assert g1_msm(same, sc, 2) == G1.mul(g1_progression[0], sum(sc) % R)


@pytest.fixture(scope="module")
def g2_progression():
    return progression(G2, 424242, 777, 300)


@pytest.mark.parametrize("n", [2, 300])
def test_g2_msm_large(g2_progression, n):
    rnd = random.Random(n)
    bases = g2_rows(g2_progression[:n])
    sets = _scalar_sets(n, rnd)
    for name in ("random", "edge", "all_equal", "small", "top_bit"):
        want = progression_expected(G2, 424242, 777, sets[name])
        assert g2_from_jac(N.g2_msm(bases, arr(sets[name]), threads=2, curve=CURVE)) == want, (n, name)


# ---------------------------------------------------------------------------- NTT


def mont_fr(values):
    return arr([v * RR % R for v in values])


def from_mont_fr(a):
    return [v * pow(RR, -1, R) % R for v in ints(a)]


@pytest.mark.parametrize("log_n", range(0, 7))
def test_ntt_matches_naive_dft(log_n):
    rnd = random.Random(log_n)
    n = 1 << log_n
    v = [rnd.randrange(R) for _ in range(n)]
    if n > 1:
        v[0], v[-1] = R - 1, 0
    m = mont_fr(v)
    fwd = N.fr_ntt(m, threads=2, curve=CURVE)
    assert from_mont_fr(fwd) == naive_ntt(v, root(log_n))
    assert from_mont_fr(N.fr_ntt(m, inverse=True, curve=CURVE)) == naive_intt(v, log_n)
    assert np.array_equal(N.fr_ntt(fwd, inverse=True, curve=CURVE), m)


@pytest.mark.parametrize("log_n,threads", [(12, 1), (14, 2), (15, 3)])
def test_ntt_round_trip_large(log_n, threads):
    rng = np.random.default_rng(log_n)
    x = rng.integers(0, 2**64, size=(1 << log_n, 4), dtype=np.uint64)
    x[:, 3] &= np.uint64((1 << 62) - 1)  # < r (r's top limb is 0x73ed...)
    y = N.fr_ntt(x, threads=threads, curve=CURVE)
    assert not np.array_equal(x, y)
    assert np.array_equal(N.fr_ntt(y, inverse=True, threads=threads, curve=CURVE), x)
    d = np.zeros_like(x)
    d[1] = to_limbs(RR % R, 4)
    w = root(log_n)
    got = from_mont_fr(N.fr_ntt(d, threads=threads, curve=CURVE))
    assert got[:5] == [pow(w, i, R) for i in range(5)]
    assert got[-1] == pow(w, (1 << log_n) - 1, R)


def test_ntt_rejects_noncanonical_values():
    with pytest.raises(NativeCoreError, match="canonical"):
        N.fr_ntt(arr([R, 0]), curve=CURVE)


# ---------------------------------------------------------------------------- QAP


@pytest.mark.parametrize("log_n", [0, 1, 2, 3, 4])
def test_compute_h_matches_python(log_n):
    rnd = random.Random(100 + log_n)
    n = 1 << log_n
    a = [rnd.randrange(R) for _ in range(n)]
    b = [rnd.randrange(R) for _ in range(n)]
    h = N.compute_h(mont_fr(a), mont_fr(b), threads=2, curve=CURVE)
    assert ints(h) == naive_h(a, b, log_n)


def _records(entries):
    raw = b"".join(struct.pack("<III", m, c, s) + (coef * RR * RR % R).to_bytes(32, "little")
                   for m, c, s, coef in entries)
    return np.frombuffer(raw, dtype=np.uint8)


def test_evaluate_ab_then_h():
    rnd = random.Random(21)
    n_vars, domain = 30, 32
    witness = [1] + [rnd.choice([0, 1, R - 1, rnd.randrange(R)]) for _ in range(n_vars - 1)]
    entries = [(rnd.randrange(2), rnd.randrange(domain), rnd.randrange(n_vars),
                rnd.choice([1, R - 1, rnd.randrange(R)])) for _ in range(200)]
    want_a, want_b = [0] * domain, [0] * domain
    for m, c, s, coef in entries:
        tgt = want_a if m == 0 else want_b
        tgt[c] = (tgt[c] + coef * witness[s]) % R
    for threads in (1, 2):
        a, b = N.evaluate_ab(_records(entries), arr(witness), domain, threads=threads, curve=CURVE)
        assert from_mont_fr(a) == want_a and from_mont_fr(b) == want_b
    h = N.compute_h(a, b, curve=CURVE)
    assert ints(h) == naive_h(want_a, want_b, 5)
    with pytest.raises(NativeCoreError, match="canonical"):
        N.evaluate_ab(_records([(0, 0, 0, 1)]), arr([R]), 4, curve=CURVE)


# ---------------------------------------------------------------------------- the reference oracle


@pytest.fixture(scope="module")
def oracle():
    curves = pytest.importorskip("cuzk_tasks.groth16.curves", reason="the curve-generic oracle is not here yet")
    from cuzk_tasks.groth16.reference import curve as rc
    from cuzk_tasks.groth16.reference import ntt as rn

    return curves.BLS12_381, rc, rn


def test_this_files_constants_are_the_oracles(oracle):
    c, rc, _ = oracle
    assert (c.q, c.r, c.b, c.g1, c.g2, c.b2) == (Q, R, 4, G1_GEN, G2_GEN, (4, 4))
    assert c.root_of_unity == W_MAX and c.two_adicity == S
    assert N.curve_id(c) == N.curve_id(CURVE) and N.fq_limbs(c) == 6


def test_native_matches_the_oracle(oracle):
    c, rc, rn = oracle
    rnd = random.Random(77)
    g1, g2 = rc.g1_of(c), rc.g2_of(c)
    pts1 = [g1.mul(c.g1, rnd.randrange(R)) for _ in range(20)] + [None]
    pts2 = [g2.mul(c.g2, rnd.randrange(R)) for _ in range(4)] + [None]
    sc = [rnd.choice([0, 1, R - 1, rnd.randrange(R)]) for _ in range(21)]
    assert g1_msm(pts1, sc) == g1.msm(pts1, sc)
    assert g2_msm(pts2, sc[:5]) == g2.msm(pts2, sc[:5])
    for log_n in (3, 6):
        v = [rnd.randrange(R) for _ in range(1 << log_n)]
        assert from_mont_fr(N.fr_ntt(mont_fr(v), curve=c)) == rn.ntt(v, log_n, c)
        assert from_mont_fr(N.fr_ntt(mont_fr(v), inverse=True, curve=c)) == rn.intt(v, log_n, c)
        b = [rnd.randrange(R) for _ in range(1 << log_n)]
        assert ints(N.compute_h(mont_fr(v), mont_fr(b), curve=c)) == rn.compute_h(v, b, log_n, c)
