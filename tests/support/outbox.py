"""Test tools for the outbox (docs/architecture.md, "The outbox").

* :class:`Recorder` -- a state store ``publisher`` that records the entries it is given
  (decoded) instead of sending them: ``StateStore(..., publisher=Recorder())`` or
  ``ctx.store.publisher = rec``.  ``outage=True``: refuses them all (the broker is down).
* :func:`queued` -- the Celery messages waiting on a queue in a Redis broker, decoded from
  kombu's envelope as ``(task, args, kwargs, priority)``, oldest first: what Celery sent.
"""

from __future__ import annotations

import base64
import json

from cuzk_tasks.service import queues


class Recorder:
    def __init__(self, outage: bool = False):
        self.sent, self.outage = [], outage

    def __call__(self, entries, done):
        done(self.send(entries))

    def send(self, entries) -> list:
        """As CeleryPublisher.send: records ``entries`` and returns their ids (none in an
        outage)."""
        if self.outage:
            return []
        self.sent += [json.loads(e) for _, e in entries]
        return [i for i, _ in entries]

    def tasks(self, task=None):
        """``(task, args, queue)`` of what was sent (of ``task`` only, if given)."""
        return [(e["task"], e["args"], e.get("queue")) for e in self.sent
                if task is None or e["task"] == task]


def decode(raw) -> tuple[str, list, dict, int]:
    """``(task, args, kwargs, priority)`` of one message of kombu's Redis envelope."""
    envelope = json.loads(raw)
    args, kwargs = json.loads(base64.b64decode(envelope["body"]))[:2]
    return (envelope["headers"]["task"], args, kwargs,
            int(envelope["properties"].get("priority") or 0))


def queued(redis, queue) -> list[tuple[str, list, dict, int]]:
    """The messages waiting on ``queue`` (every priority list), served first first, each
    stage message's kwargs without its seal (whose value differs per key; tests/test_seal.py
    checks seals)."""
    out = []
    for key in queues.queue_keys(queue):
        for raw in reversed(redis.lrange(key, 0, -1)):
            task, args, kwargs, priority = decode(raw)
            out.append((task, args, {k: v for k, v in kwargs.items() if k != "seal"}, priority))
    return out
