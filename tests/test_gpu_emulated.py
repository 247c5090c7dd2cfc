"""The GPU backend's own tests, on the CPU: the CUDA kernels compiled with g++ under
``tests/cuda_emu/cuda_emu.h`` and driven by the unchanged ``GpuBackend`` through
``tests/cupy_emu.py`` (a numpy stand-in for CuPy).

This checks the kernels' arithmetic on the DEVICE code paths of the shared headers, their
indexing, launch geometry, shared-memory tiles and atomics, and the backend's
orchestration, against the CPU core and snarkjs.  It does not check speed, NVRTC, the
driver or anything warp-specific: on a GPU, ``tests/test_gpu_backend.py`` runs the same
tests for real.
"""

import pytest

import cupy_emu
from cuzk_tasks.groth16 import gpu as G
from test_gpu_backend import (  # noqa: F401  (the tests and the fixture they share)
    bases,
    test_compute_h_matches_cpu,
    test_evaluate_ab_and_h_match_cpu,
    test_full_proof_verifies,
    test_full_proof_verifies_with_snarkjs,
    test_g1_msm_all_zero_scalars_is_infinity,
    test_g1_msm_edge_scalars,
    test_g1_msm_infinity_bases_are_skipped,
    test_g1_msm_larger_random,
    test_g1_msm_random_matches_cpu,
    test_g1_msm_repeated_bases_and_cancellation,
    test_g1_msm_single_scalar_and_unreduced,
    test_g1_msm_skewed_buckets,
    test_g1_msm_window_sizes,
    test_ntt_matches_cpu_and_round_trips,
    test_prove_start_matches_cpu,
    test_readonly_bases_become_resident,
)

pytestmark = pytest.mark.skipif(not cupy_emu.available(),
                                reason=f"the emulated kernels need a C++20 compiler ({cupy_emu.CXX})")


@pytest.fixture(scope="module")
def gpu():
    with cupy_emu.installed_as_cupy(G):
        backend = G.GpuBackend()
    assert backend.device_name == "cuzk CUDA emulator (CPU)"
    yield backend
    backend.evict()


def test_a_wrong_kernel_result_is_caught(gpu, monkeypatch):
    """The differential tests above can fail: corrupt one kernel's output and they do."""
    import numpy as np

    from cuzk_tasks.groth16 import native as N
    from test_gpu_backend import random_mont

    import random

    x = random_mont(random.Random(1), 1 << 11)
    assert np.array_equal(gpu.fr_ntt(x), N.fr_ntt(x))
    stage = gpu._k("ntt.cu", "ntt_stage")

    def off_by_one(grid, block, args, shared_mem=0):
        stage(grid, block, args, shared_mem)
        args[0][1, 0] ^= np.uint64(1)  # one limb of one element

    monkeypatch.setitem(gpu._modules["ntt.cu"], "ntt_stage", off_by_one)
    assert not np.array_equal(gpu.fr_ntt(x), N.fr_ntt(x))
