"""The BN254 optimal ate pairing and the Fq12 tower (reference, pure Python)."""

from __future__ import annotations

import random

import pytest

from cuzk_tasks.groth16.reference import pairing as P
from cuzk_tasks.groth16.reference import tower as T
from cuzk_tasks.groth16.reference.curve import G1, G2, is_in_g2_subgroup
from cuzk_tasks.groth16.reference.field import FQ, FR, fq2_add, fq2_mul

g1, g2 = G1.generator, G2.generator

# e(G1, G2) as computed by ffjavascript 0.3.1 (snarkjs 0.7.6):
#   curve.Gt.toObject(curve.pairing(curve.G1.g, curve.G2.g))
FFJS_E_G1_G2 = [
    [["17264119758069723980713015158403419364912226240334615592005620718956030922389",
      "1300711225518851207585954685848229181392358478699795190245709208408267917898"],
     ["8894217292938489450175280157304813535227569267786222825147475294561798790624",
      "1829859855596098509359522796979920150769875799037311140071969971193843357227"],
     ["4968700049505451466697923764727215585075098085662966862137174841375779106779",
      "12814315002058128940449527172080950701976819591738376253772993495204862218736"]],
    [["4233474252585134102088637248223601499779641130562251948384759786370563844606",
      "9420544134055737381096389798327244442442230840902787283326002357297404128074"],
     ["13457906610892676317612909831857663099224588803620954529514857102808143524905",
      "5122435115068592725432309312491733755581898052459744089947319066829791570839"],
     ["8891987925005301465158626530377582234132838601606565363865129986128301774627",
      "440796048150724096437130979851431985500142692666486515369083499585648077975"]],
]


def _rand12(rng):
    return tuple(rng.randrange(FQ) for _ in range(12))


# ------------------------------------------------------------------- tower --

def test_tower_field_axioms():
    rng = random.Random(1)
    for _ in range(5):
        a, b, c = _rand12(rng), _rand12(rng), _rand12(rng)
        assert T.fq12_mul(a, b) == T.fq12_mul(b, a)
        assert T.fq12_mul(T.fq12_mul(a, b), c) == T.fq12_mul(a, T.fq12_mul(b, c))
        assert T.fq12_mul(a, T.fq12_add(b, c)) == T.fq12_add(T.fq12_mul(a, b), T.fq12_mul(a, c))
        assert T.fq12_sqr(a) == T.fq12_mul(a, a)
        assert T.fq12_mul(a, T.fq12_inv(a)) == T.FQ12_ONE
        assert T.fq12_pow(a, 5) == T.fq12_mul(T.fq12_sqr(T.fq12_sqr(a)), a)


def test_tower_relations():
    # w^2 = v, v^3 = xi = 9 + u
    w = (0,) * 6 + (1,) + (0,) * 5
    v = (0, 0, 1, 0, 0, 0) + (0,) * 6
    assert T.fq12_sqr(w) == v
    assert T.fq12_pow(v, 3) == (9, 1) + (0,) * 10


def test_frobenius_is_q_power():
    rng = random.Random(2)
    a = _rand12(rng)
    aq = T.fq12_pow(a, FQ)
    assert T.fq12_frobenius(a, 1) == aq
    assert T.fq12_frobenius(a, 2) == T.fq12_pow(aq, FQ)
    assert T.fq12_frobenius(a, 3) == T.fq12_frobenius(T.fq12_frobenius(a, 2), 1)
    assert T.fq12_frobenius(a, 6) == T.fq12_conj(a)
    assert T.fq12_frobenius(a, 12) == a


# ----------------------------------------------------------------- pairing --

def test_matches_ffjavascript():
    assert P.gt_to_json(P.pairing(g1, g2)) == FFJS_E_G1_G2


def test_snarkjs_convention_is_power_of_textbook():
    e_tb = P.pairing_textbook(g1, g2)
    assert T.fq12_pow(e_tb, FR) == T.FQ12_ONE
    assert T.fq12_pow(e_tb, P.SNARKJS_GT_EXPONENT) == P.pairing(g1, g2)
    # the hard part used equals m * (q^4 - q^2 + 1)/r exactly
    x = P.BN_X
    lam = (FQ ** 3 * (12 * x ** 3 + 6 * x ** 2 + 4 * x - 1)
           + FQ ** 2 * (12 * x ** 3 + 6 * x ** 2 + 6 * x)
           + FQ * (12 * x ** 3 + 6 * x ** 2 + 4 * x)
           + (12 * x ** 3 + 12 * x ** 2 + 6 * x + 1))
    assert lam == P.SNARKJS_GT_EXPONENT * P.HARD_PART_EXPONENT


def test_non_degenerate_and_order_r():
    e = P.pairing(g1, g2)
    assert e != T.FQ12_ONE
    assert T.fq12_pow(e, FR) == T.FQ12_ONE


def test_bilinearity():
    rng = random.Random(3)
    e = P.pairing(g1, g2)
    for _ in range(2):
        a, b = rng.randrange(1, FR), rng.randrange(1, FR)
        lhs = P.pairing(G1.mul(g1, a), G2.mul(g2, b))
        assert lhs == T.fq12_pow(e, a * b % FR)
    p, q = G1.mul(g1, 11), G2.mul(g2, 13)
    # e(P1 + P2, Q) = e(P1, Q) e(P2, Q) and e(P, Q1 + Q2) = e(P, Q1) e(P, Q2)
    p2, q2 = G1.mul(g1, 17), G2.mul(g2, 19)
    assert P.pairing(G1.add(p, p2), q) == T.fq12_mul(P.pairing(p, q), P.pairing(p2, q))
    assert P.pairing(p, G2.add(q, q2)) == T.fq12_mul(P.pairing(p, q), P.pairing(p, q2))


def test_infinity():
    assert P.pairing(None, g2) == T.FQ12_ONE
    assert P.pairing(g1, None) == T.FQ12_ONE


def test_pairing_check():
    a, b = 1234567, 7654321
    pa, qb = G1.mul(g1, a), G2.mul(g2, b)
    assert P.pairing_check([(pa, qb), (G1.neg(G1.mul(g1, a * b % FR)), g2)])
    assert not P.pairing_check([(pa, qb), (G1.neg(G1.mul(g1, a * b + 1)), g2)])
    assert P.pairing_check([(pa, qb), (G1.neg(pa), qb), (g1, g2), (G1.neg(g1), g2)])
    assert P.pairing_check([])


def test_g2_subgroup_check_matches_textbook():
    assert P.g2_in_subgroup(g2) and P.g2_in_subgroup(G2.mul(g2, 987654321))
    # random points on the twist are (almost surely) outside G2
    rng = random.Random(4)
    found = 0
    while found < 3:
        x = (rng.randrange(FQ), rng.randrange(FQ))
        rhs = fq2_add(fq2_mul(fq2_mul(x, x), x), G2.b)
        y = _fq2_sqrt(rhs)
        if y is None:
            continue
        pt = (x, y)
        assert G2.is_on_curve(pt)
        assert P.g2_in_subgroup(pt) == is_in_g2_subgroup(pt) == False
        cleared = _mul_raw(pt, 2 * FQ - FR)  # the cofactor clears into G2
        assert P.g2_in_subgroup(cleared) and is_in_g2_subgroup(cleared)
        torsion = _mul_raw(pt, FR)  # order divides the cofactor: not in G2
        assert not P.g2_in_subgroup(torsion) and not is_in_g2_subgroup(torsion)
        assert not P.g2_in_subgroup(G2.add(torsion, g2))
        found += 1


def _mul_raw(p, k):
    return G2.mul_unreduced(p, k)


def _fq2_sqrt(a):
    a1 = T.fq2_pow(a, (FQ - 3) // 4)
    alpha = fq2_mul(a1, fq2_mul(a1, a))
    x0 = fq2_mul(a1, a)
    if alpha == (FQ - 1, 0):
        y = fq2_mul((0, 1), x0)
    else:
        y = fq2_mul(T.fq2_pow(fq2_add((1, 0), alpha), (FQ - 1) // 2), x0)
    return y if fq2_mul(y, y) == a else None


def test_pairing_check_speed():
    import time
    pairs = [(G1.mul(g1, 3 + i), G2.mul(g2, 5 + i)) for i in range(4)]
    t0 = time.perf_counter()
    P.pairing_check(pairs)
    assert time.perf_counter() - t0 < 1.0


# ---------------------------------------------------- BLS12-381 (same code) --
# The reference is one implementation with the curve as a parameter: the checks below
# run it on BLS12-381 (M-type twist, loop over x = -0xd201000000010000, the zkcrypto
# hard part); the BN254 tests above are unchanged.

from cuzk_tasks.groth16.curves import BLS12_381, BN254  # noqa: E402
from cuzk_tasks.groth16.reference.curve import g1_of, g2_of  # noqa: E402
from cuzk_tasks.groth16.reference.field import fq2_ops, sqrt_mod  # noqa: E402
from cuzk_tasks.groth16.reference.pairing import pairing_of  # noqa: E402
from cuzk_tasks.groth16.reference.tower import tower  # noqa: E402

BLS = pairing_of(BLS12_381)
TB = tower(BLS12_381)
QB, RB = BLS12_381.q, BLS12_381.r
bg1, bg2 = BLS12_381.g1, BLS12_381.g2


def test_bls_tower_relations_and_frobenius():
    rng = random.Random(11)
    w = (0,) * 6 + (1,) + (0,) * 5
    v = (0, 0, 1, 0, 0, 0) + (0,) * 6
    assert TB.fq12_sqr(w) == v
    assert TB.fq12_pow(v, 3) == (1, 1) + (0,) * 10       # v^3 = xi = 1 + u
    a, b = (tuple(rng.randrange(QB) for _ in range(12)) for _ in range(2))
    assert TB.fq12_mul(a, b) == TB.fq12_mul(b, a)
    assert TB.fq12_mul(a, TB.fq12_inv(a)) == T.FQ12_ONE
    assert TB.fq12_sqr(a) == TB.fq12_mul(a, a)
    assert TB.fq12_frobenius(a, 1) == TB.fq12_pow(a, QB)
    assert TB.fq12_frobenius(a, 6) == TB.fq12_conj(a)


def test_bls_non_degenerate_bilinear_order_r():
    e = BLS.pairing(bg1, bg2)
    assert e != T.FQ12_ONE
    assert TB.fq12_pow(e, RB) == T.FQ12_ONE
    rng = random.Random(12)
    a, b = rng.randrange(1, RB), rng.randrange(1, RB)
    pa, qb = BLS.g1.mul(bg1, a), BLS.g2.mul(bg2, b)
    assert BLS.pairing(pa, qb) == TB.fq12_pow(e, a * b % RB)
    p2, q2 = BLS.g1.mul(bg1, 17), BLS.g2.mul(bg2, 19)
    assert BLS.pairing(BLS.g1.add(pa, p2), qb) == TB.fq12_mul(BLS.pairing(pa, qb), BLS.pairing(p2, qb))
    assert BLS.pairing(pa, BLS.g2.add(qb, q2)) == TB.fq12_mul(BLS.pairing(pa, qb), BLS.pairing(pa, q2))
    assert BLS.pairing(None, bg2) == T.FQ12_ONE and BLS.pairing(bg1, None) == T.FQ12_ONE


def test_bls_snarkjs_convention_is_cube_of_textbook():
    e_tb = BLS.pairing_textbook(bg1, bg2)
    assert TB.fq12_pow(e_tb, RB) == T.FQ12_ONE and e_tb != T.FQ12_ONE
    assert BLS.gt_exponent == 3
    assert TB.fq12_pow(e_tb, 3) == BLS.pairing(bg1, bg2)
    # the zkcrypto chain's exponent equals 3 (q^4 - q^2 + 1)/r exactly
    x = BLS12_381.x
    lam = (QB ** 3 * (x - 1) ** 2 + QB ** 2 * x * (x - 1) ** 2
           + QB * (x ** 4 - 2 * x ** 3 + 2 * x - 1) + (x ** 5 - 2 * x ** 4 + 2 * x ** 2 - x + 3))
    assert lam == 3 * BLS.hard_part_exponent


def test_bls_pairing_check():
    a, b = 1234567, 7654321
    pa, qb = BLS.g1.mul(bg1, a), BLS.g2.mul(bg2, b)
    g1b = BLS.g1
    assert BLS.pairing_check([(pa, qb), (g1b.neg(g1b.mul(bg1, a * b % RB)), bg2)])
    assert not BLS.pairing_check([(pa, qb), (g1b.neg(g1b.mul(bg1, a * b + 1)), bg2)])
    assert BLS.pairing_check([])


def _twist_sqrt(f2, q, a):
    """sqrt in Fq2 = Fq[u]/(u^2+1) for q = 3 mod 4 (Adj-Rodriguez-Henriquez), or None."""
    a1 = f2.pow(a, (q - 3) // 4)
    alpha = f2.mul(a1, f2.mul(a1, a))
    x0 = f2.mul(a1, a)
    if alpha == (q - 1, 0):
        y = f2.mul((0, 1), x0)
    else:
        y = f2.mul(f2.pow(f2.add((1, 0), alpha), (q - 1) // 2), x0)
    return y if f2.mul(y, y) == a else None


@pytest.mark.parametrize("curve", [BN254, BLS12_381], ids=lambda c: c.name)
def test_subgroup_checks_match_textbook(curve):
    pr = pairing_of(curve)
    g1c, g2c, f2, q = g1_of(curve), g2_of(curve), fq2_ops(curve), curve.q
    assert pr.g2_in_subgroup(curve.g2) and pr.g2_in_subgroup(g2c.mul(curve.g2, 987654321))
    assert pr.g1_in_subgroup(curve.g1) and pr.g1_in_subgroup(g1c.mul(curve.g1, 987654321))
    rng = random.Random(13)
    found = 0
    while found < 2:
        x = (rng.randrange(q), rng.randrange(q))
        y = _twist_sqrt(f2, q, f2.add(f2.mul(f2.mul(x, x), x), curve.b2))
        if y is None:
            continue
        pt = (x, y)
        assert g2c.is_on_curve(pt)
        assert pr.g2_in_subgroup(pt) == g2c.in_subgroup(pt) == False  # noqa: E712
        torsion = g2c.mul_unreduced(pt, curve.r)   # order divides the cofactor
        assert not pr.g2_in_subgroup(torsion) and not pr.g2_in_subgroup(g2c.add(torsion, curve.g2))
        found += 1
    found = 0
    while found < 2:   # G1: cofactor 1 on BN254, 0x396c8c005555e1568c00aaab0000aaab on BLS12-381
        x = rng.randrange(q)
        y = sqrt_mod(x ** 3 + curve.b, q)
        if y is None:
            continue
        pt = (x, y)
        assert pr.g1_in_subgroup(pt) == g1c.in_subgroup(pt) == (curve is BN254)
        found += 1


def test_bls_pairing_check_speed():
    import time
    pairs = [(BLS.g1.mul(bg1, 3 + i), BLS.g2.mul(bg2, 5 + i)) for i in range(4)]
    t0 = time.perf_counter()
    assert not BLS.pairing_check(pairs)
    assert time.perf_counter() - t0 < 2.0
