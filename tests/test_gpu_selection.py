"""Backend selection and the GPU backend's host-side logic, without a device."""

import pytest

from cuzk_tasks.errors import CuzkError, GpuError
from cuzk_tasks.groth16.backends import select as backends
from cuzk_tasks.groth16.backends import gpu as G


def test_auto_uses_cpu_without_a_device(monkeypatch):
    monkeypatch.setattr(G, "gpu_available", lambda: False)
    assert backends.get_backend("auto").name == "cpu"


def test_auto_never_raises_when_the_gpu_is_unusable(monkeypatch):
    class Broken:
        def __init__(self, **_):
            raise GpuError("kernel compile failed")

    monkeypatch.setattr(backends, "nvidia_driver_present", lambda: True)
    monkeypatch.setattr(G, "gpu_available", lambda: True)
    monkeypatch.setattr(G, "GpuBackend", Broken)
    assert backends.get_backend("auto").name == "cpu"
    with pytest.raises(GpuError, match="kernel compile failed"):
        backends.get_backend("gpu")


def test_auto_on_a_host_without_a_driver_does_not_import_the_gpu_backend():
    """The CLI's and the device worker's default, on a CPU host: the CPU core, without
    paying for importing the GPU backend (or CuPy) at every start."""
    import subprocess
    import sys

    from cuzk_tasks.groth16.backends.devices import nvidia_driver_present

    if nvidia_driver_present():
        pytest.skip("this host has an NVIDIA driver")
    code = ("import sys; from cuzk_tasks.groth16.backends.select import get_backend; "
            "print(get_backend('auto').name, 'cuzk_tasks.groth16.backends.gpu' in sys.modules, "
            "'cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "False", "False"]


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


class _Key:
    """Stands in for a DeviceZkey: a name, a size and the host key it mirrors."""

    def __init__(self, name, nbytes, source):
        self.name, self.nbytes, self.source, self.last_used = name, nbytes, source, 0.0

    def mirrors(self, zkey):
        return self.source is zkey


def test_device_residency_evicts_idle_keys_least_recently_used_first():
    res = G.DeviceResidency(budget_bytes=3000)
    za, zb, zc = object(), object(), object()
    res.add(_Key("A", 1000, za))
    res.add(_Key("B", 1000, zb))
    assert res.get(za, "A") is not None  # touches A: B is now least recently used
    assert res.make_room(1500, keep="C")
    res.add(_Key("C", 1500, zc))
    assert [r["circuit"] for r in res.report()] == ["A", "C"]
    assert res.used_bytes() == 2500
    # the key being loaded is never evicted to make room for itself
    assert not res.make_room(3000, keep="C")
    assert "C" in res.keys and "A" not in res.keys


def test_device_residency_drops_a_copy_of_another_zkey_object():
    """The same circuit read again is another zkey object: its old device copy is stale."""
    res = G.DeviceResidency(budget_bytes=10**6)
    first, second = object(), object()
    res.add(_Key("X", 512, first))
    assert res.get(first, "X") is not None
    assert res.get(second, "X") is None
    assert res.used_bytes() == 0


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
    from cuzk_tasks.groth16.backends.select import CpuBackend

    assert not publish_device_memory(store, "h:dev0", 5.0, CpuBackend())
