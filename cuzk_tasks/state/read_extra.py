"""Extra reads for the web status page (webapp/): the status document incrementally
(:func:`status_delta`: workers, changed jobs, queues, counters, throughput series, device
activity) and phase-duration histograms.  Read-only except :func:`phase_histograms`, which
keeps its own hash (``Keys.web_histograms``).  Each function is one Lua script run
(consistent).
"""

from __future__ import annotations

import json

from .store import _script_text

DEFAULT_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)
PHASES = ("synth_ms", "gpu_ms", "finalize_ms")


def _script(store, name):
    cache = store.__dict__.setdefault("_extra_scripts", {})
    if name not in cache:
        cache[name] = store.redis.register_script(_script_text(name))
    return cache[name]


def last_event_id(store) -> str:
    """Id of the newest entry of the events stream ('' when empty)."""
    got = store.redis.xrevrange(store.keys.events(), count=1)
    return got[0][0] if got else ""


def phase_histograms(store, buckets_ms=DEFAULT_BUCKETS_MS, max_events: int = 5000) -> dict:
    """Fold new ``partition_done`` events into the shared histograms and return them:
    ``{phase: {"buckets": [(upper_ms, cumulative count)...,(inf, count)], "sum_ms", "count"}}``."""
    script = _script(store, "phase_histograms")
    key = store.keys.web_histograms()
    for _ in range(20):  # at most 20 x max_events per call
        n_read, flat = script(keys=[key], args=store._common + [json.dumps(list(buckets_ms)),
                                                               str(int(max_events))])
        if int(n_read) < max_events:
            break
    fields = {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)} if flat else {}
    out = {}
    for phase in PHASES:
        cum, buckets = 0, []
        for i, upper in enumerate(list(buckets_ms) + [float("inf")]):
            cum += int(fields.get(f"{phase}:{i}", 0))
            buckets.append((upper, cum))
        out[phase] = {"buckets": buckets, "sum_ms": float(fields.get(f"{phase}:sum", 0) or 0),
                      "count": int(fields.get(f"{phase}:count", 0))}
    return out


def _list(value) -> list:
    return value if isinstance(value, list) else []  # cjson: an empty table is {}


def status_delta(store, cursor: str | None, queues: dict, part_fields, recent_jobs: int = 20,
                 failures: int = 100, windows_s=(60, 300, 900), bucket_s: int = 10,
                 buckets: int = 90, lookback_s: float = 900, lookback_events: int = 20000,
                 max_delta_events: int = 5000) -> dict:
    """The snapshot, incrementally (``scripts/status_delta.lua``, one consistent run).

    ``cursor``: the event id the caller's copy of the jobs is current at (None = full read).
    Returns ``{"now", "last_id", "full", "workers" (as StateStore.all_workers), "active",
    "recent" (job ids), "jobs" {id: {"fields": dict, "parts": [list of values in
    part_fields order]}} (all on a full read, else only the jobs changed since cursor),
    "queues" {name: depth}, "counters" {name: int}, "throughput" [(window_s, n)],
    "failures" [dict], "series" [n per bucket, oldest first], "acts" [[type, at, worker,
    token, job, idx]] (device activity since cursor, or over ``lookback_s`` on a full read)}``.
    """
    from .store import _pairs, _worker

    qspec = [[name, [keys] if isinstance(keys, str) else list(keys)] for name, keys in queues.items()]
    raw = json.loads(_script(store, "status_delta")(keys=[], args=store._common + [
        cursor or "", str(int(max_delta_events)), str(int(recent_jobs)), str(int(failures)),
        json.dumps([int(w) for w in windows_s]), json.dumps(qspec), json.dumps(list(part_fields)),
        str(int(bucket_s)), str(int(buckets)), str(float(lookback_s)), str(int(lookback_events))]))
    now = float(raw["now"])
    jobs = {}
    for rec in _list(raw["jobs"]):
        jobs[rec["id"]] = {"fields": _pairs(rec["fields"]),
                           "parts": [[None if v is False else v for v in _list(p)] if isinstance(p, list)
                                     else [None] * len(part_fields) for p in _list(rec["parts"])]}
    return {
        "now": now, "last_id": raw["last_id"], "full": bool(raw["full"]),
        "workers": sorted((_worker(r, now) for r in _list(raw["workers"])),
                          key=lambda w: w["worker_id"]),
        "active": _list(raw["active"]), "recent": _list(raw["recent"]), "jobs": jobs,
        "queues": {name: int(depth) for name, depth in _list(raw["queues"])},
        "counters": {k: int(v) for k, v in _pairs(raw["counters"]).items()},
        "throughput": [(int(w), int(n)) for w, n in _list(raw["throughput"])],
        "failures": [json.loads(f) for f in _list(raw["failures"])],
        "series": [int(n) for n in _list(raw["series"])],
        "acts": _list(raw["acts"]),
    }
