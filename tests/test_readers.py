"""Readers for .zkey, .wtns and .r1cs: real fixtures and malformed files."""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk_tasks.errors import CuzkError, FormatError
from cuzk_tasks.groth16.formats.binfile import BN254_Q as Q, BN254_R as R
from cuzk_tasks.groth16.formats.r1cs import read_r1cs
from cuzk_tasks.groth16.formats.wtns import (ints_to_limbs, limbs_to_ints, read_wtns,
                                     write_wtns, wtns_bytes)
from cuzk_tasks.groth16.formats.zkey import (COEF_DTYPE, coef_value, limbs_ge,
                                     read_zkey, read_zkey_header)

from support.snarkjs_tool import FIXTURES, fixture_dir

ALL = FIXTURES + ["assert_fail"]
RINV_Q = pow(1 << 256, -1, Q)


# ----------------------------------------------------------------- helpers
def limbs_int(row) -> int:
    return sum(int(x) << (64 * i) for i, x in enumerate(row))


def from_mont(row) -> int:
    return limbs_int(row) * RINV_Q % Q


def on_g1(p) -> bool:
    x, y = p
    return (y * y - x ** 3 - 3) % Q == 0


# Fq2 = Fq[u]/(u^2+1); G2 twist: y^2 = x^3 + 3/(9+u)
def f2mul(a, b):
    return ((a[0] * b[0] - a[1] * b[1]) % Q, (a[0] * b[1] + a[1] * b[0]) % Q)


def f2inv(a):
    d = pow(a[0] * a[0] + a[1] * a[1], -1, Q)
    return (a[0] * d % Q, -a[1] * d % Q)


B2 = f2mul((3, 0), f2inv((9, 1)))


def on_g2(p) -> bool:
    x, y = p
    lhs = f2mul(y, y)
    x3 = f2mul(f2mul(x, x), x)
    return lhs == ((x3[0] + B2[0]) % Q, (x3[1] + B2[1]) % Q)


def sections(data: bytes):
    """[(type, header offset, data offset, size)] of an iden3 bin file."""
    n = struct.unpack_from("<I", data, 8)[0]
    pos, out = 12, []
    for _ in range(n):
        t, size = struct.unpack_from("<IQ", data, pos)
        out.append((t, pos, pos + 12, size))
        pos += 12 + size
    return out


def sec(data, stype):
    return next(s for s in sections(data) if s[0] == stype)


def copy(tmp_path, name, fname):
    dst = tmp_path / fname
    shutil.copy(fixture_dir(name) / fname, dst)
    return dst


def patch(path, offset, new: bytes):
    b = bytearray(path.read_bytes())
    b[offset:offset + len(new)] = new
    path.write_bytes(bytes(b))


def assert_format_error(excinfo, path, field_part):
    e = excinfo.value
    assert isinstance(e, FormatError) and isinstance(e, CuzkError)
    assert str(path) in str(e)
    assert field_part in e.field or field_part in str(e), str(e)


# ----------------------------------------------------------------- zkey
@pytest.mark.parametrize("name", ALL)
def test_read_zkey_fixture(name):
    with read_zkey(fixture_dir(name) / "circuit.zkey") as zk:
        assert zk.q == Q and zk.r == R and zk.n8q == zk.n8r == 32
        assert zk.domain_size == 1 << zk.log_domain_size
        nv, npub = zk.n_vars, zk.n_public
        assert zk.ic.shape == (npub + 1, 8)
        assert zk.a_points.shape == (nv, 8)
        assert zk.b1_points.shape == (nv, 8)
        assert zk.b2_points.shape == (nv, 16)
        assert zk.c_points.shape == (nv - npub - 1, 8)
        assert zk.h_points.shape == (zk.domain_size, 8)
        for arr in (zk.ic, zk.a_points, zk.h_points, zk.b2_points):
            assert arr.dtype == np.dtype("<u8")
            assert not arr.flags.writeable  # zero-copy read-only map
            assert not arr.flags.owndata
        assert zk.coefs.dtype == COEF_DTYPE and zk.coefs.shape == (zk.n_coefs,)
        for p in (zk.alpha1, zk.beta1, zk.delta1):
            assert on_g1(p)
        for p in (zk.beta2, zk.gamma2, zk.delta2):
            assert on_g2(p)
        # every non-infinity big-array point is on the curve (Montgomery -> std)
        for arr in (zk.ic, zk.a_points, zk.b1_points, zk.c_points, zk.h_points):
            for row in arr[:50]:
                if row.any():
                    assert on_g1((from_mont(row[:4]), from_mont(row[4:])))
        for row in zk.b2_points[:20]:
            if row.any():
                x = (from_mont(row[0:4]), from_mont(row[4:8]))
                y = (from_mont(row[8:12]), from_mont(row[12:16]))
                assert on_g2((x, y))
        raw = zk.header_points_mont()
        assert (from_mont(raw["alpha1"][:4]), from_mont(raw["alpha1"][4:])) == zk.alpha1
        assert raw["delta2"].shape == (16,)


@pytest.mark.parametrize("name", ALL)
def test_zkey_matches_verification_key(name):
    vk = json.loads((fixture_dir(name) / "verification_key.json").read_text())
    zk = read_zkey_header(fixture_dir(name) / "circuit.zkey")
    assert zk.ic is None and zk.a_points is None  # header only
    assert vk["nPublic"] == zk.n_public
    assert [int(v) for v in vk["vk_alpha_1"][:2]] == list(zk.alpha1)
    for key, pt in (("vk_beta_2", zk.beta2), ("vk_gamma_2", zk.gamma2),
                    ("vk_delta_2", zk.delta2)):
        assert tuple(tuple(int(c) for c in v) for v in vk[key][:2]) == pt
    full = read_zkey(fixture_dir(name) / "circuit.zkey")
    for i, ic in enumerate(vk["IC"]):
        assert (from_mont(full.ic[i][:4]), from_mont(full.ic[i][4:])) == \
            (int(ic[0]), int(ic[1]))
    full.close()


@pytest.mark.parametrize("name", ALL)
def test_zkey_coefs_match_r1cs(name):
    d = fixture_dir(name)
    r1 = read_r1cs(d / "circuit.r1cs")
    zk = read_zkey(d / "circuit.zkey")
    assert zk.n_vars == r1.n_wires
    assert zk.n_public == r1.n_public
    got = {}
    for rec in zk.coefs:
        got[(int(rec["matrix"]), int(rec["constraint"]), int(rec["signal"]))] = \
            coef_value(rec["value"])
    for k, (a, b, _c) in enumerate(r1.constraints):
        for m, lc in ((0, a), (1, b)):
            for s, v in lc.items():
                if v:
                    assert got[(m, k, s)] == v
    # snarkjs adds one A-coefficient 1 per public input (incl. the constant one)
    for i in range(zk.n_public + 1):
        assert got[(0, r1.n_constraints + i, i)] == 1
    zk.close()


# ----------------------------------------------------------------- wtns / r1cs
@pytest.mark.parametrize("name", ALL)
def test_read_wtns_fixture(name, tmp_path):
    d = fixture_dir(name)
    zk = read_zkey_header(d / "circuit.zkey")
    w = read_wtns(d / "witness.wtns", expected_length=zk.n_vars)
    assert w.prime == R and len(w) == zk.n_vars
    assert w.values.shape == (zk.n_vars, 4) and w.values.dtype == np.dtype("<u8")
    ints = w.as_ints()
    assert ints[0] == 1 and all(0 <= v < R for v in ints)
    # round trip, arrays and ints, byte-identical to the snarkjs file
    original = (d / "witness.wtns").read_bytes()
    assert wtns_bytes(w.values) == original
    out = tmp_path / "w.wtns"
    write_wtns(out, ints)
    assert out.read_bytes() == original
    w.close()


@pytest.mark.parametrize("name", ALL)
def test_r1cs_satisfied(name):
    d = fixture_dir(name)
    r1 = read_r1cs(d / "circuit.r1cs")
    w = read_wtns(d / "witness.wtns").as_ints()
    assert r1.prime == R and r1.n_wires == len(w)
    assert len(r1.constraints) == r1.n_constraints
    assert r1.is_satisfied(w) is None
    bad = list(w)
    bad[-1] = (bad[-1] + 1) % R
    assert r1.is_satisfied(bad) is not None
    if r1.n_pub_out:
        bad = list(w)
        bad[1] = (bad[1] + 1) % R  # the first output
        assert r1.is_satisfied(bad) is not None


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=R - 1), max_size=40))
def test_wtns_roundtrip_random(tmp_path_factory, values):
    path = tmp_path_factory.mktemp("w") / "x.wtns"
    write_wtns(path, values)
    w = read_wtns(path)
    assert w.as_ints() == values
    assert wtns_bytes(ints_to_limbs(values)) == path.read_bytes()
    w.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=(1 << 256) - 1), min_size=1,
                max_size=20),
       st.sampled_from([R, Q, 1, (1 << 256) - 1, 1 << 64]))
def test_limbs_ge(values, bound):
    limbs = ints_to_limbs(values)
    assert limbs_to_ints(limbs) == values
    assert limbs_ge(limbs, bound).tolist() == [v >= bound for v in values]


# ----------------------------------------------------------------- bad zkeys
ZK = "circuit.zkey"


def test_zkey_truncated(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    data = p.read_bytes()
    t, _, off, size = sec(data, 9)  # H
    p.write_bytes(data[:off + size // 2])
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "section 9")
    assert "truncated" in str(ei.value)


@pytest.mark.parametrize("name", ["mulchain", "bls12381/mulchain"])
def test_zkey_truncated_in_its_g2_section(tmp_path, name):
    """A zkey cut inside section 7 (the B points in G2: 4 x n8q bytes each, 128 on BN254,
    192 on BLS12-381) is refused naming the file and that section."""
    p = tmp_path / ZK
    shutil.copy(fixture_dir(name) / ZK, p)
    data = p.read_bytes()
    _, _, off, size = sec(data, 7)
    p.write_bytes(data[:off + size // 2 + 7])
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "section 7")
    assert "truncated" in str(ei.value)


def test_zkey_empty_and_tiny(tmp_path):
    p = tmp_path / "empty.zkey"
    p.write_bytes(b"")
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "magic")
    p.write_bytes(b"zkey\x01\x00")
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "header")


def test_zkey_missing_file(tmp_path):
    with pytest.raises(FormatError) as ei:
        read_zkey(tmp_path / "nope.zkey")
    assert "nope.zkey" in str(ei.value)


def test_zkey_section_size_huge(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    _, hdr, _, _ = sec(p.read_bytes(), 5)
    patch(p, hdr + 4, struct.pack("<Q", 1 << 40))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "section 5")


def _shrink_section(data: bytes, stype: int, by: int) -> bytes:
    """Rewrite a well-formed file with section `stype` `by` bytes shorter."""
    out = bytearray(data[:12])
    for t, _, off, size in sections(data):
        payload = data[off:off + size]
        if t == stype:
            payload = payload[:size - by]
        out += struct.pack("<IQ", t, len(payload)) + payload
    return bytes(out)


@pytest.mark.parametrize("stype,label", [(3, "IC"), (5, "A"), (6, "B1"), (7, "B2"),
                                         (8, "C"), (9, "H"), (4, "coefficients"),
                                         (2, "groth16 header")])
def test_zkey_section_wrong_size(tmp_path, stype, label):
    p = copy(tmp_path, "mulchain", ZK)
    p.write_bytes(_shrink_section(p.read_bytes(), stype, 44 if stype == 4 else 64))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, f"section {stype}")
    assert label in str(ei.value)
    if stype != 2:  # the header-only reader also checks every section size
        with pytest.raises(FormatError):
            read_zkey_header(p)


def test_zkey_corrupted_ncoefs(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    _, _, off, _ = sec(p.read_bytes(), 4)
    patch(p, off, struct.pack("<I", 64))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "section 4")
    assert "nCoefs=64" in str(ei.value)


def test_zkey_missing_section(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    data = p.read_bytes()
    _, hdr, _, _ = sec(data, 8)
    patch(p, hdr, struct.pack("<I", 77))  # retype section 8 -> 77
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "section 8")
    assert "missing" in str(ei.value)


def test_zkey_duplicate_section(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    _, hdr, _, _ = sec(p.read_bytes(), 6)
    patch(p, hdr, struct.pack("<I", 5))  # two sections of type 5
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "section 5")
    assert "more than once" in str(ei.value)


def test_zkey_wrong_magic(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    patch(p, 0, b"wtns")
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "magic")


def test_zkey_wrong_version(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    patch(p, 4, struct.pack("<I", 7))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "version")
    assert "7" in str(ei.value)


def test_zkey_not_groth16(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    _, _, off, _ = sec(p.read_bytes(), 1)
    patch(p, off, struct.pack("<I", 2))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "protocol")
    assert "plonk" in str(ei.value)


BLS12_381_Q = int("1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241"
                  "eabfffeb153ffffb9feffffffffaaab", 16)
OTHER_256 = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001


@pytest.mark.parametrize("which", ["q", "r"])
def test_zkey_other_prime(tmp_path, which):
    p = copy(tmp_path, "mulchain", ZK)
    _, _, off, _ = sec(p.read_bytes(), 2)
    pos = off + 4 if which == "q" else off + 4 + 32 + 4
    patch(p, pos, OTHER_256.to_bytes(32, "little"))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, which)
    msg = str(ei.value)
    assert "unsupported curve" in msg and str(OTHER_256) in msg and "bn128" in msg


def test_zkey_other_n8q(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    _, _, off, _ = sec(p.read_bytes(), 2)
    patch(p, off, struct.pack("<I", 40))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "n8q")
    assert ei.value.field == "n8q" and "expected 32 or 48" in str(ei.value)
    # 48 is BLS12-381's size: the 48 bytes read as q are then no known prime
    patch(p, off, struct.pack("<I", 48))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert ei.value.field == "q" and "unsupported curve" in str(ei.value)


def test_zkey_domain_not_power_of_two(tmp_path):
    p = copy(tmp_path, "mulchain", ZK)
    _, _, off, _ = sec(p.read_bytes(), 2)
    patch(p, off + 4 + 32 + 4 + 32 + 8, struct.pack("<I", 63))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "domainSize")


@pytest.mark.parametrize("field,index,value", [("matrix", 0, 2), ("constraint", 4, 1 << 20),
                                               ("signal", 8, 1 << 20)])
def test_zkey_bad_coefficient(tmp_path, field, index, value):
    p = copy(tmp_path, "mulchain", ZK)
    _, _, off, _ = sec(p.read_bytes(), 4)
    rec = 3
    patch(p, off + 4 + rec * 44 + index, struct.pack("<I", value))
    with pytest.raises(FormatError) as ei:
        read_zkey(p)
    assert_format_error(ei, p, "section 4")
    assert f"coefficient #{rec}" in str(ei.value) and field in str(ei.value)


# ----------------------------------------------------------------- bad wtns
WT = "witness.wtns"


def test_wtns_other_prime(tmp_path):
    p = copy(tmp_path, "mulchain", WT)
    _, _, off, _ = sec(p.read_bytes(), 1)
    patch(p, off + 4, Q.to_bytes(32, "little"))
    with pytest.raises(FormatError) as ei:
        read_wtns(p)
    assert_format_error(ei, p, "prime")
    assert "witness is for the bn128 base field q, expected bn128 scalar field r" in str(ei.value)


def test_wtns_unknown_prime_is_not_echoed(tmp_path):
    p = copy(tmp_path, "mulchain", WT)
    _, _, off, _ = sec(p.read_bytes(), 1)
    other = 2**255 - 19
    patch(p, off + 4, other.to_bytes(32, "little"))
    with pytest.raises(FormatError) as ei:
        read_wtns(p)
    assert_format_error(ei, p, "prime")
    assert "witness is for another prime field, expected" in str(ei.value)
    assert str(other) not in str(ei.value)


def test_wtns_wrong_length(tmp_path):
    p = fixture_dir("mulchain") / WT
    n = len(read_wtns(p))
    with pytest.raises(FormatError) as ei:
        read_wtns(p, expected_length=n + 1)
    assert_format_error(ei, p, "nWitness")
    assert f"witness has {n} values, zkey expects nVars={n + 1}" in str(ei.value)


@pytest.mark.parametrize("bad", [R, R + 5, (1 << 256) - 1])
def test_wtns_value_not_reduced(tmp_path, bad):
    p = copy(tmp_path, "mulchain", WT)
    _, _, off, _ = sec(p.read_bytes(), 2)
    patch(p, off + 7 * 32, bad.to_bytes(32, "little"))
    with pytest.raises(FormatError) as ei:
        read_wtns(p)
    assert_format_error(ei, p, "values")
    assert "#7" in str(ei.value)


def test_wtns_truncated(tmp_path):
    p = copy(tmp_path, "mulchain", WT)
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(FormatError) as ei:
        read_wtns(p)
    assert_format_error(ei, p, "section 2")


def test_wtns_wrong_magic_and_version(tmp_path):
    p = copy(tmp_path, "mulchain", WT)
    patch(p, 4, struct.pack("<I", 1))
    with pytest.raises(FormatError) as ei:
        read_wtns(p)
    assert_format_error(ei, p, "version")
    patch(p, 0, b"zkey")
    with pytest.raises(FormatError) as ei:
        read_wtns(p)
    assert_format_error(ei, p, "magic")


def test_wtns_section_size_mismatch(tmp_path):
    p = copy(tmp_path, "mulchain", WT)
    p.write_bytes(_shrink_section(p.read_bytes(), 2, 32))
    with pytest.raises(FormatError) as ei:
        read_wtns(p)
    assert_format_error(ei, p, "section 2")


# ----------------------------------------------------------------- bad r1cs
def test_r1cs_bad(tmp_path):
    p = copy(tmp_path, "mulchain", "circuit.r1cs")
    good = p.read_bytes()
    patch(p, 0, b"zkey")
    with pytest.raises(FormatError) as ei:
        read_r1cs(p)
    assert_format_error(ei, p, "magic")
    p.write_bytes(_shrink_section(good, 2, 8))
    with pytest.raises(FormatError) as ei:
        read_r1cs(p)
    assert_format_error(ei, p, "section 2")
    p.write_bytes(good)
    _, _, off, _ = sec(good, 1)
    patch(p, off + 4, Q.to_bytes(32, "little"))
    with pytest.raises(FormatError) as ei:
        read_r1cs(p)
    assert_format_error(ei, p, "prime")
