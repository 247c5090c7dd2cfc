"""How the state store's Redis values read back as Python values: one place for the
decoding every read uses (the store's own reads, :mod:`.reads`, the web app).

Hash fields are strings in Redis; a read gives ints for counts and indexes, floats for
times (``t_*``, ``*_at``, ``since``, ``last_hb``) and durations (``*_ms``), lists for the
JSON list fields, and None for a blank.  Lua replies arrive as flat ``[k, v, ...]`` lists
(:func:`pairs`), and cjson writes an empty table as ``{}`` (:func:`as_list`).
"""

from __future__ import annotations

import json

from .enums import WorkerState

INT_FIELDS = frozenset({"n_partitions", "n_done", "n_failed", "priority", "idx", "attempt",
                        "deliveries", "redispatches", "lost_messages", "partition", "hb_ttl_ms",
                        "pid", "device_faults", "verify_faults", "device", "n_released",
                        "n_written", "reap_next", "synth_deliveries", "outage_retries",
                        "position", "n_proved", "eta_devices"})
FLOAT_FIELDS = frozenset({"since", "last_hb", "deadline_s", "eta_s"})
JSON_LIST_FIELDS = frozenset({"resident", "holding", "holding_requests"})


def decode_value(key: str, value):
    """One hash field's value as read (see the module docstring)."""
    if value is None or value is False or value == "":
        return None
    if key in INT_FIELDS:
        try:
            return int(value)
        except ValueError:
            return value
    if key in FLOAT_FIELDS or key.startswith("t_") or key.endswith("_ms") or key.endswith("_at"):
        try:
            return float(value)
        except ValueError:
            return value
    if key in JSON_LIST_FIELDS:
        try:
            return list(json.loads(value))
        except ValueError:
            return []
    return value


def decode(fields: dict) -> dict:
    """A whole hash as read."""
    return {k: decode_value(k, v) for k, v in fields.items()}


def pairs(flat) -> dict:
    """A flat ``[k1, v1, k2, v2, ...]`` list as a dict (cjson may encode an empty one as {})."""
    if not flat:
        return {}
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def as_list(value) -> list:
    """cjson encodes an empty Lua table as {} (redis) or [] (fakeredis)."""
    return value if isinstance(value, list) else []


def worker_record(rec: dict, now: float | None = None) -> dict:
    """A worker as the reads return it, from a Lua ``worker_record`` (``id``, ``fields``,
    ``hb_pttl``, ``outstanding``): its hash decoded, plus ``stored_state``, ``state``
    (offline once the heartbeat key expired), ``online``, ``hb_ttl_left_ms``,
    ``outstanding`` (partitions routed to it), ``awaiting_synthesis`` (of those, the ones
    placed on it that wait for their synthesize: host-affine stages), ``resident`` and,
    given ``now``, ``hb_age_s``."""
    fields = decode(pairs(rec["fields"]) if isinstance(rec["fields"], list) else rec["fields"])
    pttl = int(rec["hb_pttl"])
    online = pttl != -2
    stored = fields.get("state") or WorkerState.IDLE.value
    d = {"worker_id": rec["id"], **fields}
    d["stored_state"] = stored
    d["state"] = stored if online else WorkerState.OFFLINE.value
    d["online"] = online
    d["hb_ttl_left_ms"] = pttl if pttl >= 0 else None
    d["outstanding"] = int(rec["outstanding"])
    d["awaiting_synthesis"] = int(rec.get("awaiting_synthesis") or 0)
    d["resident"] = fields.get("resident") or []
    last = fields.get("last_hb")
    d["hb_age_s"] = (now - last) if (now is not None and last is not None) else None
    return d
