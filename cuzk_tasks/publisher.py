"""Celery publishes the outbox's entries (docs/architecture.md, "The outbox").

:class:`CeleryPublisher` is the state store's ``publisher``: each entry (JSON, made by
:mod:`cuzk_tasks.messages`) becomes one ``app.send_task(...)`` -- Celery builds the
message, kombu serializes it and its transport sends it, with the app's settings (priority
steps, task events, tracing headers when instrumented).  An entry the broker cannot take
now (unreachable, busy, full) stays in the outbox for the sweeper; one that can never be
sent (bad JSON, a queue name the broker refuses) is logged and dropped, so it is not tried
for ever.
"""

from __future__ import annotations

import contextvars
import json
import logging
import queue
import threading

from .redis_url import is_outage

log = logging.getLogger("cuzk_tasks.publisher")


def send_options(entry: dict) -> dict:
    """``app.send_task`` keyword arguments of an outbox entry."""
    options = {"args": entry.get("args") or (), "kwargs": entry.get("kwargs") or {},
               "queue": entry["queue"], "priority": int(entry.get("priority") or 0),
               # the state store holds progress and results: no result subscription per send
               "ignore_result": True}
    if entry.get("expires_s"):
        options["expires"] = float(entry["expires_s"])  # seconds from the send
    if entry.get("argsrepr"):
        options["argsrepr"] = entry["argsrepr"]
    return options


class CeleryPublisher:
    """The ``publisher`` of :class:`cuzk_tasks.state.StateStore`: publishes ``[(id, entry
    JSON), ...]`` in order with ``app.send_task``, then calls ``done`` with the ids done with
    (published, or dropped as unsendable).  Stops at the first outage: that entry and the
    ones after it stay for the sweeper (``StateStore.publish_overdue``)."""

    def __init__(self, app):
        self.app = app

    def __call__(self, entries, done_fn) -> None:
        done_fn(self.send(entries))

    def send(self, entries) -> list:
        """Publish ``entries``; the ids done with."""
        done = []
        for entry_id, text in entries:
            try:
                entry = json.loads(text)
                self.app.send_task(entry["task"], **send_options(entry))
            except Exception as exc:  # noqa: BLE001 - kombu and redis-py raise many kinds
                if _is_outage(exc):
                    log.warning("broker unavailable (%s: %s): %d message(s) left in the outbox "
                                "for the sweeper", type(exc).__name__, exc,
                                len(entries) - len(done))
                    break
                log.error("outbox entry %s cannot be sent, dropped: %s: %s", entry_id,
                          type(exc).__name__, exc)
            done.append(entry_id)
        return done


class BackgroundPublisher:
    """A publisher that hands the entries to a thread of its own, which publishes them with
    ``inner`` (a :class:`CeleryPublisher`) in order: the step that added them returns at once.
    A device worker's: its gpu_end then costs the device one Redis round trip between two
    partitions, not Celery's publish path too.  Entries still queued when the process dies
    are in the outbox; a sweeper publishes them."""

    def __init__(self, inner):
        self.inner = inner
        self._queue = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()

    def __call__(self, entries, done_fn) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:  # started in the process that publishes (after fork)
                    self._thread = threading.Thread(target=self._run, name="cuzk-publisher",
                                                    daemon=True)
                    self._thread.start()
        # the caller's context (an OpenTelemetry span, say) goes with them to the thread
        self._queue.put((contextvars.copy_context(), entries, done_fn))

    def _run(self):
        while True:
            context, entries, done_fn = self._queue.get()
            try:
                context.run(self.inner, entries, done_fn)
            except Exception:  # noqa: BLE001 - the outbox keeps them; the thread goes on
                log.exception("publishing %d outbox message(s) failed; a sweeper sends them",
                              len(entries))


def _is_outage(exc) -> bool:
    """kombu's OperationalError (the broker unreachable after Celery's publish retries) or an
    outage reply of Redis (BUSY, OOM, READONLY, ...: :func:`cuzk_tasks.redis_url.is_outage`)."""
    # lazy: kombu is loaded by whoever holds a Celery app, the only caller
    from kombu.exceptions import OperationalError

    seen = exc
    while seen is not None:
        if isinstance(seen, (OperationalError, ConnectionError, TimeoutError)) or is_outage(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
