#!/usr/bin/env python3
"""Scale benchmark of the ORCHESTRATION: N device workers on H simulated hosts, whose
stages' compute sleeps, so the cores run only Celery, Redis and the state store's Lua.

For each fleet N x H (default 1x1, 4x1, 4x4, 16x1, 16x4, 16x16, 64x1, 64x4, 64x16) it
starts fresh processes against one real redis-server: on each simulated host
(``CUZK_HOSTNAME=sim<h>``) one CPU worker (``bench/sleepers.py worker --cpu``: the
product's CPU worker with its sweeper and outbox relay; synthesize sleeps S ms before the
product's synthesize body) and N/H device workers (``cuzk-tasks worker --device d``, each a
separate Celery worker process with its one pool process, as in production), whose prover is
bench/sleepers.py's SleepProver: prove sleeps T ms (the host thread blocks as it does
while a GPU computes), finalize sleeps F ms.  T is given per job by the circuit
(``sleep500``, ``sleep2000``), so one fleet runs every device time.

Per fleet it measures, in this order:

1. idle (no job in flight), ``--idle-s`` seconds: Redis commands/s per worker (INFO
   commandstats of the real redis-server; commands a Lua script runs count too) and Redis
   CPU (INFO cpu, user + sys) -- heartbeats, Celery's polling and event heartbeats, the
   sweepers, the outbox relays;
2. per device time T: ``--device-s`` seconds of work per device (at least 2 partitions each,
   ``--min-partitions`` in all), submitted at once in jobs of 8 partitions; per-device duty
   cycle = its partitions x T / (its first prove_begin .. last prove_end); hand-over (prove_end ..
   next prove_begin on one device); Redis commands and Redis CPU per partition (the whole
   run's, and less the idle traffic of the run's duration); the workers' own CPU per
   partition (/proc, device workers apart) and how busy the whole machine was (/proc/stat:
   other tenants show there);
3. the sweep: with a backlog of 4 x N partitions in flight, every worker process is frozen
   (SIGSTOP) so Redis serves nothing else, and this process runs the product's Sweeper
   (leases included, as every half heartbeat TTL) for a second; the same at 0 in flight
   (during the idle phase).  Cost per in-flight partition = (loaded - empty) / in flight.
   The backlog's jobs are then cancelled.

Heartbeat interval and TTL are the product's defaults (5 s, 15 s).  Each CPU worker's
concurrency covers its host's stand-in work at the shortest T with a margin
(:func:`cpu_concurrency`): the worker runs Celery's prefork pool only.  Every simulated
host has a CPU worker of its own, so the bench holds whether synthesize and finalize run
anywhere (the shared cpu queue) or on the device's host (issue 27 item 1).

    python bench/scale.py                 # the full sweep, 13-14 min on 2 shared cores
    python bench/scale.py --quick         # 1x1 and 4x2, short runs, ~70 s
    python bench/scale.py --fleets 64x16 --device-ms 2000 --json out.json

Progress goes to stderr, the tables to stdout.  On a shared 2-core machine the numbers are
noisy; the ratios to N = 1 are read within one invocation.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import signal
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
sys.path.insert(0, str(REPO))

from cuzk_tasks.client import Client  # noqa: E402
from cuzk_tasks.settings.config import load_settings  # noqa: E402
from cuzk_tasks.dev.demo import ProcessGroup  # noqa: E402
from cuzk_tasks.dev.local_redis import LocalRedis  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "mulchain"
FULL_FLEETS = "1x1,4x1,4x4,16x1,16x4,16x16,64x1,64x4,64x16"
QUICK_FLEETS = "1x1,4x2"
JOB_SIZE = 8
#: device time of the sweep phase's backlog: long enough that none of it ends while the
#: sweep is measured (its jobs are cancelled after, the fleet stopped)
BACKLOG_MS = 30000
CLK_TCK = os.sysconf("SC_CLK_TCK")
T0 = time.monotonic()


def progress(message):
    print(f"[{time.monotonic() - T0:6.0f}s] {message}", file=sys.stderr, flush=True)


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def parse_fleets(text):
    """``"64x16,4x1"`` -> ``[(64, 16), (4, 1)]``; N must be a multiple of H."""
    fleets = []
    for item in text.split(","):
        try:
            n, h = (int(x) for x in item.strip().lower().split("x"))
        except ValueError:
            raise SystemExit(f"--fleets: {item!r}: expected DEVICESxHOSTS, e.g. 64x16") from None
        if n < 1 or h < 1 or n % h:
            raise SystemExit(f"--fleets: {item!r}: devices must be a positive multiple of hosts")
        fleets.append((n, h))
    return fleets


def cpu_concurrency(devices_per_host, synth_ms, finalize_ms, t_min_ms):
    """Pool processes of a host's CPU worker: its devices' synthesize + finalize sleeps at
    the shortest device time, x1.5, plus one (the stand-ins must never starve a device)."""
    busy = devices_per_host * (synth_ms + finalize_ms) / t_min_ms
    return max(2, math.ceil(1.5 * busy) + 1)


def machine_busy_s():
    """CPU seconds every process of the machine has used (all cores, /proc/stat): the other
    tenants' share of a run shows against the fleet's and Redis's."""
    fields = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def redis_totals(r):
    """(commands served so far, Redis CPU seconds so far) of the redis-server."""
    stats = r.info("commandstats")
    calls = sum(int(v["calls"]) for v in stats.values())
    cpu = r.info("cpu")
    return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


class Fleet:
    """N device workers and one CPU worker per simulated host, on their own key prefix and
    queues (so fleets never see each other's keys)."""

    def __init__(self, n, h, args, redis_url, workdir):
        self.n, self.h, self.args = n, h, args
        self.tag = f"{n}x{h}"
        self.workdir = workdir / self.tag
        self.workdir.mkdir(parents=True)
        config = self.workdir / "cuzk.toml"
        circuits = "".join(
            f'\n[circuits.sleep{int(t)}]\nkind = "bench-scale"\n'
            f'zkey = "{FIXTURE / "circuit.zkey"}"\nwasm = "{FIXTURE / "circuit.wasm"}"\n'
            for t in [*args.device_ms, BACKLOG_MS])
        config.write_text(
            f'redis_url = "{redis_url}"\nprefix = "scale{self.tag}"\n'
            f'spool_dir = "{self.workdir / "spool"}"\n'
            f'allowed_input_roots = ["{FIXTURE}"]\n'
            f'cpu_queue = "scale{self.tag}.cpu"\n'
            f'device_queue_pattern = "scale{self.tag}.dev.{{host}}.{{device}}"\n' + circuits)
        self.env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_PROVER="sleepers:SleepProver",
                        CUZK_BENCH_SLEEP=f"{args.synth_ms},{args.finalize_ms}",
                        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), str(BENCH),
                                                               os.environ.get("PYTHONPATH"))
                                                   if p))
        for name in list(self.env):
            if name.startswith("CUZK_") and name not in (
                    "CUZK_CONFIG", "CUZK_PROVER", "CUZK_BENCH_SLEEP"):
                del self.env[name]
        self.settings = load_settings(config, env={})
        self.client = Client(settings=self.settings)
        self.store = self.client.store
        self.procs = ProcessGroup(self.workdir)
        self.sweeper = None  # the bench's own Sweeper (measure_sweep), made at first use
        self.concurrency = cpu_concurrency(n // h, args.synth_ms, args.finalize_ms,
                                           min(args.device_ms))

    def start(self):
        level = ["--loglevel", "WARNING"]
        for host in range(self.h):
            env = dict(self.env, CUZK_HOSTNAME=f"sim{host}")
            self.procs.start(f"cpu-sim{host}", [sys.executable, str(BENCH / "sleepers.py"),
                                                "worker", "--cpu", "--concurrency",
                                                str(self.concurrency), *level], env)
            for device in range(self.n // self.h):
                self.procs.start(f"dev-sim{host}-{device}",
                                 [sys.executable, "-m", "cuzk_tasks", "worker", "--device",
                                  str(device), "--backend", "cpu", *level], env)
        deadline = time.monotonic() + 120 + 3 * (self.n + self.h)
        last = None
        while True:
            workers = self.store.all_workers()
            devices = sum(1 for w in workers if w.get("role") == "device" and w["online"])
            cpus = sum(1 for w in workers if w.get("role") == "cpu" and w["online"])
            if (devices, cpus) != last:
                progress(f"fleet {self.tag}: {devices}/{self.n} device and {cpus}/{self.h} CPU "
                         "workers registered")
                last = (devices, cpus)
            if devices == self.n and cpus == self.h:
                break
            self.procs.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"fleet {self.tag} did not come up; logs in {self.workdir}")
            time.sleep(0.5)
        # registered is not ready: each pool process forks and builds its context after.
        # One partition per device, every device time, proves they all run tasks.
        progress(f"fleet {self.tag}: warm-up, one partition per device per device time")
        for t in self.args.device_ms:
            self.run_jobs(t, self.n, timeout_s=120 + 3 * self.n)

    def submit(self, t, partitions):
        witness = {"witness_ref": str(FIXTURE / "witness.wtns")}
        jobs, left = [], partitions
        while left > 0:
            size = min(JOB_SIZE, left)
            jobs.append(self.client.submit(f"sleep{int(t)}", [witness] * size))
            left -= size
        return jobs

    def wait(self, jobs, timeout_s, what=""):
        """Poll the jobs' states (one pipelined HGET each per 0.5 s) until all are done."""
        pending, deadline, shown = list(jobs), time.monotonic() + timeout_s, time.monotonic()
        while pending:
            states = self.store.job_states(pending)
            bad = {j: s for j, s in states.items() if s in ("failed", "cancelled", None)}
            if bad:
                job = next(iter(bad))
                raise SystemExit(f"fleet {self.tag}: job {job} is {bad[job]}: "
                                 f"{self.store.get_job(job)}; logs in {self.workdir}")
            pending = [j for j, s in states.items() if s != "done"]
            if not pending:
                break
            if what and time.monotonic() - shown > 10:
                progress(f"  {what}: {len(jobs) - len(pending)}/{len(jobs)} jobs done")
                shown = time.monotonic()
            self.procs.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"fleet {self.tag}: {len(pending)} jobs not done in "
                                 f"{timeout_s:.0f} s; logs in {self.workdir}")
            time.sleep(0.5)

    def run_jobs(self, t, partitions, timeout_s, what=""):
        jobs = self.submit(t, partitions)
        self.wait(jobs, timeout_s, what)
        return jobs

    def freeze(self, sig):
        for _, proc in self.procs.procs:
            os.killpg(proc.pid, sig)  # the worker and its pool processes (own session)

    def stop(self, timeout_s=30.0):
        """SIGTERM (a warm shutdown), SIGKILL what is left after ``timeout_s``."""
        self.procs.stop(timeout_s=timeout_s)

    def cpu_s(self, role=""):
        """CPU seconds (user + sys) used so far by the fleet's live processes: every worker
        and its pool processes (each worker leads its own process group); ``role`` "cpu" or
        "dev": those workers only."""
        groups = {proc.pid for name, proc in self.procs.procs if name.startswith(role)}
        total = 0
        for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:
                continue  # ended meanwhile
            if int(fields[2]) in groups:  # pgrp
                total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / CLK_TCK


def measure_idle(fleet, r, seconds):
    time.sleep(2.0)  # the warm-up's last finalize and outbox publishes settle
    calls0, cpu0 = redis_totals(r)
    fleet0, busy0, t0 = fleet.cpu_s(), machine_busy_s(), time.monotonic()
    time.sleep(seconds)
    calls1, cpu1 = redis_totals(r)
    fleet1, busy1, took = fleet.cpu_s(), machine_busy_s(), time.monotonic() - t0
    workers = fleet.n + fleet.h
    return {"idle_cmds_s": (calls1 - calls0) / took, "idle_cpu_pct": (cpu1 - cpu0) / took * 100,
            "idle_cmds_s_per_worker": (calls1 - calls0) / took / workers,
            "idle_fleet_cpu_pct": (fleet1 - fleet0) / took * 100,
            "idle_machine_pct": (busy1 - busy0) / took * 100}


def measure_sweep(fleet, r, min_s=1.0, min_runs=3):
    """One sweep's Redis commands and CPU with every worker process frozen (nothing else
    served): the product's Sweeper, lease checks included, from this process."""
    from cuzk_tasks import pipeline
    from cuzk_tasks.celery_app import create_app
    from cuzk_tasks.recovery.sweeper import Sweeper

    if fleet.sweeper is None:
        app = create_app(fleet.settings)
        app.cuzk_identity = pipeline.WorkerIdentity("bench-sweep", "cpu", "cpu")
        fleet.sweeper = Sweeper(pipeline.context(app))
        fleet.sweeper.run_once(leases=True)  # imports, script loads, connections
    fleet.freeze(signal.SIGSTOP)
    try:
        # one sweeper at a time does the cluster-wide checks (StateStore.claim_sweep): act as
        # the frozen holder, so the sweep measured is the one that holder would run
        holder = fleet.store.redis.get(fleet.store.keys.sweeper())
        fleet.sweeper.holder = holder or "bench-sweep"
        in_flight = len(fleet.store.stage_partitions())
        calls0, cpu0 = redis_totals(r)
        t0, runs = time.monotonic(), 0
        while runs < min_runs or time.monotonic() - t0 < min_s:
            fleet.sweeper.run_once(leases=True)
            runs += 1
        calls1, cpu1 = redis_totals(r)
    finally:
        fleet.freeze(signal.SIGCONT)
    # less the 2 INFO commands of the second redis_totals
    return {"in_flight": in_flight, "cmds": (calls1 - calls0 - 2) / runs,
            "cpu_ms": (cpu1 - cpu0) / runs * 1000.0}


def measure_run(fleet, r, t, args, idle):
    # at least MIN_PARTITIONS in all: the small fleets' rows are the ratios' baseline
    per_device = max(2, math.ceil(args.device_s * 1000.0 / t),
                     math.ceil(args.min_partitions / fleet.n))
    total = fleet.n * per_device
    progress(f"fleet {fleet.tag}: T = {t:g} ms, {total} partitions ({per_device} per device)")
    calls0, cpu0 = redis_totals(r)
    fleet0, busy0, t0 = fleet.cpu_s(), machine_busy_s(), time.monotonic()
    dev0 = fleet.cpu_s("dev")
    jobs = fleet.run_jobs(t, total, timeout_s=120 + 5 * per_device * t / 1000.0,
                          what=f"T = {t:g} ms")
    took = time.monotonic() - t0
    calls1, cpu1 = redis_totals(r)
    fleet1, busy1, dev1 = fleet.cpu_s(), machine_busy_s(), fleet.cpu_s("dev")
    spans = {}
    for job in jobs:
        for p in fleet.store.list_partitions(job):
            spans.setdefault(p["worker"], []).append((float(p["t_prove_start"]),
                                                      float(p["t_prove_end"])))
    duty, gaps, counts = [], [], []
    for mine in spans.values():
        mine.sort()
        first, last = mine[0][0], max(e for _, e in mine)
        duty.append(len(mine) * t / 1000.0 / (last - first))
        gaps += [(b[0] - a[1]) * 1000.0 for a, b in zip(mine, mine[1:])]
        counts.append(len(mine))
    cmds = (calls1 - calls0) / total
    cpu = (cpu1 - cpu0) / total * 1000.0
    row = {"fleet": fleet.tag, "n": fleet.n, "h": fleet.h, "t_ms": t, "partitions": total,
           "devices_used": len(spans), "parts_min": min(counts), "parts_max": max(counts),
           "duty_min": min(duty), "duty_med": statistics.median(duty), "duty_max": max(duty),
           "gap_p50": percentile(gaps, 0.5), "gap_p99": percentile(gaps, 0.99),
           "cmds_per_part": cmds, "cpu_ms_per_part": cpu,
           "work_cmds_per_part": cmds - idle["idle_cmds_s"] * took / total,
           "work_cpu_ms_per_part": cpu - idle["idle_cpu_pct"] / 100 * took * 1000.0 / total,
           "throughput": total / took, "ideal": fleet.n * 1000.0 / t, "took_s": took,
           "redis_cpu_pct": (cpu1 - cpu0) / took * 100.0,
           # the workers' own CPU (Celery, the stages' Python, the state store's client side)
           "fleet_cpu_ms_per_part": (fleet1 - fleet0) / total * 1000.0,
           "work_fleet_cpu_ms_per_part": ((fleet1 - fleet0) - idle["idle_fleet_cpu_pct"] / 100
                                          * took) / total * 1000.0,
           "fleet_cpu_pct": (fleet1 - fleet0) / took * 100.0,
           "dev_cpu_ms_per_part": (dev1 - dev0) / total * 1000.0,
           "machine_pct": (busy1 - busy0) / took * 100.0}
    progress(f"  duty {row['duty_med'] * 100:.1f} % median ({row['duty_min'] * 100:.1f}-"
             f"{row['duty_max'] * 100:.1f}), hand-over p50/p99 {row['gap_p50']:.1f}/"
             f"{row['gap_p99']:.1f} ms, {cmds:.1f} Redis commands and {cpu:.2f} ms Redis CPU "
             f"per partition, {row['throughput']:.1f} partitions/s of {row['ideal']:.1f}; "
             f"workers' CPU {row['fleet_cpu_ms_per_part']:.1f} ms per partition (device "
             f"workers {row['dev_cpu_ms_per_part']:.1f}); machine "
             f"{row['machine_pct']:.0f} % busy of {100 * (os.cpu_count() or 1)} %")
    return row


def run_fleet(n, h, args, redis, workdir):
    import redis as redis_py

    r = redis_py.Redis.from_url(redis.url)
    fleet = Fleet(n, h, args, redis.url, workdir)
    progress(f"fleet {fleet.tag}: starting {h} CPU worker(s) (concurrency "
             f"{fleet.concurrency}) and {n} device workers; logs in {fleet.workdir}")
    started = time.monotonic()
    try:
        fleet.start()
        up_s = time.monotonic() - started
        progress(f"fleet {fleet.tag}: up and warm in {up_s:.0f} s; idle for {args.idle_s:g} s")
        idle = measure_idle(fleet, r, args.idle_s)
        idle["sweep_empty"] = measure_sweep(fleet, r)
        progress(f"  idle: {idle['idle_cmds_s_per_worker']:.2f} commands/s per worker "
                 f"({idle['idle_cmds_s']:.0f}/s, Redis CPU {idle['idle_cpu_pct']:.2f} %, workers' "
                 f"CPU {idle['idle_fleet_cpu_pct']:.0f} %, machine {idle['idle_machine_pct']:.0f} "
                 f"% busy); "
                 f"empty sweep {idle['sweep_empty']['cmds']:.0f} commands, "
                 f"{idle['sweep_empty']['cpu_ms']:.2f} ms Redis CPU")
        rows = [measure_run(fleet, r, t, args, idle) for t in args.device_ms]
        # the sweep with a backlog in flight: 4 partitions per device whose device time
        # (BACKLOG_MS) outlasts the measurement, cancelled afterwards
        progress(f"fleet {fleet.tag}: the sweep with {4 * n} partitions in flight")
        jobs = fleet.submit(BACKLOG_MS, 4 * n)
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:  # every one synthesized and routed
            states = {row[2] for row in fleet.store.stage_partitions()}
            if states <= {"synth_done", "proving"}:
                break
            time.sleep(0.2)
        loaded = measure_sweep(fleet, r)
        for job in jobs:
            fleet.client.cancel(job, reason="bench: sweep measured")
        empty = idle["sweep_empty"]
        grow = max(1, loaded["in_flight"] - empty["in_flight"])
        sweep = {"in_flight": loaded["in_flight"], "cmds": loaded["cmds"],
                 "cpu_ms": loaded["cpu_ms"], "empty_cmds": empty["cmds"],
                 "empty_cpu_ms": empty["cpu_ms"],
                 "cmds_per_inflight": (loaded["cmds"] - empty["cmds"]) / grow,
                 "cpu_us_per_inflight": (loaded["cpu_ms"] - empty["cpu_ms"]) * 1000.0 / grow}
        progress(f"  sweep: {loaded['cmds']:.0f} commands, {loaded['cpu_ms']:.2f} ms Redis CPU "
                 f"with {loaded['in_flight']} in flight: {sweep['cmds_per_inflight']:.2f} "
                 f"commands and {sweep['cpu_us_per_inflight']:.1f} us per in-flight partition")
        return {"fleet": fleet.tag, "n": n, "h": h, "up_s": up_s,
                "cpu_concurrency": fleet.concurrency, "idle": idle, "runs": rows,
                "sweep": sweep}
    finally:
        progress(f"fleet {fleet.tag}: stopping")
        fleet.stop(timeout_s=5.0)  # the backlog's device tasks sleep on: not waited for
        r.flushall()  # the next fleet starts on an empty Redis


def print_tables(results, args):
    cores = os.cpu_count() or 1
    print(f"\nS = {args.synth_ms:g} ms synthesize, F = {args.finalize_ms:g} ms finalize (sleeps), "
          f"{args.device_s:g} s of work per device per run, jobs of {JOB_SIZE}, {cores} cores "
          f"({cores * 100} % = all busy); heartbeat every 5 s (TTL 15 s).  Ratios are to the "
          "first fleet's row of the same T; 'less idle' takes out the idle traffic (CPU) of "
          "the run's duration.\n")
    base = {}
    for res in results:
        for row in res["runs"]:
            base.setdefault(row["t_ms"], row)
    print("| devices x hosts | T ms | duty median (min-max) | hand-over p50 / p99 ms "
          "| Redis cmds / partition (ratio) | less idle (ratio) | Redis CPU ms / partition "
          "(ratio) | less idle (ratio) | Redis CPU % | workers' CPU ms / partition (of it "
          "device workers) | machine "
          "busy % | partitions/s (ideal) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in args.device_ms:
        b = base[t]
        for res in results:
            for r in (row for row in res["runs"] if row["t_ms"] == t):
                print(f"| {r['fleet']} | {t:g} | {r['duty_med'] * 100:.1f} % ("
                      f"{r['duty_min'] * 100:.1f}-{r['duty_max'] * 100:.1f}) | "
                      f"{r['gap_p50']:.1f} / {r['gap_p99']:.1f} | {r['cmds_per_part']:.1f} "
                      f"({r['cmds_per_part'] / b['cmds_per_part']:.2f}) | "
                      f"{r['work_cmds_per_part']:.1f} "
                      f"({r['work_cmds_per_part'] / b['work_cmds_per_part']:.2f}) | "
                      f"{r['cpu_ms_per_part']:.2f} "
                      f"({r['cpu_ms_per_part'] / b['cpu_ms_per_part']:.2f}) | "
                      f"{r['work_cpu_ms_per_part']:.2f} "
                      f"({r['work_cpu_ms_per_part'] / b['work_cpu_ms_per_part']:.2f}) | "
                      f"{r['redis_cpu_pct']:.1f} | {r['fleet_cpu_ms_per_part']:.0f} "
                      f"({r['dev_cpu_ms_per_part']:.0f}) | "
                      f"{r['machine_pct']:.0f} | {r['throughput']:.1f} ({r['ideal']:.1f}) |")
    print("\n| devices x hosts | workers | CPU worker concurrency | up + warm s | idle commands/s "
          "per worker (all) | idle Redis CPU % | idle workers' CPU % | sweep: in flight | "
          "commands (empty) | Redis CPU ms (empty) | per in-flight partition: commands / "
          "Redis CPU us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        i, s = res["idle"], res["sweep"]
        print(f"| {res['fleet']} | {res['n'] + res['h']} | {res['cpu_concurrency']} | "
              f"{res['up_s']:.0f} | {i['idle_cmds_s_per_worker']:.2f} ({i['idle_cmds_s']:.0f}) | "
              f"{i['idle_cpu_pct']:.2f} | {i['idle_fleet_cpu_pct']:.0f} | {s['in_flight']} | "
              f"{s['cmds']:.0f} ({s['empty_cmds']:.0f}) | {s['cpu_ms']:.2f} "
              f"({s['empty_cpu_ms']:.2f}) | {s['cmds_per_inflight']:.2f} / "
              f"{s['cpu_us_per_inflight']:.1f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"fleets {QUICK_FLEETS}, 2 s of work per device, 6 s idle")
    ap.add_argument("--fleets", default=None,
                    help=f"DEVICESxHOSTS list (default {FULL_FLEETS})")
    ap.add_argument("--device-ms", default="500,2000",
                    help="device times T, ms (each a circuit sleep<T>)")
    ap.add_argument("--device-s", type=float, default=None,
                    help="seconds of device work per device per run (default 10, quick 2)")
    ap.add_argument("--synth-ms", type=float, default=20.0, help="synthesize sleep, ms")
    ap.add_argument("--finalize-ms", type=float, default=20.0, help="finalize sleep, ms")
    ap.add_argument("--min-partitions", type=int, default=None,
                    help="partitions of a run at least, whatever N (default 16, quick 4): "
                         "the 1-device row is the baseline")
    ap.add_argument("--idle-s", type=float, default=None,
                    help="seconds of idle fleet measured (default 15, quick 6)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    args.fleets = parse_fleets(args.fleets or (QUICK_FLEETS if args.quick else FULL_FLEETS))
    try:
        args.device_ms = [float(x) for x in args.device_ms.split(",")]
    except ValueError:
        raise SystemExit(f"--device-ms: {args.device_ms!r}: expected ms, e.g. 500,2000") from None
    if not args.device_ms or min(args.device_ms) < 1 or \
            any(t != int(t) for t in args.device_ms):
        raise SystemExit("--device-ms: expected whole milliseconds >= 1")
    args.device_s = args.device_s if args.device_s is not None else (2.0 if args.quick else 10.0)
    if args.min_partitions is None:
        args.min_partitions = 4 if args.quick else 16
    args.idle_s = args.idle_s if args.idle_s is not None else (6.0 if args.quick else 15.0)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="cuzk-scale-"))
    results = []
    with LocalRedis() as redis:
        progress(f"redis-server at {redis.url}; logs in {workdir}")
        for n, h in args.fleets:
            results.append(run_fleet(n, h, args, redis, workdir))
            if args.json:  # what is done so far survives a later fleet's failure
                pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    print_tables(results, args)
    progress(f"done in {time.monotonic() - T0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
