"""Liveness beyond Celery's: a worker whose consumer has stopped taking messages leaves --
off the live list at once, then out of the process -- so that the sweeper re-drives what
it held and its supervisor starts it again.

Celery counts a worker alive while its process runs; nothing checks that its consumer still
takes messages.  kombu's Redis transport can stop doing so for good while the process runs
on: its hub spinning on a BRPOP connection the server closed (kombu #2214, celery #10205),
or a connection that died silently (a NAT, firewall or proxy that dropped the flow: no
reply and no error, ever; the main thread then also blocks in its next acknowledgement).
The heartbeat thread kept such a worker live, so the work it held waited for ever.

A consumer has stopped when, at every look for ``consumer_stall_s``, it consumes from its
queues (Celery has not cancelled them to reconnect or stop), it has room (its channel's QoS
can consume: kombu then has a BRPOP out on its queues' lists), a message waits in one of
those lists, and the oldest waiting message of every list is the one seen
the look before: kombu's Redis transport LPUSHes and BRPOPs, so a list's tail changes only
when someone takes from it.  A look that cannot read the broker (an outage) starts over.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import threading
import time

from ..settings import defaults
from .periodic import PeriodicThread
from .queues import queue_keys

log = logging.getLogger("cuzk_tasks.service.consumer_watch")

#: a worker that left because its consumer stopped exits with EX_TEMPFAIL: start it again
EXIT_CONSUMER_STALLED = 75


class ConsumerWatch(PeriodicThread):
    """Looks at a worker's consumers (``consuming``: its
    :class:`~cuzk_tasks.service.worker.ConsumingChannel`) every ``stall_s`` / 5 seconds,
    reading their queues' list tails with ``broker`` (a ``redis.Redis`` of the broker, with
    socket timeouts), and calls ``on_stalled(queues, seconds)`` once when one has stopped."""

    thread_name = "cuzk-consumer-watch"

    def __init__(self, consuming, broker, stall_s: float, on_stalled):
        super().__init__(stall_s / 5.0)
        self.consuming = consuming
        self.broker = broker
        self.stall_s = stall_s
        self.on_stalled = on_stalled
        self.stalled = False
        self._seen = {}  # consumer -> (tails, monotonic time they were first seen)

    def step(self):
        previous, self._seen = self._seen, {}  # a look that fails starts over
        seen, now = {}, time.monotonic()
        for consumer in self.consuming.consumers():
            if not consumer.channel.qos.can_consume():  # full: kombu takes nothing now
                continue
            # the queues it reads now: none while Celery reconnects (it cancelled them) or
            # shuts down, nor one `celery control cancel_consumer` took away
            queues = [q.name for q in consumer.queues if consumer.consuming_from(q)]
            if not queues:
                continue
            tails = self._tails(queues)
            if not any(tails):  # nothing waits
                continue
            before = previous.get(consumer)
            since = before[1] if before is not None and before[0] == tails else now
            seen[consumer] = (tails, since)
            if now - since >= self.stall_s and not self.stalled:
                self.stalled = True
                self.on_stalled(queues, now - since)
        self._seen = seen

    def _tails(self, queues) -> tuple:
        """A digest of the oldest waiting message of each list of ``queues`` (None: empty)."""
        pipe = self.broker.pipeline(transaction=False)
        for queue in queues:
            for key in queue_keys(queue):
                pipe.lindex(key, -1)
        return tuple(hashlib.blake2b(tail, digest_size=16).digest() if tail else None
                     for tail in pipe.execute())


def leave(worker_id, queues, stalled_s, go_offline, grace_s=defaults.CONSUMER_STALL_EXIT_S):
    """What a worker does when its consumer stopped: logs why, goes offline at once
    (``go_offline()``: its heartbeat stopped and deleted, so the sweeper re-drives what it
    held), asks for a warm shutdown
    (SIGTERM), and exits hard ``grace_s`` later should that shutdown not end the process (a
    main thread blocked on a dead connection never sees the signal)."""
    log.error("worker %s: its consumer of %s has taken nothing for %.0f s while messages "
              "waited and it had room (a broker connection that stopped answering): this "
              "worker goes offline and exits %d for its supervisor to start it again; what "
              "it held is re-driven", worker_id, ", ".join(queues), stalled_s,
              EXIT_CONSUMER_STALLED)
    go_offline()
    os.kill(os.getpid(), signal.SIGTERM)

    def _exit_hard():
        log.error("worker %s: no warm shutdown within %.0f s: exiting now", worker_id, grace_s)
        logging.shutdown()
        os._exit(EXIT_CONSUMER_STALLED)

    timer = threading.Timer(grace_s, _exit_hard)
    timer.daemon = True
    timer.start()
