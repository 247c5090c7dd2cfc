"""The stage messages of the pipeline, built from the settings and Celery's templates.

:class:`StageMessages` makes each next stage's Celery task message (``cuzk_tasks.wire``)
for the transition that makes it due to push (docs/architecture.md, "Enqueue inside the
transition"): synthesize (cpu queue), prove_start (the device queue routing picks inside
the transition), finalize (cpu queue), and a job's on_done callback.  It reads no state
and calls nothing back: what a message carries is what its caller passes.  Each message is
its task's template, rendered by Celery (``templates``: task name -> EnvelopeTemplate,
:class:`cuzk_tasks.message_templates.Templates`), with this message's fields filled in.
"""

from __future__ import annotations

from . import wire
from .task_names import TASK_FINALIZE, TASK_PROVE_START, TASK_SYNTHESIZE


class StageMessages:
    def __init__(self, settings, templates):
        self.settings = settings
        self.templates = templates

    def _priority(self, priority) -> int:
        return self.settings.priority(priority)

    def synthesize(self, job_id, idx, circuit, priority, attempt=0) -> wire.QueuedMessage:
        """A partition's synthesize for ``attempt``; circuit and priority ride in the message,
        so synthesize needs no job read."""
        priority = self._priority(priority)
        kwargs = {"circuit": circuit, "priority": priority}
        if attempt:  # a recovery's; submit's attempt 0 is the task's default
            kwargs["attempt"] = attempt
        return wire.task_message(self.templates(TASK_SYNTHESIZE), TASK_SYNTHESIZE,
                                 (job_id, idx), kwargs, queue=self.settings.cpu_queue,
                                 priority=priority)

    def prove_start(self, job_id, idx, attempt, circuit, witness_ref,
                    priority) -> wire.QueueLateMessage:
        """The partition's prove_start, for whichever device queue routing picks.  It is told
        (``finalize_queue``) to queue finalize (cpu queue, same priority) itself once gpu_end
        has advanced the partition: one plain message instead of a Celery canvas chain."""
        priority = self._priority(priority)
        return wire.task_message_any_queue(
            self.templates(TASK_PROVE_START), TASK_PROVE_START,
            (job_id, idx, attempt, circuit, witness_ref),
            {"finalize_queue": self.settings.cpu_queue, "priority": priority}, priority=priority)

    def finalize(self, job_id, idx, attempt, queue, priority) -> wire.LateBodyMessage:
        """The finalize task of the prove_start of ``(job_id, idx, attempt)``, rendered before
        the device's work; its one argument, the prove_start result, is written in after it
        (:func:`cuzk_tasks.wire.fill_args`), for gpu_end to queue when the partition advances
        (before prove_start's own message is acked, as a chain's next step would be)."""
        # argsrepr: a short log form instead of the whole partial proof
        return wire.task_message_late_args(self.templates(TASK_FINALIZE), TASK_FINALIZE,
                                           queue=queue, priority=self._priority(priority),
                                           argsrepr=f"({{job: {job_id}, idx: {idx}, "
                                                    f"attempt: {attempt}}},)")

    def on_done(self, job_id, on_done) -> wire.LateBodyMessage:
        """The job's on_done task without its kwargs (the step ending the job writes them):
        priority 0, so it lands on the list named by the queue, which any Redis consumer
        reads.  It expires ``on_done_ttl_s`` after it is sent (0: never)."""
        kwargsrepr = f"{{'job_id': {job_id!r}, 'state': ..., 'proofs' | 'error': ...}}"
        return wire.task_message_late_kwargs(self.templates(on_done["task"]), on_done["task"],
                                             queue=on_done["queue"], priority=0,
                                             kwargsrepr=kwargsrepr,
                                             expires_s=self.settings.on_done_ttl_s)
