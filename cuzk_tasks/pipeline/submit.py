"""submit: create the job (idempotent on request_id) with its synthesize messages."""

from __future__ import annotations

import json
import os
import uuid

from .. import wire
from ..errors import CuzkError
from .context import Context, fail, log, ref_path



# --- job size limits (issue 24): refused before anything is written ---------------------

def check_partition_count(partitions, max_partitions):
    """CuzkError naming ``partitions`` when there are more than ``max_partitions`` (the
    ``max_partitions_per_job`` setting): checked first, before any partition is looked at."""
    if isinstance(partitions, (list, tuple)) and len(partitions) > max_partitions:
        raise CuzkError(f"partitions: {len(partitions)} partitions, over the limit of "
                        f"{max_partitions} per job (max_partitions_per_job); split the work "
                        "into several jobs")


def _inline_total_error(total, max_bytes, idx):
    return CuzkError(f"partitions: the inputs given by value reach {total} bytes at partition "
                     f"{idx}, over the limit of {max_bytes} bytes per job "
                     "(max_inline_bytes_per_job); pass them by reference (input_ref) or split "
                     "the job")


def normalize_partitions(partitions, max_partitions=None, max_inline_bytes=None):
    """Accept ``[{"input": dict|str} | {"input_ref": path} | {"witness_ref": path}, ...]``.

    A bare dict (an input object) or a string path ending in .wtns / .json is
    also accepted per partition.  Inputs by value are stored as JSON text; paths as
    given (:func:`submit_job` and every worker check them with :func:`ref_path`).
    ``max_partitions`` / ``max_inline_bytes`` (None = no limit): the job's partition count
    and the inline inputs' total UTF-8 size, refused (CuzkError naming ``partitions``) as
    soon as they are exceeded -- the count before anything else.
    """
    if isinstance(partitions, (dict, str)) or partitions is None:
        raise CuzkError("partitions must be a non-empty list")
    if max_partitions is not None:
        check_partition_count(partitions, max_partitions)
    inline_total = 0
    out = []
    for i, p in enumerate(partitions):
        if isinstance(p, str):
            p = {"witness_ref": p} if p.endswith(".wtns") else {"input_ref": p}
        if not isinstance(p, dict):
            raise CuzkError(f"partition {i}: expected an object, got {type(p).__name__}")
        keys = {"input", "input_ref", "witness_ref"}
        given = [k for k in keys if p.get(k) is not None]
        if not given:
            # a bare input object
            p = {"input": p}
            given = ["input"]
        if len(given) != 1 or set(p) - keys:
            raise CuzkError(f"partition {i}: give exactly one of input, input_ref, witness_ref "
                            f"(got {sorted(p)})")
        entry = {}
        if "input" in given:
            value = p["input"]
            entry["input"] = value if isinstance(value, str) else json.dumps(value)
            if max_inline_bytes is not None:
                # len() of the text first: its UTF-8 size is at least that (cheap early out)
                inline_total += len(entry["input"])
                if inline_total > max_inline_bytes:
                    raise _inline_total_error(inline_total, max_inline_bytes, i)
                inline_total += len(entry["input"].encode("utf-8")) - len(entry["input"])
                if inline_total > max_inline_bytes:
                    raise _inline_total_error(inline_total, max_inline_bytes, i)
        else:
            try:
                entry[given[0]] = os.fspath(p[given[0]])
            except TypeError:
                raise CuzkError(f"partition {i}: {given[0]}: expected a path string, got "
                                f"{type(p[given[0]]).__name__}") from None
        out.append(entry)
    if not out:
        raise CuzkError("a job needs at least one partition")
    return out


def _refused_refs(ctx, parts):
    """``{idx: message}`` of the partitions whose path lies outside the input roots."""
    refused = {}
    for i, p in enumerate(parts):
        for field in ("input_ref", "witness_ref"):
            if p.get(field):
                try:
                    ref_path(ctx, field, p[field])
                except CuzkError as exc:
                    refused[i] = str(exc)
    return refused


def check_on_done(on_done):
    """``on_done={"task": NAME, "queue": QUEUE}`` (or None) checked; CuzkError otherwise."""
    if on_done is None:
        return None
    if not isinstance(on_done, dict) or set(on_done) != {"task", "queue"}:
        raise CuzkError(f"on_done: expected an object with exactly the keys task and queue, got "
                        f"{on_done!r:.200}")
    task = on_done["task"]
    if not isinstance(task, str) or not task.strip() or any(c.isspace() for c in task):
        raise CuzkError(f"on_done.task: expected a task name (a non-empty string without "
                        f"spaces), got {task!r:.200}")
    try:
        wire.check_queue_name(on_done["queue"])
    except CuzkError as exc:
        raise CuzkError(f"on_done.queue: {exc}") from None
    return {"task": task, "queue": on_done["queue"]}


def check_deadline(deadline_s):
    """``deadline_s`` (seconds from submit, > 0, or None) checked; CuzkError otherwise."""
    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) \
            or not deadline_s > 0 or deadline_s != deadline_s:
        raise CuzkError(f"deadline_s: expected seconds > 0 (or none), got {deadline_s!r:.100}")
    return float(deadline_s)


def submit_job(ctx: Context, circuit, partitions, priority=None, request_id=None, job_id=None,
               on_done=None, deadline_s=None):
    """Create the job and queue its synthesize tasks; returns the job id (idempotent on request_id).

    ``on_done={"task": NAME, "queue": QUEUE}``: when the job ends, the task NAME is sent once
    to QUEUE with kwargs ``job_id``, ``state`` and ``proofs`` (null beyond
    ``ON_DONE_PROOFS_MAX_BYTES``: read them with cuzk.result) or ``error`` (pushed by the
    transition that ends the job, so it needs the broker to be the state store's Redis).
    ``deadline_s``: the job fails "deadline exceeded (...)" this many seconds after submit
    (default: the circuit's ``deadline_s``, else none); past it no worker starts a stage of it."""
    on_done = check_on_done(on_done)
    deadline_s = check_deadline(deadline_s)
    if on_done is not None and not ctx.enqueue_in_store:
        raise CuzkError("on_done needs the broker and the state store in the same Redis database "
                        "(the step that ends a job pushes the callback): broker_url is "
                        "not state_url")
    parts = normalize_partitions(partitions, ctx.settings.max_partitions_per_job,
                                 ctx.settings.max_inline_bytes_per_job)
    spec = ctx.settings.circuits.get(circuit)
    if priority is None:
        priority = spec.priority if spec else ctx.settings.default_priority
    priority = int(priority)
    if deadline_s is None and spec is not None:
        deadline_s = spec.deadline_s
    if not 0 <= priority <= 9:
        raise CuzkError(f"priority must be 0..9, got {priority}")
    rejected = {}  # partition -> the message it fails with
    for i, p in enumerate(parts):
        too_big = ctx.settings.inline_input_error(i, p.get("input", ""))
        if too_big:
            rejected[i] = too_big
            p["input"] = ""  # never store the oversized payload
    rejected.update(_refused_refs(ctx, parts))
    job_id = job_id or uuid.uuid4().hex
    kind = spec.kind if spec else "unknown"
    messages = []
    if spec is not None and not rejected:
        messages = [ctx.messages.synthesize(job_id, i, circuit, priority)
                    for i in range(len(parts))]
    late = (on_done, ctx.messages.on_done(job_id, on_done)) if on_done else None
    # job_window: the store queues that many synthesize messages now and holds the rest,
    # released one per finished partition, so a big job does not starve the jobs after it
    # (with the broker elsewhere every message is published below: no window)
    job_id, created = ctx.store.create_job(job_id, circuit, kind, priority, request_id, parts,
                                           messages=ctx.outbox(messages) or (), on_done=late,
                                           deadline_s=deadline_s,
                                           window=ctx.settings.job_window)
    if not created:
        log.info("request %s already submitted as job %s", request_id, job_id)
        return job_id
    if spec is None:
        known = ", ".join(sorted(ctx.settings.circuits)) or "none configured"
        fail(ctx, job_id, 0, 0, f"unknown circuit {circuit!r} (known circuits: {known})")
        return job_id
    if rejected:
        for i, message in rejected.items():
            fail(ctx, job_id, i, 0, message)
        return job_id
    for message in messages:
        ctx.publish_after(message)
    log.info("job %s: %s x%d queued (priority %d)", job_id, circuit, len(parts), priority)
    return job_id
