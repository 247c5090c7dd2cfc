"""Backend selection and the GPU backend's host-side logic, without a device."""

import numpy as np
import pytest

from cuzk_tasks.errors import CuzkError, GpuError
from cuzk_tasks.groth16 import backends
from cuzk_tasks.groth16 import gpu as G


def test_auto_uses_cpu_without_a_device(monkeypatch):
    monkeypatch.setattr(G, "gpu_available", lambda: False)
    assert backends.get_backend("auto").name == "cpu"


def test_auto_never_raises_when_the_gpu_is_unusable(monkeypatch):
    class Broken:
        def __init__(self, **_):
            raise GpuError("kernel compile failed")

    monkeypatch.setattr(G, "gpu_available", lambda: True)
    monkeypatch.setattr(G, "GpuBackend", Broken)
    assert backends.get_backend("auto").name == "cpu"
    with pytest.raises(GpuError, match="kernel compile failed"):
        backends.get_backend("gpu")


@pytest.mark.skipif(G.gpu_available(), reason="a GPU is present")
def test_gpu_backend_without_device_is_a_clear_error():
    with pytest.raises(GpuError) as info:
        backends.get_backend("gpu")
    assert isinstance(info.value, CuzkError)
    assert "CuPy" in str(info.value) or "CUDA" in str(info.value) or "device" in str(info.value)


def test_missing_cupy_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(GpuError, match="pip install"):
        G.import_cupy()
    assert G.device_count() == 0


class _Dev:
    def __init__(self, nbytes):
        self.nbytes = nbytes


def _ro(n, fill):
    a = np.full((n, 8), fill, dtype=np.uint64)
    a.flags.writeable = False
    return a


def test_resident_set_lru_evicts_idle_circuits_only():
    rs = G.ResidentSet(budget_bytes=3000)
    a, b, c = _ro(4, 1), _ro(4, 2), _ro(4, 3)  # 256 bytes of host data each
    rs.add("A", a, "g1", _Dev(1000))
    rs.add("B", b, "g1", _Dev(1000))
    assert rs.lookup(a, "g1") is not None  # touches A: B is now least recently used
    assert rs.make_room(1500, current="C")
    rs.add("C", c, "g1", _Dev(1500))
    assert [r["circuit"] for r in rs.report()] == ["A", "C"]
    assert rs.used_bytes() == 2500
    # the current circuit is never evicted to make room for itself
    assert not rs.make_room(2000, current="C") or "C" in rs.circuits
    assert "C" in rs.circuits


def test_resident_set_detects_changed_source():
    rs = G.ResidentSet(budget_bytes=10**6)
    a = np.zeros((8, 8), dtype=np.uint64)
    view = a.view()
    view.flags.writeable = False
    rs.add("X", view, "g1", _Dev(512))
    assert rs.lookup(view, "g1") is not None
    a[0, 0] = 7  # the source changed under the cache: never reuse stale bases
    assert rs.lookup(view, "g1") is None


def test_window_bits(monkeypatch):
    monkeypatch.delenv("CUZK_GPU_MSM_WINDOW", raising=False)
    assert G.GpuBackend.window_bits(1) == 4
    assert G.GpuBackend.window_bits(1 << 20) == 16
    monkeypatch.setenv("CUZK_GPU_MSM_WINDOW", "9")
    assert G.GpuBackend.window_bits(1 << 20) == 9


def test_source_hash_changes_with_the_options():
    opts = G.nvrtc_options("sm_90")
    assert "-std=c++17" in opts and f"-I{G.INCLUDE_DIR}" in opts
    assert any(o.startswith("-DCUZK_SRC_HASH=") for o in opts)
    assert "--gpu-architecture=sm_90" in opts


class _BackendWithMemory:
    """The part of GpuBackend's interface the pipeline publishes (memory_info's real shape)."""

    def memory_info(self):
        return {"device": 0, "name": "NVIDIA H200", "total_bytes": 141 << 30, "free_bytes": 100 << 30,
                "resident_bytes": 3 << 30, "budget_bytes": 80 << 30, "pool_used_bytes": 0,
                "pool_held_bytes": 0}


def test_device_memory_reaches_the_worker_hash():
    import fakeredis

    from cuzk_tasks.pipeline import publish_device_memory
    from cuzk_tasks.state import StateStore, WorkerRole

    store = StateStore(fakeredis.FakeRedis(decode_responses=True), prefix="memtest")
    store.register_worker("h:dev0", WorkerRole.DEVICE, "h", device=0, queue="q")
    assert publish_device_memory(store, "h:dev0", 5.0, _BackendWithMemory())
    worker = store.get_worker("h:dev0")
    assert worker["gpu_name"] == "NVIDIA H200"
    assert int(worker["gpu_mem_total_mb"]) == 141 * 1024
    assert int(worker["gpu_mem_used_mb"]) == 41 * 1024
    assert int(worker["gpu_resident_mb"]) == 3 * 1024
    assert worker["state"] == "idle"  # publishing never touches state or token
    # The CPU core has no device memory: nothing is published.
    from cuzk_tasks.groth16.backends import CpuBackend

    assert not publish_device_memory(store, "h:dev0", 5.0, CpuBackend())
