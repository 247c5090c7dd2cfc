#!/usr/bin/env python3
"""ETA accuracy: how far each submit's estimate is from when the job was done.

A redis-server, two device workers (CPU backend) and one CPU worker, all real processes,
proving real circuits: ``big`` (bench/.cache/sha256_64: circomlib's SHA-256 of 64 bytes,
2^16 domain) and ``small`` (bench/.cache/mulchain_2p14, 2^14 constraints); make them with
``python bench/make_circuits.py``.  A warm-up runs a few
jobs of each alone, so the estimates have samples.  Then a submitter sends ``--jobs`` jobs of
1 to ``--max-partitions`` partitions, a random circuit and a random priority (0, 5 or 9), at random (exponential)
intervals averaging ``--gap-s``, each with ``details=True``: the ETA it is told at submit.
A watcher notes when each is done.

Printed: the median and p90 of |actual - ETA| / actual over the jobs (actual: submit -> done
on the state store's clock, the job's submitted_at and finished_at), per priority too; the ETA's bias (median of (ETA - actual) /
actual); and the deadline admission, replayed on the measured jobs: for deadlines of 0.2 to
1.5 x each job's ETA, how many the create step would refuse (ETA x 0.5 > deadline,
_lib.lua ``misses``) and how many of those would have made it (actual <= deadline) -- the
count the admission must keep at 0.

Baseline in the same run: the naive estimate a caller could make without the service's --
its own partitions at the circuit's warm-up prove time, in rounds over the devices, nothing
for the work ahead -- scored the same way, so the ratio shows what counting the queue buys.

    python bench/eta.py [--jobs 60] [--gap-s 2.0] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import random
import shutil
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline import percentile  # noqa: E402  (bench/pipeline.py)
from soak import Worker  # noqa: E402  (bench/soak.py: a worker process in its own group)

FIX = REPO / "tests" / "fixtures"
CACHE = REPO / "bench" / ".cache"
CIRCUITS = {"big": CACHE / "sha256_64", "small": CACHE / "mulchain_2p14"}
PRIORITIES = (0, 5, 9)
ADMIT_FRACTION = 0.5  # _lib.lua ADMIT_FRACTION


def error_ratios(rows, key):
    return [abs(r["actual_s"] - r[key]) / r["actual_s"] for r in rows]


def admission(rows, key, rng):
    """Replay deadlines of 0.2-1.5 x ETA on the measured jobs: (refused, refused but would
    have made it, admitted but missed)."""
    refused = wrongly = missed = 0
    for r in rows:
        for _ in range(10):
            deadline = r[key] * rng.uniform(0.2, 1.5)
            if r[key] * ADMIT_FRACTION > deadline:
                refused += 1
                wrongly += r["actual_s"] <= deadline
            else:
                missed += r["actual_s"] > deadline
    return refused, wrongly, missed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--gap-s", type=float, default=2.0, help="mean seconds between submits")
    ap.add_argument("--warmup", type=int, default=3, help="jobs of each circuit, one at a time")
    ap.add_argument("--max-partitions", type=int, default=4, help="partitions per job: 1..this")
    ap.add_argument("--rows", help="write each job's circuit, priority, partitions, ETA, "
                                   "position and actual time here (JSON)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if shutil.which("redis-server") is None:
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    for d in CIRCUITS.values():
        if not (d / "circuit.zkey").exists():
            raise SystemExit(f"needs {d}: python bench/make_circuits.py")
    from cuzk_tasks.client import Client
    from cuzk_tasks.dev.local_redis import LocalRedis
    from cuzk_tasks.settings.config import load_settings

    rng = random.Random(args.seed)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="cuzk-eta-"))
    redis_server = LocalRedis()
    config = workdir / "cuzk.toml"
    config.write_text("".join(f'[circuits.{n}]\nkind = "eta-{n}"\nzkey = "{d / "circuit.zkey"}"\n'
                              f'wasm = "{d / "circuit.wasm"}"\n\n' for n, d in CIRCUITS.items()))
    env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_REDIS_URL=redis_server.url,
               CUZK_PREFIX="eta", CUZK_HOSTNAME="eta", CUZK_SPOOL_DIR=str(workdir / "spool"),
               CUZK_HEARTBEAT_INTERVAL_S="1", CUZK_HEARTBEAT_TTL_S="4", CUZK_THREADS="1",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    settings = load_settings(env=env)
    procs = [Worker("dev0", ["--device", "0", "--backend", "cpu"], env, workdir),
             Worker("dev1", ["--device", "1", "--backend", "cpu"], env, workdir),
             Worker("cpu", ["--cpu", "--concurrency", "2"], env, workdir)]
    client = Client(settings=settings)
    store = client.store
    inputs = {n: json.loads((d / "input.json").read_text()) for n, d in CIRCUITS.items()}
    try:
        deadline = time.monotonic() + 120
        while {w["role"] for w in store.all_workers() if w.get("online")} != {"device", "cpu"} \
                or len(store.live_device_workers()) < 2:
            if time.monotonic() > deadline:
                raise SystemExit(f"workers did not come up; logs in {workdir}")
            time.sleep(0.2)

        # warm-up: each circuit alone, so its estimates have samples; the naive baseline's
        # prove time per partition is what a caller timing these jobs would see
        naive_ms = {}
        for name in CIRCUITS:
            for _ in range(args.warmup):
                job = client.submit(name, [{"input": inputs[name]}] * 2)
                client.wait(job, timeout=300)
            est = store.redis.hgetall(store.keys.estimates(name))
            naive_ms[name] = float(est["prove_ms"]) + float(est["synth_ms"]) \
                + float(est["finalize_ms"])
            print(f"warm-up {name}: synth {float(est['synth_ms']):.0f} ms, prove "
                  f"{float(est['prove_ms']):.0f} ms, finalize {float(est['finalize_ms']):.0f} ms"
                  " per partition", flush=True)

        rows, lock, stop = [], threading.Lock(), threading.Event()

        def watcher():
            while not stop.is_set():
                with lock:
                    waiting = [r for r in rows if r.get("done_at") is None]
                for r in waiting:
                    job = store.get_job(r["job"])
                    if job and job["state"] in ("done", "failed", "cancelled"):
                        with lock:
                            r.update(done_at=time.monotonic(), state=job["state"],
                                     actual_s=float(job["finished_at"])
                                     - float(job["submitted_at"]))
                time.sleep(0.05)

        watch = threading.Thread(target=watcher, daemon=True)
        watch.start()
        for i in range(args.jobs):
            name = rng.choice(sorted(CIRCUITS))
            n = rng.randint(1, args.max_partitions)
            priority = rng.choice(PRIORITIES)
            t0 = time.monotonic()
            got = client.submit(name, [{"input": inputs[name]}] * n, priority=priority,
                                details=True)
            eta = got["eta"]
            with lock:
                rows.append({"job": got["job_id"], "circuit": name, "n": n, "priority": priority,
                             "submitted": t0, "eta_s": eta["eta_s"] if eta else None,
                             "position": eta["position"] if eta else None,
                             "naive_s": math.ceil(n / 2) * naive_ms[name] / 1000})
            time.sleep(rng.expovariate(1 / args.gap_s))
        end = time.monotonic() + 600
        while time.monotonic() < end:
            with lock:
                if all(r.get("done_at") is not None for r in rows):
                    break
            time.sleep(0.2)
        stop.set()
        watch.join()
    finally:
        for proc in procs:
            proc.stop()
        redis_server.stop()

    done = [r for r in rows if r.get("state") == "done" and r["eta_s"] is not None]
    print(f"\n{len(rows)} jobs submitted, {len(done)} done with an ETA "
          f"({sum(1 for r in rows if r.get('state') != 'done')} not done)")
    print("| estimate | jobs | median abs error | p90 abs error | median (ETA-actual)/actual |")
    print("|---|---|---|---|---|")
    for key, label in (("eta_s", "the service's ETA"), ("naive_s", "naive: own partitions only")):
        errs = error_ratios(done, key)
        bias = percentile([(r[key] - r["actual_s"]) / r["actual_s"] for r in done], 0.5)
        print(f"| {label} | {len(done)} | {percentile(errs, 0.5):.1%} | "
              f"{percentile(errs, 0.9):.1%} | {bias:+.1%} |")
    print("\nthe service's ETA by priority:")
    for p in PRIORITIES:
        sub = [r for r in done if r["priority"] == p]
        if sub:
            errs = error_ratios(sub, "eta_s")
            print(f"  priority {p}: {len(sub)} jobs, median {percentile(errs, 0.5):.1%}, "
                  f"p90 {percentile(errs, 0.9):.1%}, actual p50 "
                  f"{percentile([r['actual_s'] for r in sub], 0.5):.1f} s")
    print(f"smallest actual / ETA: {min(r['actual_s'] / r['eta_s'] for r in done):.2f} "
          f"(refusing below {ADMIT_FRACTION} x ETA turns away no job of this run that would "
          "have made it while this stays above it)")
    for key, label in (("eta_s", "the service's ETA"), ("naive_s", "naive")):
        refused, wrongly, missed = admission(done, key, random.Random(args.seed))
        print(f"admission replay ({label}; deadlines 0.2-1.5 x ETA, 10 per job): "
              f"{refused} refused, {wrongly} of them would have made it; "
              f"{missed} admitted that missed")
    if args.rows:
        pathlib.Path(args.rows).write_text(json.dumps(rows, indent=1))
    print(f"\nlogs: {workdir}")


if __name__ == "__main__":
    main()
