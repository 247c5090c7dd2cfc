"""GPU backend (CuPy) against the native CPU core: differential and end-to-end tests.

Marked ``gpu``; every test here is skipped without a CUDA device that CuPy can
see (the skip reason says so).  They have NOT yet run on a device: they are the
acceptance tests for ``cuzk_tasks.groth16.backends.gpu`` on the first lent GPU
(``bench/gpu_check.py`` runs them with ``pytest -m gpu``).  The same tests also run
in CI on the CPU, against the kernels compiled with g++ under a CUDA emulation
(``tests/test_gpu_emulated.py``).
"""

import json
import random

import numpy as np
import pytest

from cuzk_tasks.groth16.backends import gpu as G
from cuzk_tasks.groth16.backends import native as N
from cuzk_tasks.groth16 import points as P
from cuzk_tasks.groth16.reference.curve import G1
from cuzk_tasks.groth16.reference.field import FR, MONT_R
from support.snarkjs_tool import (BLS12381_FIXTURES, FIXTURES, fixture_dir, requires_snarkjs,
                                  run_snarkjs)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not G.gpu_available(),
                       reason="no CUDA device visible to CuPy (or CuPy not installed): "
                              "the GPU backend tests need a GPU"),
]


@pytest.fixture(scope="module")
def gpu():
    backend = G.GpuBackend()
    yield backend
    backend.evict()


def arr(values):
    return P.ints_to_limb_array(values) if values else np.zeros((0, 4), dtype=np.uint64)


def random_bases(rnd, n):
    """n random G1 points (Montgomery rows), by the CPU core: k_i * G via a small table."""
    gen = P.g1_affine_to_mont(G1.generator)
    rows = np.zeros((n, 8), dtype=np.uint64)
    for i in range(n):
        k = arr([rnd.randrange(1, FR)])
        rows[i] = N.g1_point_op(N.POINT_MUL, gen, k)
    return rows


@pytest.fixture(scope="module")
def bases():
    return random_bases(random.Random(7), 300)


def cpu_msm(bases, scalars):
    return P.g1_jacobian_to_affine(N.g1_msm(bases, scalars))


# ---------------------------------------------------------------------------- MSM

EDGE = [0, 1, 2, FR - 1, FR - 2, (FR - 1) // 2, 2**253, 2**128 - 1, 2**64, 2**64 - 1]


def test_backend_reports_device(gpu):
    info = gpu.memory_info()
    assert info["total_bytes"] > 0 and info["free_bytes"] > 0
    assert gpu.name == "gpu"


@pytest.mark.parametrize("n", [1, 2, 3, 17, 64, 255, 300])
def test_g1_msm_random_matches_cpu(gpu, bases, n):
    rnd = random.Random(n)
    scalars = arr([rnd.randrange(FR) for _ in range(n)])
    assert gpu.g1_msm(bases[:n], scalars) == cpu_msm(bases[:n], scalars)


def test_g1_msm_edge_scalars(gpu, bases):
    n = len(EDGE) * 3
    scalars = arr(EDGE * 3)
    assert gpu.g1_msm(bases[:n], scalars) == cpu_msm(bases[:n], scalars)


@pytest.mark.parametrize("k", [0, 1, FR - 1, FR, FR + 5, 2**256 - 1])
def test_g1_msm_single_scalar_and_unreduced(gpu, bases, k):
    scalars = arr([k])
    assert gpu.g1_msm(bases[:1], scalars) == cpu_msm(bases[:1], scalars)


def test_g1_msm_all_zero_scalars_is_infinity(gpu, bases):
    assert gpu.g1_msm(bases[:50], arr([0] * 50)) is None


def test_g1_msm_infinity_bases_are_skipped(gpu, bases):
    b = bases[:40].copy()
    b[::3] = 0
    rnd = random.Random(3)
    scalars = arr([rnd.randrange(FR) for _ in range(40)])
    assert gpu.g1_msm(b, scalars) == cpu_msm(b, scalars)
    assert gpu.g1_msm(np.zeros((5, 8), dtype=np.uint64), arr([1, 2, 3, 4, 5])) is None


def test_g1_msm_repeated_bases_and_cancellation(gpu, bases):
    # same point many times (bucket doublings), P and -P (cancellation), r-1 = -1
    b = np.repeat(bases[:2], 100, axis=0)
    scalars = arr([1] * 100 + [FR - 1] * 100)
    assert gpu.g1_msm(b, scalars) == cpu_msm(b, scalars)
    b2 = np.concatenate([bases[:1], bases[:1]])
    assert gpu.g1_msm(b2, arr([5, FR - 5])) is None


def test_g1_msm_skewed_buckets(gpu, bases):
    # many equal scalars (witnesses are full of ones): one huge bucket, multi-level reduction
    n = 5000
    b = np.tile(bases, (n // len(bases) + 1, 1))[:n]
    scalars = arr([1] * (n - 10) + [2, 3, FR - 1, 0, 7, 7, 7, 1, 1, 2**200])
    assert gpu.g1_msm(b, scalars) == cpu_msm(b, scalars)


@pytest.mark.parametrize("window", ["4", "9", "13"])
def test_g1_msm_window_sizes(gpu, bases, window, monkeypatch):
    monkeypatch.setenv("CUZK_GPU_MSM_WINDOW", window)
    rnd = random.Random(int(window))
    scalars = arr([rnd.randrange(FR) for _ in range(300)])
    assert gpu.g1_msm(bases, scalars) == cpu_msm(bases, scalars)


def test_g1_msm_larger_random(gpu):
    n = 1 << 14
    rnd = random.Random(5)
    base = random_bases(rnd, 64)
    b = np.tile(base, (n // 64, 1))
    scalars = np.frombuffer(rnd.randbytes(32 * n), dtype=np.uint64).reshape(n, 4).copy()
    scalars[:, 3] &= np.uint64((1 << 61) - 1)  # mostly < r; the rest exercise the reduction
    assert gpu.g1_msm(b, scalars) == cpu_msm(b, scalars)


def test_loaded_zkey_is_uploaded_once_and_owned_by_its_device_key(gpu):
    """load() uploads a zkey's G1 sections and coefficients once: the same zkey object gets
    the same DeviceZkey back, the device memory is counted while it is loaded and freed by
    evict(), and the same file read again (another object) is uploaded again, never
    mistaken for the first by its address."""
    gpu.evict()
    zkey, _ = _load("mulchain")
    key = gpu.load(zkey)
    assert isinstance(key, G.DeviceZkey) and key.curve is zkey.curve
    assert key.nbytes >= zkey.a_points.nbytes + zkey.h_points.nbytes
    assert gpu.memory_info()["resident_bytes"] == key.nbytes
    assert gpu.load(zkey) is key
    assert [r["circuit"] for r in gpu.resident_circuits()] == [str(zkey.path)]
    again, _ = _load("mulchain")
    fresh = gpu.load(again)
    assert fresh is not key and fresh.mirrors(again) and not fresh.mirrors(zkey)
    assert gpu.memory_info()["resident_bytes"] == fresh.nbytes  # the stale copy was dropped
    gpu.evict()
    assert gpu.memory_info()["resident_bytes"] == 0 and gpu.resident_circuits() == []


def test_host_bases_are_copied_per_call(gpu, bases):
    """Host bases given to an MSM directly are not cached: change them and the next MSM sees
    the change (an address-keyed cache would not)."""
    gpu.evict()
    b = bases[:100].copy()
    s = arr(list(range(100)))
    first = gpu.g1_msm(b, s)
    assert first == cpu_msm(b, s)
    assert gpu.memory_info()["resident_bytes"] == 0
    b[:50] = bases[100:150]
    assert gpu.g1_msm(b, s) == cpu_msm(b, s) != first


def test_evaluate_ab_wants_a_device_key(gpu):
    zkey, witness = _load("mulchain")
    with pytest.raises(TypeError, match="DeviceZkey"):
        gpu.evaluate_ab(zkey, np.ascontiguousarray(witness.values, dtype=np.uint64))


# ---------------------------------------------------------------------------- NTT / QAP

def random_mont(rnd, n):
    return arr([rnd.randrange(FR) * MONT_R % FR for _ in range(n)])


@pytest.mark.parametrize("log_n", [1, 2, 5, 10, 11, 12, 14])
def test_ntt_matches_cpu_and_round_trips(gpu, log_n):
    rnd = random.Random(log_n)
    x = random_mont(rnd, 1 << log_n)
    fwd = gpu.fr_ntt(x)
    assert np.array_equal(fwd, N.fr_ntt(x))
    assert np.array_equal(gpu.fr_ntt(fwd, inverse=True), x)


@pytest.mark.parametrize("log_n", [1, 3, 10, 11, 13])
def test_compute_h_matches_cpu(gpu, log_n):
    rnd = random.Random(100 + log_n)
    a = random_mont(rnd, 1 << log_n)
    b = random_mont(rnd, 1 << log_n)
    h = gpu.compute_h(a, b)
    assert np.array_equal(gpu.asnumpy(h), N.compute_h(a, b))


def _load(name):
    from cuzk_tasks.groth16.formats.wtns import read_wtns
    from cuzk_tasks.groth16.formats.zkey import read_zkey

    zkey = read_zkey(fixture_dir(name) / "circuit.zkey")
    witness = read_wtns(fixture_dir(name) / "witness.wtns", expected_length=zkey.n_vars)
    return zkey, witness


@pytest.mark.parametrize("name", FIXTURES)
def test_evaluate_ab_and_h_match_cpu(gpu, name):
    zkey, witness = _load(name)
    w = np.ascontiguousarray(witness.values, dtype=np.uint64)
    a_cpu, b_cpu = N.evaluate_ab(zkey.coefs, w, zkey.domain_size)
    a_gpu, b_gpu = gpu.evaluate_ab(gpu.load(zkey), w)
    assert np.array_equal(gpu.asnumpy(a_gpu), a_cpu)
    assert np.array_equal(gpu.asnumpy(b_gpu), b_cpu)
    assert np.array_equal(gpu.asnumpy(gpu.compute_h(a_gpu, b_gpu)), N.compute_h(a_cpu, b_cpu))


# ---------------------------------------------------------------------------- full proofs

@pytest.mark.parametrize("name", FIXTURES)
def test_prove_start_matches_cpu(gpu, name):
    from cuzk_tasks.groth16.backends.select import CpuBackend
    from cuzk_tasks.groth16.prover import prove_start

    zkey, witness = _load(name)
    on_gpu = prove_start(zkey, witness, backend=gpu)
    gpu.trim_scratch()
    on_cpu = prove_start(zkey, witness, backend=CpuBackend())
    assert (on_gpu.a, on_gpu.b1, on_gpu.c, on_gpu.h) == (on_cpu.a, on_cpu.b1, on_cpu.c, on_cpu.h)
    assert on_gpu.backend == "gpu"
    assert any(r["circuit"] == str(zkey.path) for r in gpu.resident_circuits())


@pytest.mark.parametrize("name", FIXTURES)
def test_full_proof_verifies(gpu, name, tmp_path):
    from cuzk_tasks.groth16.prover import prove
    from cuzk_tasks.groth16.verifier import verify

    zkey, witness = _load(name)
    proof, public = prove(zkey, witness, backend=gpu)
    vkey = json.loads((fixture_dir(name) / "verification_key.json").read_text())
    assert verify(vkey, public, proof)
    assert public == json.loads((fixture_dir(name) / "public.json").read_text())
    (tmp_path / "proof.json").write_text(json.dumps(proof))
    (tmp_path / "public.json").write_text(json.dumps(public))


@pytest.mark.snarkjs
@requires_snarkjs
@pytest.mark.parametrize("name", FIXTURES)
def test_full_proof_verifies_with_snarkjs(gpu, name, tmp_path):
    from cuzk_tasks.groth16.prover import prove

    zkey, witness = _load(name)
    proof, public = prove(zkey, witness, backend=gpu)
    (tmp_path / "proof.json").write_text(json.dumps(proof))
    (tmp_path / "public.json").write_text(json.dumps(public))
    d = fixture_dir(name)
    result = run_snarkjs("groth16", "verify", d / "verification_key.json",
                         tmp_path / "public.json", tmp_path / "proof.json")
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------------------- BLS12-381

def _bls_bases(rnd, n):
    """n random BLS12-381 G1 points (Montgomery rows, 12 limbs), by the CPU core."""
    from cuzk_tasks.groth16.curves import BLS12_381

    gen = P.g1_affine_to_mont(BLS12_381.g1, BLS12_381)
    return np.stack([N.g1_point_op(N.POINT_MUL, gen, arr([rnd.randrange(1, BLS12_381.r)]),
                                   curve=BLS12_381) for _ in range(n)])


def test_bls12_381_msm_ntt_and_h_match_cpu(gpu):
    """The backend drives the kernels compiled for BLS12-381: 6-limb bases, 255-bit scalars
    (r-1 and values >= r included), the curve's own roots of unity."""
    from cuzk_tasks.groth16.curves import BLS12_381 as C

    rnd = random.Random(12)
    b = _bls_bases(rnd, 40)
    b[5] = 0  # a base at infinity
    scalars = arr([0, 1, C.r - 1, C.r, 2**256 - 1] + [rnd.randrange(C.r) for _ in range(35)])
    cpu = P.g1_jacobian_to_affine(N.g1_msm(b, scalars, curve=C), C)
    assert gpu.g1_msm(b, scalars, curve=C) == cpu is not None
    x = arr([rnd.randrange(C.r) * C.mont_r_r % C.r for _ in range(1 << 6)])
    assert np.array_equal(gpu.fr_ntt(x, curve=C), N.fr_ntt(x, curve=C))
    assert not np.array_equal(gpu.fr_ntt(x, curve=C), gpu.fr_ntt(x))  # BN254's roots differ
    y = arr([rnd.randrange(C.r) * C.mont_r_r % C.r for _ in range(1 << 6)])
    assert np.array_equal(gpu.asnumpy(gpu.compute_h(x, y, curve=C)), N.compute_h(x, y, curve=C))


@pytest.mark.parametrize("name", BLS12381_FIXTURES)
def test_bls12_381_proof_matches_cpu_and_verifies(gpu, name):
    from cuzk_tasks.groth16.backends.select import CpuBackend
    from cuzk_tasks.groth16.prover import prove, prove_start
    from cuzk_tasks.groth16.verifier import verify

    zkey, witness = _load(name)
    on_gpu = prove_start(zkey, witness, backend=gpu)
    on_cpu = prove_start(zkey, witness, backend=CpuBackend())
    assert (on_gpu.a, on_gpu.b1, on_gpu.c, on_gpu.h) == (on_cpu.a, on_cpu.b1, on_cpu.c, on_cpu.h)
    assert on_gpu.curve is zkey.curve and on_gpu.backend == "gpu"
    proof, public = prove(zkey, witness, backend=gpu)
    vkey = json.loads((fixture_dir(name) / "verification_key.json").read_text())
    assert proof["curve"] == "bls12381" and verify(vkey, public, proof)


def test_auto_backend_picks_the_gpu():
    from cuzk_tasks.groth16.backends.select import get_backend

    assert get_backend("auto").name == "gpu"
