"""Loading the native core (``cuzk_tasks._native``) with :mod:`ctypes`, and nothing more.

This module imports no numpy: ``cuzk-tasks prove`` on the CPU core loads it, calls
:func:`lib`'s ``cuzk_prove_files`` and exits (:mod:`.native_prove`), and numpy's import
alone costs several times a small proof.  The numpy wrappers of every other function are in
:mod:`.native`; the C ABI itself is documented in ``cuzk_tasks/native/src/cpu_core.cpp``.
"""

import ctypes
import importlib.machinery
import os
import threading

from cuzk_tasks.errors import NativeCoreError

#: 4: cuzk_prove_files / cuzk_free (the CLI's whole-file prove)
ABI_VERSION = 4

STATUS_MESSAGES = {
    1: "a required buffer pointer was NULL",
    2: "invalid argument (curve, size, operation code or log2 domain size out of range)",
    3: "an input value is not a canonical field element (>= modulus)",
    4: "a zkey coefficient record is out of range (matrix not 0/1, constraint >= domain size "
       "or signal >= number of witness values)",
    5: "out of memory",
    6: "internal error in the native core",
    7: "a point is not on the curve",
    8: "a file could not be opened or mapped",
    9: "a file is not laid out as the whole-file prover expects (the readers say where)",
    10: "the proof failed self-verification",
    11: "the operating system's random number generator failed",
}

#: snarkjs curve name -> (ABI curve id, Fq limbs)
CURVES = {"bn128": (0, 4), "bls12381": (1, 6)}
CURVE_NAMES = {curve_id: name for name, (curve_id, _) in CURVES.items()}

_lib = None
# threading, not _thread: importing it measured +0.9 ms on a 39 ms prove command line
# (2026-12-05, `cuzk-tasks prove` on mulchain_1k, fresh processes, medians of 5), within the noise
_lock = threading.Lock()

_u64p = ctypes.POINTER(ctypes.c_uint64)
_u8p = ctypes.POINTER(ctypes.c_uint8)


def _find_library():
    """cuzk_tasks/_native<suffix>, where the build puts it (in place or installed); found
    without importlib.util, whose import costs a small proof's command line ~2 ms."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(package, "_native" + suffix)
        if os.path.exists(path):
            return path
    raise NativeCoreError(
        "native core not built: run pip install . (or python setup.py build_ext --inplace "
        "in a source checkout) to compile cuzk_tasks/_native")


def _declare(lib):
    c_int, c_u64, c_u32 = ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32
    sigs = {  # every function in this table takes the curve id first
        "cuzk_g1_msm": [_u64p, _u64p, c_u64, c_int, _u64p],
        "cuzk_g2_msm": [_u64p, _u64p, c_u64, c_int, _u64p],
        "cuzk_fr_ntt": [_u64p, c_u32, c_int, c_int],
        "cuzk_to_mont": [c_int, _u64p, c_u64],
        "cuzk_from_mont": [c_int, _u64p, c_u64],
        "cuzk_field_op": [c_int, c_int, _u64p, _u64p, _u64p, c_u64],
        "cuzk_g1_point_op": [c_int, _u64p, _u64p, _u64p],
        "cuzk_g2_point_op": [c_int, _u64p, _u64p, _u64p],
        "cuzk_g1_check_points": [_u64p, c_u64, _u64p],
        "cuzk_g2_check_points": [_u64p, c_u64, _u64p],
        "cuzk_g1_to_affine": [_u64p, _u64p],
        "cuzk_g2_to_affine": [_u64p, _u64p],
        "cuzk_pairing": [_u64p, _u64p, c_u64, _u64p],
        "cuzk_pairing_check": [_u64p, _u64p, c_u64, ctypes.POINTER(c_int)],
        "cuzk_evaluate_ab": [_u8p, c_u64, _u64p, c_u64, c_u64, _u64p, _u64p, c_int],
        "cuzk_compute_h": [_u64p, _u64p, c_u32, c_int, _u64p],
        "cuzk_g1_fixed_base_mul": [_u64p, _u64p, c_u64, c_int, _u64p],
        "cuzk_g2_fixed_base_mul": [_u64p, _u64p, c_u64, c_int, _u64p],
        "cuzk_setup_scalars": [_u8p, c_u64, c_u64, c_u64, c_u64, c_u32, _u64p, _u64p, _u64p,
                               _u64p, _u64p, _u8p, c_u64, _u64p, c_int],
    }
    lib.cuzk_abi_version.argtypes = []
    lib.cuzk_abi_version.restype = c_int
    for name, argtypes in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = [c_int] + argtypes
        fn.restype = c_int
    # the curve comes from the files here: it is an output
    lib.cuzk_prove_files.argtypes = [ctypes.c_char_p, ctypes.c_char_p, _u64p, c_int, c_int,
                                     ctypes.POINTER(c_int), ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.POINTER(c_u64), ctypes.POINTER(ctypes.c_double)]
    lib.cuzk_prove_files.restype = c_int
    lib.cuzk_free.argtypes = [ctypes.c_void_p]
    lib.cuzk_free.restype = None


def lib():
    """The loaded ctypes library (loaded once, thread-safe)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                path = _find_library()
                try:
                    handle = ctypes.CDLL(path)
                    _declare(handle)
                except (OSError, AttributeError) as exc:
                    raise NativeCoreError(
                        f"native core at {path} could not be loaded ({exc}); rebuild it with "
                        "pip install .") from exc
                version = handle.cuzk_abi_version()
                if version != ABI_VERSION:
                    raise NativeCoreError(
                        f"native core at {path} has ABI version {version}, expected {ABI_VERSION}; "
                        "rebuild it with pip install .")
                _lib = handle
    return _lib


def available():
    """True when the native core can be loaded."""
    try:
        lib()
        return True
    except NativeCoreError:
        return False


def check(status, what):
    """NativeCoreError for a non-zero status of the C ABI, with its meaning."""
    if status != 0:
        msg = STATUS_MESSAGES.get(status, "unknown error")
        raise NativeCoreError(f"native {what} failed (status {status}): {msg}", status=status)
