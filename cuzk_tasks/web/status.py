"""The /api/status document (schema in docs/api.md) and its cached, single-flight reader.

Everything comes from the state store's read API: ``reads.status_delta`` (one Lua run,
``scripts/status_delta.lua``: workers, the jobs changed since the previous read, queues,
counters, throughput, failures, device activity) and ``reads.last_event_id``.
No Celery inspect/control call is ever made.

A read yields the document's JSON bytes once; every request is then answered with those
bytes (or their gzip, made once per document on first demand), never re-encoded.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import time

from cuzk_tasks.service.queues import queue_keys
from cuzk_tasks.settings.config import stage_queue_of
from cuzk_tasks.state import reads
from cuzk_tasks.state.codec import decode

SCHEMA_VERSION = 3
"""3: the device stage is named prove (partition state ``proving``, was ``gpu``; fields
``prove_ms``, ``t_prove_start``, ``t_prove_end``, were ``gpu_ms``, ``t_gpu_*``; counters
``prove_faults``, was ``gpu_faults``).  2: in /api/status, each partition is an array of values in ``partition_fields`` order
(the document's own list); 1 had an object per partition (2.3x the bytes at 500 x 16)."""

#: /api/status per partition (docs/api.md, ``partition_fields``): what the page draws, of
#: the fields the store reads (``reads.PARTITION_FIELDS``)
PART_FIELDS = ("idx", "state", "attempt", "worker", "synth_ms", "prove_ms", "finalize_ms",
               "t_synth_start", "t_prove_start", "t_prove_end", "t_done", "error")
JOB_FIELDS = ("id", "kind", "circuit", "curve", "priority", "state", "submitted_at", "started_at",
              "finished_at", "n_partitions", "n_done", "n_failed", "error", "deadline_s",
              "deadline_at")
GPU_FIELDS = {"gpu_mem_used_mb": "mem_used_mb", "gpu_mem_total_mb": "mem_total_mb",
              "gpu_util_pct": "util_pct"}


def _num(value):
    if value is None or value == "":
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else round(f, 3)


def _circuits(w: dict):
    try:
        names = json.loads(w.get("circuits") or "null")
    except ValueError:
        return None
    return names if isinstance(names, list) else None


def _cpu_hosts(workers: list):
    """Hosts with a live CPU worker that consumes its host's queue, or None when no CPU
    worker advertises one (the hosts share a spool: any CPU worker runs any stage)."""
    live = [w for w in workers if w.get("role") == "cpu" and w.get("host_queue")]
    if not live:
        return None
    return {w.get("host") for w in live if w.get("online")}


def _worker(w: dict, now: float, cpu_hosts=None) -> dict:
    proving = w.get("state") == "proving"
    since = w.get("since")
    gpu = {out: _num(w.get(name)) for name, out in GPU_FIELDS.items()}
    return {
        "id": w["worker_id"],
        "role": w.get("role"),
        "host": w.get("host"),
        "device": w.get("device"),
        "queue": w.get("queue"),
        "gpu_name": w.get("gpu_name") or None,
        "backend": w.get("backend") or None,
        "state": w.get("state"),
        "stored_state": w.get("stored_state"),
        "job": w.get("job") if proving else None,
        "partition": w.get("partition") if proving else None,
        "kind": w.get("kind") if proving else None,
        "since": since,
        "busy_s": round(now - since, 3) if (proving and since) else None,
        "heartbeat_age_s": round(w["hb_age_s"], 3) if w.get("hb_age_s") is not None else None,
        "heartbeat_ttl_left_ms": w.get("hb_ttl_left_ms"),
        "resident": list(w.get("resident") or []),
        "outstanding": w.get("outstanding", 0),
        "awaiting_synthesis": w.get("awaiting_synthesis", 0),
        "circuits": _circuits(w),
        # host-affine stages: a device on a host with no live CPU worker gets no partitions
        "no_cpu_worker": (w.get("role") == "device" and cpu_hosts is not None
                          and w.get("host") not in cpu_hosts),
        "pid": w.get("pid"),
        # what its heartbeat says it holds, running or reserved: stage messages, requests
        "holding": {"stages": len(w.get("holding") or []),
                    "requests": len(w.get("holding_requests") or [])},
        "gpu": gpu if any(v is not None for v in gpu.values()) else None,
    }


def _counters(raw: dict) -> dict:
    out = {"completed": {}, "failed": {}, "prove_faults": {}, "jobs_done": {}, "jobs_failed": {},
           "jobs_cancelled": {}, "requests_rejected": {}}
    for name, value in raw.items():
        group, _, kind = name.partition(":")
        if group in out:
            out[group][kind] = int(value)
    return out


def _timeline(activity: dict, workers: list, window_s: float) -> dict:
    now = activity["now"]
    start = activity["from"]
    devices = {}
    for bar in activity["bars"]:
        devices.setdefault(bar["worker"], []).append(
            {"job": bar["job"], "idx": bar["idx"], "start": round(bar["start"], 3),
             "end": round(bar["end"], 3) if bar["end"] is not None else None})
    out = []
    for w in workers:
        if w["role"] != "device" and w["id"] not in devices:
            continue
        bars = devices.pop(w["id"], [])
        busy = sum(min(b["end"] if b["end"] is not None else now, now) - max(b["start"], start)
                   for b in bars)
        out.append({"worker": w["id"], "bars": bars,
                    "duty_cycle": round(max(0.0, min(1.0, busy / window_s)), 4)})
    for worker, bars in sorted(devices.items()):  # bars of workers no longer registered
        out.append({"worker": worker, "bars": bars, "duty_cycle": None})
    return {"window_s": window_s, "from": round(start, 3), "to": round(now, 3),
            "truncated": activity["truncated"], "devices": out}


_INT_PART = {"idx", "attempt"}


def _part(fields, values) -> dict:
    out = {}
    for k, v in zip(fields, values):
        if v is None or v == "":
            out[k] = None
        elif k in _INT_PART:
            out[k] = int(v)
        elif k.startswith("t_"):
            out[k] = round(float(v), 3)  # Unix seconds to the ms, as every time here
        elif k.endswith("_ms"):
            out[k] = float(v)
        else:
            out[k] = v
    return out


class _Activity:
    """Device busy intervals, folded from prove_begin / prove_end / worker_idle events."""

    def __init__(self):
        self.bars, self.open_by_token, self.open_by_worker = [], {}, {}

    def _close(self, bar, at):
        if bar["end"] is None:
            bar["end"] = at
        self.open_by_token.pop(bar["token"], None)
        if self.open_by_worker.get(bar["worker"]) is bar:
            del self.open_by_worker[bar["worker"]]

    def apply(self, acts, now):
        for kind, at, worker, token, job, idx in acts:
            at = float(at) if at else now
            if kind == "prove_begin":
                prev = self.open_by_worker.get(worker)
                if prev is not None:  # the previous run on this device died without prove_end
                    self._close(prev, at)
                bar = {"worker": worker, "job": job, "idx": int(idx) if idx != "" else None,
                       "start": at, "end": None, "token": token}
                self.bars.append(bar)
                self.open_by_token[token] = bar
                self.open_by_worker[worker] = bar
            else:
                bar = self.open_by_token.get(token)
                if bar is not None:
                    self._close(bar, at)

    def prune(self, before):
        self.bars = [b for b in self.bars if b["end"] is None or b["end"] >= before]


class StatusModel:
    """The status document, kept current with ``reads.status_delta``: after one full
    read, each read fetches only the jobs named by events since the last one (plus workers,
    queues, counters, failures: small).  The merged result equals a full consistent read at
    the newest event: every job/partition change appends an event naming its job."""

    def __init__(self, store, cpu_queue, timeline_window_s=300, web_started_at=None,
                 recent_jobs=20, failures=100):
        self.store = store
        self.cpu_queue = cpu_queue
        self.window_s = float(timeline_window_s)
        self.web_started_at = web_started_at
        self.recent_jobs, self.failures = recent_jobs, failures
        self.cursor = None
        self.jobs = {}          # id -> (status dict, JSON bytes as sent)
        self.queue_names = {}
        self.activity = _Activity()

    def _queues(self):
        return {name: queue_keys(name) for name in
                [self.cpu_queue, stage_queue_of(self.cpu_queue), *sorted(self.queue_names)]}

    def read(self) -> tuple[dict, bytes, str]:
        """``(status, body, last event id)``: ``body`` is the /api/status document as sent
        (JSON bytes, partitions as arrays); ``status`` is the same document with each
        partition as an object keyed by ``partition_fields`` (templates, /metrics)."""
        d = reads.status_delta(
            self.store, self.cursor, self._queues(), PART_FIELDS, recent_jobs=self.recent_jobs,
            failures=self.failures, lookback_s=self.window_s + 600)
        missing = [j for j in d["active"] + d["recent"] if j not in d["jobs"] and j not in self.jobs]
        # device queues, and the hosts' CPU queues of host-affine stages
        new_queues = ({w["queue"] for w in d["workers"] if w.get("role") == "device" and w.get("queue")}
                      | {w["host_queue"] for w in d["workers"] if w.get("host_queue")}) \
            - set(self.queue_names)
        if (missing or new_queues) and not d["full"]:
            # a new device queue: read the same delta again with its depth (nothing of this
            # answer was applied yet); a job we never saw (cannot happen while every change
            # appends an event, but cheap to be safe about): one full read
            self.queue_names.update(dict.fromkeys(new_queues))
            if missing:
                self.cursor = None
            return self.read()
        self.queue_names.update(dict.fromkeys(new_queues))
        self._apply(d)
        return self._document(d)

    def _apply(self, d):
        """Merge a delta into the kept jobs and device activity."""
        if d["full"]:
            self.jobs = {}
            self.activity = _Activity()
        for job_id, rec in d["jobs"].items():
            job = {k: v for k, v in decode(rec["fields"]).items() if k in JOB_FIELDS}
            job = {k: job.get(k) for k in JOB_FIELDS}
            job["partitions"] = [_part(PART_FIELDS, vals) for vals in rec["parts"]]
            wire = dict(job, partitions=[[p[k] for k in PART_FIELDS] for p in job["partitions"]])
            self.jobs[job_id] = (job, json.dumps(wire, separators=(",", ":")).encode())
        keep = set(d["active"]) | set(d["recent"])
        for job_id in [j for j in self.jobs if j not in keep]:
            del self.jobs[job_id]
        self.cursor = d["last_id"]
        now = d["now"]
        self.activity.apply(d["acts"], now)
        self.activity.prune(now - self.window_s)

    def _document(self, d) -> tuple[dict, bytes, str]:
        now = d["now"]
        cpu_hosts = _cpu_hosts(d["workers"])
        workers = [_worker(w, now, cpu_hosts) for w in d["workers"]]
        online_since = [w.get("registered_at") for w in d["workers"]
                        if w.get("online") and w.get("registered_at")]
        bucket_s = 10
        activity = {"now": now, "from": now - self.window_s, "bars": self.activity.bars,
                    "truncated": False}
        head = {
            "version": SCHEMA_VERSION,
            "generated_at": now,
            "partition_fields": list(PART_FIELDS),
            "event_id": d["last_id"],
            "uptime_s": round(now - min(online_since), 3) if online_since else None,
            "web_uptime_s": round(time.time() - self.web_started_at, 3) if self.web_started_at else None,
            "workers": workers,
            "queues": [{"name": n, "depth": q} for n, q in d["queues"].items()],
            "counters": _counters(d["counters"]),
            "throughput": [{"window_s": w, "completed": n, "per_min": round(n * 60.0 / w, 3)}
                           for w, n in d["throughput"]],
            "throughput_series": {"bucket_s": bucket_s, "counts": d["series"]},
            "failures": d["failures"],
            "timeline": _timeline(activity, workers, self.window_s),
        }
        active = [self.jobs[j] for j in d["active"] if j in self.jobs]
        recent = [self.jobs[j] for j in d["recent"] if j in self.jobs]
        body = (json.dumps(head, separators=(",", ":"))[:-1].encode()
                + b',"jobs":[' + b",".join(b for _, b in active)
                + b'],"recent_jobs":[' + b",".join(b for _, b in recent) + b"]}")
        status = dict(head, jobs=[j for j, _ in active], recent_jobs=[j for j, _ in recent])
        return status, body, d["last_id"]


class _Entry:
    """One read: the document, its JSON bytes, a weak ETag, and (made on first demand)
    the gzip of the bytes."""

    __slots__ = ("status", "body", "event_id", "doc_id", "built", "fresh_as_of", "expires",
                 "etag", "_gz", "_gz_lock")

    def __init__(self, status, body, event_id, built, doc_id, etag):
        self.status, self.body, self.event_id, self.built = status, body, event_id, built
        self.doc_id, self.etag = doc_id, etag
        self.fresh_as_of = built
        self._gz, self._gz_lock = None, threading.Lock()
        # the earliest heartbeat expiry among online workers: the snapshot lies after it
        ttl = [w["heartbeat_ttl_left_ms"] for w in status["workers"]
               if w["state"] != "offline" and w["heartbeat_ttl_left_ms"] is not None]
        self.expires = built + (min(ttl) / 1000.0 if ttl else float("inf"))

    def gzipped(self) -> bytes:
        """``gzip(body)``, made once per document on first demand (level 1: ~1.3 ms and
        15x smaller for 770 KB)."""
        if self._gz is None:
            with self._gz_lock:
                if self._gz is None:
                    self._gz = gzip.compress(self.body, compresslevel=1, mtime=0)
        return self._gz


class StatusReader:
    """Single-flight, event-validated cache of the status document.

    A request is answered with a status read that began after the request arrived, or with
    an earlier read that is provably still current: the events stream has not moved since
    (every transition appends an event), no online worker's heartbeat can have expired, and
    it is younger than ``max_age_ms`` (queue depths and ages change without events).
    Concurrent requests share one read.
    """

    def __init__(self, store, cpu_queue, timeline_window_s=300, max_age_ms=1000,
                 web_started_at=None):
        self.store = store
        self.model = StatusModel(store, cpu_queue, timeline_window_s, web_started_at)
        self.max_age_s = max_age_ms / 1000.0
        self._cond = threading.Condition()
        self._busy = False
        self._entry: _Entry | None = None
        # weak ETags: unique per document of this process (a new read = a new document)
        self._etag_prefix = os.urandom(6).hex()
        self._seq = 0

    @property
    def cached(self) -> bool:
        """True once a document has been read (what a request may be answered from)."""
        return self._entry is not None

    def get(self) -> tuple[dict, bytes, str]:
        """``(status, json bytes, last event id)``."""
        e = self.entry()
        return e.status, e.body, e.doc_id

    def entry(self) -> _Entry:
        """The current document (see the class docstring), with its ETag and gzip."""
        asked = time.monotonic()
        with self._cond:
            while True:
                e = self._entry
                if e is not None and e.fresh_as_of >= asked:
                    return e
                if not self._busy:
                    self._busy = True
                    break
                self._cond.wait(timeout=5)
        entry = None
        try:
            checked = time.monotonic()
            event_id = reads.last_event_id(self.store)
            e = self._entry
            if (e is not None and e.event_id == event_id and checked - e.built < self.max_age_s
                    and checked < e.expires):
                e.fresh_as_of = checked
                entry = e
            else:
                status, body, read_id = self.model.read()
                # validated later against the id read BEFORE this read (conservative)
                self._seq += 1
                entry = _Entry(status, body, event_id, checked, read_id,
                               f'W/"{self._etag_prefix}.{self._seq}"')
            return entry
        finally:
            with self._cond:
                self._busy = False
                if entry is not None:
                    self._entry = entry
                self._cond.notify_all()
