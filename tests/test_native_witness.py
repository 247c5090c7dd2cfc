"""circom's C++ witness generator as the witness path (issue 25 item 3): the fixture circuits
built with ``circom --c`` (tests/support/native_build.py, once per session), their witnesses
byte-identical to the wasm path and to snarkjs's committed ones; bad input named before the
binary runs; a binary that crashes, hangs, asserts or writes nothing is a clear WitnessError
and the caller lives; and one service run through real worker processes with
``witness = "native:..."``.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from support import native_build
from support.processes import ctrl_c
from support.snarkjs_tool import FIXTURES, fixture_dir

from cuzk_tasks.errors import (ConfigError, CuzkError, FormatError, WitnessError,
                               WitnessInterrupted, WitnessTimeoutError)
from cuzk_tasks.groth16.formats.circom_input import load_input_json
from cuzk_tasks.groth16.curves import BN254
from cuzk_tasks.groth16.native_server import build_server, server_path
from cuzk_tasks.groth16.native_witness import (NATIVE_PREFIX, NativeWitnessGenerator,
                                               generate_witness, get_generator)
from cuzk_tasks.groth16.witness import WitnessCalculator

ROOT = pathlib.Path(__file__).resolve().parent.parent
MISSING = native_build.missing_tools()
# slow: each module run compiles circom's C++ generators with g++ first
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(MISSING), reason="a native witness build needs "
                                 + ", ".join(MISSING))]

#: every fixture circuit (tests/fixtures/<key>) and the circom prime it is built over
CIRCUITS = {**{n: (n, "bn128") for n in [*FIXTURES, "assert_fail"]},
            "bls12381/mulchain": ("mulchain", "bls12381")}

# A binary posing as circom's generator (its .dat a real one's, BN254's r in its bytes so it
# passes as one): what it does comes from its own file name.
FAKE_C = r"""
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((used)) static const unsigned char prime[32] = {PRIME};
int main(int argc, char **argv) {
    const char *me = strrchr(argv[0], '/');
    me = me ? me + 1 : argv[0];
    if (strstr(me, "crash")) raise(SIGSEGV);
    if (strstr(me, "hang")) {
        fork();  /* a child in its group: killed with it */
        const char *pids = getenv("FAKE_WITNESS_PIDS");
        if (pids) { FILE *f = fopen(pids, "a"); fprintf(f, "%d\n", getpid()); fclose(f); }
        for (;;) pause();
    }
    if (strstr(me, "short")) {
        FILE *f = fopen(argv[2], "wb"); fwrite("wtns\2\0\0\0\2\0\0\0", 1, 12, f); fclose(f);
        return 0;
    }
    if (strstr(me, "silent")) return 0;
    fprintf(stderr, "value 31337 of the input\n");  /* never quoted: could be input data */
    return 3;
}
"""
FAKES = ("crash", "hang", "short", "silent", "fails")


@pytest.fixture(scope="session")
def native(tmp_path_factory):
    """``{fixture key: binary path}`` of circom's C++ generator of every fixture circuit."""
    return native_build.build(CIRCUITS, tmp_path_factory.mktemp("native"))


@pytest.fixture(scope="session")
def fakes(native, tmp_path_factory):
    """``{mode: binary path}`` of the misbehaving binaries (FAKE_C), mulchain's .dat each."""
    d = tmp_path_factory.mktemp("fakes")
    src = d / "fake.c"
    src.write_text(FAKE_C.replace("PRIME", ", ".join(str(b) for b in BN254.r.to_bytes(32, "little"))))
    subprocess.run(["gcc", "-O0", "-o", str(d / "fake"), str(src)], check=True)
    out = {}
    for mode in FAKES:
        shutil.copy(d / "fake", d / mode)
        shutil.copy(str(native["mulchain"]) + ".dat", d / f"{mode}.dat")
        out[mode] = d / mode
    return out


def _input(key):
    return load_input_json(fixture_dir(key) / "input.json")


# ------------------------------------------------------------------ same witness
@pytest.mark.parametrize("key", list(CIRCUITS))
def test_the_native_witness_is_byte_identical_to_the_wasm_and_snarkjs(native, key):
    gen = get_generator(NATIVE_PREFIX + str(native[key]))
    assert isinstance(gen, NativeWitnessGenerator)
    wasm = WitnessCalculator(fixture_dir(key) / "circuit.wasm")
    assert gen.prime == wasm.prime
    data = gen.calculate_wtns(_input(key), "input.json", time_limit_s=60)
    assert data == (fixture_dir(key) / "witness.wtns").read_bytes()  # snarkjs's
    assert data == wasm.calculate_wtns(_input(key))
    assert get_generator(NATIVE_PREFIX + str(native[key])) is gen  # cached


@pytest.mark.parametrize("inputs", [
    {"a": "-5", "b": "0x1f"}, {"a": 12345678901234567890123, "b": [" 7 "]},
    {"a": "", "b": str(BN254.r + 2)}, {"a": True, "b": "0b101"}, {"a": [[3]], "b": 1e3},
])
def test_odd_inputs_give_the_wasms_witness(native, inputs):
    gen = get_generator(NATIVE_PREFIX + str(native["mulchain"]))
    wasm = WitnessCalculator(fixture_dir("mulchain") / "circuit.wasm")
    assert gen.calculate_wtns(inputs) == wasm.calculate_wtns(inputs)


def test_the_cli_takes_a_native_generator(native, tmp_path):
    out = tmp_path / "w.wtns"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "cuzk_tasks", "witness", NATIVE_PREFIX + str(native["poseidon"])]
    done = subprocess.run([*argv, str(fixture_dir("poseidon") / "input.json"), str(out)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == (fixture_dir("poseidon") / "witness.wtns").read_bytes()
    bad = fixture_dir("assert_fail") / "input_bad.json"
    argv[-1] = NATIVE_PREFIX + str(native["assert_fail"])
    done = subprocess.run([*argv, str(bad), str(out)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "Failed assert in template/function AssertFail line 10." in done.stderr


# ------------------------------------------------------------------ bad input
def _error(gen, tmp_path, obj):
    p = tmp_path / "input.json"
    p.write_text(json.dumps(obj))
    out = tmp_path / "w.wtns"
    with pytest.raises(WitnessError) as info:
        generate_witness(NATIVE_PREFIX + str(gen.binary_path), p, out)
    assert str(p) in str(info.value) and not out.exists()
    return str(info.value)


def test_bad_input_is_named_before_the_binary_runs(native, fakes, tmp_path):
    # the "fails" fake would exit 3 if it ran: these errors come from the checks before
    gen = get_generator(NATIVE_PREFIX + str(fakes["fails"]))
    msg = _error(gen, tmp_path, {"a": "3", "b": "11", "zz": "1"})
    assert "signal 'zz' is not an input of circuit" in msg, msg
    msg = _error(gen, tmp_path, {"a": ["3", "4"], "b": "11"})
    assert "input signal 'a' has 2 value(s), the circuit expects 1" in msg, msg
    msg = _error(gen, tmp_path, {"a": "1.5", "b": "11"})
    assert "input signal 'a'[0]: '1.5' is not an integer" in msg, msg
    msg = _error(gen, tmp_path, {"a": {"k": 1}, "b": "11"})
    assert "'a.k' is not an input" in msg, msg
    # no .sym next to the fake: the missing signal cannot be named, the given ones are
    msg = _error(gen, tmp_path, {"a": "3"})
    assert "only 1 of the circuit's 2 input values are set" in msg and "given: a" in msg, msg
    # circom's layout (OUT/mulchain.sym, OUT/mulchain_cpp/mulchain): named
    msg = _error(get_generator(NATIVE_PREFIX + str(native["mulchain"])), tmp_path, {"a": "3"})
    assert "missing input signal(s) 'b' (1 value)" in msg, msg
    msg = _error(get_generator(NATIVE_PREFIX + str(native["mulchain"])), tmp_path,
                 {"a": "3", "b": "1", "q": "1"})
    assert "(circuit inputs: a, b)" in msg, msg


def test_a_circuit_assert_is_a_clear_error(native):
    gen = get_generator(NATIVE_PREFIX + str(native["assert_fail"]))
    bad = fixture_dir("assert_fail") / "input_bad.json"
    with pytest.raises(WitnessError) as info:
        gen.calculate_file(bad)
    assert str(info.value) == (f"{bad}: witness generation failed in {native['assert_fail']}: "
                               "Failed assert in template/function AssertFail line 10. "
                               "(killed by SIGABRT)")
    # and the generator goes on
    assert gen.calculate_wtns(_input("assert_fail")) == \
        (fixture_dir("assert_fail") / "witness.wtns").read_bytes()


# ------------------------------------------------------------------ misbehaving binaries
@pytest.mark.parametrize("mode,expected", [
    ("crash", "killed by SIGSEGV"),
    ("fails", "exit status 3"),
    ("silent", "it exited 0 but wrote no witness"),
    ("short", "it wrote an unreadable witness ("),
])
def test_a_misbehaving_binary_is_a_witness_error_naming_it(fakes, mode, expected):
    gen = get_generator(NATIVE_PREFIX + str(fakes[mode]))
    with pytest.raises(WitnessError) as info:
        gen.calculate({"a": "3", "b": "11"}, "in.json")
    msg = str(info.value)
    assert msg.startswith(f"in.json: witness generation failed in {fakes[mode]}: {expected}"), msg
    assert "31337" not in msg and "Traceback" not in msg


def _pids(path):
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _times_out_at_1_s(gen):
    """A calculation on ``gen`` under a 1 s limit ends in 1-10 s with the limit's error."""
    t0 = time.monotonic()
    with pytest.raises(WitnessTimeoutError) as info:
        gen.calculate({"a": "3", "b": "11"}, "in.json", time_limit_s=1)
    assert 1 <= time.monotonic() - t0 < 10
    assert str(info.value) == (f"in.json: witness generation exceeded 1 s in {gen.binary_path} "
                               "(witness_time_limit_s)")


def test_a_binary_that_hangs_is_killed_at_the_time_limit(fakes, tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_WITNESS_PIDS", str(pids))
    _times_out_at_1_s(get_generator(NATIVE_PREFIX + str(fakes["hang"])))
    try:
        assert len(_pids(pids)) == 2  # it and its child ...
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in _pids(pids)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in _pids(pids))  # ... both killed with the group
    finally:
        _kill_left(pids)


def test_the_binary_dies_with_the_process_that_runs_it(fakes, tmp_path):
    """A pool process killed outright (the hard time limit, the OOM killer) takes its binary
    along (PR_SET_PDEATHSIG): no generator runs on for ever unowned."""
    pids = tmp_path / "pids"
    code = ("import sys; from cuzk_tasks.groth16.native_witness import get_generator; "
            "get_generator(sys.argv[1]).calculate({'a': 3, 'b': 11}, time_limit_s=600)")
    owner = subprocess.Popen([sys.executable, "-c", code, NATIVE_PREFIX + str(fakes["hang"])],
                             env={**os.environ, "PYTHONPATH": str(ROOT),
                                  "FAKE_WITNESS_PIDS": str(pids)})
    try:
        deadline = time.monotonic() + 30
        while len(_pids(pids)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        leader = [p for p in _pids(pids) if _pgrp(p) == p]
        assert len(leader) == 1, _pids(pids)
    finally:
        owner.kill()
        owner.wait()
    try:
        deadline = time.monotonic() + 10
        while _alive(leader[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(leader[0])
    finally:
        _kill_left(pids)  # the fake's own child (not circom's way), or all of it on a failure


def _kill_left(pids):
    """SIGKILL what a test's fakes left running (by pid, if it still is a fake)."""
    for p in _pids(pids):
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() in FAKES:
                    os.kill(p, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def _pgrp(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[2])


def _interrupted_from_another_thread(gen, ready=lambda: True) -> dict:
    """Run a calculation on ``gen`` in a thread, interrupt it from this one as soon as it
    runs and ``ready()``; ``{"error": what it raised, "interrupted": interrupt()'s count}``."""
    outcome = {}

    def run():
        try:
            gen.calculate({"a": "3", "b": "11"}, "in.json", time_limit_s=60)
        except WitnessError as exc:
            outcome["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 10
    while not outcome.get("interrupted") and time.monotonic() < deadline:
        if ready():
            outcome["interrupted"] = gen.interrupt()
        time.sleep(0.02)
    t.join(10)
    return outcome


def test_interrupt_kills_a_running_binary_from_another_thread(fakes):
    outcome = _interrupted_from_another_thread(get_generator(NATIVE_PREFIX + str(fakes["hang"])))
    assert isinstance(outcome.get("error"), WitnessInterrupted), outcome


def test_ctrl_c_stops_the_command_line_and_its_binary(fakes, tmp_path):
    pids = tmp_path / "pids"
    inp = tmp_path / "input.json"
    inp.write_text('{"a": 3, "b": 11}')
    out = tmp_path / "w.wtns"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_WITNESS_PIDS": str(pids)}
    proc = subprocess.Popen([sys.executable, "-m", "cuzk_tasks", "witness",
                             NATIVE_PREFIX + str(fakes["hang"]), str(inp), str(out)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(_pids(pids)) < 2 and time.monotonic() < deadline:  # the binary runs
        time.sleep(0.05)
    _, stderr = ctrl_c(proc)
    try:
        assert proc.returncode == 130 and stderr == "cuzk-tasks witness: interrupted\n", stderr
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in _pids(pids)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_pids(pids)) == 2 and not any(_alive(p) for p in _pids(pids))
        assert not out.exists()
    finally:
        _kill_left(pids)


def test_unusable_generator_files_are_format_errors(native, tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        get_generator(NATIVE_PREFIX + str(tmp_path / "nope"))
    binary = tmp_path / "mulchain"
    shutil.copy(native["mulchain"], binary)
    with pytest.raises(FormatError, match=r"mulchain\.dat: file: no such file"):
        NativeWitnessGenerator(binary)
    (tmp_path / "mulchain.dat").write_bytes(b"\1" * 100)
    with pytest.raises(FormatError, match="shorter than the 6144-byte input hash map"):
        NativeWitnessGenerator(binary)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    shutil.copy(str(native["mulchain"]) + ".dat", str(script) + ".dat")
    with pytest.raises(FormatError, match="prime: holds no scalar field of a supported curve"):
        NativeWitnessGenerator(script)


# ------------------------------------------------------------------ the kept-running server
@pytest.fixture(scope="session")
def served(native, tmp_path_factory):
    """``{fixture key: binary path}`` as :func:`native`, each a copy with its witness server
    (``<binary>.server``, built at -O0 from the objects :func:`native` built)."""
    base = tmp_path_factory.mktemp("served")

    def serve(key):
        binary = native[key]
        cpp = base / key.replace("/", "_") / binary.parent.name
        cpp.mkdir(parents=True)
        for f in [binary, pathlib.Path(f"{binary}.dat"), binary.parent / "main.cpp",
                  *binary.parent.glob("*.hpp")]:
            shutil.copy2(f, cpp / f.name)
        for sym in binary.parent.parent.glob("*.sym"):
            shutil.copy2(sym, cpp.parent / sym.name)
        build_server(cpp / binary.name, objects=native_build.server_objects(binary),
                     cxxflags=native_build.CXXFLAGS)
        return key, cpp / binary.name

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return dict(pool.map(serve, CIRCUITS))


def _server_pids(binary) -> list:
    """Pids of the running servers of ``binary`` (by their command line's first word)."""
    path = os.fsencode(server_path(binary))
    out = []
    for d in pathlib.Path("/proc").iterdir():
        try:
            if d.name.isdigit() and (d / "cmdline").read_bytes().split(b"\0")[0] == path \
                    and _alive(int(d.name)):
                out.append(int(d.name))
        except OSError:
            pass
    return sorted(out)


def _wait_until(check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


@pytest.mark.parametrize("key", sorted(k for k in CIRCUITS if k != "assert_fail"))
def test_the_server_gives_the_same_witness_again_and_again(served, key):
    """Byte-identical to snarkjs's on every fixture circuit, from one server process: the
    second witness reuses the first's memory, which must not leak one value into the next."""
    gen = NativeWitnessGenerator(served[key])
    try:
        assert gen.server_path == server_path(served[key])
        expected = (fixture_dir(key) / "witness.wtns").read_bytes()
        assert gen.calculate_wtns(_input(key)) == expected
        first = _server_pids(served[key])
        assert len(first) == 1
        if key == "mulchain":  # another input between two of the fixture's
            wasm = WitnessCalculator(fixture_dir(key) / "circuit.wasm")
            odd = {"a": "5", "b": "7"}
            assert (gen.calculate(odd) == wasm.calculate(odd)).all()
        assert gen.calculate_wtns(_input(key)) == expected
        assert _server_pids(served[key]) == first
    finally:
        gen.close()
    assert _wait_until(lambda: not _server_pids(served[key]))


def test_a_circuit_assert_on_the_server_reads_as_the_binarys(served):
    gen = NativeWitnessGenerator(served["assert_fail"])
    bad = fixture_dir("assert_fail") / "input_bad.json"
    try:
        with pytest.raises(WitnessError) as info:
            gen.calculate_file(bad)
        assert str(info.value) == (f"{bad}: witness generation failed in "
                                   f"{served['assert_fail']}: Failed assert in template/function "
                                   "AssertFail line 10. (killed by SIGABRT)")
        # the server died with the assert; the next witness starts another
        assert gen.calculate_wtns(_input("assert_fail")) == \
            (fixture_dir("assert_fail") / "witness.wtns").read_bytes()
    finally:
        gen.close()


def test_servers_are_replaced_when_idle_or_worn(served, monkeypatch):
    from cuzk_tasks.settings import defaults

    binary = served["mulchain"]
    gen = NativeWitnessGenerator(binary)
    expected = (fixture_dir("mulchain") / "witness.wtns").read_bytes()
    try:
        monkeypatch.setattr(defaults, "NATIVE_SERVER_MAX_WITNESSES", 2)
        seen = set()
        for _ in range(3):
            assert gen.calculate_wtns(_input("mulchain")) == expected
            seen.update(_server_pids(binary))
        assert len(seen) == 2 and len(_server_pids(binary)) == 1  # worn out after 2: replaced
        monkeypatch.setattr(defaults, "NATIVE_SERVER_IDLE_S", 0.3)
        gen.close()
        assert gen.calculate_wtns(_input("mulchain")) == expected
        assert _wait_until(lambda: not _server_pids(binary))  # it exits on its own when idle
        assert gen.calculate_wtns(_input("mulchain")) == expected  # and the next one starts
    finally:
        gen.close()


def test_the_server_dies_with_the_process_that_started_it(served):
    binary = served["mulchain"]
    code = ("import sys, time; from cuzk_tasks.groth16.native_witness import get_generator; "
            "from cuzk_tasks.groth16.formats.circom_input import load_input_json; "
            "get_generator(sys.argv[1]).calculate(load_input_json(sys.argv[2])); "
            "print('done', flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code, NATIVE_PREFIX + str(binary),
                              str(fixture_dir("mulchain") / "input.json")],
                             env={**os.environ, "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline() == "done\n"
        pids = _server_pids(binary)
        assert len(pids) == 1
    finally:
        owner.kill()  # SIGKILL: nothing of the owner's runs to end its server
        owner.wait()
    assert _wait_until(lambda: not _alive(pids[0]))


def test_a_stale_server_is_not_used(served, tmp_path, caplog):
    cpp = tmp_path / "mulchain_cpp"
    cpp.mkdir()
    binary = cpp / "mulchain"
    for f in (served["mulchain"], f"{served['mulchain']}.dat", server_path(served["mulchain"])):
        shutil.copy2(f, cpp / pathlib.Path(f).name)
    old = os.stat(server_path(binary)).st_mtime_ns
    os.utime(f"{binary}.dat", ns=(old + 10**9, old + 10**9))  # the circuit rebuilt since
    gen = NativeWitnessGenerator(binary)
    assert gen.server_path is None
    assert "older than" in caplog.text and server_path(binary) in caplog.text
    assert gen.calculate_wtns(_input("mulchain")) == \
        (fixture_dir("mulchain") / "witness.wtns").read_bytes()  # by the binary itself
    assert not _server_pids(binary)
    os.utime(server_path(binary))  # rebuilt: get_generator picks it up
    gen = get_generator(NATIVE_PREFIX + str(binary))
    try:
        assert gen.server_path == server_path(binary)
    finally:
        gen.close()


# A server posing as one: reads its request, then does what its circuit's name says.
FAKE_SERVER = {
    "hang": "#!/bin/sh\nread line\necho $$ >> \"$FAKE_WITNESS_PIDS\"\nsleep 600 & wait\n",
    "crash": "#!/bin/sh\nread line\nkill -SEGV $$\n",
    "garble": "#!/bin/sh\nread line\necho 'hello there'\nsleep 600\n",
}


@pytest.fixture
def fake_server(served, tmp_path):
    def make(mode):
        cpp = tmp_path / mode
        cpp.mkdir()
        binary = cpp / "mulchain"
        shutil.copy2(served["mulchain"], binary)
        shutil.copy2(f"{served['mulchain']}.dat", f"{binary}.dat")
        pathlib.Path(server_path(binary)).write_text(FAKE_SERVER[mode])
        os.chmod(server_path(binary), 0o755)
        return NativeWitnessGenerator(binary)
    return make


def test_a_server_that_hangs_is_killed_at_the_time_limit(fake_server, tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_WITNESS_PIDS", str(pids))
    _times_out_at_1_s(fake_server("hang"))
    assert len(_pids(pids)) == 1 and _wait_until(lambda: not _alive(_pids(pids)[0]))


def test_interrupt_stops_a_server_from_another_thread(fake_server, tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_WITNESS_PIDS", str(pids))
    outcome = _interrupted_from_another_thread(fake_server("hang"), lambda: _pids(pids))
    assert isinstance(outcome.get("error"), WitnessInterrupted) and outcome["interrupted"] == 1
    assert len(_pids(pids)) == 1 and _wait_until(lambda: not _alive(_pids(pids)[0]))


@pytest.mark.parametrize("mode,expected", [
    ("crash", "killed by SIGSEGV"),
    ("garble", "its server ({server}) answered something other than 'ok <values> <bytes "
               "each> <prime>': rebuild it with cuzk-tasks native-server"),
])
def test_a_server_that_fails_is_a_witness_error_naming_the_binary(fake_server, mode, expected):
    gen = fake_server(mode)
    with pytest.raises(WitnessError) as info:
        gen.calculate({"a": "3", "b": "11"}, "in.json", time_limit_s=30)
    assert str(info.value) == (f"in.json: witness generation failed in {gen.binary_path}: "
                               + expected.format(server=gen.server_path))


def test_building_a_server_names_what_is_missing(native, tmp_path):
    cpp = tmp_path / "mulchain_cpp"
    cpp.mkdir()
    binary = cpp / "mulchain"
    shutil.copy2(native["mulchain"], binary)
    with pytest.raises(FormatError) as info:
        build_server(binary)
    assert str(info.value).startswith(f"{cpp / 'main.cpp'}: file: no such file")
    shutil.copy2(native["mulchain"].parent / "main.cpp", cpp / "main.cpp")
    with pytest.raises(FormatError) as info:
        build_server(binary)
    assert str(info.value).startswith(f"{cpp / 'mulchain.o'}: file: no such file: run make")
    # the command line says the same, without a traceback
    done = subprocess.run([sys.executable, "-m", "cuzk_tasks", "native-server", str(binary)],
                          cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode != 0 and f"{cpp / 'mulchain.o'}: file: no such file" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    # a compiler error: its own last lines (no headers next to main.cpp)
    with pytest.raises(CuzkError) as info:
        build_server(binary, objects=native_build.server_objects(native["mulchain"]))
    assert "building the witness server failed" in str(info.value)
    assert ".hpp: No such file or directory" in str(info.value), str(info.value)
    assert not os.path.exists(server_path(binary))
    assert not list(cpp.glob(".cuzk-server-*"))  # its temporary directory is gone


# ------------------------------------------------------------------ config
def test_the_witness_key_of_a_circuit(tmp_path):
    from cuzk_tasks.settings.config import NATIVE_PREFIX as CONFIG_PREFIX, load_settings
    from cuzk_tasks.pipeline.registry import CircuitRegistry

    assert CONFIG_PREFIX == NATIVE_PREFIX
    cfg = tmp_path / "cuzk.toml"
    cfg.write_text('[circuits.c]\nzkey = "c.zkey"\nwasm = "c.wasm"\n'
                   'witness = "native:c_cpp/c"\n')
    spec = load_settings(cfg, env={}).circuits["c"]
    assert spec.witness == f"native:{tmp_path}/c_cpp/c"  # relative to the file, as wasm
    assert spec.witness_generator == spec.witness
    registry = CircuitRegistry({"c": spec})
    assert registry.redact(f"failed in {tmp_path}/c_cpp/c: x; {tmp_path}/c_cpp/c.dat") == \
        "failed in <circuit 'c' witness>: x; <circuit 'c' witness>.dat"
    for bad in ('"c.wasm"', '"native:"', "3"):
        cfg.write_text(f'[circuits.c]\nzkey = "c.zkey"\nwitness = {bad}\n')
        with pytest.raises(ConfigError, match=r"circuits\.c\.witness: expected \"native:"):
            load_settings(cfg, env={})


# ------------------------------------------------------------------ the service
@pytest.mark.slow
def test_jobs_through_the_service_with_a_native_generator(native, served, fakes, tmp_path):
    """One CPU worker (one pool process), one device worker: a native circuit proves, and one
    with a witness server proves job after job on the same server, started by the pool
    process; a generator that hangs and one that crashes fail their jobs clearly, and the
    worker lives (same pool process) to prove the next job."""
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.errors import JobError
    from cuzk_tasks.groth16 import verify
    from support import instruments
    from support.processes import Cluster
    from support.redis_server import RedisServer, have_redis_server

    if not have_redis_server():
        pytest.skip("redis-server is not installed")
    zkey = fixture_dir("mulchain") / "circuit.zkey"
    config = tmp_path / "cuzk.toml"
    config.write_text("".join(
        f'[circuits.{name}]\nzkey = "{zkey}"\nwitness = "native:{binary}"\n\n'
        for name, binary in (("mulchain", native["mulchain"]), ("hangs", fakes["hang"]),
                             ("crashes", fakes["crash"]), ("served", served["mulchain"]))))
    server = RedisServer()
    env = {**os.environ, "CUZK_CONFIG": str(config), "CUZK_REDIS_URL": server.url,
           "CUZK_PREFIX": "nativewit", "CUZK_HOSTNAME": "nativehost",
           "CUZK_HEARTBEAT_INTERVAL_S": "0.25", "CUZK_HEARTBEAT_TTL_S": "1.5",
           "CUZK_WITNESS_TIME_LIMIT_S": "3", "CUZK_SPOOL_DIR": str(tmp_path / "spool"),
           "CUZK_THREADS": "1", **instruments.env(os.environ.get("PYTHONPATH", ""))}
    c = Cluster(tmp_path, env, load_settings(env=env), ROOT)
    inp = {"input": json.loads((fixture_dir("mulchain") / "input.json").read_text())}
    vk = json.loads((fixture_dir("mulchain") / "verification_key.json").read_text())
    try:
        c.start("cpu", "--cpu", "--concurrency", "1")
        c.start("dev0", "--device", "0", "--backend", "cpu")

        def proves(circuit="mulchain"):
            result = c.client.wait(c.client.submit(circuit, [inp]), timeout=90)
            assert all(verify(vk, p["public"], p["proof"]) for p in result["proofs"]), result

        def fails(circuit):
            with pytest.raises(JobError) as info:
                c.client.wait(c.client.submit(circuit, [inp]), timeout=90)
            return str(info.value)

        proves()
        pool = _children(c.procs["cpu"].pid)
        t0 = time.monotonic()
        error = fails("hangs")
        assert 3 <= time.monotonic() - t0 < 30
        assert "circuit 'hangs'" in error and "witness generation exceeded 3 s" in error, error
        assert "<circuit 'hangs' witness>" in error and str(fakes["hang"]) not in error, error
        error = fails("crashes")
        assert "circuit 'crashes'" in error and "killed by SIGSEGV" in error, error
        assert "internal error" not in error and "Traceback" not in error, error
        proves()
        assert c.procs["cpu"].poll() is None and _children(c.procs["cpu"].pid) == pool
        proves("served")
        server_pids = _server_pids(served["mulchain"])
        assert len(server_pids) == 1 and str(_parent(server_pids[0])) in pool
        proves("served")
        assert _server_pids(served["mulchain"]) == server_pids
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.stop_all()
        server.stop()


def _children(pid):
    out = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        out += (task / "children").read_text().split()
    return sorted(out)


def _parent(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
