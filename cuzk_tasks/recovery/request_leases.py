"""Request leases: a by-name request (submit, status, result) never waits on a dead worker.

A request sent by name (``send_task("cuzk.submit", ...)``) names no partition, so the stage
leases (:meth:`cuzk_tasks.recovery.sweeper.Sweeper.recover_stages`) do not cover it.  When the CPU
worker that took it dies -- kill -9, OOM, host down -- its message stays in kombu's
``unacked`` hash until the visibility timeout (an hour) and the caller's ``.get()`` waits
that long.  So each worker's heartbeat also reports the task ids of the requests its Celery
main process holds, reserved or running (``holding_requests``, :func:`held_requests`), and
the sweeper puts back on its queue every request message delivered at least a heartbeat TTL
ago that no online worker reports, on two sweeps a TTL apart (:class:`RequestLeases`).

Putting one back is safe: status and result are reads, and submit is idempotent on its
request id, which defaults to the request's own Celery task id (tasks.py), so a request
that created its job before its worker died returns that job again.
"""

from __future__ import annotations

import datetime
import json
import logging
import time

from ..service.task_names import REQUEST_TASKS

log = logging.getLogger("cuzk_tasks.recovery.request_leases")


def held_requests(requests) -> list[str]:
    """The task ids of the by-name requests among Celery ``requests`` (the worker's
    registry, :func:`cuzk_tasks.service.worker.held_messages`)."""
    return sorted({r.id for r in requests if r.task_name in REQUEST_TASKS and r.id})


def request_of(raw) -> tuple[str, str] | None:
    """``(task id, task name)`` of an entry of kombu's ``unacked`` hash (JSON ``[envelope,
    exchange, routing key]``) that is a by-name request whose ETA (if any) has passed; None
    for any other message.  A request waiting for its ETA sits in its worker's timer, not in
    its registry, so it is never taken for one that nobody holds."""
    try:
        headers = json.loads(raw)[0].get("headers") or {}
        task, task_id = headers.get("task"), headers.get("id")
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        return None
    if task not in REQUEST_TASKS or not task_id:
        return None
    eta = headers.get("eta")
    if eta:
        try:
            due = datetime.datetime.fromisoformat(str(eta))
        except ValueError:
            return None
        if due.tzinfo is None:
            due = due.replace(tzinfo=datetime.timezone.utc)
        if due.timestamp() > time.time():
            return None
    return str(task_id), str(task)


class RequestLeases:
    """Finds the request messages held by no online worker and has kombu put them back on
    their queue (its Redis transport's ``QoS.restore_by_tag``, as a channel's close does).

    ``app``: the Celery app (its broker connection); ``store``: the state store (the workers'
    heartbeats); ``ttl_s``: the heartbeat TTL, which both bounds how soon a delivered message
    shows up in its worker's heartbeat and spaces the two sightings."""

    def __init__(self, app, store, ttl_s: float, interval_s: float):
        self.app = app
        self.store = store
        self.ttl_s = float(ttl_s)
        self.interval_s = float(interval_s)
        self._kind = {}  # delivery tag -> (task id, name) of a request, or None: any other message
        self._suspects = {}  # delivery tag -> when first seen held by no one (monotonic)
        self._last_look = None

    def recover(self, workers=None) -> int:
        """One look; returns how many request messages were put back on their queue."""
        with self.app.connection_for_write() as conn:
            return self._recover(conn.default_channel, workers)

    def _recover(self, channel, workers) -> int:
        now = time.monotonic()
        if self._last_look is not None and now - self._last_look > self.ttl_s + self.interval_s:
            self._suspects = {}  # the sweeps were not continuous: earlier sightings do not count
        self._last_look = now
        client = channel.client
        # delivered at least a TTL ago: their worker, if alive, has reported them since
        tags = [t.decode() if isinstance(t, bytes) else t for t in client.zrangebyscore(
            channel.unacked_index_key, "-inf", time.time() - self.ttl_s)]
        self._kind = {t: self._kind[t] for t in tags if t in self._kind}
        new = [t for t in tags if t not in self._kind]
        if new:
            for tag, raw in zip(new, client.hmget(channel.unacked_key, new)):
                self._kind[tag] = request_of(raw) if raw else None
        requests = {t: k for t, k in self._kind.items() if k is not None}
        if not requests:
            self._suspects = {}
            return 0
        held = self.store.held_requests(workers)
        suspects, restored = {}, 0
        for tag, (task_id, task) in requests.items():
            if task_id in held:
                continue
            first_seen = suspects[tag] = self._suspects.get(tag, now)
            if now - first_seen < self.ttl_s:
                continue
            if client.hexists(channel.unacked_key, tag):  # not acknowledged meanwhile
                channel.qos.restore_by_tag(tag, client)
                restored += 1
                log.warning("request %s (%s): no live worker holds it; put back on its queue",
                            task_id, task)
            suspects.pop(tag)
            self._kind.pop(tag, None)
        self._suspects = suspects
        return restored
