"""finalize (cpu queue): the prover's prove_finish (G2 MSM, assembly, self-verification);
finalize_end, whose job_complete step also stores the result and sends the job's on_done.
A self-verification failure of a GPU's partial is a device fault (prove_fault from
finalizing): the partition is proved again on another device."""

from __future__ import annotations

import json
import os
import time

from ..errors import CuzkError, SelfVerificationError
from ..paths import atomic_output
from ..settings import defaults
from ..state import DeviceResult, PartitionState
from .context import (Context, fail, internal_error, log, ms_since, public_error, ref_path,
                      spooled_witness)



def finalize(ctx: Context, started):
    """The CPU tail of the run that ``started`` (finalize's message: prove's
    :class:`~cuzk_tasks.state.DeviceResult`, as JSON) names; a message that lacks one of
    its fields (:data:`~cuzk_tasks.state.run.FINALIZE_FIELDS`), or has one of the wrong type,
    is an error (ValueError naming it), never a default."""
    result = DeviceResult.from_json(started)
    store, run = ctx.store, result.run
    job_id, idx, attempt = run.job_id, run.idx, run.attempt
    # a look first when the message may be stale (finalize_end is the guard): a cancelled,
    # re-dispatched or past-deadline partition does not get its CPU tail run
    if may_be_stale(result, time.time()):
        state, part_attempt = store.partition_fields(job_id, idx, "state", "attempt")
        if state != PartitionState.FINALIZING.value or part_attempt != attempt:
            log.info("finalize %s/%s attempt %s: partition is %s (attempt %s), skipping", job_id,
                     idx, attempt, state, part_attempt)
            return None
    t0 = time.perf_counter()
    try:
        path = ref_path(ctx, "witness_ref", result.witness_ref)
        proof, public = ctx.prover.prove_finish(run.circuit, result.partial, path)
    except SelfVerificationError as exc:
        if result.backend == "gpu":  # the device may be at fault: prove again elsewhere
            _reroute_after_wrong_proof(ctx, exc, result)
        else:  # the CPU core is the reference: the witness is bad
            fail(ctx, run, exc, token=result.token)
        return None
    except CuzkError as exc:
        fail(ctx, run, exc, token=result.token)
        return None
    except Exception as exc:
        log.exception("finalize %s/%s crashed", job_id, idx)
        fail(ctx, run, internal_error(exc), token=result.token)
        return None
    # compare-and-delete with the token of the run that made this partial: if the device has
    # moved on to another partition (another token), it stays busy
    end = store.finalize_end(run, ms_since(t0), json.dumps(proof), json.dumps(public),
                             token=result.token)
    if not end.ok:
        log.info("finalize %s/%s attempt %s: finalize_end rejected", job_id, idx, attempt)
        return None
    _remove_spooled(ctx, job_id, idx, path)
    if end.job_complete:
        # finalize_end stored the result (and sent on_done) in its own step
        if ctx.settings.results_dir:
            _write_result_file(ctx.settings.results_dir, job_id,
                               lambda: store.get_result(job_id) or store.collect_result(job_id))
        _remove_spool_dir(ctx, job_id)
        log.info("job %s done", job_id)
    return {"job": job_id, "idx": idx, "job_complete": bool(end.job_complete)}


def may_be_stale(result: DeviceResult, now,
                 recheck_after_s=defaults.FINALIZE_RECHECK_AFTER_S) -> bool:
    """Whether finalize should look at the partition before the CPU tail: unless the message
    is younger than ``recheck_after_s`` (``result.sent_at``, set by prove just before
    its prove_end pushed it) and its job's deadline, if any (``deadline_at`` None: none), is
    further off than that."""
    if now - result.sent_at > recheck_after_s:
        return True
    deadline_at = result.deadline_at
    return deadline_at is not None and deadline_at - now < recheck_after_s


def _reroute_after_wrong_proof(ctx, exc, result: DeviceResult):
    """A proof from a GPU's partial failed self-verification: a device fault until a second,
    independent device agrees (prove_fault from finalizing; see docs/architecture.md, "Device
    faults")."""
    run = result.run
    retry = ctx.messages.after_device_fault(run, result.witness_ref)
    fault = ctx.store.prove_fault(result.worker, result.token, run, public_error(ctx, exc),
                                  run.circuit, ctx.settings.max_deliveries,
                                  message=retry, in_state="finalizing")
    log.warning("finalize %s/%s attempt %s: the proof from %s's partial failed self-verification:"
                " %s%s", run.job_id, run.idx, run.attempt, result.worker, fault.outcome,
                f" to {fault.worker}" if fault.outcome == "rerouted" else "")


def _remove_spooled(ctx, job_id, idx, path):
    """Delete the witness at real path ``path`` if it is the one synthesize wrote for this
    partition; never a file a submitter named (even one inside the spool dir)."""
    if path != os.path.realpath(spooled_witness(ctx, job_id, idx)):
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove_spool_dir(ctx, job_id):
    try:
        os.rmdir(os.path.join(ctx.settings.spool_dir, job_id))
    except OSError:
        pass


def _write_result_file(results_dir, job_id, result_fn):
    """The done job's result as ``<results_dir>/<job>.json`` too: a copy of what Redis holds,
    so a directory that cannot take it (full, read-only) is logged, the job stays done."""
    path = os.path.join(results_dir, f"{job_id}.json")
    try:
        os.makedirs(results_dir, exist_ok=True)
        with atomic_output(path, "w") as f:
            json.dump(result_fn(), f, indent=1)
    except OSError as exc:
        log.error("job %s done, but its result file %s was not written (%s): the result is "
                  "in Redis (cuzk.result)", job_id, path, exc.strerror or exc)
