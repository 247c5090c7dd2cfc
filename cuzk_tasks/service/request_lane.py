"""The request lane: a CPU worker answers by-name requests at once, whatever stage work it has.

A CPU worker runs two kinds of task: the stages (synthesize, finalize), which can keep every
pool process busy for seconds, and the by-name requests (submit, status, result, cancel),
which take milliseconds and have a caller waiting on ``.get()``.  On one consumer the
requests waited behind the stages: the prefetch window was full of stage messages, every
pool process was busy, and which of the two queues kombu read first depended on the
process's hash seed (issue 49: a submit held 22 s until the job before it finished).

So the requests have a lane of their own inside the worker: a second consumer
(:class:`RequestLane`, a consumer bootstep) on its own broker channel, with its own prefetch
window, reads the request queue (``cpu_queue``) only, and its requests run on a small thread
pool in the worker's main process (:class:`Lane`) instead of the prefork pool.  The
stages stay on the worker's own consumer and pool (``stage_queue``, and with host-affine
stages the host's queue).  The requests go through Celery's own strategies and Request
(events, results, acks late, ``celery inspect active``, the request leases), only their
pool differs (:mod:`cuzk_tasks.service.safe_request` picks it).
"""

from __future__ import annotations

import logging

from celery import bootsteps
from celery.concurrency.thread import TaskPool
from kombu import Consumer

from ..settings import defaults

log = logging.getLogger("cuzk_tasks.service.request_lane")

#: the lane's prefetch window, per thread (each request takes milliseconds)
REQUESTS_PER_THREAD = 4


class Lane:
    """The lane of one worker: its queue and its thread pool (started with the first
    consumer start, stopped at the worker's shutdown)."""

    def __init__(self, queue: str, threads: int = defaults.REQUEST_THREADS):
        self.queue = queue
        self.threads = threads
        self.pool = None

    def start(self):
        if self.pool is None:
            self.pool = TaskPool(limit=self.threads)
            self.pool.start()

    def stop(self):
        if self.pool is not None:
            self.pool.stop()  # waits for the requests running now: each takes milliseconds
            self.pool = None


class RequestLane(bootsteps.StartStopStep):
    """A consumer bootstep (``app.steps["consumer"]``): at every (re)start of Celery's
    consumer -- after a lost connection too -- a consumer of the app's request lane
    (``app.cuzk_request_lane``, :class:`Lane`) on a channel of its own, its prefetch
    window :data:`REQUESTS_PER_THREAD` per thread, handing each message to Celery's task
    handler."""

    requires = ("celery.worker.consumer.tasks:Tasks",)
    consumer = None

    def start(self, c):
        lane = getattr(c.app, "cuzk_request_lane", None)
        if lane is None:
            return
        lane.start()
        channel = c.connection.channel()
        # a window of a few requests per thread: a request sent with an ETA (countdown)
        # waits reserved until then, and must not close the lane to the others meanwhile
        self.consumer = Consumer(channel, queues=[c.app.amqp.queues[lane.queue]],
                                 on_message=c.create_task_handler(), no_ack=False,
                                 prefetch_count=lane.threads * REQUESTS_PER_THREAD)
        self.consumer.consume()
        consuming = getattr(c.app, "cuzk_consuming", None)  # worker.ConsumingChannel
        if consuming is not None:  # its reserved requests are held (worker.held_messages)
            consuming.lane_consumer = self.consumer
        log.info("request lane: consuming %s on its own channel, %d threads", lane.queue,
                 lane.threads)

    def stop(self, c):
        self._close()

    def shutdown(self, c):
        self._close()
        lane = getattr(c.app, "cuzk_request_lane", None)
        if lane is not None:
            lane.stop()

    def _close(self):
        consumer, self.consumer = self.consumer, None
        if consumer is None:
            return
        for close in (consumer.cancel, consumer.channel.close):
            try:
                close()
            except Exception:  # the connection may be gone already: nothing left to close
                pass


def add_request_lane(app, queue: str, threads: int = defaults.REQUEST_THREADS) -> Lane:
    """Give ``app``'s worker (made after this call) a request lane on ``queue``."""
    app.cuzk_request_lane = Lane(queue, threads)
    app.steps["consumer"].add(RequestLane)
    return app.cuzk_request_lane


def request_pool(app):
    """The thread pool of ``app``'s request lane, or None (no lane, or not started)."""
    lane = getattr(app, "cuzk_request_lane", None)
    return lane.pool if lane is not None else None
