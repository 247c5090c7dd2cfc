"""The CLI's whole-file prove on the native core (groth16/backends/native_prove.py, prove_cpu.hpp):
the same proof as the numpy prover for the same r and s, on both curves; a proof that
verifies when r and s are drawn; every file it does not accept declined (and then the numpy
path says what is wrong); and ``cuzk-tasks prove`` on the CPU core imports no numpy."""

import json
import pathlib
import subprocess
import sys

import pytest

from cuzk_tasks.cli import main as cli_main
from cuzk_tasks.errors import NativeCoreError
from cuzk_tasks.groth16 import read_wtns, read_zkey, verify, write_wtns
from cuzk_tasks.groth16.backends.native_prove import STEPS, prove_files
from cuzk_tasks.groth16.prover import prove_finish, prove_start
from support.snarkjs_tool import BLS12381_FIXTURES, FIXTURES, fixture_dir

ALL = FIXTURES + BLS12381_FIXTURES
ROOT = pathlib.Path(__file__).resolve().parent.parent
STATUS_IO, STATUS_FORMAT, STATUS_UNSATISFIED = 8, 9, 10


def files(name):
    d = fixture_dir(name)
    return d / "circuit.zkey", d / "witness.wtns"


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("r, s", [(5, 7), (2**200 + 12345, 3**150)])
def test_same_proof_as_the_numpy_prover_for_the_same_r_and_s(name, r, s):
    zkey_path, wtns_path = files(name)
    zkey = read_zkey(zkey_path)
    witness = read_wtns(wtns_path, zkey=zkey)
    expected = prove_finish(prove_start(zkey, witness, backend="cpu"), zkey, witness, r=r, s=s)
    proof, public, timings = prove_files(zkey_path, wtns_path, threads=2, r=r, s=s)
    assert (proof, public) == expected
    assert proof["curve"] == zkey.curve.snarkjs_name
    assert list(timings) == list(STEPS) and all(v >= 0 for v in timings.values())


@pytest.fixture(scope="module")
def mulchain_2p16(tmp_path_factory):
    """A 2^16-domain circuit (bench/mulchain_r1cs.py's files, our setup): above 2^15 the
    whole-file prover runs its MSMs one after another instead of in one pool."""
    from cuzk_tasks.groth16.setup import setup

    d = tmp_path_factory.mktemp("mulchain_2p16")
    subprocess.run([sys.executable, str(ROOT / "bench" / "mulchain_r1cs.py"), "16", str(d)],
                   check=True, capture_output=True)
    setup(d / "circuit.r1cs", d / "circuit.zkey")
    return d / "circuit.zkey", d / "witness.wtns"


def test_same_proof_as_the_numpy_prover_above_the_pooled_sizes(mulchain_2p16):
    zkey_path, wtns_path = mulchain_2p16
    zkey = read_zkey(zkey_path)
    assert zkey.domain_size == 2**16
    witness = read_wtns(wtns_path, zkey=zkey)
    r, s = 2**100 + 3, 2**170 + 5
    expected = prove_finish(prove_start(zkey, witness, backend="cpu"), zkey, witness, r=r, s=s)
    assert prove_files(zkey_path, wtns_path, threads=2, r=r, s=s)[:2] == expected


@pytest.mark.parametrize("name", ALL)
def test_drawn_r_and_s_give_proofs_that_verify_and_differ(name):
    zkey_path, wtns_path = files(name)
    vkey = json.loads((zkey_path.parent / "verification_key.json").read_text())
    first, public, _ = prove_files(zkey_path, wtns_path, threads=1)
    second, public2, _ = prove_files(zkey_path, wtns_path, threads=2)
    assert public == public2 == json.loads((zkey_path.parent / "public.json").read_text())
    assert verify(vkey, public, first) and verify(vkey, public, second)
    assert first["pi_a"] != second["pi_a"]
    bad = [str(int(public[0]) + 1), *public[1:]] if public else public
    if public:
        assert not verify(vkey, bad, first)


def test_an_unsatisfying_witness_is_declined_never_proved(tmp_path):
    zkey_path, wtns_path = files("mulchain")
    values = read_wtns(wtns_path).values.copy()
    values[-1, 0] ^= 1
    write_wtns(tmp_path / "bad.wtns", values)
    with pytest.raises(NativeCoreError) as info:
        prove_files(zkey_path, tmp_path / "bad.wtns", threads=1)
    assert info.value.status == STATUS_UNSATISFIED
    # without the self-check the native core proves it: the check is what refuses it
    proof, public, _ = prove_files(zkey_path, tmp_path / "bad.wtns", threads=1, verify=False)
    vkey = json.loads((zkey_path.parent / "verification_key.json").read_text())
    assert not verify(vkey, public, proof)


def _patched(data, offset, new):
    return data[:offset] + new + data[offset + len(new):]


def _zkey_section(zkey_bytes, wanted):
    """Offset of the payload of section ``wanted`` of a zkey."""
    count = int.from_bytes(zkey_bytes[8:12], "little")
    pos = 12
    for _ in range(count):
        kind = int.from_bytes(zkey_bytes[pos:pos + 4], "little")
        size = int.from_bytes(zkey_bytes[pos + 4:pos + 12], "little")
        if kind == wanted:
            return pos + 12
        pos += 12 + size
    raise AssertionError(f"no section {wanted}")


#: the first witness value: file header 12, section 1 (12 + 40), section 2's header 12
WITNESS_VALUES = 12 + 12 + 40 + 12

#: what -> (zkey bytes, witness bytes) -> the files the whole-file prove must decline
MUTATIONS = {
    "truncated zkey": lambda z, w: (z[:1000], w),
    "empty zkey": lambda z, w: (b"", w),
    "bad zkey magic": lambda z, w: (b"zkez" + z[4:], w),
    "zkey version 2": lambda z, w: (_patched(z, 4, (2).to_bytes(4, "little")), w),
    "plonk zkey": lambda z, w: (_patched(z, _zkey_section(z, 1), (2).to_bytes(4, "little")), w),
    "zkey without H": lambda z, w: (_patched(z, _zkey_section(z, 9) - 12,
                                             (11).to_bytes(4, "little")), w),
    "truncated witness": lambda z, w: (z, w[:-1]),
    "witness version 1": lambda z, w: (z, _patched(w, 4, (1).to_bytes(4, "little"))),
    "witness[0] = 2": lambda z, w: (z, _patched(w, WITNESS_VALUES, (2).to_bytes(32, "little"))),
    "witness value >= r": lambda z, w: (z, _patched(w, len(w) - 32, b"\xff" * 32)),
}


@pytest.mark.parametrize("what", sorted(MUTATIONS))
def test_files_it_does_not_accept_are_declined_and_the_cli_names_the_file(what, tmp_path, capsys):
    zkey_path, wtns_path = files("mulchain")
    zkey_bytes, wtns_bytes = MUTATIONS[what](zkey_path.read_bytes(), wtns_path.read_bytes())
    (tmp_path / "c.zkey").write_bytes(zkey_bytes)
    (tmp_path / "w.wtns").write_bytes(wtns_bytes)
    with pytest.raises(NativeCoreError) as info:
        prove_files(tmp_path / "c.zkey", tmp_path / "w.wtns", threads=1)
    assert info.value.status == STATUS_FORMAT
    # the CLI then proves with the numpy path, whose readers name the file
    code = cli_main(["prove", str(tmp_path / "c.zkey"), str(tmp_path / "w.wtns"),
                     str(tmp_path / "p.json"), str(tmp_path / "pub.json"), "--backend", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and ("c.zkey" in err or "w.wtns" in err), err
    assert not (tmp_path / "p.json").exists()


def test_a_missing_file_is_declined_as_io(tmp_path):
    zkey_path, _ = files("mulchain")
    with pytest.raises(NativeCoreError) as info:
        prove_files(zkey_path, tmp_path / "missing.wtns", threads=1)
    assert info.value.status == STATUS_IO
    with pytest.raises(NativeCoreError) as info:
        prove_files(tmp_path, zkey_path, threads=1)  # a directory is not a zkey
    assert info.value.status == STATUS_IO


@pytest.mark.parametrize("name", ["mulchain", "bls12381/poseidon"])
def test_the_cli_proves_on_the_cpu_core_without_importing_numpy(name, tmp_path):
    zkey_path, wtns_path = files(name)
    code = (
        "import sys\n"
        "from cuzk_tasks.cli import main\n"
        f"rc = main(['-v', 'prove', {str(zkey_path)!r}, {str(wtns_path)!r}, "
        f"{str(tmp_path / 'p.json')!r}, {str(tmp_path / 'pub.json')!r}, '--backend', 'cpu'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'numpy')\n"
        "print('numpy modules:', len(heavy)); sys.exit(rc or (3 if heavy else 0))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "numpy modules: 0" in result.stdout
    assert "msm_h" in result.stderr and "on cpu" in result.stderr  # -v: the native steps
    vkey = json.loads((zkey_path.parent / "verification_key.json").read_text())
    assert verify(vkey, json.loads((tmp_path / "pub.json").read_text()),
                  json.loads((tmp_path / "p.json").read_text()))


# --- proof.json without the json module -----------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

from cuzk_tasks.groth16.formats.proof_json import dumps_json  # noqa: E402

JSON_VALUES = st.recursive(
    st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.none(),
              st.floats(allow_nan=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_proof_json_writes_what_json_dumps_writes(value):
    """dumps_json writes proofs and keys itself (json's import is ~4 ms of a small proof's
    command line) and leaves the rest to json: both ways, json.dumps's text, indent 1."""
    assert dumps_json(value) == json.dumps(value, indent=1, ensure_ascii=False)


@pytest.mark.parametrize("name", ["mulchain", "bls12381/poseidon"])
def test_a_proof_and_its_key_are_written_as_snarkjs_writes_them(name):
    """The fixtures' proof.json and verification_key.json are snarkjs's own files."""
    d = fixture_dir(name)
    for fname in ("proof.json", "verification_key.json", "public.json"):
        text = (d / fname).read_text()
        assert dumps_json(json.loads(text)) == text, fname
