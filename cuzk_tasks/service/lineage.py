"""Celery's task lineage (``root_id``, ``parent_id``) in the outbox's entries, so Celery's tools
(Flower, ``celery events``) show a job as one tree.

Celery gives a message its lineage only when ``send_task`` is called inside a running task.
Many of the pipeline's messages are published elsewhere -- a device's finalize by a CPU
worker's relay thread (cuzk_tasks/service/publisher.py ``OutboxRelay``), an overdue entry by
the sweeper -- so the task that records an entry keeps its own lineage in it
(:func:`current`) and the publisher sends with it: each stage task's parent is the task whose
step made it due, and its root the job's first task (the caller's ``cuzk.submit``, or that
task's own root).
"""

from __future__ import annotations

import sys


def current() -> dict:
    """``{"root_id", "parent_id"}`` for a message sent now by the task running in this thread
    (as Celery's ``send_task`` would set them), or ``{}`` outside a task."""
    celery = sys.modules.get("celery")  # not loaded here: a process without Celery runs no task
    if celery is None:
        return {}
    task = celery.current_task
    request = getattr(task, "request", None) if task else None
    task_id = getattr(request, "id", None)
    if not task_id:
        return {}
    return {"root_id": getattr(request, "root_id", None) or task_id, "parent_id": task_id}
