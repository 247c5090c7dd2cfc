"""TEST ONLY: the part of CuPy that ``cuzk_tasks.groth16.backends.gpu`` uses, on the CPU.

``GpuBackend`` runs unchanged on top of this module: "device" arrays are numpy arrays
(a subclass whose module name starts with ``cupy``, as the backend checks), and
``RawModule`` compiles the same kernel files NVRTC gets with g++ instead, with
``tests/cuda_emu/cuda_emu.h`` force-included (see there for how a launch runs).  So the
kernels' indexing, launch geometry, shared-memory tiles, atomics and the backend's
orchestration are checked against the CPU core in CI without a GPU
(``tests/test_gpu_emulated.py``).  It proves nothing about speed, NVRTC or the driver.

The compiled libraries are cached under ``$CUZK_CUDA_EMU_CACHE`` (default
``~/.cache/cuzk-cuda-emu``), keyed by a hash of the source, the options and the shim.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading

import numpy as np

SHIM = pathlib.Path(__file__).resolve().parent.parent / "cuda_emu" / "cuda_emu.h"
CXX = os.environ.get("CXX", "g++")

uint32 = np.uint32
uint64 = np.uint64
int32 = np.int32


def available():
    """True when a C++20 compiler is there to build the emulated kernels."""
    return shutil.which(CXX) is not None


# ----------------------------------------------------------------------------- arrays

class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class ndarray(np.ndarray):
    """A "device" array: host memory; ``.data.ptr`` is its address, as in CuPy."""

    @property
    def data(self):
        return _Pointer(self.__array_interface__["data"][0])


def _dev(a):
    return a.view(ndarray)


def asarray(a, dtype=None):
    if isinstance(a, ndarray) and (dtype is None or a.dtype == np.dtype(dtype)):
        return a
    return _dev(np.array(a, dtype=dtype, copy=True, order="C"))


def ascontiguousarray(a, dtype=None):
    out = np.ascontiguousarray(a, dtype=dtype)
    return out if isinstance(out, ndarray) else _dev(out)


def asnumpy(a):
    return np.array(a, copy=True).view(np.ndarray)


def empty(shape, dtype=np.float64):
    return _dev(np.empty(shape, dtype=dtype))


def zeros(shape, dtype=np.float64):
    return _dev(np.zeros(shape, dtype=dtype))


def empty_like(a):
    return _dev(np.empty_like(np.asarray(a)))


def arange(*args, dtype=None):
    return _dev(np.arange(*args, dtype=dtype))


def cumsum(a, dtype=None):
    return _dev(np.cumsum(np.asarray(a), dtype=dtype))


class _MemoryPool:
    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0

    def free_all_blocks(self):
        pass


_POOL = _MemoryPool()


def get_default_memory_pool():
    return _POOL


# ----------------------------------------------------------------------------- cuda namespace

class CUDARuntimeError(RuntimeError):
    pass


class CUDADriverError(RuntimeError):
    pass


class OutOfMemoryError(MemoryError):
    pass


class CompileException(RuntimeError):
    def get_message(self):
        return str(self)


class Device:
    def __init__(self, device_id=0):
        self.id = device_id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


EMULATED_MEMORY = 8 << 30


class _Runtime:
    CUDARuntimeError = CUDARuntimeError

    @staticmethod
    def getDeviceCount():
        return 1

    @staticmethod
    def getDevice():
        return 0

    @staticmethod
    def getDeviceProperties(device_id):
        return {"name": b"cuzk CUDA emulator (CPU)", "major": 9, "minor": 0}

    @staticmethod
    def memGetInfo():
        return EMULATED_MEMORY, EMULATED_MEMORY

    @staticmethod
    def deviceSynchronize():
        pass  # launches are synchronous here


class _Namespace:
    def __init__(self, **items):
        self.__dict__.update(items)


cuda = _Namespace(
    runtime=_Runtime(), Device=Device,
    driver=_Namespace(CUDADriverError=CUDADriverError),
    memory=_Namespace(OutOfMemoryError=OutOfMemoryError),
    compiler=_Namespace(CompileException=CompileException),
)


# ----------------------------------------------------------------------------- kernels

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)\s*\{')
_DEVICE_FN = re.compile(r"__device__[^;{()]*?\b(\w+)\s*\([^;{]*\)\s*\{")
_SCALARS = {"u32": ctypes.c_uint32, "uint32_t": ctypes.c_uint32, "unsigned": ctypes.c_uint32,
            "u64": ctypes.c_uint64, "uint64_t": ctypes.c_uint64, "int": ctypes.c_int32,
            "int32_t": ctypes.c_int32}


def _body(code, open_brace):
    """The text of the brace block starting at ``open_brace``."""
    depth = 0
    for i in range(open_brace, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return code[open_brace:i + 1]
    raise CompileException("unbalanced braces")


def _uses_barrier(code, include_dirs):
    """Kernel names -> True when the kernel (or a __device__ function it calls, transitively)
    calls __syncthreads: those need one OS thread per block thread."""
    texts = [code] + [p.read_text() for d in include_dirs for p in pathlib.Path(d).rglob("*.cuh")]
    bodies = {}
    for text in texts:
        for m in _DEVICE_FN.finditer(text):
            bodies.setdefault(m.group(1), _body(text, m.end() - 1))
    syncing = {name for name, body in bodies.items() if "__syncthreads" in body}
    changed = True
    while changed:
        changed = False
        for name, body in bodies.items():
            if name not in syncing and any(re.search(rf"\b{s}\s*\(", body) for s in syncing):
                syncing.add(name)
                changed = True
    out = {}
    for m in _KERNEL.finditer(code):
        body = _body(code, m.end() - 1)
        out[m.group(1)] = "__syncthreads" in body or any(
            re.search(rf"\b{s}\s*\(", body) for s in syncing)
    return out


def _params(text):
    """[(declaration, name, ctypes type or None for a pointer)] of a kernel parameter list."""
    out = []
    for decl in (p.strip() for p in text.split(",") if p.strip()):
        name = re.findall(r"\w+", decl)[-1]
        if "*" in decl:
            out.append((decl, name, None))
            continue
        words = decl.replace("const", " ").split()[:-1]
        base = " ".join(words)
        ctype = _SCALARS.get(base) or _SCALARS.get(words[-1])
        if ctype is None:
            raise CompileException(f"cuda_emu: parameter type {base!r} in {decl!r} is not mapped")
        out.append((decl, name, ctype))
    return out


_LOCK = threading.Lock()


def _cache_dir():
    d = pathlib.Path(os.environ.get("CUZK_CUDA_EMU_CACHE") or
                     pathlib.Path.home() / ".cache" / "cuzk-cuda-emu")
    d.mkdir(parents=True, exist_ok=True)
    return d


#: ``reverse``: blocks and threads run in reverse order (see cuda_emu.h); read when a
#: RawModule is built.
ORDER_ENV = "CUDA_EMU_ORDER"

#: Fault injection (TEST ONLY): a launch of the kernel named here raises the CUDA error a
#: real device fault would (the pipeline's device-fault test sets it for one worker).
FAIL_KERNEL_ENV = "CUPY_EMU_FAIL_KERNEL"
#: Wrong results (TEST ONLY): after each launch of the kernel named here, one bit of its first
#: array argument is flipped -- a device that computes wrongly without an error.
CORRUPT_KERNEL_ENV = "CUPY_EMU_CORRUPT_KERNEL"


class _Kernel:
    def __init__(self, name, fn, params, block_threads):
        self.name = name
        self._fn = fn
        self._params = params
        self.block_threads = block_threads
        fn.restype = None
        fn.argtypes = [ctypes.c_uint32] * 6 + [ctypes.c_int] + [
            ctypes.c_void_p if t is None else t for _, _, t in params]

    def __call__(self, grid, block, args, shared_mem=0):
        if os.environ.get(FAIL_KERNEL_ENV) == self.name:
            raise CUDARuntimeError(f"cudaErrorIllegalAddress: an illegal memory access was "
                                   f"encountered (injected by {FAIL_KERNEL_ENV} in {self.name})")
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        block = tuple(int(b) for b in block) + (1,) * (3 - len(block))
        if len(args) != len(self._params):
            raise TypeError(f"kernel takes {len(self._params)} arguments, got {len(args)}")
        values = []
        for (decl, name, ctype), a in zip(self._params, args):
            if ctype is None:
                if not isinstance(a, np.ndarray):
                    raise TypeError(f"argument {name} ({decl}): expected an array, got {type(a)}")
                if not a.flags.c_contiguous:
                    raise TypeError(f"argument {name} ({decl}): array is not contiguous")
                values.append(a.__array_interface__["data"][0])
            else:
                values.append(int(a))
        self._fn(*grid, *block, int(self.block_threads), *values)
        if os.environ.get(CORRUPT_KERNEL_ENV) == self.name:
            first = next(a for a in args if isinstance(a, np.ndarray))
            first.reshape(-1).view(np.uint8)[0] ^= 1


class RawModule:
    """``cupy.RawModule(code=..., options=..., backend="nvrtc")`` built with g++."""

    def __init__(self, code, options=(), backend="nvrtc"):
        include_dirs = [o[2:] for o in options if o.startswith("-I")]
        defines = [o for o in options if o.startswith("-D")]
        kernels = {m.group(1): _params(m.group(2)) for m in _KERNEL.finditer(code)}
        barrier = _uses_barrier(code, include_dirs)
        wrappers = []
        for name, params in kernels.items():
            decls = ", ".join(d for d, _, _ in params)
            names = ", ".join(n for _, n, _ in params)
            wrappers.append(
                f'extern "C" void cuda_emu_launch_{name}(unsigned gx, unsigned gy, unsigned gz, '
                f"unsigned bx, unsigned by, unsigned bz, int block_threads"
                f"{', ' if decls else ''}{decls}) {{\n"
                f"    cuzk_emu::launch(gx, gy, gz, bx, by, bz, block_threads != 0, "
                f"[=]() {{ {name}({names}); }});\n}}\n")
        source = code + "\n// ---- cuda_emu launch wrappers ----\n" + "".join(wrappers)
        flags = ["-std=c++20", "-O2", "-fPIC", "-shared", "-pthread", "-DCUZK_NO_ASM",
                 "-include", str(SHIM), *[f"-I{d}" for d in include_dirs], *defines]
        if os.environ.get(ORDER_ENV, "forward") == "reverse":
            flags.append("-DCUZK_EMU_REVERSE=1")
        key = hashlib.sha256("\0".join([source, SHIM.read_text(), *flags, CXX]).encode()).hexdigest()[:20]
        lib_path = _cache_dir() / f"kernels-{key}.so"
        with _LOCK:
            if not lib_path.exists():
                self._build(source, flags, lib_path)
        self._lib = ctypes.CDLL(str(lib_path))
        self._kernels = {name: _Kernel(name, getattr(self._lib, f"cuda_emu_launch_{name}"), params,
                                       barrier[name]) for name, params in kernels.items()}

    @staticmethod
    def _build(source, flags, lib_path):
        with tempfile.TemporaryDirectory() as tmp:
            src = pathlib.Path(tmp) / "kernels.cpp"
            src.write_text(source)
            out = pathlib.Path(tmp) / "kernels.so"
            result = subprocess.run([CXX, *flags, "-x", "c++", str(src), "-o", str(out)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise CompileException(f"cuda_emu: {CXX} failed:\n{result.stderr[-4000:]}")
            tmp_lib = lib_path.with_suffix(f".tmp{os.getpid()}")
            shutil.copyfile(out, tmp_lib)
            os.replace(tmp_lib, lib_path)

    def get_function(self, name):
        try:
            return self._kernels[name]
        except KeyError:
            raise CUDADriverError(f"cuda_emu: no kernel named {name!r}") from None


@contextlib.contextmanager
def installed_as_cupy(gpu_module):
    """Make ``gpu_module.import_cupy`` return this module while the block runs."""
    import sys

    original = gpu_module.import_cupy
    gpu_module.import_cupy = lambda: sys.modules[__name__]
    try:
        yield sys.modules[__name__]
    finally:
        gpu_module.import_cupy = original
