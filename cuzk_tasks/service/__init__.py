"""The Celery side of the service: the tasks (thin wrappers over :mod:`cuzk_tasks.pipeline`),
their names and queues, the worker processes, the outbox's messages and their publisher,
and what keeps a worker's main process up (:mod:`.safe_request`, :mod:`.periodic`,
:mod:`.tracing`).  The Celery app itself is :mod:`cuzk_tasks.celery_app`, the name a user
gives ``celery -A``."""
