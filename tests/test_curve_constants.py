"""The generated BN254 constants header is up to date and mathematically right."""

import importlib.util
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gen_curve_constants.py"
HEADER = ROOT / "cuzk_tasks" / "native" / "include" / "cuzk" / "bn254_constants.cuh"


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
