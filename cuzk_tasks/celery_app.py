"""The Celery application factory.

``create_app(settings)`` builds a configured :class:`celery.Celery`; there is no
module-level app except the lazily created default ``app`` (from
``load_settings()``), so ``celery -A cuzk_tasks.celery_app worker`` works and
importing this module connects to nothing.

Why each setting is what it is: docs/architecture.md, "Celery settings and why".
"""

from __future__ import annotations

from celery import Celery

from .config import Settings, load_settings
from .redis_url import celery_url, is_sentinel

from .task_names import TASK_FINALIZE, TASK_RESULT, TASK_STATUS, TASK_SUBMIT, TASK_SYNTHESIZE


def broker_transport_options(settings: Settings) -> dict:
    # kombu's default priority steps and separator (cuzk_tasks/queues.py): a client with
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
        # (Redis redelivers only after the visibility timeout; docs/architecture.md)
        worker_cancel_long_running_tasks_on_connection_loss=False,
        task_default_queue=settings.cpu_queue,
        task_default_priority=settings.default_priority,
        task_routes={
            TASK_SUBMIT: {"queue": settings.cpu_queue},
            TASK_SYNTHESIZE: {"queue": settings.cpu_queue},
            TASK_FINALIZE: {"queue": settings.cpu_queue},
            TASK_STATUS: {"queue": settings.cpu_queue},
            TASK_RESULT: {"queue": settings.cpu_queue},
            # TASK_PROVE_START has no static route: routing.py sends it to one device queue
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
    from . import tasks  # noqa: F401

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
