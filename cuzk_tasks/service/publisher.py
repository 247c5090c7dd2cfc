"""Celery publishes the outbox's entries (docs/architecture.md, "The outbox").

:class:`CeleryPublisher` is the state store's ``publisher``: each entry (JSON, made by
:mod:`cuzk_tasks.service.messages`) becomes one ``app.send_task(...)`` -- Celery builds the
message, kombu serializes it and its transport sends it, with the app's settings (priority
steps, task events, tracing headers when instrumented).  An entry the broker cannot take
now (unreachable, busy, full) stays in the outbox for the sweeper; one that can never be
sent (bad JSON, a queue name the broker refuses) is logged and dropped, so it is not tried
for ever.
"""

from __future__ import annotations

import json
import logging
import time

from ..settings import defaults
from ..settings.redis_url import is_outage
from . import tracing
from .periodic import PeriodicThread

log = logging.getLogger("cuzk_tasks.service.publisher")


def send_options(entry: dict) -> dict:
    """``app.send_task`` keyword arguments of an outbox entry.  ``queue``, ``priority``,
    ``args`` and ``kwargs`` are in every entry (:mod:`cuzk_tasks.service.messages`, the Lua steps
    that put a queue or a callback's kwargs in front): one without them cannot be sent."""
    options = {"args": entry["args"], "kwargs": entry["kwargs"],
               "queue": entry["queue"], "priority": int(entry["priority"]),
               # the state store holds progress and results: no result subscription per send
               "ignore_result": True}
    if entry.get("expires_s"):
        options["expires"] = float(entry["expires_s"])  # seconds from the send
    for field in ("root_id", "parent_id"):  # its recording task's (service/lineage.py)
        if entry.get(field):
            options[field] = entry[field]
    for log_form in ("argsrepr", "kwargsrepr"):
        if entry.get(log_form):
            options[log_form] = entry[log_form]
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
                with tracing.attached(entry.get("trace")):  # the job's trace, if recorded
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


class OutboxRelay(PeriodicThread):
    """A CPU worker's thread that publishes what devices' steps handed on (a relay store's
    step puts its outbox entries on the relay list: ``StateStore.relay``): it waits on the
    list, has Celery publish each entry as it comes (``yield_s`` later), then deletes it from
    the outbox.  A device's pool process so spends no time on Celery's publish path between
    two partitions; an entry whose relay died after taking it is published by a sweeper after
    OUTBOX_GRACE_S."""

    thread_name = "cuzk-outbox-relay"

    def __init__(self, store, app, wait_s: float = 1.0, batch: int = 100,
                 yield_s: float = defaults.RELAY_YIELD_S):
        super().__init__(0.0)  # each step blocks on the list for up to wait_s
        self.store = store
        self.publisher = CeleryPublisher(app)
        self.wait_s = wait_s
        #: how long a taken item waits before its publish (defaults.RELAY_YIELD_S: the
        #: device that handed it over starts its next partition meanwhile)
        self.yield_s = yield_s
        #: the most entries one step publishes after the one it waited for
        self.batch = batch

    def step(self):
        try:
            entries = self.store.take_relayed(timeout_s=self.wait_s)
        except Exception as exc:
            if is_outage(exc):
                time.sleep(self.wait_s)  # not a busy loop while Redis is away
            raise
        if not entries:
            return
        if self.yield_s > 0:
            time.sleep(self.yield_s)
        # the next one first; those that queued behind it after
        done = self.publisher.send(entries)
        if done:
            done += self.publisher.send(self.store.take_relayed(timeout_s=0, limit=self.batch))
        self.store.outbox_done(done)


def _is_outage(exc) -> bool:
    """kombu's OperationalError (the broker unreachable after Celery's publish retries) or an
    outage reply of Redis (BUSY, OOM, READONLY, ...: :func:`cuzk_tasks.settings.redis_url.is_outage`)."""
    # lazy: kombu is loaded by whoever holds a Celery app, the only caller
    from kombu.exceptions import OperationalError

    seen = exc
    while seen is not None:
        if isinstance(seen, (OperationalError, ConnectionError, TimeoutError)) or is_outage(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
