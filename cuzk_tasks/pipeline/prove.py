"""prove (a device queue): prove_begin -> token; the prover's prove_start; prove_end(token),
which frees the device and moves the partition to finalizing.  prove_end records the
run's finalize (through the relay: cpu queue) -- or, when no other partition was routed to
the device at prove_begin, the device publishes the finalize itself just after sending
prove_end (a lone partition's latency: no relay, and prove_end's Redis work overlaps the
publish).  A GpuError is the device's fault: prove_fault moves the partition to another
device.  Neither Lua step is waited for on the device's way from one partition to the next:
prove_begin is sent before the compute and its reply read after it
(StateStore.send_prove_begin: a rejected run's result is dropped unseen; a redelivered
message reads it first), and prove_end is
sent unread, its reply read after the next run's compute (StateStore.send_prove_end)."""

from __future__ import annotations

import time

from ..errors import CuzkError, GpuError
from ..state import DeviceResult, PartitionRun
from .context import Context, fail, internal_error, log, ms_since, public_error, ref_path



def prove(ctx: Context, run: PartitionRun, witness_ref, finalize_queue,
          redelivered: bool = False):
    """The device's share of ``run``, whose witness is ``witness_ref``; prove_end queues
    finalize on ``finalize_queue`` (at the run's priority) when the partition advances.  All
    come in every prove message
    (:meth:`~cuzk_tasks.service.messages.StageMessages.prove`).  Returns None: the
    partial proof travels only in finalize's message (a
    :class:`~cuzk_tasks.state.DeviceResult`).

    ``redelivered``: the broker put this message back (its process died, or it was
    requeued).  Its prove_begin is then read *before* the compute: a compute that kills its
    process never gets to read a rejection after it, so a poison message would come back for
    ever; read first, delivery ``max_deliveries`` + 1 is refused without running."""
    slot = ctx.run_slot
    if slot is not None:  # before prove_begin: while the hash says proving this run, so does it
        slot.set(run.member)
    try:
        _prove(ctx, run, witness_ref, finalize_queue, redelivered)
    finally:
        if slot is not None:  # after prove_end / prove_fault, or a rejected prove_begin
            slot.set("")


def _prove(ctx, run: PartitionRun, witness_ref, finalize_queue, redelivered=False):
    store, wid = ctx.store, ctx.worker_id
    job_id, idx, attempt = run.job_id, run.idx, run.attempt
    begin = store.send_prove_begin(wid, run, ctx.settings.max_deliveries)
    started = None
    if redelivered:  # read first: the compute may be what killed its process before
        _settle_handed_on_end(ctx)
        started = begin.reply()
    t0 = time.perf_counter()
    partial = raised = None
    if started is None or started.ok:
        try:  # the compute writes nothing: its outcome counts once prove_begin agrees
            partial = ctx.prover.prove_start(run.circuit,
                                             ref_path(ctx, "witness_ref", witness_ref))
        except Exception as exc:  # noqa: BLE001 - handled below, as the compute's outcome
            raised = exc
    compute_ms = ms_since(t0)  # the compute alone, not prove_begin's reply after it
    if started is None:
        _settle_handed_on_end(ctx)
        started = begin.reply()
    if not started.ok:
        log.info("prove %s/%s attempt %s on %s rejected: %s", job_id, idx, attempt, wid,
                 started.reason)
        return
    token = started.token
    result = message = device_fault = None
    ended = False
    try:
        if raised is not None:
            raise raised
        result = DeviceResult(run, witness_ref=witness_ref, worker=wid, token=token,
                              backend=ctx.prover.backend_name, partial=partial,
                              prove_ms=compute_ms,
                              # for finalize's look before its CPU tail (finalize.py,
                              # may_be_stale)
                              deadline_at=started.deadline_at, sent_at=time.time())
        message = ctx.messages.finalize(finalize_queue, result)
        if started.others_routed == 0 and store.relay:
            # nothing waits behind this run: its finalize goes out from here, now
            _end_then_publish(ctx, run, token, ms_since(t0), message)
            ended = True
    except GpuError as exc:  # the device's fault, not the input's: another device retries
        result = message = None
        device_fault = exc
    except CuzkError as exc:
        result = message = None
        fail(ctx, run, exc, token=token)
    except Exception as exc:
        result = message = None
        log.exception("prove %s/%s crashed", job_id, idx)
        fail(ctx, run, internal_error(exc), token=token)
    finally:
        # compare-and-delete on OUR token: never clears a worker that moved on; sends
        # finalize (the outbox) in the same step when the partition advances
        if device_fault is None and not ended:
            finalizing = result is not None
            if store.relay:  # a device's store: on to the next partition (most likely in
                # this process's pipe already), the reply read after its compute
                ctx.handed_on_end = (run, finalizing, store.send_prove_end(
                    wid, token, run, ms_since(t0), message=message))
            else:
                _log_unadvanced(run, finalizing, store.prove_end(wid, token, run,
                                                                 ms_since(t0), message=message))
    if device_fault is not None:
        _reroute_after_device_fault(ctx, device_fault, token, run, witness_ref)
        return
    if result is not None and time.monotonic() >= ctx.device_memory_due:
        # at most once per heartbeat interval: each report is a Redis round trip between this
        # partition and the device's next one
        ctx.device_memory_due = time.monotonic() + ctx.settings.heartbeat_interval_s
        publish_device_memory(store, wid, ctx.settings.heartbeat_ttl_s, ctx.backend)


def _end_then_publish(ctx, run: PartitionRun, token, prove_ms, message):
    """A lone run's end: prove_end first, unread -- its Redis work overlaps the publish
    instead of the finalize's way to a CPU worker -- then the finalize, published here.
    Arriving after prove_end ran, the finalize finds its partition finalizing.  When the
    broker cannot take it, it goes into the outbox after all (finalize_due, once prove_end's
    reply says that step ran and advanced the partition)."""
    store = ctx.store
    sent = store.send_prove_end(ctx.worker_id, token, run, prove_ms)
    if store.publish_now(message):
        ctx.handed_on_end = (run, False, sent)
        return
    end = sent.reply()
    if not end.partition_advanced:
        _log_unadvanced(run, True, end)
    elif store.finalize_due(run, token, message):
        log.warning("prove %s/%s attempt %s: finalize not published (broker unavailable); "
                    "left in the outbox", run.job_id, run.idx, run.attempt)


def _settle_handed_on_end(ctx):
    """Read the reply of the prove_end the previous run sent unread at its hand-over, if any
    (it came long ago: no wait).  A reply that cannot be read runs the step again, a no-op
    when the first one ran (compare-and-delete on that run's token)."""
    handed_on, ctx.handed_on_end = ctx.handed_on_end, None
    if handed_on is None:
        return
    run, finalizing, sent = handed_on
    try:
        end = sent.reply()
    except Exception:  # noqa: BLE001 - the step was sent; this run is not its business
        log.warning("prove %s/%s attempt %s: prove_end's reply not read", run.job_id, run.idx,
                    run.attempt, exc_info=True)
        return
    _log_unadvanced(run, finalizing, end)


def _log_unadvanced(run: PartitionRun, finalizing, end):
    if finalizing and not end.partition_advanced:
        log.info("prove %s/%s attempt %s: partition did not advance (re-dispatched or "
                 "cancelled meanwhile); not finalizing", run.job_id, run.idx, run.attempt)


def _reroute_after_device_fault(ctx, exc, token, run: PartitionRun, witness_ref):
    """prove_fault: clear this worker (compare-and-delete) and move the partition to another
    live device with its next attempt, or fail it after max faults / with no other device."""
    retry = ctx.messages.after_device_fault(run, witness_ref)
    fault = ctx.store.prove_fault(ctx.worker_id, token, run, public_error(ctx, exc), run.circuit,
                                  ctx.settings.max_deliveries, message=retry)
    log.warning("prove %s/%s attempt %s: device error on %s (%s): %s%s", run.job_id,
                run.idx, run.attempt, ctx.worker_id, exc, fault.outcome,
                f" to {fault.worker}" if fault.outcome == "rerouted" else "")


def publish_device_memory(store, worker_id, ttl_s, backend):
    """Put a GPU backend's device memory and resident bases on the worker hash (status page).

    Runs in the pool process, the only one holding the CUDA context; backends without
    ``memory_info`` (the CPU core) publish nothing.  Never fails the task."""
    info = getattr(backend, "memory_info", None)
    if info is None or not worker_id:
        return False
    try:
        mem = info()
        store.heartbeat(worker_id, ttl_s, extra={
            "gpu_name": mem.get("name") or "",
            "gpu_mem_total_mb": int(mem["total_bytes"]) >> 20,
            "gpu_mem_used_mb": (int(mem["total_bytes"]) - int(mem["free_bytes"])) >> 20,
            "gpu_resident_mb": int(mem.get("resident_bytes", 0)) >> 20,
        })
        return True
    except Exception:  # the status is best effort; the proof is what matters
        log.warning("could not publish device memory for %s", worker_id, exc_info=True)
        return False
