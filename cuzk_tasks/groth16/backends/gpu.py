"""GPU compute backend on CuPy (CUDA), behind the same interface as the CPU core.

STATUS: compile-checked and CPU-emulated, never run on a GPU.  The kernels
(``cuzk_tasks/native/cuda/*.cu``) compile through NVRTC and nvcc in CI, and CI runs
this backend's tests with the kernels compiled by g++ under a CUDA emulation
(``tests/test_gpu_emulated.py``, ``tests/cupy_emu.py``): results match the CPU core.
It has not yet run on a GPU: the ``gpu``-marked tests and ``bench/gpu_check.py`` are
what will validate it on a machine with a device.  ``prove_finish`` self-verifies
every proof, so a wrong kernel result is discarded, never returned.

Design
------
* Kernels are compiled by NVRTC through ``cupy.RawModule`` (CuPy caches the
  binaries on disk, keyed by source and options; the options carry a hash of
  the shared headers so a header change recompiles).  The field and curve
  arithmetic is the SAME code as the CPU core (``cuzk/field.cuh`` etc.).
* One backend per process, bound to the process's current CUDA device (the
  device worker sets ``CUDA_VISIBLE_DEVICES`` so that is its one device).
* ``evaluate_ab`` / ``compute_h`` keep their results on the device (CuPy
  arrays), so :func:`cuzk_tasks.groth16.prover.prove_start` moves only the
  witness in and four affine points out.  numpy inputs are accepted too.
* The device owns its copy of a zkey explicitly, as sppark's ``msm_t`` owns its
  points: :meth:`GpuBackend.load` uploads the four G1 base sections and the CSR form
  of the coefficients once and returns a :class:`DeviceZkey`, which the prover passes
  to :meth:`~GpuBackend.evaluate_ab` and whose sections it passes to
  :meth:`~GpuBackend.g1_msm`.  The backend keeps loaded keys for the next proof of the
  same zkey object under a device-memory budget (env ``CUZK_GPU_BASES_BUDGET_MB``,
  default 60 % of the device), evicting idle ones least recently used first.  Host
  arrays handed to an MSM directly are copied for that call only: nothing is cached by
  address, and no call depends on state an earlier one left behind.
* Kernels are compiled per curve (``-DCUZK_GPU_CURVE``): BN254 when the backend
  starts, BLS12-381 on its first use.
* Scratch memory goes back to CuPy's pool after each MSM; when the pool holds
  more than ``CUZK_GPU_SCRATCH_KEEP_MB`` (default 2048) of free blocks they
  are released to the driver.
* ``g2_msm`` runs on the CPU core (it is in ``prove_finish``, on the CPU
  worker, anyway).
* Failures raise :class:`~cuzk_tasks.errors.GpuError`: CuPy missing, no
  device/driver, compile error (with the NVRTC log), out of memory (after one
  retry with idle circuits evicted), any CUDA error.  The pipeline retries the
  partition on another device (``prove_fault``).  Problems with the input itself
  (a witness value >= r, a malformed coefficient, a size over the GPU's limits)
  are :class:`~cuzk_tasks.errors.ProofError`: retrying elsewhere would not help.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import logging
import os
import pathlib
import threading
import time
import weakref

import numpy as np

from cuzk_tasks.settings import defaults
from cuzk_tasks.errors import CuzkError, GpuError, ProofError
from .. import points
from ..curves import BLS12_381, BN254
from ..formats.zkey import COEF_DTYPE, limbs_ge
from ..reference.ntt import root_of_unity
from . import native
from .devices import nvidia_driver_present

log = logging.getLogger(__name__)

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[2]
INCLUDE_DIR = PACKAGE_DIR / "native" / "include"
KERNEL_DIR = PACKAGE_DIR / "native" / "cuda"
KERNEL_FILES = ("ntt.cu", "qap.cu", "msm.cu")

KERNEL_NAMES = {
    "ntt.cu": ("ntt_bitrev_copy", "ntt_tile_dit", "ntt_tile_dif", "ntt_stage", "fr_scale",
               "fr_geometric", "fr_to_mont", "fr_from_mont"),
    "qap.cu": ("qap_evaluate_abc", "qap_mul", "qap_coset_dif_tile", "qap_h_last_stage"),
    "msm.cu": ("msm_digits", "msm_scatter", "msm_accumulate_points", "msm_accumulate_partials",
               "msm_bucket_reduce", "msm_final"),
}

NTT_TILE_LOG = 10          # must match CUZK_NTT_TILE_LOG in gpu_common.cuh
MAX_LOG_DOMAIN = 27        # the coset generator needs ROOTS[log_n + 1], max 28
MSM_TASK = 32              # points (or partials) summed per thread per level
MSM_SEGMENT = 32           # buckets per thread in the running-sum reduction
THREADS = 256
EC_THREADS = 128           # curve kernels use many registers

_U64_MASK = (1 << 64) - 1


# --------------------------------------------------------------------------- sources / options

def source_hash():
    """Hash of the shared headers and kernel files (part of the compile options, so CuPy's
    on-disk cache, which only hashes the top-level source, recompiles after a header edit)."""
    h = hashlib.sha256()
    files = sorted((INCLUDE_DIR / "cuzk").glob("*.cuh")) + sorted(KERNEL_DIR.glob("*.cu*"))
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def kernel_source(name):
    return (KERNEL_DIR / name).read_text()


# snarkjs curve name -> the curve bundle the kernels are compiled for (gpu_common.cuh)
KERNEL_CURVES = {"bn128": "BN254", "bls12381": "BLS12_381"}


def nvrtc_options(arch=None, curve="bn128"):
    """NVRTC options for the kernel files (``arch`` e.g. ``"sm_90"``; None = CuPy's default).

    ``curve`` ("bn128", "bls12381") picks the curve the kernels are compiled for.
    """
    if curve not in KERNEL_CURVES:
        raise ValueError(f"unknown curve {curve!r}: expected one of {sorted(KERNEL_CURVES)}")
    opts = ["-std=c++17", f"-I{INCLUDE_DIR}", f"-I{KERNEL_DIR}", f"-DCUZK_SRC_HASH=0x{source_hash()}ULL",
            f"-DCUZK_GPU_CURVE={KERNEL_CURVES[curve]}"]
    if arch:
        opts.append(f"--gpu-architecture={arch}")
    return tuple(opts)


# --------------------------------------------------------------------------- cupy import / probing

def import_cupy():
    """``cupy``, or GpuError saying how to install it."""
    try:
        # lazy: CuPy is the optional [gpu] extra, loaded only when a GPU backend is asked for
        import cupy
    except ImportError as exc:
        raise GpuError(
            f"the GPU backend needs CuPy, which is not installed ({exc}): pip install "
            "'cuzk-tasks[gpu]' (cupy-cuda12x) on a host with an NVIDIA driver, or run with "
            "--backend cpu") from None
    except Exception as exc:  # a broken CUDA install can fail at import
        raise GpuError(f"CuPy failed to import ({exc!r}); check the CUDA installation, or run with "
                       "--backend cpu") from None
    return cupy


def device_count():
    """Number of CUDA devices CuPy sees (0 without CuPy, driver or device; never raises).

    Without an NVIDIA driver node there can be no device, and importing CuPy (~0.1 s and
    tens of MB) would only slow down every ``auto`` start on CPU hosts: answer 0 at once."""
    if not nvidia_driver_present():
        return 0
    try:
        # lazy: CuPy is the optional [gpu] extra, loaded only when a GPU backend is asked for
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def gpu_available():
    """True when CuPy is installed and sees at least one CUDA device."""
    return device_count() > 0


def _is_cupy_array(x):
    return type(x).__module__.startswith("cupy")


def _fr_mont_limbs(value, curve):
    v = (value % curve.r) * curve.mont_r_r % curve.r
    return np.array([(v >> (64 * i)) & _U64_MASK for i in range(4)], dtype=np.uint64)


def circuit_name(zkey):
    """The name a zkey's device copy is reported under: its path, else its object id."""
    return str(getattr(zkey, "path", None) or f"zkey@{id(zkey):x}")


# --------------------------------------------------------------------------- device-resident zkeys

#: the zkey sections the G1 MSMs of prove_start read, uploaded once per DeviceZkey
G1_SECTIONS = ("a_points", "b1_points", "c_points", "h_points")


def _source_ref(zkey):
    """A reference to the host key that does not keep it alive when the type allows one."""
    try:
        return weakref.ref(zkey)
    except TypeError:  # e.g. a SimpleNamespace stand-in: hold it
        return lambda: zkey


class DeviceZkey:
    """One zkey's read-only proving data on one device, uploaded once by
    :meth:`GpuBackend.load`: the four G1 base sections and section 4's coefficients as a
    CSR matrix (sorted by matrix and constraint).

    Like sppark's ``msm_t`` it owns its device memory, which goes back to CuPy's pool with
    the last reference.  :func:`cuzk_tasks.groth16.prover.prove_start` takes it from
    ``backend.load(zkey)`` and hands it (and its base arrays) to the backend's methods,
    where the CPU core gets the host zkey itself, so no call depends on an earlier one.
    """

    def __init__(self, zkey, name, csr, bases):
        self.name = name
        self.curve = zkey.curve
        self.domain_size = int(zkey.domain_size)
        self.n_vars = int(zkey.n_vars)
        self.csr = csr  # (row_off u32[2*domain+1], signal u32[n], value u64[n, 4]) on the device
        self.a_points, self.b1_points, self.c_points, self.h_points = (
            bases[section] for section in G1_SECTIONS)
        self.nbytes = sum(int(a.nbytes) for a in (*csr, *bases.values()))
        self.last_used = time.time()
        self._source = _source_ref(zkey)

    def mirrors(self, zkey):
        """True when this is the device copy of ``zkey``: that very object, still alive (a
        zkey read again from its file is another object, and is uploaded again)."""
        return self._source() is zkey


class DeviceResidency:
    """The DeviceZkeys a backend keeps loaded between proofs, under a device-memory budget,
    least recently used first.  Only idle keys are evicted: a proof in flight holds its
    DeviceZkey, so dropping it here frees its memory only when that proof is done."""

    def __init__(self, budget_bytes):
        self.budget_bytes = int(budget_bytes)
        self.keys: "collections.OrderedDict[str, DeviceZkey]" = collections.OrderedDict()

    def get(self, zkey, name):
        """The loaded copy of ``zkey`` under ``name``, or None (a stale copy is dropped)."""
        held = self.keys.get(name)
        if held is None:
            return None
        if not held.mirrors(zkey):
            self.evict(name)  # the circuit's zkey was read again: its old copy is stale
            return None
        self.keys.move_to_end(name)
        held.last_used = time.time()
        return held

    def used_bytes(self):
        return sum(key.nbytes for key in self.keys.values())

    def make_room(self, nbytes, keep):
        """Evict least recently used keys other than ``keep`` until ``nbytes`` more fit."""
        for name in list(self.keys):
            if self.used_bytes() + nbytes <= self.budget_bytes:
                break
            if name != keep:
                self.evict(name)
        return self.used_bytes() + nbytes <= self.budget_bytes

    def add(self, key):
        self.keys[key.name] = key
        self.keys.move_to_end(key.name)

    def evict(self, name=None):
        for n in list(self.keys) if name is None else [name]:
            if self.keys.pop(n, None) is not None:
                log.info("GPU: evicted the device copy of %s", n)

    def report(self):
        return [{"circuit": key.name, "bytes": key.nbytes, "last_used": key.last_used}
                for key in self.keys.values()]


# --------------------------------------------------------------------------- the backend

def _gpu_call(fn):
    """Run a backend method on the backend's device, mapping CUDA failures to GpuError."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        cp = self._cp
        with self._lock, self._device:
            for attempt in (0, 1):
                try:
                    return fn(self, *args, **kwargs)
                except cp.cuda.memory.OutOfMemoryError as exc:
                    if attempt == 0:
                        log.warning("GPU out of memory in %s; evicting idle circuits and retrying",
                                    fn.__name__)
                        self._resident.evict()
                        self._pool.free_all_blocks()
                        continue
                    raise GpuError(
                        f"GPU device {self.device_id} ran out of memory in {fn.__name__} ({exc}); "
                        "lower CUZK_GPU_BASES_BUDGET_MB, prove a smaller circuit, or use "
                        "--backend cpu") from None
                except CuzkError:
                    raise
                except (cp.cuda.runtime.CUDARuntimeError, cp.cuda.driver.CUDADriverError) as exc:
                    raise GpuError(f"CUDA error on device {self.device_id} in {fn.__name__}: "
                                   f"{exc}") from None

    return wrapper


class GpuBackend:
    """Groth16 heavy lifting on one CUDA device (see module docstring)."""

    name = "gpu"
    #: the curves it proves (kernels compiled per curve from the same sources)
    curves = (BN254, BLS12_381)

    def __init__(self, device=None, bases_budget_mb=None, scratch_keep_mb=None, threads=None):
        cp = import_cupy()
        self._cp = cp
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as exc:  # CUDARuntimeError: no driver, insufficient driver, ...
            raise GpuError(f"no usable CUDA device: {exc} (is the NVIDIA driver installed and "
                           "the device visible, e.g. CUDA_VISIBLE_DEVICES?)") from None
        if count <= 0:
            raise GpuError("CuPy sees no CUDA device (check CUDA_VISIBLE_DEVICES and the driver)")
        self.device_id = int(cp.cuda.runtime.getDevice() if device is None else device)
        if not 0 <= self.device_id < count:
            raise GpuError(f"CUDA device {self.device_id} does not exist ({count} visible)")
        self._device = cp.cuda.Device(self.device_id)
        self._lock = threading.RLock()
        self._threads = threads  # for the CPU fallbacks (G2 MSM)
        self._modules = {}  # snarkjs curve name -> {kernel file -> {kernel name -> function}}
        with self._device:
            try:
                props = cp.cuda.runtime.getDeviceProperties(self.device_id)
                self.device_name = props["name"].decode() if isinstance(props["name"], bytes) \
                    else str(props["name"])
                self.compute_capability = f"{props['major']}{props['minor']}"
                free, total = cp.cuda.runtime.memGetInfo()
            except Exception as exc:
                raise GpuError(f"cannot query CUDA device {self.device_id}: {exc}") from None
            self.total_memory = int(total)
            self._pool = cp.get_default_memory_pool()
            # BN254 now, so a broken toolchain fails the worker's start; other curves on first use
            self._kernels(BN254)
        budget = bases_budget_mb if bases_budget_mb is not None else os.environ.get(
            "CUZK_GPU_BASES_BUDGET_MB")
        budget_bytes = int(float(budget) * (1 << 20)) if budget else int(0.6 * self.total_memory)
        keep = scratch_keep_mb if scratch_keep_mb is not None else os.environ.get(
            "CUZK_GPU_SCRATCH_KEEP_MB") or defaults.GPU_SCRATCH_KEEP_MB
        self._scratch_keep = int(float(keep) * (1 << 20))
        self._resident = DeviceResidency(budget_bytes)
        self._domains = {}
        log.info("GPU backend on device %d (%s, sm_%s, %d MiB), bases budget %d MiB",
                 self.device_id, self.device_name, self.compute_capability, total >> 20,
                 budget_bytes >> 20)

    # ------------------------------------------------------------------ compile

    def _kernels(self, curve):
        """The kernel functions compiled for ``curve`` (NVRTC once per curve per process;
        CuPy keeps the binaries on disk)."""
        modules = self._modules.get(curve.snarkjs_name)
        if modules is None:
            modules = self._modules[curve.snarkjs_name] = self._compile(curve)
        return modules

    def _compile(self, curve):
        cp = self._cp
        opts = nvrtc_options(curve=curve.snarkjs_name)
        modules = {}
        for fname in KERNEL_FILES:
            try:
                mod = cp.RawModule(code=kernel_source(fname), options=opts, backend="nvrtc")
                modules[fname] = {k: mod.get_function(k) for k in KERNEL_NAMES[fname]}
            except cp.cuda.compiler.CompileException as exc:
                raise GpuError(f"compiling {KERNEL_DIR / fname} for {curve.name} with NVRTC "
                               f"failed:\n"
                               f"{exc.get_message() if hasattr(exc, 'get_message') else exc}") from None
            except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as exc:
                raise GpuError(f"loading the {curve.name} kernels of {fname} on device "
                               f"{self.device_id} failed: {exc}") from None
        return modules

    def _k(self, curve, fname, kernel):
        return self._kernels(curve)[fname][kernel]

    def _launch(self, curve, fname, kernel, n, args, threads=THREADS, batch=1):
        if n <= 0:
            return
        grid = ((int(n) + threads - 1) // threads, int(batch))
        self._k(curve, fname, kernel)(grid, (threads,), args)

    def _require_curve(self, curve):
        if curve not in self.curves:
            raise ProofError(f"the GPU backend does not prove {getattr(curve, 'name', curve)}")

    # ------------------------------------------------------------------ reporting (worker)

    def resident_circuits(self):
        """``[{"circuit", "bytes", "last_used"}]`` of the loaded zkeys, least recently used
        first."""
        with self._lock:
            return self._resident.report()

    def memory_info(self):
        """Device memory: total/free (driver), loaded zkeys, CuPy pool used/held, budget."""
        with self._lock, self._device:
            free, total = self._cp.cuda.runtime.memGetInfo()
            return {"device": self.device_id, "name": self.device_name,
                    "total_bytes": int(total), "free_bytes": int(free),
                    "resident_bytes": self._resident.used_bytes(),
                    "budget_bytes": self._resident.budget_bytes,
                    "pool_used_bytes": int(self._pool.used_bytes()),
                    "pool_held_bytes": int(self._pool.total_bytes())}

    def evict(self, circuit=None):
        """Drop the loaded copy of ``circuit`` (all when None) and free the memory."""
        with self._lock, self._device:
            self._resident.evict(circuit)
            self._pool.free_all_blocks()

    def release_scratch(self):
        """Return CuPy's cached free blocks to the driver (loaded zkeys stay)."""
        with self._lock, self._device:
            self._pool.free_all_blocks()

    def trim_scratch(self):
        """Give scratch memory beyond the kept amount back to the device (after a one-off
        prove; a worker proving partition after partition keeps it)."""
        if self._pool.total_bytes() - self._pool.used_bytes() > self._scratch_keep:
            self._pool.free_all_blocks()

    # ------------------------------------------------------------------ loading a zkey

    def to_device(self, arr):
        """A device copy of a host array (CuPy arrays are returned as they are)."""
        if _is_cupy_array(arr):
            return arr
        with self._device:
            return self._cp.asarray(np.ascontiguousarray(arr))

    @staticmethod
    def device_bytes(zkey):
        """Device memory :meth:`load` takes for ``zkey``: its G1 sections and the CSR."""
        bases = sum(int(np.asarray(getattr(zkey, s)).nbytes) for s in G1_SECTIONS)
        n_coefs = int(np.asarray(zkey.coefs).size)
        return bases + 4 * (2 * int(zkey.domain_size) + 1) + n_coefs * (4 + 32)

    @_gpu_call
    def load(self, zkey, name=None) -> DeviceZkey:
        """The device copy of ``zkey``'s proving data, uploaded on the first call.

        The backend keeps it loaded for the next proof of the same zkey object, under the
        bases budget (least recently used idle keys are evicted first).  A zkey that does not
        fit even alone is uploaded for the caller only and freed after its proof."""
        self._require_curve(zkey.curve)
        name = name or circuit_name(zkey)
        held = self._resident.get(zkey, name)
        if held is not None:
            return held
        fits = self._resident.make_room(self.device_bytes(zkey), keep=name)
        key = DeviceZkey(zkey, name, self._coef_csr(zkey),
                         {s: self.to_device(np.asarray(getattr(zkey, s), dtype=np.uint64))
                          for s in G1_SECTIONS})
        if fits:
            self._resident.add(key)
            log.info("GPU: %s loaded (%d MiB)", name, key.nbytes >> 20)
        else:
            log.info("GPU: %s (%d MiB) does not fit the bases budget; loaded for this proof only",
                     name, key.nbytes >> 20)
        return key

    # ------------------------------------------------------------------ QAP

    def _coef_csr(self, zkey):
        """(row_off, sig, val) on the device: section-4 records sorted by (matrix, constraint)."""
        cp = self._cp
        coefs = np.asarray(zkey.coefs)
        if coefs.dtype != COEF_DTYPE:
            coefs = np.ascontiguousarray(coefs).view(np.uint8).reshape(-1).view(COEF_DTYPE)
        domain = int(zkey.domain_size)
        n_vars = int(zkey.n_vars)
        m = coefs["matrix"].astype(np.uint64)
        c = coefs["constraint"].astype(np.uint64)
        s = coefs["signal"]
        if coefs.size and (m.max() > 1 or c.max() >= domain or s.max() >= n_vars):
            raise ProofError("a zkey coefficient record is out of range (matrix not 0/1, constraint "
                             ">= domain size or signal >= number of witness values)")
        vals = np.ascontiguousarray(coefs["value"])
        if coefs.size and limbs_ge(vals, zkey.curve.r).any():
            raise ProofError("a zkey coefficient value is not a canonical field element")
        key = m * np.uint64(domain) + c
        order = np.argsort(key, kind="stable")
        counts = np.bincount(key.astype(np.int64), minlength=2 * domain)
        row_off = np.zeros(2 * domain + 1, dtype=np.uint32)
        row_off[1:] = np.cumsum(counts)
        return (cp.asarray(row_off), cp.asarray(np.ascontiguousarray(s[order]).astype(np.uint32)),
                cp.asarray(np.ascontiguousarray(vals[order])))

    @_gpu_call
    def evaluate_ab(self, key, witness_values):
        """A·w, B·w on the domain (Montgomery), as CuPy views; C = A∘B is computed alongside.

        ``key`` is the :class:`DeviceZkey` from :meth:`load`."""
        if not isinstance(key, DeviceZkey):
            raise TypeError(f"evaluate_ab takes the DeviceZkey from GpuBackend.load(zkey), "
                            f"not {type(key).__name__}")
        cp = self._cp
        w = np.ascontiguousarray(witness_values, dtype=np.uint64)
        if w.ndim != 2 or w.shape[1] != 4:
            raise ValueError(f"witness: expected shape (n, 4), got {w.shape}")
        if limbs_ge(w, key.curve.r).any():
            raise ProofError("a witness value is not a canonical field element (>= r)")
        domain = key.domain_size
        if domain >= 1 << 32:
            raise ProofError("domain too large for the GPU backend")
        row_off, sig, val = key.csr
        d_w = cp.asarray(w)
        abc = cp.empty((3, domain, 4), dtype=cp.uint64)
        self._launch(key.curve, "qap.cu", "qap_evaluate_abc", domain,
                     (row_off, sig, val, d_w, np.uint32(domain), abc))
        return abc[0], abc[1]

    def _domain(self, curve, log_n):
        """Twiddles w^k, w^-k (k < n/2) and the coset shift g^i / n (i < n), cached per curve
        and size."""
        tables = self._domains.get((curve.snarkjs_name, log_n))
        if tables is not None:
            return tables
        cp = self._cp
        n = 1 << log_n
        r = curve.r
        w = root_of_unity(log_n, curve)
        g = root_of_unity(log_n + 1, curve)
        half = max(n // 2, 1)

        def geometric(count, start, step):
            out = cp.empty((count, 4), dtype=cp.uint64)
            chunk = 64
            self._launch(curve, "ntt.cu", "fr_geometric", (count + chunk - 1) // chunk,
                         (out, np.uint64(count), cp.asarray(_fr_mont_limbs(start, curve)),
                          cp.asarray(_fr_mont_limbs(step, curve)), np.uint32(chunk)))
            return out

        inv_n = pow(n, -1, r)
        tables = {"tw": geometric(half, 1, w), "tw_inv": geometric(half, 1, pow(w, -1, r)),
                  "shift": geometric(n, inv_n, g), "inv_n": cp.asarray(_fr_mont_limbs(inv_n, curve))}
        self._domains[(curve.snarkjs_name, log_n)] = tables
        return tables

    def _ntt_stages_dit(self, curve, x, log_n, first_stage, last_stage, tw, batch):
        """DIT stages first_stage..last_stage (first_stage == 1 uses the shared-memory tile)."""
        s = first_stage
        if s == 1 and last_stage >= 1:
            st = min(NTT_TILE_LOG, last_stage)
            tile = 1 << st
            self._k(curve, "ntt.cu", "ntt_tile_dit")(((1 << log_n) // tile, batch), (tile // 2,),
                                                     (x, np.uint32(log_n), np.uint32(st), tw))
            s = st + 1
        for stage in range(s, last_stage + 1):
            self._launch(curve, "ntt.cu", "ntt_stage", 1 << (log_n - 1),
                         (x, np.uint32(log_n), np.uint32(stage), tw, np.int32(0)), batch=batch)

    @_gpu_call
    def compute_h(self, a_evals, b_evals, curve=BN254):
        """snarkjs's H on the odd coset, STANDARD form, as a CuPy (n, 4) array.

        Device arrays from :meth:`evaluate_ab` are consumed in place (scratch);
        anything else is copied to the device first.
        """
        cp = self._cp
        self._require_curve(curve)
        n = int(a_evals.shape[0])
        if tuple(a_evals.shape) != (n, 4) or tuple(b_evals.shape) != (n, 4):
            raise ValueError(f"compute_h: shape mismatch {a_evals.shape} vs {b_evals.shape}")
        if n == 1:  # trivial domain: the CPU core
            return cp.asarray(native.compute_h(
                cp.asnumpy(a_evals) if _is_cupy_array(a_evals) else a_evals,
                cp.asnumpy(b_evals) if _is_cupy_array(b_evals) else b_evals, curve=curve))
        if n < 2 or n & (n - 1) or n.bit_length() - 1 > MAX_LOG_DOMAIN:
            raise ValueError(f"compute_h: length {n} is not a power of two in [2, 2^{MAX_LOG_DOMAIN}]")
        log_n = n.bit_length() - 1
        base = getattr(a_evals, "base", None)
        if (_is_cupy_array(a_evals) and _is_cupy_array(b_evals) and base is not None
                and base is getattr(b_evals, "base", None) and tuple(base.shape) == (3, n, 4)
                and a_evals.data.ptr == base.data.ptr
                and b_evals.data.ptr == base.data.ptr + n * 32):
            abc = base  # from evaluate_ab: C is already there
        else:
            abc = cp.empty((3, n, 4), dtype=cp.uint64)
            abc[0] = cp.asarray(a_evals, dtype=cp.uint64)
            abc[1] = cp.asarray(b_evals, dtype=cp.uint64)
            self._launch(curve, "qap.cu", "qap_mul", n, (abc[0], abc[1], abc[2], np.uint64(n)))
        t = self._domain(curve, log_n)
        # batched inverse NTT, DIF (natural -> bit-reversed), twist fused in the last tile
        st = min(NTT_TILE_LOG, log_n)
        for stage in range(log_n, st, -1):
            self._launch(curve, "ntt.cu", "ntt_stage", n // 2,
                         (abc, np.uint32(log_n), np.uint32(stage), t["tw_inv"], np.int32(1)), batch=3)
        tile = 1 << st
        self._k(curve, "qap.cu", "qap_coset_dif_tile")(
            (n // tile, 3), (tile // 2,),
            (abc, np.uint32(log_n), np.uint32(st), t["tw_inv"], t["shift"]))
        # batched forward NTT, DIT (bit-reversed -> natural); last stage fused with A'B' - C'
        self._ntt_stages_dit(curve, abc, log_n, 1, log_n - 1, t["tw"], 3)
        h = cp.empty((n, 4), dtype=cp.uint64)
        self._launch(curve, "qap.cu", "qap_h_last_stage", n // 2, (abc, np.uint32(log_n), t["tw"], h))
        return h

    # ------------------------------------------------------------------ NTT (tests / bench)

    @_gpu_call
    def fr_ntt_device(self, values, inverse=False, curve=BN254):
        """NTT over Fr on the device (Montgomery in and out, natural order); returns a CuPy array."""
        cp = self._cp
        self._require_curve(curve)
        src = cp.asarray(values, dtype=cp.uint64)
        n = int(src.shape[0])
        if src.ndim != 2 or src.shape[1] != 4 or n == 0 or n & (n - 1):
            raise ValueError(f"fr_ntt: expected (2^k, 4) values, got {src.shape}")
        log_n = n.bit_length() - 1
        if log_n == 0:
            return src.copy()
        if log_n > MAX_LOG_DOMAIN:
            raise ValueError(f"fr_ntt: 2^{log_n} is above the supported 2^{MAX_LOG_DOMAIN}")
        src = cp.ascontiguousarray(src)
        t = self._domain(curve, log_n)
        out = cp.empty_like(src)
        self._launch(curve, "ntt.cu", "ntt_bitrev_copy", n, (src, out, np.uint32(log_n)))
        self._ntt_stages_dit(curve, out, log_n, 1, log_n, t["tw_inv" if inverse else "tw"], 1)
        if inverse:
            self._launch(curve, "ntt.cu", "fr_scale", n, (out, np.uint64(n), t["inv_n"]))
        return out

    def asnumpy(self, device_array):
        """A host (numpy) copy of an array this backend returned (e.g. from compute_h)."""
        with self._device:
            return self._cp.asnumpy(device_array)

    def fr_ntt(self, values, inverse=False, curve=BN254):
        """Same as :func:`cuzk_tasks.groth16.backends.native.fr_ntt`, on the GPU; returns numpy."""
        out = self.fr_ntt_device(values, inverse=inverse, curve=curve)
        with self._device:
            return self._cp.asnumpy(out)

    # ------------------------------------------------------------------ MSM

    @staticmethod
    def window_bits(n):
        env = os.environ.get("CUZK_GPU_MSM_WINDOW")
        if env:
            c = int(env)
            if 2 <= c <= 20:
                return c
        return max(4, min(16, int(n).bit_length() - 5))

    def _reduce_segments(self, curve, parts, off, nseg, max_count):
        """Sum each segment's XYZZ partials, T at a time, until every segment has at most one."""
        cp = self._cp
        while max_count > 1:
            cnt = off[1:] - off[:-1]
            cnt = (cnt + np.uint32(MSM_TASK - 1)) // np.uint32(MSM_TASK)
            off2 = cp.zeros(nseg + 1, dtype=cp.uint32)
            off2[1:] = cp.cumsum(cnt, dtype=cp.uint32)
            total = int(off2[-1])
            out = cp.empty((max(total, 1), parts.shape[1]), dtype=cp.uint64)
            self._launch(curve, "msm.cu", "msm_accumulate_partials", total,
                         (parts, off, off2, np.uint32(nseg), np.uint32(total), np.uint32(MSM_TASK), out),
                         threads=EC_THREADS)
            parts, off = out, off2
            max_count = (max_count + MSM_TASK - 1) // MSM_TASK
        return parts, off

    def _g1_msm_device(self, curve, d_bases, d_scalars, n):
        """Pippenger on the device; returns the Jacobian result (numpy, 3 Fq of L limbs)."""
        cp = self._cp
        limbs = native.fq_limbs(curve)
        c = self.window_bits(n)
        # signed digits: one window more than the scalar's bits need absorbs the last carry
        W = curve.r.bit_length() // c + 1
        nb = 1 << (c - 1)
        B = W * nb
        keys = cp.empty(W * n, dtype=cp.uint32)
        vals = cp.empty(W * n, dtype=cp.uint32)
        counts = cp.zeros(B, dtype=cp.uint32)
        self._launch(curve, "msm.cu", "msm_digits", n,
                     (d_scalars, d_bases, np.uint32(n), np.uint32(c), np.uint32(W), np.uint32(nb),
                      keys, vals, counts))
        off = cp.zeros(B + 1, dtype=cp.uint32)
        off[1:] = cp.cumsum(counts, dtype=cp.uint32)
        max_count = int(counts.max())
        if max_count == 0:
            return np.zeros(3 * limbs, dtype=np.uint64)  # all digits zero / all bases at infinity
        cursor = off[:-1].copy()
        sorted_vals = cp.empty(max(int(off[-1]), 1), dtype=cp.uint32)
        self._launch(curve, "msm.cu", "msm_scatter", W * n,
                     (keys, vals, np.uint64(W * n), cursor, sorted_vals))
        del keys, vals, cursor
        # level 1: points -> XYZZ partials (<= T points per thread)
        cnt1 = (counts + np.uint32(MSM_TASK - 1)) // np.uint32(MSM_TASK)
        off1 = cp.zeros(B + 1, dtype=cp.uint32)
        off1[1:] = cp.cumsum(cnt1, dtype=cp.uint32)
        total1 = int(off1[-1])
        parts = cp.empty((total1, 4 * limbs), dtype=cp.uint64)
        self._launch(curve, "msm.cu", "msm_accumulate_points", total1,
                     (d_bases, sorted_vals, off, off1, np.uint32(B), np.uint32(total1),
                      np.uint32(MSM_TASK), parts), threads=EC_THREADS)
        del sorted_vals, counts, cnt1
        parts, boff = self._reduce_segments(curve, parts, off1, B,
                                            (max_count + MSM_TASK - 1) // MSM_TASK)
        # running-sum reduction per window, segments of MSM_SEGMENT buckets
        seg = min(MSM_SEGMENT, nb)
        S = (nb + seg - 1) // seg
        segs = cp.empty((W * S, 4 * limbs), dtype=cp.uint64)
        self._launch(curve, "msm.cu", "msm_bucket_reduce", W * S,
                     (parts, boff, np.uint32(W), np.uint32(nb), np.uint32(seg), np.uint32(S), segs),
                     threads=EC_THREADS)
        del parts, boff
        woff = cp.arange(W + 1, dtype=cp.uint32) * np.uint32(S)
        wparts, woff = self._reduce_segments(curve, segs, woff, W, S)
        out = cp.zeros(3 * limbs, dtype=cp.uint64)
        self._k(curve, "msm.cu", "msm_final")((1,), (1,),
                                              (wparts, woff, np.uint32(W), np.uint32(c), out))
        return cp.asnumpy(out)

    @_gpu_call
    def g1_msm_jacobian(self, bases, scalars, curve=BN254):
        """sum scalars[i] * bases[i] on G1 as 3 Jacobian Fq (like native.g1_msm).

        Device bases (a :class:`DeviceZkey`'s sections) are used in place; host bases are
        copied for this call only."""
        cp = self._cp
        self._require_curve(curve)
        width = 2 * native.fq_limbs(curve)
        d_bases = self.to_device(bases)
        d_scalars = scalars if _is_cupy_array(scalars) else cp.asarray(
            np.ascontiguousarray(scalars, dtype=np.uint64))
        d_bases = d_bases.reshape(-1, width) if d_bases.ndim == 1 else d_bases
        d_scalars = d_scalars.reshape(-1, 4) if d_scalars.ndim == 1 else d_scalars
        if d_bases.shape[1] != width or d_scalars.shape[1] != 4:
            raise ValueError(f"g1_msm: expected (n, {width}) bases and (n, 4) scalars, got "
                             f"{d_bases.shape} and {d_scalars.shape}")
        if d_bases.shape[0] != d_scalars.shape[0]:
            raise ValueError(f"G1 MSM: {d_bases.shape[0]} bases but {d_scalars.shape[0]} scalars")
        n = int(d_bases.shape[0])
        if n == 0:
            return np.zeros(3 * native.fq_limbs(curve), dtype=np.uint64)
        if n >= 1 << 31:
            raise ProofError("G1 MSM: more than 2^31 points is not supported on the GPU")
        d_bases = cp.ascontiguousarray(d_bases, dtype=cp.uint64)
        d_scalars = cp.ascontiguousarray(d_scalars, dtype=cp.uint64)
        try:
            return self._g1_msm_device(curve, d_bases, d_scalars, n)
        finally:
            self.trim_scratch()

    def g1_msm(self, bases, scalars, curve=BN254):
        return points.g1_jacobian_to_affine(self.g1_msm_jacobian(bases, scalars, curve=curve), curve)

    def g2_msm(self, bases, scalars, curve=BN254):
        """G2 MSM on the CPU core (only prove_finish, on the CPU side, needs it)."""
        if _is_cupy_array(scalars):
            scalars = self._cp.asnumpy(scalars)
        return points.g2_jacobian_to_affine(
            native.g2_msm(bases, scalars, threads=self._threads, curve=curve), curve)
