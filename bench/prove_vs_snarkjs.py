#!/usr/bin/env python3
"""Benchmark: our CPU prover against snarkjs and rapidsnark, same circuits, same run.

Every prover runs as a separate process on the same zkey and witness, so start-up and
zkey loading count for all of them.  Wall time is measured around the child, CPU time and
peak RSS come from wait4()'s rusage.  The machine is noisy: compare the ratios, measured
in the same run, with the order of the provers rotated from run to run.

    python bench/make_circuits.py            # once: builds bench/.cache circuits
    python bench/prove_vs_snarkjs.py [--runs 3] [--circuits mulchain_2p10,...]
                                     [--rapidsnark PATH] [--snarkjs-max-log 18]

The rapidsnark column (iden3's C++ prover, BN254 only) is skipped with a message when the
binary is absent (default ``../shared/tools/rapidsnark/prover`` beside the clone); snarkjs
is skipped for domains above 2^--snarkjs-max-log (it takes minutes there).  snarkjs
verifies every proof that was made (ours and rapidsnark's) with the circuit's vkey.

snarkjs/ours = snarkjs median / ours median (higher is better for us);
ours/rapidsnark = ours median / rapidsnark median (lower is better for us).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache"
SNARKJS = REPO / "tools" / "node" / "node_modules" / ".bin" / "snarkjs"
RAPIDSNARK = REPO.parent / "shared" / "tools" / "rapidsnark" / "prover"


def run_measured(cmd, env=None):
    """Run cmd; return (wall s, CPU s, peak RSS MiB, stderr).  Raises on failure."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    stderr = proc.stderr.read().decode(errors="replace")
    _, status, rusage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{stderr}")
    return elapsed, rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss / 1024.0, stderr


def circuit_info(zkey):
    """(nVars, domain size, curve) of a zkey, read in a child process: this process stays
    small because a child's peak RSS starts at its parent's (fork copies the page tables),
    and numpy alone would put ~25 MiB under every prover's figure."""
    code = ("import json, sys; from cuzk_tasks.groth16.formats.zkey import read_zkey_header; "
            "h = read_zkey_header(sys.argv[1]); "
            "print(json.dumps([h.n_vars, h.domain_size, h.curve.snarkjs_name]))")
    out = subprocess.run([sys.executable, "-c", code, str(zkey)], cwd=REPO, check=True,
                         capture_output=True, text=True)
    return tuple(json.loads(out.stdout))


def snarkjs_verifies(vkey, proof, public):
    out = subprocess.run([str(SNARKJS), "groth16", "verify", str(vkey), str(public), str(proof)],
                         capture_output=True, text=True)
    return out.returncode == 0


class Prover:
    """One prover's command line and its measurements for one circuit."""

    def __init__(self, name, argv, env=None):
        self.name, self.argv, self.env = name, argv, env
        self.wall, self.cpu, self.rss, self.inproc = [], [], [], []

    def run(self, zkey, wtns, proof, public):
        wall, cpu, rss, stderr = run_measured([*self.argv, str(zkey), str(wtns), str(proof),
                                               str(public)], self.env)
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.rss.append(rss)
        match = re.search(r"proved .* in (\d+) ms", stderr)  # ours, with -v
        if match:
            self.inproc.append(int(match.group(1)) / 1000.0)

    def summary(self):
        if not self.wall:
            return None
        return {"wall_s": statistics.median(self.wall), "cpu_s": statistics.median(self.cpu),
                "rss_mib": max(self.rss),
                "inproc_s": statistics.median(self.inproc) if self.inproc else None}


def bench_circuit(name, runs, rapidsnark, snarkjs_max_log):
    circuit_dir = CACHE / name
    zkey, wtns = circuit_dir / "circuit.zkey", circuit_dir / "witness.wtns"
    vkey = circuit_dir / "verification_key.json"
    if not zkey.exists() or not wtns.exists():
        raise SystemExit(f"{circuit_dir}: missing circuit.zkey/witness.wtns; run bench/make_circuits.py first")
    n_vars, domain, curve = circuit_info(zkey)
    # ours as a user runs it: Python caches its bytecode (a sandbox's PYTHONDONTWRITEBYTECODE
    # would add ~50 ms of compiling our modules to every start)
    user_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # ... and through what the cuzk-tasks console script runs (import main, call it), not
    # python -m, whose runpy adds ~5 ms that no installed user pays
    console_script = "import sys; from cuzk_tasks.cli import main; sys.exit(main())"
    provers = [Prover("ours", [sys.executable, "-c", console_script, "-v", "prove", "--backend",
                               "cpu"], user_env)]
    if domain.bit_length() - 1 <= snarkjs_max_log:
        provers.append(Prover("snarkjs", [str(SNARKJS), "groth16", "prove"]))
    if rapidsnark and curve == "bn128":
        provers.append(Prover("rapidsnark", [str(rapidsnark)]))
    verified = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i in range(runs):
            # rotate the order so drift on a noisy machine hits every prover alike
            for p in provers[i % len(provers):] + provers[:i % len(provers)]:
                p.run(zkey, wtns, tmp / f"proof_{p.name}.json", tmp / f"public_{p.name}.json")
            print(f"  {name} run {i + 1}/{runs}: "
                  + ", ".join(f"{p.name} {p.wall[-1]:.3f} s" for p in provers),
                  file=sys.stderr, flush=True)
        if not vkey.exists():
            subprocess.run([sys.executable, "-m", "cuzk_tasks", "vkey", str(zkey), str(vkey)],
                           check=True, cwd=REPO)
        publics = set()
        for p in provers:
            publics.add(json.dumps(json.loads((tmp / f"public_{p.name}.json").read_text())))
            if p.name != "snarkjs":
                verified[p.name] = snarkjs_verifies(vkey, tmp / f"proof_{p.name}.json",
                                                    tmp / f"public_{p.name}.json")
    return {"circuit": name, "curve": curve, "n_vars": n_vars, "domain": domain,
            "zkey_mib": zkey.stat().st_size / 2**20,
            **{p.name: p.summary() for p in provers}, "verified": verified,
            "same_public": len(publics) == 1}


def _cell(summary, key, fmt):
    return "—" if summary is None or summary.get(key) is None else format(summary[key], fmt)


def _ratio(a, b):
    return "—" if a is None or b is None else f"{a['wall_s'] / b['wall_s']:.2f}"


def print_table(rows, threads):
    print("| circuit | curve | nVars | domain | zkey MiB | ours s | ours CPU s | ours in-process s "
          "| snarkjs s | rapidsnark s | rapidsnark CPU s | snarkjs / ours | ours / rapidsnark "
          "| ours RSS MiB | rapidsnark RSS MiB | snarkjs RSS MiB | ours RSS / zkey "
          "| snarkjs verifies ours / rapidsnark's |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ours, sj, rs = r["ours"], r.get("snarkjs"), r.get("rapidsnark")
        checks = "/".join({True: "yes", False: "NO"}[r["verified"][k]] for k in ("ours", "rapidsnark")
                          if k in r["verified"])
        print(f"| {r['circuit']} | {r['curve']} | {r['n_vars']} | 2^{r['domain'].bit_length() - 1} "
              f"| {r['zkey_mib']:.1f} | {ours['wall_s']:.3f} | {ours['cpu_s']:.2f} "
              f"| {_cell(ours, 'inproc_s', '.3f')} | {_cell(sj, 'wall_s', '.3f')} "
              f"| {_cell(rs, 'wall_s', '.3f')} | {_cell(rs, 'cpu_s', '.2f')} "
              f"| {_ratio(sj, ours)} | {_ratio(ours, rs)} | {ours['rss_mib']:.0f} "
              f"| {_cell(rs, 'rss_mib', '.0f')} | {_cell(sj, 'rss_mib', '.0f')} "
              f"| {ours['rss_mib'] / r['zkey_mib']:.2f} "
              f"| {checks}{'' if r['same_public'] else ' (public signals differ!)'} |")
    print(f"\nWall s: median of the runs, each prove a separate process (start-up and zkey load "
          f"included).  CPU s: user + system of that process.  ours in-process s: read zkey and "
          f"witness, prove and self-verify, without interpreter start-up.  RSS: peak resident "
          f"set.  threads={threads}, cpus={os.cpu_count()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--circuits", default=None,
                        help="comma-separated names under bench/.cache (default: all)")
    parser.add_argument("--rapidsnark", default=str(RAPIDSNARK),
                        help="rapidsnark's prover binary (default: %(default)s)")
    parser.add_argument("--snarkjs-max-log", type=int, default=18,
                        help="skip snarkjs above this log2 domain size (default: %(default)s)")
    args = parser.parse_args()
    if not SNARKJS.exists():
        raise SystemExit("snarkjs not installed: run npm ci --prefix tools/node")
    rapidsnark = Path(args.rapidsnark)
    if not os.access(rapidsnark, os.X_OK):
        print(f"rapidsnark: no executable at {rapidsnark}; its columns are skipped "
              "(pass --rapidsnark PATH)", file=sys.stderr)
        rapidsnark = None
    names = args.circuits.split(",") if args.circuits else sorted(
        p.name for p in CACHE.iterdir() if (p / "circuit.zkey").exists()) if CACHE.exists() else []
    if not names:
        raise SystemExit("no benchmark circuits: run python bench/make_circuits.py first")
    threads = os.environ.get("CUZK_THREADS", str(os.cpu_count()))
    rows = [bench_circuit(name, args.runs, rapidsnark, args.snarkjs_max_log) for name in names]
    print_table(rows, threads)
    return 0 if all(all(r["verified"].values()) and r["same_public"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
