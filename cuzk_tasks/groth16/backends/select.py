"""Compute backends for the heavy part of proving (evaluations, NTTs, MSMs).

A backend turns numpy arrays from the zkey and witness into group elements.
The CPU backend is the native C++ core; the GPU backend (CuPy) plugs in behind
the same methods, so the prover never needs to know which one runs: ``load(zkey)``
gives the key the backend computes on (the zkey itself on the CPU, a device copy on a
GPU), then ``evaluate_ab``, ``compute_h``, ``g1_msm`` and ``g2_msm``.
"""

import logging

from cuzk_tasks.settings import defaults
from cuzk_tasks.errors import CuzkError
from .. import points
from ..curves import BLS12_381, BN254
from .devices import nvidia_driver_present

log = logging.getLogger(__name__)


class CpuBackend:
    """The native multithreaded C++ core."""

    name = "cpu"
    #: the curves it proves (the native core is written once for both)
    curves = (BN254, BLS12_381)

    def __init__(self, threads=None):
        from . import native  # imported lazily so a missing build is a clear error at use

        self._native = native
        self.threads = threads or native.default_threads()

    def load(self, zkey, name=None):
        """The proving key as this backend computes on it: the host zkey itself (its
        sections are memory-mapped; the GPU backend returns a device copy instead)."""
        return zkey

    def evaluate_ab(self, zkey, witness_values):
        return self._native.evaluate_ab(zkey.coefs, witness_values, zkey.domain_size,
                                        threads=self.threads, curve=zkey.curve)

    def compute_h(self, a_evals, b_evals, curve=BN254):
        return self._native.compute_h(a_evals, b_evals, threads=self.threads, curve=curve)

    def g1_msm(self, bases, scalars, curve=BN254):
        return points.g1_jacobian_to_affine(
            self._native.g1_msm(bases, scalars, threads=self.threads, curve=curve), curve)

    def g2_msm(self, bases, scalars, curve=BN254):
        return points.g2_jacobian_to_affine(
            self._native.g2_msm(bases, scalars, threads=self.threads, curve=curve), curve)


BACKENDS = ("cpu", "gpu", "auto")


def get_backend(name=None, **options):
    """Return a backend by name: ``cpu``, ``gpu`` or ``auto`` (default: env CUZK_BACKEND or auto).

    ``auto`` picks the GPU when one is usable and the CPU core otherwise.
    """
    name = (name or defaults.backend_name()).lower()
    if name not in BACKENDS:
        raise CuzkError(f"unknown backend {name!r}: expected one of {', '.join(BACKENDS)}")
    if name == "gpu" or (name == "auto" and nvidia_driver_present()):
        try:
            # lazy: the GPU backend needs CuPy (the optional [gpu] extra)
            from .gpu import GpuBackend, gpu_available
        except ImportError:
            if name == "gpu":
                raise CuzkError("backend 'gpu' requested but the GPU backend is not available "
                                "in this build (install cuzk-tasks[gpu] on a host with a CUDA device)")
        else:
            # auto: the GPU only when CuPy is installed and sees a device; otherwise the CPU core.
            if name == "gpu" or gpu_available():
                try:
                    return GpuBackend(**options)
                except CuzkError as exc:
                    if name == "gpu":
                        raise
                    log.warning("backend auto: a CUDA device is visible but the GPU backend is "
                                "unusable (%s); using the CPU core", exc)
    return CpuBackend(**{k: v for k, v in options.items() if k == "threads"})
