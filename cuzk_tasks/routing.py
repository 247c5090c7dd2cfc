"""Route partitions to device workers, and re-dispatch from dead ones.

``route_partition`` picks a live device worker (least outstanding work: the
size of its ``routed`` set; among equals, one whose resident set already holds
the circuit), records the choice with the ``route`` Lua transition and sends
prove_start to that device's queue; prove_start then publishes finalize (cpu
queue) itself (``send_chain``).  With no live device the partition stays in the
``unrouted`` set.

:class:`Sweeper` runs inside CPU workers every heartbeat interval (and can be
called once from tests): partitions routed to a worker whose heartbeat expired
are re-dispatched (attempt + 1, guarded by the attempt seen) and routed again;
unrouted partitions are routed when a device is live.
"""

from __future__ import annotations

import logging

from .periodic import PeriodicThread

log = logging.getLogger("cuzk_tasks.routing")


def choose_worker(live_workers, circuit):
    """The best live device worker for ``circuit``, or None."""
    candidates = [w for w in live_workers if w.get("queue")]
    if not candidates:
        return None

    def key(w):
        resident = circuit in (w.get("resident") or [])
        return (int(w.get("outstanding") or 0), 0 if resident else 1, w["worker_id"])

    return min(candidates, key=key)


def send_chain(ctx, worker, job_id, idx, attempt, circuit, witness_ref, priority):
    """Send the partition's prove_start -> finalize chain: prove_start on ``worker``'s device
    queue, told (``finalize_queue``) to publish finalize (cpu queue, same priority) itself
    once gpu_end has advanced the partition.  One plain message instead of a Celery canvas
    chain, whose signature cloning and chain bookkeeping cost the synthesize task and the
    device's hand-over between partitions measurably more (docs/architecture.md, "Celery
    settings and why")."""
    from .celery_app import TASK_PROVE_START

    ctx.app.send_task(TASK_PROVE_START, args=(job_id, idx, attempt, circuit, witness_ref),
                      kwargs={"finalize_queue": ctx.settings.cpu_queue, "priority": priority},
                      queue=worker["queue"], priority=priority)


def route_partition(ctx, job_id, idx, attempt, circuit, witness_ref, priority):
    """Route one synth_done partition; True when a chain was sent."""
    store = ctx.store
    worker = choose_worker(store.live_device_workers(), circuit)
    if worker is None:
        log.info("partition %s/%s waits: no live device worker", job_id, idx)
        return False
    if not store.route(job_id, idx, attempt, worker["worker_id"]):
        log.info("route %s/%s attempt %s rejected (stale or already routed)", job_id, idx, attempt)
        return False
    send_chain(ctx, worker, job_id, idx, attempt, circuit, witness_ref, priority)
    log.info("partition %s/%s attempt %s -> %s", job_id, idx, attempt, worker["worker_id"])
    return True


class Sweeper(PeriodicThread):
    """Re-dispatch partitions of dead devices; route waiting ones.  ``run_once()`` for tests."""

    thread_name = "cuzk-sweeper"

    def __init__(self, ctx, interval_s=None):
        super().__init__(interval_s or ctx.settings.heartbeat_interval_s)
        self.ctx = ctx

    def run_once(self) -> dict:
        from .state import PartitionState

        store = self.ctx.store
        redispatched = routed = 0
        for dead in store.dead_workers_with_routed():
            for job_id, idx in store.routed_partitions(dead):
                part = store.get_partition(job_id, idx)
                if not part:
                    continue
                if part.get("state") not in (PartitionState.SYNTH_DONE.value,
                                             PartitionState.GPU.value):
                    continue
                attempt = int(part.get("attempt") or 0)
                # worker_id: a partition meanwhile routed to a live device is left alone
                if store.redispatch(job_id, idx, attempt, worker_id=dead):
                    redispatched += 1
                    log.warning("worker %s is offline: partition %s/%s re-dispatched (attempt %d)",
                                dead, job_id, idx, attempt + 1)
        waiting = store.unrouted_partitions()
        if waiting and not store.live_device_workers():
            waiting = []  # no live device: they keep waiting
        for job_id, idx in waiting:
            part = store.get_partition(job_id, idx)
            job = store.get_job(job_id)
            if not part or not job or part.get("state") != PartitionState.SYNTH_DONE.value:
                continue
            priority = job.get("priority")  # 0 is a priority (the first served), not "unset"
            if priority is None:
                priority = self.ctx.settings.default_priority
            if route_partition(self.ctx, job_id, idx, int(part.get("attempt") or 0),
                               circuit=job["circuit"], witness_ref=part.get("witness_ref"),
                               priority=int(priority)):
                routed += 1
        return {"redispatched": redispatched, "routed": routed}

    def step(self):
        self.run_once()
