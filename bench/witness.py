#!/usr/bin/env python3
"""Benchmark witness generation against snarkjs and circom's C++ generator (issue 25).

For every circuit built by bench/make_circuits.py (default: the --real set that is
present), in the same run, with the order of the contenders rotated from repetition to
repetition, the median of --runs of:

* warm:    ``get_calculator(wasm).calculate(inputs)`` in this process, after a warm-up
           (module compiled, instance code cached: what a long-lived worker pays);
* cli:     wall time of ``python -m cuzk_tasks witness circuit.wasm input.json out.wtns``
           (a fresh process each time: imports, wasm compile and all);
* snarkjs: wall time of ``node snarkjs/cli.js wtns calculate circuit.wasm input.json out.wtns``;
* native:  wall time of circom's C++ generator ``circuit_cpp/circuit input.json out.wtns``
           where make_circuits.py --native built it;
* cli_native: wall time of ``python -m cuzk_tasks witness native:circuit_cpp/circuit ...``
           (the command line driving that generator: input checks, temp dir, read back;
           through its server where ``circuit_cpp/circuit.server`` is built);
* native_warm: ``NativeWitnessGenerator(binary).calculate(inputs)`` in this process after a
           warm-up: the service's native path, a worker's kept-running witness server
           (make_circuits.py --native builds it) answering witness after witness;
* proof:   the warm proof on the CPU backend (zkey loaded, one warm-up proof), in process,
           with the service's self-verification: the witness/prove ratio.

Every .wtns written (cli, native, and the warm witness's bytes once) is checked
byte-identical to snarkjs's from the same repetition; a mismatch stops the run.
Also reported: "first", the first calculate() of this process including the wasm compile.

Targets (issue 25, item 5), marked pass/fail: cli <= 0.5x snarkjs; warm <= 0.3x snarkjs;
warm <= proof from 2^14 constraints up; snarkjs / native path >= 5 at a 2^20 domain, where
the native path is the service's (native_warm; circom's own one-shot binary is reported
beside it).

    python bench/make_circuits.py --real --native       # once
    python bench/witness.py [--circuits sha256_64,...] [--runs 5] [--budget-s 600] [--json out.json]
                            [--no-prove] [--no-cli] [--no-snarkjs] [--no-native]
    python bench/witness.py --service [--service-circuit sha256_64] [--proofs 12]

--service (issue 25, item 6) measures the synthesize stage through the service instead:
proofs/s of a real local cluster (redis-server, one CPU worker that synthesizes, one device
worker with the CPU backend that proves, as bench/pipeline.py starts them) against the bare
library's proofs/s (witness then prove, in this process, same cores), with the mean
synthesize and prove times the partitions recorded.

The host is noisy (2 shared cores): the load average is printed beside every circuit and
kept in the JSON; compare ratios from one run, not absolute times across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache"
SNARKJS_CLI = REPO / "tools" / "node" / "node_modules" / "snarkjs" / "cli.js"
DEFAULT_CIRCUITS = ("sha256_64", "sha256_512", "merkle_d20", "merkle_d32", "eddsa_poseidon",
                    "sha256_2048")
CONTENDERS = ("warm", "cli", "snarkjs", "native", "cli_native", "native_warm", "proof")

# targets, issue 25 item 5
CLI_MAX = 0.5           # cli / snarkjs
WARM_MAX = 0.3          # warm / snarkjs
WARM_PROOF_FROM = 1 << 14   # constraints: warm witness <= warm proof from here up
NATIVE_MIN = 5.0        # snarkjs / native, at a 2^20 domain
NATIVE_AT_DOMAIN = 1 << 20


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def wall(cmd, env=None) -> float:
    t = time.perf_counter()
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed (rc={proc.returncode}):\n"
                         f"{proc.stderr[-4000:]}")
    return dt


def r1cs_header(path):
    sys.path.insert(0, str(REPO / "bench"))
    from make_circuits import domain_size, r1cs_header as header
    h = header(pathlib.Path(path))
    return h, domain_size(h)


class Circuit:
    def __init__(self, name, args, tmp):
        self.name, self.dir = name, CACHE / name
        self.wasm, self.input = self.dir / "circuit.wasm", self.dir / "input.json"
        self.zkey = self.dir / "circuit.zkey"
        for p in (self.wasm, self.input, self.dir / "circuit.r1cs"):
            if not p.exists():
                raise SystemExit(f"{name}: {p} missing: run bench/make_circuits.py --circuits {name}")
        self.header, self.domain = r1cs_header(self.dir / "circuit.r1cs")
        exe = self.dir / "circuit_cpp" / "circuit"
        self.native = exe if exe.exists() and not args.no_native else None
        self.served = bool(self.native and (exe.parent / "circuit.server").exists())
        self.out = {c: pathlib.Path(tmp) / f"{name}.{c}.wtns" for c in CONTENDERS}
        self.times = {c: [] for c in CONTENDERS}
        self.args = args

    def contenders(self):
        a = self.args
        return [c for c, on in (("warm", True), ("cli", not a.no_cli),
                                ("snarkjs", not a.no_snarkjs), ("native", self.native),
                                ("cli_native", self.native and not a.no_cli),
                                ("native_warm", self.served),
                                ("proof", not a.no_prove and self.zkey.exists())) if on]


def run_circuit(c: Circuit, args):
    from cuzk_tasks.groth16.witness import get_calculator, load_input_json
    from cuzk_tasks.groth16.formats.wtns import wtns_bytes

    inputs = load_input_json(c.input)
    t = time.perf_counter()
    wc = get_calculator(c.wasm)
    values = wc.calculate(inputs, str(c.input))
    first = time.perf_counter() - t
    warm_bytes = wtns_bytes(values, wc.prime)
    print(f"  {c.name}: first in-process calculate (compile included) {first:.2f}s; "
          f"contenders {', '.join(c.contenders())}", flush=True)

    zkey = backend = None
    if "proof" in c.contenders():
        from cuzk_tasks.groth16 import prove, read_zkey
        from cuzk_tasks.groth16.backends.select import get_backend
        zkey, backend = read_zkey(str(c.zkey)), get_backend("cpu")
        t = time.perf_counter()
        prove(zkey, values, backend=backend)      # warm-up: page the zkey in
        print(f"  {c.name}: warm-up proof {time.perf_counter() - t:.2f}s", flush=True)

    native_gen = None
    if "native_warm" in c.contenders():
        from cuzk_tasks.groth16.native_witness import NativeWitnessGenerator

        native_gen = NativeWitnessGenerator(c.native)
        if native_gen.server_path is None:
            raise SystemExit(f"{c.name}: {c.native}.server is stale: rerun make_circuits.py --native")
        t = time.perf_counter()
        native_bytes = wtns_bytes(native_gen.calculate(inputs, str(c.input)), wc.prime)
        print(f"  {c.name}: first native_warm calculate (server start included) "
              f"{time.perf_counter() - t:.2f}s", flush=True)

    python = [sys.executable, "-m", "cuzk_tasks", "witness"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    names = c.contenders()
    t_start = time.monotonic()
    for rep in range(args.runs):
        if rep and args.budget_s and time.monotonic() - t_start > args.budget_s:
            print(f"  {c.name}: --budget-s {args.budget_s:.0f} spent: {rep} runs", flush=True)
            break
        order = names[rep % len(names):] + names[:rep % len(names)]
        for who in order:
            out = c.out[who]
            out.unlink(missing_ok=True)
            if who == "warm":
                t = time.perf_counter()
                values = wc.calculate(inputs, str(c.input))
                dt = time.perf_counter() - t
            elif who == "native_warm":
                t = time.perf_counter()
                native_values = native_gen.calculate(inputs, str(c.input))
                dt = time.perf_counter() - t
                native_bytes = wtns_bytes(native_values, wc.prime)
            elif who == "proof":
                t = time.perf_counter()
                prove(zkey, values, backend=backend)
                dt = time.perf_counter() - t
            elif who == "cli":
                dt = wall([*python, c.wasm, c.input, out], env=env)
            elif who == "cli_native":
                dt = wall([*python, f"native:{c.native}", c.input, out], env=env)
            elif who == "snarkjs":
                dt = wall(["node", SNARKJS_CLI, "wtns", "calculate", c.wasm, c.input, out])
            else:
                dt = wall([c.native, c.input, out])
            c.times[who].append(dt)
        # byte-identical to snarkjs's witness of this repetition (or make_circuits' one)
        ref_path = c.out["snarkjs"] if "snarkjs" in names else c.dir / "witness.wtns"
        ref = ref_path.read_bytes()
        if rep == 0 and warm_bytes != ref:
            raise SystemExit(f"{c.name}: the in-process witness differs from snarkjs's")
        if native_gen is not None and native_bytes != ref:
            raise SystemExit(f"{c.name}: the native_warm witness differs from snarkjs's "
                             f"(repetition {rep + 1})")
        for who in ("cli", "native", "cli_native"):
            if who in names and c.out[who].read_bytes() != ref:
                raise SystemExit(f"{c.name}: the {who} witness differs from snarkjs's "
                                 f"(repetition {rep + 1})")
        print(f"  {c.name}: rep {rep + 1}/{args.runs}: " + ", ".join(
            f"{w} {c.times[w][-1]:.3f}s" for w in names) + f"  (load {load()})", flush=True)
    if native_gen is not None:
        native_gen.close()  # its server holds the circuit's memory
    return first


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(ok):
    return "n/a" if ok is None else ("pass" if ok else "FAIL")


def summarize(c: Circuit, first, load_before, load_after):
    med = {w: statistics.median(v) if v else None for w, v in c.times.items()}
    n = c.header["nConstraints"]
    r = {"circuit": c.name, "constraints": n, "wires": c.header["nWires"],
         "domain_log2": c.domain.bit_length() - 1, "first_calculate_s": first,
         "median_s": med, "samples_s": c.times, "runs": len(c.times["warm"]),
         "load_before": load_before, "load_after": load_after}
    r["cli_over_snarkjs"] = ratio(med["cli"], med["snarkjs"])
    r["cli_native_over_snarkjs"] = ratio(med["cli_native"], med["snarkjs"])
    r["warm_over_snarkjs"] = ratio(med["warm"], med["snarkjs"])
    r["snarkjs_over_native"] = ratio(med["snarkjs"], med["native"])
    r["snarkjs_over_native_warm"] = ratio(med["snarkjs"], med["native_warm"])
    r["warm_over_proof"] = ratio(med["warm"], med["proof"])
    r["targets"] = {
        "cli<=0.5x snarkjs": verdict(None if r["cli_over_snarkjs"] is None
                                     else r["cli_over_snarkjs"] <= CLI_MAX),
        "cli native:<=0.5x snarkjs": verdict(None if r["cli_native_over_snarkjs"] is None
                                             else r["cli_native_over_snarkjs"] <= CLI_MAX),
        "warm<=0.3x snarkjs": verdict(None if r["warm_over_snarkjs"] is None
                                      else r["warm_over_snarkjs"] <= WARM_MAX),
        "warm<=proof": verdict(None if r["warm_over_proof"] is None or n < WARM_PROOF_FROM
                               else r["warm_over_proof"] <= 1.0),
        "native path>=5x snarkjs @2^20": verdict(
            None if r["snarkjs_over_native_warm"] is None or c.domain < NATIVE_AT_DOMAIN
            else r["snarkjs_over_native_warm"] >= NATIVE_MIN),
    }
    return r


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def print_table(results):
    print("\n| circuit | constraints | domain | first s | warm s | cli s | snarkjs s | native s "
          "| cli native: s | native warm s | proof s | cli/snarkjs | cli native:/snarkjs "
          "| warm/snarkjs | snarkjs/native | snarkjs/native warm | warm/proof | load (1/5/15 min) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        m = r["median_s"]
        print(f"| {r['circuit']} | {r['constraints']} | 2^{r['domain_log2']} | "
              f"{fmt(r['first_calculate_s'])} | {fmt(m['warm'])} | {fmt(m['cli'])} | "
              f"{fmt(m['snarkjs'])} | {fmt(m['native'])} | {fmt(m['cli_native'])} | "
              f"{fmt(m['native_warm'])} | "
              f"{fmt(m['proof'])} | {fmt(r['cli_over_snarkjs'], '.2f')} | "
              f"{fmt(r['cli_native_over_snarkjs'], '.2f')} | {fmt(r['warm_over_snarkjs'], '.2f')} | "
              f"{fmt(r['snarkjs_over_native'], '.1f')} | {fmt(r['snarkjs_over_native_warm'], '.1f')} | "
              f"{fmt(r['warm_over_proof'], '.2f')} | "
              f"{r['load_before']} -> {r['load_after']} |")
    names = list(results[0]["targets"]) if results else []
    print("\nTargets (issue 25): " + "; ".join(names))
    print("\n| circuit | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for r in results:
        print(f"| {r['circuit']} | " + " | ".join(r["targets"][k] for k in names) + " |")


# ------------------------------------------------------------------ --service (item 6)
def bare_library(c: Circuit, proofs: int):
    """proofs/s of witness + prove in this process (warm), and the mean of each."""
    from cuzk_tasks.groth16 import prove, read_zkey
    from cuzk_tasks.groth16.backends.select import get_backend
    from cuzk_tasks.groth16.witness import get_calculator, load_input_json

    inputs, wc = load_input_json(c.input), get_calculator(c.wasm)
    zkey, backend = read_zkey(str(c.zkey)), get_backend("cpu")
    prove(zkey, wc.calculate(inputs), backend=backend)   # warm-up
    tw = tp = 0.0
    t0 = time.perf_counter()
    for _ in range(proofs):
        t = time.perf_counter()
        values = wc.calculate(inputs)
        tw += time.perf_counter() - t
        t = time.perf_counter()
        prove(zkey, values, backend=backend)
        tp += time.perf_counter() - t
    total = time.perf_counter() - t0
    return {"proofs": proofs, "wall_s": total, "proofs_per_s": proofs / total,
            "witness_mean_s": tw / proofs, "prove_mean_s": tp / proofs}


def through_service(c: Circuit, proofs: int, per_job: int):
    """proofs/s through a real local cluster: redis-server, a CPU worker, a device worker."""
    from cuzk_tasks.client import Client
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.dev.demo import ProcessGroup
    from cuzk_tasks.dev.local_redis import LocalRedis

    sys.path.insert(0, str(REPO / "bench"))
    from pipeline import wait_jobs

    with LocalRedis() as redis:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="cuzk-bench-witness-service-"))
        (workdir / "spool").mkdir()
        config = workdir / "cuzk.toml"
        config.write_text(
            f'redis_url = "{redis.url}"\nprefix = "benchwit"\n'
            f'spool_dir = "{workdir / "spool"}"\n'
            f'allowed_input_roots = ["{c.dir}"]\n'
            f'[circuits.{c.name}]\nkind = "{c.name}"\nzkey = "{c.zkey}"\nwasm = "{c.wasm}"\n')
        env = dict(os.environ, CUZK_CONFIG=str(config),
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", ""))
                                              if p))
        for name in ("CUZK_REDIS_URL", "CUZK_BROKER_URL", "CUZK_RESULT_BACKEND", "CUZK_STATE_URL"):
            env.pop(name, None)
        procs = ProcessGroup(workdir)
        python = [sys.executable, "-m", "cuzk_tasks", "worker", "--loglevel", "WARNING"]
        procs.start("cpu", python + ["--cpu", "--concurrency", "1"], env)
        procs.start("dev0", python + ["--device", "0", "--backend", "cpu"], env)
        try:
            client = Client(settings=load_settings(config, env={}))
            deadline = time.monotonic() + 120
            while len(client.store.live_device_workers()) < 1:
                procs.check_alive()
                if time.monotonic() > deadline:
                    raise SystemExit(f"workers did not come up; logs in {workdir}")
                time.sleep(0.2)
            part = {"input_ref": str(c.input)}
            print(f"  service: warm-up job (logs in {workdir}) ...", flush=True)
            wait_jobs(client, [client.submit(c.name, [part] * 2)], timeout_s=1800)
            jobs = [client.submit(c.name, [part] * per_job)
                    for _ in range(max(1, proofs // per_job))]
            t0 = time.time()
            wait_jobs(client, jobs, timeout_s=3600)
            wall_s = time.time() - t0
            parts = [client.store.get_partition(j, i) for j in jobs for i in range(per_job)]
        finally:
            procs.stop()
    synth = [float(p["synth_ms"]) / 1000 for p in parts if p.get("synth_ms")]
    gpu = [float(p["t_prove_end"]) - float(p["t_prove_start"]) for p in parts
           if p.get("t_prove_end") and p.get("t_prove_start")]
    return {"proofs": len(parts), "wall_s": wall_s, "proofs_per_s": len(parts) / wall_s,
            "synth_mean_s": statistics.mean(synth) if synth else None,
            "prove_mean_s": statistics.mean(gpu) if gpu else None}


def service_mode(args):
    with tempfile.TemporaryDirectory() as tmp:
        c = Circuit(args.service_circuit, args, tmp)
    if not c.zkey.exists():
        raise SystemExit(f"{c.name}: no circuit.zkey")
    print(f"{c.name}: {c.header['nConstraints']} constraints, {os.cpu_count()} cores, "
          f"load {load()}", flush=True)
    la = load()
    bare = bare_library(c, args.proofs)
    print(f"  bare library: {bare['proofs_per_s']:.3f} proofs/s (witness {bare['witness_mean_s']:.2f}s"
          f" + prove {bare['prove_mean_s']:.2f}s)  (load {load()})", flush=True)
    svc = through_service(c, args.proofs, args.per_job)
    lb = load()
    print(f"\n| {c.name} | proofs | wall s | proofs/s | synthesize mean s | prove mean s | load |")
    print("|---|---:|---:|---:|---:|---:|---|")
    print(f"| bare library (in process) | {bare['proofs']} | {bare['wall_s']:.1f} | "
          f"{bare['proofs_per_s']:.3f} | {bare['witness_mean_s']:.2f} | {bare['prove_mean_s']:.2f} | {la} |")
    print(f"| service (cpu + device worker) | {svc['proofs']} | {svc['wall_s']:.1f} | "
          f"{svc['proofs_per_s']:.3f} | {fmt(svc['synth_mean_s'], '.2f')} | "
          f"{fmt(svc['prove_mean_s'], '.2f')} (prove) | {lb} |")
    print(f"\nservice / bare library: {svc['proofs_per_s'] / bare['proofs_per_s']:.2f}x")
    result = {"circuit": c.name, "cores": os.cpu_count(), "bare": bare, "service": svc,
              "load_before": la, "load_after": lb}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--circuits", default=None,
                    help="comma-separated bench/.cache circuits (default: those of "
                         + ",".join(DEFAULT_CIRCUITS) + " that are built)")
    ap.add_argument("--runs", type=int, default=5, help="repetitions per contender (median)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop repeating a circuit once its runs took this long (at least one "
                         "run; for the big circuits on a slow path)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--no-prove", action="store_true", help="skip the warm proof")
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--no-snarkjs", action="store_true")
    ap.add_argument("--no-native", action="store_true")
    ap.add_argument("--service", action="store_true",
                    help="item 6: proofs/s through a local cluster vs the bare library")
    ap.add_argument("--service-circuit", default="sha256_64")
    ap.add_argument("--proofs", type=int, default=12, help="--service: proofs per side")
    ap.add_argument("--per-job", type=int, default=4, help="--service: partitions per job")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.service:
        return service_mode(args)
    if args.circuits:
        names = [n.strip() for n in args.circuits.split(",") if n.strip()]
    else:
        names = [n for n in DEFAULT_CIRCUITS if (CACHE / n / "circuit.r1cs").exists()]
        if not names:
            raise SystemExit("no circuits built: run bench/make_circuits.py --real")
    print(f"{len(names)} circuit(s), {args.runs} runs each, {os.cpu_count()} cores, "
          f"load {load()}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="cuzk-bench-witness-") as tmp:
        for name in names:
            c = Circuit(name, args, tmp)
            la = load()
            first = run_circuit(c, args)
            results.append(summarize(c, first, la, load()))
            for p in c.out.values():
                p.unlink(missing_ok=True)
            if args.json:   # after every circuit: a long run interrupted keeps its results
                pathlib.Path(args.json).write_text(json.dumps(
                    {"cores": os.cpu_count(), "runs": args.runs, "results": results},
                    indent=1) + "\n")
    print_table(results)
    if args.json:
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
