"""Reference Groth16 prover steps on Python ints (small circuits only).

It mirrors :mod:`cuzk_tasks.groth16.prover` step for step so each stage of the
native (and GPU) backend can be compared against it.
"""

from .. import points
from .curve import G1, G2
from .field import FR
from .ntt import compute_h


def evaluate_ab(zkey, witness):
    """A and B evaluated at every constraint of the domain, from zkey section 4."""
    a = [0] * zkey.domain_size
    b = [0] * zkey.domain_size
    for record in zkey.coefs:
        coef = points.fr_coefficient_from_zkey(points.limbs_to_int(record["value"]))
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
