#!/usr/bin/env python3
"""Build benchmark circuits into bench/.cache/ (git-ignored).

Usage:  python bench/make_circuits.py [--sizes 10,14,16] [--merkle-depths 10,20] [--no-merkle]
                                      [--no-prove] [--setup native|snarkjs]
                                      [--curve bn128|bls12381]
        python bench/make_circuits.py --real [--native]      # production-shaped circuits
        python bench/make_circuits.py --circuits sha256_64,eddsa_poseidon [--native]

Needs node and the pinned tooling: ``npm ci --prefix tools/node``.
Standard library only.

For every size k in --sizes a multiplication chain ``mulchain_2p<k>`` is
built whose snarkjs Groth16 domainSize (smallest power of two >=
nConstraints + nPublic + 1) is exactly 2^k, plus ``merkle_d10`` and ``merkle_d20``:
Poseidon Merkle paths of depth 10 and 20 (circomlib Poseidon(2); --merkle-depths).  Each circuit directory
bench/.cache/<name>/ receives

    circuit.circom  circuit.r1cs  circuit.wasm  circuit.zkey  input.json
    witness.wtns    verification_key.json
    proof.json public.json  (snarkjs groth16 prove; skipped with --no-prove)

and bench/.cache/circuits.json lists them all (constraints, domain size,
public signal count, snarkjs prove wall time).

The zkey comes from one of two setups (--setup; default: snarkjs up to 2^16,
native above):

* snarkjs: ``snarkjs groth16 setup`` from a powers of tau (power 16, enough for a
  2^16 domain), generated once into bench/.cache/pot16_final.ptau (several minutes
  on 2 cores; pot16_bls12381_final.ptau for --curve bls12381) and reused, then a
  zkey beacon.  Deterministic: beacons instead of random contributions.
* native: ``python -m cuzk_tasks setup`` (seconds for 2^16, minutes for 2^20 on
  2 cores), a single-party setup with fresh random toxic waste: DEVELOPMENT AND
  BENCHMARKS ONLY, never a production key.  Needs no powers of tau.

--curve bls12381 compiles with ``circom --prime bls12381`` into directories named
``<name>_bls12381``.  Work already done is skipped (a zkey made by the other
setup is remade: the method is kept in setup.txt next to it).

Production-shaped circuits (issue 25), built from circomlib by --real (all of them) or
--circuits NAMES (any names below, also mulchain_2p<k> and merkle_d<D>), with the native
setup unless --setup snarkjs (dev keys; these are witness benchmarks):

* ``sha256_<n>``: circomlib Sha256(8n) over n deterministic bytes (bits MSB first per
  byte, signal ``in``); the 256 hash bits are the public outputs and are checked against
  hashlib.  --real builds sha256_64 (2 blocks, ~59k constraints, 2^16), sha256_512
  (9 blocks, ~266k, 2^19) and sha256_2048 (33 blocks, ~0.97M, 2^20: the big one; its
  circom compile and native setup take minutes and several GiB).
* ``merkle_d20``, ``merkle_d32``: the Poseidon(2) Merkle paths above.
* ``eddsa_poseidon``: circomlib EdDSAPoseidonVerifier() with a valid signature computed
  by bench/eddsa_input.py (BabyJubJub + Poseidon in Python from circomlib's constants).

--native also builds circom's C++ witness generator (``circom --c``, then ``make``; needs
g++, nasm, libgmp-dev, nlohmann-json3-dev) into <dir>/circuit_cpp/circuit, run as
``circuit input.json out.wtns`` (it reads circuit.dat beside it); its output is checked
byte-identical to snarkjs's witness.wtns; and its kept-running witness server
(``cuzk-tasks native-server``: <dir>/circuit_cpp/circuit.server), checked the same way.
The snarkjs reference proof is skipped above
2^--snarkjs-max-log (default 18: it takes minutes there).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE_REL = Path("bench") / ".cache"
CACHE = ROOT / CACHE_REL
NODE_MODULES_REL = Path("tools") / "node" / "node_modules"
SNARKJS = ["node", "--max-old-space-size=8192",
           str(ROOT / NODE_MODULES_REL / "snarkjs" / "cli.js")]
CIRCOM = ["node", str(ROOT / NODE_MODULES_REL / "circom2" / "cli.js")]
FIXTURE_CIRCUITS_REL = Path("tests") / "fixtures" / "circuits"

PTAU_POWER = 16
CURVE_NAMES = ("bn128", "bls12381")     # snarkjs / circom --prime names
SETUPS = ("native", "snarkjs")
NATIVE_ABOVE = 16                       # default: the native setup above 2^16
BEACON_PTAU = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
BEACON_ZKEY = "cafebabe000000000000000000000000000000000000000000000000deadbeef"
BEACON_ITER = "10"
#: what --real builds: production-shaped circuits (issue 25)
REAL_CIRCUITS = ("sha256_64", "sha256_512", "merkle_d20", "merkle_d32", "eddsa_poseidon",
                 "sha256_2048")

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[make_circuits {time.monotonic() - T0:7.1f}s] {msg}", flush=True)


def run(cmd, *, cwd=ROOT, quiet=True) -> float:
    """Run a command from the repo root; returns wall seconds."""
    t = time.monotonic()
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd,
                          capture_output=True, text=True)
    dt = time.monotonic() - t
    if proc.returncode != 0:
        sys.stderr.write(f"command failed (rc={proc.returncode}): "
                         f"{' '.join(map(str, cmd))}\n"
                         f"--- stdout\n{proc.stdout}\n--- stderr\n"
                         f"{proc.stderr}\n")
        raise SystemExit(1)
    if not quiet:
        for line in (proc.stdout + proc.stderr).splitlines():
            if line.strip():
                print("    " + line, flush=True)
    return dt


def snarkjs(*args, **kw) -> float:
    return run([*SNARKJS, *args], **kw)


def produce(target: Path, fn, what: str):
    """Call fn(tmp_path) unless target exists; then rename tmp -> target."""
    if target.exists():
        log(f"{what}: reuse {target.relative_to(ROOT)}")
        return None
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    log(f"{what} ...")
    t = time.monotonic()
    fn(tmp)
    os.replace(tmp, target)
    dt = time.monotonic() - t
    log(f"{what}: done in {dt:.1f}s")
    return dt


# --------------------------------------------------------------------- ptau
def ptau_path(curve: str) -> Path:
    suffix = "" if curve == "bn128" else f"_{curve}"
    return CACHE / f"pot{PTAU_POWER}{suffix}_final.ptau"


def ensure_ptau(curve: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    ptau = ptau_path(curve)
    p0 = ptau.with_name(ptau.name.replace("_final", "_0000"))
    p1 = ptau.with_name(ptau.name.replace("_final", "_0001"))
    if ptau.exists():
        log(f"ptau: reuse {ptau.relative_to(ROOT)}")
        return ptau
    produce(p0, lambda t: snarkjs("powersoftau", "new", curve,
                                  str(PTAU_POWER), t),
            f"ptau: powersoftau new {curve} {PTAU_POWER}")
    produce(p1, lambda t: snarkjs("powersoftau", "beacon", p0, t, BEACON_PTAU,
                                  BEACON_ITER, "-n=cuzk-tasks bench beacon"),
            "ptau: powersoftau beacon")
    produce(ptau, lambda t: snarkjs("powersoftau", "prepare", "phase2", p1, t),
            "ptau: prepare phase2 (the slow step)")
    p0.unlink(missing_ok=True)
    p1.unlink(missing_ok=True)
    return ptau


# --------------------------------------------------------------------- r1cs
def r1cs_header(path: Path) -> dict:
    """Parse the header section (type 1) of a circom .r1cs file."""
    data = path.read_bytes()
    assert data[:4] == b"r1cs", path
    _version, nsec = struct.unpack_from("<II", data, 4)
    off = 12
    for _ in range(nsec):
        stype, ssize = struct.unpack_from("<IQ", data, off)
        off += 12
        if stype == 1:
            (n8,) = struct.unpack_from("<I", data, off)
            o = off + 4 + n8
            (n_wires, n_out, n_pub_in, n_prv_in) = struct.unpack_from(
                "<IIII", data, o)
            (n_labels,) = struct.unpack_from("<Q", data, o + 16)
            (n_constraints,) = struct.unpack_from("<I", data, o + 24)
            return dict(nWires=n_wires, nOutputs=n_out, nPubInputs=n_pub_in,
                        nPrvInputs=n_prv_in, nLabels=n_labels,
                        nConstraints=n_constraints)
        off += ssize
    raise ValueError(f"no header section in {path}")


def domain_size(h: dict) -> int:
    need = h["nConstraints"] + h["nOutputs"] + h["nPubInputs"] + 1
    d = 1
    while d < need:
        d *= 2
    return d


# --------------------------------------------------------------------- circuits
def mulchain_source(n: int) -> str:
    return ("pragma circom 2.0.0;\n\n"
            'include "mulchain_template.circom";\n\n'
            f"// {n} constraints + 2 public + 1 = {n + 3}\n"
            f"component main {{public [b]}} = MulChain({n});\n")


MERKLE_TEMPLATE = """pragma circom 2.0.0;

include "circomlib/circuits/poseidon.circom";

// Poseidon(2) Merkle path of depth D: root = H(... H(H(leaf, s0) ...)).
// pathIndices[i] = 1 means the current node is the right child.
template MerklePath(D) {
    signal input leaf;
    signal input pathElements[D];
    signal input pathIndices[D];
    signal output root;

    signal cur[D + 1];
    signal left[D];
    signal right[D];
    component h[D];

    cur[0] <== leaf;
    for (var i = 0; i < D; i++) {
        pathIndices[i] * (1 - pathIndices[i]) === 0;
        left[i] <== cur[i] + pathIndices[i] * (pathElements[i] - cur[i]);
        right[i] <== cur[i] + pathElements[i] - left[i];
        h[i] = Poseidon(2);
        h[i].inputs[0] <== left[i];
        h[i].inputs[1] <== right[i];
        cur[i + 1] <== h[i].out;
    }
    root <== cur[D];
}

component main {public [leaf]} = MerklePath(%d);
"""


SHA256_TEMPLATE = """pragma circom 2.0.0;

include "circomlib/circuits/sha256/sha256.circom";

// SHA-256 of %d bytes (%d bits, MSB first per byte); the hash bits are the public output.
component main = Sha256(%d);
"""

EDDSA_SOURCE = """pragma circom 2.0.0;

include "circomlib/circuits/eddsaposeidon.circom";

// EdDSA-Poseidon signature verification over BabyJubJub (all inputs private).
component main = EdDSAPoseidonVerifier();
"""

# Merkle path bits: the first 20 as merkle_d10/d20 always had them, more for deeper paths
MERKLE_BITS = 0b0110101101_1011001101 | (0b101100111000101 << 20)


def sha256_message(n: int) -> bytes:
    """n deterministic, arbitrary bytes."""
    out = b"".join(hashlib.sha256(b"cuzk-tasks bench sha256 %d" % i).digest()
                   for i in range((n + 31) // 32))
    return out[:n]


def sha256_spec(n: int, setup, curve: str) -> dict:
    msg = sha256_message(n)
    bits = [str((b >> (7 - j)) & 1) for b in msg for j in range(8)]
    digest = hashlib.sha256(msg).digest()
    out_bits = [(b >> (7 - j)) & 1 for b in digest for j in range(8)]
    return dict(name=f"sha256_{n}", source=SHA256_TEMPLATE % (n, 8 * n, 8 * n),
                input={"in": bits}, expect_domain=None, expect_public=out_bits,
                description=f"circomlib Sha256 over {n} bytes", setup=setup or "native",
                curve=curve)


def eddsa_spec(setup, curve: str) -> dict:
    from eddsa_input import eddsa_poseidon_input   # bench/: beside this script
    inp = eddsa_poseidon_input(ROOT / NODE_MODULES_REL / "circomlib" / "circuits")
    return dict(name="eddsa_poseidon", source=EDDSA_SOURCE, input=inp, expect_domain=None,
                description="circomlib EdDSAPoseidonVerifier", setup=setup or "native",
                curve=curve)


def named_specs(names, setup=None, curve="bn128"):
    """Specs for circuit names: mulchain_2p<k>, merkle_d<D>, sha256_<bytes>, eddsa_poseidon.

    The production-shaped ones (merkle_d<D>, sha256_*, eddsa_poseidon) default to the native
    setup here."""
    if curve != "bn128":
        raise SystemExit("--circuits / --real build bn128 circuits only")
    specs = []
    for name in names:
        if name.startswith("mulchain_2p") and name[11:].isdigit():
            specs += build_specs([int(name[11:])], [], setup, curve)
        elif name.startswith("merkle_d") and name[8:].isdigit():
            specs += build_specs([], [int(name[8:])], setup or "native", curve)
        elif name.startswith("sha256_") and name[7:].isdigit():
            specs.append(sha256_spec(int(name[7:]), setup, curve))
        elif name == "eddsa_poseidon":
            specs.append(eddsa_spec(setup, curve))
        else:
            raise SystemExit(f"--circuits: unknown circuit {name!r}: expected mulchain_2p<k>, "
                             f"merkle_d<depth>, sha256_<bytes> or eddsa_poseidon")
    return specs


def setup_for(k: int, choice) -> str:
    """The setup of a circuit with a 2^k domain: --setup, else snarkjs up to 2^16."""
    method = choice or ("native" if k > NATIVE_ABOVE else "snarkjs")
    if method == "snarkjs" and k > PTAU_POWER:
        raise SystemExit(f"size {k} > ptau power {PTAU_POWER}: use --setup native")
    return method


def build_specs(sizes, merkle_depths, setup=None, curve="bn128"):
    specs = []
    suffix = "" if curve == "bn128" else f"_{curve}"
    for k in sizes:
        n = (1 << k) - 3      # nConstraints = N, nPublic = 2 -> N + 3 = 2^k
        if n < 1:
            raise SystemExit(f"size {k} too small")
        specs.append(dict(name=f"mulchain_2p{k}{suffix}", source=mulchain_source(n),
                          input={"a": "3", "b": "11"}, expect_domain=1 << k,
                          description=f"mulchain N={n}", setup=setup_for(k, setup),
                          curve=curve))
    for depth in merkle_depths:
        # deterministic, arbitrary field elements / bits
        elems = [str(1000003 * (i + 1) ** 3 + 17) for i in range(depth)]
        bits = [str((MERKLE_BITS >> i) & 1) for i in range(depth)]  # d10, d20: as before
        specs.append(dict(name=f"merkle_d{depth}{suffix}",
                          source=MERKLE_TEMPLATE % depth,
                          input={"leaf": "123456789", "pathElements": elems,
                                 "pathIndices": bits},
                          expect_domain=None,
                          description=f"Poseidon(2) Merkle path, depth {depth}",
                          setup=setup or "snarkjs", curve=curve))
    return specs


def wtns_values(path: Path, first: int, count: int) -> list:
    """Witness values first .. first+count-1 of a .wtns file (sections 1 and 2)."""
    data = path.read_bytes()
    assert data[:4] == b"wtns", path
    _version, nsec = struct.unpack_from("<II", data, 4)
    off, n8, values_at = 12, None, None
    for _ in range(nsec):
        stype, ssize = struct.unpack_from("<IQ", data, off)
        off += 12
        if stype == 1:
            (n8,) = struct.unpack_from("<I", data, off)
        elif stype == 2:
            values_at = off
        off += ssize
    return [int.from_bytes(data[values_at + i * n8:values_at + (i + 1) * n8], "little")
            for i in range(first, first + count)]


def circom(spec: dict, d_rel: Path, *targets: str) -> float:
    """circom the circuit into d_rel/build with the given output flags; wall seconds."""
    build = ROOT / d_rel / "build"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir()
    # circom2 runs under WASI: give it paths relative to the repo root.
    return run([*CIRCOM, d_rel / "circuit.circom", *targets, "--prime", spec["curve"],
                "-o", d_rel / "build", "-l", FIXTURE_CIRCUITS_REL, "-l", NODE_MODULES_REL])


def build_native(spec: dict, d: Path, d_rel: Path, have_cpp: bool) -> Path:
    """circom's C++ witness generator, built with make into d/circuit_cpp/circuit."""
    name, cpp, exe = spec["name"], d / "circuit_cpp", d / "circuit_cpp" / "circuit"
    if exe.exists():
        log(f"{name}: reuse {exe.relative_to(ROOT)}")
        return exe
    if not have_cpp:
        log(f"{name}: circom --c ...")
        dt = circom(spec, d_rel, "--c")
        shutil.rmtree(cpp, ignore_errors=True)
        shutil.move(str(d / "build" / "circuit_cpp"), str(cpp))
        shutil.rmtree(d / "build", ignore_errors=True)
        log(f"{name}: circom --c done in {dt:.1f}s")
    log(f"{name}: make (C++ witness generator; about a minute on 2 cores) ...")
    dt = run(["make", "-C", cpp, f"-j{os.cpu_count() or 1}"])
    log(f"{name}: make done in {dt:.1f}s")
    return exe


def build_witness_server(name: str, exe: Path, inp: Path, wtns: Path):
    """The generator's kept-running server (``cuzk-tasks native-server``), checked
    byte-identical to snarkjs's witness twice from one server process."""
    from cuzk_tasks.groth16.formats.circom_input import load_input_json
    from cuzk_tasks.groth16.native_server import build_server, usable_server
    from cuzk_tasks.groth16.native_witness import NativeWitnessGenerator

    if usable_server(str(exe), f"{exe}.dat"):
        log(f"{name}: reuse {exe.relative_to(ROOT)}.server")
    else:
        log(f"{name}: cuzk-tasks native-server (the witness server; a minute on 2 cores) ...")
        t = time.perf_counter()
        build_server(exe)
        log(f"{name}: native-server done in {time.perf_counter() - t:.1f}s")
    gen = NativeWitnessGenerator(exe)
    try:
        inputs = load_input_json(inp)
        for _ in range(2):
            if gen.calculate_wtns(inputs, str(inp)) != wtns.read_bytes():
                raise SystemExit(f"{name}: the witness server's .wtns differs from snarkjs's")
    finally:
        gen.close()
    log(f"{name}: the witness server's witnesses are byte-identical to snarkjs's")


def build_circuit(spec: dict, prove: bool, native: bool = False,
                  snarkjs_max_log: int = 99) -> dict:
    name = spec["name"]
    d = CACHE / name
    d_rel = CACHE_REL / name
    d.mkdir(parents=True, exist_ok=True)

    src = d / "circuit.circom"
    inp = d / "input.json"
    outputs = ["circuit.r1cs", "circuit.wasm", "circuit.zkey",
               "verification_key.json", "witness.wtns", "proof.json",
               "public.json"]
    new_input = json.dumps(spec["input"], indent=1) + "\n"
    if (not src.exists() or src.read_text() != spec["source"]
            or not inp.exists() or inp.read_text() != new_input):
        log(f"{name}: (re)writing circuit.circom / input.json")
        for o in outputs:
            (d / o).unlink(missing_ok=True)
        src.write_text(spec["source"])
        inp.write_text(new_input)

    r1cs, wasm = d / "circuit.r1cs", d / "circuit.wasm"
    have_cpp = (d / "circuit_cpp" / "Makefile").exists()
    if not (r1cs.exists() and wasm.exists()):
        with_c = native and not have_cpp
        log(f"{name}: circom compile{' (with --c)' if with_c else ''} ...")
        build = d / "build"
        dt = circom(spec, d_rel, "--r1cs", "--wasm", *(["--c"] if with_c else []))
        if with_c:
            shutil.rmtree(d / "circuit_cpp", ignore_errors=True)
            shutil.move(str(build / "circuit_cpp"), str(d / "circuit_cpp"))
            have_cpp = True
        shutil.copy(build / "circuit_js" / "circuit.wasm", wasm)
        shutil.copy(build / "circuit.r1cs", r1cs)   # r1cs last: marks done
        shutil.rmtree(build, ignore_errors=True)
        log(f"{name}: circom compile done in {dt:.1f}s")

    h = r1cs_header(r1cs)
    dom = domain_size(h)
    log(f"{name}: constraints={h['nConstraints']} wires={h['nWires']} "
        f"public={h['nOutputs'] + h['nPubInputs']} domainSize={dom}")
    if spec["expect_domain"] is not None and dom != spec["expect_domain"]:
        raise SystemExit(f"{name}: domainSize {dom} != "
                         f"{spec['expect_domain']}")

    zkey0 = d / "circuit_0000.zkey"
    zkey = d / "circuit.zkey"
    vk = d / "verification_key.json"
    method, marker = spec["setup"], d / "setup.txt"
    made_by = marker.read_text().split()[0] if marker.exists() else "snarkjs"
    if zkey.exists() and made_by != method:
        log(f"{name}: circuit.zkey was made by the {made_by} setup: remaking it ({method})")
        for o in ("circuit.zkey", "verification_key.json", "proof.json", "public.json"):
            (d / o).unlink(missing_ok=True)
    setup_s = None
    if not zkey.exists():
        if method == "native":
            # single-party, development only (see the docstring); seconds to minutes
            setup_s = produce(zkey, lambda t: run([sys.executable, "-m", "cuzk_tasks", "-v",
                                                   "setup", r1cs, t], quiet=False),
                              f"{name}: native setup (cuzk-tasks setup)")
        else:
            ptau = ensure_ptau(spec["curve"])
            setup_s = produce(zkey0, lambda t: snarkjs("groth16", "setup", r1cs, ptau, t),
                              f"{name}: groth16 setup") or 0.0
            setup_s += produce(zkey, lambda t: snarkjs("zkey", "beacon", zkey0, t,
                                                       BEACON_ZKEY, BEACON_ITER,
                                                       f"-n=cuzk-tasks {name} beacon"),
                               f"{name}: zkey beacon")
            zkey0.unlink(missing_ok=True)
        marker.write_text(f"{method} {setup_s:.3f}\n")
    else:
        log(f"{name}: reuse circuit.zkey")
    produce(vk, lambda t: snarkjs("zkey", "export", "verificationkey", zkey,
                                  t), f"{name}: export verification key")

    wtns = d / "witness.wtns"

    def _wtns(t):
        snarkjs("wtns", "calculate", wasm, inp, t)
        snarkjs("wtns", "check", r1cs, t)
    produce(wtns, _wtns, f"{name}: wtns calculate + check")
    if spec.get("expect_public"):
        want = spec["expect_public"]
        if wtns_values(wtns, 1, len(want)) != want:
            raise SystemExit(f"{name}: the witness's public outputs differ from the "
                             f"expected ones (hashlib)")
        log(f"{name}: public outputs match the expected values")
    native_exe = None
    if native:
        native_exe = build_native(spec, d, d_rel, have_cpp)
        out = d / "native_check.wtns"
        dt = run([native_exe, inp, out])
        same = out.read_bytes() == wtns.read_bytes()
        out.unlink()
        if not same:
            raise SystemExit(f"{name}: the C++ witness generator's .wtns differs from snarkjs's")
        log(f"{name}: C++ witness {dt:.2f}s, byte-identical to snarkjs's")
        build_witness_server(name, native_exe, inp, wtns)

    recorded = marker.read_text().split() if marker.exists() else [made_by]
    info = dict(name=name, description=spec["description"], curve=spec["curve"],
                setup=recorded[0], setup_s=float(recorded[1]) if len(recorded) > 1 else None,
                dir=str(d_rel), domainSize=dom,
                nPublic=h["nOutputs"] + h["nPubInputs"], **h)
    if native_exe is not None:
        info["native_witness"] = str(native_exe.relative_to(ROOT))
    proof, public = d / "proof.json", d / "public.json"
    if prove and dom > 1 << snarkjs_max_log:
        log(f"{name}: snarkjs reference proof skipped (domain > 2^{snarkjs_max_log})")
    elif prove:
        timing = d / "snarkjs_prove_s.txt"
        if not (proof.exists() and public.exists() and timing.exists()):
            log(f"{name}: snarkjs groth16 prove ...")
            dt = snarkjs("groth16", "prove", zkey, wtns, proof, public)
            snarkjs("groth16", "verify", vk, public, proof)
            timing.write_text(f"{dt:.3f}\n")
            log(f"{name}: snarkjs groth16 prove {dt:.1f}s (verified)")
        info["snarkjs_prove_s"] = float(timing.read_text())
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,14,16",
                    help="comma-separated log2 domain sizes (default 10,14,16)")
    ap.add_argument("--merkle-depths", default="10,20",
                    help="comma-separated Poseidon Merkle path depths (default 10,20)")
    ap.add_argument("--no-merkle", action="store_true",
                    help="skip the Poseidon Merkle circuit")
    ap.add_argument("--no-prove", action="store_true",
                    help="skip the snarkjs reference proof / timing")
    ap.add_argument("--setup", choices=SETUPS, default=None,
                    help="zkey setup (default: snarkjs up to 2^16, native above; "
                         "native is a single-party development setup)")
    ap.add_argument("--curve", choices=CURVE_NAMES, default="bn128",
                    help="circom --prime / snarkjs curve (default bn128)")
    ap.add_argument("--real", action="store_true",
                    help="build the production-shaped circuits: " + ",".join(REAL_CIRCUITS))
    ap.add_argument("--circuits", default=None,
                    help="build just these (comma-separated: mulchain_2p<k>, merkle_d<D>, "
                         "sha256_<bytes>, eddsa_poseidon) instead of --sizes/--merkle-depths")
    ap.add_argument("--native", action="store_true",
                    help="also build circom's C++ witness generator (circom --c + make)")
    ap.add_argument("--snarkjs-max-log", type=int, default=18,
                    help="skip the snarkjs reference proof above a 2^N domain (default 18)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    if not (ROOT / NODE_MODULES_REL / "snarkjs" / "cli.js").exists():
        print("snarkjs not installed: run  npm ci --prefix tools/node",
              file=sys.stderr)
        return 1
    infos = []
    depths = [] if args.no_merkle else [int(d) for d in args.merkle_depths.split(",") if d.strip()]
    if args.real or args.circuits:
        names = list(REAL_CIRCUITS) if args.real else []
        names += [c.strip() for c in (args.circuits or "").split(",") if c.strip()]
        specs = named_specs(list(dict.fromkeys(names)), args.setup, args.curve)
    else:
        specs = build_specs(sizes, depths, args.setup, args.curve)
    for i, spec in enumerate(specs, 1):
        t = time.monotonic()
        log(f"[{i}/{len(specs)}] {spec['name']}: {spec['description']}")
        infos.append(build_circuit(spec, prove=not args.no_prove, native=args.native,
                                   snarkjs_max_log=args.snarkjs_max_log))
        log(f"{spec['name']}: ready ({time.monotonic() - t:.1f}s)")

    manifest = CACHE / "circuits.json"
    old = {}
    if manifest.exists():
        try:
            old = {c["name"]: c for c in json.loads(manifest.read_text())}
        except (ValueError, KeyError, TypeError):
            old = {}
    old.update({i["name"]: i for i in infos})
    manifest.write_text(json.dumps(sorted(old.values(),
                                          key=lambda c: c["name"]),
                                   indent=1) + "\n")
    log(f"wrote {manifest.relative_to(ROOT)}")
    for i in infos:
        log(f"  {i['name']:>14}: {i['nConstraints']:7d} constraints, domain "
            f"2^{i['domainSize'].bit_length() - 1}, {i['nPublic']} public"
            + f", {i['setup']} setup"
            + (f" {i['setup_s']:.1f}s" if i.get("setup_s") is not None else "")
            + (f", snarkjs prove {i['snarkjs_prove_s']:.1f}s"
               if "snarkjs_prove_s" in i else ""))
    log("all done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
