"""The GPU backend's own tests, on the CPU: the CUDA kernels compiled with g++ under
``tests/cuda_emu/cuda_emu.h`` and driven by the unchanged ``GpuBackend`` through
``tests/support/cupy_emu.py`` (a numpy stand-in for CuPy).

This checks the kernels' arithmetic on the DEVICE code paths of the shared headers, their
indexing, launch geometry, shared-memory tiles and atomics, and the backend's
orchestration, against the CPU core and snarkjs.  It does not check speed, NVRTC, the
driver or anything warp-specific: on a GPU, ``tests/test_gpu_backend.py`` runs the same
tests for real.
"""

import pytest

from support import cupy_emu
from cuzk_tasks.groth16.backends import gpu as G
from test_gpu_backend import (  # noqa: F401  (the tests and the fixture they share)
    bases,
    test_bls12_381_msm_ntt_and_h_match_cpu,
    test_bls12_381_proof_matches_cpu_and_verifies,
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
    test_evaluate_ab_wants_a_device_key,
    test_host_bases_are_copied_per_call,
    test_loaded_zkey_is_uploaded_once_and_owned_by_its_device_key,
)

pytestmark = pytest.mark.skipif(not cupy_emu.available(),
                                reason=f"the emulated kernels need a C++20 compiler ({cupy_emu.CXX})")


@pytest.fixture(scope="module", params=["forward", "reverse"])
def gpu(request):
    """The emulated backend, its threads run in order and in reverse order: a kernel whose
    result depends on the order (a race on a real GPU) fails one of the two."""
    with cupy_emu.installed_as_cupy(G), pytest.MonkeyPatch.context() as mp:
        mp.setenv(cupy_emu.ORDER_ENV, request.param)
        backend = G.GpuBackend()
    assert backend.device_name == "cuzk CUDA emulator (CPU)"
    yield backend
    backend.evict()


def test_a_wrong_kernel_result_is_caught(gpu, monkeypatch):
    """The differential tests above can fail: corrupt one kernel's output and they do."""
    import numpy as np

    from cuzk_tasks.groth16.backends import native as N
    from cuzk_tasks.groth16.curves import BN254
    from test_gpu_backend import random_mont

    import random

    x = random_mont(random.Random(1), 1 << 11)
    assert np.array_equal(gpu.fr_ntt(x), N.fr_ntt(x))
    kernels = gpu._kernels(BN254)["ntt.cu"]
    stage = kernels["ntt_stage"]

    def off_by_one(grid, block, args, shared_mem=0):
        stage(grid, block, args, shared_mem)
        args[0][1, 0] ^= np.uint64(1)  # one limb of one element

    monkeypatch.setitem(kernels, "ntt_stage", off_by_one)
    assert not np.array_equal(gpu.fr_ntt(x), N.fr_ntt(x))


class _EmulatedCluster:
    """A CPU worker and device workers with ``--backend gpu`` whose ``import cupy`` is the
    emulator (tests/cuda_emu/site); ``device_env`` gives per-device extra environment."""

    def __init__(self, redis_url, tmp_path, device_env):
        import os
        import pathlib
        import uuid

        from cuzk_tasks.client import Client
        from cuzk_tasks.settings.config import load_settings
        from support.processes import start_logged, worker_argv, write_circuits_toml

        self.root = pathlib.Path(__file__).resolve().parent.parent
        fixtures = self.root / "tests" / "fixtures"
        self.fixtures = {"mulchain": fixtures / "mulchain", "bls_mulchain": fixtures / "bls12381" / "mulchain"}
        self.tmp = tmp_path
        config = write_circuits_toml(tmp_path / "cuzk.toml",
                                     {name: ("test-mul", d) for name, d in self.fixtures.items()})
        tag = uuid.uuid4().hex[:6]
        env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_REDIS_URL=redis_url,
                   CUZK_PREFIX="emu" + tag, CUZK_HOSTNAME="emuhost" + tag,
                   CUZK_CPU_QUEUE="emu.cpu." + tag, CUZK_SPOOL_DIR=str(tmp_path / "spool"),
                   CUZK_THREADS="1", CUZK_HEARTBEAT_INTERVAL_S="0.25", CUZK_HEARTBEAT_TTL_S="1.5",
                   PYTHONPATH=os.pathsep.join([str(self.root / "tests" / "cuda_emu" / "site"),
                                               str(self.root), os.environ.get("PYTHONPATH", "")]))
        env.pop(cupy_emu.FAIL_KERNEL_ENV, None)
        env.pop(cupy_emu.CORRUPT_KERNEL_ENV, None)
        self.settings = load_settings(env=env)
        self.procs = {}
        starts = [(f"dev{d}", ["--device", str(d), "--backend", "gpu"], extra)
                  for d, extra in enumerate(device_env)] + [("cpu", ["--cpu", "--concurrency", "1"], {})]
        for name, args, extra in starts:
            self.procs[name] = start_logged(worker_argv(*args), tmp_path / f"{name}.log",
                                            dict(env, **extra), self.root)
        self.client = Client(settings=self.settings)

    def wait_devices(self, n, timeout_s=90):
        import time

        deadline = time.monotonic() + timeout_s
        while len(self.client.store.live_device_workers()) < n:
            assert time.monotonic() < deadline, self.logs()
            time.sleep(0.1)

    def logs(self):
        return "\n".join(f"----- {name} -----\n" + (self.tmp / f"{name}.log").read_text()[-3000:]
                         for name in self.procs)

    def submit(self, n, circuit="mulchain"):
        import json

        inputs = json.loads((self.fixtures[circuit] / "input.json").read_text())
        return self.client.submit(circuit, [{"input": inputs}] * n)

    def prove(self, n, circuit="mulchain"):
        """Submit a job of ``n`` partitions, wait for it and check every proof; its id."""
        import json

        from cuzk_tasks.groth16 import verify

        job = self.submit(n, circuit)
        try:
            result = self.client.wait(job, timeout=120)
        except Exception:
            raise AssertionError(self.logs()) from None
        vk = json.loads((self.fixtures[circuit] / "verification_key.json").read_text())
        assert len(result["proofs"]) == n
        assert all(verify(vk, p["public"], p["proof"]) for p in result["proofs"])
        return job

    def stop(self):
        from support.processes import stop_process_group

        for proc in self.procs.values():
            stop_process_group(proc)


@pytest.mark.slow
def test_device_worker_proves_on_the_gpu_backend(redis_server_url, tmp_path):
    """A real device worker process with ``--backend gpu`` (CUDA initialised in its pool
    process), its ``import cupy`` resolving to the emulator: jobs of both curves prove on it,
    the proofs verify, and the worker publishes its device's memory to the state store as on
    a GPU host."""
    cluster = _EmulatedCluster(redis_server_url, tmp_path, [{}])
    try:
        cluster.wait_devices(1)
        job = cluster.prove(3)
        bls_job = cluster.prove(2, "bls_mulchain")
        assert cluster.client.store.get_job(bls_job)["curve"] == "bls12381"
        assert {p["worker"] for p in cluster.client.store.list_partitions(bls_job)} == {
            cluster.settings.device_worker_id(0)}
        worker = cluster.client.store.get_worker(cluster.settings.device_worker_id(0))
        assert worker["gpu_name"] == "cuzk CUDA emulator (CPU)"
        assert int(worker["gpu_mem_total_mb"]) == cupy_emu.EMULATED_MEMORY >> 20
        assert "backend gpu ready" in (tmp_path / "dev0.log").read_text()
    finally:
        cluster.stop()


@pytest.mark.slow
def test_a_device_fault_moves_the_partition_to_another_device(redis_server_url, tmp_path):
    """Issue 6: a CUDA error on one device gives a clear error and the partition is retried
    on another device; the job completes with valid proofs.  With every device faulting, the
    job fails with that error instead -- never a hung worker or a wrong proof."""
    fail = {cupy_emu.FAIL_KERNEL_ENV: "msm_digits"}
    cluster = _EmulatedCluster(redis_server_url, tmp_path, [fail, {}])
    try:
        cluster.wait_devices(2)
        store = cluster.client.store
        dev0, dev1 = (cluster.settings.device_worker_id(d) for d in (0, 1))
        job = cluster.prove(4)
        parts = store.list_partitions(job)
        faulted = [p for p in parts if p.get("device_faults")]
        assert faulted, "no partition was routed to the faulting device"
        for p in faulted:
            assert p["avoid"] == dev0 and p["worker"] == dev1 and p["attempt"] == 1
            assert "illegal memory access" in p["last_device_error"]
        assert store.get_worker(dev0)["state"] == "idle"
        assert "device error on" in (tmp_path / "dev0.log").read_text()

        # dev1 goes away: the next fault on dev0 has nowhere to go and fails the job clearly
        from support.processes import stop_process_group

        stop_process_group(cluster.procs["dev1"])
        store.worker_offline(dev1)
        job = cluster.submit(1)
        try:
            cluster.client.wait(job, timeout=60)
        except Exception as exc:
            message = str(exc)
        else:
            raise AssertionError("the job should have failed")
        assert "no other live device" in message and "illegal memory access" in message, message
        assert store.get_worker(dev0)["state"] == "idle"
    finally:
        cluster.stop()


CORRUPT_QAP = {cupy_emu.CORRUPT_KERNEL_ENV: "qap_coset_dif_tile"}


@pytest.mark.slow
def test_a_wrong_result_on_one_device_is_proved_again_on_another(redis_server_url, tmp_path):
    """Issue 11: a device whose kernel returns a wrong H (no error) makes proofs that fail
    self-verification in finalize.  That is the device's fault until a second device agrees:
    the partition is proved again on the other device, avoiding the faulty one, and the job
    completes with valid proofs."""
    cluster = _EmulatedCluster(redis_server_url, tmp_path, [CORRUPT_QAP, {}])
    try:
        cluster.wait_devices(2)
        store = cluster.client.store
        dev0, dev1 = (cluster.settings.device_worker_id(d) for d in (0, 1))
        job = cluster.prove(4)
        faulted = [p for p in store.list_partitions(job) if p.get("verify_faults")]
        assert faulted, "no partition was routed to the faulty device"
        for p in faulted:
            assert (p["avoid"], p["worker"], p["attempt"], p["verify_faults"]) == (dev0, dev1, 1, 1)
            assert "failed self-verification" in p["last_device_error"]
        assert "failed self-verification" in (tmp_path / "cpu.log").read_text()
    finally:
        cluster.stop()


@pytest.mark.slow
def test_a_wrong_proof_on_two_devices_fails_the_job_as_a_bad_witness(redis_server_url, tmp_path):
    """Two independent devices both making a proof that fails self-verification: the job
    fails (as with a bad witness) instead of being retried for ever."""
    cluster = _EmulatedCluster(redis_server_url, tmp_path, [CORRUPT_QAP, CORRUPT_QAP])
    try:
        cluster.wait_devices(2)
        job = cluster.submit(1)
        with pytest.raises(Exception) as failed:
            cluster.client.wait(job, timeout=90)
        message = str(failed.value)
        assert "failed self-verification" in message and "on two devices" in message, message
        part = cluster.client.store.get_partition(job, 0)
        assert part["state"] == "failed" and part["verify_faults"] == 2
    finally:
        cluster.stop()


@pytest.mark.slow
def test_gpu_check_script_dry_run(tmp_path):
    """bench/gpu_check.py, the one call a lent GPU gets, runs end to end under the emulator
    (small sizes), so that call is not lost to a bug in the script."""
    import json
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, OUT=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(root / "tests" / "cuda_emu" / "site"), str(root),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(root / "bench" / "gpu_check.py"), "--skip-build",
                           "--skip-tests", "--max-log", "11", "--budget", "240"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert {k: v["status"] for k, v in report["sections"].items()} == \
        {"ntt": "ok", "msm": "ok", "prove": "ok"}, proc.stdout[-3000:]
    results = report["results"]
    assert sorted(r["op"] for r in results) == ["msm", "ntt", "prove"]
    assert all(r.get("match_cpu") is True and "error" not in r for r in results), results
