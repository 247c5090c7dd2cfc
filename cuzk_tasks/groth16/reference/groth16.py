"""Reference Groth16 prover steps on Python ints (small circuits only), for the zkey's curve.

It mirrors :mod:`cuzk_tasks.groth16.prover` step for step so each stage of the
native (and GPU) backend can be compared against it.  Every step works on
``zkey.curve`` (BN254 or BLS12-381): on BLS12-381 it is the only prover there is
today, the oracle a generic native core is checked against.
"""

from .. import points
from ..curves import BN254
from ..formats.zkey import coef_value
from .curve import g1_of, g2_of
from .ntt import compute_h


def evaluate_ab(zkey, witness):
    """A and B evaluated at every constraint of the domain, from zkey section 4."""
    curve = zkey.curve
    fr = curve.r
    a = [0] * zkey.domain_size
    b = [0] * zkey.domain_size
    for record in zkey.coefs:
        coef = coef_value(record["value"], curve)
        target = a if int(record["matrix"]) == 0 else b
        row = int(record["constraint"])
        target[row] = (target[row] + coef * witness[int(record["signal"])]) % fr
    return a, b


def g1_bases(array, curve=BN254):
    return [points.g1_affine_from_mont(row, curve) for row in array]


def g2_bases(array, curve=BN254):
    return [points.g2_affine_from_mont(row, curve) for row in array]


def prove_start_reference(zkey, witness):
    """Returns (a, b1, c, h) MSM sums and the H scalars, as Python ints/points."""
    curve = zkey.curve
    g1 = g1_of(curve)
    a_evals, b_evals = evaluate_ab(zkey, witness)
    h = compute_h(a_evals, b_evals, zkey.log_domain_size, curve)
    a = g1.msm(g1_bases(zkey.a_points, curve), witness)
    b1 = g1.msm(g1_bases(zkey.b1_points, curve), witness)
    c = g1.msm(g1_bases(zkey.c_points, curve), witness[zkey.n_public + 1:])
    h_sum = g1.msm(g1_bases(zkey.h_points, curve), h)
    return a, b1, c, h_sum, h


def b2_reference(zkey, witness):
    return g2_of(zkey.curve).msm(g2_bases(zkey.b2_points, zkey.curve), witness)


def assemble_proof_reference(zkey, a, b1, c, h, b2, r, s):
    """π_A, π_B, π_C exactly as the paper writes them (Python-int scalar muls)."""
    G1, G2, fr = g1_of(zkey.curve), g2_of(zkey.curve), zkey.curve.r
    pi_a = G1.add(G1.add(zkey.alpha1, a), G1.mul(zkey.delta1, r))
    b1_blinded = G1.add(G1.add(zkey.beta1, b1), G1.mul(zkey.delta1, s))
    pi_b = G2.add(G2.add(zkey.beta2, b2), G2.mul(zkey.delta2, s))
    pi_c = G1.add(c, h)
    pi_c = G1.add(pi_c, G1.mul(pi_a, s))
    pi_c = G1.add(pi_c, G1.mul(b1_blinded, r))
    pi_c = G1.add(pi_c, G1.neg(G1.mul(zkey.delta1, r * s % fr)))
    return pi_a, pi_b, pi_c
