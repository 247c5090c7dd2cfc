"""The generated curve constants headers (BN254, BLS12-381) are up to date and
mathematically right."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gen_curve_constants.py"
HEADER = ROOT / "cuzk_tasks" / "native" / "include" / "cuzk" / "bn254_constants.cuh"
BLS_HEADER = ROOT / "cuzk_tasks" / "native" / "include" / "cuzk" / "bls12_381_constants.cuh"


def _load():
    spec = importlib.util.spec_from_file_location("gen_curve_constants", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_header_is_up_to_date():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_check_mode_detects_a_stale_header(tmp_path):
    stale = tmp_path / "bn254_constants.cuh"
    stale.write_text(HEADER.read_text().replace("0x", "0X", 1))
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "--output", str(stale)],
                            capture_output=True, text=True)
    assert result.returncode != 0


def test_constants_match_the_reference_math():
    gen = _load()
    from cuzk_tasks.groth16.reference import field, ntt
    from cuzk_tasks.groth16.reference.curve import G2_B

    assert gen.Q == field.FQ and gen.R == field.FR
    c = gen.compute()
    for name, p in (("FQ", field.FQ), ("FR", field.FR)):
        assert c[name]["ONE"] == field.MONT_R % p
        assert c[name]["R2"] == field.MONT_R ** 2 % p
        assert (c[name]["INV"] * p + 1) % 2**64 == 0
    assert c["G2_B"] == G2_B
    assert c["NQR"] == ntt.NQR == 5
    assert c["ROOTS"][28] == 19103219067921713944291392827692070036145651957329286315305642004821462161904
    for k in range(29):
        assert c["ROOTS"][k] == ntt.root_of_unity(k)
        assert c["ROOTS"][k] * c["ROOTS_INV"][k] % field.FR == 1
        assert c["INV_2K"][k] * 2**k % field.FR == 1


def test_header_contains_the_montgomery_roots():
    gen = _load()
    text = HEADER.read_text()
    assert "DO NOT EDIT" in text and "tools/gen_curve_constants.py" in text
    w1 = gen.to_mont(gen.compute()["ROOTS"][1], gen.R)  # = r - 1 in Montgomery form
    assert "0x%016xULL" % (w1 & (2**64 - 1)) in text


def test_check_mode_detects_a_stale_bls12_381_header(tmp_path):
    stale = tmp_path / "bls12_381_constants.cuh"
    text = BLS_HEADER.read_text()
    stale.write_text(text.replace("0x73eda753299d7d48ULL", "0x73eda753299d7d49ULL", 1))
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "--curve", "bls12_381",
                             "--output", str(stale)], capture_output=True, text=True)
    assert result.returncode != 0
    stale.write_text(text)
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "--curve", "bls12_381",
                             "--output", str(stale)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_bls12_381_constants_from_first_principles():
    """Recomputed here from the BLS12-381 parameter x alone, and ffjavascript's root rule."""
    gen = _load()
    x = -0xD201000000010000
    r = x**4 - x**2 + 1
    q = (x - 1) ** 2 * r // 3 + x
    c = gen.compute_bls12_381()
    assert c["FQ"]["MOD"] == q and c["FR"]["MOD"] == r
    assert q.bit_length() == 381 and r.bit_length() == 255
    assert (c["FQ"]["LIMBS"], c["FR"]["LIMBS"]) == (6, 4)
    for name, p, bits in (("FQ", q, 384), ("FR", r, 256)):
        assert c[name]["ONE"] == 2**bits % p
        assert c[name]["R2"] == 2 ** (2 * bits) % p
        assert (c[name]["INV"] * p + 1) % 2**64 == 0
    assert c["G1_B"] == 4 and c["G2_B"] == (4, 4)
    # ffjavascript (wasm_field1.js, wasmcurves build_fft.js): nqr = the smallest
    # non-residue from 2 up, w[s] = nqr^t with r - 1 = t 2^s, w[i] = w[i+1]^2
    nqr = next(a for a in range(2, 100) if pow(a, (r - 1) // 2, r) == r - 1)
    assert c["NQR"] == nqr == 5
    s, t = 0, r - 1
    while t % 2 == 0:
        s, t = s + 1, t // 2
    assert s == c["MAX_LOG2"] == 32
    w = pow(nqr, t, r)
    for k in range(s, -1, -1):
        assert c["ROOTS"][k] == w
        assert c["ROOTS"][k] * c["ROOTS_INV"][k] % r == 1
        assert c["INV_2K"][k] * 2**k % r == 1
        w = w * w % r
    text = BLS_HEADER.read_text()
    assert "DO NOT EDIT" in text and "#define CUZK_BLS12_381_FQ_LIMBS 6" in text
    w1 = gen.to_mont(c["ROOTS"][1], r)  # = r - 1 in Montgomery form
    assert "0x%016xULL" % (w1 & (2**64 - 1)) in text
    assert "0x%016xULL" % ((2**384 % q) & (2**64 - 1)) in text


def test_bn254_constants_from_the_bn_parameter():
    gen = _load()
    u = gen.BN_U
    assert gen.Q == 36 * u**4 + 36 * u**3 + 24 * u**2 + 6 * u + 1
    assert gen.R == 36 * u**4 + 36 * u**3 + 18 * u**2 + 6 * u + 1


@pytest.mark.parametrize("name", ["bn254", "bls12_381"])
def test_pairing_constants_from_the_curve_definitions(name):
    """The pairing section (tower non-residue, twist, loop parameters, Frobenius table)
    recomputed from cuzk_tasks.groth16.curves and the reference tower."""
    from cuzk_tasks.groth16.curves import BLS12_381, BN254
    from cuzk_tasks.groth16.reference.tower import tower

    gen = _load()
    curve = {"bn254": BN254, "bls12_381": BLS12_381}[name]
    c = gen.CURVES[name][0]()
    d, q = c["PAIRING"], curve.q
    assert (d["XI_K"], 1) == curve.fq6_non_residue
    assert d["TWIST"] == curve.twist and d["FAMILY"] == curve.family
    assert d["X"] == curve.x and d["ATE"] == curve.ate_loop_count

    def value(digits):
        v = 0
        for digit in digits:
            v = 2 * v + digit
        return v

    for key, v in (("ATE_NAF", curve.ate_loop_count), ("X_NAF", curve.x)):
        digits = d[key]
        assert value(digits) == abs(v) and digits[0] == 1
        assert all(digits[i] == 0 or digits[i + 1] == 0 for i in range(len(digits) - 1))
    coeffs = tower(curve).frobenius_coeffs
    for n in (1, 2, 3):
        assert d["FROB"][n - 1] == list(coeffs[n])
        for k in range(6):  # xi^(k (q^n - 1)/6), from first principles
            assert tuple(d["FROB"][n - 1][k]) == gen.fq2_pow((d["XI_K"], 1), k * (q**n - 1) // 6, q)
    pfx = gen.CURVES[name][1]
    text = (BLS_HEADER if name == "bls12_381" else HEADER).read_text()
    assert "#define %s_XI_K %d" % (pfx, d["XI_K"]) in text
    assert "#define %s_ATE_NAF_LEN %d" % (pfx, len(d["ATE_NAF"])) in text
    frob11 = gen.to_mont(d["FROB"][0][1][0], q)
    assert "0x%016xULL" % (frob11 & (2**64 - 1)) in text
