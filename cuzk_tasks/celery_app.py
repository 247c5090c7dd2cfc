"""The Celery application factory.

``create_app(settings)`` builds a configured :class:`celery.Celery`; there is no
module-level app except the lazily created default ``app`` (from
``load_settings()``), so ``celery -A cuzk_tasks.celery_app worker`` works and
importing this module connects to nothing.

Why each setting is what it is:

* JSON only (serializers, ``accept_content``): a pickle message would run code chosen by
  whoever can write to Redis; workers refuse it (``tests/test_config.py``).  Partial proofs
  are JSON (``PartialProof.to_json``).
* ``task_acks_late``: a message is acknowledged after its task ran, so a worker that dies
  mid-task does not lose the partition.  ``task_reject_on_worker_lost``: a pool process
  killed mid-prove (OOM, driver fault, poison pill) requeues its message at once;
  ``prove_begin`` counts deliveries and fails the partition after ``max_deliveries``.
* ``worker_prefetch_multiplier`` 1 (CPU workers): a pool of N reserves N messages and hands
  each to an idle process, so a long finalize never holds a message another process could
  run.  Device workers differ (``worker.DEVICE_WORKER_TUNING``, passed to ``app.Worker``:
  the ``celery worker`` command line cannot select ``fcfs``): prefetch 2, no put-locks,
  strategy ``fcfs``, so the parent writes the next prove into the pool process's pipe
  while it proves and the ack, BRPOP and reservation round trips are no longer between two
  partitions.  Nothing is hoarded (each device has its own queue); a higher-priority
  partition routed meanwhile waits behind at most that one message, a warm shutdown also
  runs it, and a pool process that dies leaves it to its replacement.  Prefetch 2 alone
  gained nothing: with put-locks and the "fair" strategy the reserved message is handed
  over only after those round trips.
* ``task_soft_time_limit`` < ``task_time_limit`` < visibility timeout (1800 / 2400 / 3600 s
  by default): Redis redelivers an unacked message after the visibility timeout, so a task
  still running then would run twice; ``load_settings`` refuses a hard limit >= it.  The
  broker and the result backend share the one visibility timeout.
* Priorities: kombu's default steps (0, 3, 6, 9) and separator with
  ``queue_order_strategy`` priority, so a Celery client with default settings reaches the
  workers with any priority 0-9 (``tests/test_celery_clients.py``).  A job's priority (0
  first, 9 last) is the message priority of its synthesize, prove and finalize; each
  queue is 4 Redis lists (``queues.queue_keys``).
* ``task_routes``: the by-name requests to the cpu queue (a CPU worker's request lane,
  ``service/request_lane.py``), synthesize and finalize to the shared stage queue (the
  messages of the stages carry their queue: with host-affine stages the host's);
  prove has no static route: the transition that routes a partition records it for
  the chosen device's queue (``cuzk.dev.<host>.<N>``).  No canvas chain from prove to
  finalize: ``prove_end`` records finalize when it advances the partition (less work on the
  device's hot path than a chain's clone/freeze and a ``saferepr`` of the partial proof).
* ``task_ignore_result``: progress and proofs live in the state store; the result backend
  carries only the replies of ``cuzk.submit``, ``cuzk.status``, ``cuzk.result`` and
  ``cuzk.cancel``.
* Task events on (``worker_send_task_events``, ``task_send_sent_event``): Flower and
  ``celery events`` show every task and worker (``tests/test_celery_tools.py``); an event is
  one PUBLISH, nothing is stored when no one listens.
* ``worker_cancel_long_running_tasks_on_connection_loss`` off: on Redis a message is
  redelivered only after the visibility timeout, so a task cancelled on a connection loss
  would strand its partition that long; it rides out the outage instead (the store retries
  its transitions, ``redis_outage_s``), and a lost ack only brings back a stale message.
* ``broker_channel_error_retry``: BUSY, OOM or READONLY from Redis is a channel error to
  kombu; with this the consumer reconnects with its backoff instead of stopping the worker.
  Messages delivered but unacknowledged when a connection drops come back through the stage
  and request leases (:mod:`cuzk_tasks.pipeline.routing`, :mod:`cuzk_tasks.recovery.request_leases`).
"""

from __future__ import annotations

from celery import Celery

from .settings.config import Settings, load_settings
from .settings.redis_url import celery_url, is_sentinel

from .service.task_names import (TASK_CANCEL, TASK_FINALIZE, TASK_RESULT, TASK_STATUS,
                                 TASK_SUBMIT, TASK_SYNTHESIZE)


def broker_transport_options(settings: Settings) -> dict:
    # kombu's default priority steps and separator (cuzk_tasks/service/queues.py): a client with
    # default settings reaches the workers with any message priority
    return {
        "visibility_timeout": int(settings.visibility_timeout_s),
        "queue_order_strategy": "priority",
    }


def create_app(settings: Settings | None = None) -> Celery:
    settings = settings or load_settings()
    app = Celery("cuzk_tasks", broker=celery_url(settings.broker_url),
                 backend=celery_url(settings.result_backend), set_as_current=False)
    transport = broker_transport_options(settings)
    result_transport = {"visibility_timeout": transport["visibility_timeout"]}
    if is_sentinel(settings.broker_url):
        transport["master_name"] = settings.sentinel_master
    if is_sentinel(settings.result_backend):
        result_transport["master_name"] = settings.sentinel_master
    app.conf.update(
        # JSON only: a pickle message is refused by the worker (no code execution from Redis)
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        # at-least-once: ack after the task ran; a killed pool process requeues its message
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # one message reserved at a time: a device never hoards partitions another device could run
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.soft_time_limit_s,
        task_time_limit=settings.time_limit_s,
        # the same visibility timeout for the broker and the result backend (> hard time limit)
        broker_transport_options=transport,
        result_backend_transport_options=result_transport,
        broker_connection_retry_on_startup=True,
        # a reply that says Redis cannot serve now -- BUSY, OOM, READONLY -- is an outage:
        # the worker reconnects with its backoff instead of stopping
        broker_channel_error_retry=True,
        # a running task outlives a broker outage: cancelling it would strand its partition
        # (Redis redelivers only after the visibility timeout; see the module docstring)
        worker_cancel_long_running_tasks_on_connection_loss=False,
        task_default_queue=settings.cpu_queue,
        task_default_priority=settings.default_priority,
        task_routes={
            TASK_SUBMIT: {"queue": settings.cpu_queue},
            TASK_SYNTHESIZE: {"queue": settings.stage_queue},
            TASK_FINALIZE: {"queue": settings.stage_queue},
            TASK_STATUS: {"queue": settings.cpu_queue},
            TASK_RESULT: {"queue": settings.cpu_queue},
            TASK_CANCEL: {"queue": settings.cpu_queue},
            # TASK_PROVE has no static route: pipeline/routing.py sends it to one device queue
        },
        task_ignore_result=True,  # progress and results live in the state store
        result_expires=settings.result_ttl_s,
        # task events (task-sent, -received, -started, -succeeded ...): Flower and `celery events`
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_disable_rate_limits=True,
    )
    app.cuzk_settings = settings
    # register the tasks (shared tasks bind to every app)
    from .service import tasks  # noqa: F401

    app.finalize(auto=True)
    return app


_default_app = None


def __getattr__(name):
    # lazily created default app for `celery -A cuzk_tasks.celery_app`
    global _default_app
    if name in ("app", "celery"):
        if _default_app is None:
            _default_app = create_app(load_settings())
        return _default_app
    raise AttributeError(name)
