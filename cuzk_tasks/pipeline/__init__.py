"""The logic behind the Celery tasks (tasks.py only wraps these functions).

Every step runs a guarded state-store transition first; a rejected (stale,
duplicate, cancelled) transition makes the step log and return without doing
work.  Bad input ends as ``fail_partition`` with the CuzkError's message: a
task never raises out of here for a problem with the job itself.

One module per stage (docs/architecture.md, "One partition's path"):

* ``submit``       ``submit_job``: create the job (idempotent on request_id) with its
                   synthesize messages
* ``synthesize``   witness from wasm + input (or a .wtns ref) -> spool dir; synth_end, which
                   also routes the partition and queues its prove on the chosen device
* ``prove``        (cuzk's prove-start) prove_begin -> token; the prover's prove_start; prove_end(token)
                   in a finally, which queues finalize (cpu queue) when the partition advanced
* ``finalize``     the prover's prove_finish (self-verifies); finalize_end, whose job_complete
                   step also stores the result and sends the job's on_done callback
* ``reads``        ``job_status``, ``job_result`` (the by-name reads)
* ``cancel``       ``cancel_job`` (the by-name cancel)

``context`` holds what they share: :class:`Context` (settings, store, prover, messages).
Each next-stage message is built by ``ctx.messages`` (cuzk_tasks/service/messages.py) and recorded in
the state store's outbox by the transition that makes it due, in the same Lua step; Celery
publishes it right after (cuzk_tasks/service/publisher.py), and the sweeper publishes what a process
that died in between left (docs/architecture.md, "The outbox").
"""

from .cancel import CANCEL_REASON, cancel_job
from .context import Context, RunSlot, WorkerIdentity, context, ref_path
from .finalize import finalize
from .prove import prove, publish_device_memory
from .reads import job_result, job_status
from .submit import check_deadline, check_on_done, normalize_partitions, submit_job, submitted
from .synthesize import synthesize

__all__ = ["Context", "RunSlot", "WorkerIdentity", "context", "ref_path", "submit_job", "submitted",
           "normalize_partitions",
           "check_on_done", "check_deadline", "synthesize", "prove", "publish_device_memory",
           "finalize", "job_status", "job_result", "cancel_job", "CANCEL_REASON"]
