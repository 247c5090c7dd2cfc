"""Status page benchmark: /api/status latency and live-stream (SSE) fan-out under gunicorn.

    python bench/status_api.py [--workers 64] [--jobs 500] [--partitions 16]

Fills a private redis-server THROUGH THE STATE STORE (the real Lua transitions) with
64 device workers (each proving one partition) and 500 in-flight jobs of 16 partitions
in mixed states, serves the app with gunicorn as ``cuzk-tasks web`` does, then measures

* GET /api/status latency, p50/p99, with 8 concurrent keep-alive clients: with the state
  still, and while a churn thread makes 10 transitions/s (every one invalidates the cache,
  so those requests pay for a full Lua read);
* SSE fan-out: 50 clients on /api/events; per state change, the time from the change
  (just before the Lua call) until each client has received (a) the transition event and
  (b) a status document that includes it.  Targets: p99 <= 25 ms; all 50 within 250 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cuzk_tasks.celery_app import queue_keys  # noqa: E402
from cuzk_tasks.local_redis import LocalRedis, _free_port  # noqa: E402
from cuzk_tasks.state import StateStore  # noqa: E402

KIND = "groth16-porep-snap-deal-update-32gib-v1x"
HOST = "benchhost"


def fill(store, n_workers, n_jobs, n_parts):
    t0 = time.perf_counter()
    workers = [f"{HOST}:dev{i}" for i in range(n_workers)]
    for i, w in enumerate(workers):
        store.register_worker(w, "device", HOST, device=i, queue=f"cuzk.dev.{HOST}.{i}",
                              gpu_name="NVIDIA H200")
        store.heartbeat(w, 3600, resident=["porep"],
                        extra={"gpu_mem_used_mb": 40000, "gpu_mem_total_mb": 143771, "gpu_util_pct": 97})
    busy = 0
    for j in range(n_jobs):
        job = f"job{j:04d}-{'0' * 24}"
        store.create_job(job, "porep", KIND, 5, None, [{"input": "{}"}] * n_parts)
        for i in range(n_parts):
            r = (j * n_parts + i) % 5
            if r == 0:
                continue  # pending
            store.synth_begin(job, i, 0)
            if r == 1:
                continue  # synthesizing
            store.synth_end(job, i, 0, f"/spool/{job}.{i}", 850.0)
            if r == 2 or busy >= n_workers:
                continue  # synth_done
            w = workers[busy]
            store.route(job, i, 0, w)
            g = store.gpu_start(w, job, i, 0)
            if r == 3:
                busy += 1  # stays in gpu: the worker proves it
                continue
            store.gpu_end(w, g.token, job, i, 0, 2100.0)  # finalizing
    for q in [f"cuzk.dev.{HOST}.{i}" for i in range(n_workers)] + ["cuzk.cpu"]:
        store.redis.lpush(queue_keys(q)[0], *["msg"] * 3)
    return time.perf_counter() - t0


def start_web(redis_url, port, workers, env_extra=None):
    env = dict(os.environ, CUZK_REDIS_URL=redis_url, CUZK_PREFIX="bench",
               CUZK_WEB_BIND=f"127.0.0.1:{port}", CUZK_WEB_WORKERS=str(workers),
               CUZK_WEB_LOGLEVEL="warning", PYTHONPATH=str(ROOT))
    env.pop("CUZK_CONFIG", None)
    env.update(env_extra or {})
    proc = subprocess.Popen([sys.executable, "-m", "cuzk_tasks", "web"], cwd=ROOT, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not come up")


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def latency(port, clients, per_client):
    out, size = [], [0]
    lock = threading.Lock()

    def run():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        for _ in range(per_client):
            t = time.perf_counter()
            c.request("GET", "/api/status")
            r = c.getresponse()
            body = r.read()
            mine.append((time.perf_counter() - t) * 1000)
            assert r.status == 200
            size[0] = len(body)
        with lock:
            out.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out, size[0]


class Churn(threading.Thread):
    """10 transitions/s: a worker alternates gpu_end / gpu_start on spare partitions."""

    def __init__(self, store, rate=10.0):
        super().__init__(daemon=True)
        self.store, self.period, self.stop_ev = store, 1.0 / rate, threading.Event()

    def run(self):
        w = f"{HOST}:churn"
        self.store.register_worker(w, "device", HOST, device=999, queue="cuzk.dev.churn")
        self.store.heartbeat(w, 3600)
        n = 0
        while not self.stop_ev.wait(self.period):
            job = f"churn{n}"
            self.store.create_job(job, "porep", KIND, 5, None, [{"input": "{}"}])
            n += 1


def sse_fanout(port, store, n_clients, rounds):
    arrivals = [dict() for _ in range(n_clients)]   # marker -> (t_transition, t_status)
    ready = threading.Barrier(n_clients + 1)
    stop_ev = threading.Event()
    markers = {}  # marker -> its event id (None until known)

    def client(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/api/events")
        r = c.getresponse()
        first = True
        event, eid = None, None
        while not stop_ev.is_set():
            line = r.fp.readline()
            if not line:
                break
            if line.startswith(b"event: "):
                event = line[7:].strip()
            elif line.startswith(b"id: "):
                eid = line[4:].strip().decode()
            elif line.startswith(b"data: "):
                now = time.time()
                if event == b"status" and first:
                    first = False
                    ready.wait()
                elif event == b"transition":
                    for m in list(markers):
                        if m.encode() in line and m not in arrivals[k]:
                            arrivals[k][m] = [now, None]
                elif event == b"status":
                    for m, mid in list(markers.items()):
                        got = arrivals[k].get(m)
                        if got and got[1] is None and mid and eid and _id_ge(eid, mid):
                            got[1] = now
        c.close()

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(n_clients)]
    [t.start() for t in threads]
    ready.wait()
    results = []
    for r in range(rounds):
        time.sleep(0.6)
        marker = f"fanout{r}x{time.time_ns()}"
        markers[marker] = None
        t0 = time.time()
        store.create_job(marker, "porep", KIND, 5, None, [{"input": "{}"}])
        markers[marker] = store.redis.xrevrange(store.keys.events(), count=1)[0][0]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if all(a.get(marker) and a[marker][1] for a in arrivals):
                break
            time.sleep(0.01)
        tr = [(a[marker][0] - t0) * 1000 for a in arrivals if a.get(marker)]
        st = [(a[marker][1] - t0) * 1000 for a in arrivals if a.get(marker) and a[marker][1]]
        results.append((len(tr), max(tr) if tr else None, len(st), max(st) if st else None))
    stop_ev.set()
    return results


def _id_ge(a, b):
    ta, sa = (int(x) for x in a.split("-"))
    tb, sb = (int(x) for x in b.split("-"))
    return (ta, sa) >= (tb, sb)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=50, help="per client")
    ap.add_argument("--sse-clients", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--web-workers", type=int, default=2)
    args = ap.parse_args()

    redis = LocalRedis()
    try:
        store = StateStore.from_url(redis.url, prefix="bench")
        secs = fill(store, args.workers, args.jobs, args.partitions)
        print(f"filled {args.workers} workers, {args.jobs} jobs x {args.partitions} partitions "
              f"through the state store in {secs:.1f} s")
        t = time.perf_counter()
        store.snapshot()
        print(f"one StateStore.snapshot() (Lua + decode): {(time.perf_counter() - t) * 1000:.1f} ms")
        port = _free_port()
        web = start_web(redis.url, port, args.web_workers)
        rows = []
        try:
            latency(port, args.clients, 10)  # warm up every gunicorn worker (first full read)
            lat, size = latency(port, args.clients, args.requests)
            rows.append(("/api/status, state still", f"{args.clients}", len(lat),
                         pct(lat, 50), pct(lat, 99), size))
            churn = Churn(store)
            churn.start()
            lat2, size = latency(port, args.clients, args.requests)
            churn.stop_ev.set()
            churn.join()
            rows.append(("/api/status, 10 transitions/s", f"{args.clients}", len(lat2),
                         pct(lat2, 50), pct(lat2, 99), size))
            fan = sse_fanout(port, store, args.sse_clients, args.rounds)
        finally:
            stop(web)
        print()
        print(f"| measurement | clients | samples | p50 ms | p99 ms | body bytes |")
        print(f"|---|---|---|---|---|---|")
        for name, c, n, p50, p99, size in rows:
            print(f"| {name} | {c} | {n} | {p50:.1f} | {p99:.1f} | {size:,} |")
        tr = [r[1] for r in fan if r[1] is not None]
        st = [r[3] for r in fan if r[3] is not None]
        n_all = sum(1 for r in fan if r[0] == args.sse_clients)
        n_all_st = sum(1 for r in fan if r[2] == args.sse_clients)
        print()
        print(f"| SSE fan-out ({args.sse_clients} clients, {args.rounds} state changes) | "
              f"rounds all delivered | slowest client, median round ms | slowest client, worst round ms |")
        print("|---|---|---|---|")
        if tr:
            print(f"| transition event | {n_all}/{args.rounds} | {statistics.median(tr):.1f} | {max(tr):.1f} |")
        if st:
            print(f"| status document including it | {n_all_st}/{args.rounds} | "
                  f"{statistics.median(st):.1f} | {max(st):.1f} |")
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
