#!/usr/bin/env python3
"""Build benchmark circuits into bench/.cache/ (git-ignored).

Usage:  python bench/make_circuits.py [--sizes 10,14,16] [--merkle-depths 10,20] [--no-merkle]
                                      [--no-prove] [--setup native|snarkjs]
                                      [--curve bn128|bls12381]

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
"""

from __future__ import annotations

import argparse
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
        bits = [str((0b0110101101_1011001101 >> i) & 1) for i in range(depth)]  # d10: as before
        specs.append(dict(name=f"merkle_d{depth}{suffix}",
                          source=MERKLE_TEMPLATE % depth,
                          input={"leaf": "123456789", "pathElements": elems,
                                 "pathIndices": bits},
                          expect_domain=None,
                          description=f"Poseidon(2) Merkle path, depth {depth}",
                          setup=setup or "snarkjs", curve=curve))
    return specs


def build_circuit(spec: dict, prove: bool) -> dict:
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
    if not (r1cs.exists() and wasm.exists()):
        log(f"{name}: circom compile ...")
        build = d / "build"
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir()
        # circom2 runs under WASI: give it paths relative to the repo root.
        dt = run([*CIRCOM, d_rel / "circuit.circom", "--r1cs", "--wasm",
                  "--prime", spec["curve"],
                  "-o", d_rel / "build", "-l", FIXTURE_CIRCUITS_REL,
                  "-l", NODE_MODULES_REL])
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

    recorded = marker.read_text().split() if marker.exists() else [made_by]
    info = dict(name=name, description=spec["description"], curve=spec["curve"],
                setup=recorded[0], setup_s=float(recorded[1]) if len(recorded) > 1 else None,
                dir=str(d_rel), domainSize=dom,
                nPublic=h["nOutputs"] + h["nPubInputs"], **h)
    proof, public = d / "proof.json", d / "public.json"
    if prove:
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
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    if not (ROOT / NODE_MODULES_REL / "snarkjs" / "cli.js").exists():
        print("snarkjs not installed: run  npm ci --prefix tools/node",
              file=sys.stderr)
        return 1
    infos = []
    depths = [] if args.no_merkle else [int(d) for d in args.merkle_depths.split(",") if d.strip()]
    for spec in build_specs(sizes, depths, args.setup, args.curve):
        t = time.monotonic()
        infos.append(build_circuit(spec, prove=not args.no_prove))
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
        log(f"  {i['name']:>14}: {i['nConstraints']:6d} constraints, domain "
            f"2^{i['domainSize'].bit_length() - 1}, {i['nPublic']} public"
            + f", {i['setup']} setup"
            + (f" {i['setup_s']:.1f}s" if i.get("setup_s") is not None else "")
            + (f", snarkjs prove {i['snarkjs_prove_s']:.1f}s"
               if "snarkjs_prove_s" in i else ""))
    log("all done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
