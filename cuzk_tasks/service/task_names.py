"""The Celery task names, defined once: tasks.py registers them, celery_app.py routes them,
messages.py names them in the outbox, the client and the sweeper's request leases send and
recognise them.  Stable: services without this package send them by name."""

from ..state.run import PartitionRun

TASK_SUBMIT = "cuzk.submit"
TASK_SYNTHESIZE = "cuzk.synthesize"
TASK_PROVE = "cuzk.prove"
TASK_FINALIZE = "cuzk.finalize"
TASK_STATUS = "cuzk.status"
TASK_RESULT = "cuzk.result"
TASK_CANCEL = "cuzk.cancel"
#: The stage tasks, whose messages name one partition attempt (:func:`stage_partition`).
STAGE_TASKS = (TASK_SYNTHESIZE, TASK_PROVE, TASK_FINALIZE)
#: The by-name requests, which name no partition (their lease: cuzk_tasks/recovery/request_leases.py).
REQUEST_TASKS = (TASK_SUBMIT, TASK_STATUS, TASK_RESULT, TASK_CANCEL)


def stage_partition(task: str, args, kwargs) -> PartitionRun | None:
    """The run (job id, partition idx, attempt: its identity, without circuit and priority)
    that a stage task's call names -- synthesize
    ``(job, idx, attempt=0)``, prove ``(job, idx, attempt, ...)``, finalize
    ``({"job", "idx", "attempt", ...},)`` -- or None for any other task.  Workers report the
    stages they hold by it (the stage lease, docs/architecture.md)."""
    if task not in STAGE_TASKS:
        return None
    try:
        args, kwargs = list(args or ()), dict(kwargs or {})
        if task == TASK_FINALIZE:
            started = args[0] if args else kwargs["started"]
            return PartitionRun(str(started["job"]), int(started["idx"]), int(started["attempt"]))
        job, idx = args[0], int(args[1])
        if task == TASK_SYNTHESIZE:
            attempt = args[2] if len(args) > 2 else kwargs.get("attempt", 0)
        else:
            attempt = args[2] if len(args) > 2 else kwargs["attempt"]
        return PartitionRun(str(job), idx, int(attempt or 0))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
