"""Groth16 verification and verification-key export (snarkjs-compatible, BN254).

* :func:`export_verification_key` produces the same dict as
  ``snarkjs zkey export verificationkey`` (field for field, same key order).
* :func:`verify` checks  e(A, B) = e(alpha, beta) e(vk_x, gamma) e(C, delta)
  as one pairing check of 4 pairs:
  e(-A, B) e(alpha, beta) e(vk_x, gamma) e(C, delta) == 1,
  with vk_x = IC_0 + sum_i public_i IC_{i+1}.
"""

from __future__ import annotations

from ..errors import FormatError, VerificationError
from . import jsonio
from .reference.curve import G1
from .reference.field import FQ, FR, MONT_R
from .reference.pairing import pairing, pairing_check

_R_INV = pow(MONT_R, -1, FQ)


def _g1_from_mont_row(row):
    raw = row.tobytes()
    if not any(raw):
        return None
    x = int.from_bytes(raw[:32], "little") * _R_INV % FQ
    y = int.from_bytes(raw[32:64], "little") * _R_INV % FQ
    return (x, y)


def export_verification_key(zkey) -> dict:
    """The verification key of a Groth16 zkey (a :class:`ZKey` from :func:`read_zkey`)."""
    alphabeta = pairing(zkey.alpha1, zkey.beta2)
    ic = [_g1_from_mont_row(zkey.ic[i]) for i in range(zkey.n_public + 1)]
    return jsonio.vkey_to_json(zkey.n_public, zkey.alpha1, zkey.beta2, zkey.gamma2,
                               zkey.delta2, alphabeta, ic)


def _g1_mul_jacobian(p, k):
    """k * p for affine p (k < r), returned affine; Jacobian double-and-add, one inversion."""
    if p is None or k == 0:
        return None
    if k == 1:
        return p
    px, py = p
    X, Y, Z = px, py, 1
    for bit in bin(k)[3:]:
        # dbl-2009-l
        A = X * X % FQ
        B = Y * Y % FQ
        C = B * B % FQ
        D = 2 * ((X + B) ** 2 - A - C) % FQ
        E = 3 * A
        F = E * E % FQ
        Z = 2 * Y * Z % FQ
        X = (F - 2 * D) % FQ
        Y = (E * (D - X) - 8 * C) % FQ
        if bit == "1":
            if Z == 0:
                X, Y, Z = px, py, 1
                continue
            ZZ = Z * Z % FQ
            U2 = px * ZZ % FQ
            S2 = py * Z * ZZ % FQ
            H = (U2 - X) % FQ
            rr = (S2 - Y) % FQ
            if H == 0:
                if rr == 0:  # T == P: cannot happen for k < r, but be safe
                    return G1.mul(p, k)
                X, Y, Z = 1, 1, 0
                continue
            HH = H * H % FQ
            HHH = H * HH % FQ
            V = X * HH % FQ
            X = (rr * rr - HHH - 2 * V) % FQ
            Y = (rr * (V - X) - Y * HHH) % FQ
            Z = Z * H % FQ
    if Z == 0:
        return None
    zi = pow(Z, -1, FQ)
    zi2 = zi * zi % FQ
    return (X * zi2 % FQ, Y * zi2 * zi % FQ)


def _vk_x(vk, public):
    acc = vk.ic[0]
    for s, p in zip(public, vk.ic[1:]):
        acc = G1.add(acc, _g1_mul_jacobian(p, s))
    return acc


def _verify_parsed(vk, public, pi_a, pi_b, pi_c) -> bool:
    if len(public) != vk.n_public:
        raise VerificationError(
            f"wrong number of public inputs: the verification key expects {vk.n_public}, "
            f"got {len(public)}")
    vk_x = _vk_x(vk, public)
    return pairing_check([
        (G1.neg(pi_a), pi_b),
        (vk.alpha1, vk.beta2),
        (vk_x, vk.gamma2),
        (pi_c, vk.delta2),
    ])


def verify(vkey, public, proof) -> bool:
    """True iff ``proof`` (proof.json dict) is valid for ``public`` (public.json list) under ``vkey``.

    ``vkey`` is a verification_key.json dict (or a parsed
    :class:`jsonio.VerificationKey`). Returns False for a well-formed but wrong
    proof; raises :class:`VerificationError` for malformed input (public input
    count mismatch, public input >= r, non-decimal values, points off the
    curve or outside the subgroup).
    """
    try:
        vk = vkey if isinstance(vkey, jsonio.VerificationKey) else jsonio.vkey_from_json(vkey)
        pub = jsonio.public_from_json(public)
        pi_a, pi_b, pi_c = jsonio.proof_from_json(proof)
    except FormatError as exc:
        raise VerificationError(str(exc).replace("<buffer>: ", "", 1)) from exc
    return _verify_parsed(vk, pub, pi_a, pi_b, pi_c)


def verify_files(vkey_path, public_path, proof_path) -> bool:
    """:func:`verify` on files; malformed files raise :class:`FormatError` naming the file."""
    vk = jsonio.vkey_from_json(jsonio.load_json(vkey_path, "verification key"), vkey_path)
    pub = jsonio.public_from_json(jsonio.load_json(public_path, "public signals"), public_path)
    pi_a, pi_b, pi_c = jsonio.proof_from_json(jsonio.load_json(proof_path, "proof"), proof_path)
    return _verify_parsed(vk, pub, pi_a, pi_b, pi_c)
