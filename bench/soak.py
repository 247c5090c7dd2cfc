#!/usr/bin/env python3
"""Soak: M minutes of mixed jobs while a chaos thread kills a worker, or Redis, every K s.

A redis-server with AOF (``appendfsync always``), two device workers (CPU backend) and one
CPU worker, all real processes.  A submitter sends jobs of 1-4 partitions of the mulchain
and Poseidon fixtures at a steady rate; every K seconds the chaos thread kill -9s one of
{dev0, dev1, cpu, redis} (a worker's whole process group) and starts it again 1 s later
(Redis on the same AOF).  At the end it waits for the last jobs, then prints:

* jobs submitted, completed, failed and lost (not finished ``--grace-s`` after the last
  submit);
* duplicate proofs: partitions counted done more than once (the ``completed:*`` counters
  against the partitions of the jobs done) and results with a proof count != partitions;
* p50 / p99 job latency (submit -> done, as the submitter saw it);
* each role's RSS (its whole process group) once warmed up after its last (re)start and
  at the end, with the growth;
* Redis ``used_memory`` once warmed up (``--steady-s``: finished jobs expire as fast as
  they come) and at the end, with a short retention (``--retention-s``) so that finished
  jobs expire during the run.

Baseline in the same run: the same jobs' latency in the first, chaos-free minute
(``--calm-s``), so the cost of the faults shows as a ratio.

    python bench/soak.py [--minutes 20] [--kill-every 30] [--rate 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline import percentile  # noqa: E402  (bench/pipeline.py)

FIX = REPO / "tests" / "fixtures"
CIRCUITS = {"mulchain": FIX / "mulchain", "poseidon": FIX / "poseidon"}


def group_rss_mib(pid):
    """RSS of a process and all its descendants (MiB)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return total / 1024


class Worker:
    def __init__(self, name, args, env, logdir):
        self.name, self.args, self.env, self.logdir = name, args, env, logdir
        self.proc = None
        self.starts = 0
        self.start()

    @property
    def pid(self):
        return self.proc.pid

    def start(self):
        log = open(self.logdir / f"{self.name}.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "cuzk_tasks", "worker", *self.args],
                                     env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        self.starts += 1

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


class RoleMemory:
    """Per role: RSS once warmed up after its latest start, and now."""

    def __init__(self, warm_s):
        self.warm_s = warm_s
        self.started = {}
        self.warm = {}

    def restarted(self, name):
        self.started[name] = time.monotonic()
        self.warm.pop(name, None)

    def sample(self, roles):
        now = time.monotonic()
        for name, role in roles.items():
            if name not in self.warm and now - self.started.get(name, 0) >= self.warm_s:
                self.warm[name] = (group_rss_mib(role.pid), now)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--kill-every", type=float, default=30.0, help="seconds between faults")
    ap.add_argument("--rate", type=float, default=0.5, help="jobs submitted per second")
    ap.add_argument("--calm-s", type=float, default=60.0, help="chaos-free warm-up (baseline)")
    ap.add_argument("--retention-s", type=int, default=120, help="job retention during the run")
    ap.add_argument("--grace-s", type=float, default=180.0)
    ap.add_argument("--steady-s", type=float, default=None,
                    help="when Redis's used_memory counts as warmed up (default: calm + "
                         "retention + 120 s, once finished jobs expire as fast as they come)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--victims", default="dev0,dev1,cpu,redis",
                    help="what the chaos thread may kill (comma-separated); e.g. redis alone "
                         "leaves the workers up for the whole run, to watch their RSS")
    args = ap.parse_args(argv)
    if args.steady_s is None:
        args.steady_s = args.calm_s + args.retention_s + 120
    if shutil.which("redis-server") is None:
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    from cuzk_tasks.client import Client
    from cuzk_tasks.settings.config import load_settings

    from cuzk_tasks.dev.local_redis import LocalRedis

    rng = random.Random(args.seed)
    victims = [v.strip() for v in args.victims.split(",") if v.strip()]
    if not victims or set(victims) - {"dev0", "dev1", "cpu", "redis"}:
        raise SystemExit(f"--victims: expected some of dev0,dev1,cpu,redis, got {args.victims!r}")
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="cuzk-soak-"))
    redis_server = LocalRedis(aof=True)
    config = workdir / "cuzk.toml"
    config.write_text("".join(f'[circuits.{n}]\nkind = "soak-{n}"\nzkey = "{d / "circuit.zkey"}"\n'
                              f'wasm = "{d / "circuit.wasm"}"\n\n' for n, d in CIRCUITS.items()))
    env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_REDIS_URL=redis_server.url,
               CUZK_PREFIX="soak", CUZK_HOSTNAME="soak", CUZK_SPOOL_DIR=str(workdir / "spool"),
               CUZK_HEARTBEAT_INTERVAL_S="1", CUZK_HEARTBEAT_TTL_S="4", CUZK_THREADS="1",
               CUZK_RESULT_TTL_S=str(args.retention_s), CUZK_JOB_RETENTION_S=str(args.retention_s),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    settings = load_settings(env=env)
    roles = {"dev0": Worker("dev0", ["--device", "0", "--backend", "cpu"], env, workdir),
             "dev1": Worker("dev1", ["--device", "1", "--backend", "cpu"], env, workdir),
             "cpu": Worker("cpu", ["--cpu", "--concurrency", "2"], env, workdir)}
    memory = RoleMemory(warm_s=60.0)
    for name in roles:
        memory.restarted(name)
    client = Client(settings=settings)
    store = client.store
    inputs = {n: json.loads((d / "input.json").read_text()) for n, d in CIRCUITS.items()}
    jobs = {}  # job id -> {"submitted", "n", "done_at", "state"}
    faults = []
    lock = threading.Lock()
    stop = threading.Event()
    t_start = time.monotonic()
    t_end = t_start + args.minutes * 60

    def retrying(fn, *a):
        from cuzk_tasks.state import OutageRetry

        return OutageRetry(120).call(fn, *a)

    def submitter():
        i = 0
        while time.monotonic() < t_end and not stop.is_set():
            circuit = rng.choice(sorted(CIRCUITS))
            n = rng.randint(1, 4)
            t0 = time.monotonic()
            try:
                job = retrying(client.submit, circuit, [{"input": inputs[circuit]}] * n)
            except Exception as exc:  # noqa: BLE001 - counted, the soak goes on
                print(f"submit failed: {type(exc).__name__}: {exc}", flush=True)
                continue
            with lock:
                jobs[job] = {"submitted": t0, "n": n, "done_at": None, "state": "pending"}
            i += 1
            time.sleep(max(0.0, i / args.rate - (time.monotonic() - t_start)))

    def watcher():
        while not stop.is_set():
            with lock:
                waiting = [j for j, r in jobs.items() if r["done_at"] is None]
            for job in waiting:
                try:
                    state = store.get_job(job)
                except Exception:  # noqa: BLE001 - Redis is down: look again later
                    break
                if state and state["state"] in ("done", "failed", "cancelled"):
                    proofs = None
                    if state["state"] == "done":  # read now: the retention expires it later
                        try:
                            result = store.get_result(job) or store.collect_result(job)
                            proofs = len(result["proofs"])
                        except Exception:  # noqa: BLE001 - Redis is down: look again later
                            break
                    with lock:
                        jobs[job].update(done_at=time.monotonic(), state=state["state"],
                                         error=state.get("error"), proofs=proofs)
            try:
                memory.sample(roles)
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.2)

    def chaos():
        next_fault = t_start + args.calm_s
        while not stop.is_set() and time.monotonic() < t_end:
            if time.monotonic() < next_fault:
                time.sleep(0.2)
                continue
            victim = rng.choice(victims)
            faults.append((round(time.monotonic() - t_start, 1), victim))
            print(f"[{time.monotonic() - t_start:7.1f} s] kill -9 {victim}", flush=True)
            if victim == "redis":
                redis_server.kill()
                time.sleep(1.0)
                redis_server.restart()
            else:
                roles[victim].kill()
                time.sleep(1.0)
                roles[victim].start()
                memory.restarted(victim)
            next_fault += args.kill_every

    threads = [threading.Thread(target=f, daemon=True) for f in (submitter, watcher, chaos)]
    for t in threads:
        t.start()
    used_warm = None
    try:
        while time.monotonic() < t_end:
            time.sleep(5)
            if used_warm is None and time.monotonic() - t_start >= args.steady_s:
                used_warm = retrying(lambda: int(store.redis.info("memory")["used_memory"]))
            with lock:
                done = sum(1 for r in jobs.values() if r["done_at"] is not None)
            print(f"[{time.monotonic() - t_start:7.1f} s] {len(jobs)} submitted, {done} finished, "
                  f"{len(faults)} faults", flush=True)
        threads[0].join()
        deadline = time.monotonic() + args.grace_s
        while time.monotonic() < deadline:
            with lock:
                if all(r["done_at"] is not None for r in jobs.values()):
                    break
            time.sleep(1)
        stop.set()
        memory.sample(roles)
        rss_end = {name: group_rss_mib(role.pid) for name, role in roles.items()}
        used_end = retrying(lambda: int(store.redis.info("memory")["used_memory"]))
        counters = retrying(lambda: store.snapshot()["counters"])
    finally:
        stop.set()
        for role in roles.values():
            role.stop()
        redis_server.stop()

    done = {j: r for j, r in jobs.items() if r["state"] == "done"}
    failed = {j: r for j, r in jobs.items() if r["state"] in ("failed", "cancelled")}
    lost = [j for j, r in jobs.items() if r["done_at"] is None]
    completed_partitions = sum(v for k, v in counters.items() if k.startswith("completed:"))
    expected_partitions = sum(r["n"] for r in done.values())
    bad_results = [j for j, r in done.items() if r.get("proofs") != r["n"]]
    latency = [r["done_at"] - r["submitted"] for r in done.values()]
    calm = [r["done_at"] - r["submitted"] for r in done.values()
            if r["submitted"] - t_start < args.calm_s]
    print()
    print(f"soak: {args.minutes:g} min, a fault every {args.kill_every:g} s after a "
          f"{args.calm_s:g} s calm start, {args.rate:g} jobs/s, retention {args.retention_s} s")
    print(f"faults: {len(faults)} ({', '.join(f'{v} x{sum(1 for _, w in faults if w == v)}' for v in ('dev0', 'dev1', 'cpu', 'redis'))})")
    print(f"jobs: {len(jobs)} submitted, {len(done)} completed, {len(failed)} failed, {len(lost)} lost")
    for j in list(failed)[:5]:
        print(f"  failed {j}: {jobs[j].get('error')}")
    print(f"duplicate proofs: {completed_partitions - expected_partitions} (completed counter "
          f"{completed_partitions} vs {expected_partitions} partitions of done jobs); "
          f"results with a wrong proof count: {len(bad_results)}")
    if latency:
        print(f"job latency: p50 {percentile(latency, 0.5):.2f} s, p99 {percentile(latency, 0.99):.2f} s "
              f"(calm first {args.calm_s:g} s, baseline: p50 {percentile(calm, 0.5):.2f} s; "
              f"ratio {percentile(latency, 0.5) / max(percentile(calm, 0.5), 1e-9):.2f})")
    for name in roles:
        warm = memory.warm.get(name)
        if warm is None:
            print(f"RSS {name}: not warm at the end (restarted < {memory.warm_s:g} s before)")
            continue
        growth = (rss_end[name] - warm[0]) / warm[0] * 100
        print(f"RSS {name}: {warm[0]:.0f} MiB warm -> {rss_end[name]:.0f} MiB at the end "
              f"({growth:+.1f} % over {time.monotonic() - warm[1]:.0f} s since warm-up; "
              f"{roles[name].starts} starts)")
    if used_warm:
        print(f"Redis used_memory: {used_warm / 2**20:.1f} MiB at {args.steady_s:g} s -> "
              f"{used_end / 2**20:.1f} MiB at the end ({(used_end - used_warm) / used_warm * 100:+.1f} %)")
    print(f"logs: {workdir}")
    return 0 if not lost and completed_partitions == expected_partitions and not bad_results else 1


if __name__ == "__main__":
    raise SystemExit(main())
