#!/usr/bin/env python3
"""Native kernel timings per curve: G1 MSM, G2 MSM and Fr NTT at 2^16, 2 threads, best of 3.

    python bench/kernels.py [CHECKOUT]

CHECKOUT (default: this repository) is a checkout whose native core is built in place, so
an older commit's core can be timed back to back with this one (a git worktree plus
``python setup.py build_ext --inplace``); a core from before BLS12-381 times BN254 only.
"""
import pathlib
import sys
import time

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else str(pathlib.Path(__file__).resolve().parents[1]))
import numpy as np  # noqa: E402
from cuzk_tasks.groth16.backends import native
try:
    from cuzk_tasks.groth16.reference.curve import g1_of, g2_of
    NEW = True
except ImportError:
    from cuzk_tasks.groth16.reference.curve import G1 as _G1, G2 as _G2
    g1_of = lambda c: _G1
    g2_of = lambda c: _G2
    NEW = False
rng = np.random.default_rng(1)
def rand_scalars(n, bits=254):
    s = rng.integers(0, 2**63, size=(n, 4), dtype=np.uint64)
    s[:, 3] &= np.uint64((1 << (bits - 192 - 2)) - 1)
    return s
def best(fn, k=3):
    ts=[]
    for _ in range(k):
        t=time.perf_counter(); fn(); ts.append(time.perf_counter()-t)
    return min(ts)*1000
curves = ["bn128"] + (["bls12381"] if NEW else [])
n = 1 << 16
for curve in curves:
    kw = {"curve": curve} if NEW else {}
    L = native.fq_limbs(curve) if hasattr(native, "fq_limbs") else 4
    # bases: multiples of the generator, via a small MSM-free trick: repeat a few valid points
    from cuzk_tasks.groth16 import points
    if NEW:
        from cuzk_tasks.groth16.curves import curve_by_name
    C = curve_by_name(curve) if NEW else None
    g1, g2 = g1_of(C), g2_of(C)
    P = [g1.mul(g1.generator, k + 2) for k in range(16)]
    Q = [g2.mul(g2.generator, k + 2) for k in range(4)]
    cv = (C,) if NEW else ()
    b1 = np.stack([points.g1_affine_to_mont(P[i % 16], *cv) for i in range(n)])
    b2 = np.stack([points.g2_affine_to_mont(Q[i % 4], *cv) for i in range(n)])
    s = rand_scalars(n)
    v = native.fr_to_mont(rand_scalars(n), **kw)
    print(curve, "G1 MSM 2^16 %.1f ms" % best(lambda: native.g1_msm(b1, s, threads=2, **kw)),
          "G2 MSM 2^16 %.1f ms" % best(lambda: native.g2_msm(b2, s, threads=2, **kw)),
          "Fr NTT 2^16 %.1f ms" % best(lambda: native.fr_ntt(v, threads=2, **kw)), flush=True)
