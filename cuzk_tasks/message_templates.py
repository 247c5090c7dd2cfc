"""Celery renders the task messages the Lua transitions push (cuzk_tasks/wire.py).

A transition that makes the next stage due pushes that stage's Celery message itself, in
the same atomic step (docs/architecture.md, "Enqueue inside the transition").  So the
message must exist before the transition runs, as bytes -- and those bytes are Celery's and
kombu's format, which this project must not copy by hand.  :func:`render` has Celery build
one message of a task through its own path (``app.send_task``: ``app.amqp``'s protocol-2
message, kombu's producer serialization and its virtual transport's envelope) on an
in-memory kombu connection, and captures it instead of sending it.  The captured envelope
is the task's :class:`~cuzk_tasks.wire.EnvelopeTemplate`; wire fills in only ids, body,
priority and routing key per message.

:func:`check` runs at worker start: a header or property this project does not know --
a newer Celery or kombu that added something per message -- stops the worker with a clear
error instead of sending messages that might be wrong.  It was written for the versions
of :data:`CHECKED_WITH`, which pyproject.toml pins.
"""

from __future__ import annotations

import threading

from . import wire
from .errors import ConfigError
from .task_names import STAGE_TASKS

#: the Celery and kombu releases the check below was written and tested for
CHECKED_WITH = "celery >= 5.3, < 5.8 and kombu >= 5.3, < 5.8"
#: headers and properties the same for every message of a task in one process (rendered)
STATIC_HEADERS = frozenset({"lang", "shadow", "eta", "expires", "group", "group_index",
                            "retries", "timelimit", "parent_id", "origin", "ignore_result",
                            "replaced_task_nesting", "stamped_headers", "stamps"})
STATIC_PROPERTIES = frozenset({"reply_to", "delivery_mode", "body_encoding"})
ENVELOPE_FIELDS = frozenset({"body", "content-encoding", "content-type", "headers",
                             "properties"})

_PROBE_QUEUE = "cuzk.template-probe"
_PROBE_ID = "00000000-0000-4000-8000-00000000c0de"


def render(app, task: str) -> wire.EnvelopeTemplate:
    """The envelope ``app.send_task(task, ...)`` makes, captured on a ``memory://``
    connection (kombu's virtual transport writes the envelope the Redis transport stores;
    nothing reaches a broker), and checked (:func:`check`)."""
    # lazy: kombu is loaded by whoever holds a Celery app; the pipeline imports this module
    # without one (the client's context, the tests')
    from kombu import Connection

    with Connection("memory://") as conn:
        app.send_task(task, args=(), kwargs={}, queue=_PROBE_QUEUE, priority=0,
                      connection=conn, ignore_result=True, task_id=_PROBE_ID)
        # kombu's virtual channel keeps the envelope as published: read it back
        envelope = conn.default_channel._get(_PROBE_QUEUE)  # noqa: SLF001 - see CHECKED_WITH
    template = wire.EnvelopeTemplate(envelope)
    check(template, task)
    return template


def check(template: wire.EnvelopeTemplate, task: str) -> None:
    """ConfigError unless every field of ``template`` is one wire fills per message or one
    known to be the same for every message (this module's docstring)."""
    env = template.envelope
    unknown = sorted(set(env) - ENVELOPE_FIELDS)
    unknown += [f"headers.{h}" for h in sorted(set(env.get("headers") or {})
                                                - STATIC_HEADERS - wire.EnvelopeTemplate.FILLED_HEADERS)]
    unknown += [f"properties.{p}" for p in sorted(set(env.get("properties") or {})
                                                   - STATIC_PROPERTIES
                                                   - wire.EnvelopeTemplate.FILLED_PROPERTIES)]
    if env.get("headers", {}).get("id") != _PROBE_ID or env.get("content-type") != "application/json":
        unknown.append("the rendered message does not carry the probe's task id as JSON")
    if unknown:
        # lazy: only this error message needs their versions (see render)
        import celery
        import kombu

        raise ConfigError(
            f"Celery {celery.__version__} / kombu {kombu.__version__} render a {task} message "
            f"with fields this cuzk-tasks does not know how to fill: {', '.join(unknown)}; it "
            f"was written for {CHECKED_WITH} (pip install the versions pyproject.toml pins)")


def check_app(app) -> None:
    """Render (and so check) the stage tasks' templates: a worker calls this at start, so an
    unknown Celery or kombu stops it before it takes a message."""
    for task in STAGE_TASKS:
        render(app, task)


class Templates:
    """Each task's template, rendered on first use and kept for the process."""

    def __init__(self, app):
        self.app = app
        self._lock = threading.Lock()
        self._by_task: dict[str, wire.EnvelopeTemplate] = {}

    def __call__(self, task: str) -> wire.EnvelopeTemplate:
        template = self._by_task.get(task)
        if template is None:
            if self.app is None:
                raise ConfigError("a task message needs a Celery app to render it "
                                  "(Context(app=cuzk_tasks.celery_app.create_app(settings)))")
            with self._lock:
                template = self._by_task.get(task)
                if template is None:
                    template = self._by_task[task] = render(self.app, task)
        return template
