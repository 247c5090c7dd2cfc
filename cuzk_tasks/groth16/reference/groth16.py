"""Reference Groth16 prover steps on Python ints (small circuits only).

It mirrors :mod:`cuzk_tasks.groth16.prover` step for step so each stage of the
native (and GPU) backend can be compared against it.
"""

from .. import points
from ..zkey import coef_value
from .curve import G1, G2
from .field import FR
from .ntt import compute_h


def evaluate_ab(zkey, witness):
    """A and B evaluated at every constraint of the domain, from zkey section 4."""
    a = [0] * zkey.domain_size
    b = [0] * zkey.domain_size
    for record in zkey.coefs:
        coef = coef_value(record["value"])
        target = a if int(record["matrix"]) == 0 else b
        row = int(record["constraint"])
        target[row] = (target[row] + coef * witness[int(record["signal"])]) % FR
    return a, b


def g1_bases(array):
    return [points.g1_affine_from_mont(row) for row in array]


def g2_bases(array):
    return [points.g2_affine_from_mont(row) for row in array]


def prove_start_reference(zkey, witness):
    """Returns (a, b1, c, h) MSM sums and the H scalars, as Python ints/points."""
    a_evals, b_evals = evaluate_ab(zkey, witness)
    h = compute_h(a_evals, b_evals, zkey.log_domain_size)
    a = G1.msm(g1_bases(zkey.a_points), witness)
    b1 = G1.msm(g1_bases(zkey.b1_points), witness)
    c = G1.msm(g1_bases(zkey.c_points), witness[zkey.n_public + 1:])
    h_sum = G1.msm(g1_bases(zkey.h_points), h)
    return a, b1, c, h_sum, h


def b2_reference(zkey, witness):
    return G2.msm(g2_bases(zkey.b2_points), witness)


def assemble_proof_reference(zkey, a, b1, c, h, b2, r, s):
    """π_A, π_B, π_C exactly as the paper writes them (Python-int scalar muls)."""
    pi_a = G1.add(G1.add(zkey.alpha1, a), G1.mul(zkey.delta1, r))
    b1_blinded = G1.add(G1.add(zkey.beta1, b1), G1.mul(zkey.delta1, s))
    pi_b = G2.add(G2.add(zkey.beta2, b2), G2.mul(zkey.delta2, s))
    pi_c = G1.add(c, h)
    pi_c = G1.add(pi_c, G1.mul(pi_a, s))
    pi_c = G1.add(pi_c, G1.mul(b1_blinded, r))
    pi_c = G1.add(pi_c, G1.neg(G1.mul(zkey.delta1, r * s % FR)))
    return pi_a, pi_b, pi_c
