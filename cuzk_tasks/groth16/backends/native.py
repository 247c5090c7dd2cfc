"""ctypes bindings for the native CPU proving core (``cuzk_tasks._native``).

The shared object is compiled by ``pip install .`` from
``cuzk_tasks/native/src/cpu_core.cpp`` and exposes a plain C ABI.
:mod:`.native_lib` loads it with :mod:`ctypes` (without numpy, for the CLI's whole-file
prove); this module offers numpy wrappers.

Every function takes ``curve``: ``"bn128"`` (BN254, the default) or
``"bls12381"`` (BLS12-381), the snarkjs names.

Data conventions (identical to the C ABI), with L the curve's Fq limb count
(:func:`fq_limbs`: 4 for bn128, 6 for bls12381):

* field elements: little-endian uint64 limbs, Fr 4 (both curves), Fq L, Fq2 2L
  (c0 then c1); arrays of them are ``(n, limbs)`` ``uint64``;
* G1 affine bases: ``(n, 2L)`` uint64 = x, y in Montgomery form, exactly as in a
  snarkjs zkey; an all-zero row is the point at infinity;
* G2 affine bases: ``(n, 4L)`` uint64 = x.c0, x.c1, y.c0, y.c1 (Montgomery);
* MSM scalars: ``(n, 4)`` uint64 in STANDARD form (values >= r are reduced);
* MSM results: Jacobian ``X, Y, Z`` (G1: 3L limbs, G2: 6L limbs, each Fq2 as
  c0, c1), Montgomery form, ``x = X/Z^2``, ``y = Y/Z^3``; ``Z == 0`` is the
  point at infinity.  (The core currently returns normalised points with
  Z = 1 in Montgomery form, or all zeros for infinity, but do not rely on it:
  use :func:`cuzk_tasks.groth16.points.g1_jacobian_to_affine`.)
* NTT / QAP values: Montgomery form, except :func:`compute_h` output, which is
  in standard form ready to be used as MSM scalars.
* setup (``cuzk-tasks setup``): :func:`g1_fixed_base_mul` / :func:`g2_fixed_base_mul`
  take standard-form scalars < r and return affine rows exactly as a zkey stores them;
  :func:`setup_scalars` returns standard-form scalars.

Threads: every heavy call takes ``threads`` (None = :func:`default_threads`,
i.e. env ``CUZK_THREADS`` or ``os.cpu_count()``).  The C core never prints,
never throws across the ABI and returns a status code, which is mapped to
:class:`~cuzk_tasks.errors.NativeCoreError` here.  Env ``CUZK_MSM_WINDOW``
(2..22) forces the Pippenger window size (tuning/debugging only).
"""

import ctypes

import numpy as np

from cuzk_tasks.settings import defaults
from cuzk_tasks.errors import CuzkError, NativeCoreError
from .native_lib import ABI_VERSION, CURVES, STATUS_MESSAGES, available, check as _check, lib  # noqa: F401 (re-exported)

FIELD_FR, FIELD_FQ, FIELD_FQ2 = 0, 1, 2

DEFAULT_CURVE = "bn128"
FR_LIMBS = 4
OP_ADD, OP_SUB, OP_MUL, OP_SQR, OP_INV, OP_NEG, OP_DBL = range(7)
POINT_ADD, POINT_DBL, POINT_NEG, POINT_MUL = range(4)

_u64p = ctypes.POINTER(ctypes.c_uint64)
_u8p = ctypes.POINTER(ctypes.c_uint8)


def default_threads():
    """Threads for the native core: env CUZK_THREADS, else os.cpu_count()."""
    try:
        return defaults.thread_count()
    except CuzkError as exc:
        raise NativeCoreError(str(exc)) from None


def _threads(threads):
    return default_threads() if threads is None else int(threads)


def _curve_entry(curve):
    name = getattr(curve, "snarkjs_name", curve)  # a curves.Curve works too
    try:
        return CURVES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown curve {curve!r}: expected one of {sorted(CURVES)}") from None


def curve_id(curve):
    """The ABI id of a snarkjs curve name ("bn128", "bls12381") or of an object with that
    ``snarkjs_name`` (e.g. a :class:`cuzk_tasks.groth16.curves.Curve`)."""
    return _curve_entry(curve)[0]


def fq_limbs(curve=DEFAULT_CURVE):
    """64-bit limbs of an Fq element of ``curve`` (4 for bn128, 6 for bls12381)."""
    return _curve_entry(curve)[1]


def field_limbs(field, curve=DEFAULT_CURVE):
    """Limbs of one element of FIELD_FR / FIELD_FQ / FIELD_FQ2 on ``curve``."""
    L = fq_limbs(curve)
    try:
        return {FIELD_FR: FR_LIMBS, FIELD_FQ: L, FIELD_FQ2: 2 * L}[field]
    except KeyError:
        raise ValueError(f"unknown field {field!r}") from None


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

def _msm(fn, bases, scalars, base_width, out_len, threads, what, curve):
    b = _limbs(bases, base_width, "bases")
    s = _limbs(scalars, FR_LIMBS, "scalars")
    if b.shape[0] != s.shape[0]:
        raise ValueError(f"{what}: {b.shape[0]} bases but {s.shape[0]} scalars")
    out = np.zeros(out_len, dtype=np.uint64)
    _check(fn(curve_id(curve), _ptr(b), _ptr(s), b.shape[0], _threads(threads), _ptr(out)), what)
    return out


def g1_msm(bases, scalars, threads=None, curve=DEFAULT_CURVE):
    """sum scalars[i] * bases[i] on G1; returns 3L limbs (Jacobian X, Y, Z, Montgomery)."""
    L = fq_limbs(curve)
    return _msm(lib().cuzk_g1_msm, bases, scalars, 2 * L, 3 * L, threads, "G1 MSM", curve)


def g2_msm(bases, scalars, threads=None, curve=DEFAULT_CURVE):
    """sum scalars[i] * bases[i] on G2; returns 6L limbs (Jacobian X, Y, Z over Fq2, Montgomery)."""
    L = fq_limbs(curve)
    return _msm(lib().cuzk_g2_msm, bases, scalars, 4 * L, 6 * L, threads, "G2 MSM", curve)


# --------------------------------------------------------------------------- NTT

def _log2_exact(n, what):
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{what}: length {n} is not a power of two")
    return n.bit_length() - 1


def fr_ntt(values, inverse=False, threads=None, curve=DEFAULT_CURVE):
    """NTT over Fr (Montgomery in and out, natural order); returns a new (n, 4) array.

    ``inverse=True`` computes the inverse transform including the 1/n factor.
    Uses snarkjs's (ffjavascript's) roots of unity of the curve's Fr.
    """
    v = np.array(_limbs(values, FR_LIMBS, "values"), dtype=np.uint64, order="C", copy=True)
    log_n = _log2_exact(v.shape[0], "fr_ntt")
    _check(lib().cuzk_fr_ntt(curve_id(curve), _ptr(v), log_n, 1 if inverse else 0,
                             _threads(threads)), "Fr NTT")
    return v


# --------------------------------------------------------------------------- conversions

def _convert(fn, field, values, curve, what):
    v = np.array(_limbs(values, field_limbs(field, curve), "values"), dtype=np.uint64, order="C",
                 copy=True)
    _check(fn(curve_id(curve), field, _ptr(v), v.shape[0]), what)
    return v


def to_mont(field, values, curve=DEFAULT_CURVE):
    """Standard form -> Montgomery form, (n, limbs) of FIELD_FR / FIELD_FQ / FIELD_FQ2."""
    return _convert(lib().cuzk_to_mont, field, values, curve, "to-Montgomery")


def from_mont(field, values, curve=DEFAULT_CURVE):
    """Montgomery form -> standard form, (n, limbs) of FIELD_FR / FIELD_FQ / FIELD_FQ2."""
    return _convert(lib().cuzk_from_mont, field, values, curve, "from-Montgomery")


def fr_to_mont(values, curve=DEFAULT_CURVE):
    return to_mont(FIELD_FR, values, curve)


def fr_from_mont(values, curve=DEFAULT_CURVE):
    return from_mont(FIELD_FR, values, curve)


def fq_to_mont(values, curve=DEFAULT_CURVE):
    return to_mont(FIELD_FQ, values, curve)


def fq_from_mont(values, curve=DEFAULT_CURVE):
    return from_mont(FIELD_FQ, values, curve)


# --------------------------------------------------------------------------- test hooks

def field_op(field, op, a, b=None, curve=DEFAULT_CURVE):
    """Element-wise field operation on Montgomery-form (n, limbs) arrays.

    field: FIELD_FR (0), FIELD_FQ (1) or FIELD_FQ2 (2); op: OP_ADD, OP_SUB, OP_MUL,
    OP_SQR, OP_INV (inv(0) = 0), OP_NEG, OP_DBL.
    """
    width = field_limbs(field, curve)
    x = _limbs(a, width, "a")
    if op in (OP_ADD, OP_SUB, OP_MUL):
        if b is None:
            raise ValueError("binary field op needs b")
        y = _limbs(b, width, "b")
        if y.shape != x.shape:
            raise ValueError(f"shape mismatch {x.shape} vs {y.shape}")
    else:
        y = x
    out = np.zeros_like(x)
    _check(lib().cuzk_field_op(curve_id(curve), int(field), int(op), _ptr(x), _ptr(y), _ptr(out),
                               x.shape[0]), "field op")
    return out


def _point_op(fn, width, op, p, q, what, curve):
    pa = _limbs(p, width, "p")
    if op == POINT_MUL:
        qa = _limbs(q, FR_LIMBS, "k")
    elif op == POINT_ADD:
        qa = _limbs(q, width, "q")
    else:
        qa = pa
    out = np.zeros(width, dtype=np.uint64)
    _check(fn(curve_id(curve), int(op), _ptr(pa), _ptr(qa), _ptr(out)), what)
    return out


def g1_point_op(op, p, q=None, curve=DEFAULT_CURVE):
    """Affine G1 op (2L-limb Montgomery points): POINT_ADD p+q, POINT_DBL, POINT_NEG, POINT_MUL (q = scalar limbs)."""
    return _point_op(lib().cuzk_g1_point_op, 2 * fq_limbs(curve), op, p, q, "G1 point op", curve)


def g2_point_op(op, p, q=None, curve=DEFAULT_CURVE):
    return _point_op(lib().cuzk_g2_point_op, 4 * fq_limbs(curve), op, p, q, "G2 point op", curve)


def _check_points(fn, width, points, what, curve):
    pts = _limbs(points, width, "points")
    bad = ctypes.c_uint64(0)
    status = fn(curve_id(curve), _ptr(pts), pts.shape[0], ctypes.byref(bad))
    if status in (3, 7):
        raise NativeCoreError(f"{what}: point {bad.value}: {STATUS_MESSAGES[status]}")
    _check(status, what)


def g1_check_points(points, curve=DEFAULT_CURVE):
    """Raise NativeCoreError unless every (n, 2L) Montgomery affine point is on G1's curve."""
    _check_points(lib().cuzk_g1_check_points, 2 * fq_limbs(curve), points, "G1 point check", curve)


def g2_check_points(points, curve=DEFAULT_CURVE):
    """Raise NativeCoreError unless every (n, 4L) point is on the twist curve (no subgroup check)."""
    _check_points(lib().cuzk_g2_check_points, 4 * fq_limbs(curve), points, "G2 point check", curve)


def g1_to_affine(jac, curve=DEFAULT_CURVE):
    L = fq_limbs(curve)
    j = _limbs(jac, 3 * L, "jacobian")
    out = np.zeros(2 * L, dtype=np.uint64)
    _check(lib().cuzk_g1_to_affine(curve_id(curve), _ptr(j), _ptr(out)), "G1 to-affine")
    return out


def g2_to_affine(jac, curve=DEFAULT_CURVE):
    L = fq_limbs(curve)
    j = _limbs(jac, 6 * L, "jacobian")
    out = np.zeros(4 * L, dtype=np.uint64)
    _check(lib().cuzk_g2_to_affine(curve_id(curve), _ptr(j), _ptr(out)), "G2 to-affine")
    return out


# --------------------------------------------------------------------------- pairing

def _pairs(g1, g2, curve):
    L = fq_limbs(curve)
    p = _limbs(g1, 2 * L, "g1")
    q = _limbs(g2, 4 * L, "g2")
    if p.shape[0] != q.shape[0]:
        raise ValueError(f"pairing: {p.shape[0]} G1 points but {q.shape[0]} G2 points")
    return p, q


def pairing(g1, g2, curve=DEFAULT_CURVE):
    """prod_i e(g1[i], g2[i]) exactly as snarkjs computes it (the reference's
    ``Pairing.pairing`` for one pair): a 12-tuple of standard-form ints in the
    reference's flat Fq12 order (ffjavascript's Gt memory order).

    g1: (n, 2L) and g2: (n, 4L) Montgomery affine points (all-zero rows are infinity),
    on the curve and in the order-r subgroups (the subgroups are not checked here).
    """
    p, q = _pairs(g1, g2, curve)
    L = fq_limbs(curve)
    out = np.zeros((12, L), dtype=np.uint64)
    _check(lib().cuzk_pairing(curve_id(curve), _ptr(p), _ptr(q), p.shape[0], _ptr(out)), "pairing")
    raw = out.tobytes()
    return tuple(int.from_bytes(raw[8 * L * i:8 * L * (i + 1)], "little") for i in range(12))


def pairing_check(g1, g2, curve=DEFAULT_CURVE):
    """True iff prod_i e(g1[i], g2[i]) == 1 (one multi-Miller loop, one final
    exponentiation); arguments as for :func:`pairing`."""
    p, q = _pairs(g1, g2, curve)
    result = ctypes.c_int(0)
    _check(lib().cuzk_pairing_check(curve_id(curve), _ptr(p), _ptr(q), p.shape[0],
                                    ctypes.byref(result)), "pairing check")
    return result.value == 1


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


def evaluate_ab(coefs, witness, domain_size, threads=None, curve=DEFAULT_CURVE):
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
    _check(lib().cuzk_evaluate_ab(curve_id(curve), flat.ctypes.data_as(_u8p), n_coefs, _ptr(w), w.shape[0],
                                  domain_size, _ptr(a), _ptr(b), _threads(threads)),
           "evaluate_ab")
    return a, b


def compute_h(a, b, threads=None, overwrite=False, curve=DEFAULT_CURVE):
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
    _check(lib().cuzk_compute_h(curve_id(curve), _ptr(aa), _ptr(bb), log_n, _threads(threads), _ptr(h)),
           "compute_h")
    return h


# --------------------------------------------------------------------------- setup

def _fixed_base_mul(fn, base, scalars, width, threads, what, curve):
    b = _limbs(base, width, "base")
    if b.shape[0] != 1:
        raise ValueError(f"{what}: expected one base point, got {b.shape[0]}")
    s = _limbs(scalars, FR_LIMBS, "scalars")
    out = np.empty((s.shape[0], width), dtype=np.uint64)
    _check(fn(curve_id(curve), _ptr(b), _ptr(s), s.shape[0], _threads(threads), _ptr(out)), what)
    return out


def g1_fixed_base_mul(base, scalars, threads=None, curve=DEFAULT_CURVE):
    """scalars[i] * base for one affine G1 point (2L Montgomery limbs) and (n, 4) standard-form
    scalars < r: (n, 2L) affine Montgomery points, all zero for infinity (the zkey layout)."""
    return _fixed_base_mul(lib().cuzk_g1_fixed_base_mul, base, scalars, 2 * fq_limbs(curve),
                           threads, "G1 fixed-base multiplication", curve)


def g2_fixed_base_mul(base, scalars, threads=None, curve=DEFAULT_CURVE):
    """As :func:`g1_fixed_base_mul` on G2: (n, 4L) affine Montgomery points."""
    return _fixed_base_mul(lib().cuzk_g2_fixed_base_mul, base, scalars, 4 * fq_limbs(curve),
                           threads, "G2 fixed-base multiplication", curve)


def setup_scalars(constraints, n_constraints, n_vars, n_public, domain_size, toxic, threads=None,
                  curve=DEFAULT_CURVE):
    """The scalars of every section of a snarkjs-layout zkey (see setup_cpu.hpp).

    constraints: the raw r1cs constraint section (bytes-like, 32-byte coefficients);
    toxic: (5, 4) standard-form limbs of tau, alpha, beta, 1/gamma, 1/delta.
    Returns ``(a, b, k, h, coefs)``: (n_vars, 4) A_s(tau), B_s(tau), the IC / C scalars
    (divided by gamma for s <= n_public, by delta after), (domain_size, 4) the H
    scalars, all standard form, and the section-4 records as 44-byte rows (uint8).
    The caller wipes the scalars (they are derived from the toxic waste).
    """
    cons = np.frombuffer(constraints, dtype=np.uint8)
    log_n = _log2_exact(int(domain_size), "setup domain")
    t = _limbs(toxic, FR_LIMBS, "toxic")
    if t.shape[0] != 5:
        raise ValueError(f"toxic: expected 5 values, got {t.shape[0]}")
    # every A or B term is a record, a term takes at least 36 bytes of the section
    cap = cons.size // (4 + 32) + n_public + 1
    a, b, k = (np.empty((n_vars, FR_LIMBS), dtype=np.uint64) for _ in range(3))
    h = np.empty((int(domain_size), FR_LIMBS), dtype=np.uint64)
    coefs = np.empty((cap, COEF_RECORD_SIZE), dtype=np.uint8)
    n_coefs = ctypes.c_uint64(0)
    status = lib().cuzk_setup_scalars(curve_id(curve), cons.ctypes.data_as(_u8p), cons.size,
                                    int(n_constraints), int(n_vars), int(n_public), log_n,
                                    _ptr(t), _ptr(a), _ptr(b), _ptr(k), _ptr(h),
                                    coefs.ctypes.data_as(_u8p), cap, ctypes.byref(n_coefs),
                                    _threads(threads))
    # the input's faults, for the caller to blame on the r1cs file
    if status == 4:
        raise ValueError("the constraint section is malformed (truncated, trailing bytes or a "
                         f"wire >= nWires={n_vars})")
    if status == 3:
        raise ValueError("a constraint coefficient is not reduced mod r")
    _check(status, "setup scalars")
    return a, b, k, h, coefs[:n_coefs.value]
