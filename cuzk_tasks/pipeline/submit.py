"""submit: create the job (idempotent on request_id) with its synthesize messages."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import uuid

from ..errors import CuzkError, DeadlineRefused
from ..service import queues
from ..state import PartitionRun, serves
from . import request_checks
from .context import Context, log, ref_path



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
    given (:func:`submit_job` and every worker check them with :func:`ref_path`).  An input
    object nests at most ``defaults.MAX_INPUT_DEPTH`` levels.
    ``max_partitions`` / ``max_inline_bytes`` (None = no limit): the job's partition count
    and the inline inputs' total UTF-8 size, refused (CuzkError naming ``partitions``) as
    soon as they are exceeded -- the count before anything else.
    """
    partitions = request_checks.check_partitions_list(partitions)
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
            request_checks.check_input_depth(i, value)  # before json.dumps recurses into it
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
    return out


#: partitions a refused submit names at most (its error stays one readable line)
REFUSED_PARTITIONS_NAMED = 3


def input_misfit(circuit, input_map: dict, text: str) -> str | None:
    """Why the inline input ``text`` (JSON) cannot be ``circuit``'s, whose input map is
    ``input_map`` (``{signal: number of values}``), or None: not a JSON object, a signal
    that is no input, a count of values the signal does not have, a value that is no
    integer, or inputs missing -- what synthesize would fail the job with."""
    # lazy: the circom input reader is groth16's (no numpy, no wasmtime)
    from ..groth16.formats.circom_input import js_bigint, qualify

    try:
        inputs = json.loads(text)
    except ValueError as exc:
        return f"input: not JSON ({exc})"
    if not isinstance(inputs, dict):
        return f"input: expected a JSON object of input signals, got {type(inputs).__name__}"
    given: dict = {}
    try:
        qualify("", inputs, given, "input")
    except CuzkError as exc:
        return str(exc)
    known = ", ".join(f"{n} ({c})" for n, c in sorted(input_map.items()))
    for name, values in given.items():
        size = input_map.get(name)
        if size is None:
            return (f"input: signal {name!r:.80} is not an input of circuit {circuit!r} "
                    f"(its inputs, with their number of values: {known})")
        if len(values) != size:
            return (f"input: signal {name!r} has {len(values)} value(s), circuit {circuit!r} "
                    f"expects {size}")
        for j, value in enumerate(values):
            try:
                js_bigint(value, f"input signal {name!r}[{j}]")
            except (ValueError, CuzkError) as exc:
                return f"input: {exc}"
    missing = [f"{n} ({c})" for n, c in sorted(input_map.items()) if n not in given]
    if missing:
        return (f"input: missing input signal(s) of circuit {circuit!r}: {', '.join(missing)}")
    return None


def _refuse_partitions(ctx, circuit, parts) -> None:
    """CuzkError naming the partitions that cannot succeed, before anything is stored: an
    inline input over ``max_inline_input_bytes`` or one that does not fit the circuit's
    input map (where this process knows it: :func:`input_misfit`), a path outside the input
    roots (not opened).  Its text: each such partition's own message, the first
    :data:`REFUSED_PARTITIONS_NAMED`, and how many more."""
    refused = []
    input_map = ctx.input_maps.get(circuit)
    for i, p in enumerate(parts):
        message = ctx.settings.inline_input_error(i, p.get("input", ""))
        if message is None and input_map is not None and p.get("input"):
            message = input_misfit(circuit, input_map, p["input"])
        for field in ("input_ref", "witness_ref"):
            if message is None and p.get(field):
                try:
                    ref_path(ctx, field, p[field])
                except CuzkError as exc:
                    message = str(exc)
        if message:
            refused.append(f"partition {i}: {message}")
    if refused:
        more = len(refused) - REFUSED_PARTITIONS_NAMED
        raise CuzkError("; ".join(refused[:REFUSED_PARTITIONS_NAMED])
                        + (f"; and {more} more partition(s)" if more > 0 else ""))


# A Celery queue name an on_done callback may go to: kombu's Redis transport pushes it on a
# list of that name, so no ':' -- no key of the state store (``<prefix>:...``).
_ON_DONE_QUEUE = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
# Redis keys kombu's transport and Celery's result backend keep for themselves.
_RESERVED_QUEUE_PREFIXES = ("_kombu.", "unacked", "celery-task-meta-", "celery-taskset-meta-",
                            "chord-unlock")


def check_on_done_queue(queue, settings=None) -> str:
    """``on_done.queue`` checked: a Celery queue name (letters, digits, ``_ . -``, at most 200)
    that is no Redis key of kombu's or Celery's own, nor one of the state store's (they all
    hold a ':'), and, with ``settings``, none of this service's queues (its workers run no
    callback)."""
    if not isinstance(queue, str) or not _ON_DONE_QUEUE.match(queue):
        raise CuzkError(f"on_done.queue: expected a Celery queue name (1..200 letters, digits "
                        f"and _ . - only), got {queue!r:.200}")
    if queue.startswith(_RESERVED_QUEUE_PREFIXES):
        raise CuzkError(f"on_done.queue: {queue!r:.200} is a Redis key of the broker's own "
                        f"(names starting {', '.join(_RESERVED_QUEUE_PREFIXES)} are refused)")
    if settings is not None:
        device_head = settings.device_queue_pattern.split("{", 1)[0]
        if queue == settings.cpu_queue or (device_head and queue.startswith(device_head)):
            raise CuzkError(f"on_done.queue: {queue!r:.200} is a queue of this service (its "
                            f"workers run no callback); name your own service's queue")
    return queues.check_queue_name(queue)


def check_on_done(on_done, settings=None):
    """``on_done={"task": NAME, "queue": QUEUE}`` (or None) checked; CuzkError otherwise.
    ``settings``: also refuse the service's own queues (:func:`check_on_done_queue`)."""
    if on_done is None:
        return None
    if not isinstance(on_done, dict) or set(on_done) != {"task", "queue"}:
        shown = sorted(on_done) if isinstance(on_done, dict) else type(on_done).__name__
        raise CuzkError(f"on_done: expected an object with exactly the keys task and queue, got "
                        f"{shown!r:.200}")
    task = on_done["task"]
    if not isinstance(task, str) or not task.strip() or any(c.isspace() for c in task) \
            or len(task) > 200:
        raise CuzkError(f"on_done.task: expected a task name (a non-empty string without "
                        f"spaces), got {task!r:.200}")
    return {"task": task, "queue": check_on_done_queue(on_done["queue"], settings)}


def check_deadline(deadline_s):
    """``deadline_s`` (seconds from submit, a finite number > 0, or None) checked; CuzkError
    otherwise -- an infinite one once passed every check and then failed every finalize."""
    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) \
            or not 0 < deadline_s < math.inf:
        raise CuzkError(f"deadline_s: expected a finite number of seconds > 0 (or none), got "
                        f"{deadline_s!r:.100}")
    return float(deadline_s)


def request_digest(circuit, parts, priority, on_done, deadline_s) -> str:
    """What a submit asks for, as a digest kept with its request id: the same request id with
    another digest is refused (``StateStore.create_job``) instead of answering with the job
    of the first.  Of the fields as the caller gave them (before defaults), so a request
    delivered again -- a retry, a redelivery after its worker died -- matches itself."""
    text = json.dumps([circuit, parts, priority, on_done, deadline_s], sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _unserved(ctx: Context, circuit) -> str | None:
    """Why no live device worker can prove ``circuit`` -- device workers are up, but none of
    them advertises it in its registry (``circuits``) -- or None.  Only the configuration
    counts here: with no live device worker at all, or none with a live CPU worker on its
    host (host-affine stages), the job is accepted and waits, as for a restart."""
    devices = ctx.store.live_device_workers()
    if not devices or any(serves(w, circuit) for w in devices):
        return None
    return (f"no live device worker serves circuit {circuit!r} ({len(devices)} device "
            f"worker(s) online; add the circuit to their hosts' circuits file)")


def submit_job(ctx: Context, circuit, partitions, priority=None, request_id=None, job_id=None,
               on_done=None, deadline_s=None):
    """Create the job and queue its synthesize tasks; returns the job id (idempotent on request_id).

    ``on_done={"task": NAME, "queue": QUEUE}``: when the job ends, the task NAME is sent once
    to QUEUE with kwargs ``job_id``, ``state`` and ``proofs`` (null beyond
    ``ON_DONE_PROOFS_MAX_BYTES``: read them with cuzk.result) or ``error`` (sent by the
    step that ends the job, through the outbox).
    ``deadline_s``: the job fails "deadline exceeded (...)" this many seconds after submit
    (default: the circuit's ``deadline_s``, else none); past it no worker starts a stage of it.

    CuzkError, nothing stored, for what cannot succeed: a bad field (named), an unknown
    circuit, one no live device serves, an inline input over its limit, a path outside the
    input roots (the partitions named)."""
    # every field checked, each error naming it, before anything is stored
    circuit = request_checks.check_circuit(circuit)
    priority = request_checks.check_priority(priority)
    request_id = request_checks.check_request_id(request_id)
    on_done = check_on_done(on_done, ctx.settings)
    deadline_s = check_deadline(deadline_s)
    parts = normalize_partitions(partitions, ctx.settings.max_partitions_per_job,
                                 ctx.settings.max_inline_bytes_per_job)
    digest = request_digest(circuit, parts, priority, on_done, deadline_s) if request_id else ""
    # what cannot succeed is refused here, nothing stored: the caller's .get() raises it
    spec = ctx.settings.circuits.get(circuit)
    if spec is None:
        known = ", ".join(sorted(ctx.settings.circuits)) or "none configured"
        raise CuzkError(f"circuit: unknown circuit {circuit!r} (known circuits: {known})")
    _refuse_partitions(ctx, circuit, parts)
    unserved = _unserved(ctx, circuit)
    if unserved:
        raise CuzkError(f"circuit: {unserved}")
    if priority is None:
        priority = spec.priority
    if deadline_s is None:
        deadline_s = spec.deadline_s
    job_id = job_id or uuid.uuid4().hex
    # the first window's messages, sent at once, carry their small inline inputs; the held
    # ones do not (a big job's would hold its inputs twice in Redis)
    window = ctx.settings.job_window or len(parts)
    messages = [ctx.messages.synthesize(
        PartitionRun(job_id, i, 0, circuit, ctx.settings.priority(priority)),
        inline_input=p.get("input") if i < window else None)
        for i, p in enumerate(parts)]
    late = (on_done, ctx.messages.on_done(on_done)) if on_done else None
    # job_window: the store sends that many synthesize messages now and holds the rest,
    # released one per finished partition, so a big job does not starve the jobs after it
    try:
        job_id, created = ctx.store.create_job(job_id, circuit, spec.kind, priority, request_id,
                                               parts, messages=messages, on_done=late,
                                               deadline_s=deadline_s,
                                               window=ctx.settings.job_window,
                                               request_digest=digest)
    except DeadlineRefused as exc:  # decided with the enqueue: its estimate exceeds it
        raise DeadlineRefused.of(exc.eta_s, exc.ahead, exc.devices, deadline_s) from None
    if not created:
        log.info("request %s already submitted as job %s", request_id, job_id)
        return job_id
    log.info("job %s: %s x%d queued (priority %d)", job_id, circuit, len(parts), priority)
    return job_id


def submitted(ctx: Context, job_id) -> dict:
    """What a submit with ``details`` answers: ``{"job_id", "eta"}``, ``eta`` the job's
    estimate now (``StateStore.job_estimate``: ``eta_s``, ``eta_at``, ``position``,
    ``devices``) or None when nothing can be said yet."""
    return {"job_id": job_id, "eta": ctx.store.job_estimate(job_id)}
