#!/usr/bin/env python3
"""Groth16 verification on the native pairing vs the pure-Python reference (issue 13).

    python bench/pairing.py [--runs N]

In one run: for a BN254 and a BLS12-381 fixture proof, the median of N warm
``verifier.verify`` calls (the whole call: JSON parsing, subgroup checks from their cache,
vk_x, the pairing check) on the reference pairing and on the native core, and their
ratio (the fastest native call too: this machine is shared and noisy); then the warm in-process prove of tests/fixtures/mulchain_1k (1,000 constraints)
with its self-verification on either pairing, and without it.  The native core is single-threaded in the
pairing; set CUZK_THREADS=1 to time the prove on one thread too.
"""
import argparse
import contextlib
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuzk_tasks.groth16.backends import native
from cuzk_tasks.groth16 import prover, verifier
from cuzk_tasks.groth16.formats.wtns import read_wtns  # noqa: E402
from cuzk_tasks.groth16.formats.zkey import read_zkey  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
VERIFY_FIXTURES = ["poseidon", "mulchain", "bls12381/poseidon", "bls12381/mulchain"]


def times_ms(fn, runs):
    fn()  # warm: caches, page faults, the key's e(alpha, beta)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def median_ms(fn, runs):
    return statistics.median(times_ms(fn, runs))


@contextlib.contextmanager
def reference_only():
    """verify as if the native core did not load: the reference pairing path."""
    available = native.available
    native.available = lambda: False
    try:
        yield
    finally:
        native.available = available


def bench_verify(runs):
    print("| fixture | curve | public inputs | reference verify ms | native verify ms | "
          "native fastest ms | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in VERIFY_FIXTURES:
        d = FIXTURES / name
        vkey, public, proof = (json.loads((d / f).read_text())
                               for f in ("verification_key.json", "public.json", "proof.json"))

        def call():
            assert verifier.verify(vkey, public, proof)

        with reference_only():
            ref = median_ms(call, max(3, runs // 10))
        native_times = times_ms(call, runs)
        nat = statistics.median(native_times)
        print(f"| {name} | {vkey['curve']} | {len(public)} | {ref:.1f} | {nat:.2f} | "
              f"{min(native_times):.2f} | {ref / nat:.0f} |")


def bench_prove(runs):
    d = FIXTURES / "mulchain_1k"
    zkey = read_zkey(d / "circuit.zkey")
    witness = read_wtns(d / "witness.wtns", expected_length=zkey.n_vars)
    with_verify = median_ms(lambda: prover.prove(zkey, witness, verify=True), runs)
    without = median_ms(lambda: prover.prove(zkey, witness, verify=False), runs)
    with reference_only():
        with_ref = median_ms(lambda: prover.prove(zkey, witness, verify=True), runs)
    print()
    print(f"mulchain_1k ({zkey.n_vars} vars), warm in-process prove, threads="
          f"{native.default_threads()}, median of {runs}:")
    print(f"  with self-verification, native pairing    {with_verify:.1f} ms")
    print(f"  with self-verification, reference pairing {with_ref:.1f} ms")
    print(f"  without self-verification                 {without:.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    bench_verify(args.runs)
    bench_prove(max(5, args.runs // 5))


if __name__ == "__main__":
    main()
