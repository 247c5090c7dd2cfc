"""Compile check of the CUDA kernels WITHOUT a device (runs in CI).

Every kernel file in cuzk_tasks/native/cuda compiles through NVRTC (the same
compiler CuPy uses at run time) for sm_80 and sm_90 with the exact options the
GPU backend uses, with no error and no warning; and through nvcc where nvcc is
installed.  Needs ``pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12`` (NVRTC
works without a GPU or driver); skipped with a clear reason otherwise.
"""

import ctypes
import glob
import os
import shutil
import subprocess
import sys

import pytest

from cuzk_tasks.groth16.backends import gpu

ARCHES = ["sm_80", "sm_90"]


def nvrtc_target(arch, curve):
    """What NVRTC is asked to make of a kernel file: a cubin (through ptxas) for sm_90 on
    BN254, PTX for the virtual arch otherwise.  The kernels have no arch-specific code (only
    ``defined(__CUDA_ARCH__)``, device against host) and are one source templated on the
    curve, so PTX for each arch and curve gets every diagnostic of the source, and ptxas runs
    once on that source; ptxas on BLS12-381's MSM alone takes about 6.5 minutes on 2 cores."""
    return arch if (arch, curve) == ("sm_90", "bn128") else arch.replace("sm_", "compute_")


def _preload_nvrtc():
    """Load libnvrtc from the nvidia-cuda-nvrtc-cu12 wheel if the loader cannot find it."""
    for site in sys.path:
        for path in sorted(glob.glob(os.path.join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return path
            except OSError:
                continue
    return None


def _nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc
    except Exception as exc:  # ImportError, or a loader error from a missing libnvrtc
        _preload_nvrtc()
        try:
            from cupy_backends.cuda.libs import nvrtc
        except Exception:
            pytest.skip(f"CuPy/NVRTC not installed ({exc!r}): pip install cupy-cuda12x "
                        "nvidia-cuda-nvrtc-cu12 to run the NVRTC compile check")
    try:
        nvrtc.getVersion()
    except Exception:
        _preload_nvrtc()
        try:
            nvrtc.getVersion()
        except Exception as exc:
            pytest.skip(f"libnvrtc not found ({exc!r}): pip install nvidia-cuda-nvrtc-cu12")
    return nvrtc


def _clean(log):
    if isinstance(log, bytes):
        log = log.decode(errors="replace")
    return (log or "").replace("\x00", "").strip()


CURVES = sorted(gpu.KERNEL_CURVES)


def nvrtc_compile(nvrtc, fname, arch, curve="bn128"):
    prog = nvrtc.createProgram(gpu.kernel_source(fname), fname, [], [])
    try:
        opts = list(gpu.nvrtc_options(nvrtc_target(arch, curve), curve))
        try:
            nvrtc.compileProgram(prog, opts)
            ok, err = True, None
        except Exception as exc:  # NVRTCError
            ok, err = False, exc
        log = _clean(nvrtc.getProgramLog(prog))
        return ok, err, log
    finally:
        nvrtc.destroyProgram(prog)


def test_kernel_files_listed():
    on_disk = sorted(os.path.basename(p) for p in glob.glob(str(gpu.KERNEL_DIR / "*.cu")))
    assert on_disk == sorted(gpu.KERNEL_FILES)
    for fname in gpu.KERNEL_FILES:
        src = gpu.kernel_source(fname)
        assert '#include "gpu_common.cuh"' in src
        for kernel in gpu.KERNEL_NAMES[fname]:
            assert f"__global__ void {kernel}(" in src, (fname, kernel)
    common = (gpu.KERNEL_DIR / "gpu_common.cuh").read_text()
    # one copy of the arithmetic: the kernels use the CPU core's headers (field.cuh via bn254.cuh)
    for header in ("cuzk/bn254.cuh", "cuzk/bls12_381.cuh", "cuzk/curve.cuh"):
        assert f'#include "{header}"' in common
    assert "mul_portable" not in common and "struct Field" not in common


@pytest.mark.slow
@pytest.mark.parametrize("curve", ["BN254", "BLS12_381"])
def test_shared_headers_compile_with_nvrtc(curve):
    """The shared host/device headers alone, plus a trivial kernel using them (PTX for
    compute_90: the kernel files, which include the same headers, are compiled for every
    arch below)."""
    arch = "compute_90"
    nvrtc = _nvrtc()
    src = ('#include "cuzk/curve.cuh"\n'
           f'typedef cuzk::{curve} C;\n'
           'extern "C" __global__ void k(uint64_t* p) {\n'
           '  C::G1::Affine a; a.x = C::Fq::from_raw(p); a.y = C::Fq::from_raw(p + C::Fq::N);\n'
           '  C::G1::XYZZ x = C::G1::xyzz_add_mixed(C::G1::to_xyzz(a), a);\n'
           '  C::G2::Affine b; b.x = C::Fq2::from_raw(p); b.y = C::Fq2::from_raw(p + C::Fq2::N);\n'
           '  C::G2::Jacobian y = C::G2::add_mixed(C::G2::to_jacobian(b), b);\n'
           '  C::Fr f = C::Fr::inv(C::Fr::from_raw(p + 16));\n'
           '  x.X.to_raw(p); y.Z.to_raw(p + 6); f.to_raw(p + 16);\n'
           '}\n')
    prog = nvrtc.createProgram(src, "trivial.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, list(gpu.nvrtc_options(arch)))
        except Exception as exc:
            pytest.fail(f"NVRTC failed on the shared headers ({arch}): {exc}\n"
                        f"{_clean(nvrtc.getProgramLog(prog))}")
        log = _clean(nvrtc.getProgramLog(prog))
        assert not log, f"NVRTC warnings on the shared headers ({arch}):\n{log}"
    finally:
        nvrtc.destroyProgram(prog)


def _compile_one(job):
    """One NVRTC compile, in a worker process: ``(job, ok, error text, log)``."""
    from cupy_backends.cuda.libs import nvrtc

    ok, err, log = nvrtc_compile(nvrtc, *job)
    return job, ok, None if err is None else repr(err), log


@pytest.fixture(scope="module")
def nvrtc_results():
    """Every (kernel file, arch, curve) compiled once, as many at a time as there are cores:
    the MSM's take from 15 s to a minute here and they are independent (fork: the children
    inherit the loaded libnvrtc)."""
    import concurrent.futures
    import itertools
    import multiprocessing

    _nvrtc()
    # the MSM first: its compiles are the longest, the rest fill the other cores meanwhile
    files = sorted(gpu.KERNEL_FILES, key=lambda f: f != "msm.cu")
    jobs = list(itertools.product(files, ARCHES, CURVES))
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1,
                                                mp_context=ctx) as pool:
        return {job: (ok, err, log) for job, ok, err, log in pool.map(_compile_one, jobs)}


@pytest.mark.slow
@pytest.mark.parametrize("curve", CURVES)
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("fname", gpu.KERNEL_FILES)
def test_kernel_compiles_with_nvrtc(nvrtc_results, fname, arch, curve):
    ok, err, log = nvrtc_results[(fname, arch, curve)]
    assert ok, f"NVRTC failed to compile {fname} for {arch}, {curve}: {err}\n{log}"
    assert not log, f"NVRTC warnings in {fname} for {arch}, {curve}:\n{log}"


def test_the_curve_option_selects_the_kernels_curve():
    """The -DCUZK_GPU_CURVE option reaches gpu_common.cuh: a kernel that only compiles for
    6-limb Fq compiles for bls12381 and fails for bn128."""
    nvrtc = _nvrtc()
    src = ('#include "gpu_common.cuh"\n'
           'static_assert(cuzk::gpu::Fq::N == 6, "6-limb Fq");\n'
           'extern "C" __global__ void k(uint64_t* p) { cuzk::gpu::Fq::from_raw(p).to_raw(p); }\n')
    results = {}
    for curve in CURVES:
        prog = nvrtc.createProgram(src, "curve_probe.cu", [], [])
        try:
            try:
                nvrtc.compileProgram(prog, list(gpu.nvrtc_options("sm_90", curve)))
                results[curve] = True
            except Exception:
                results[curve] = False
        finally:
            nvrtc.destroyProgram(prog)
    assert results == {"bls12381": True, "bn128": False}
    with pytest.raises(ValueError, match="unknown curve"):
        gpu.nvrtc_options("sm_90", "bls12_377")


def _nvcc():
    path = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc")
                                     else None)
    if path is None:
        pytest.skip("nvcc not installed: the nvcc compile check needs the CUDA toolkit")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("curve", CURVES)
@pytest.mark.parametrize("fname", gpu.KERNEL_FILES)
def test_kernel_compiles_with_nvcc(fname, curve, tmp_path):
    nvcc = _nvcc()
    # PTX only (code=compute_90): nvcc's front end, its host compiler pass and NVVM all run;
    # ptxas, three quarters of the time here, already runs on the same code in the NVRTC
    # check above (sm_80 and sm_90 cubins), so it is not repeated
    cmd = [nvcc, "-std=c++17", "-gencode", "arch=compute_90,code=compute_90", "-c",
           "-Werror", "all-warnings",
           f"-I{gpu.INCLUDE_DIR}", f"-I{gpu.KERNEL_DIR}",
           f"-DCUZK_GPU_CURVE={gpu.KERNEL_CURVES[curve]}", str(gpu.KERNEL_DIR / fname),
           "-o", str(tmp_path / (fname + ".o"))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nvcc failed on {fname} for {curve}:\n{proc.stdout}\n{proc.stderr}"
    out = (proc.stdout + proc.stderr).strip()
    assert "warning" not in out.lower(), f"nvcc warnings on {fname} for {curve}:\n{out}"
