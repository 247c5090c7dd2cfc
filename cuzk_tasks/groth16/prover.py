"""The Groth16 prover, split as the pipeline needs it.

Notation follows the Groth16 paper and snarkjs.  With witness w (w_0 = 1,
w_1..w_ℓ public) and zkey bases A_i, B_i (G1 and G2), C_i (private only) and
H_j, a proof for random r, s is::

    π_A = α + Σ w_i·A_i + r·δ
    π_B = β + Σ w_i·B_i + s·δ                      (in G2)
    π_C = Σ w_i·C_i + Σ h_j·H_j + s·π_A + r·B'_1 − r·s·δ
          where B'_1 = β + Σ w_i·B_i + s·δ in G1

:func:`prove_start` does the part a GPU accelerates: the QAP step (evaluate A
and B at the constraints, C = A∘B, H on the odd coset) and the four G1 MSMs.
It returns a :class:`PartialProof`: four points and the public signals,
small enough to pass through Redis.  :func:`prove_finish` does the CPU tail:
the G2 MSM, drawing r and s, assembly and self-verification.
"""

import logging
import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import FormatError, NativeCoreError, ProofError, SelfVerificationError
from ..settings import defaults
from . import points
from .backends.select import get_backend
from .curves import BN254, curve_by_name
from .formats import jsonio
from .formats.wtns import check_witness_curve
from .reference.curve import g1_of
from .verifier import export_verification_key
from .verifier import verify as verify_proof

log = logging.getLogger(__name__)


@dataclass
class PartialProof:
    """Result of :func:`prove_start`: the G1 MSM sums and the public signals."""

    public_signals: list
    a: tuple          # Σ w_i·A_i
    b1: tuple         # Σ w_i·B_i in G1
    c: tuple          # Σ_{private i} w_i·C_i
    h: tuple          # Σ h_j·H_j
    n_vars: int
    domain_size: int
    zkey_delta1: tuple
    backend: str = "cpu"
    timings_ms: dict = field(default_factory=dict)
    curve: object = BN254  # a curves.Curve; "curve" in JSON (snarkjs name), BN254 when absent

    def to_json(self):
        """A JSON-serialisable dict (decimal strings); inverse of :meth:`from_json`."""
        return {
            "curve": self.curve.snarkjs_name,
            "public_signals": [str(v) for v in self.public_signals],
            "a": _g1_to_json(self.a),
            "b1": _g1_to_json(self.b1),
            "c": _g1_to_json(self.c),
            "h": _g1_to_json(self.h),
            "n_vars": self.n_vars,
            "domain_size": self.domain_size,
            "zkey_delta1": _g1_to_json(self.zkey_delta1),
            "backend": self.backend,
            "timings_ms": dict(self.timings_ms),
        }

    @classmethod
    def from_json(cls, obj):
        try:
            curve = curve_by_name(obj.get("curve") or BN254.snarkjs_name)
            return cls(
                public_signals=[int(v) for v in obj["public_signals"]],
                a=_g1_from_json(obj["a"], curve),
                b1=_g1_from_json(obj["b1"], curve),
                c=_g1_from_json(obj["c"], curve),
                h=_g1_from_json(obj["h"], curve),
                n_vars=int(obj["n_vars"]),
                domain_size=int(obj["domain_size"]),
                zkey_delta1=_g1_from_json(obj["zkey_delta1"], curve),
                backend=str(obj.get("backend", "cpu")),
                timings_ms=dict(obj.get("timings_ms", {})),
                curve=curve,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FormatError(None, "partial proof", f"malformed partial proof: {exc!r}") from None


def _g1_to_json(p):
    return None if p is None else [str(p[0]), str(p[1])]


def _g1_from_json(obj, curve):
    if obj is None:
        return None
    point = (int(obj[0]), int(obj[1]))
    if not g1_of(curve).is_on_curve(point):
        raise ValueError(f"point not on {curve.name} G1")
    return point


class _Timer:
    def __init__(self, timings):
        self.timings = timings

    def __call__(self, name):
        timer = self

        class _Step:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.timings[name] = round((time.perf_counter() - self.t0) * 1000.0, 3)
                log.debug("%s: %.1f ms", name, timer.timings[name])

        return _Step()


def require_backend_curve(backend, zkey):
    """A backend proves the curves it lists (``backend.curves``): a zkey of another curve is
    refused here, before any backend work, rather than half-proved."""
    curves = getattr(backend, "curves", (BN254,))
    if zkey.curve not in curves:
        raise ProofError(f"the {backend.name} backend does not prove {zkey.curve.name} yet (zkey "
                         f"{zkey.path}; it proves {', '.join(c.name for c in curves)}): use the "
                         "cpu backend")


def witness_values(witness, zkey, source=None):
    """The witness as an (nVars, 4) uint64 array, checked against the zkey (curve, length)."""
    values = getattr(witness, "values", witness)
    values = np.ascontiguousarray(values, dtype="<u8")
    source = source or getattr(witness, "path", None)
    prime = getattr(witness, "prime", None)
    if prime is not None:
        check_witness_curve(prime, source, zkey)
    if values.ndim != 2 or values.shape[1] != 4:
        raise FormatError(source, "witness", f"expected an (n, 4) uint64 array, got shape {values.shape}")
    if values.shape[0] != zkey.n_vars:
        raise FormatError(source, "witness length",
                          f"witness has {values.shape[0]} values, zkey {zkey.path} expects nVars={zkey.n_vars}")
    if not (values[0, 0] == 1 and not values[0, 1:].any()):
        raise FormatError(source, "witness[0]", "the first witness value must be 1")
    return values


def _backend(backend, default=None):
    """A backend object as given, or the one named by ``backend`` (None: ``default``)."""
    if backend is not None and not isinstance(backend, str):
        return backend
    return get_backend(backend or default)


def _consumed(zkey, release_pages, *names):
    """With ``release_pages`` (one-shot proving, e.g. the CLI) hand the mapped pages of
    zkey sections the prover is done with back to the OS: peak RSS then stays near one
    section plus scratch.  A worker keeping the zkey resident for the next partition
    leaves them mapped."""
    if release_pages:
        zkey.drop_pages(*names)


#: native statuses that mean the MSM's bases are bad: a coordinate >= the modulus (3), a point
#: not on the curve (7).  The witness values are checked before (witness_values), so the
#: point data of the zkey is at fault.
_BAD_POINT_STATUSES = (3, 7)


def _zkey_msm(zkey, section, msm, *args, **kwargs):
    """``msm(*args, **kwargs)`` over the zkey section ``section``; a native status that means
    bad point data becomes a FormatError naming the zkey file and the section."""
    try:
        return msm(*args, **kwargs)
    except NativeCoreError as exc:
        if exc.status not in _BAD_POINT_STATUSES:
            raise
        raise FormatError(zkey.path, section, f"point data rejected by the prover "
                          f"({exc}): a corrupt zkey?") from None


def prove_start(zkey, witness, backend=None, release_pages=False):
    """QAP evaluation, H, and the four G1 MSMs: the accelerator's share of a proof."""
    backend = _backend(backend)
    require_backend_curve(backend, zkey)
    curve = zkey.curve
    w = witness_values(witness, zkey)
    timings = {}
    step = _Timer(timings)
    with step("load"):
        # what the backend computes on: the zkey itself (CPU), or its device copy (GPU;
        # uploaded by the first proof of this zkey, then kept)
        key = backend.load(zkey)
    with step("evaluate_ab"):
        a_evals, b_evals = backend.evaluate_ab(key, w)
    _consumed(zkey, release_pages, "coefs")
    with step("compute_h"):
        h = backend.compute_h(a_evals, b_evals, curve=curve)
    del a_evals, b_evals
    with step("msm_h"):
        h_sum = _zkey_msm(zkey, "H points", backend.g1_msm, key.h_points, h, curve=curve)
    del h
    _consumed(zkey, release_pages, "h_points")
    with step("msm_a"):
        a = _zkey_msm(zkey, "A points", backend.g1_msm, key.a_points, w, curve=curve)
    _consumed(zkey, release_pages, "a_points")
    with step("msm_b1"):
        b1 = _zkey_msm(zkey, "B1 points", backend.g1_msm, key.b1_points, w, curve=curve)
    _consumed(zkey, release_pages, "b1_points")
    with step("msm_c"):
        c = _zkey_msm(zkey, "C points", backend.g1_msm, key.c_points, w[zkey.n_public + 1:],
                      curve=curve)
    _consumed(zkey, release_pages, "c_points")
    public = [int.from_bytes(w[i].tobytes(), "little") for i in range(1, zkey.n_public + 1)]
    return PartialProof(public_signals=public, a=a, b1=b1, c=c, h=h_sum, n_vars=zkey.n_vars,
                        domain_size=zkey.domain_size, zkey_delta1=zkey.delta1,
                        backend=backend.name, timings_ms=timings, curve=curve)


def assemble_proof(zkey, partial, b2, r, s, backend):
    """The Groth16 assembly from the MSM sums and the blinding factors r, s.

    Each output is a short linear combination of known points, so it runs as a
    tiny MSM on the backend rather than as Python-int scalar multiplications.
    """
    curve = zkey.curve

    def g1_combination(terms):
        bases = np.stack([points.g1_affine_to_mont(p, curve) for p, _ in terms])
        return backend.g1_msm(bases, points.ints_to_limb_array([k % curve.r for _, k in terms]),
                              curve=curve)

    pi_a = g1_combination([(zkey.alpha1, 1), (partial.a, 1), (zkey.delta1, r)])
    b1 = g1_combination([(zkey.beta1, 1), (partial.b1, 1), (zkey.delta1, s)])
    g2_bases = np.stack([points.g2_affine_to_mont(p, curve) for p in (zkey.beta2, b2, zkey.delta2)])
    pi_b = backend.g2_msm(g2_bases, points.ints_to_limb_array([1, 1, s]), curve=curve)
    pi_c = g1_combination([(partial.c, 1), (partial.h, 1), (pi_a, s), (b1, r), (zkey.delta1, -r * s)])
    return pi_a, pi_b, pi_c


def verification_key(zkey):
    """The zkey's verification key, computed once per ZKey object (it costs a pairing)."""
    cached = getattr(zkey, "_cuzk_vkey", None)
    if cached is None:
        cached = export_verification_key(zkey)
        try:
            zkey._cuzk_vkey = cached
        except AttributeError:
            pass
    return cached


def prove_finish(partial, zkey, witness, backend=None, r=None, s=None, verify=defaults.SELF_VERIFY,
                 vkey=None, release_pages=False):
    """G2 MSM, assembly and self-verification; returns ``(proof_json, public_json)``.

    ``r`` and ``s`` are drawn with :mod:`secrets` unless given (tests only).
    With ``verify`` (the default) a proof that fails the pairing check raises
    :class:`SelfVerificationError` (a :class:`ProofError`) and is never returned.
    """
    if isinstance(partial, dict):
        partial = PartialProof.from_json(partial)
    if partial.curve is not zkey.curve or partial.n_vars != zkey.n_vars \
            or partial.zkey_delta1 != zkey.delta1:
        raise ProofError(f"partial proof was made with a different zkey than {zkey.path}")
    backend = _backend(backend, "cpu")
    require_backend_curve(backend, zkey)
    curve = zkey.curve
    w = witness_values(witness, zkey)
    timings = partial.timings_ms
    step = _Timer(timings)
    with step("msm_b2"):
        b2 = _zkey_msm(zkey, "B2 points", backend.g2_msm, zkey.b2_points, w, curve=curve)
    _consumed(zkey, release_pages, "b2_points")
    r = secrets.randbelow(curve.r) if r is None else r % curve.r
    s = secrets.randbelow(curve.r) if s is None else s % curve.r
    with step("assemble"):
        pi_a, pi_b, pi_c = assemble_proof(zkey, partial, b2, r, s, backend)
        proof = jsonio.proof_to_json(pi_a, pi_b, pi_c, curve=curve)
        public = jsonio.public_to_json(partial.public_signals)
    if verify:
        with step("self_verify"):
            ok = verify_proof(vkey or verification_key(zkey), public, proof)
        if not ok:
            raise SelfVerificationError(
                f"proof for {zkey.path} failed self-verification: the witness does not satisfy "
                "the circuit's constraints, or a compute kernel returned a wrong result; "
                "the proof was discarded")
    return proof, public


def prove(zkey, witness, backend=None, verify=defaults.SELF_VERIFY, vkey=None, release_pages=False):
    """One-call prove: :func:`prove_start` then :func:`prove_finish`."""
    backend = _backend(backend)
    partial = prove_start(zkey, witness, backend=backend, release_pages=release_pages)
    finish_backend = backend if backend.name == "cpu" else None
    return prove_finish(partial, zkey, witness, backend=finish_backend, verify=verify, vkey=vkey,
                        release_pages=release_pages)
