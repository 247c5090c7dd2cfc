"""``cuzk-tasks setup``: the single-party Groth16 setup on the native core.

The kernels against the pure-Python reference (fixed-base multiplication, the QAP at
tau), then whole setups of the committed fixtures proved by our prover and by snarkjs
and checked by snarkjs (BN254 and BLS12-381), a tampered witness, fresh randomness per
setup, and the command line.
"""

from __future__ import annotations

import json
import random
import secrets
import struct
import subprocess
import sys

import numpy as np
import pytest

from cuzk_tasks.cli import main as cli_main
from cuzk_tasks.errors import FormatError, SelfVerificationError
from cuzk_tasks.groth16.backends import native
from cuzk_tasks.groth16 import points
from cuzk_tasks.groth16.formats.binfile import BinFile
from cuzk_tasks.groth16.curves import BLS12_381, BN254
from cuzk_tasks.groth16.prover import prove
from cuzk_tasks.groth16.formats.r1cs import read_r1cs, read_r1cs_raw
from cuzk_tasks.groth16.reference.curve import g1_of, g2_of
from cuzk_tasks.groth16.setup import DEV_ONLY_NOTICE, domain_size_for, setup
from cuzk_tasks.groth16.verifier import export_verification_key
from cuzk_tasks.groth16.formats.wtns import read_wtns, write_wtns
from cuzk_tasks.groth16.formats.zkey import coef_value, read_zkey
from support.snarkjs_tool import (ROOT, fixture_dir, requires_snarkjs, run_snarkjs, snarkjs_verify,
                                  strip_ansi)

CURVES = [BN254, BLS12_381]
SETUP_FIXTURES = ["mulchain", "poseidon", "bls12381/mulchain"]


def _special_scalars(curve, extra):
    rng = random.Random(1234)
    return [0, 1, 2, curve.r - 1, curve.r - 2] + [rng.randrange(curve.r) for _ in range(extra)]


# ---------------------------------------------------------------------------- kernels

@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_fixed_base_mul_matches_reference(curve):
    """k * P against the pure-Python double-and-add, on G1 and G2, for 0, 1, r-1 and
    random k, with the generator and with another base."""
    scalars = _special_scalars(curve, 4)
    ks = points.ints_to_limb_array(scalars)
    for group, fixed, to_mont, from_mont in (
            (g1_of(curve), native.g1_fixed_base_mul, points.g1_affine_to_mont,
             points.g1_affine_from_mont),
            (g2_of(curve), native.g2_fixed_base_mul, points.g2_affine_to_mont,
             points.g2_affine_from_mont)):
        for base in (group.generator, group.mul(group.generator, 7)):
            out = fixed(to_mont(base, curve), ks, threads=2, curve=curve)
            got = [from_mont(row, curve) for row in out]
            want = [group.mul(base, k) for k in scalars]
            assert got == want, group.name
            assert not out[0].any()  # 0 * P is stored as all-zero bytes, as in a zkey


@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_fixed_base_mul_wide_window_matches_point_op(curve):
    """Enough scalars for a wider window and several threads' chunks: each result equals
    the core's independent double-and-add (cuzk_g1_point_op)."""
    rng = random.Random(99)
    scalars = [rng.randrange(curve.r) for _ in range(3000)] + [curve.r - 1, 0, 1]
    gen = points.g1_affine_to_mont(curve.g1, curve)
    out = native.g1_fixed_base_mul(gen, points.ints_to_limb_array(scalars), threads=3, curve=curve)
    for i in list(range(0, len(scalars), 97)) + [len(scalars) - 3, len(scalars) - 1]:
        k = points.int_to_limbs(scalars[i])
        want = native.g1_point_op(native.POINT_MUL, gen, k, curve=curve)
        assert np.array_equal(out[i], want), i


def test_fixed_base_mul_refuses_scalars_not_below_r():
    gen = points.g1_affine_to_mont(BN254.g1, BN254)
    with pytest.raises(native.NativeCoreError, match="canonical"):
        native.g1_fixed_base_mul(gen, points.ints_to_limb_array([BN254.r]), curve=BN254)


def _lagrange(curve, log_n, point_index, x):
    """L_k(x) for the size-2^log_n domain of snarkjs's roots, by the textbook formula."""
    r, n = curve.r, 1 << log_n
    w = pow(curve.root_of_unity, 1 << (curve.two_adicity - log_n), r)
    wk = pow(w, point_index, r)
    return (pow(x, n, r) - 1) * pow(n, -1, r) * wk * pow(x - wk, -1, r) % r


@pytest.mark.parametrize("name", ["mulchain", "bls12381/mulchain"])
def test_setup_scalars_match_python(name):
    """Every section's scalars and the section-4 records, from the r1cs as Python dicts and
    the formulas of snarkjs's zkey_new, for fixed toxic waste."""
    path = fixture_dir(name) / "circuit.r1cs"
    circuit = read_r1cs(path)
    header, raw = read_r1cs_raw(path)
    curve, r = circuit.curve, circuit.curve.r
    n_pub, n_vars, m = circuit.n_public, circuit.n_wires, circuit.n_constraints
    domain = domain_size_for(m, n_pub)
    log_n = domain.bit_length() - 1
    tau, alpha, beta, gamma, delta = (secrets.randbelow(r - 1) + 1 for _ in range(5))
    toxic = points.ints_to_limb_array([tau, alpha, beta, pow(gamma, -1, r), pow(delta, -1, r)])
    a, b, k, h, coefs = native.setup_scalars(raw, m, n_vars, n_pub, domain, toxic, threads=2,
                                             curve=curve)

    lag = [_lagrange(curve, log_n, c, tau) for c in range(m + n_pub + 1)]
    sums = [[0] * n_vars for _ in range(3)]
    records = []
    for c, lcs in enumerate(circuit.constraints):
        for matrix, lc in enumerate(lcs):
            for wire, coef in lc.items():
                sums[matrix][wire] = (sums[matrix][wire] + coef * lag[c]) % r
                if matrix < 2:
                    records.append((matrix, c, wire, coef))
    for s in range(n_pub + 1):  # snarkjs's extra constraint per public signal
        sums[0][s] = (sums[0][s] + lag[m + s]) % r
        records.append((0, m + s, s, 1))
    assert points.limb_array_to_ints(a) == sums[0]
    assert points.limb_array_to_ints(b) == sums[1]
    want_k = [(beta * sums[0][s] + alpha * sums[1][s] + sums[2][s])
              * pow(gamma if s <= n_pub else delta, -1, r) % r for s in range(n_vars)]
    assert points.limb_array_to_ints(k) == want_k
    want_h = [_lagrange(curve, log_n + 1, 2 * i + 1, tau) * pow(delta, -1, r) % r
              for i in range(domain)]
    assert points.limb_array_to_ints(h) == want_h
    got = [(int(struct.unpack_from("<I", row, 0)[0]), int(struct.unpack_from("<I", row, 4)[0]),
            int(struct.unpack_from("<I", row, 8)[0]),
            coef_value(np.frombuffer(row[12:].tobytes(), dtype="<u8"), curve)) for row in coefs]
    assert sorted(got) == sorted(records)


def test_domain_size_is_snarkjs_s():
    assert domain_size_for(29, 2) == 32       # 29 + 2 + 1 = 32 exactly
    assert domain_size_for(30, 2) == 64
    assert domain_size_for(1, 0) == 2


# ---------------------------------------------------------------------------- whole setups

def _setup(tmp_path, name):
    zkey_path = tmp_path / "circuit.zkey"
    report = setup(fixture_dir(name) / "circuit.r1cs", zkey_path, threads=2)
    return zkey_path, report


@pytest.mark.parametrize("name", SETUP_FIXTURES)
def test_setup_zkey_matches_snarkjs_shape(tmp_path, name):
    """Same header numbers and coefficient records as the fixture's snarkjs zkey."""
    zkey_path, report = _setup(tmp_path, name)
    ours, theirs = read_zkey(zkey_path), read_zkey(fixture_dir(name) / "circuit.zkey")
    assert ours.curve is theirs.curve is report.curve
    for attr in ("n_vars", "n_public", "domain_size", "n_coefs", "q", "r"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr

    def records(zk):
        c = zk.coefs
        return sorted(zip(c["matrix"].tolist(), c["constraint"].tolist(), c["signal"].tolist(),
                          (coef_value(v, zk.curve) for v in c["value"])))

    assert records(ours) == records(theirs)
    for rows, check in ((ours.a_points, native.g1_check_points),
                        (ours.h_points, native.g1_check_points),
                        (ours.b2_points, native.g2_check_points)):
        check(rows, curve=ours.curve)


@pytest.mark.snarkjs
@pytest.mark.slow
@requires_snarkjs
@pytest.mark.parametrize("name", SETUP_FIXTURES)
def test_setup_proves_with_ours_and_snarkjs(tmp_path, name):
    """Our prover and snarkjs prove with the zkey, both export the same vkey, snarkjs
    verifies both proofs; a tampered witness is refused by ours (self-verification) and
    snarkjs's proof from it fails snarkjs verify."""
    d = fixture_dir(name)
    zkey_path, _ = _setup(tmp_path, name)
    zkey = read_zkey(zkey_path)
    vk_ours = export_verification_key(zkey)
    vk_file = tmp_path / "vk_snarkjs.json"
    proc = run_snarkjs("zkey", "export", "verificationkey", zkey_path, vk_file)
    assert proc.returncode == 0, strip_ansi(proc.stdout + proc.stderr)
    vk_snarkjs = json.loads(vk_file.read_text())
    assert vk_ours == vk_snarkjs

    witness = read_wtns(d / "witness.wtns", zkey=zkey)
    proof, public = prove(zkey, witness)
    (tmp_path / "ours").mkdir()
    assert snarkjs_verify(tmp_path / "ours", vk_snarkjs, public, proof)

    proc = run_snarkjs("groth16", "prove", zkey_path, d / "witness.wtns",
                       tmp_path / "proof.json", tmp_path / "public.json")
    assert proc.returncode == 0, strip_ansi(proc.stdout + proc.stderr)
    proc = run_snarkjs("groth16", "verify", vk_file, tmp_path / "public.json",
                       tmp_path / "proof.json")
    assert proc.returncode == 0 and "OK" in strip_ansi(proc.stdout)

    # a private (non-public) signal changed: the witness no longer satisfies the circuit
    values = np.array(witness.values, copy=True)
    victim = zkey.n_public + 1
    values[victim, 0] ^= 1
    bad = tmp_path / "bad.wtns"
    write_wtns(bad, values, prime=zkey.r)
    with pytest.raises(SelfVerificationError):
        prove(zkey, read_wtns(bad, zkey=zkey))
    proc = run_snarkjs("groth16", "prove", zkey_path, bad, tmp_path / "bad_proof.json",
                       tmp_path / "bad_public.json")
    assert proc.returncode == 0, strip_ansi(proc.stdout + proc.stderr)
    proc = run_snarkjs("groth16", "verify", vk_file, tmp_path / "bad_public.json",
                       tmp_path / "bad_proof.json")
    assert proc.returncode != 0 or "OK" not in strip_ansi(proc.stdout)


def test_two_setups_differ(tmp_path):
    """Fresh toxic waste each time: the header points and every section differ."""
    r1cs = fixture_dir("mulchain") / "circuit.r1cs"
    setup(r1cs, tmp_path / "one.zkey")
    setup(r1cs, tmp_path / "two.zkey")
    one, two = read_zkey(tmp_path / "one.zkey"), read_zkey(tmp_path / "two.zkey")
    for name in ("alpha1", "beta2", "gamma2", "delta1"):
        assert getattr(one, name) != getattr(two, name), name
    for name in ("ic", "a_points", "b2_points", "c_points", "h_points"):
        assert not np.array_equal(getattr(one, name), getattr(two, name)), name
    assert np.array_equal(one.coefs, two.coefs)  # the circuit itself is the same


def _r1cs_with_bad_wire(tmp_path):
    """The mulchain r1cs with the first term's wire of constraint 0 set to nWires."""
    src = fixture_dir("mulchain") / "circuit.r1cs"
    data = bytearray(src.read_bytes())
    with BinFile(src, b"r1cs", (1,)) as bf:
        sec = bf.section(2)
    n_wires = read_r1cs_raw(src)[0].n_wires
    struct.pack_into("<I", data, sec.offset + 4, n_wires)
    bad = tmp_path / "bad.r1cs"
    bad.write_bytes(bytes(data))
    return bad


def test_setup_refuses_a_malformed_r1cs(tmp_path):
    bad = _r1cs_with_bad_wire(tmp_path)
    with pytest.raises(FormatError, match="section 2") as info:
        setup(bad, tmp_path / "out.zkey")
    assert str(bad) in str(info.value)
    assert not (tmp_path / "out.zkey").exists()
    assert list(tmp_path.iterdir()) == [bad]  # no temporary file left behind


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_bench_direct_mulchain_sets_up_and_proves(tmp_path, curve):
    """bench/mulchain_r1cs.py (the 2^20 benchmark's circuit without circom) writes an r1cs
    and a witness that satisfy each other: set up, proved, self-verified."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "mulchain_r1cs.py"), "6",
                           str(tmp_path), "--curve", curve],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    circuit = read_r1cs(tmp_path / "circuit.r1cs")
    assert circuit.n_constraints == 61 and circuit.curve.snarkjs_name == curve
    witness = read_wtns(tmp_path / "witness.wtns")
    assert circuit.is_satisfied(points.limb_array_to_ints(witness.values)) is None
    report = setup(tmp_path / "circuit.r1cs", tmp_path / "circuit.zkey")
    assert report.domain_size == 64
    zkey = read_zkey(tmp_path / "circuit.zkey")
    prove(zkey, read_wtns(tmp_path / "witness.wtns", zkey=zkey))  # raises unless it verifies


# ---------------------------------------------------------------------------- command line

def test_cli_setup(tmp_path, capsys):
    out = tmp_path / "c.zkey"
    assert cli_main(["setup", "-v", str(fixture_dir("mulchain") / "circuit.r1cs"), str(out)]) == 0
    err = capsys.readouterr().err
    assert "setup: QAP at tau:" in err and "setup: H points (G1):" in err
    assert err.strip().splitlines()[-1].endswith(DEV_ONLY_NOTICE)
    assert read_zkey(out).n_vars == 33

    assert cli_main(["setup", str(fixture_dir("mulchain") / "circuit.r1cs"), str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "single-party development setup" in err[0]


def test_cli_setup_bad_input_exits_2_naming_the_file(tmp_path, capsys):
    wasm = fixture_dir("mulchain") / "circuit.wasm"
    assert cli_main(["setup", str(wasm), str(tmp_path / "x.zkey")]) == 2
    err = capsys.readouterr().err
    assert str(wasm) in err and "r1cs" in err
    bad = _r1cs_with_bad_wire(tmp_path)
    assert cli_main(["setup", str(bad), str(tmp_path / "x.zkey")]) == 2
    assert str(bad) in capsys.readouterr().err


def test_cli_help_says_development_only():
    proc = subprocess.run([sys.executable, "-m", "cuzk_tasks", "setup", "--help"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0
    assert "NOT for production" in proc.stdout.replace("\n", " ") or \
        "DEVELOPMENT AND BENCHMARKS ONLY" in proc.stdout.replace("\n", " ")


def test_setup_module_imports_no_service_stack():
    """The setup runs without Celery or Redis installed or imported."""
    code = ("import sys, cuzk_tasks.groth16.setup; "
            "bad = [m for m in ('celery', 'redis', 'kombu') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60, cwd=ROOT).returncode == 0
