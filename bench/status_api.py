"""Status page benchmark: /api/status latency and live-stream (SSE) fan-out under gunicorn.

    python bench/status_api.py [--workers 64] [--jobs 500] [--partitions 16]

Fills a private redis-server THROUGH THE STATE STORE (the real Lua transitions) with
64 device workers (each proving one partition) and 500 in-flight jobs of 16 partitions
in mixed states, serves the app with gunicorn as ``cuzk-tasks web`` does, then measures

* GET /api/status latency, p50/p99, with 8 concurrent keep-alive clients (one process
  each, as browsers are; a whole document per request, checked): with the state still,
  and while a churn thread makes 10 transitions/s (every one invalidates the cache, so
  those requests pay for a status read); each as a browser asks (``Accept-Encoding:
  gzip``, decompression inside the timed span) and uncompressed (``identity``);
* SSE fan-out: 50 clients on /api/events; per state change, the time from the change
  (just before the Lua call) until each client has received (a) the transition event and
  (b) a status document that includes it.  Targets: p99 <= 25 ms; all 50 within 250 ms.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import threading
import time
import zlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cuzk_tasks.service.queues import queue_keys  # noqa: E402
from cuzk_tasks.dev.local_redis import LocalRedis, free_port  # noqa: E402
from cuzk_tasks.state import PartitionRun, StateStore  # noqa: E402

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
            store.synth_begin(PartitionRun(job, i, 0))
            if r == 1:
                continue  # synthesizing
            store.synth_end(PartitionRun(job, i, 0), f"/spool/{job}.{i}", 850.0)
            if r == 2 or busy >= n_workers:
                continue  # synth_done
            w = workers[busy]
            store.route(PartitionRun(job, i, 0), w)
            g = store.prove_begin(w, PartitionRun(job, i, 0))
            if r == 3:
                busy += 1  # stays in proving: the worker proves it
                continue
            store.prove_end(w, g.token, PartitionRun(job, i, 0), 2100.0)  # finalizing
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


def _client(args):
    """One client (a process of its own, as browsers are): one keep-alive connection,
    ``n`` GETs of /api/status in a row; returns (latencies ms, document bytes, bytes sent)."""
    port, n, encoding = args
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Accept-Encoding": encoding}
    out, size, wire_size = [], 0, 0
    for _ in range(n):
        t = time.perf_counter()
        c.request("GET", "/api/status", headers=headers)
        r = c.getresponse()
        wire = r.read()
        body = zlib.decompress(wire, 47) if r.getheader("Content-Encoding") == "gzip" else wire
        out.append((time.perf_counter() - t) * 1000)
        assert r.status == 200 and body.startswith(b'{"version":') and body.endswith(b"}")
        size, wire_size = len(body), len(wire)
    c.close()
    return out, size, wire_size


class Clients:
    """``n`` client processes (as browsers are: no shared interpreter lock), forked once,
    each running exactly one ``_client`` per round, all rounds started together."""

    def __init__(self, n):
        ctx = multiprocessing.get_context("fork")
        self.pipes, self.procs = [], []
        for _ in range(n):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(target=self._serve, args=(theirs,), daemon=True)
            proc.start()
            self.pipes.append(ours)
            self.procs.append(proc)

    @staticmethod
    def _serve(pipe):
        while (args := pipe.recv()) is not None:
            pipe.send(_client(args))

    def run(self, args):
        for p in self.pipes:
            p.send(args)
        return [p.recv() for p in self.pipes]

    def close(self):
        for p in self.pipes:
            p.send(None)
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


def latency(clients, port, per_client, encoding="gzip"):
    """Every client GETs /api/status ``per_client`` times on its keep-alive connection, all
    at once.  ``encoding="gzip"`` asks as a browser does (``Accept-Encoding: gzip``) and the
    timed span includes decompressing the body; ``"identity"`` takes the plain bytes.
    Every body is checked to be a whole document."""
    got = clients.run((port, per_client, encoding))
    return [ms for lat, _, _ in got for ms in lat], got[0][1], got[0][2]


class Churn(threading.Thread):
    """10 transitions/s: a new device worker registers (a new queue), then a job of one
    partition is created every 0.1 s (each appends an event: the cached document is stale)."""

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
    arrivals = [dict() for _ in range(n_clients)]   # marker -> t_transition
    statuses = [[] for _ in range(n_clients)]       # (t, event id) of every status frame
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
                            arrivals[k][m] = now
                elif event == b"status" and eid:
                    # matched to markers later: a status may arrive before the marker's
                    # event id is known here
                    statuses[k].append((now, eid))
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
        mid = markers[marker]

        def status_at(k):  # when client k first got a status document including the change
            return next((t for t, eid in list(statuses[k]) if _id_ge(eid, mid)), None)

        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if all(marker in arrivals[k] and status_at(k) for k in range(n_clients)):
                break
            time.sleep(0.01)
        tr = [(a[marker] - t0) * 1000 for a in arrivals if marker in a]
        st = [(t - t0) * 1000 for t in map(status_at, range(n_clients)) if t is not None]
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
        port = free_port()
        # every benchmark client is 127.0.0.1: the per-client cap on live streams (issue 24)
        # would refuse all but 8 of them per process
        web = start_web(redis.url, port, args.web_workers,
                        {"CUZK_WEB_SSE_MAX_STREAMS_PER_CLIENT": str(max(8, args.sse_clients))})
        # the clients: one process each, forked now (before the churn thread exists)
        clients = Clients(args.clients)
        rows = []
        try:
            # warm up every gunicorn worker (its first read is a full one; gunicorn's
            # post_worker_init starts it at boot) and the clients' connections
            time.sleep(1.0)
            latency(clients, port, 10)
            for enc in ("gzip", "identity"):
                lat, size, wire = latency(clients, port, args.requests, enc)
                rows.append((f"/api/status, state still, {enc}", f"{args.clients}", len(lat),
                             pct(lat, 50), pct(lat, 99), size, wire))
            churn = Churn(store)
            churn.start()
            for enc in ("gzip", "identity"):
                lat, size, wire = latency(clients, port, args.requests, enc)
                rows.append((f"/api/status, 10 transitions/s, {enc}", f"{args.clients}", len(lat),
                             pct(lat, 50), pct(lat, 99), size, wire))
            churn.stop_ev.set()
            churn.join()
            fan = sse_fanout(port, store, args.sse_clients, args.rounds)
        finally:
            clients.close()
            stop(web)
        print()
        print("| measurement | clients | samples | p50 ms | p99 ms | document bytes | bytes sent |")
        print("|---|---|---|---|---|---|---|")
        for name, c, n, p50, p99, size, wire in rows:
            print(f"| {name} | {c} | {n} | {p50:.1f} | {p99:.1f} | {size:,} | {wire:,} |")
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
