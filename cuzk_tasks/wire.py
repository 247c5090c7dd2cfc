"""Celery task messages as kombu's Redis transport stores them, filled in without Celery.

Why: the state store enqueues the next stage's message inside the Lua transition that
makes it due (``create_job`` queues synthesize, ``synth_end``/``route`` queue prove_start
on the device it chose, ``gpu_end`` queues finalize).  The transition and the publish
are then one atomic step -- no process can die between "routed" and "sent" and strand a
partition -- and one Redis round trip instead of a transition plus Celery's publish path
(docs/architecture.md, "Enqueue inside the transition").

The format is Celery's task message protocol 2 (docs.celeryq.dev, "Message Protocol")
inside kombu's Redis envelope (a JSON object with the body base64-encoded, pushed with
LPUSH on the list of the queue's priority step).  Nothing of it is written here by hand:
Celery renders one message per task once per process (:class:`EnvelopeTemplate`, made by
:mod:`cuzk_tasks.message_templates` through ``app.send_task`` on a capturing connection), and
a message is that template with only what differs between two messages filled in -- ids,
body, priority, routing key, the log reprs.  ``tests/test_wire.py`` checks the result
against what ``app.send_task`` pushes to a real Redis, and the end-to-end tests run real
Celery workers on these messages.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import re
import time
import uuid

from .errors import CuzkError
from .task_names import STAGE_TASKS, TASK_FINALIZE, TASK_SYNTHESIZE

#: Priority steps of the Redis transport: 0 is served first, 9 last.
PRIORITY_STEPS = list(range(10))
#: Separator between a queue name and its priority step in Redis list keys.
PRIORITY_SEP = ":"

# Queue names end up inside JSON text and Redis keys the Lua side concatenates.
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.:@-]+$")
# Stands for the queue in a message whose queue a Lua script picks (see QueueLateMessage).
_QUEUE_SLOT = "\x00cuzk-queue-slot\x00"

# Stand for the base64 body of a message part of whose body is written when it is sent
# (LateBodyMessage), and for that part inside the body: its kwargs object or its args list.
_BODY_SLOT = "\x00cuzk-body-slot\x00"
_KWARGS_SLOT = "\x00cuzk-kwargs-slot\x00"
_ARGS_SLOT = "\x00cuzk-args-slot\x00"

_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}

#: Stands for a message's ``expires`` header, written when it is sent (an on_done callback's:
#: the step ending the job writes its send time + the TTL, ``_lib.lua`` ``send_on_done``,
#: which finds this JSON text in the message's tail).
EXPIRES_SLOT = "\x00cuzk-expires-slot\x00"


def check_queue_name(queue: str) -> str:
    if not isinstance(queue, str) or not _QUEUE_NAME.match(queue):
        raise CuzkError(f"queue name {queue!r}: expected letters, digits and . _ : @ - only")
    return queue


def priority_step(priority: int) -> int:
    """The transport's step for ``priority`` (the largest step <= priority, as kombu picks)."""
    priority = int(priority)
    return max([s for s in PRIORITY_STEPS if s <= priority] or [PRIORITY_STEPS[0]])


def queue_list_key(queue: str, priority: int) -> str:
    """The Redis list a message of ``priority`` on ``queue`` is pushed to."""
    step = priority_step(priority)
    return queue if step == 0 else f"{queue}{PRIORITY_SEP}{step}"


def queue_keys(queue: str) -> list[str]:
    """Every Redis list of ``queue`` (one per priority step), served in this order."""
    return [queue_list_key(queue, step) for step in PRIORITY_STEPS]


#: kombu's Redis transport: the hash of delivered, not yet acknowledged messages (delivery
#: tag -> JSON ``[envelope, exchange, routing key]``); a worker's restore puts them back.
UNACKED_KEY = "unacked"
#: ... and its index (sorted set: delivery tag -> Unix time of the delivery).
UNACKED_INDEX_KEY = "unacked_index"


def stage_partition(task: str, args, kwargs) -> tuple[str, int, int] | None:
    """``(job id, partition idx, attempt)`` that a stage task's call names -- synthesize
    ``(job, idx, attempt=0)``, prove_start ``(job, idx, attempt, ...)``, finalize
    ``({"job", "idx", "attempt", ...},)`` -- or None for any other task.  Workers report the
    stages they hold by it (the stage lease, docs/architecture.md)."""
    if task not in STAGE_TASKS:
        return None
    try:
        args, kwargs = list(args or ()), dict(kwargs or {})
        if task == TASK_FINALIZE:
            started = args[0] if args else kwargs["started"]
            return str(started["job"]), int(started["idx"]), int(started["attempt"])
        job, idx = args[0], int(args[1])
        if task == TASK_SYNTHESIZE:
            attempt = args[2] if len(args) > 2 else kwargs.get("attempt", 0)
        else:
            attempt = args[2] if len(args) > 2 else kwargs["attempt"]
        return str(job), idx, int(attempt or 0)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def message_partition(envelope_text: str) -> tuple[str, str, int, int] | None:
    """``(task, job id, partition idx, attempt)`` of a stage message of ours in kombu's
    envelope (:func:`stage_partition`), or None for any other message."""
    try:
        envelope = json.loads(envelope_text)
        task = envelope["headers"]["task"]
        args, kwargs = json.loads(base64.b64decode(envelope["body"]))[:2]
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    found = stage_partition(task, args, kwargs)
    return None if found is None else (task, *found)


def _body_text(args, kwargs) -> str:
    """Celery protocol 2's body: ``[args, kwargs, embed]`` as JSON."""
    return json.dumps([list(args), dict(kwargs or {}), _EMBED])


@dataclasses.dataclass(frozen=True)
class EnvelopeTemplate:
    """One task's message as Celery rendered it (kombu's envelope, a JSON-able dict);
    :meth:`fill` makes a message of it.  Every header and property but the filled ones is
    kept as rendered (:data:`FILLED_HEADERS`, :data:`FILLED_PROPERTIES`)."""

    envelope: dict

    #: what differs between two messages of one task (the rest is the task's, or the process's)
    FILLED_HEADERS = frozenset({"task", "id", "root_id", "argsrepr", "kwargsrepr"})
    FILLED_PROPERTIES = frozenset({"correlation_id", "delivery_tag", "priority", "delivery_info",
                                   "argsrepr", "kwargsrepr"})

    def fill(self, task: str, args, kwargs, queue: str, priority: int, argsrepr: str | None,
             kwargsrepr: str | None, body: str | None = None) -> dict:
        """The envelope of one message.  ``body``: the envelope's ``body`` text as is (a
        slot); None: Celery protocol 2's ``[args, kwargs, embed]`` as JSON, base64."""
        task_id = str(uuid.uuid4())
        if body is None:
            body = base64.b64encode(_body_text(args, kwargs).encode("utf-8")).decode("ascii")
        argsrepr = argsrepr if argsrepr is not None else repr(tuple(args))
        kwargsrepr = kwargsrepr if kwargsrepr is not None else repr(dict(kwargs or {}))
        # copies of the three dicts filled in; everything nested below them is only read
        # (every caller serializes the envelope at once), so it is shared, not deep-copied
        envelope = dict(self.envelope, body=body)
        envelope["headers"] = dict(self.envelope["headers"], task=task, id=task_id,
                                   root_id=task_id, argsrepr=argsrepr, kwargsrepr=kwargsrepr)
        props = envelope["properties"] = dict(self.envelope["properties"])
        props.update(correlation_id=task_id, delivery_tag=str(uuid.uuid4()), priority=int(priority))
        props["delivery_info"] = dict(props.get("delivery_info") or {}, routing_key=queue)
        for name, value in (("argsrepr", argsrepr), ("kwargsrepr", kwargsrepr)):
            if name in props:  # kombu copies them there too (5.4 on)
                props[name] = value
        return envelope


@dataclasses.dataclass(frozen=True)
class QueuedMessage:
    """A message for one known queue: LPUSH ``payload`` onto ``list_key``."""

    list_key: str
    payload: str


@dataclasses.dataclass(frozen=True)
class QueueLateMessage:
    """A message whose queue a Lua script chooses: the payload is
    ``head .. <queue as a JSON string> .. tail``, pushed on ``<queue>`` or
    ``<queue>:<step>`` (``step`` > 0)."""

    head: str
    tail: str
    step: int


def task_message(template: EnvelopeTemplate, task: str, args=(), kwargs=None, *, queue: str,
                 priority: int, argsrepr: str | None = None,
                 kwargsrepr: str | None = None) -> QueuedMessage:
    """The message ``app.send_task(task, args, kwargs, queue=queue, priority=priority)`` would
    push, from ``template`` (the task's, rendered by Celery)."""
    envelope = template.fill(task, args, kwargs, check_queue_name(queue), priority, argsrepr,
                             kwargsrepr)
    return QueuedMessage(queue_list_key(queue, priority), json.dumps(envelope))


def _split_once(text: str, slot: str) -> tuple[str, str]:
    head, sep, tail = text.partition(json.dumps(slot))
    if not sep or json.dumps(slot) in tail:
        raise AssertionError("a slot must appear exactly once in the envelope")
    return head, tail


def task_message_any_queue(template: EnvelopeTemplate, task: str, args=(), kwargs=None, *,
                           priority: int, argsrepr: str | None = None,
                           kwargsrepr: str | None = None) -> QueueLateMessage:
    """As :func:`task_message`, for a queue picked later (by the ``route`` transition)."""
    text = json.dumps(template.fill(task, args, kwargs, _QUEUE_SLOT, priority, argsrepr,
                                    kwargsrepr))
    head, tail = _split_once(text, _QUEUE_SLOT)
    return QueueLateMessage(head, tail, priority_step(priority))


def fill_queue(message: QueueLateMessage, queue: str) -> QueuedMessage:
    """What the Lua side does with a :class:`QueueLateMessage` (used by tests and the
    fallback publish)."""
    check_queue_name(queue)
    return QueuedMessage(queue_list_key(queue, message.step),
                         message.head + json.dumps(queue) + message.tail)


@dataclasses.dataclass(frozen=True)
class LateBodyMessage:
    """A message one part of whose body is written when it is sent: its kwargs object (a
    job's ``on_done`` callback, whose kwargs hold the job's outcome; a Lua script writes
    them) or its args list (finalize, whose one argument is the prove_start result: the rest
    is rendered before the device's work, so sending it after is one JSON dump, one base64
    and a join).  The sender builds ``body = body_head .. <the part as JSON> .. body_tail``
    and pushes ``head .. '"' .. base64(body) .. '"' .. tail`` onto ``list_key``
    (:func:`fill_body`)."""

    list_key: str
    head: str
    tail: str
    body_head: str
    body_tail: str
    #: > 0: the ``expires`` header is :data:`EXPIRES_SLOT` in ``tail``, written as the send
    #: time plus this many seconds (a Celery consumer discards the message after it)
    expires_s: float = 0

    def to_json(self) -> str:
        """The parts as a JSON array, as the state store keeps them for its script (a sixth,
        ``expires_s``, only when > 0)."""
        parts = [self.list_key, self.head, self.tail, self.body_head, self.body_tail]
        return json.dumps(parts + [self.expires_s] if self.expires_s > 0 else parts)


def _late_body(template: EnvelopeTemplate, task: str, body: list, slot: str, *, queue: str,
               priority: int, argsrepr: str, kwargsrepr: str | None,
               expires_s: float = 0) -> LateBodyMessage:
    """The message of ``task`` whose Celery protocol 2 body is ``body`` with ``slot`` in
    the place of the part written later (and, ``expires_s`` > 0, its ``expires`` header)."""
    check_queue_name(queue)
    body_head, body_tail = _split_once(json.dumps(body), slot)
    envelope = template.fill(task, (), {}, queue, priority, argsrepr, kwargsrepr, body=_BODY_SLOT)
    if expires_s > 0:
        envelope["headers"]["expires"] = EXPIRES_SLOT
    head, tail = _split_once(json.dumps(envelope), _BODY_SLOT)
    if expires_s > 0 and json.dumps(EXPIRES_SLOT) not in tail:
        raise AssertionError("the expires slot must follow the body in the envelope")
    return LateBodyMessage(queue_list_key(queue, priority), head, tail, body_head, body_tail,
                           float(expires_s) if expires_s > 0 else 0)


def task_message_late_kwargs(template: EnvelopeTemplate, task: str, *, queue: str,
                             priority: int = 0, kwargsrepr: str | None = None,
                             expires_s: float = 0) -> LateBodyMessage:
    """As :func:`task_message` with no args, for kwargs a Lua script fills in later
    (:func:`fill_body` does the same in Python); ``expires_s`` > 0: the message expires
    that long after it is sent."""
    # as _body_text((), kwargs) writes it, the kwargs object a slot
    return _late_body(template, task, [[], _KWARGS_SLOT, _EMBED], _KWARGS_SLOT, queue=queue,
                      priority=priority, argsrepr="()", kwargsrepr=kwargsrepr,
                      expires_s=expires_s)


def task_message_late_args(template: EnvelopeTemplate, task: str, kwargs=None, *, queue: str,
                           priority: int, argsrepr: str) -> LateBodyMessage:
    """As :func:`task_message`, for args known only when it is sent (:func:`fill_args`)."""
    # as _body_text(args, kwargs) writes it, the args list a slot
    return _late_body(template, task, [_ARGS_SLOT, dict(kwargs or {}), _EMBED], _ARGS_SLOT,
                      queue=queue, priority=priority, argsrepr=argsrepr,
                      kwargsrepr=repr(dict(kwargs or {})))


def expires_text(unix_time: float) -> str:
    """``expires`` as ``_lib.lua`` ``iso_utc`` writes it: UTC, whole seconds
    (``2026-12-03T08:15:00+00:00``), which Celery parses and which sorts as text."""
    return datetime.datetime.fromtimestamp(int(unix_time), datetime.timezone.utc).isoformat()


def fill_body(message: LateBodyMessage, part_json: str, now: float | None = None) -> QueuedMessage:
    """The message with its late part (JSON text) written in -- and its ``expires``, ``now``
    (Unix time, default the clock) + ``expires_s`` -- : what the Lua side does with an
    on_done message, and what :func:`fill_args` does."""
    body = message.body_head + part_json + message.body_tail
    encoded = base64.b64encode(body.encode("utf-8")).decode("ascii")
    tail = message.tail
    if message.expires_s > 0:
        now = time.time() if now is None else now
        tail = tail.replace(json.dumps(EXPIRES_SLOT),
                            json.dumps(expires_text(now + message.expires_s)), 1)
    return QueuedMessage(message.list_key, message.head + json.dumps(encoded) + tail)


def fill_args(message: LateBodyMessage, args) -> QueuedMessage:
    """The message of :func:`task_message_late_args` with its ``args`` written in."""
    return fill_body(message, json.dumps(list(args)))
