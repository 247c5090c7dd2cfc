#!/usr/bin/env python3
"""Benchmark the orchestration itself: real Celery workers and a real Redis, no proving.

The prover is replaced by a calibrated busy-wait (bench/busywait.py, selected with
CUZK_PROVER and configured by CUZK_BENCH_BUSYWAIT): T ms of "GPU" time in prove and
F ms of finalize time.  Two modes run in the same invocation:

* split:      prove on the device queue, whose prove_end queues finalize onto the CPU queue
              (the product's design: the device takes its next partition at once);
* monolithic: the F ms run inside the device task (the design cuzk moved away from); its
              finalize then has nothing left to do.

The baseline rows: ``bench/celery_floor.py`` sends three bare tasks down the same path
(cpu -> device -> cpu queue, same worker configuration, same T and F busy-waits, one LPUSH
per hop, no state store): Celery's own floor for a lone partition on this host.  Its
workers run beside each mode's, and in the sequential phase every lone partition of the
mode is followed by one of the floor's, so the two are sampled in the same seconds.  After
the modes, the floor's device worker runs as many bare device tasks back to back as a mode's
saturated phase has partitions, twice: each publishing its finalize (a bare Celery pipeline)
and publishing nothing (Celery's step between two tasks): the baselines of the device's
hand-over.

Reported per mode:
* device duty cycle = (partitions proved on the device x T) / (first prove_begin .. last prove_end);
* device hand-over p50/p99, saturated phase: what a busy device waits between partitions,
  from the end of one partition's compute to the start of the next one's, on the device
  process's own clock (the bench prover's log, bench/busywait.py).  Beside it, the same gap
  as the state store stamps it: prove_end of one partition .. prove_begin of the next (Redis
  TIME when each script ran).  The stamps run late when Redis waits for a core: prove_begin
  is sent unread and the compute starts without waiting for it, so a late stamp is not a
  device waiting;
* orchestration overhead per partition, p50/p99, from a sequential phase (one
  partition in flight at a time, so no queueing): (done - created) - (synth + T + F
  as measured inside the tasks);
* throughput in partitions/s for the saturated phase.

    python bench/pipeline.py [--gpu-ms 200] [--finalize-ms 100] [--partitions 40] [--sequential 30]

On a 2-core machine use one device worker (the default): the busy-waits spin, and
one device plus one finalizer already occupy both cores.
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cuzk_tasks.client import Client  # noqa: E402
from cuzk_tasks.settings.config import load_settings  # noqa: E402
from cuzk_tasks.dev.demo import ProcessGroup  # noqa: E402
from cuzk_tasks.dev.local_redis import LocalRedis  # noqa: E402

import busywait  # noqa: E402  - bench/, this script's directory

FIXTURE = REPO / "tests" / "fixtures" / "mulchain"


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def start_stack(workdir, redis_url, devices, gpu_ms, finalize_ms, monolithic, gpu_wait="spin"):
    config = workdir / "cuzk.toml"
    config.write_text(
        f'redis_url = "{redis_url}"\nprefix = "bench{int(monolithic)}"\n'
        f'spool_dir = "{workdir / "spool"}"\n'
        f'allowed_input_roots = ["{FIXTURE}"]\n'  # witness_partition() names a fixture file
        "heartbeat_interval_s = 1.0\nheartbeat_ttl_s = 5.0\n\n"
        f'[circuits.mulchain]\nkind = "bench-busywait"\nzkey = "{FIXTURE / "circuit.zkey"}"\n'
        f'wasm = "{FIXTURE / "circuit.wasm"}"\n')
    (workdir / "device-log").mkdir()
    env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_PROVER="busywait:BusyWaitProver",
               CUZK_BENCH_DEVICE_LOG=str(workdir / "device-log"),
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "bench"),
                                           os.environ.get("PYTHONPATH", "")]),
               CUZK_BENCH_BUSYWAIT=f"{gpu_ms},{finalize_ms}{',monolithic' if monolithic else ''}"
                                   f"{',sleep' if gpu_wait == 'sleep' else ''}")
    for name in ("CUZK_REDIS_URL", "CUZK_BROKER_URL", "CUZK_RESULT_BACKEND", "CUZK_STATE_URL"):
        env.pop(name, None)
    procs = ProcessGroup(workdir)
    python = [sys.executable, "-m", "cuzk_tasks", "worker", "--loglevel", "WARNING"]
    procs.start("cpu", python + ["--cpu", "--concurrency", "1"], env)
    for n in range(devices):
        procs.start(f"dev{n}", python + ["--device", str(n), "--backend", "cpu"], env)
    settings = load_settings(config, env={})
    client = Client(settings=settings)
    deadline = time.monotonic() + 60
    while len(client.store.live_device_workers()) < devices:
        procs.check_alive()
        if time.monotonic() > deadline:
            raise SystemExit(f"workers did not come up; logs in {workdir}")
        time.sleep(0.1)
    return procs, client


def wait_jobs(client, job_ids, timeout_s=600):
    deadline = time.monotonic() + timeout_s
    pending = set(job_ids)
    while pending:
        for job_id in list(pending):
            state = client.store.get_job(job_id)["state"]
            if state in ("done", "failed", "cancelled"):
                if state != "done":
                    raise SystemExit(f"job {job_id} ended {state}: {client.store.get_job(job_id)}")
                pending.discard(job_id)
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for jobs")
        time.sleep(0.05)


#: Where a lone partition's overhead goes, from the timestamps the transitions record.
STAGES = {
    "submit -> synthesize": "t_created .. t_synth_start (Celery hop to the cpu queue)",
    "synthesize": "t_synth_start .. t_synth_end, less synth_ms (state calls, message build)",
    "-> prove": "t_synth_end .. t_prove_start (hop to the device queue; routed in synth_end)",
    "prove": "t_prove_start .. t_prove_end, less T",
    "-> finalize done": "t_prove_end .. t_done, less F (hop to the cpu queue, finalize's state calls)",
}


def stage_overheads(part, args, monolithic):
    t = {k: float(v) for k, v in part.items() if k.startswith("t_") and v is not None}
    synth_ms = float(part.get("synth_ms") or 0)
    gpu_work = args.gpu_ms + (args.finalize_ms if monolithic else 0.0)
    tail_work = 0.0 if monolithic else args.finalize_ms
    spans = [t["t_synth_start"] - t["t_created"], t["t_synth_end"] - t["t_synth_start"],
             t["t_prove_start"] - t["t_synth_end"], t["t_prove_end"] - t["t_prove_start"],
             t["t_done"] - t["t_prove_end"]]
    work = [0.0, synth_ms, 0.0, gpu_work, tail_work]
    return {name: span * 1000.0 - w for name, span, w in zip(STAGES, spans, work)}


def device_handovers(log_dir, since):
    """ms each device process waited between two computes begun at or after ``since`` (Unix
    seconds), from the bench prover's logs (bench/busywait.py)."""
    gaps = []
    for path in sorted(log_dir.glob("device-*.log")):
        spans = [s for s in busywait.read_device_log(path) if s[0] >= since]
        gaps += [(b[0] - a[1]) * 1000.0 for a, b in zip(spans, spans[1:])]
    return gaps


def witness_partition():
    return {"witness_ref": str(FIXTURE / "witness.wtns")}


class CeleryFloor:
    """The baseline: three bare Celery hops with the same T and F (bench/celery_floor.py).

    Its two workers stay up for the whole run and :meth:`one` sends one lone partition down
    them, so the floor is sampled between the modes' own partitions, under the same load
    and in the same seconds (on a noisy host the floor drifts by tens of percent within
    minutes)."""

    def __init__(self, workdir, redis_url, args):
        import redis

        import celery_floor

        self.floor_mod = celery_floor
        config = workdir / "cuzk.toml"
        config.write_text(f'redis_url = "{redis_url}"\nprefix = "benchfloor"\ncpu_queue = "floor.cpu"\n'
                          'device_queue_pattern = "floor.dev.{host}.{device}"\n')
        (workdir / "device-log").mkdir()
        env = dict(os.environ, CUZK_CONFIG=str(config),
                   CUZK_BENCH_DEVICE_LOG=str(workdir / "device-log"),
                   BENCH_FLOOR_WORK_MS=f"{args.gpu_ms},{args.finalize_ms}"
                                       f"{',sleep' if args.gpu_wait == 'sleep' else ''}")
        for name in ("CUZK_REDIS_URL", "CUZK_BROKER_URL", "CUZK_RESULT_BACKEND", "CUZK_STATE_URL"):
            env.pop(name, None)
        self.settings = load_settings(config, env={})
        self.gpu_ms = args.gpu_ms
        self.client = redis.Redis.from_url(redis_url)
        self.workdir = workdir
        self.procs = ProcessGroup(workdir)
        script = [sys.executable, str(REPO / "bench" / "celery_floor.py"), "worker"]
        self.procs.start("floor-cpu", script + ["cpu"], env)
        self.procs.start("floor-dev", script + ["device"], env)
        self.app = celery_floor.make_app(self.settings)  # sends the first hop
        for _ in range(3):  # warm-up: worker start, imports, connections
            self.one()

    def one(self):
        """One lone partition down the three bare hops: its overhead in ms."""
        floor = self.floor_mod
        before = self.client.llen(floor.DONE_KEY)
        floor.first_message(self.app, self.settings, time.time())
        deadline = time.monotonic() + 60
        while self.client.llen(floor.DONE_KEY) == before:
            self.procs.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"celery floor: no answer; logs in {self.workdir}")
            time.sleep(0.05)
        return float(self.client.lindex(floor.DONE_KEY, 0))  # LPUSHed: newest first

    def handovers(self, n, publish):
        """Celery's own hand-over: ``n`` bare device tasks sent back to back, each publishing
        a finalize onto the cpu queue (``publish``) or nothing; the ms the device waited
        between two of them."""
        floor = self.floor_mod
        since = time.time()
        for i in range(n):
            self.app.send_task(floor.T_DEVICE, (i == n - 1, publish),
                               queue=self.settings.device_queue(0), priority=5, ignore_result=True)
        deadline = time.monotonic() + 60 + n * self.gpu_ms / 1000.0
        while not self.client.blpop(floor.DEVICE_DONE_KEY, timeout=1):
            self.procs.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"celery floor: device tasks not done; logs in {self.workdir}")
        return device_handovers(self.workdir / "device-log", since)

    def stop(self):
        self.procs.stop()
        self.client.delete(self.floor_mod.DONE_KEY, self.floor_mod.DEVICE_DONE_KEY)


def run_mode(workdir, redis_url, args, monolithic, floor):
    """One mode's phases.  In the sequential phase each lone partition of the mode is
    followed by one of ``floor`` (CeleryFloor), whose overheads are returned beside."""
    procs, client = start_stack(workdir, redis_url, args.devices, args.gpu_ms, args.finalize_ms, monolithic,
                                args.gpu_wait)
    try:
        # Warm-up: zkey residency, imports, connections.
        wait_jobs(client, [client.submit("mulchain", [witness_partition()] * args.devices)])
        overheads = []
        floor_overheads = []
        stages = {name: [] for name in STAGES}
        for _ in range(args.sequential):
            floor_overheads.append(floor.one())
            job_id = client.submit("mulchain", [witness_partition()])
            wait_jobs(client, [job_id])
            part = client.store.get_partition(job_id, 0)
            work_ms = float(part.get("synth_ms") or 0) + args.gpu_ms + args.finalize_ms
            overheads.append((float(part["t_done"]) - float(part["t_created"])) * 1000.0 - work_ms)
            for name, ms in stage_overheads(part, args, monolithic).items():
                stages[name].append(ms)
        per_job = 4
        submitted = time.time()  # the saturated phase's computes begin after it
        jobs = [client.submit("mulchain", [witness_partition()] * per_job)
                for _ in range(max(1, args.partitions // per_job))]
        t0 = time.time()
        wait_jobs(client, jobs)
        wall = time.time() - t0
        parts = [client.store.get_partition(j, i) for j in jobs for i in range(per_job)]
        duty = {}
        handovers = []
        stamp_handovers = []
        for worker in sorted({p["worker"] for p in parts}):
            mine = sorted((p for p in parts if p["worker"] == worker),
                          key=lambda p: float(p["t_prove_start"]))
            start = float(mine[0]["t_prove_start"])
            end = max(float(p["t_prove_end"]) for p in mine)
            duty[worker] = len(mine) * args.gpu_ms / 1000.0 / (end - start)
            # the state store's view: one partition's prove_end .. the next one's prove_begin
            stamp_handovers += [(float(b["t_prove_start"]) - float(a["t_prove_end"])) * 1000.0
                                for a, b in zip(mine, mine[1:])]
        handovers = device_handovers(workdir / "device-log", submitted)
        return {"overheads": overheads, "floor": floor_overheads, "stages": stages, "duty": duty,
                "handovers": handovers, "stamp_handovers": stamp_handovers,
                "throughput": len(parts) / wall, "n": len(parts)}
    finally:
        procs.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu-ms", type=float, default=200.0)
    parser.add_argument("--finalize-ms", type=float, default=100.0)
    parser.add_argument("--partitions", type=int, default=100,
                        help="saturated phase size (100: the hand-over p99 is not just the maximum)")
    parser.add_argument("--sequential", type=int, default=30, help="latency phase size")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--gpu-wait", choices=("spin", "sleep"), default="spin",
                        help="how the device task spends T: spin (busy-wait, takes a core) or sleep "
                             "(the host thread blocks while a real GPU would compute)")
    args = parser.parse_args()
    results = {}
    with LocalRedis() as redis:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="cuzk-bench-floor-"))
        print(f"starting the Celery floor baseline (logs in {workdir}) ...", file=sys.stderr, flush=True)
        floor = CeleryFloor(workdir, redis.url, args)
        try:
            for mode, monolithic in (("split", False), ("monolithic", True)):
                workdir = pathlib.Path(tempfile.mkdtemp(prefix=f"cuzk-bench-{mode}-"))
                (workdir / "spool").mkdir()
                print(f"running {mode} mode, the floor interleaved (logs in {workdir}) ...",
                      file=sys.stderr, flush=True)
                results[mode] = run_mode(workdir, redis.url, args, monolithic, floor)
            print("running the floor's bare device tasks back to back ...", file=sys.stderr, flush=True)
            floor_handovers = {publish: floor.handovers(args.partitions, publish)
                               for publish in (True, False)}
        finally:
            floor.stop()
    print(f"T = {args.gpu_ms:.0f} ms GPU ({args.gpu_wait}), F = {args.finalize_ms:.0f} ms finalize busy-wait, "
          f"{args.devices} device worker(s), {os.cpu_count()} cores\n")
    print("| mode | device duty cycle | overhead p50 ms | overhead p99 ms | device hand-over "
          "p50 / p99 ms | prove_end .. prove_begin stamps p50 / p99 ms | throughput partitions/s "
          "| saturated partitions | sequential partitions |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode, r in results.items():
        duty = ", ".join(f"{d * 100:.1f}%" for d in r["duty"].values())
        print(f"| {mode} | {duty} | {percentile(r['overheads'], 0.5):.1f} | "
              f"{percentile(r['overheads'], 0.99):.1f} | {percentile(r['handovers'], 0.5):.1f} / "
              f"{percentile(r['handovers'], 0.99):.1f} | "
              f"{percentile(r['stamp_handovers'], 0.5):.1f} / "
              f"{percentile(r['stamp_handovers'], 0.99):.1f} | {r['throughput']:.2f} | {r['n']} | "
              f"{len(r['overheads'])} |")
    for mode, r in results.items():
        print(f"| baseline: Celery floor, 3 bare hops, between the {mode} partitions | - | "
              f"{percentile(r['floor'], 0.5):.1f} | {percentile(r['floor'], 0.99):.1f} | - | - | - | "
              f"- | {len(r['floor'])} |")
    for publish, label in ((True, "each publishing its finalize"), (False, "publishing nothing")):
        gaps = floor_handovers[publish]
        print(f"| baseline: Celery floor, bare device tasks back to back, {label} | - | - | - | "
              f"{percentile(gaps, 0.5):.1f} / {percentile(gaps, 0.99):.1f} | - | - | "
              f"{args.partitions} | - |")
    print("\nWhere a lone partition's overhead goes (sequential phase, p50 ms):\n")
    print("| stage | " + " | ".join(results) + " | measured as |")
    print("|---|" + "---:|" * len(results) + "---|")
    for name, how in STAGES.items():
        cells = " | ".join(f"{percentile(r['stages'][name], 0.5):.2f}" for r in results.values())
        print(f"| {name} | {cells} | {how} |")
    split, mono = results["split"], results["monolithic"]
    floor_p50 = percentile(split["floor"], 0.5)
    print(f"\nsplit overhead p50 / Celery floor p50 (sampled between them): "
          f"{percentile(split['overheads'], 0.5):.1f} / "
          f"{floor_p50:.1f} ms = {percentile(split['overheads'], 0.5) / floor_p50:.2f}x; "
          f"added by the pipeline: {percentile(split['overheads'], 0.5) - floor_p50:.1f} ms")
    print(f"\nsplit device hand-over p50 / p99: {percentile(split['handovers'], 0.5):.1f} / "
          f"{percentile(split['handovers'], 0.99):.1f} ms; Celery floor's (bare device tasks, "
          f"same run), each publishing its finalize: "
          f"{percentile(floor_handovers[True], 0.5):.1f} / "
          f"{percentile(floor_handovers[True], 0.99):.1f} ms, publishing nothing: "
          f"{percentile(floor_handovers[False], 0.5):.1f} / "
          f"{percentile(floor_handovers[False], 0.99):.1f} ms")
    print(f"\nsplit / monolithic throughput: {split['throughput'] / mono['throughput']:.2f}x "
          f"(ideal T+F / T = {(args.gpu_ms + args.finalize_ms) / args.gpu_ms:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
