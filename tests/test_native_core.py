"""Differential tests: the native C++ core against the pure-Python reference math."""

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk_tasks.errors import NativeCoreError
from cuzk_tasks.groth16.backends import native as N
from cuzk_tasks.groth16 import points as P
from cuzk_tasks.groth16.reference import ntt as RN
from cuzk_tasks.groth16.reference.curve import G1, G2
from cuzk_tasks.groth16.reference.field import FQ, FR, MONT_R, from_mont, to_mont

# ---------------------------------------------------------------------------- helpers


def arr(values):
    return P.ints_to_limb_array(values) if values else np.zeros((0, 4), dtype=np.uint64)


def ints(a):
    return P.limb_array_to_ints(a)


def mont_arr(values, m):
    return arr([to_mont(v, m) for v in values])


def from_mont_arr(a, m):
    return [from_mont(v, m) for v in ints(a)]


def g1_rows(pts):
    return np.array([P.g1_affine_to_mont(p) for p in pts], dtype=np.uint64).reshape(-1, 8)


def g2_row(p):
    if p is None:
        return np.zeros(16, dtype=np.uint64)
    return np.concatenate([P.fq_to_mont_limbs(c) for c in (p[0][0], p[0][1], p[1][0], p[1][1])])


def g2_rows(pts):
    return np.array([g2_row(p) for p in pts], dtype=np.uint64).reshape(-1, 16)


def g1_msm(pts, scalars, threads=None):
    return P.g1_jacobian_to_affine(N.g1_msm(g1_rows(pts), arr(scalars), threads=threads))


def g2_msm(pts, scalars, threads=None):
    return P.g2_jacobian_to_affine(N.g2_msm(g2_rows(pts), arr(scalars), threads=threads))


def progression(curve, start, step, n):
    """Points (start + i*step)*G for i < n, by repeated addition (cheap to build, easy to check)."""
    p = curve.mul(curve.generator, start)
    q = curve.mul(curve.generator, step)
    out = []
    for _ in range(n):
        out.append(p)
        p = curve.add(p, q)
    return out


def progression_expected(curve, start, step, scalars):
    k = sum(s * (start + i * step) for i, s in enumerate(scalars)) % FR
    return curve.mul(curve.generator, k)


EDGE_SCALARS = [0, 1, 2, FR - 1, FR - 2, (FR - 1) // 2, 2**253, 2**128 - 1, 2**64, 2**64 - 1]


def scalar_strategy():
    return st.one_of(st.sampled_from(EDGE_SCALARS), st.integers(min_value=0, max_value=FR - 1))


@pytest.fixture(scope="module")
def g1_points():
    rnd = random.Random(11)
    return [G1.mul(G1.generator, rnd.randrange(1, FR)) for _ in range(24)]


@pytest.fixture(scope="module")
def g2_points():
    rnd = random.Random(12)
    return [G2.mul(G2.generator, rnd.randrange(1, FR)) for _ in range(6)]


# ---------------------------------------------------------------------------- loader


def test_library_loads_with_expected_abi():
    assert N.lib().cuzk_abi_version() == N.ABI_VERSION
    assert N.available()


def test_default_threads(monkeypatch):
    monkeypatch.setenv("CUZK_THREADS", "3")
    assert N.default_threads() == 3
    monkeypatch.setenv("CUZK_THREADS", "zero")
    with pytest.raises(NativeCoreError):
        N.default_threads()
    monkeypatch.delenv("CUZK_THREADS")
    assert N.default_threads() >= 1


# ---------------------------------------------------------------------------- fields

FIELDS = [(N.FIELD_FR, FR), (N.FIELD_FQ, FQ)]
BINARY = {
    N.OP_ADD: lambda a, b, m: (a + b) % m,
    N.OP_SUB: lambda a, b, m: (a - b) % m,
    N.OP_MUL: lambda a, b, m: a * b % m,
}
UNARY = {
    N.OP_SQR: lambda a, m: a * a % m,
    N.OP_INV: lambda a, m: pow(a, -1, m) if a else 0,
    N.OP_NEG: lambda a, m: -a % m,
    N.OP_DBL: lambda a, m: 2 * a % m,
}


def _edge(m):
    return [0, 1, 2, m - 1, m - 2, (m - 1) // 2, (m + 1) // 2, MONT_R % m, 2**255 % m, 2**64 - 1]


def _check_field_ops(field, m, xs, ys):
    """Every binary op on (xs[i], ys[i]) and every unary op on xs[i], native vs Python."""
    ma, mb = mont_arr(xs, m), mont_arr(ys, m)
    for op, f in BINARY.items():
        assert from_mont_arr(N.field_op(field, op, ma, mb), m) == [f(a, b, m) for a, b in zip(xs, ys)]
    for op, f in UNARY.items():
        assert from_mont_arr(N.field_op(field, op, ma), m) == [f(a, m) for a in xs]


@pytest.mark.parametrize("field,m", FIELDS, ids=["Fr", "Fq"])
def test_field_ops_on_edge_values(field, m):
    edge = _edge(m)
    xs = [a for a in edge for _ in edge]
    ys = [b for _ in edge for b in edge]
    _check_field_ops(field, m, xs, ys)


@pytest.mark.parametrize("field,m", FIELDS, ids=["Fr", "Fq"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_field_ops_random(field, m, data):
    vals = st.lists(st.integers(min_value=0, max_value=m - 1), min_size=1, max_size=40)
    xs = data.draw(vals)
    ys = data.draw(st.lists(st.integers(min_value=0, max_value=m - 1), min_size=len(xs), max_size=len(xs)))
    _check_field_ops(field, m, xs, ys)


@pytest.mark.parametrize("field,m", FIELDS, ids=["Fr", "Fq"])
def test_montgomery_conversions(field, m):
    rnd = random.Random(5)
    xs = _edge(m) + [rnd.randrange(m) for _ in range(100)]
    to_fn, from_fn = (N.fr_to_mont, N.fr_from_mont) if field == N.FIELD_FR else (N.fq_to_mont, N.fq_from_mont)
    mt = to_fn(arr(xs))
    assert ints(mt) == [to_mont(x, m) for x in xs]
    assert ints(from_fn(mt)) == xs


def test_noncanonical_inputs_are_rejected():
    with pytest.raises(NativeCoreError, match="canonical"):
        N.field_op(N.FIELD_FR, N.OP_ADD, arr([FR]), arr([0]))
    with pytest.raises(NativeCoreError, match="canonical"):
        N.fq_to_mont(arr([FQ + 5]))
    with pytest.raises(NativeCoreError, match="canonical"):
        N.g1_msm(np.full((1, 8), 2**64 - 1, dtype=np.uint64), arr([1]))


def test_wrapper_checks_dtype_and_shape():
    with pytest.raises(ValueError):
        N.g1_msm(np.zeros((3, 8), dtype=np.int64), arr([1, 2, 3]))
    with pytest.raises(ValueError):
        N.g1_msm(np.zeros((3, 7), dtype=np.uint64), arr([1, 2, 3]))
    with pytest.raises(ValueError):
        N.g1_msm(np.zeros((3, 8), dtype=np.uint64), arr([1, 2]))
    with pytest.raises(ValueError):
        N.fr_ntt(arr([1, 2, 3]))


# ---------------------------------------------------------------------------- curve ops


def test_g1_point_ops(g1_points):
    p, q = g1_points[0], g1_points[1]
    rp, rq = P.g1_affine_to_mont(p), P.g1_affine_to_mont(q)
    inf = P.g1_affine_to_mont(None)
    g = P.g1_affine_from_mont
    assert g(N.g1_point_op(N.POINT_ADD, rp, rq)) == G1.add(p, q)
    assert g(N.g1_point_op(N.POINT_ADD, rp, rp)) == G1.double(p)
    assert g(N.g1_point_op(N.POINT_ADD, rp, P.g1_affine_to_mont(G1.neg(p)))) is None
    assert g(N.g1_point_op(N.POINT_ADD, rp, inf)) == p
    assert g(N.g1_point_op(N.POINT_ADD, inf, rq)) == q
    assert g(N.g1_point_op(N.POINT_DBL, rp)) == G1.double(p)
    assert g(N.g1_point_op(N.POINT_NEG, rp)) == G1.neg(p)
    for k in (0, 1, 2, 12345, FR - 1, FR):
        assert g(N.g1_point_op(N.POINT_MUL, rp, P.int_to_limbs(k))) == G1.mul(p, k)
    N.g1_check_points(g1_rows(g1_points + [None]))
    bad = g1_rows([p, (p[0], (p[1] + 1) % FQ)])
    with pytest.raises(NativeCoreError, match="point 1"):
        N.g1_check_points(bad)


def test_g2_point_ops(g2_points):
    p, q = g2_points[0], g2_points[1]
    rp, rq = g2_row(p), g2_row(q)
    g = P.g2_affine_from_mont
    assert g(N.g2_point_op(N.POINT_ADD, rp, rq)) == G2.add(p, q)
    assert g(N.g2_point_op(N.POINT_ADD, rp, rp)) == G2.double(p)
    assert g(N.g2_point_op(N.POINT_DBL, rp)) == G2.double(p)
    assert g(N.g2_point_op(N.POINT_NEG, rp)) == G2.neg(p)
    assert g(N.g2_point_op(N.POINT_ADD, rp, g2_row(G2.neg(p)))) is None
    for k in (0, 1, 7, FR - 1):
        assert g(N.g2_point_op(N.POINT_MUL, rp, P.int_to_limbs(k))) == G2.mul(p, k)
    N.g2_check_points(g2_rows([p, q, None]))
    with pytest.raises(NativeCoreError, match="not on the curve"):
        N.g2_check_points(g2_rows([((p[0][0], p[0][1]), (p[1][0], (p[1][1] + 1) % FQ))]))


def test_to_affine_from_jacobian(g1_points, g2_points):
    p = g1_points[3]
    # Jacobian (X, Y, Z) = (x z^2, y z^3, z) for z = 5
    z = 5
    jac = np.concatenate([P.fq_to_mont_limbs(p[0] * z * z % FQ), P.fq_to_mont_limbs(p[1] * z**3 % FQ),
                          P.fq_to_mont_limbs(z)])
    assert P.g1_affine_from_mont(N.g1_to_affine(jac)) == p
    assert P.g1_affine_from_mont(N.g1_to_affine(np.zeros(12, dtype=np.uint64))) is None
    q = g2_points[0]
    jac2 = np.concatenate([g2_row(q)[:16], P.fq_to_mont_limbs(1), np.zeros(4, dtype=np.uint64)])
    assert P.g2_affine_from_mont(N.g2_to_affine(jac2)) == q


# ---------------------------------------------------------------------------- MSM


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_g1_msm_small_random(g1_points, data):
    n = data.draw(st.integers(min_value=1, max_value=12))
    idx = data.draw(st.lists(st.integers(min_value=-1, max_value=len(g1_points) - 1), min_size=n, max_size=n))
    pts = [None if i < 0 else g1_points[i] for i in idx]  # repeats and infinity included
    scalars = data.draw(st.lists(scalar_strategy(), min_size=n, max_size=n))
    threads = data.draw(st.sampled_from([1, 2, 3, 0]))
    assert g1_msm(pts, scalars, threads) == G1.msm(pts, scalars)


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_g2_msm_small_random(g2_points, data):
    n = data.draw(st.integers(min_value=1, max_value=4))
    idx = data.draw(st.lists(st.integers(min_value=-1, max_value=len(g2_points) - 1), min_size=n, max_size=n))
    pts = [None if i < 0 else g2_points[i] for i in idx]
    scalars = data.draw(st.lists(scalar_strategy(), min_size=n, max_size=n))
    assert g2_msm(pts, scalars, 2) == G2.msm(pts, scalars)


def test_msm_degenerate_inputs(g1_points, g2_points):
    p = g1_points[0]
    assert g1_msm([p], [0]) is None
    assert g1_msm([p], [1]) == p
    assert g1_msm([p], [FR - 1]) == G1.neg(p)
    assert g1_msm([p], [FR]) is None  # scalars are reduced mod r
    assert g1_msm([p], [FR + 3]) == G1.mul(p, 3)
    assert g1_msm([None, None], [5, 7]) is None
    assert g1_msm([p, G1.neg(p)], [9, 9]) is None
    assert g1_msm([p, p, p], [1, 1, FR - 2]) is None
    assert P.g1_jacobian_to_affine(N.g1_msm(np.zeros((0, 8), dtype=np.uint64), arr([]))) is None
    q = g2_points[0]
    assert g2_msm([q], [0]) is None
    assert g2_msm([q], [1]) == q
    assert g2_msm([q, G2.neg(q)], [3, 3]) is None


@pytest.fixture(scope="module")
def g1_progression():
    return progression(G1, 987654321, 1234567, 9000)


def _scalar_sets(n, rnd):
    return {
        "random": [rnd.randrange(FR) for _ in range(n)],
        "edge": [rnd.choice(EDGE_SCALARS) for _ in range(n)],
        "all_equal": [FR - 7] * n,
        "all_zero": [0] * n,
        "small": [rnd.randrange(4) for _ in range(n)],  # typical witness: many 0/1
        "bits_and_negatives": [rnd.choice([0, 1, FR - 1, rnd.randrange(FR)]) for _ in range(n)],
    }


@pytest.mark.parametrize("n", [1, 33, 513, 1000, 4099, 9000])
def test_g1_msm_large(g1_progression, n):
    rnd = random.Random(n)
    pts = g1_progression[:n]
    bases = g1_rows(pts)
    for name, scalars in _scalar_sets(n, rnd).items():
        want = progression_expected(G1, 987654321, 1234567, scalars)
        for threads in (1, 2, 5):
            got = P.g1_jacobian_to_affine(N.g1_msm(bases, arr(scalars), threads=threads))
            assert got == want, (n, name, threads)


def _cube_roots_of_unity(r):
    return sorted({pow(h, (r - 1) // 3, r) for h in range(2, 40)} - {1})


@pytest.mark.parametrize("n", [63, 64, 300])
def test_g1_msm_glv_split_edge_scalars(g1_progression, n):
    """From 64 points G1 MSMs split each scalar as k1 + k2 lambda (GLV); the scalars where
    the halves are largest or vanish (lambda itself, r - lambda, around 2^127 and 2^128,
    near r) sum as the reference does, below and above that threshold."""
    lams = _cube_roots_of_unity(FR)
    assert len(lams) == 2
    special = [0, 1, FR - 1] + lams + [FR - lam for lam in lams] + [
        lam + d for lam in lams for d in (1, -1)] + [
        2**127 - 1, 2**127, 2**128 - 1, 2**128, 2**128 + 1, FR - 2**128, (FR - 1) // 2]
    rnd = random.Random(n)
    scalars = [special[i % len(special)] if i % 3 else rnd.randrange(FR) for i in range(n)]
    want = progression_expected(G1, 987654321, 1234567, scalars)
    for threads in (1, 2):
        got = P.g1_jacobian_to_affine(N.g1_msm(g1_rows(g1_progression[:n]), arr(scalars),
                                               threads=threads))
        assert got == want, threads


def test_g1_msm_with_infinity_and_repeated_bases(g1_progression):
    rnd = random.Random(3)
    n = 3000
    pts = [g1_progression[i % 50] if i % 7 else None for i in range(n)]
    scalars = [rnd.randrange(FR) for _ in range(n)]
    k = sum(s * (987654321 + (i % 50) * 1234567) for i, s in enumerate(scalars) if i % 7) % FR
    assert g1_msm(pts, scalars, 2) == G1.mul(G1.generator, k)
    # same point everywhere: every addition in a bucket is a doubling or a cancellation
    same = [g1_progression[0]] * 1500
    sc = [rnd.choice([1, 2, FR - 1, 5]) for _ in range(1500)]
    assert g1_msm(same, sc, 2) == G1.mul(g1_progression[0], sum(sc) % FR)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_sparse_msm_sums_only_what_contributes(g1_progression, g2_progression, threads):
    """A Poseidon-like column: most bases at infinity and many zero scalars (the core drops
    them before the windows when they are an eighth or more of the input), with the
    survivors spread over every thread's range, sums exactly the survivors."""
    rnd = random.Random(threads)
    n = 9000
    live = sorted(rnd.sample(range(n), 700))
    pts = [None] * n
    scalars = [0 if rnd.random() < 0.5 else rnd.randrange(FR) for _ in range(n)]
    for i in live:
        pts[i] = g1_progression[i]
        scalars[i] = rnd.choice([1, FR - 1, rnd.randrange(FR)])
    want = progression_expected(G1, 987654321, 1234567,
                                [s if pts[i] is not None else 0 for i, s in enumerate(scalars)])
    assert want is not None and g1_msm(pts, scalars, threads) == want
    m = 700
    g2_pts = [g2_progression[i] if i % 5 == 0 else None for i in range(m)]
    g2_sc = [rnd.randrange(FR) for _ in range(m)]
    assert g2_msm(g2_pts, g2_sc, threads) == progression_expected(
        G2, 424242, 777, [s if i % 5 == 0 else 0 for i, s in enumerate(g2_sc)])


@pytest.fixture(scope="module")
def g2_progression():
    return progression(G2, 424242, 777, 700)


@pytest.mark.parametrize("n", [2, 100, 700])
def test_g2_msm_large(g2_progression, n):
    rnd = random.Random(n)
    bases = g2_rows(g2_progression[:n])
    sets = _scalar_sets(n, rnd)
    for name in ("random", "edge", "all_equal", "small"):
        scalars = sets[name]
        want = progression_expected(G2, 424242, 777, scalars)
        got = P.g2_jacobian_to_affine(N.g2_msm(bases, arr(scalars), threads=2))
        assert got == want, (n, name)


# ---------------------------------------------------------------------------- NTT


@pytest.mark.parametrize("log_n", range(0, 7))
def test_ntt_matches_naive_dft(log_n):
    rnd = random.Random(log_n)
    n = 1 << log_n
    v = [rnd.randrange(FR) for _ in range(n)]
    if n > 1:
        v[0], v[-1] = FR - 1, 0
    m = mont_arr(v, FR)
    fwd = N.fr_ntt(m, threads=2)
    assert from_mont_arr(fwd, FR) == RN.ntt(v, log_n)
    assert from_mont_arr(N.fr_ntt(m, inverse=True), FR) == RN.intt(v, log_n)
    assert ints(N.fr_ntt(fwd, inverse=True)) == ints(m)


@pytest.mark.parametrize("log_n,threads", [(12, 1), (13, 2), (14, 3), (15, 4)])
def test_ntt_round_trip_large(log_n, threads):
    rng = np.random.default_rng(log_n)
    x = rng.integers(0, 2**64, size=(1 << log_n, 4), dtype=np.uint64)
    x[:, 3] &= np.uint64((1 << 60) - 1)
    y = N.fr_ntt(x, threads=threads)
    assert not np.array_equal(x, y)
    assert np.array_equal(N.fr_ntt(y, inverse=True, threads=threads), x)
    # NTT of a delta at index 1 = powers of omega
    d = np.zeros_like(x)
    d[1] = P.int_to_limbs(to_mont(1, FR))
    w = RN.root_of_unity(log_n)
    got = from_mont_arr(N.fr_ntt(d, threads=threads), FR)
    assert got[:5] == [pow(w, i, FR) for i in range(5)]
    assert got[-1] == pow(w, (1 << log_n) - 1, FR)


def test_ntt_rejects_bad_sizes():
    with pytest.raises(ValueError):
        N.fr_ntt(np.zeros((6, 4), dtype=np.uint64))


# ---------------------------------------------------------------------------- QAP


@pytest.mark.parametrize("log_n", [0, 1, 2, 3, 5])
def test_compute_h_matches_reference(log_n):
    rnd = random.Random(100 + log_n)
    n = 1 << log_n
    a = [rnd.randrange(FR) for _ in range(n)]
    b = [rnd.randrange(FR) for _ in range(n)]
    h = N.compute_h(mont_arr(a, FR), mont_arr(b, FR), threads=2)
    assert ints(h) == RN.compute_h(a, b, log_n)


def test_compute_h_large_is_consistent_and_keeps_inputs():
    # For a, b that come from a satisfied system (here: c = a*b by construction)
    # h must be the evaluations of (A*B - C)/Z; check against the reference on
    # a medium size and that inputs are untouched unless overwrite=True.
    log_n = 7
    rnd = random.Random(9)
    n = 1 << log_n
    a = [rnd.randrange(FR) for _ in range(n)]
    b = [rnd.randrange(FR) for _ in range(n)]
    ma, mb = mont_arr(a, FR), mont_arr(b, FR)
    ca, cb = ma.copy(), mb.copy()
    h = N.compute_h(ma, mb)
    assert np.array_equal(ma, ca) and np.array_equal(mb, cb)
    assert ints(h) == RN.compute_h(a, b, log_n)
    h2 = N.compute_h(ma, mb, overwrite=True, threads=1)
    assert np.array_equal(h, h2)


@pytest.mark.parametrize("log_n", [12, 13])
def test_compute_h_is_the_same_on_any_number_of_threads(log_n):
    """From 2^12 points the transforms split their first (inverse, DIF) or last (forward,
    DIT) stages between threads, each butterfly on one of them; the sizes below, checked
    against the reference above, run every stage on one thread.  So the split stages must
    give one thread's result exactly, for any thread count, and leave the inputs alone."""
    rng = np.random.default_rng(log_n)
    a, b = (rng.integers(0, 2**64, size=(1 << log_n, 4), dtype=np.uint64) for _ in range(2))
    a[:, 3] &= np.uint64((1 << 60) - 1)
    b[:, 3] &= np.uint64((1 << 60) - 1)
    one = N.compute_h(a, b, threads=1)
    assert np.count_nonzero(one) > 0
    for threads in (2, 3, 4):
        assert np.array_equal(N.compute_h(a, b, threads=threads), one), threads


def _records(entries):
    """entries: (matrix, constraint, signal, coef) -> packed 44-byte zkey records."""
    raw = b"".join(struct.pack("<III", m, c, s) + (coef * MONT_R * MONT_R % FR).to_bytes(32, "little")
                   for m, c, s, coef in entries)
    return np.frombuffer(raw, dtype=np.uint8)


def test_evaluate_ab_matches_python():
    rnd = random.Random(21)
    n_vars, domain = 40, 64
    witness = [1] + [rnd.choice([0, 1, FR - 1, rnd.randrange(FR)]) for _ in range(n_vars - 1)]
    entries = [(rnd.randrange(2), rnd.randrange(50), rnd.randrange(n_vars), rnd.choice([1, FR - 1, rnd.randrange(FR)]))
               for _ in range(400)]
    entries += [(0, 63, 0, 5), (1, 63, 0, 7)]
    want_a, want_b = [0] * domain, [0] * domain
    for m, c, s, coef in entries:
        tgt = want_a if m == 0 else want_b
        tgt[c] = (tgt[c] + coef * witness[s]) % FR
    recs = _records(entries)
    for threads in (1, 2, 3):
        a, b = N.evaluate_ab(recs, arr(witness), domain, threads=threads)
        assert from_mont_arr(a, FR) == want_a
        assert from_mont_arr(b, FR) == want_b
    # the zkey reader's structured dtype works too
    from cuzk_tasks.groth16.formats.zkey import COEF_DTYPE

    a2, b2 = N.evaluate_ab(recs.view(COEF_DTYPE), arr(witness), domain)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)


@pytest.mark.parametrize("entry", [(2, 0, 0, 1), (0, 64, 0, 1), (1, 0, 40, 1)])
def test_evaluate_ab_rejects_out_of_range_records(entry):
    with pytest.raises(NativeCoreError, match="record"):
        N.evaluate_ab(_records([entry]), arr([1] * 40), 64)


def test_evaluate_ab_then_h_end_to_end():
    """A tiny satisfied R1CS (x*x = y, y*x = z): H is what the reference computes."""
    x = 3
    witness = [1, x, x * x, x ** 3]
    entries = [(0, 0, 1, 1), (1, 0, 1, 1), (0, 1, 2, 1), (1, 1, 1, 1), (0, 2, 0, 1), (0, 3, 1, 1)]
    a, b = N.evaluate_ab(_records(entries), arr(witness), 4)
    h = N.compute_h(a, b)
    assert ints(h) == RN.compute_h(from_mont_arr(a, FR), from_mont_arr(b, FR), 2)


@pytest.mark.parametrize("window", [2, 5, 9, 16])
def test_g1_msm_forced_window_sizes(g1_progression, monkeypatch, window):
    """CUZK_MSM_WINDOW overrides the window size: every recoding width must agree."""
    monkeypatch.setenv("CUZK_MSM_WINDOW", str(window))
    rnd = random.Random(window)
    n = 1500
    bases = g1_rows(g1_progression[:n])
    for name, scalars in _scalar_sets(n, rnd).items():
        got = P.g1_jacobian_to_affine(N.g1_msm(bases, arr(scalars), threads=2))
        assert got == progression_expected(G1, 987654321, 1234567, scalars), (window, name)


# ---------------------------------------------------------------------------- device headers

CUDA_SMOKE = r"""
#include "cuzk/curve.cuh"
using namespace cuzk;
__global__ void smoke(Fq* a, Fr* b, G1::Jacobian* p, G1::Affine* q, G2::XYZZ* r, G2::Affine* s) {
    int i = threadIdx.x;
    a[i] = Fq::mul(a[i], a[i + 1]) + Fq::inv(a[i]);
    b[i] = Fr::sqr(b[i]) - Fr::one();
    p[i] = G1::dbl(G1::add_mixed(G1::add(p[i], p[i + 1]), q[i]));
    r[i] = G2::xyzz_add_mixed(r[i], s[i]);
    q[i] = G1::to_affine(p[i]);
}
"""


@pytest.mark.slow
def test_shared_headers_compile_as_cuda(tmp_path):
    """field/bn254/curve headers are shared with the CUDA kernels: nvcc must accept them."""
    import pathlib
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    include = pathlib.Path(N.__file__).resolve().parents[2] / "native" / "include"
    src = tmp_path / "smoke.cu"
    src.write_text(CUDA_SMOKE)
    # PTX only (compute_80): the front end and the host compiler see every line; the kernel
    # files' compile checks run ptxas on the same headers
    result = subprocess.run([nvcc, "-std=c++17", "-x", "cu", "-c",
                             "-gencode", "arch=compute_80,code=compute_80", f"-I{include}",
                             str(src), "-o", str(tmp_path / "smoke.o")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in (result.stdout + result.stderr).lower()
