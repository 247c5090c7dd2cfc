"""Route partitions to device workers: the glue between the stages and the state store.

The routing decision is made inside the state store, atomically with recording it
(``_lib.lua`` ``choose_device``: a live device worker with the least outstanding work --
the size of its ``routed`` set -- then one whose resident set already holds the circuit,
then the smallest id).  ``synth_end`` routes the partition it completes; the ``route``
transition routes one that waited (:func:`route_partition`, called by the sweeper,
:mod:`cuzk_tasks.recovery.sweeper`).  Either records the partition's prove message
(``ctx.messages.prove``, cuzk_tasks/service/messages.py) for the chosen device's queue in the
outbox in the same step; prove later sends finalize (cpu queue) the same way, from
``prove_end``.  With no live device the partition stays in the ``unrouted`` set.
"""

from __future__ import annotations

import logging

from ..state import PartitionRun

log = logging.getLogger("cuzk_tasks.pipeline.routing")


def after_route(ctx, run: PartitionRun, routed) -> bool:
    """Log a routing outcome of ``run``; True when routed."""
    job_id, idx, attempt = run.job_id, run.idx, run.attempt
    if not routed:
        reason = routed.reason if routed is not None else "not asked"
        if reason == "no_live_device":
            log.info("partition %s/%s waits: no live device worker", job_id, idx)
        else:
            log.info("route %s/%s attempt %s rejected (%s)", job_id, idx, attempt, reason)
        return False
    log.info("partition %s/%s attempt %s -> %s", job_id, idx, attempt, routed.worker)
    return True


def route_partition(ctx, run: PartitionRun, witness_ref):
    """Route one synth_done partition (``run``: its attempt, circuit and priority) to the
    best live device; True when it was routed and its prove queued."""
    message = ctx.messages.prove(run, witness_ref)
    routed = ctx.store.route(run, circuit=run.circuit, message=message)
    return after_route(ctx, run, routed)


def place_partition(ctx, run: PartitionRun):
    """Host-affine stages: place one pending partition on the best live device whose host
    can run its synthesize and finalize, and queue its synthesize on that host's CPU queue;
    True when it was placed."""
    message = ctx.messages.synthesize(run)
    routed = ctx.store.route(run, circuit=run.circuit, message=message)
    return after_route(ctx, run, routed)
