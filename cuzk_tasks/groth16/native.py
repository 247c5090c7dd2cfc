"""ctypes bindings for the native CPU proving core (``cuzk_tasks._native``).

The shared object is compiled by ``pip install .`` from
``cuzk_tasks/native/src/cpu_core.cpp`` and exposes a plain C ABI.  This module
loads it with :mod:`ctypes` and offers numpy wrappers.

Data conventions (identical to the C ABI):

* field elements: 4 little-endian uint64 limbs; arrays of them are ``(n, 4)``
  ``uint64``;
* G1 affine bases: ``(n, 8)`` uint64 = x, y in Montgomery form, exactly as in a
  snarkjs zkey; an all-zero row is the point at infinity;
* G2 affine bases: ``(n, 16)`` uint64 = x.c0, x.c1, y.c0, y.c1 (Montgomery);
* MSM scalars: ``(n, 4)`` uint64 in STANDARD form (values >= r are reduced);
* MSM results: Jacobian ``X, Y, Z`` (G1: 12 limbs, G2: 24 limbs, each Fq2 as
  c0, c1), Montgomery form, ``x = X/Z^2``, ``y = Y/Z^3``; ``Z == 0`` is the
  point at infinity.  (The core currently returns normalised points with
  Z = 1 in Montgomery form, or all zeros for infinity, but do not rely on it:
  use :func:`cuzk_tasks.groth16.points.g1_jacobian_to_affine`.)
* NTT / QAP values: Montgomery form, except :func:`compute_h` output, which is
  in standard form ready to be used as MSM scalars.

Threads: every heavy call takes ``threads`` (None = :func:`default_threads`,
i.e. env ``CUZK_THREADS`` or ``os.cpu_count()``).  The C core never prints,
never throws across the ABI and returns a status code, which is mapped to
:class:`~cuzk_tasks.errors.NativeCoreError` here.  Env ``CUZK_MSM_WINDOW``
(2..22) forces the Pippenger window size (tuning/debugging only).
"""

import ctypes
import importlib.util
import os
import threading

import numpy as np

from .. import defaults
from ..errors import CuzkError, NativeCoreError

ABI_VERSION = 1

STATUS_MESSAGES = {
    1: "a required buffer pointer was NULL",
    2: "invalid argument (size, operation code or log2 domain size out of range)",
    3: "an input value is not a canonical field element (>= modulus)",
    4: "a zkey coefficient record is out of range (matrix not 0/1, constraint >= domain size "
       "or signal >= number of witness values)",
    5: "out of memory",
    6: "internal error in the native core",
    7: "a point is not on the curve",
}

FIELD_FR, FIELD_FQ = 0, 1
OP_ADD, OP_SUB, OP_MUL, OP_SQR, OP_INV, OP_NEG, OP_DBL = range(7)
POINT_ADD, POINT_DBL, POINT_NEG, POINT_MUL = range(4)

_lib = None
_lock = threading.Lock()

_u64p = ctypes.POINTER(ctypes.c_uint64)
_u8p = ctypes.POINTER(ctypes.c_uint8)


def _find_library():
    try:
        spec = importlib.util.find_spec("cuzk_tasks._native")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not os.path.exists(spec.origin):
        raise NativeCoreError(
            "native core not built: run pip install . (or python setup.py build_ext --inplace "
            "in a source checkout) to compile cuzk_tasks/_native")
    return spec.origin


def _declare(lib):
    c_int, c_u64, c_u32 = ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32
    sigs = {
        "cuzk_abi_version": [],
        "cuzk_g1_msm": [_u64p, _u64p, c_u64, c_int, _u64p],
        "cuzk_g2_msm": [_u64p, _u64p, c_u64, c_int, _u64p],
        "cuzk_fr_ntt": [_u64p, c_u32, c_int, c_int],
        "cuzk_fr_to_mont": [_u64p, c_u64],
        "cuzk_fr_from_mont": [_u64p, c_u64],
        "cuzk_fq_to_mont": [_u64p, c_u64],
        "cuzk_fq_from_mont": [_u64p, c_u64],
        "cuzk_field_op": [c_int, c_int, _u64p, _u64p, _u64p, c_u64],
        "cuzk_g1_point_op": [c_int, _u64p, _u64p, _u64p],
        "cuzk_g2_point_op": [c_int, _u64p, _u64p, _u64p],
        "cuzk_g1_check_points": [_u64p, c_u64, _u64p],
        "cuzk_g2_check_points": [_u64p, c_u64, _u64p],
        "cuzk_g1_to_affine": [_u64p, _u64p],
        "cuzk_g2_to_affine": [_u64p, _u64p],
        "cuzk_evaluate_ab": [_u8p, c_u64, _u64p, c_u64, c_u64, _u64p, _u64p, c_int],
        "cuzk_compute_h": [_u64p, _u64p, c_u32, c_int, _u64p],
    }
    for name, argtypes in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = c_int


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


def default_threads():
    """Threads for the native core: env CUZK_THREADS, else os.cpu_count()."""
    try:
        return defaults.thread_count()
    except CuzkError as exc:
        raise NativeCoreError(str(exc)) from None


def _threads(threads):
    return default_threads() if threads is None else int(threads)


def _check(status, what):
    if status != 0:
        msg = STATUS_MESSAGES.get(status, "unknown error")
        raise NativeCoreError(f"native {what} failed (status {status}): {msg}")


def _limbs(array, width, name):
    """Validate a uint64 limb array of shape (n, width) (or flat n*width)."""
    arr = np.asarray(array)
    if arr.dtype != np.uint64:
        raise ValueError(f"{name}: expected dtype uint64, got {arr.dtype}")
    if arr.ndim == 1:
        if arr.size % width:
            raise ValueError(f"{name}: flat length {arr.size} is not a multiple of {width}")
        arr = arr.reshape(-1, width)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError(f"{name}: expected shape (n, {width}), got {arr.shape}")
    return np.require(arr, dtype=np.uint64, requirements=["C_CONTIGUOUS", "ALIGNED"])


def _ptr(arr):
    return arr.ctypes.data_as(_u64p)


# --------------------------------------------------------------------------- MSM

def _msm(fn, bases, scalars, base_width, out_len, threads, what):
    b = _limbs(bases, base_width, "bases")
    s = _limbs(scalars, 4, "scalars")
    if b.shape[0] != s.shape[0]:
        raise ValueError(f"{what}: {b.shape[0]} bases but {s.shape[0]} scalars")
    out = np.zeros(out_len, dtype=np.uint64)
    _check(fn(_ptr(b), _ptr(s), b.shape[0], _threads(threads), _ptr(out)), what)
    return out


def g1_msm(bases, scalars, threads=None):
    """sum scalars[i] * bases[i] on G1; returns 12 limbs (Jacobian X, Y, Z, Montgomery)."""
    return _msm(lib().cuzk_g1_msm, bases, scalars, 8, 12, threads, "G1 MSM")


def g2_msm(bases, scalars, threads=None):
    """sum scalars[i] * bases[i] on G2; returns 24 limbs (Jacobian X, Y, Z over Fq2, Montgomery)."""
    return _msm(lib().cuzk_g2_msm, bases, scalars, 16, 24, threads, "G2 MSM")


# --------------------------------------------------------------------------- NTT

def _log2_exact(n, what):
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{what}: length {n} is not a power of two")
    return n.bit_length() - 1


def fr_ntt(values, inverse=False, threads=None):
    """NTT over Fr (Montgomery in and out, natural order); returns a new (n, 4) array.

    ``inverse=True`` computes the inverse transform including the 1/n factor.
    Uses snarkjs's roots of unity.
    """
    v = np.array(_limbs(values, 4, "values"), dtype=np.uint64, order="C", copy=True)
    log_n = _log2_exact(v.shape[0], "fr_ntt")
    _check(lib().cuzk_fr_ntt(_ptr(v), log_n, 1 if inverse else 0, _threads(threads)), "Fr NTT")
    return v


# --------------------------------------------------------------------------- conversions

def _convert(fn, values, what):
    v = np.array(_limbs(values, 4, "values"), dtype=np.uint64, order="C", copy=True)
    _check(fn(_ptr(v), v.shape[0]), what)
    return v


def fr_to_mont(values):
    return _convert(lib().cuzk_fr_to_mont, values, "Fr to-Montgomery")


def fr_from_mont(values):
    return _convert(lib().cuzk_fr_from_mont, values, "Fr from-Montgomery")


def fq_to_mont(values):
    return _convert(lib().cuzk_fq_to_mont, values, "Fq to-Montgomery")


def fq_from_mont(values):
    return _convert(lib().cuzk_fq_from_mont, values, "Fq from-Montgomery")


# --------------------------------------------------------------------------- test hooks

def field_op(field, op, a, b=None):
    """Element-wise field operation on Montgomery-form (n, 4) arrays.

    field: FIELD_FR (0) or FIELD_FQ (1); op: OP_ADD, OP_SUB, OP_MUL, OP_SQR,
    OP_INV (inv(0) = 0), OP_NEG, OP_DBL.
    """
    x = _limbs(a, 4, "a")
    if op in (OP_ADD, OP_SUB, OP_MUL):
        if b is None:
            raise ValueError("binary field op needs b")
        y = _limbs(b, 4, "b")
        if y.shape != x.shape:
            raise ValueError(f"shape mismatch {x.shape} vs {y.shape}")
    else:
        y = x
    out = np.zeros_like(x)
    _check(lib().cuzk_field_op(int(field), int(op), _ptr(x), _ptr(y), _ptr(out), x.shape[0]),
           "field op")
    return out


def _point_op(fn, width, op, p, q, what):
    pa = _limbs(p, width, "p")
    if op == POINT_MUL:
        qa = _limbs(q, 4, "k")
    elif op == POINT_ADD:
        qa = _limbs(q, width, "q")
    else:
        qa = pa
    out = np.zeros(width, dtype=np.uint64)
    _check(fn(int(op), _ptr(pa), _ptr(qa), _ptr(out)), what)
    return out


def g1_point_op(op, p, q=None):
    """Affine G1 op (8-limb Montgomery points): POINT_ADD p+q, POINT_DBL, POINT_NEG, POINT_MUL (q = scalar limbs)."""
    return _point_op(lib().cuzk_g1_point_op, 8, op, p, q, "G1 point op")


def g2_point_op(op, p, q=None):
    return _point_op(lib().cuzk_g2_point_op, 16, op, p, q, "G2 point op")


def _check_points(fn, width, points, what):
    pts = _limbs(points, width, "points")
    bad = ctypes.c_uint64(0)
    status = fn(_ptr(pts), pts.shape[0], ctypes.byref(bad))
    if status in (3, 7):
        raise NativeCoreError(f"{what}: point {bad.value}: {STATUS_MESSAGES[status]}")
    _check(status, what)


def g1_check_points(points):
    """Raise NativeCoreError unless every (n, 8) Montgomery affine point is on G1's curve."""
    _check_points(lib().cuzk_g1_check_points, 8, points, "G1 point check")


def g2_check_points(points):
    """Raise NativeCoreError unless every (n, 16) point is on the twist curve (no subgroup check)."""
    _check_points(lib().cuzk_g2_check_points, 16, points, "G2 point check")


def g1_to_affine(jac):
    j = _limbs(jac, 12, "jacobian")
    out = np.zeros(8, dtype=np.uint64)
    _check(lib().cuzk_g1_to_affine(_ptr(j), _ptr(out)), "G1 to-affine")
    return out


def g2_to_affine(jac):
    j = _limbs(jac, 24, "jacobian")
    out = np.zeros(16, dtype=np.uint64)
    _check(lib().cuzk_g2_to_affine(_ptr(j), _ptr(out)), "G2 to-affine")
    return out


# --------------------------------------------------------------------------- QAP

COEF_RECORD_SIZE = 44


def _coef_bytes(coefs):
    arr = np.asarray(coefs)
    if arr.dtype.itemsize != COEF_RECORD_SIZE and not (arr.dtype == np.uint8 and arr.ndim == 1):
        raise ValueError(f"coefs: expected 44-byte zkey section-4 records, got dtype {arr.dtype}")
    raw = np.require(arr, requirements=["C_CONTIGUOUS"])
    flat = raw.view(np.uint8).reshape(-1)
    if flat.size % COEF_RECORD_SIZE:
        raise ValueError(f"coefs: {flat.size} bytes is not a multiple of {COEF_RECORD_SIZE}")
    return flat, flat.size // COEF_RECORD_SIZE


def evaluate_ab(coefs, witness, domain_size, threads=None):
    """A·w and B·w on the evaluation domain (Montgomery (domain_size, 4) arrays).

    coefs: zkey section-4 records (structured array with a 44-byte itemsize, e.g.
    ``zkey.COEF_DTYPE``, or the raw bytes as uint8); witness: (n_vars, 4) standard form.
    """
    flat, n_coefs = _coef_bytes(coefs)
    w = _limbs(witness, 4, "witness")
    domain_size = int(domain_size)
    _log2_exact(domain_size, "evaluate_ab domain")
    a = np.empty((domain_size, 4), dtype=np.uint64)
    b = np.empty((domain_size, 4), dtype=np.uint64)
    _check(lib().cuzk_evaluate_ab(flat.ctypes.data_as(_u8p), n_coefs, _ptr(w), w.shape[0],
                                  domain_size, _ptr(a), _ptr(b), _threads(threads)),
           "evaluate_ab")
    return a, b


def compute_h(a, b, threads=None, overwrite=False):
    """snarkjs's H evaluations on the odd coset, STANDARD form (n, 4) (MSM scalars).

    a, b: domain evaluations (Montgomery).  They are copied unless
    ``overwrite=True``, in which case they are used as scratch.
    """
    aa = _limbs(a, 4, "a")
    bb = _limbs(b, 4, "b")
    if not (overwrite and aa.flags.writeable):
        aa = aa.copy()
    if not (overwrite and bb.flags.writeable) or np.shares_memory(aa, bb):
        bb = bb.copy()
    if aa.shape != bb.shape:
        raise ValueError(f"compute_h: shape mismatch {aa.shape} vs {bb.shape}")
    log_n = _log2_exact(aa.shape[0], "compute_h")
    h = np.empty_like(aa)
    _check(lib().cuzk_compute_h(_ptr(aa), _ptr(bb), log_n, _threads(threads), _ptr(h)),
           "compute_h")
    return h
