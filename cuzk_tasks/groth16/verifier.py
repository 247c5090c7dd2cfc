"""Groth16 verification and verification-key export (snarkjs-compatible, BN254 and BLS12-381:
the verification key names its curve, the zkey's header its primes).

* :func:`export_verification_key` produces the same dict as
  ``snarkjs zkey export verificationkey`` (field for field, same key order).
* :func:`verify` checks  e(A, B) = e(alpha, beta) e(vk_x, gamma) e(C, delta)
  as one pairing check of 4 pairs:
  e(-A, B) e(alpha, beta) e(vk_x, gamma) e(C, delta) == 1,
  with vk_x = IC_0 + sum_i public_i IC_{i+1}.

Both use the native core's pairing (and its MSM for vk_x) when it loads, the pure-Python
reference otherwise; the two compute the same values (tests/test_native_pairing.py), the
native one in about a millisecond instead of tens.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import FormatError, VerificationError
from . import points
from .backends import native
from .formats import jsonio
from .reference.curve import g1_of
from .reference.pairing import g1_mul_jacobian, pairing_of


def export_verification_key(zkey) -> dict:
    """The verification key of a Groth16 zkey (a :class:`ZKey` from :func:`read_zkey`), for
    the zkey's curve."""
    curve = zkey.curve
    if native.available():
        alphabeta = native.pairing(points.g1_rows_to_mont([zkey.alpha1], curve),
                                   points.g2_rows_to_mont([zkey.beta2], curve), curve)
    else:
        alphabeta = pairing_of(curve).pairing(zkey.alpha1, zkey.beta2)
    ic = [points.g1_affine_from_mont(zkey.ic[i], curve) for i in range(zkey.n_public + 1)]
    return jsonio.vkey_to_json(zkey.n_public, zkey.alpha1, zkey.beta2, zkey.gamma2,
                               zkey.delta2, alphabeta, ic, curve)


def _vk_x(vk, public):
    g1, q = g1_of(vk.curve), vk.curve.q
    acc = vk.ic[0]
    for s, p in zip(public, vk.ic[1:]):
        acc = g1.add(acc, g1_mul_jacobian(p, s, q))
    return acc


@lru_cache(maxsize=64)
def _native_alphabeta_inverse(curve, alpha1, beta2):
    """e(alpha, beta)^-1, the same for every proof under a key: computed once, it takes
    one pair out of each verification's Miller loop.  In the pairing's target group the
    inverse is the conjugate (the w coefficients negated)."""
    ab = native.pairing(points.g1_rows_to_mont([alpha1], curve),
                        points.g2_rows_to_mont([beta2], curve), curve)
    return ab[:6] + tuple(-c % curve.q for c in ab[6:])


def _native_check(vk, public, neg_a, pi_b, pi_c) -> bool:
    """e(-A, B) e(vk_x, gamma) e(C, delta) == e(alpha, beta)^-1 on the native core (the
    final exponentiation is a homomorphism, so this is the 4-pair check)."""
    curve = vk.curve
    # vk_x as one MSM with IC_0's scalar 1, kept in Montgomery limbs for the pairing
    scalars = points.ints_to_limb_array([1, *public], native.FR_LIMBS)
    vk_x = native.g1_to_affine(
        native.g1_msm(points.g1_rows_to_mont(vk.ic, curve), scalars, threads=1, curve=curve),
        curve=curve)
    g1 = points.g1_rows_to_mont([neg_a, None, pi_c], curve)
    g1[1] = vk_x
    g2 = points.g2_rows_to_mont([pi_b, vk.gamma2, vk.delta2], curve)
    return native.pairing(g1, g2, curve) == _native_alphabeta_inverse(curve, vk.alpha1, vk.beta2)


def _verify_parsed(vk, public, pi_a, pi_b, pi_c) -> bool:
    if len(public) != vk.n_public:
        raise VerificationError(
            f"wrong number of public inputs: the verification key expects {vk.n_public}, "
            f"got {len(public)}")
    neg_a = g1_of(vk.curve).neg(pi_a)
    if native.available():
        return _native_check(vk, public, neg_a, pi_b, pi_c)
    return pairing_of(vk.curve).pairing_check([
        (neg_a, pi_b),
        (vk.alpha1, vk.beta2),
        (_vk_x(vk, public), vk.gamma2),
        (pi_c, vk.delta2),
    ])


def verify(vkey, public, proof) -> bool:
    """True iff ``proof`` (proof.json dict) is valid for ``public`` (public.json list) under ``vkey``.

    ``vkey`` is a verification_key.json dict (or a parsed
    :class:`jsonio.VerificationKey`). Returns False for a well-formed but wrong
    proof; raises :class:`VerificationError` for malformed input (public input
    count mismatch, public input >= r, non-decimal values, points off the
    curve or outside the subgroup, a proof for another curve than the key's).
    """
    try:
        vk = vkey if isinstance(vkey, jsonio.VerificationKey) else jsonio.vkey_from_json(vkey)
        pub = jsonio.public_from_json(public, curve=vk.curve)
        pi_a, pi_b, pi_c = jsonio.proof_from_json(proof, curve=vk.curve)
    except FormatError as exc:
        raise VerificationError(str(exc).replace("<buffer>: ", "", 1)) from exc
    return _verify_parsed(vk, pub, pi_a, pi_b, pi_c)


def verify_files(vkey_path, public_path, proof_path) -> bool:
    """:func:`verify` on files; malformed files raise :class:`FormatError` naming the file."""
    vk = jsonio.vkey_from_json(jsonio.load_json(vkey_path, "verification key"), vkey_path)
    pub = jsonio.public_from_json(jsonio.load_json(public_path, "public signals"), public_path,
                                  curve=vk.curve)
    pi_a, pi_b, pi_c = jsonio.proof_from_json(jsonio.load_json(proof_path, "proof"), proof_path,
                                              curve=vk.curve)
    return _verify_parsed(vk, pub, pi_a, pi_b, pi_c)
