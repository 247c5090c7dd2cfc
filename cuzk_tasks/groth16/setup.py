"""``cuzk-tasks setup``: a fast single-party Groth16 setup on the native core.

FOR DEVELOPMENT AND BENCHMARKS ONLY.  The toxic waste (tau, alpha, beta, gamma,
delta) is drawn here from :mod:`secrets`, used once and dropped, but it lived in this
process's memory: anyone who saw that memory (a core dump, a debugger, swap) can forge
proofs for the circuit.  A production zkey needs a multi-party ceremony (snarkjs
``powersoftau`` + ``zkey contribute``).

The zkey is laid out exactly as snarkjs's ``zkey new`` writes one (sections 1-10, see
:mod:`.zkey`), with the Lagrange-basis points of a powers-of-tau file replaced by the
values at tau themselves:

* domain: the smallest power of two n >= nConstraints + nPublic + 1; snarkjs appends one
  constraint per public signal s = 0..nPublic whose A is wire s (coefficient 1), so the
  IC points are independent even when a public signal is unused;
* A_s, B1_s, B2_s = A_s(tau), B_s(tau) (G1, G1, G2);
* IC_s = (beta A_s(tau) + alpha B_s(tau) + C_s(tau)) / gamma for s <= nPublic, the C
  points the same over delta for the private wires;
* H_i = L_{2i+1}(tau) / delta, L the Lagrange basis of the size-2n domain: the odd coset
  the prover evaluates H on (:func:`.prover.prove_start`, ``compute_h``);
* section 10 holds no contribution (snarkjs's "zkey new" state; a random delta stands in
  for the contributions) and, instead of snarkjs's csHash of the ptau-derived points, a
  BLAKE2b-512 of the r1cs constraint section.  ``snarkjs zkey contribute`` accepts the
  file (tried on the mulchain fixture), but that does not make it a ceremony's: tau,
  alpha and beta were still drawn by this one process.

The scalar work (Lagrange coefficients by batch inversion, the QAP sums over the r1cs
terms) and the point work (windowed fixed-base multiplication of the generators) run in
the native core, templated over the curve (``setup_cpu.hpp``).
"""

from __future__ import annotations

import hashlib
import secrets
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..errors import CuzkError, FormatError
from ..paths import atomic_output
from . import points
from .backends import native
from .formats.binfile import write_bin_header
from .formats.r1cs import read_r1cs_raw
from .formats.zkey import (PROTOCOL_GROTH16, SEC_A, SEC_B1, SEC_B2, SEC_C, SEC_COEFS, SEC_CONTRIB,
                   SEC_GROTH16, SEC_H, SEC_HEADER, SEC_IC, ZKEY_MAGIC, ZKEY_VERSIONS)

DEV_ONLY_NOTICE = ("single-party development setup: NOT for production -- the toxic waste was "
                   "drawn in this process, and anyone who saw its memory could forge proofs")

_SECTION = struct.Struct("<IQ")


@dataclass
class SetupReport:
    """What :func:`setup` made: the circuit's shape and the seconds of each stage."""

    zkey_path: str
    curve: object
    n_constraints: int
    n_vars: int
    n_public: int
    domain_size: int
    n_coefs: int
    stages: dict = field(default_factory=dict)  # stage name -> seconds, in order

    @property
    def seconds(self) -> float:
        return sum(self.stages.values())


def domain_size_for(n_constraints: int, n_public: int) -> int:
    """snarkjs's Groth16 domain: the smallest power of two >= nConstraints + nPublic + 1."""
    need = n_constraints + n_public + 1
    return 1 << max(0, (need - 1).bit_length())


def draw_toxic_waste(curve):
    """(tau, alpha, beta, gamma, delta), each uniform in [1, r)."""
    return tuple(1 + secrets.randbelow(curve.r - 1) for _ in range(5))


def _write_section(f, stype, *chunks):
    payload = [memoryview(np.ascontiguousarray(c)).cast("B") if isinstance(c, np.ndarray)
               else c for c in chunks]
    f.write(_SECTION.pack(stype, sum(len(c) for c in payload)))
    for chunk in payload:
        f.write(chunk)


def setup(r1cs_path, zkey_path, threads=None,
          progress: Optional[Callable[[str, float], None]] = None) -> SetupReport:
    """Make a snarkjs-compatible Groth16 zkey for ``r1cs_path`` at ``zkey_path``.

    Single-party, for development and benchmarks only (see the module docstring).
    ``progress(stage, seconds)`` is called after each stage.  The file appears at
    ``zkey_path`` only once complete (written to a temporary sibling, then renamed).
    """
    stages = {}
    t_stage = [time.perf_counter()]

    def done(stage):
        now = time.perf_counter()
        stages[stage] = now - t_stage[0]
        t_stage[0] = now
        if progress is not None:
            progress(stage, stages[stage])

    header, constraints = read_r1cs_raw(r1cs_path)
    curve = header.curve
    if header.n8 != curve.n8r:
        raise FormatError(header.path, "n8", f"coefficients are {header.n8} bytes, expected "
                                             f"{curve.n8r} for {curve}")
    n_public = header.n_public
    n_vars = header.n_wires
    if n_vars < n_public + 1:
        raise FormatError(header.path, "nWires",
                          f"nWires={n_vars} but the circuit has {n_public} public signals")
    domain = domain_size_for(header.n_constraints, n_public)
    # H lives on the size-2n domain, so 2n must still divide r - 1
    if domain.bit_length() > curve.two_adicity:
        raise FormatError(header.path, "mConstraints",
                          f"{header.n_constraints} constraints need a 2^{domain.bit_length() - 1} "
                          f"domain; {curve} supports up to 2^{curve.two_adicity - 1} for Groth16")
    done("read r1cs")

    tau, alpha, beta, gamma, delta = draw_toxic_waste(curve)
    toxic = points.ints_to_limb_array([tau, alpha, beta, pow(gamma, -1, curve.r),
                                       pow(delta, -1, curve.r)])
    # the curve points of alpha, beta, gamma, delta are all the header needs of them
    g1_gen = points.g1_affine_to_mont(curve.g1, curve)
    g2_gen = points.g2_affine_to_mont(curve.g2, curve)
    header_scalars = points.ints_to_limb_array([alpha, beta, delta, gamma])
    del tau, alpha, beta, gamma, delta  # Python cannot wipe ints; drop the names at least
    try:
        a, b, k, h, coefs = native.setup_scalars(constraints, header.n_constraints, n_vars,
                                                 n_public, domain, toxic, threads=threads,
                                                 curve=curve)
    except ValueError as exc:
        raise FormatError(header.path, "section 2 (constraints)", str(exc)) from None
    finally:
        toxic.fill(0)
    done("QAP at tau")
    g1_mul = native.g1_fixed_base_mul
    g2_mul = native.g2_fixed_base_mul
    try:
        alpha1, beta1, delta1, _ = g1_mul(g1_gen, header_scalars, threads=threads, curve=curve)
        _, beta2, delta2, gamma2 = g2_mul(g2_gen, header_scalars, threads=threads, curve=curve)
        made = {}
        for stage, mul, gen, scalars in (("IC and C points (G1)", g1_mul, g1_gen, k),
                                         ("A points (G1)", g1_mul, g1_gen, a),
                                         ("B1 points (G1)", g1_mul, g1_gen, b),
                                         ("B2 points (G2)", g2_mul, g2_gen, b),
                                         ("H points (G1)", g1_mul, g1_gen, h)):
            made[stage] = mul(gen, scalars, threads=threads, curve=curve)
            done(stage)
    finally:
        for arr in (header_scalars, a, b, k, h):
            arr.fill(0)  # derived from the toxic waste: do not leave them for a core dump
    ic_c, a_points, b1_points, b2_points, h_points = made.values()

    groth16_header = b"".join([
        struct.pack("<I", curve.n8q), curve.q.to_bytes(curve.n8q, "little"),
        struct.pack("<I", curve.n8r), curve.r.to_bytes(curve.n8r, "little"),
        struct.pack("<III", n_vars, n_public, domain),
        alpha1.tobytes(), beta1.tobytes(), beta2.tobytes(), gamma2.tobytes(),
        delta1.tobytes(), delta2.tobytes(),
    ])
    # snarkjs's mpcParams with no contribution: a 64-byte hash, then nContributions = 0
    contributions = hashlib.blake2b(constraints, digest_size=64).digest() + struct.pack("<I", 0)
    try:
        _write_zkey(zkey_path, groth16_header, ic_c, n_public, coefs, a_points, b1_points,
                    b2_points, h_points, contributions)
    except OSError as exc:  # name the output, not its temporary sibling
        raise CuzkError(f"{zkey_path}: cannot write the zkey: {exc.strerror or exc}") from None
    done("write zkey")
    return SetupReport(zkey_path=str(zkey_path), curve=curve, n_constraints=header.n_constraints,
                       n_vars=n_vars, n_public=n_public, domain_size=domain,
                       n_coefs=int(coefs.shape[0]), stages=stages)


def _write_zkey(zkey_path, groth16_header, ic_c, n_public, coefs, a_points, b1_points, b2_points,
                h_points, contributions):
    with atomic_output(zkey_path) as f:
        f.write(write_bin_header(ZKEY_MAGIC, ZKEY_VERSIONS[-1], 10))
        _write_section(f, SEC_HEADER, struct.pack("<I", PROTOCOL_GROTH16))
        _write_section(f, SEC_GROTH16, groth16_header)
        _write_section(f, SEC_IC, ic_c[:n_public + 1])
        _write_section(f, SEC_COEFS, struct.pack("<I", coefs.shape[0]), coefs)
        _write_section(f, SEC_A, a_points)
        _write_section(f, SEC_B1, b1_points)
        _write_section(f, SEC_B2, b2_points)
        _write_section(f, SEC_C, ic_c[n_public + 1:])
        _write_section(f, SEC_H, h_points)
        _write_section(f, SEC_CONTRIB, contributions)
