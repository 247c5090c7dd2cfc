"""Worker processes: ``cuzk-tasks worker --device N`` and ``cuzk-tasks worker --cpu``.

A device worker is a Celery worker with a prefork pool of ONE process,
consuming only its host-qualified device queue (``cuzk.dev.<host>.<N>``).  The
compute backend (CUDA context) is created in the pool child
(``worker_process_init``), never in the parent, so a child killed by a bad
partition takes its context with it and the parent forks a clean one.  The
parent runs the heartbeat thread: ``register_worker`` once, then
``heartbeat(ttl)`` every interval; on shutdown it marks the worker offline.
The worker's identity (id ``<host>:dev<N>``, role, backend) is set on the Celery app
(``app.cuzk_identity``) before the pool forks, so each pool process's context has it.
While the pool process proves, the parent already hands it the next prove
of the queue (``DEVICE_WORKER_TUNING``), so partitions follow each other without
the parent's broker round trips in between; and once the pool has forked, the parent's
main thread lowers its priority (``defaults.DEVICE_PARENT_NICE``), so its ack and events
at a hand-over never take the core the pool process needs for the next partition.

A CPU worker consumes the cpu queue (submit, synthesize, finalize) with a
configurable concurrency and runs the :class:`~cuzk_tasks.recovery.sweeper.Sweeper`.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import logging
import os
import signal
import socket
import sys
import time
from typing import NamedTuple

from celery import bootsteps, signals
from celery.worker import state as celery_state

from .. import pipeline
from ..celery_app import create_app
from ..errors import IdentityHeldError
from ..recovery.request_leases import held_requests
from ..recovery.sweeper import Sweeper
from ..settings import defaults
from ..settings.config import Settings
from ..settings import redis_url
from ..settings.redis_url import is_outage
from ..state import Registration, StateStore, WorkerRole
from . import consumer_watch, preflight, tracing
from .periodic import PeriodicThread
from .publisher import OutboxRelay
from .request_lane import add_request_lane
from .seal import StageSeal, check_peers
from .task_names import stage_partition

log = logging.getLogger("cuzk_tasks.service.worker")


class Heartbeat(PeriodicThread):
    """Publishes a worker's heartbeat (with TTL) from the worker's main process."""

    thread_name = "cuzk-heartbeat"

    def __init__(self, store, worker_id, settings: Settings, extra=None, extra_fn=None,
                 slot=None, holding_fn=None, registration: Registration | None = None,
                 holder=None, on_lost=None, run_slot=None):
        super().__init__(settings.heartbeat_interval_s)
        self.store = store
        self.worker_id = worker_id
        self.settings = settings
        self.extra = extra or {}
        self.extra_fn = extra_fn  # optional: more fields per beat (NVML readings)
        self.slot = slot  # the host slot this worker's name came from (kept alive by beats)
        self.holding_fn = holding_fn  # the messages this process holds (held_messages)
        # what register_worker recorded: a beat that finds it gone (Redis back empty) records
        # it again, with the resident set the pool process last published (seen by the beats)
        self.registration = registration
        # the process that claimed the worker id (register_identity); on_lost() is called
        # once when a beat finds another process holding it (it claimed the id while this
        # one's heartbeat had lapsed): this process must stop, not share the id's queue
        self.holder = holder
        self.on_lost = on_lost
        self.lost_to = None
        self.run_slot = run_slot  # a device worker's pipeline.RunSlot: reported as `running`

    def beat(self):
        extra = dict(self.extra)
        if self.extra_fn is not None:
            try:
                extra.update(self.extra_fn() or {})
            except Exception:  # a flaky probe never stops the heartbeat
                log.debug("heartbeat extra probe failed", exc_info=True)
        if self.run_slot is not None:  # what the pool process proves now (heartbeat.lua)
            extra["running"] = self.run_slot.get()
        held = self.holding_fn() if self.holding_fn is not None else None
        beat = self.store.heartbeat(self.worker_id, self.settings.heartbeat_ttl_s, extra=extra,
                                    slot=self.slot, holding=held.stages if held else None,
                                    holding_requests=held.requests if held else None,
                                    registration=self.registration, holder=self.holder)
        if beat.held_by is not None:
            if self.lost_to is None:
                self.lost_to = beat.held_by
                log.error("worker %s: another process (%s) holds this worker id now -- it "
                          "started while this one's heartbeat had lapsed; this process stops "
                          "so that one id is one process (give each a unique CUZK_HOSTNAME)",
                          self.worker_id, beat.held_by)
                if self.on_lost is not None:
                    self.on_lost()
            return beat
        if self.registration is not None:
            if beat.registered:
                log.warning("worker %s: its registration was gone from Redis (restarted "
                            "empty?): registered again as %s, queue %s", self.worker_id,
                            self.registration.role, self.registration.queue)
            seen = beat.resident
            if seen is not None and list(seen) != list(self.registration.resident or ()):
                self.registration = dataclasses.replace(self.registration, resident=tuple(seen))
        return beat

    step = beat

    def start(self):
        self.beat()  # online at once, not one interval later
        return super().start()


class HeldMessages(NamedTuple):
    """What a worker process holds, as its heartbeat reports it (:func:`held_messages`)."""

    stages: list  # the run (PartitionRun) of each stage message: its stage leases
    requests: list  # Celery task ids of the by-name requests: its request leases


class ConsumingChannel:
    """The kombu consumer a worker takes its tasks with now (``consumer``; None before the
    consumer first started), recorded by :class:`RecordConsumingChannel` each time Celery
    (re)starts the consumer: after a lost connection, on a new channel.  A CPU worker's
    request lane reads with a consumer and channel of its own (``lane_consumer``, recorded by
    :class:`~cuzk_tasks.service.request_lane.RequestLane`)."""

    def __init__(self):
        self.consumer = None
        self.lane_consumer = None

    @property
    def channel(self):
        """The task consumer's channel (None before it first started)."""
        return self.consumer.channel if self.consumer is not None else None

    def consumers(self) -> tuple:
        """The kombu consumers reading now (none before the consumer first started); each
        has its ``channel`` and its ``queues`` (as Celery's control changes them)."""
        return tuple(c for c in (self.consumer, self.lane_consumer) if c is not None)

    def channels(self) -> tuple:
        """The channels read now (none before the consumer first started)."""
        return tuple(c.channel for c in self.consumers())


class RecordConsumingChannel(bootsteps.StartStopStep):
    """A consumer bootstep (``app.steps["consumer"]``): records the task consumer's channel
    in the app's ``cuzk_consuming`` (:class:`ConsumingChannel`) at every start of the
    consumer, which Celery restarts after a lost broker connection."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, c):
        consuming = getattr(c.app, "cuzk_consuming", None)
        if consuming is None:
            return
        if consuming.consumer is not None:
            log.info("consumer restarted on a new broker channel: requests reserved before "
                     "no longer hold their stages")
        consuming.consumer = c.task_consumer


def consume_recording_channel(app) -> ConsumingChannel:
    """Have ``app``'s workers record the channel their consumer reads (before the worker is
    made): what :func:`held_messages` tells reserved requests apart by."""
    app.cuzk_consuming = ConsumingChannel()
    app.steps["consumer"].add(RecordConsumingChannel)
    return app.cuzk_consuming


def abandoned(request, *consuming_channels) -> bool:
    """True for a request Celery still lists but will never run: reserved, not yet accepted
    by a pool process, on a broker channel that has closed since (a lost connection) -- or,
    given ``consuming_channels`` (the ones the consumers read now), on any other channel: kombu's
    Redis channel can fail to close when the connection is lost mid-read, and stays
    "open" though no one reads or acks on it.

    On a reconnect Celery's consumer means to drop such requests from its registry, but its
    ``on_close`` looks the reserved *Request objects* up among the registry's *task ids*, so
    they stay; the pool's flush drops their jobs, and kombu could not put their messages back
    while Redis was down (they sit in its ``unacked`` hash).  Reported as held, such a
    request would keep its stage's lease alive for ever and the sweeper would never re-drive
    the partition.  A request a pool process accepted (``time_start`` set) still runs and
    keeps its lease, whatever became of its channel."""
    if getattr(request, "time_start", None) is not None:
        return False
    channel = getattr(getattr(request, "message", None), "channel", None)
    if channel is None:
        return False
    if consuming_channels and all(channel is not c for c in consuming_channels):
        return True
    return bool(getattr(channel, "closed", False))


def held_messages(consuming: ConsumingChannel | None = None) -> HeldMessages | None:
    """Every message this Celery worker process holds -- reserved (prefetched) or running in
    a pool process: the ``(job, idx, attempt)`` of each stage message (its stage leases,
    docs/architecture.md, "Stage leases") and the task id of each by-name request (its
    request leases, :mod:`cuzk_tasks.recovery.request_leases`).  Read in the worker's MAIN process,
    where Celery keeps that registry (``celery.worker.state.requests``, as ``celery inspect
    active`` reads it).  None when the registry kept changing while it was copied: holding
    unknown (a beat then leaves the last report as it is).  ``consuming``: the worker's
    :class:`ConsumingChannel`, which tells a request reserved before a lost connection from
    one reserved since (:func:`abandoned`)."""
    channels = consuming.channels() if consuming is not None else ()
    for _ in range(5):
        try:
            # a copy: the consumer thread mutates it
            requests = tuple(celery_state.requests.values())
            break
        except RuntimeError:  # changed size during the copy
            continue
    else:
        return None
    requests = tuple(r for r in requests if not abandoned(r, *channels))
    held = set()
    for request in requests:
        try:
            found = stage_partition(request.task_name, request.args, request.kwargs)
        except Exception:  # a request without a decodable body holds no stage of ours
            found = None
        if found is not None:
            held.add(found)
    return HeldMessages(sorted(held, key=lambda run: (run.job_id, run.idx, run.attempt)),
                        held_requests(requests))


def nvml_probe(device: int):
    """A callable returning gpu_name, gpu_mem_used_mb, gpu_mem_total_mb, gpu_util_pct of
    physical GPU ``device`` for the status page, or None without pynvml or a driver.

    NVML numbers the GPUs this process can see, ignoring CUDA_VISIBLE_DEVICES: on a host that
    is ordinal ``device``; in a container given one GPU (compose ``device_ids``) it is 0."""
    try:
        import pynvml  # optional (nvidia-ml-py)

        pynvml.nvmlInit()
        index = 0 if pynvml.nvmlDeviceGetCount() == 1 else int(device)
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return None

    def probe():
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return {"gpu_name": name, "gpu_mem_used_mb": mem.used // (1 << 20),
                "gpu_mem_total_mb": mem.total // (1 << 20), "gpu_util_pct": util.gpu}

    return probe


#: Device workers: the pool process gets the NEXT prove of its queue while it proves
#: (prefetch 2 = the running message + one reserved; no put-lock semaphore; "fcfs" writes the
#: reserved message into the process's pipe at once instead of after the running one has
#: been acked), so it starts the next partition without waiting for the parent's ack, BRPOP
#: and reservation round trips.  Every device has its own queue: the reserved message could
#: not run elsewhere anyway.  Why: cuzk_tasks/celery_app.py (module docstring).
DEVICE_WORKER_TUNING = {"prefetch_multiplier": 2, "pool_putlocks": False, "optimization": "fcfs"}

#: CPU workers: no put-locks, so a message is handed on as soon as it is reserved -- a
#: by-name request to its request lane's threads (cuzk_tasks/service/request_lane.py) instead
#: of waiting, as with put-locks, for a pool process to be free (a stage reserved meanwhile
#: waits in the pool's queue: prefetch 1 reserves at most one per pool process)
CPU_WORKER_TUNING = {"pool_putlocks": False}


def max_memory_per_child_kib(settings: Settings, role: str) -> int | None:
    """Celery's ``max_memory_per_child`` (KiB) for a worker of ``role``, None = no limit:
    ``max_memory_per_child_mb``, plus the zkey budget in a device worker."""
    if not settings.max_memory_per_child_mb:
        return None
    mb = settings.max_memory_per_child_mb + (settings.zkey_budget_mb if role == "device" else 0)
    return int(mb * 1024)


def run_celery_worker(app, queues, concurrency, nodename, loglevel, **tuning):
    """Run a prefork Celery worker consuming ``queues`` (a name or a list of names) in this
    process (what ``celery worker`` runs) until it stops; ``tuning`` takes WorkController
    options the command line cannot express."""
    queues = [queues] if isinstance(queues, str) else list(queues)
    # Celery's event heartbeat stays on (worker-online, worker-heartbeat every 2 s,
    # worker-offline: one PUBLISH each): Flower and `celery events` show a worker online by it
    worker = app.Worker(queues=queues, concurrency=concurrency, pool_cls="prefork",
                        hostname=nodename, loglevel=loglevel, without_gossip=True,
                        without_mingle=True, **tuning)
    worker.start()
    return worker.exitcode


#: `kill -USR2 -<pgid>` makes every process of a worker (parent and pool processes) write
#: every thread's stack to its log: where a stuck task is.  Not SIGUSR1: billiard raises
#: the soft time limit in pool processes with it.
STACK_DUMP_SIGNAL = signal.SIGUSR2


def dump_stacks_on(signum):
    # the real stderr: in pool processes Celery replaces sys.stderr with a logging proxy
    faulthandler.register(signum, file=sys.__stderr__, all_threads=True, chain=False)


def _start_after_pool_fork(app, *loops):
    """Start the periodic threads (heartbeat, sweeper) once Celery has forked its pool
    processes (``worker_ready``).  fork() copies only the calling thread: a lock another
    thread holds at that instant (an import in progress, a connection pool's) stays held in
    the child for ever, and the child's first task that needs it hangs.  Each loop's first
    step has already run in this thread, so its imports are done before any fork."""
    @signals.worker_ready.connect(weak=False)
    def _start(**_kwargs):
        for loop in loops:
            if loop is not None:
                loop.start()


def watch_consumer(settings: Settings, consuming: ConsumingChannel, worker_id, heartbeat,
                   slot=None, holder=None):
    """The worker's :class:`~cuzk_tasks.service.consumer_watch.ConsumerWatch` (None when
    ``consumer_stall_s`` is 0 or the broker is not Redis): a consumer that stopped taking
    messages takes the worker offline and out (:func:`consumer_watch.leave`).  It stops
    when a shutdown begins: a stopping consumer takes nothing while its tasks finish."""
    url = settings.broker_url
    if settings.consumer_stall_s <= 0 or not redis_url.is_redis(url):
        return None
    broker = redis_url.client(url, settings.sentinel_master,
                              socket_timeout=defaults.CONSUMER_WATCH_REDIS_S,
                              socket_connect_timeout=defaults.CONSUMER_WATCH_REDIS_S)

    def go_offline():
        heartbeat.stop(timeout_s=defaults.WORKER_STOP_REDIS_S)
        mark_offline(settings, worker_id, slot, holder)

    watch = consumer_watch.ConsumerWatch(
        consuming, broker, settings.consumer_stall_s,
        lambda queues, stalled_s: consumer_watch.leave(worker_id, queues, stalled_s, go_offline))

    @signals.worker_shutting_down.connect(weak=False)
    def _stop_watching(**_kwargs):
        watch.stop(timeout_s=0)

    return watch


def exit_for(exitcode, watch=None):
    """End a worker process: with the consumer watch's code when it left for a stalled
    consumer (its supervisor starts it again), else Celery's ``exitcode`` when non-zero."""
    if watch is not None and watch.stalled:
        raise SystemExit(consumer_watch.EXIT_CONSUMER_STALLED)
    if exitcode:
        raise SystemExit(exitcode)


def _yield_cores_to_pool(app, nice: int = defaults.DEVICE_PARENT_NICE):
    """A device worker: once its pool process has forked (``worker_ready``), this main thread
    lowers its own priority to ``nice`` (never raises it), so that the pool process wins a
    core when both wake at a hand-over (defaults.DEVICE_PARENT_NICE).  Linux nice values are
    per thread: the pool process keeps the one it forked with, recorded here for a
    replacement forked later to restore (:func:`_init_child`)."""
    app.cuzk_pool_nice = os.getpriority(os.PRIO_PROCESS, 0)

    @signals.worker_ready.connect(weak=False)
    def _lower(**_kwargs):
        if nice > os.getpriority(os.PRIO_PROCESS, 0):
            os.setpriority(os.PRIO_PROCESS, 0, nice)


def _restore_pool_nice(nice: int | None) -> None:
    """In a pool process: a replacement forked after its parent lowered its priority
    (:func:`_yield_cores_to_pool`) inherited that priority; take back ``nice``, the one the
    first pool process had.  Raising a priority needs CAP_SYS_NICE (or RLIMIT_NICE): without
    it the process proves on at the lower one, and says so once."""
    if nice is None:
        return
    have = os.getpriority(os.PRIO_PROCESS, 0)
    if have <= nice:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        log.warning("pool process %d runs at nice %d, inherited from its worker's main thread "
                    "(defaults.DEVICE_PARENT_NICE); going back to %d needs CAP_SYS_NICE",
                    os.getpid(), have, nice)


def _init_child(app):
    """worker_process_init: build this pool process's context (and its backend)."""
    @signals.worker_process_init.connect(weak=False)
    def _on_child(**_kwargs):
        dump_stacks_on(STACK_DUMP_SIGNAL)
        _restore_pool_nice(getattr(app, "cuzk_pool_nice", None))
        tracing.instrument()  # with the otel extra: a span per task, a trace per job
        ctx = pipeline.context(app)
        if ctx.identity.role == "device":
            backend = ctx.backend  # CUDA (or the CPU core) initialised here, in the child
            log.info("device worker %s: backend %s ready in pool process %d", ctx.worker_id,
                     getattr(backend, "name", backend), os.getpid())


def slot_holder() -> str:
    """Who holds a host slot: this process on this (container) host.  ops/healthcheck.py
    finds the slot of a worker's main process by the same text."""
    return f"{socket.gethostname()}:{os.getpid()}"


def await_lapsing_slots(store, settings: Settings, sleep=None) -> list[int]:
    """Before a claim: wait until the held slots below the lowest free one that no live
    heartbeat renews have lapsed, so a recreated worker takes its predecessor's slot rather
    than the next one.  A predecessor that could not release its slot at its stop keeps it
    for up to one heartbeat TTL -- ``docker compose up --force-recreate`` stops Redis before
    the workers that depend on it.  One and a half heartbeat intervals tell the two apart: a
    live holder renews its slot within one.  Waits only while some slot is held; returns the
    indices found stale."""
    sleep = time.sleep if sleep is None else sleep
    group, interval = settings.host_slot, settings.heartbeat_interval_s
    before = store.held_host_slots(group)
    if not before:
        return []
    sleep(1.5 * interval)
    after = store.held_host_slots(group)
    # not renewed: its TTL fell by (nearly) the whole wait; a live one falls by <= interval
    stale = {n: ms for n, ms in after.items()
             if n in before and before[n] - ms >= 1.25 * interval * 1000}
    if stale:
        log.warning("host slot %s: waiting %.1f s for slot(s) %s of stopped workers to lapse",
                    group, max(stale.values()) / 1000, sorted(stale))
        sleep(max(stale.values()) / 1000 + 0.05)
    return sorted(stale)


def _refusal(worker_id, claim, settings: Settings) -> IdentityHeldError:
    holder = claim.holder
    host, _, pid = (holder or "").rpartition(":")
    who = (f"process {pid} on host {host}" if holder
           else f"a process that recorded no holder (pid {claim.pid or 'unknown'})")
    return IdentityHeldError(worker_id, holder, (
        f"worker id {worker_id} is held by a live heartbeat of another process: {who}.  Two "
        f"processes with one id would share its queue.  Give this one a unique host name "
        f"(CUZK_HOSTNAME, or CUZK_HOST_SLOT) or another --device, or stop the other; if that "
        f"process is gone, its heartbeat lapses within {settings.heartbeat_ttl_s:g} s "
        f"(CUZK_HEARTBEAT_TTL_S) and a restart then succeeds"))


def register_identity(store, settings: Settings, worker_id, registration: Registration,
                      holder: str, sleep=None):
    """Register this process as worker ``worker_id`` and claim the id for it (``holder``,
    :func:`slot_holder`): one identity, one process.  When a heartbeat of another process
    holds the id, watch it for one and a half heartbeat intervals, as
    :func:`await_lapsing_slots` does: renewed, the holder lives and this raises
    :class:`IdentityHeldError` naming it; not renewed, the holder stopped without releasing
    the id (``kill -9``, or Redis unreachable at its stop) -- its own restart, say -- and
    this waits (one log line) for its heartbeat to lapse, at most one TTL, and claims again;
    refused again (another process won meanwhile), it raises."""
    sleep = time.sleep if sleep is None else sleep
    interval = settings.heartbeat_interval_s

    def claim():
        return store.register_worker(worker_id, registration.role, registration.host,
                                     device=registration.device, queue=registration.queue,
                                     holder=holder, ttl_s=settings.heartbeat_ttl_s)

    got = claim()
    if got:
        return got
    before = got.ttl_ms
    sleep(1.5 * interval)
    left = store.heartbeat_ttl_ms(worker_id)
    # a live holder renews its heartbeat within one interval; a dead one's TTL just falls
    # (-1: a key without a TTL, written by hand: it never lapses)
    if left == -1 or (left > 0 and before - left < 1.25 * interval * 1000):
        raise _refusal(worker_id, got, settings)
    if left > 0:
        log.warning("worker %s: the heartbeat of %s, which held this id, is not renewed (it "
                    "stopped without releasing it): waiting %.1f s for it to lapse",
                    worker_id, got.holder or "an unknown process", left / 1000)
        sleep(left / 1000 + 0.05)
    got = claim()
    if not got:
        raise _refusal(worker_id, got, settings)
    return got


def _stop_this_worker():
    """Ask this Celery worker's main process for a warm shutdown (what SIGTERM does)."""
    os.kill(os.getpid(), signal.SIGTERM)


def stop_loops(*loops, timeout_s: float = defaults.WORKER_STOP_REDIS_S) -> None:
    """Stop the periodic threads (heartbeat, sweeper) together, waiting up to ``timeout_s``
    in all for a step in progress: one waiting out a Redis outage is left behind."""
    loops = [loop for loop in loops if loop is not None]
    for loop in loops:
        loop.stop(timeout_s=0)
    deadline = time.monotonic() + timeout_s
    for loop in loops:
        loop.stop(timeout_s=max(0.0, deadline - time.monotonic()))


def mark_offline(settings: Settings, worker_id, slot=None, holder=None) -> bool:
    """At a worker's stop: delete its heartbeat key and release its host slot, in one try
    bounded by ``WORKER_STOP_REDIS_S`` (a fresh connection, no outage retry).  With Redis
    unavailable it logs one warning and returns False: the key expires within a heartbeat
    TTL anyway, and a stop must not wait out an outage."""
    try:
        store = StateStore.from_url(settings.state_url, prefix=settings.prefix,
                                    sentinel_master=settings.sentinel_master,
                                    socket_timeout_s=defaults.WORKER_STOP_REDIS_S, retries=0)
        store.worker_offline(worker_id, slot=slot, holder=holder)
        return True
    except Exception as exc:
        if not is_outage(exc):
            raise
        log.warning("worker %s: Redis unavailable at its stop (%s): its heartbeat expires "
                    "within %.0f s", worker_id, type(exc).__name__, settings.heartbeat_ttl_s)
        return False


def _open_store(settings: Settings):
    """The worker process's state store: its transitions ride out a Redis restart."""
    return StateStore.from_settings(settings)


def claim_host_name(settings: Settings, store):
    """``(settings, slot)``: with ``settings.host_slot`` set, claim the lowest free host name
    ``<group>-<n>`` and return settings that use it (the pool processes read it from
    ``CUZK_HOSTNAME``), else ``(settings, None)``."""
    if not settings.host_slot:
        return settings, None
    await_lapsing_slots(store, settings)
    slot = store.claim_host_slot(settings.host_slot, slot_holder(), settings.heartbeat_ttl_s)
    os.environ["CUZK_HOSTNAME"] = slot.host
    log.warning("host slot %s claimed: host name %s", settings.host_slot, slot.host)
    return dataclasses.replace(settings, hostname=slot.host), slot


def stage_seal(settings: Settings, store) -> StageSeal:
    """The deployment's stage key (read, or made when missing: cuzk_tasks/service/seal.py),
    before the worker registers: a key other than the live workers' is refused here, in one
    line, instead of every message between them being refused later."""
    seal = StageSeal.load(settings.stage_key_file, create=True)
    check_peers(seal, store.all_workers())
    return seal


def advertised(settings: Settings, role: WorkerRole, seal: StageSeal,
               backend: str | None = None) -> dict:
    """What a worker's heartbeats advertise for placement (_lib.lua ``live_devices``): the
    circuits its registry serves (a JSON list of names) and, for a CPU worker with host-affine
    stages, its host's CPU queue (``host_queue``), which it consumes; its stage key's id, for
    the next worker's :func:`stage_seal`; a device worker's ``backend`` ("cpu", "gpu"): its
    kind, which the estimates are kept per (_lib.lua ``observe_estimates``) and the status
    page shows."""
    fields = {"pid": os.getpid(), "circuits": json.dumps(sorted(settings.circuits)),
              "stage_key_id": seal.key_id}
    if backend:
        fields["backend"] = backend
    if role == WorkerRole.CPU and settings.host_affine:
        fields["host_queue"] = settings.host_cpu_queue()
    return fields


def run_device_worker(settings: Settings, device: int, backend: str = "auto",
                      loglevel: str = "INFO"):
    store = _open_store(settings)
    started = preflight.check_device_worker(settings, store, backend)
    seal = stage_seal(settings, store)
    settings, slot = claim_host_name(settings, store)
    host = settings.hostname
    worker_id = settings.device_worker_id(device)
    queue = settings.device_queue(device)
    if backend != "cpu" and "CUDA_VISIBLE_DEVICES" not in os.environ:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    dump_stacks_on(STACK_DUMP_SIGNAL)
    registration = Registration(WorkerRole.DEVICE, host, device=device, queue=queue)
    holder = slot_holder()
    try:
        register_identity(store, settings, worker_id, registration, holder)
    except IdentityHeldError:
        mark_offline(settings, worker_id, slot, holder)  # the host slot, if any; never its key
        raise
    app = create_app(settings)
    app.cuzk_identity = pipeline.WorkerIdentity(worker_id, WorkerRole.DEVICE.value, backend)
    # shared with the pool process (made before it forks): what it proves now
    app.cuzk_run_slot = run_slot = pipeline.RunSlot()
    consuming = consume_recording_channel(app)
    _init_child(app)
    probe = nvml_probe(device) if backend != "cpu" else None
    heartbeat = Heartbeat(store, worker_id, settings, extra=advertised(settings, WorkerRole.DEVICE, seal, started),
                          extra_fn=probe, slot=slot,
                          holding_fn=lambda: held_messages(consuming),
                          registration=registration, holder=holder, on_lost=_stop_this_worker,
                          run_slot=run_slot)
    heartbeat.beat()  # online at once; the thread starts after the pool fork
    watch = watch_consumer(settings, consuming, worker_id, heartbeat, slot, holder)
    _yield_cores_to_pool(app)  # before the heartbeat's start: that thread inherits it
    _start_after_pool_fork(app, heartbeat, watch)
    log.warning("device worker %s consuming %s (backend %s)", worker_id, queue, backend)
    try:
        exitcode = run_celery_worker(
            app, queue, 1, f"dev{device}@{host}", loglevel, **DEVICE_WORKER_TUNING,
            max_memory_per_child=max_memory_per_child_kib(settings, "device"))
    finally:
        stop_loops(watch, heartbeat)
        mark_offline(settings, worker_id, slot, holder)
    exit_for(exitcode, watch)


def run_cpu_worker(settings: Settings, concurrency: int | None = None, loglevel: str = "INFO",
                   sweeper: bool = True):
    store = _open_store(settings)
    input_maps = preflight.check_cpu_worker(settings, store)
    seal = stage_seal(settings, store)
    settings, slot = claim_host_name(settings, store)
    host = settings.hostname
    worker_id = settings.cpu_worker_id()
    concurrency = concurrency or settings.cpu_concurrency or os.cpu_count() or 1
    dump_stacks_on(STACK_DUMP_SIGNAL)
    registration = Registration(WorkerRole.CPU, host, queue=settings.cpu_queue)
    holder = slot_holder()
    try:
        register_identity(store, settings, worker_id, registration, holder)
    except IdentityHeldError:
        mark_offline(settings, worker_id, slot, holder)
        raise
    app = create_app(settings)
    app.cuzk_identity = pipeline.WorkerIdentity(worker_id, WorkerRole.CPU.value, "cpu")
    app.cuzk_input_maps = input_maps  # what its submit checks inline inputs against
    consuming = consume_recording_channel(app)
    _init_child(app)
    heartbeat = Heartbeat(store, worker_id, settings, extra=advertised(settings, WorkerRole.CPU, seal),
                          slot=slot, holding_fn=lambda: held_messages(consuming),
                          registration=registration,
                          holder=holder, on_lost=_stop_this_worker)
    heartbeat.beat()  # online at once; the threads start after the pool fork
    sweep = Sweeper(pipeline.context(app)) if sweeper else None
    if sweep is not None:
        sweep.step_logged()
    # publishes what the devices' steps record (their pool processes publish nothing)
    relay = OutboxRelay(pipeline.context(app).store, app)
    watch = watch_consumer(settings, consuming, worker_id, heartbeat, slot, holder)
    _start_after_pool_fork(app, heartbeat, sweep, relay, watch)
    # the stages: the shared stage queue and, host-affine, this host's devices' partitions'
    queues = [settings.stage_queue]
    if settings.host_affine:
        queues.append(settings.host_cpu_queue())
    # the by-name requests: a lane of their own, never behind the stages
    add_request_lane(app, settings.cpu_queue)
    log.warning("cpu worker %s consuming %s (concurrency %d), requests on %s", worker_id,
                ", ".join(queues), concurrency, settings.cpu_queue)
    try:
        exitcode = run_celery_worker(app, queues, concurrency,
                                      f"cpu{os.getpid()}@{host}", loglevel,
                                      max_memory_per_child=max_memory_per_child_kib(settings, "cpu"),
                                      **CPU_WORKER_TUNING)
    finally:
        stop_loops(watch, relay, sweep, heartbeat)
        mark_offline(settings, worker_id, slot, holder)
    exit_for(exitcode, watch)
