"""The CUDA kernels compiled for BLS12-381 (``-DCUZK_GPU_CURVE=BLS12_381``, the options
``gpu.nvrtc_options(curve="bls12381")`` gives NVRTC), run on the CPU under the CUDA
emulator (tests/cuda_emu), against the CPU core and plain Python.

The GPU backend itself drives BN254 only; this runs the DEVICE code paths of the shared
headers for 6-limb Fq (compat.cuh's device carries and __umul64hi) and the real msm.cu /
ntt.cu kernels instantiated for the curve.
"""

import random

import numpy as np
import pytest

from support import cupy_emu
from cuzk_tasks.groth16.backends import gpu as G
from cuzk_tasks.groth16.backends import native as N
from test_native_bls12_381 import (CURVE, G1, G1_GEN, G2, G2_GEN, Q, R, RR, arr, from_limbs,
                                   g1_from_jac, g1_from_row, g1_row, g2_from_row, g2_row, mont_rows,
                                   root)

# slow: the emulated BLS12-381 kernels compile with g++ first
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not cupy_emu.available(),
                                 reason=f"the emulated kernels need a C++20 compiler ({cupy_emu.CXX})")]

OPTS = G.nvrtc_options(curve=CURVE)

PROBE = r"""
#include "gpu_common.cuh"
using namespace cuzk::gpu;

// out[i] = a+b, a-b, a*b, a^2, 1/a, -a (Fq, 6 x L limbs per i)
extern "C" __global__ void probe_fq(const u64* a, const u64* b, u64* out, u32 n) {
    const u64 i = global_tid();
    if (i >= n) return;
    const int L = Fq::N;
    Fq x = Fq::from_raw(a + L * i), y = Fq::from_raw(b + L * i);
    u64* o = out + 6 * L * i;
    Fq::add(x, y).to_raw(o);
    Fq::sub(x, y).to_raw(o + L);
    Fq::mul(x, y).to_raw(o + 2 * L);
    Fq::sqr(x).to_raw(o + 3 * L);
    Fq::inv(x).to_raw(o + 4 * L);
    Fq::neg(x).to_raw(o + 5 * L);
}

// out[i] = a*b, 1/a (Fq2)
extern "C" __global__ void probe_fq2(const u64* a, const u64* b, u64* out, u32 n) {
    const u64 i = global_tid();
    if (i >= n) return;
    const int L = Fq2::N;
    Fq2 x = Fq2::from_raw(a + L * i), y = Fq2::from_raw(b + L * i);
    Fq2::mul(x, y).to_raw(out + 2 * L * i);
    Fq2::inv(x).to_raw(out + 2 * L * i + L);
}

// out[i] = p + q (Jacobian and XYZZ formulas), 2p, affine, and is_on_curve(p)
template <class C>
__device__ void probe_points(const u64* p, const u64* q, u64* out, u64* on, u32 n) {
    typedef typename C::Field F;
    typedef typename C::Affine A;
    const u64 i = global_tid();
    if (i >= n) return;
    const int W = 2 * F::N;
    A a, b;
    a.x = F::from_raw(p + W * i); a.y = F::from_raw(p + W * i + F::N);
    b.x = F::from_raw(q + W * i); b.y = F::from_raw(q + W * i + F::N);
    A s1 = C::to_affine(C::add(C::to_jacobian(a), C::to_jacobian(b)));
    A s2 = C::xyzz_to_affine(C::xyzz_add_mixed(C::to_xyzz(a), b));
    A d = C::to_affine(C::dbl(C::to_jacobian(a)));
    u64* o = out + 3 * W * i;
    s1.x.to_raw(o); s1.y.to_raw(o + F::N);
    s2.x.to_raw(o + W); s2.y.to_raw(o + W + F::N);
    d.x.to_raw(o + 2 * W); d.y.to_raw(o + 2 * W + F::N);
    on[i] = C::is_on_curve(a) ? 1 : 0;
}
extern "C" __global__ void probe_g1(const u64* p, const u64* q, u64* out, u64* on, u32 n) {
    probe_points<G1>(p, q, out, on, n);
}
extern "C" __global__ void probe_g2(const u64* p, const u64* q, u64* out, u64* on, u32 n) {
    probe_points<G2>(p, q, out, on, n);
}
"""


@pytest.fixture(scope="module")
def cp():
    return cupy_emu


@pytest.fixture(scope="module")
def probe(cp):
    return cp.RawModule(code=PROBE, options=OPTS)


@pytest.fixture(scope="module")
def kernels(cp):
    return {f: cp.RawModule(code=G.kernel_source(f), options=OPTS) for f in ("msm.cu", "ntt.cu")}


def launch(fn, n, args, threads=64):
    fn(((n + threads - 1) // threads,), (threads,), args)


def test_fq_and_fq2_device_arithmetic(cp, probe):
    rnd = random.Random(1)
    edge = [0, 1, 2, Q - 1, Q - 2, (Q - 1) // 2, 2**380, 2**64 - 1]
    xs = edge + [rnd.randrange(Q) for _ in range(40)]
    ys = edge[::-1] + [rnd.randrange(Q) for _ in range(40)]
    a, b = mont_rows("Fq", xs), mont_rows("Fq", ys)
    n = len(xs)
    out = cp.zeros((n, 36), dtype=np.uint64)
    launch(probe.get_function("probe_fq"), n, (cp.asarray(a), cp.asarray(b), out, np.uint32(n)))
    out = cp.asnumpy(out)
    for k, op in enumerate((N.OP_ADD, N.OP_SUB, N.OP_MUL, N.OP_SQR, N.OP_INV, N.OP_NEG)):
        want = N.field_op(N.FIELD_FQ, op, a, b, curve=CURVE)
        assert np.array_equal(out[:, 6 * k:6 * k + 6], want), op
    x2 = [(rnd.randrange(Q), rnd.randrange(Q)) for _ in range(20)] + [(0, 0), (1, 0), (0, Q - 1)]
    y2 = [(rnd.randrange(Q), rnd.randrange(Q)) for _ in range(len(x2))]
    a2, b2 = mont_rows("Fq2", x2), mont_rows("Fq2", y2)
    out2 = cp.zeros((len(x2), 24), dtype=np.uint64)
    launch(probe.get_function("probe_fq2"), len(x2), (cp.asarray(a2), cp.asarray(b2), out2,
                                                      np.uint32(len(x2))))
    out2 = cp.asnumpy(out2)
    assert np.array_equal(out2[:, :12], N.field_op(N.FIELD_FQ2, N.OP_MUL, a2, b2, curve=CURVE))
    assert np.array_equal(out2[:, 12:], N.field_op(N.FIELD_FQ2, N.OP_INV, a2, curve=CURVE))


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_point_device_arithmetic(cp, probe, group):
    C, row, back, gen, width = {"G1": (G1, g1_row, g1_from_row, G1_GEN, 12),
                                "G2": (G2, g2_row, g2_from_row, G2_GEN, 24)}[group]
    rnd = random.Random(2)
    ps = [C.mul(gen, rnd.randrange(1, R)) for _ in range(4)]
    pairs = [(ps[0], ps[1]), (ps[2], ps[2]), (ps[3], C.neg(ps[3])), (None, ps[1]), (ps[1], None)]
    p = np.array([row(a) for a, _ in pairs], dtype=np.uint64)
    q = np.array([row(b) for _, b in pairs], dtype=np.uint64)
    n = len(pairs)
    out = cp.zeros((n, 3 * width), dtype=np.uint64)
    on = cp.zeros(n, dtype=np.uint64)
    launch(probe.get_function("probe_" + group.lower()), n, (cp.asarray(p), cp.asarray(q), out, on,
                                                              np.uint32(n)))
    out = cp.asnumpy(out)
    for i, (a, b) in enumerate(pairs):
        assert back(out[i, :width]) == C.add(a, b), i
        assert back(out[i, width:2 * width]) == C.add(a, b), i
        assert back(out[i, 2 * width:]) == C.double(a), i
    assert list(cp.asnumpy(on)) == [1] * n
    bad = p.copy()
    bad[0, width // 2] ^= np.uint64(1)  # y + 1 (in Montgomery form): off the curve
    on2 = cp.zeros(n, dtype=np.uint64)
    launch(probe.get_function("probe_" + group.lower()), n, (cp.asarray(bad), cp.asarray(q),
                                                              cp.zeros(out.shape, dtype=np.uint64), on2,
                                                              np.uint32(n)))
    assert int(cp.asnumpy(on2)[0]) == 0


def test_msm_kernels_for_the_curve(cp, kernels):
    """msm.cu for BLS12-381: digits (255-bit scalars, 6-limb bases, infinity skipped),
    bucket accumulation of 12-limb points into 24-limb XYZZ partials, the final sum."""
    msm = kernels["msm.cu"]
    rnd = random.Random(3)
    n = 24
    pts = [G1.mul(G1_GEN, rnd.randrange(1, R)) for _ in range(n - 2)] + [None, G1_GEN]
    scalars = [rnd.choice([0, 1, R - 1, R, 2**256 - 1, rnd.randrange(2**254, R), rnd.randrange(R)])
               for _ in range(n)]
    bases = np.array([g1_row(p) for p in pts], dtype=np.uint64)
    c = 7
    W, nb = 255 // c + 1, 1 << (c - 1)
    keys = cp.zeros(W * n, dtype=np.uint32)
    vals = cp.zeros(W * n, dtype=np.uint32)
    counts = cp.zeros(W * nb, dtype=np.uint32)
    launch(msm.get_function("msm_digits"), n,
           (cp.asarray(arr(scalars)), cp.asarray(bases), np.uint32(n), np.uint32(c), np.uint32(W),
            np.uint32(nb), keys, vals, counts))
    keys, vals = cp.asnumpy(keys).reshape(W, n), cp.asnumpy(vals).reshape(W, n)
    for i, s in enumerate(scalars):
        total = 0
        for w in range(W):
            k = int(keys[w, i])
            if k == 0xFFFFFFFF:
                continue
            assert pts[i] is not None and k // nb == w and int(vals[w, i]) >> 1 == i
            mag = k % nb + 1
            total += (-mag if int(vals[w, i]) & 1 else mag) << (c * w)
        assert total % R == (0 if pts[i] is None else s % R), i
    assert int(cp.asnumpy(counts).sum()) == int((keys != 0xFFFFFFFF).sum())
    # one bucket holding every point (signs from the value's low bit), then msm_final
    signs = [rnd.randrange(2) for _ in range(n - 1)]
    sorted_vals = np.array([(i << 1) | signs[i] for i in range(n - 1)], dtype=np.uint32)
    off = np.array([0, n - 1], dtype=np.uint32)
    off_out = np.array([0, 1], dtype=np.uint32)
    parts = cp.zeros((1, 24), dtype=np.uint64)
    launch(msm.get_function("msm_accumulate_points"), 1,
           (cp.asarray(bases), cp.asarray(sorted_vals), cp.asarray(off), cp.asarray(off_out),
            np.uint32(1), np.uint32(1), np.uint32(n), parts))
    jac = cp.zeros(18, dtype=np.uint64)
    msm.get_function("msm_final")((1,), (1,), (parts, cp.asarray(off_out), np.uint32(1), np.uint32(c),
                                               jac))
    want = None
    for i in range(n - 1):
        want = G1.add(want, G1.neg(pts[i]) if signs[i] else pts[i])
    assert g1_from_jac(cp.asnumpy(jac)) == want


@pytest.mark.parametrize("log_n", [1, 4, 10])
def test_ntt_kernels_for_the_curve(cp, kernels, log_n):
    """ntt.cu for BLS12-381 with ffjavascript's roots: bit-reverse, the shared-memory DIT
    tile, and the twiddle table from fr_geometric, against the CPU core."""
    ntt = kernels["ntt.cu"]
    rnd = random.Random(log_n)
    n = 1 << log_n
    x = arr([rnd.randrange(R) * RR % R for _ in range(n)])
    half = n // 2
    tw = cp.zeros((half, 4), dtype=np.uint64)
    one, w = arr([RR % R]), arr([root(log_n) * RR % R])
    launch(ntt.get_function("fr_geometric"), half,
           (tw, np.uint64(half), cp.asarray(one), cp.asarray(w), np.uint32(1)))
    assert [from_limbs(r) * pow(RR, -1, R) % R for r in cp.asnumpy(tw)[:3]] == \
        [pow(root(log_n), k, R) for k in range(min(3, half))]
    out = cp.zeros((n, 4), dtype=np.uint64)
    launch(ntt.get_function("ntt_bitrev_copy"), n, (cp.asarray(x), out, np.uint32(log_n)))
    ntt.get_function("ntt_tile_dit")((1, 1), (n // 2,), (out, np.uint32(log_n), np.uint32(log_n), tw))
    assert np.array_equal(cp.asnumpy(out), N.fr_ntt(x, curve=CURVE))
