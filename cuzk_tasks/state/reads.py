"""The state store's read API beyond single records: the status of everything, read by ONE
Lua script (``scripts/status_delta.lua``, a consistent view), whole (:func:`snapshot`: the
CLI, the demo, the benchmarks) or incrementally (:func:`status_delta`: the web status page),
the newest event id, and the phase-duration histograms the transitions keep.  Read only.

The partition fields a read may return are named here once: :data:`PARTITION_FIELDS`
(every small field; input, proof and public are left out).  Which of them a reader shows is
the reader's choice, passed in: the web app's two subsets live with the documents they shape
(``cuzk_tasks/web/api.py``, ``cuzk_tasks/web/status.py``; docs/api.md).  The public status
document (``StateStore.job_status``: ``cuzk.status``, ``Client.status``, ``/api/jobs/<id>``)
carries only :data:`PUBLIC_JOB_FIELDS` and :data:`PUBLIC_PARTITION_FIELDS` (issue 48).
"""

from __future__ import annotations

import json

from ..settings import defaults
from .codec import as_list, decode, pairs, worker_record

PARTITION_FIELDS = (
    "idx", "state", "attempt", "deliveries", "redispatches", "worker", "token", "witness_ref",
    "synth_ms", "prove_ms", "finalize_ms", "t_created", "t_synth_start", "t_synth_end", "t_routed",
    "t_prove_start", "t_prove_end", "t_redispatched", "t_done", "t_end", "error",
)
#: partition fields no public read returns: a stage's ``token`` (the run a prove_end must
#: name: a reader holding it could end another worker's run) and ``witness_ref`` (a path on
#: the servers)
PRIVATE_PARTITION_FIELDS = ("token", "witness_ref")
#: the partition fields of the public status document (docs/api.md, docs/client.md)
PUBLIC_PARTITION_FIELDS = tuple(f for f in PARTITION_FIELDS if f not in PRIVATE_PARTITION_FIELDS)
#: the job-hash fields of the public status document (docs/api.md, docs/client.md): what the
#: caller asked for and how the job went.  Every other field of the hash is bookkeeping of
#: the transitions (request_digest, release_list, n_released, reap_*, result_*, ...), never
#: returned: a field is public only once it is named here and documented.
PUBLIC_JOB_FIELDS = (
    "id", "kind", "circuit", "curve", "priority", "state", "request_id", "submitted_at",
    "started_at", "finished_at", "n_partitions", "n_done", "n_failed", "error", "deadline_s",
    "deadline_at", "on_done", "on_done_sent_at", "on_done_error", "eta_s", "eta_at", "position",
)
PHASES = ("synth_ms", "prove_ms", "finalize_ms")
#: upper bounds (ms) of the phase histograms' buckets, +Inf implied: the list
#: ``_lib.lua`` ``PHASE_BUCKETS_MS`` counts into (tests/test_state_store.py compares them)
PHASE_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)


def last_event_id(store) -> str:
    """Id of the newest entry of the events stream ('' when empty)."""
    got = store.redis.xrevrange(store.keys.events(), count=1)
    return got[0][0] if got else ""


def phase_histograms(store) -> dict:
    """The phase-duration histograms ``finalize_end`` keeps (``Keys.phase_histograms``):
    ``{phase: {"buckets": [(upper_ms, cumulative count)..., (inf, count)], "sum_ms",
    "count"}}``, the same in every web process."""
    fields = store.redis.hgetall(store.keys.phase_histograms())
    out = {}
    for phase in PHASES:
        cum, buckets = 0, []
        for i, upper in enumerate(list(PHASE_BUCKETS_MS) + [float("inf")]):
            cum += int(fields.get(f"{phase}:{i}", 0))
            buckets.append((upper, cum))
        out[phase] = {"buckets": buckets, "sum_ms": float(fields.get(f"{phase}:sum", 0) or 0),
                      "count": int(fields.get(f"{phase}:count", 0))}
    return out


def status_delta(store, cursor: str | None, queues: dict, part_fields, recent_jobs: int = 20,
                 failures: int = 100, windows_s=(60, 300, 900), bucket_s: int = 10,
                 buckets: int = 90, lookback_s: float = 900, lookback_events: int = 20000,
                 max_delta_events: int = 5000,
                 parts_per_job: int = defaults.STATUS_PARTITIONS_PER_JOB) -> dict:
    """The status, incrementally (``scripts/status_delta.lua``, one consistent run).

    ``cursor``: the event id the caller's copy of the jobs is current at (None = full read).
    ``queues``: queue name -> Redis list keys whose lengths are summed (a bare string: one).
    Returns ``{"now", "last_id", "full", "workers" (as StateStore.all_workers), "active",
    "recent" (job ids), "jobs" {id: {"fields": dict, "parts": [list of values in
    part_fields order]}} (all on a full read, else only the jobs changed since cursor; the
    first ``parts_per_job`` partitions of each job, so the read stays short at any job size),
    "queues" {name: depth}, "counters" {name: int}, "throughput" [(window_s, n)],
    "failures" [dict], "series" [n per bucket, oldest first], "acts" [[type, at, worker,
    token, job, idx]] (device activity since cursor, or over ``lookback_s`` on a full read)}``.
    """
    qspec = [[name, [keys] if isinstance(keys, str) else list(keys)] for name, keys in queues.items()]
    # the script's named arguments (_lib.lua ARGS): how many, then name/value pairs
    named = {
        "cursor": cursor or "", "max_events": str(int(max_delta_events)),
        "recent_jobs": str(int(recent_jobs)), "failures": str(int(failures)),
        "windows": json.dumps([int(w) for w in windows_s]), "queues": json.dumps(qspec),
        "part_fields": json.dumps(list(part_fields)), "bucket_s": str(int(bucket_s)),
        "buckets": str(int(buckets)), "lookback_s": str(float(lookback_s)),
        "lookback_events": str(int(lookback_events)), "parts_per_job": str(int(parts_per_job))}
    flat = [text for item in named.items() for text in item]
    raw = json.loads(store.script("status_delta")(keys=[], args=store.common_args
                                                  + [str(len(named))] + flat))
    now = float(raw["now"])
    jobs = {}
    for rec in as_list(raw["jobs"]):
        jobs[rec["id"]] = {"fields": pairs(rec["fields"]),
                           "parts": [[None if v is False else v for v in as_list(p)]
                                     if isinstance(p, list) else [None] * len(part_fields)
                                     for p in as_list(rec["parts"])]}
    return {
        "now": now, "last_id": raw["last_id"], "full": bool(raw["full"]),
        "workers": sorted((worker_record(r, now) for r in as_list(raw["workers"])),
                          key=lambda w: w["worker_id"]),
        "active": as_list(raw["active"]), "recent": as_list(raw["recent"]), "jobs": jobs,
        "queues": {name: int(depth) for name, depth in as_list(raw["queues"])},
        "counters": {k: int(v) for k, v in pairs(raw["counters"]).items()},
        "throughput": [(int(w), int(n)) for w, n in as_list(raw["throughput"])],
        "failures": [json.loads(f) for f in as_list(raw["failures"])],
        "series": [int(n) for n in as_list(raw["series"])],
        "acts": as_list(raw["acts"]),
    }


def snapshot(store, queues: dict | None = None, recent_jobs: int = defaults.SNAPSHOT_RECENT_JOBS,
             failures: int = defaults.FAILURES_KEPT,
             windows_s=defaults.THROUGHPUT_WINDOWS_S) -> dict:
    """Everything a status panel shows, in one consistent read (a full :func:`status_delta`).

    Returns ``{"now", "workers", "jobs" (active, by submit time, each with "partitions",
    :data:`PARTITION_FIELDS`, the first ``STATUS_PARTITIONS_PER_JOB``), "recent_jobs" (finished, newest first), "queues" {name:
    depth}, "counters" {name: int}, "throughput" [{"window_s", "completed", "per_min"}],
    "failures" [dict, newest first]}``."""
    d = status_delta(store, None, queues or {}, PARTITION_FIELDS, recent_jobs=recent_jobs,
                     failures=failures, windows_s=windows_s, buckets=0, lookback_s=0,
                     lookback_events=0)

    def job(job_id):
        rec = d["jobs"][job_id]
        out = decode(rec["fields"])
        out["partitions"] = [decode(dict(zip(PARTITION_FIELDS, vals))) for vals in rec["parts"]]
        return out

    return {
        "now": d["now"], "workers": d["workers"],
        "jobs": [job(j) for j in d["active"] if j in d["jobs"]],
        "recent_jobs": [job(j) for j in d["recent"] if j in d["jobs"]],
        "queues": d["queues"], "counters": d["counters"],
        "throughput": [{"window_s": w, "completed": n, "per_min": n * 60.0 / w}
                       for w, n in d["throughput"]],
        "failures": d["failures"],
    }
