"""The pipeline's messages as outbox entries: what to send, not how.

A step that makes the next stage due records that stage's message in the state store's
outbox in the same Lua step (docs/architecture.md, "The outbox"); Celery publishes it right
after (:mod:`cuzk_tasks.service.publisher`).  An entry is JSON text: ``{"task", "queue",
"priority", "args", "kwargs"}`` (plus ``argsrepr``, ``kwargsrepr`` for a short log form, ``expires_s`` for
a message that expires, ``trace`` for the trace context of the task that recorded it,
``root_id`` and ``parent_id`` for its Celery lineage: :mod:`cuzk_tasks.service.lineage`), the
arguments of ``app.send_task``.  :class:`StageMessages` makes
them: synthesize (cpu queue; with host-affine stages no queue: the step that places the
partition puts its device's host's CPU queue in front), prove (no queue: the route step
puts the chosen device's in front), finalize (the cpu queue, or the host's) and a job's on_done callback (kwargs written by the step
that ends the job).  It reads no state and no broker.
"""

from __future__ import annotations

import json

from . import lineage, tracing
from .seal import SEAL_KWARG, StageSeal
from ..settings import defaults
from ..state.run import DeviceResult, PartitionRun
from .task_names import TASK_FINALIZE, TASK_PROVE, TASK_SYNTHESIZE


def entry(task: str, args=(), kwargs=None, *, queue: str | None, priority: int,
          **extra) -> str:
    """One outbox entry (JSON text).  ``queue`` None: the entry of a message whose queue a
    Lua step chooses (_lib.lua ``route_core`` writes it in front)."""
    fields = {} if queue is None else {"queue": queue}
    fields.update(task=task, priority=int(priority), args=list(args), kwargs=dict(kwargs or {}))
    trace = tracing.carrier()  # with the otel extra: the job's trace, for a later publisher
    if trace:
        fields["trace"] = trace
    fields.update(lineage.current())  # the recording task's: a relay's publish keeps the tree
    fields.update(extra)
    return json.dumps(fields, separators=(",", ":"))


class StageMessages:
    """Builds the stage messages' entries, each sealed (kwarg ``seal``,
    :mod:`cuzk_tasks.service.seal`) with the deployment's stage key."""

    def __init__(self, settings, seal: StageSeal | None = None):
        self.settings = settings
        self._seal = seal

    @property
    def seal(self) -> StageSeal:
        """The stage key's seal: read from ``stage_key_file`` at first use (made there when
        missing)."""
        if self._seal is None:
            self._seal = StageSeal.load(self.settings.stage_key_file, create=True)
        return self._seal

    def _sealed(self, task: str, args, kwargs, **options) -> str:
        kwargs = dict(kwargs)
        kwargs[SEAL_KWARG] = self.seal.seal(task, args, kwargs)
        return entry(task, args, kwargs, **options)

    def _priority(self, priority) -> int:
        return self.settings.priority(priority)

    def synthesize(self, run: PartitionRun, queue=None, inline_input: str | None = None) -> str:
        """``run``'s synthesize (args ``(job, idx)``, kwargs ``circuit``, ``priority`` and,
        past attempt 0, ``attempt``); circuit and priority ride in the message, so
        synthesize needs no job read.  Its queue: ``queue`` when given; else, with
        host-affine stages, none -- the step that places the partition on a device puts that
        device's host's CPU queue in front (_lib.lua ``route_core``) -- and the cpu queue
        without them.

        ``inline_input``: the partition's inline input (JSON text, as stored); one of at most
        ``defaults.CARRIED_INPUT_BYTES`` rides in the message too (kwarg ``inline_input``,
        left out of the message's log form), so synthesize computes the witness while its
        synth_begin is on the wire."""
        priority = self._priority(run.priority)
        kwargs = {"circuit": run.circuit, "priority": priority}
        if run.attempt:  # a recovery's; submit's attempt 0 is the task's default
            kwargs["attempt"] = run.attempt
        extra = {}
        if inline_input and len(inline_input.encode()) <= defaults.CARRIED_INPUT_BYTES:
            kwargs["inline_input"] = inline_input
            extra["kwargsrepr"] = repr({k: v for k, v in kwargs.items() if k != "inline_input"})
        if queue is None and not self.settings.host_affine:
            queue = self.settings.stage_queue
        return self._sealed(TASK_SYNTHESIZE, (run.job_id, run.idx), kwargs, queue=queue,
                            priority=priority, **extra)

    def prove(self, run: PartitionRun, witness_ref) -> str:
        """``run``'s prove (args ``(job, idx, attempt, circuit, witness_ref)``), for
        whichever device queue routing picks.  It is told
        (``finalize_queue``) to queue finalize (cpu queue, same priority) itself once prove_end
        has advanced the partition: one plain message instead of a Celery canvas chain."""
        priority = self._priority(run.priority)
        # host-affine: built where the partition was synthesized, on its device's host, whose
        # CPU queue finalize must reach (the witness is in that host's spool)
        finalize_queue = self.settings.host_cpu_queue() if self.settings.host_affine \
            else self.settings.stage_queue
        return self._sealed(TASK_PROVE,
                            (run.job_id, run.idx, run.attempt, run.circuit, witness_ref),
                            {"finalize_queue": finalize_queue, "priority": priority},
                            queue=None, priority=priority)

    def after_device_fault(self, run: PartitionRun, witness_ref) -> str:
        """The message of ``run``'s next attempt after a device fault (prove_fault): with
        host-affine stages it is synthesized again wherever it is placed next (its witness is
        on this host), so its synthesize; else its prove for another device."""
        if self.settings.host_affine:
            return self.synthesize(run.next_attempt())
        return self.prove(run.next_attempt(), witness_ref)

    def finalize(self, queue, result: DeviceResult) -> str:
        """The finalize of a prove whose ``result`` (the partial proof) is its one
        argument (:meth:`~cuzk_tasks.state.DeviceResult.to_json`), at the run's priority, for
        prove_end to send when the partition advances (before prove's own message is
        acked, as a chain's next step would be)."""
        run = result.run
        # argsrepr: a short log form (Celery's logs, Flower) instead of the whole partial proof
        argsrepr = f"({{job: {run.job_id}, idx: {run.idx}, attempt: {run.attempt}}},)"
        return self._sealed(TASK_FINALIZE, (result.to_json(),), {}, queue=queue,
                            priority=self._priority(run.priority), argsrepr=argsrepr)

    def on_done(self, on_done) -> str:
        """The job's on_done task without its kwargs (the step ending the job writes them in
        front, _lib.lua ``send_on_done``): priority 0, so it lands on the list named by the
        queue, which any Redis consumer reads.  It expires ``on_done_ttl_s`` after it is sent
        (0: never)."""
        fields = {"task": on_done["task"], "queue": on_done["queue"], "priority": 0, "args": [],
                  **lineage.current()}
        if self.settings.on_done_ttl_s > 0:
            fields["expires_s"] = float(self.settings.on_done_ttl_s)
        return json.dumps(fields, separators=(",", ":"))
