#!/usr/bin/env python3
"""Benchmark: our CPU prover against `snarkjs groth16 prove`, same circuits, same run.

Both provers run as separate processes on the same zkey and witness, so start-up
and zkey loading count for both.  Peak RSS comes from wait4()'s rusage of each
child.  The machine is noisy: compare the ratio, measured in the same run.

    python bench/make_circuits.py            # once: builds bench/.cache circuits
    python bench/prove_vs_snarkjs.py [--runs 3] [--circuits mulchain_10,...]

Ratio = snarkjs median / ours median (higher is better for us).
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


def run_measured(cmd):
    """Run cmd; return (seconds, peak RSS in MiB, stderr).  Raises on failure."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, rusage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{stderr}")
    return elapsed, rusage.ru_maxrss / 1024.0, stderr


def circuit_info(zkey):
    sys.path.insert(0, str(REPO))
    from cuzk_tasks.groth16.zkey import read_zkey_header

    header = read_zkey_header(zkey)
    return header.n_vars, header.domain_size


def verify_with_snarkjs(circuit_dir, proof, public, vkey_cache):
    if not vkey_cache.exists():
        subprocess.run([str(SNARKJS), "zkey", "export", "verificationkey", str(circuit_dir / "circuit.zkey"),
                        str(vkey_cache)], check=True, capture_output=True)
    out = subprocess.run([str(SNARKJS), "groth16", "verify", str(vkey_cache), str(public), str(proof)],
                         capture_output=True, text=True)
    return out.returncode == 0


def bench_circuit(name, runs, threads):
    circuit_dir = CACHE / name
    zkey, wtns = circuit_dir / "circuit.zkey", circuit_dir / "witness.wtns"
    if not zkey.exists() or not wtns.exists():
        raise SystemExit(f"{circuit_dir}: missing circuit.zkey/witness.wtns; run bench/make_circuits.py first")
    n_vars, domain = circuit_info(zkey)
    zkey_mib = zkey.stat().st_size / 2**20
    ours_t, ours_rss, theirs_t, theirs_rss, ours_inproc = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i in range(runs):
            # Alternate the order so drift on a noisy machine hits both sides alike.
            order = ("ours", "snarkjs") if i % 2 == 0 else ("snarkjs", "ours")
            for who in order:
                if who == "ours":
                    env_cmd = [sys.executable, "-m", "cuzk_tasks", "-v", "prove", "--backend", "cpu",
                               str(zkey), str(wtns), str(tmp / "proof_ours.json"), str(tmp / "public_ours.json")]
                    t, rss, stderr = run_measured(env_cmd)
                    match = re.search(r"proved .* in (\d+) ms", stderr)
                    ours_inproc.append(int(match.group(1)) / 1000.0 if match else float("nan"))
                    ours_t.append(t)
                    ours_rss.append(rss)
                else:
                    t, rss, _ = run_measured([str(SNARKJS), "groth16", "prove", str(zkey), str(wtns),
                                           str(tmp / "proof_sj.json"), str(tmp / "public_sj.json")])
                    theirs_t.append(t)
                    theirs_rss.append(rss)
            print(f"  {name} run {i + 1}/{runs}: ours {ours_t[-1]:.3f} s, snarkjs {theirs_t[-1]:.3f} s",
                  file=sys.stderr, flush=True)
        ok = verify_with_snarkjs(circuit_dir, tmp / "proof_ours.json", tmp / "public_ours.json",
                                 circuit_dir / "verification_key.json")
        same_public = json.loads((tmp / "public_ours.json").read_text()) == \
            json.loads((tmp / "public_sj.json").read_text())
    return {
        "circuit": name, "n_vars": n_vars, "domain": domain, "zkey_mib": zkey_mib,
        "snarkjs_s": statistics.median(theirs_t), "ours_s": statistics.median(ours_t),
        "ours_inproc_s": statistics.median(ours_inproc),
        "snarkjs_rss": max(theirs_rss), "ours_rss": max(ours_rss),
        "verified": ok and same_public,
    }


def print_table(rows, threads):
    header = ("| circuit | nVars | domain | zkey MiB | snarkjs s | ours s | ratio | ours in-process s "
              "| snarkjs RSS MiB "
              "| ours RSS MiB | ours RSS / zkey | snarkjs verifies ours |")
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['circuit']} | {r['n_vars']} | 2^{r['domain'].bit_length() - 1} | {r['zkey_mib']:.1f} "
              f"| {r['snarkjs_s']:.3f} | {r['ours_s']:.3f} | {r['snarkjs_s'] / r['ours_s']:.2f} "
              f"| {r['ours_inproc_s']:.3f} "
              f"| {r['snarkjs_rss']:.0f} | {r['ours_rss']:.0f} | {r['ours_rss'] / r['zkey_mib']:.2f} "
              f"| {'yes' if r['verified'] else 'NO'} |")
    print(f"\nsnarkjs s / ours s: median wall time of each prove as a separate process (start-up and "
          f"zkey load included); ratio = snarkjs / ours. ours in-process s: read zkey+witness, prove "
          f"and self-verify, without interpreter start-up. RSS: peak resident set of the process. "
          f"threads={threads}, cpus={os.cpu_count()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--circuits", default=None,
                        help="comma-separated names under bench/.cache (default: all)")
    args = parser.parse_args()
    if not SNARKJS.exists():
        raise SystemExit("snarkjs not installed: run npm ci --prefix tools/node")
    names = args.circuits.split(",") if args.circuits else sorted(
        p.name for p in CACHE.iterdir() if (p / "circuit.zkey").exists()) if CACHE.exists() else []
    if not names:
        raise SystemExit("no benchmark circuits: run python bench/make_circuits.py first")
    threads = os.environ.get("CUZK_THREADS", str(os.cpu_count()))
    rows = [bench_circuit(name, args.runs, threads) for name in names]
    print_table(rows, threads)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
