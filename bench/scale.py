#!/usr/bin/env python3
"""Scale curve: N device workers on simulated hosts, each partition T ms of device time.

For each N (default 1, 4, 16, 64) it starts a fresh set of real processes against one
redis-server: N device workers, each on its own simulated host (``CUZK_HOSTNAME=sim<i>``,
device 0), whose prover is the bench busy-wait in sleep mode (bench/busywait.py: the host
thread blocks T ms, as it does while a GPU computes, F = 0), and C CPU workers (synthesize
reads a fixture .wtns, finalize stores a stand-in proof).  It queues P partitions per device
and reports, for the saturated run:

* per-device duty cycle = (partitions proved there x T) / (its first gpu_start .. last
  gpu_end): min, median, max over the devices;
* Redis commands per partition (INFO commandstats, all commands of the run);
* Redis CPU seconds per 1,000 partitions (INFO cpu, user + sys);
* throughput, and the ideal N x 1000 / T partitions/s.

Baseline in the same run: N = 1, against which the cost per partition at larger N is given
as a ratio (flat = the state store's cost does not grow with the fleet).

    python bench/scale.py [--devices 1,4,16,64] [--gpu-ms 50] [--per-device 40] [--cpu-workers 2]

On a 2-core machine the CPU side (2 stage tasks per partition) and the workers' own
processes share the two cores with Redis: say so when reading the 64-device row.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cuzk_tasks.client import Client  # noqa: E402
from cuzk_tasks.config import load_settings  # noqa: E402
from cuzk_tasks.demo import ProcessGroup  # noqa: E402
from cuzk_tasks.local_redis import LocalRedis  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "mulchain"


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def redis_totals(client):
    stats = client.info("commandstats")
    calls = sum(int(v["calls"]) for v in stats.values())
    cpu = client.info("cpu")
    return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def run(n, args, redis_url, workdir):
    prefix = f"scale{n}"
    config = workdir / f"cuzk-{n}.toml"
    config.write_text(
        f'redis_url = "{redis_url}"\nprefix = "{prefix}"\nspool_dir = "{workdir / "spool"}"\n'
        f'allowed_input_roots = ["{FIXTURE}"]\n'
        f'cpu_queue = "scale{n}.cpu"\ndevice_queue_pattern = "scale{n}.dev.{{host}}.{{device}}"\n'
        "heartbeat_interval_s = 1.0\nheartbeat_ttl_s = 5.0\n\n"
        f'[circuits.mulchain]\nkind = "bench-scale"\nzkey = "{FIXTURE / "circuit.zkey"}"\n'
        f'wasm = "{FIXTURE / "circuit.wasm"}"\n')
    env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_PROVER="busywait:BusyWaitProver",
               CUZK_BENCH_BUSYWAIT=f"{args.gpu_ms},0,sleep",
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "bench"),
                                           os.environ.get("PYTHONPATH", "")]))
    for name in ("CUZK_REDIS_URL", "CUZK_BROKER_URL", "CUZK_RESULT_BACKEND", "CUZK_STATE_URL",
                 "CUZK_HOSTNAME"):
        env.pop(name, None)
    procs = ProcessGroup(workdir)
    python = [sys.executable, "-m", "cuzk_tasks", "worker", "--loglevel", "WARNING"]
    try:
        for c in range(args.cpu_workers):
            procs.start(f"cpu{n}-{c}", python + ["--cpu", "--concurrency", "2"],
                        dict(env, CUZK_HOSTNAME=f"simcpu{c}"))
        for i in range(n):
            procs.start(f"dev{n}-{i}", python + ["--device", "0", "--backend", "cpu"],
                        dict(env, CUZK_HOSTNAME=f"sim{i}"))
        client = Client(settings=load_settings(config, env={}))
        deadline = time.monotonic() + 60 + 3 * n
        while len(client.store.live_device_workers()) < n:
            procs.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"{n} device workers did not come up; logs in {workdir}")
            time.sleep(0.2)
        time.sleep(2)  # the last ones' pool processes fork
        # the fleet's idle traffic (heartbeats, the consumers' polling, the sweepers' reads),
        # measured with no job in flight: what N workers cost Redis per second doing nothing
        idle0, idle_cpu0 = redis_totals(client.store.redis)
        time.sleep(args.idle_s)
        calls0, cpu0 = redis_totals(client.store.redis)
        idle_rate = (calls0 - idle0) / args.idle_s
        idle_cpu_rate = (cpu0 - idle_cpu0) / args.idle_s
        witness = {"witness_ref": str(FIXTURE / "witness.wtns")}
        total = n * args.per_device
        t0 = time.monotonic()
        jobs = [client.submit("mulchain", [witness] * 8) for _ in range(total // 8)]
        for job in jobs:
            client.wait(job, timeout=600)
        took = time.monotonic() - t0
        calls1, cpu1 = redis_totals(client.store.redis)
        per_device = {}
        for job in jobs:
            for p in client.store.list_partitions(job):
                per_device.setdefault(p["worker"], []).append((p["t_gpu_start"], p["t_gpu_end"]))
        duty, gaps, inner = [], [], []
        for spans in per_device.values():
            spans.sort()
            first, last = spans[0][0], max(e for _, e in spans)
            duty.append(len(spans) * args.gpu_ms / 1000.0 / (last - first))
            # where a device's time goes besides T: inside its task (gpu_start .. gpu_end less
            # T), and between two tasks (gpu_end .. the next gpu_start, the hand-over)
            inner += [(e - s) * 1000 - args.gpu_ms for s, e in spans]
            gaps += [(b[0] - a[1]) * 1000 for a, b in zip(spans, spans[1:])]
        done = len(jobs) * 8
        return {"n": n, "partitions": done, "devices_used": len(per_device),
                "duty_min": min(duty), "duty_med": statistics.median(duty), "duty_max": max(duty),
                "cmds_per_part": (calls1 - calls0) / done,
                "idle_cmds_s": idle_rate, "idle_cpu_s": idle_cpu_rate,
                # the run's commands less the idle traffic of its duration: the work's own
                "work_cmds_per_part": (calls1 - calls0 - idle_rate * took) / done,
                "cpu_per_1000": (cpu1 - cpu0) / done * 1000, "throughput": done / took,
                "ideal": n * 1000.0 / args.gpu_ms,
                "inner_p50": percentile(inner, 0.5), "gap_p50": percentile(gaps, 0.5),
                "gap_p99": percentile(gaps, 0.99)}
    finally:
        procs.stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default="1,4,16,64")
    ap.add_argument("--gpu-ms", type=float, default=50.0)
    ap.add_argument("--per-device", type=int, default=40, help="partitions per device (x8)")
    ap.add_argument("--cpu-workers", type=int, default=2)
    ap.add_argument("--idle-s", type=float, default=5.0,
                    help="seconds of idle fleet measured before the jobs (idle Redis traffic)")
    args = ap.parse_args(argv)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="cuzk-scale-"))
    rows = []
    with LocalRedis() as redis:
        for n in (int(x) for x in args.devices.split(",")):
            row = run(n, args, redis.url, workdir)
            rows.append(row)
            print(f"N={n}: duty {row['duty_med'] * 100:.1f} % median "
                  f"({row['duty_min'] * 100:.1f}-{row['duty_max'] * 100:.1f}), "
                  f"{row['cmds_per_part']:.1f} Redis commands/partition "
                  f"({row['work_cmds_per_part']:.1f} less the idle traffic of "
                  f"{row['idle_cmds_s']:.0f} commands/s), "
                  f"{row['cpu_per_1000']:.2f} Redis CPU s/1000 partitions, "
                  f"{row['throughput']:.1f} partitions/s of {row['ideal']:.0f} ideal; "
                  f"in-task overhead p50 {row['inner_p50']:.2f} ms, hand-over p50/p99 "
                  f"{row['gap_p50']:.2f}/{row['gap_p99']:.2f} ms", flush=True)
    base = rows[0]
    print(f"\nT = {args.gpu_ms:g} ms (sleep), {args.per_device} partitions per device, "
          f"{args.cpu_workers} CPU workers x 2 processes, {os.cpu_count()} cores\n")
    print("| devices | duty cycle median (min-max) | in-task overhead p50 ms | hand-over p50 / p99 "
          "ms | Redis commands / partition | ratio to N=1 | less idle traffic | ratio to N=1 "
          "| idle commands/s per worker | Redis CPU s / 1000 partitions | ratio to N=1 "
          "| partitions/s (ideal) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        workers = r["n"] + args.cpu_workers
        print(f"| {r['n']} | {r['duty_med'] * 100:.1f} % ({r['duty_min'] * 100:.1f}-"
              f"{r['duty_max'] * 100:.1f}) | {r['inner_p50']:.2f} | {r['gap_p50']:.2f} / "
              f"{r['gap_p99']:.2f} | {r['cmds_per_part']:.1f} | "
              f"{r['cmds_per_part'] / base['cmds_per_part']:.2f} | {r['work_cmds_per_part']:.1f} | "
              f"{r['work_cmds_per_part'] / base['work_cmds_per_part']:.2f} | "
              f"{r['idle_cmds_s'] / workers:.1f} | {r['cpu_per_1000']:.2f} | "
              f"{r['cpu_per_1000'] / base['cpu_per_1000']:.2f} | {r['throughput']:.1f} "
              f"({r['ideal']:.0f}) |")
    print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
