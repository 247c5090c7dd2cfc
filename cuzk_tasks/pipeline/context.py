"""The per-process context of the pipeline's tasks, and what every stage shares.

:class:`Context`: settings, state store (whose outbox entries this process's Celery app
publishes, :class:`cuzk_tasks.service.publisher.CeleryPublisher`), Celery app, resident zkeys,
compute backend and prover, and the stage messages (:class:`cuzk_tasks.service.messages.StageMessages`).
One per Celery app per process (:func:`context`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time

from ..paths import confined_path, open_input
from ..service import queues
from ..service.messages import StageMessages
from ..settings import defaults, redis_url
from ..settings.config import Settings
from ..state import StateStore
from .provers import load_prover
from .registry import CircuitRegistry, ResidentZkeys

log = logging.getLogger("cuzk_tasks.pipeline")



class RunSlot:
    """What a device's pool process is proving now, as ``job:idx:attempt`` ('' = nothing),
    in memory shared with the worker's main process, whose heartbeat reports it
    (``running``; heartbeat.lua ends a ``proving`` record of any other run, such as one
    whose prove_end was given up in a long Redis outage).  Made in the main process before the
    pool forks, so every pool process writes the same slot; prove sets it before its
    prove_begin and clears it after its prove_end (or prove_fault), so whenever the worker hash
    says proving run R the slot says R, until the run is over.  One slot: a device worker runs one pool process."""

    SIZE = 256  # bytes: a 32-hex job id, an index, an attempt

    def __init__(self):
        import multiprocessing  # lazy: only a device worker's main process makes one

        self._buf = multiprocessing.RawArray("c", self.SIZE)

    def set(self, run: str = "") -> None:
        data = run.encode("ascii", "replace")[:self.SIZE - 1]
        self._buf.value = data  # one memmove of <= 255 bytes, NUL-terminated

    def get(self) -> str:
        return self._buf.value.decode("ascii", "replace")


@dataclasses.dataclass(frozen=True)
class WorkerIdentity:
    """Who runs this process's tasks: the worker id, its role (``device``/``cpu``) and compute
    backend; blank for a client.  ``cuzk-tasks worker`` puts it on the Celery app
    (``app.cuzk_identity``) before the pool forks, so every pool process's context has it."""

    worker_id: str = ""
    role: str = ""
    backend: str = ""


class Context:
    """What a task needs in this process: settings, store, app, resident zkeys, backend."""

    def __init__(self, app, settings: Settings, identity: WorkerIdentity | None = None,
                 worker_id: str | None = None):
        """``worker_id`` alone: a worker id without a role (tests, the client)."""
        self.app = app
        self.settings = settings
        self.identity = identity or WorkerIdentity(worker_id=worker_id or "")
        self.worker_id = self.identity.worker_id
        self.backend_name = self.identity.backend or defaults.backend_name()
        self._backend = None
        self._prover = None
        self.messages = StageMessages(settings)
        self._store = None
        self._broker_redis = None
        #: monotonic time the next device-memory report of prove is due (prove.py)
        self.device_memory_due = 0.0
        #: (run, finalizing, SentStep): the prove_end a device sent unread at its last
        #: hand-over, read after its next run's compute (prove.py)
        self.handed_on_end = None
        #: a device worker's RunSlot (``app.cuzk_run_slot``, made before the pool forks)
        self.run_slot = getattr(app, "cuzk_run_slot", None)
        #: a CPU worker's circuits' input maps, ``{circuit: {signal: number of values}}``
        #: (``app.cuzk_input_maps``, read by its start-up check): what submit checks inline
        #: inputs against; empty elsewhere (then synthesize finds a misfit)
        self.input_maps = getattr(app, "cuzk_input_maps", None) or {}
        self.registry = CircuitRegistry.from_settings(settings)
        self.resident = ResidentZkeys(self.registry, settings.zkey_budget_mb,
                                      on_change=self._publish_resident)

    @property
    def store(self):
        if self._store is None:
            device = self.identity.role == "device"
            # a device's next partition waits for no publish: its steps hand their messages
            # to a CPU worker's relay thread, which publishes them (publisher.OutboxRelay),
            # but for a finalize with no next partition routed here (StateStore.relay)
            store = StateStore.from_settings(self.settings, relay=device)
            if self.app is not None:
                # lazy: the publisher's kombu is loaded only where a Celery app is
                from ..service.publisher import CeleryPublisher

                store.publisher = CeleryPublisher(self.app)
            self._store = store
        return self._store

    @property
    def backend(self):
        if self._backend is None:
            # lazy: the compute backend loads numpy and the native core (or CuPy), which a
            # client, importing the pipeline for submit_job, never needs
            from ..groth16.backends.select import get_backend

            self._backend = get_backend(self.backend_name)
        return self._backend

    @property
    def prover(self):
        """The compute of prove and finalize (the ``prover`` setting; cuzk_tasks.pipeline.provers)."""
        if self._prover is None:
            self._prover = load_prover(self)
        return self._prover

    def queue_depth(self, queue) -> int:
        """Messages waiting on ``queue`` (all its priority steps), in the broker's Redis."""
        if self.settings.broker_is_state_redis:
            return self.store.queue_depth(queues.queue_keys(queue))
        broker = self._broker()
        return sum(broker.llen(key) for key in queues.queue_keys(queue))

    def broker_client(self):
        """A client of the broker's Redis (the state store's own when they are one database),
        or None when the broker is not Redis."""
        if self.settings.broker_is_state_redis:
            return self.store.redis
        return self._broker() if redis_url.is_redis(self.settings.broker_url) else None

    def _broker(self):
        """A client of the broker's Redis when it is not the state store's."""
        if self._broker_redis is None:
            self._broker_redis = redis_url.client(self.settings.broker_url,
                                                  self.settings.sentinel_master)
        return self._broker_redis

    def _publish_resident(self, names):
        if self.worker_id and self.identity.role == "device":
            self.store.set_resident(self.worker_id, names)


_CONTEXTS: dict = {}
_CONTEXT_LOCK = threading.Lock()


def context(app) -> Context:
    key = id(app)
    ctx = _CONTEXTS.get(key)
    if ctx is None or ctx.app is not app:
        with _CONTEXT_LOCK:
            ctx = _CONTEXTS.get(key)
            if ctx is None or ctx.app is not app:
                ctx = _CONTEXTS[key] = Context(app, app.cuzk_settings,
                                               getattr(app, "cuzk_identity", None))
    return ctx


def ms_since(t0):
    return round((time.perf_counter() - t0) * 1000.0, 3)


def public_error(ctx, error) -> str:
    """The text of ``error`` for the job (which submitters read): the server's paths of the
    circuits' zkey and wasm files replaced by the circuit's name (CircuitRegistry.redact);
    the worker logs the error as it was."""
    return ctx.registry.redact(str(error))


def fail(ctx, run, error, token=None):
    """Fail ``run`` (a :class:`~cuzk_tasks.state.PartitionRun`) with ``error``, its worker
    cleared with ``token`` (the ending run's) when given."""
    ok = ctx.store.fail_partition(run, public_error(ctx, error), token=token)
    log.warning("job %s partition %s failed%s: %s", run.job_id, run.idx,
                "" if ok else " (already final)", error)
    return ok


def internal_error(exc):
    return f"internal error: {type(exc).__name__}: {exc}"



def ref_path(ctx: Context, field, path) -> str:
    """The real path of a partition's ``field`` (input_ref / witness_ref) when it lies inside
    this process's input roots (spool dir + allowed_input_roots); otherwise the
    OutsideInputRootsError that fails the partition ("input_ref /x is outside the allowed
    input roots (allowed_input_roots)"; the job's error adds "partition N: ").  A check of
    the name only: open the file with :func:`open_ref`."""
    return confined_path(path, ctx.settings, field)


def open_ref(ctx: Context, field, path):
    """The partition's ``field`` file opened for binary reading, confined to this process's
    input roots and a regular file (:func:`cuzk_tasks.paths.open_input`: a symlink swapped in
    after the check is not followed, a FIFO fails at once); ``.name`` is its real path."""
    return open_input(path, ctx.settings, field)



def spooled_witness(ctx, job_id, idx):
    """Where synthesize writes partition ``idx``'s witness."""
    return os.path.join(ctx.settings.spool_dir, job_id, f"{idx}.wtns")
