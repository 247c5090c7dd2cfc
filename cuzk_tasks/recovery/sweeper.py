"""The sweeper: re-dispatch from dead workers, route what waits, and clean up.

:class:`Sweeper` runs inside CPU workers every heartbeat interval (and can be
called once from tests): partitions routed to a worker whose heartbeat expired
are re-dispatched (attempt + 1, guarded by the attempt seen) and routed again
(:mod:`cuzk_tasks.pipeline.routing`);
unrouted partitions are routed when a device is live; partitions whose stage no live worker
holds -- no stage lease, nothing queued (:meth:`Sweeper.recover_stages`) -- are re-driven;
by-name requests no live worker holds go back on their queue (:mod:`.request_leases`);
outbox entries a process that died left unpublished are published
(:meth:`cuzk_tasks.state.StateStore.publish_overdue`);
the spool files of ended jobs are deleted (:mod:`.spool`);
workers offline for longer than
``worker_retire_s`` (and with nothing routed to them) are retired from the registry; jobs
past their deadline fail.
"""

from __future__ import annotations

import logging
import time

from ..pipeline.routing import place_partition, route_partition
from ..service.periodic import PeriodicThread
from ..settings import defaults
from ..state import PartitionRun
from ..state.enums import PartitionState
from .request_leases import RequestLeases
from .spool import sweep_spool

log = logging.getLogger("cuzk_tasks.recovery.sweeper")


class Sweeper(PeriodicThread):
    """Re-dispatch partitions of dead devices; route waiting ones.  ``run_once()`` for tests."""

    thread_name = "cuzk-sweeper"

    def __init__(self, ctx, interval_s=None):
        super().__init__(interval_s or ctx.settings.heartbeat_interval_s)
        self.ctx = ctx
        self._suspects = {}  # (job, idx, state, attempt) -> when first seen held by no one
        self._last_look = None  # when the last sweep read the workers' leases (monotonic)
        self._requests = None  # RequestLeases (made at the first sweep)
        self._leases_looked = None  # when the lease checks last ran (monotonic)
        #: who holds the cluster-wide sweep (StateStore.claim_sweep): this worker's id
        self.holder = ctx.worker_id or "sweeper"

    def run_once(self, leases: bool = True) -> dict:
        """One sweep; ``leases``: run the lease checks too (the periodic thread runs them
        every half heartbeat TTL, :meth:`_leases_due`).

        Only one CPU worker's sweeper at a time does the cluster-wide checks (a lease of a
        heartbeat TTL, renewed by each sweep: ``StateStore.claim_sweep``), so their cost
        does not grow with the number of hosts; the others sweep only their own host's
        spool (which may be private) and stand by to take over."""
        store = self.ctx.store
        if not store.claim_sweep(self.holder, self.ctx.settings.heartbeat_ttl_s):
            self._suspects, self._last_look = {}, None  # another's sightings, not ours
            if leases:
                self.sweep_spool()
            return {"standby": True, "redispatched": 0, "routed": 0, "retired": 0,
                    "recovered": 0, "expired": 0, "requests": 0, "outbox": 0}
        redispatched = routed = 0
        # messages whose step ran in a process that died before it had them published
        overdue = store.publish_overdue()
        if overdue:
            log.warning("%d outbox message(s) left unpublished for %.0f s: sent to the publisher "
                        "(left for the next sweep if the broker refuses them)", overdue,
                        defaults.OUTBOX_GRACE_S)
        expired = store.expire_deadlines()
        for job_id in expired:
            log.warning("job %s failed: its deadline passed", job_id)
        # big jobs: the ends whose caller died before reaping them, and creations cut short
        # (each in short steps: Redis is never held long)
        store.reap_jobs()
        store.reap_creating()
        # one read of every worker per sweep (an O(workers) script): each step below uses it
        workers = store.all_workers()
        for dead in store.dead_workers_with_routed(workers):
            for job_id, idx in store.routed_partitions(dead):
                part = store.get_partition(job_id, idx)
                if not part:
                    continue
                if part.get("state") not in self._redispatched_states:
                    continue
                attempt = int(part.get("attempt") or 0)
                # worker_id: a partition meanwhile routed to a live device is left alone
                if store.redispatch(PartitionRun(job_id, idx, attempt), worker_id=dead):
                    redispatched += 1
                    log.warning("worker %s is offline: partition %s/%s re-dispatched (attempt %d)",
                                dead, job_id, idx, attempt + 1)
        recovered = requests = 0
        if leases:  # before routing: re-driven ones go out now
            recovered = self.recover_stages(workers)
            requests = self.recover_requests(workers)
            self.sweep_spool()
        waiting = store.unrouted_partitions()
        if waiting and not store.live_device_workers(workers):
            waiting = []  # no live device: they keep waiting
        for job_id, idx in waiting:
            part = store.get_partition(job_id, idx)
            job = store.get_job(job_id)
            if not part or not job:
                continue
            run = PartitionRun(job_id, idx, int(part.get("attempt") or 0), job["circuit"],
                               self._priority(job))
            state = part.get("state")
            if state == PartitionState.SYNTH_DONE.value:
                done = route_partition(self.ctx, run, witness_ref=part.get("witness_ref"))
            elif state == PartitionState.PENDING.value and store.host_affine:
                done = place_partition(self.ctx, run)
            else:
                continue
            routed += bool(done)
        # callbacks no consumer took before they expired (a queue no one reads)
        dropped = store.trim_callbacks() if self.ctx.settings.broker_is_state_redis else 0
        if dropped:
            log.warning("%d expired on_done callback(s) dropped: no consumer took them within "
                        "on_done_ttl_s", dropped)
        retired = []
        if self.ctx.settings.worker_retire_s > 0:
            retired = store.retire_workers(self.ctx.settings.worker_retire_s)
            for worker_id in retired:
                log.warning("worker %s retired: offline for more than %.0f s (worker_retire_s)",
                            worker_id, self.ctx.settings.worker_retire_s)
        return {"redispatched": redispatched, "routed": routed, "retired": len(retired),
                "recovered": recovered, "expired": len(expired), "requests": requests,
                "outbox": overdue}

    def sweep_spool(self) -> int:
        """Delete the spool files of ended jobs (:func:`cuzk_tasks.recovery.spool.sweep_spool`); a
        filesystem problem is logged, never stops the sweep."""
        settings = self.ctx.settings
        try:
            return sweep_spool(self.ctx.store, settings.spool_dir, settings.job_retention_s)
        except OSError as exc:
            log.warning("spool sweep of %s failed: %s", settings.spool_dir, exc)
            return 0

    def _leases_due(self) -> bool:
        """The lease checks read every in-flight partition (their cost grows with the
        backlog), so they run every half heartbeat TTL, not every sweep: a lost stage is still
        seen twice a TTL apart within 1.5 TTLs of its loss (docs/architecture.md, "Stage
        leases")."""
        now = time.monotonic()
        if self._leases_looked is not None and \
                now - self._leases_looked < self.ctx.settings.heartbeat_ttl_s / 2:
            return False
        self._leases_looked = now
        return True

    @property
    def _redispatched_states(self):
        """The states of a partition routed to a dead device that re-dispatch moves: with
        host-affine stages a partition is placed while pending, and everything before its
        finalize was to happen on the lost host."""
        states = {PartitionState.SYNTH_DONE.value, PartitionState.PROVING.value}
        if self.ctx.store.host_affine:
            states |= {PartitionState.PENDING.value, PartitionState.SYNTHESIZING.value}
        return states

    def _priority(self, job) -> int:
        return self.ctx.settings.priority(job.get("priority"))

    #: states whose message has been delivered: only a live lease accounts for them
    RUNNING_STATES = (PartitionState.SYNTHESIZING.value, PartitionState.PROVING.value)

    def recover_stages(self, workers=None) -> int:
        """Re-drive the partitions whose stage no one holds (docs/architecture.md, "Stage
        leases").  A partition whose stage is due or running (``stage_partitions``) is held
        when a live worker reported its attempt in its last heartbeat (the lease: reserved or
        running there) or -- while it waits for its message (pending, routed synth_done,
        finalizing) -- when its queue is not empty.  One held by no one on two sweeps at least
        a heartbeat TTL apart (a message between a worker's pop and its next heartbeat is
        held) has lost its stage: its message was lost, or is stranded in kombu's unacked
        hash with no live worker running it.  ``recover_stage`` moves it back one step with
        attempt + 1 and queues that stage again.  ``workers``: this sweep's read of every
        worker (None: read here).  Returns how many were re-driven."""
        store, settings = self.ctx.store, self.ctx.settings
        due = store.stage_partitions()
        if not due:
            self._suspects = {}
            return 0
        workers = store.all_workers() if workers is None else workers
        queues = {w["worker_id"]: w.get("queue") for w in workers}
        # host-affine: the CPU queue of each worker's host, where that host has a live CPU
        # worker -- a message waiting on the queue of a host with none is held by no one
        host_queues = {w.get("host"): w.get("host_queue") for w in workers
                       if w.get("role") == "cpu" and w.get("online") and w.get("host_queue")}
        cpu_queue_of = {w["worker_id"]: host_queues.get(w.get("host")) for w in workers}
        held = store.held_stages(workers)
        now = time.monotonic()
        if self._last_look is not None and now - self._last_look > (
                settings.heartbeat_ttl_s + settings.heartbeat_interval_s):
            # the sweeps were not continuous (a Redis outage or pause held this thread): the
            # workers' heartbeats may not have reported since, so earlier sightings do not count
            self._suspects = {}
        self._last_look = now
        empty = {}  # queue name -> nothing waiting in it

        def queue_empty(queue):
            if queue not in empty:
                empty[queue] = self.ctx.queue_depth(queue) == 0
            return empty[queue]

        suspects, recovered = {}, 0
        for job_id, idx, state, attempt, worker in due:
            if PartitionRun(job_id, idx, attempt) in held:
                continue
            if state not in self.RUNNING_STATES:
                if state == PartitionState.SYNTH_DONE.value:
                    queue = queues.get(worker)
                elif not store.host_affine:
                    queue = settings.stage_queue
                elif not worker:
                    continue  # pending, not placed yet: it waits in the unrouted set
                else:
                    queue = cpu_queue_of.get(worker)
                if queue and not queue_empty(queue):
                    continue
                if not queue and not store.host_affine:
                    continue
            key = (job_id, idx, state, attempt)
            first_seen = self._suspects.get(key, now)
            suspects[key] = first_seen
            if now - first_seen < settings.heartbeat_ttl_s:
                continue
            message = None
            if state in (PartitionState.PENDING.value, PartitionState.SYNTHESIZING.value):
                job = store.get_job(job_id)
                if job is None:  # reaped meanwhile: recover_stage would refuse it ("unknown")
                    continue
                message = self.ctx.messages.synthesize(PartitionRun(
                    job_id, idx, attempt + 1, job["circuit"], self._priority(job)))
            if store.recover_stage(PartitionRun(job_id, idx, attempt), state, message=message):
                recovered += 1
                suspects.pop(key)
                log.warning("partition %s/%s (%s, attempt %d): no live worker holds its stage; "
                            "re-driven as attempt %d", job_id, idx, state, attempt, attempt + 1)
        self._suspects = suspects
        return recovered

    def recover_requests(self, workers=None) -> int:
        """Put back on their queue the by-name requests no live worker holds
        (:class:`~cuzk_tasks.recovery.request_leases.RequestLeases`); returns how many."""
        if self._requests is None:
            if not self.ctx.broker_client():  # kombu's unacked hash is the Redis transport's
                return 0
            settings = self.ctx.settings
            self._requests = RequestLeases(self.ctx.app, self.ctx.store, settings.heartbeat_ttl_s,
                                           settings.heartbeat_interval_s)
        return self._requests.recover(workers)

    def step(self):
        try:
            self.run_once(leases=self._leases_due())
        except Exception:
            # a sighting before an outage and one after it are not a TTL of evidence: the
            # workers' heartbeats have not reported what they hold since Redis came back
            self._suspects = {}
            raise
