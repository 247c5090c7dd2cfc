"""The Celery tasks: thin wrappers over :mod:`cuzk_tasks.pipeline`.

Names are stable (services without this package call them by name):

* ``cuzk.submit``       (cpu queue) kwargs circuit, partitions, priority, request_id,
                        on_done ({"task", "queue"}: sent once when the job ends), deadline_s
                        (seconds from submit; default the circuit's) -> job id
* ``cuzk.status``       (cpu queue) kwargs job_id, offset, limit -> the job and a page of its partitions' states (JSON)
* ``cuzk.result``       (cpu queue) kwargs job_id -> {"job_id", "state", "proofs" | "error" ...}
* ``cuzk.synthesize``   (cpu queue) job_id, idx, circuit, priority [, attempt: 0, or the attempt
                        a recovery queued it for; inline_input: a small inline input, also
                        in the state store, carried so the witness starts before its read]
* ``cuzk.prove``        (a device queue, chosen by pipeline/routing.py) job_id, idx, attempt,
                        circuit, witness_ref, finalize_queue, priority: its prove_end queues
                        finalize there
* ``cuzk.finalize``     (cpu queue, published by prove's prove_end) the prove result
                        (a DeviceResult's JSON, cuzk_tasks/state/run.py)

The stage messages are recorded by this package alone (cuzk_tasks/service/messages.py, the outbox),
which sends every argument above but ``attempt`` 0: one missing is an error of the task
(TypeError), never a default.  Each also carries ``seal`` (cuzk_tasks/service/seal.py): the
worker's main process refuses a stage message whose seal is missing or does not match its
fields before it runs, so the task bodies never see one the service did not issue.

Every task's messages go through :class:`cuzk_tasks.service.safe_request.SafeRequest` (and
``safe_strategy``) in the worker's main process: one out of bounds (nesting depth, size, a
by-name field of the wrong type) or undecodable is refused once with its reason, never
handed to the pool (cuzk_tasks/pipeline/request_checks.py).
"""

from celery import shared_task

from .. import pipeline
from ..state import PartitionRun
from .task_names import (TASK_CANCEL, TASK_FINALIZE, TASK_PROVE, TASK_RESULT, TASK_STATUS,
                         TASK_SUBMIT, TASK_SYNTHESIZE)

# by name: Celery imports them in the worker only (a client registering the tasks never needs them)
SAFE = {"Request": "cuzk_tasks.service.safe_request:SafeRequest",
        "Strategy": "cuzk_tasks.service.safe_request:safe_strategy"}


def _redelivered(request) -> bool:
    """Whether the broker put this message back: kombu marks one it restores (its worker
    died, a reject with requeue, the visibility timeout, a request lease)."""
    return bool((request.delivery_info or {}).get("redelivered"))


@shared_task(name=TASK_SUBMIT, bind=True, ignore_result=False, **SAFE)
def submit(self, circuit, partitions, priority=None, request_id=None, on_done=None,
           deadline_s=None, details=False):
    """Create a job by name; returns its id -- with ``details``, ``{"job_id", "eta"}``
    (``pipeline.submitted``: its estimate, or null).  Idempotent on ``request_id``, which
    defaults to ``celery:<this request's task id>``: a submit delivered again because its
    worker died (cuzk_tasks/recovery/request_leases.py) returns the job it created, never a
    second one."""
    if request_id is None and self.request.id:
        request_id = f"celery:{self.request.id}"
    ctx = pipeline.context(self.app)
    job_id = pipeline.submit_job(ctx, circuit, partitions, priority=priority,
                                 request_id=request_id, on_done=on_done, deadline_s=deadline_s)
    return pipeline.submitted(ctx, job_id) if details else job_id


@shared_task(name=TASK_STATUS, bind=True, ignore_result=False, **SAFE)
def status(self, job_id, offset=0, limit=None):
    return pipeline.job_status(pipeline.context(self.app), job_id, offset=offset, limit=limit)


@shared_task(name=TASK_RESULT, bind=True, ignore_result=False, **SAFE)
def result(self, job_id):
    return pipeline.job_result(pipeline.context(self.app), job_id)


@shared_task(name=TASK_CANCEL, bind=True, ignore_result=False, **SAFE)
def cancel(self, job_id, reason=None):
    """Cancel a job by name; idempotent: a cancel delivered again answers the job's state."""
    return pipeline.cancel_job(pipeline.context(self.app), job_id, reason=reason)


@shared_task(name=TASK_SYNTHESIZE, bind=True, **SAFE)
def synthesize(self, job_id, idx, circuit, priority, attempt=0, inline_input=None, seal=None):
    run = PartitionRun(job_id, int(idx), int(attempt or 0), circuit, int(priority))
    if not isinstance(inline_input, str) or _redelivered(self.request):
        # not a message of ours, or one put back after its process died (perhaps in this
        # witness): synth_begin is read before the witness, so delivery max_deliveries + 1
        # is refused before it runs
        inline_input = None
    pipeline.synthesize(pipeline.context(self.app), run, inline_input)


@shared_task(name=TASK_PROVE, bind=True, **SAFE)
def prove(self, job_id, idx, attempt, circuit, witness_ref, finalize_queue, priority, seal=None):
    run = PartitionRun(job_id, int(idx), int(attempt), circuit, int(priority))
    pipeline.prove(pipeline.context(self.app), run, witness_ref, finalize_queue,
                   redelivered=_redelivered(self.request))


@shared_task(name=TASK_FINALIZE, bind=True, **SAFE)
def finalize(self, started, seal=None):
    return pipeline.finalize(pipeline.context(self.app), started)
