"""StateStore: jobs, partitions and workers in Redis, every transition one Lua script.

The overview (state machines, recovery, the outbox) is docs/architecture.md; the contract of
each transition -- arguments, return value, guards -- is the docstring of its method here
and the header comment of its script in ``scripts/`` (``_lib.lua`` is the prelude of every
script: calling convention, key functions, the shared steps).  Key names: :mod:`.keys`;
states as stored: :mod:`.enums`; the status reads: :mod:`.reads`; how values read back:
:mod:`.codec`.  Nothing outside this package uses a private name of it.  The rules that
matter most:

* Every multi-key transition is one Lua script (``register_script``: EVALSHA), so it
  happens whole or not at all.  A transition names the state(s) and attempt it expects;
  anything else is rejected and changes nothing (the method returns False / ``ok=False``
  with a reason).  Every transition XADDs an event to ``Keys.events`` (MAXLEN ~).
* A partition transition names the run it expects as a :class:`~.run.PartitionRun` (job,
  index, attempt; the run's circuit and priority are the messages', never read here): a
  partition in another attempt rejects it as stale.
* A worker's assignment is a token (``job:idx:attempt:nonce``) issued by
  :meth:`StateStore.prove_begin`.  Only a compare-and-delete on that exact token
  makes the worker idle again, so an end that arrives late (a finalizer of an
  earlier partition, a duplicate) never clears a worker that has moved on -- the
  Filecoin cuzk bug, where a finalizer of job A cleared the busy flag of a worker
  already proving job B (``tests/test_state_machine.py``).
* ``message=`` arguments are the next stage's outbox entry (:mod:`cuzk_tasks.service.messages`;
  without a queue where routing picks it), recorded in the same step and handed to
  :attr:`StateStore.publisher` with the script's reply.
* Timestamps come from Redis ``TIME`` inside the scripts (float seconds).
* With ``outage_s`` > 0 a transition that meets an unreachable (restarting, loading) or
  unable Redis (BUSY, OOM, READONLY) is retried for up to that long (:class:`OutageRetry`); the guards above make the retry of
  a transition that already ran a rejected no-op.

The client must decode responses (``decode_responses=True``); use
:meth:`StateStore.from_url` to get one.  This module never imports Celery.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import logging
import threading
import time
import uuid

from ..errors import DeadlineRefused, StateError
from ..settings import defaults, redis_url
from . import reads
from .codec import as_list, decode, decode_value, worker_record
from .enums import JobState, WorkerRole
from .keys import Keys, member, parse_attempt_member, parse_member
from .run import PartitionRun

SCRIPTS = (
    "create_job", "synth_begin", "synth_end", "route", "prove_begin", "prove_end", "prove_fault",
    "finalize_end",
    "fail_partition", "redispatch", "cancel_job", "register_worker", "heartbeat",
    "worker_offline", "workers", "status_delta", "claim_host_slot", "retire_workers",
    "stage_partitions", "recover_stage", "expire_deadlines", "reject_request", "trim_callbacks",
    "create_parts", "create_commit", "reap_jobs", "reap_creating",
    "synth_retry", "outbox_claim", "outbox_done", "claim_sweep", "finalize_due",
    "estimate_job",
)

#: First element of a script reply that carries the outbox entries the script added
#: (_lib.lua ``outbox_reply``): ``[OUTBOX_MARK, n, id, entry, ..., reply]``.
OUTBOX_MARK = "\x00outbox"


_RESERVED_WORKER_FIELDS = {"state", "job", "partition", "kind", "token", "since", "role",
                           "last_hb", "hb_ttl_ms", "resident", "registered_at", "holding",
                           "holding_requests", "holding_at", "holder"}


log = logging.getLogger("cuzk_tasks.state")


class OutageRetry:
    """Calls a Redis operation again, with backoff (50 ms doubling to 2 s), while Redis is
    unreachable or cannot serve -- loading, busy with a script, at maxmemory, read-only
    (:func:`cuzk_tasks.settings.redis_url.is_outage`) -- for up to ``budget_s`` seconds from the first
    failure; then the last error is raised (any other error at once).  One warning when an
    outage starts and one line when Redis is back, however many threads wait on it."""

    def __init__(self, budget_s: float, first_delay_s: float = 0.05, max_delay_s: float = 2.0,
                 what: str = "state transitions"):
        self.budget_s = float(budget_s)
        self.what = what  # what waits, for the log line
        self.first_delay_s = first_delay_s
        self.max_delay_s = max_delay_s
        self.errors = redis_url.outage_errors()  # the ones that are not outages: re-raised
        self._lock = threading.Lock()
        self._outage_since = None

    def call(self, fn, *args, **kwargs):
        deadline, delay = None, self.first_delay_s
        while True:
            try:
                result = fn(*args, **kwargs)
            except self.errors as exc:
                if not redis_url.is_outage(exc):
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.budget_s
                    self._outage_began(exc)
                if now >= deadline:
                    raise
                time.sleep(min(delay, deadline - now))
                delay = min(2 * delay, self.max_delay_s)
                continue
            if deadline is not None:
                self._outage_ended()
            return result

    def _outage_began(self, exc):
        with self._lock:
            if self._outage_since is not None:
                return
            self._outage_since = time.monotonic()
        log.warning("Redis unreachable (%s: %s): retrying %s for up to %.0f s",
                    exc.__class__.__name__, exc, self.what, self.budget_s)

    def _outage_ended(self):
        with self._lock:
            since, self._outage_since = self._outage_since, None
        if since is not None:
            log.warning("Redis is back after %.1f s", time.monotonic() - since)


@dataclasses.dataclass(frozen=True)
class HostSlot:
    """A host name ``<group>-<index>`` held by ``holder`` (:meth:`StateStore.claim_host_slot`);
    pass it to :meth:`StateStore.heartbeat` (keeps it) and :meth:`StateStore.worker_offline`
    (releases it)."""

    group: str
    index: int
    holder: str

    @property
    def host(self) -> str:
        return f"{self.group}-{self.index}"


@dataclasses.dataclass(frozen=True)
class SynthBegin:
    """Outcome of :meth:`StateStore.synth_begin`; truthy when accepted.  ``inputs``: the
    partition's ``input``, ``input_ref``, ``witness_ref`` (None when blank), read in the same step."""

    ok: bool
    reason: str
    inputs: dict = dataclasses.field(default_factory=dict)

    def __bool__(self):
        return self.ok


@dataclasses.dataclass(frozen=True)
class Routed:
    """Outcome of :meth:`StateStore.route` (and of the routing half of ``synth_end``): truthy
    when the partition was routed, to ``worker`` whose queue is ``queue``.  ``reason``:
    ``ok``, ``no_live_device``, ``already_routed``, ``stale``, ``no_queue``, ``job_<state>``,
    ``unknown``."""

    ok: bool
    reason: str
    worker: str | None = None
    queue: str | None = None

    def __bool__(self):
        return self.ok


@dataclasses.dataclass(frozen=True)
class SynthEnd:
    """Outcome of :meth:`StateStore.synth_end`; truthy when the partition reached synth_done.
    ``routed`` is set when routing was asked for (``route_circuit``)."""

    ok: bool
    reason: str
    routed: Routed | None = None

    def __bool__(self):
        return self.ok


@dataclasses.dataclass(frozen=True)
class ProveBegin:
    """Outcome of :meth:`StateStore.prove_begin`.

    ``reason``: ``ok``, ``redelivered`` (accepted: the same message again after its run
    died), ``stale`` (wrong attempt/worker/state), ``mismatch`` (the message names another
    circuit than the job's), ``poison`` (partition and job failed),
    ``deadline`` (the job's deadline passed: it failed now), ``job_<state>`` (job not
    running), ``unknown``.  ``deliveries``: the partition's count.
    ``deadline_at``: the job's deadline (Unix time, Redis clock) when accepted and it has one.
    ``others_routed``: see the field.
    """

    ok: bool
    token: str | None
    reason: str
    deliveries: int = 0
    deadline_at: float | None = None
    #: when accepted: how many other partitions are routed to this worker (0: none waits
    #: behind this run, so the device publishes its finalize itself: ``publish_now``)
    others_routed: int | None = None


@dataclasses.dataclass(frozen=True)
class ProveEnd:
    """Outcome of :meth:`StateStore.prove_end`: the two effects are independent."""

    worker_cleared: bool
    partition_advanced: bool


@dataclasses.dataclass(frozen=True)
class ProveFault:
    """Outcome of :meth:`StateStore.prove_fault`.  ``outcome``: ``rerouted`` (to ``worker``,
    whose queue is ``queue``), ``failed`` (max faults, or no other live device) or ``stale``
    (the run was not the partition's current one: only the worker was touched)."""

    worker_cleared: bool
    outcome: str
    worker: str | None = None
    queue: str | None = None


@dataclasses.dataclass(frozen=True)
class FinalizeEnd:
    """Outcome of :meth:`StateStore.finalize_end`; ``job_complete`` is True for exactly one caller."""

    ok: bool
    job_complete: bool
    reason: str = "ok"


@dataclasses.dataclass(frozen=True)
class Registration:
    """What :meth:`StateStore.register_worker` records of a worker, for its heartbeats to
    record again when Redis has lost it (:meth:`StateStore.heartbeat`).  ``resident``: the
    circuit names it holds (None: unknown)."""

    role: WorkerRole | str
    host: str
    device: int | None = None
    queue: str | None = None
    gpu_name: str | None = None
    resident: tuple | list | None = None

    def to_json(self) -> str:
        return json.dumps({"role": _check_role(self.role).value, "host": _arg(self.host),
                           "device": _arg(self.device), "queue": _arg(self.queue),
                           "gpu_name": _arg(self.gpu_name),
                           "resident": "" if self.resident is None else json.dumps(list(self.resident))})


@dataclasses.dataclass(frozen=True)
class Beat:
    """Outcome of :meth:`StateStore.heartbeat`; truthy when the worker came (back) online.
    ``registered``: the hash had lost its registration and the beat recorded it again;
    ``resident``: the hash's resident set after the beat (None: none recorded);
    ``held_by``: another process holds the worker id now (its holder text) -- the beat
    changed nothing, and this process should stop -- else None."""

    came_online: bool
    registered: bool = False
    resident: list | None = None
    held_by: str | None = None

    def __bool__(self):
        return self.came_online


@dataclasses.dataclass(frozen=True)
class Claim:
    """Outcome of :meth:`StateStore.register_worker`; truthy when the worker was registered.
    When not: a live heartbeat of another process holds the worker id -- ``holder`` (its
    ``<container host>:<pid>``, None when it recorded none), ``ttl_ms`` (what its heartbeat
    has left), ``pid`` (the pid its heartbeats report, None when unknown)."""

    ok: bool
    holder: str | None = None
    ttl_ms: int = 0
    pid: str | None = None

    def __bool__(self):
        return self.ok


def _prove_end_reply(reply) -> ProveEnd:
    cleared, advanced = reply
    return ProveEnd(bool(cleared), bool(advanced))


def _synth_begin_reply(reply) -> SynthBegin:
    if not reply[0]:
        return SynthBegin(False, reply[1])
    inputs = dict(zip(("input", "input_ref", "witness_ref"), (v or None for v in reply[2:5])))
    return SynthBegin(True, reply[1], inputs)


def _prove_begin_reply(reply) -> ProveBegin:
    ok, token, reason, deliveries, deadline_at = reply[:5]
    return ProveBegin(bool(ok), token or None, reason, int(deliveries),
                      float(deadline_at) if deadline_at else None,
                      int(reply[5]) if len(reply) > 5 else None)


class SentStep:
    """A Lua step sent on a connection of its own, its reply read later (:meth:`reply`)."""

    def __init__(self, store, name, keys, argv):
        self._store, self._name, self._keys, self._argv = store, name, keys, argv
        self._finish = None
        self._pool = store.redis.connection_pool
        self._conn = None
        self._raw = self._got = None
        try:
            if name not in store._sendable:
                # EVALSHA of a script Redis lacks would answer NOSCRIPT only after the work:
                # load it first, once per store (after a restart empty, reply() runs it again)
                store.redis.script_load(store.script(name).script)
                store._sendable.add(name)
            try:
                conn = self._pool.get_connection()
            except TypeError:  # redis-py before 5.3 takes the command's name
                conn = self._pool.get_connection("EVALSHA")
        except Exception:  # noqa: BLE001 - no connection now: run it here, below
            conn = None
        if conn is not None:
            try:
                conn.send_command("EVALSHA", store.script(name).sha, len(keys), *keys, *argv)
                self._conn = conn
                return
            except Exception:  # noqa: BLE001 - this connection is broken: run it here
                conn.disconnect()
                self._pool.release(conn)
        # not sent: the step runs now, before the caller's work, as a plain call would
        self._raw, self._got = store._call(name, keys, argv), True

    def then(self, finish) -> "SentStep":
        """``finish(reply)`` makes what :meth:`reply` returns."""
        self._finish = finish
        return self

    def reply(self):
        """The step's reply (through ``then``'s function); its outbox entries, if any, are
        published first, as :meth:`StateStore._run` does.  Read once."""
        import redis  # lazy: as in OutageRetry

        conn, self._conn = self._conn, None
        got, raw = bool(self._got), self._raw
        if conn is not None:
            try:
                raw, got = conn.read_response(), True
            except redis.exceptions.NoScriptError:
                pass  # Redis restarted empty: run below, which loads the script
            except redis.exceptions.ResponseError as exc:
                if not redis_url.is_outage(exc):  # an error of the step itself: as from _run
                    raise
            except Exception as exc:  # noqa: BLE001 - lost, timed out, closed: run it again
                conn.disconnect()  # in an unknown state
                log.info("%s: reply not read (%s: %s), running the step again", self._name,
                         type(exc).__name__, exc)
            finally:
                self._pool.release(conn)
        if not got:
            raw = self._store._call(self._name, self._keys, self._argv)
        reply = self._store._unwrap(raw)
        return self._finish(reply) if self._finish else reply


def script_text(name: str) -> str:
    """The Lua source the store runs for script ``name``: ``_lib.lua`` then ``<name>.lua``,
    the latter as a function whose reply goes through ``outbox_reply`` (the outbox entries
    the step added ride back with it)."""
    folder = importlib.resources.files("cuzk_tasks.state") / "scripts"
    lib = (folder / "_lib.lua").read_text(encoding="utf-8")
    body = (folder / f"{name}.lua").read_text(encoding="utf-8")
    return (f"{lib}\n-- ==== {name}.lua ====\nlocal function step()\n{body}\nend\n"
            f"return outbox_reply(step())\n")


def _arg(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, WorkerRole):
        return value.value
    return str(value)


def _named(args: dict) -> list[str]:
    """A script's named arguments (``_lib.lua`` ``ARGS``): how many, then name/value pairs,
    each value the text :func:`_arg` makes of it as a positional argument."""
    return [str(len(args))] + [text for name, value in args.items()
                               for text in (name, _arg(value))]


def _check_job_id(job_id) -> str:
    if not isinstance(job_id, str) or not job_id or any(c.isspace() for c in job_id):
        raise StateError(f"job id must be a non-empty string without spaces, got {job_id!r}")
    return job_id


def _check_worker_id(worker_id) -> str:
    if not isinstance(worker_id, str) or not worker_id or any(c.isspace() for c in worker_id):
        raise StateError(f"worker id must be a non-empty string without spaces, got {worker_id!r}")
    return worker_id


def _partition_args(partitions, first):
    """create_job's / create_parts' 3 arguments per partition (input, input_ref,
    witness_ref); ``first``: the index of the first, for the error."""
    args = []
    for i, part in enumerate(partitions, first):
        if not isinstance(part, dict) or set(part) - {"input", "input_ref", "witness_ref"}:
            raise StateError(f"partition {i}: expected a dict with input/input_ref/witness_ref, "
                             f"got {part!r:.200}")
        value = part.get("input")
        if value is not None and not isinstance(value, str):
            value = json.dumps(value)
        args += [_arg(value), _arg(part.get("input_ref")), _arg(part.get("witness_ref"))]
    return args


def _check_request_conflict(request_id, job_id, status, reply=()) -> None:
    """StateError when a create script answered -2: ``request_id`` names ``job_id``, a job of
    other content (_lib.lua ``request_job``; the error does not name ``job_id``), or -3: the
    job's deadline is shorter than its estimate (``reply``: the rest of the answer, eta_s,
    partitions ahead, devices); nothing was created."""
    if int(status) == -3:
        eta_s, ahead, devices = reply
        raise DeadlineRefused.of(float(eta_s), int(ahead), int(devices))
    if int(status) == -2:
        # the other job's id is not named: a request id is no key to another's job (issue 48)
        raise StateError(f"request_id {request_id!r} is already in use with other content "
                         "(circuit, partitions, priority, on_done or deadline_s differ); use a "
                         "new request_id for a new job")


def _check_run(run) -> tuple[str, int, int]:
    """``(job_id, idx, attempt)`` of a transition's :class:`PartitionRun` (its circuit and
    priority are not read here: a transition keys on the run's identity)."""
    if not isinstance(run, PartitionRun):
        raise StateError(f"expected a PartitionRun, got {run!r:.200}")
    return run.job_id, run.idx, run.attempt


def _check_role(role) -> WorkerRole:
    try:
        return WorkerRole(role)
    except ValueError:
        raise StateError(f"worker role must be one of {[r.value for r in WorkerRole]}, "
                         f"got {role!r}") from None


def _check_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StateError(f"{name} must be a non-negative int, got {value!r}")
    return value


def serves(worker: dict, circuit) -> bool:
    """A worker record advertises ``circuit`` (its ``circuits`` field, a JSON list of names;
    none, or one that is not a list: any circuit), as _lib.lua ``serves`` reads it."""
    text = worker.get("circuits")
    if not text:
        return True
    try:
        names = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return True
    return not isinstance(names, list) or circuit in names


class StateStore:
    """The Redis state store.  See the module docstring and docs/architecture.md.

    ``redis_client``: a ``redis.Redis`` with ``decode_responses=True`` (refused otherwise;
    :meth:`from_url` makes one, :meth:`from_settings` the one a service process uses).
    ``prefix``: of every key.  ``result_ttl_s``: a stored result's TTL.  ``events_maxlen``,
    ``failures_kept``, ``recent_jobs_kept``, ``completions_kept_s``: how much of the event
    stream, the failures list, the recent jobs and the completions is kept.
    ``outage_s``: transitions retry that long through a Redis outage (:class:`OutageRetry`;
    0: no retry; reads never wait).  ``job_retention_s``: a finished job's keys expire that
    long after its end (0: never).  ``chunk``: the most partitions one step handles where a
    job's size sets the work (``STATE_CHUNK``).  ``publisher``: see :attr:`publisher`.
    ``host_affine``: see :attr:`host_affine`; ``relay``: see :attr:`relay`.  These travel to
    every script as its common arguments (:attr:`common_args`, ``_lib.lua``).
    """

    def __init__(self, redis_client, prefix: str = defaults.PREFIX,
                 result_ttl_s: int = defaults.RESULT_TTL_S,
                 events_maxlen: int = defaults.EVENTS_MAXLEN,
                 failures_kept: int = defaults.FAILURES_KEPT,
                 recent_jobs_kept: int = defaults.RECENT_JOBS_KEPT,
                 completions_kept_s: int = defaults.COMPLETIONS_KEPT_S,
                 outage_s: float = 0.0, job_retention_s: int = defaults.JOB_RETENTION_S,
                 chunk: int = defaults.STATE_CHUNK, publisher=None,
                 host_affine: bool = False, relay: bool = False):
        pool = getattr(redis_client, "connection_pool", None)
        kwargs = getattr(pool, "connection_kwargs", None)
        if kwargs is not None and not kwargs.get("decode_responses"):
            raise StateError("the state store needs a Redis client with decode_responses=True "
                             "(use StateStore.from_url)")
        self.redis = redis_client
        self.keys = Keys(prefix)
        self.prefix = prefix
        self.result_ttl_s = int(result_ttl_s)
        self.job_retention_s = int(job_retention_s)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise StateError(f"chunk must be a positive int (partitions per step), got {chunk!r}")
        #: partitions one step handles at most where a job's size sets the work (STATE_CHUNK)
        self.chunk = chunk
        self._common = [prefix, str(int(events_maxlen)), str(int(recent_jobs_kept)),
                        str(int(failures_kept)), str(int(completions_kept_s)),
                        str(self.job_retention_s), str(chunk), "1" if host_affine else "0",
                        "1" if relay else "0"]
        #: host-affine stages (defaults.SHARED_SPOOL; docs/architecture.md, "Placement"): a
        #: pending partition is placed on a device, and its synthesize and finalize run on that
        #: device's host.  False (a bare store's default): one cluster-wide CPU queue.
        self.host_affine = bool(host_affine)
        #: the outbox entries this store's steps add go on the relay list in the same step
        #: (``_lib.lua`` ``outbox_reply``), where a CPU worker's relay thread has Celery
        #: publish them (:meth:`take_relayed`): for a process whose time is not its own to
        #: spend publishing -- a device's pool process, between two partitions (a lone
        #: partition's finalize it publishes itself, outside any step:
        #: :meth:`publish_now`).  False: this process publishes every entry itself.
        self.relay = bool(relay)
        self._scripts = {name: redis_client.register_script(script_text(name)) for name in SCRIPTS}
        # transitions ride out a Redis restart (settings.redis_outage_s); reads do not wait
        self._outage = OutageRetry(outage_s) if outage_s and outage_s > 0 else None
        #: scripts loaded by :meth:`_send` (SCRIPT LOAD), which it may send by their SHA
        self._sendable: set[str] = set()
        #: publishes outbox entries: ``publisher([(id, entry JSON), ...], done)`` sends them
        #: and calls ``done(ids)`` with the ids it is done with -- published, or refused for
        #: good -- which deletes them (:meth:`outbox_done`); None: a store that publishes
        #: nothing -- the entries its steps add wait for a sweeper's (:meth:`publish_overdue`)
        self.publisher = publisher

    @classmethod
    def from_url(cls, url: str, prefix: str = defaults.PREFIX, sentinel_master: str = "",
                 socket_timeout_s: float | None = None, retries: int | None = None,
                 **kwargs) -> "StateStore":
        """A store on a new ``redis.Redis`` client for ``url`` (decode_responses=True); for a
        ``sentinel://`` URL, on the current master of group ``sentinel_master``
        (:mod:`cuzk_tasks.settings.redis_url`).  ``socket_timeout_s``: how long a command waits to
        connect or for its reply before it raises ``redis.TimeoutError``; ``retries``: how
        many times redis-py reconnects and sends a command again after a connection error or
        timeout.  None keeps redis-py's defaults for either (5 s; 10 retries, 10 ms backoff
        doubling to 1 s)."""
        options = {"decode_responses": True}
        if socket_timeout_s is not None:
            options.update(socket_timeout=socket_timeout_s, socket_connect_timeout=socket_timeout_s)
        if retries is not None:
            # lazy: as in OutageRetry, redis-py is loaded where a connection is made
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry

            options["retry"] = Retry(ExponentialBackoff(cap=0.1, base=0.01), retries)
        return cls(redis_url.client(url, sentinel_master, **options), prefix=prefix, **kwargs)

    @classmethod
    def from_settings(cls, settings, outage_s: float | None = None,
                      publisher=None, relay: bool = False) -> "StateStore":
        """The store a service process uses, from its :class:`cuzk_tasks.settings.config.Settings`:
        ``state_url``, ``sentinel_master``, ``prefix``, ``result_ttl_s``, ``job_retention_s``,
        ``host_affine`` (not ``shared_spool``); transitions ride out
        ``redis_outage_s`` of outage unless ``outage_s`` says otherwise.  ``publisher``: see
        :attr:`publisher`; ``relay``: see :attr:`relay`."""
        return cls.from_url(settings.state_url, prefix=settings.prefix,
                            sentinel_master=settings.sentinel_master,
                            result_ttl_s=settings.result_ttl_s,
                            job_retention_s=settings.job_retention_s,
                            outage_s=settings.redis_outage_s if outage_s is None else outage_s,
                            publisher=publisher, host_affine=settings.host_affine, relay=relay)

    @property
    def common_args(self) -> list[str]:
        """The arguments every script of this store takes first (``_lib.lua``: prefix and
        limits), before its own."""
        return list(self._common)

    def script(self, name: str):
        """The registered Lua script ``name`` of ``scripts/`` (redis-py ``Script``: call it
        with ``keys=`` and ``args=``, the latter after :attr:`common_args`)."""
        return self._scripts[name]

    def _argv(self, args) -> list[str]:
        """A script's ARGV: the common arguments, then its own -- ``args`` a list (positional)
        or a dict (its named arguments: :func:`_named`, ``_lib.lua`` ``ARGS``), each value as
        :func:`_arg` writes a positional one, so what a script stores is the same either way."""
        own = _named(args) if isinstance(args, dict) else [_arg(a) for a in args]
        return self._common + own

    def _run(self, name, keys, args):
        """Run script ``name``; the outbox entries it added are published (and then deleted)
        before its reply is returned.  ``args``: its own arguments (:meth:`_argv`)."""
        return self._unwrap(self._call(name, list(keys), self._argv(args)))

    def _call(self, name, keys, argv):
        script = self._scripts[name]
        if self._outage is None:
            return script(keys=keys, args=argv)
        return self._outage.call(script, keys=keys, args=argv)

    def _send(self, name, keys, args) -> "SentStep":
        """Send script ``name`` now; its reply is read by :meth:`SentStep.reply`, so the
        caller works meanwhile instead of waiting a round trip."""
        return SentStep(self, name, list(keys), self._argv(args))

    def _unwrap(self, reply):
        """A script's reply without the outbox entries riding on it, which are published
        (and then deleted) first."""
        if isinstance(reply, list) and reply and reply[0] == OUTBOX_MARK:
            n = int(reply[1])
            entries = [(reply[2 + 2 * i], reply[3 + 2 * i]) for i in range(n)]
            reply = reply[2 + 2 * n] if len(reply) > 2 + 2 * n else None
            self._publish(entries)
        return reply

    def _publish(self, entries):
        if self.publisher is not None:
            self.publisher(entries, self.outbox_done)

    def publish_now(self, message) -> bool:
        """Have the publisher send ``message`` (an outbox entry's JSON) now, outside any step
        and without an outbox entry; False when there is no publisher or the broker cannot
        take it now (the caller then hands it to a step, which records it in the outbox).

        Only for a message whose early arrival its guards make harmless: a device's finalize,
        published before the prove_end that advances its partition (finalize_end also takes a
        partition still in proving with the run's token, and a stale one is a no-op)."""
        if self.publisher is None:
            return False
        done = []
        self.publisher([("direct", message)], done.extend)
        return bool(done)

    def outbox_done(self, ids) -> None:
        """Delete published outbox entries (the publisher's ``done``).  Not retried through an
        outage: the messages are out; an entry left behind is sent again by a sweeper after
        OUTBOX_GRACE_S, a stale no-op."""
        if not ids:
            return
        try:
            self._scripts["outbox_done"](keys=[], args=self._common + [str(i) for i in ids])
        except redis_url.outage_errors() as exc:
            log.warning("outbox: %d published message(s) not cleared: %s", len(ids), exc)

    def take_relayed(self, timeout_s: float = 1.0, limit: int = 1, now: float | None = None,
                     grace_s: float = defaults.OUTBOX_GRACE_S) -> list:
        """The relay's take from the relay list (:attr:`relay`), oldest first:
        ``[(id, entry JSON), ...]``.  ``timeout_s`` > 0: waits that long for the next item and
        takes it alone (BRPOP); 0: takes up to ``limit`` items already there, without
        waiting.  An item handed over more than ``grace_s`` before ``now`` (this host's clock,
        default the current time) is left out: a sweeper has published that entry by then
        (:meth:`publish_overdue`).  Nothing is looked up before Celery publishes an item; a
        second publish -- a clock skew, a relay slow to take -- is a stale no-op for the
        attempt and token guards."""
        key = self.keys.outbox_relay()
        if timeout_s > 0:
            got = self.redis.brpop([key], timeout=timeout_s)
            items = [got[1]] if got else []
        else:
            items = self.redis.rpop(key, limit) or []
        now = time.time() if now is None else now
        taken = []
        for item in items:
            entry_id, handed_at, entry = item.split(" ", 2)
            if now - float(handed_at) <= grace_s:
                taken.append((entry_id, entry))
        return taken

    def publish_overdue(self, grace_s: float = defaults.OUTBOX_GRACE_S,
                        limit: int = 1000) -> int:
        """The sweeper's look at the outbox: entries added more than ``grace_s`` seconds ago
        (their process died, or lost the broker, before they were published) are claimed --
        no other sweeper takes them for another ``grace_s`` -- and published with this store's
        publisher, at most ``limit``.  Returns how many were claimed."""
        return int(self._run("outbox_claim", [], [float(grace_s), int(limit)]) or 0)

    def outbox_entries(self) -> dict:
        """``{entry id: entry}`` of the outbox (entries not published yet): for tests and ops."""
        return {k: json.loads(v) for k, v in self.redis.hgetall(self.keys.outbox()).items()}

    # --- jobs ----------------------------------------------------------------------

    def create_job(self, job_id, circuit, kind, priority, request_id, partitions,
                   messages=(), on_done=None, deadline_s=None, window=None,
                   request_digest: str = "") -> tuple[str, bool]:
        """Create a pending job with pending partitions (attempt 0); idempotent on request_id.

        ``job_id`` None = a new uuid.  ``partitions``: dicts with optional ``input`` (JSON
        text), ``input_ref``, ``witness_ref``.  When ``request_id`` already maps to a job,
        or ``job_id`` already exists, returns ``(that job id, False)`` and creates nothing.
        ``messages``: outbox entries (JSON text, :class:`cuzk_tasks.service.messages.StageMessages`:
        the job's synthesize tasks, one per partition in order), sent only when the job is
        created.  ``window``: how many of them are queued at once (None or 0 = all); the
        rest are held in the store and released one per finished partition (``finalize_end``),
        so a big job never has more than ``window`` partitions queued or in flight.
        ``on_done``: ``(spec, message)`` -- ``spec`` the dict ``{"task", "queue"}`` recorded on
        the job, ``message`` its outbox entry without kwargs, that the step ending the job
        (done, failed, cancelled) sends once, with kwargs ``job_id``, ``state`` and
        ``proofs`` (done: the stored result's list) or ``error``.
        ``deadline_s``: seconds from now (Redis time) after which the job fails "deadline
        exceeded (...)" (``deadline_at`` on the job; every stage's begin and the sweeper's
        :meth:`expire_deadlines` check it); None = none.

        Up to :attr:`chunk` partitions the job is created in one step.  A bigger one is
        written :attr:`chunk` partitions per step (``create_parts``: invisible meanwhile, no
        request id maps to it) and made pending and visible by one last step
        (``create_commit``), so no step holds Redis long; a creation cut short (the caller
        died) is deleted by :meth:`reap_creating`.
        ``request_digest``: a digest of what the request asks for (``""`` = none), kept with
        the job: the same ``request_id`` again with another digest raises StateError
        ("request_id X is already in use with other content", naming no job) and creates
        nothing.
        """
        job_id = uuid.uuid4().hex if job_id is None else _check_job_id(job_id)
        if deadline_s is not None and (isinstance(deadline_s, bool)
                                       or not isinstance(deadline_s, (int, float))
                                       or not deadline_s > 0):
            raise StateError(f"deadline_s must be seconds > 0 or None, got {deadline_s!r}")
        if not partitions:
            raise StateError("a job needs at least one partition")
        if request_id is not None and (not isinstance(request_id, str) or not request_id):
            raise StateError(f"request id must be a non-empty string or None, got {request_id!r}")
        n = len(partitions)
        messages = list(messages)
        if messages and len(messages) != n:
            raise StateError(f"expected one message per partition ({n}), got {len(messages)}")
        release = "1" if messages else ""
        window = 0 if window is None else _check_int("window", window)
        if on_done is not None:
            spec, late = on_done
            done = {"on_done": json.dumps({"task": spec["task"], "queue": spec["queue"]}),
                    "on_done_message": late}
        else:
            done = {"on_done": "", "on_done_message": ""}
        deadline_arg = "" if deadline_s is None else repr(float(deadline_s))
        request_key = self.keys.request(request_id) if request_id else self.keys.request("-")
        keys = [self.keys.job(job_id), request_key]
        # the create scripts' named arguments; the partitions' inputs and the messages follow
        # them, positional: the data, not parameters
        head = {"job": job_id, "circuit": circuit, "kind": kind, "priority": priority,
                "request": request_id, "n": n, "digest": request_digest or ""}
        if n <= self.chunk:
            named = {**head, "n_messages": len(messages), "release": release, "window": window,
                     **done, "deadline_s": deadline_arg}
            got, created, *rest = self._run("create_job", keys, _named(named)
                                            + _partition_args(partitions, 0) + messages)
            _check_request_conflict(request_id, got, created, rest)
            return got, bool(created)
        for first in range(0, n, self.chunk):
            part = partitions[first:first + self.chunk]
            held = messages[first:first + self.chunk]
            named = {**head, "first": first, "count": len(part), "n_messages": len(held)}
            got, status = self._run("create_parts", keys, _named(named)
                                    + _partition_args(part, first) + held)
            _check_request_conflict(request_id, got, status)
            if int(status) == 0:
                return got, False
            if int(status) < 0:
                raise StateError(f"job {job_id}: its creation was discarded while it was written "
                                 f"(partitions from {first}); submit it again")
        got, created, *rest = self._run("create_commit", keys, {
            "job": job_id, "request": request_id, "release": release, "window": window, **done,
            "deadline_s": deadline_arg, "digest": request_digest or ""})
        _check_request_conflict(request_id, got, created, rest)
        if int(created) < 0:
            raise StateError(f"job {job_id}: its creation was discarded before it was "
                             "complete; submit it again")
        return got, bool(int(created))

    def reap_creating(self, stale_s: float = defaults.CREATING_STALE_S,
                      max_steps: int | None = None) -> int:
        """Delete the big jobs whose chunked creation began more than ``stale_s`` seconds ago
        and never finished (their submitter died), and creations discarded by a concurrent
        submit of the same request, :attr:`chunk` partitions per step (the sweeper's).
        ``max_steps``: at most that many steps (None: until none is left).  Returns how many
        are left."""
        return self._steps("reap_creating", [self.keys.jobs_creating()], [float(stale_s)],
                           max_steps)

    def reap_jobs(self, max_steps: int | None = None) -> int:
        """Finish the ended jobs of more than :attr:`chunk` partitions: their live partitions
        cancelled and every key given the job retention TTL, :attr:`chunk` partitions per
        step (a job's end only marks them: one short step however big).  The store runs it
        after the transitions that end jobs here, and the sweeper every interval (for a
        caller that died meanwhile).  ``max_steps`` as :meth:`reap_creating`.  Returns how
        many jobs are left to reap."""
        return self._steps("reap_jobs", [self.keys.jobs_reaping()], [], max_steps)

    def _steps(self, name, keys, args, max_steps) -> int:
        """Run script ``name`` -- one short step that answers how much is left -- until it
        answers 0 or ``max_steps`` (None: no bound) steps ran; returns what is left."""
        left, steps = 0, 0
        while max_steps is None or steps < max_steps:
            left = int(self._run(name, keys, args))
            steps += 1
            if not left:
                break
        return left

    def expire_deadlines(self) -> list[str]:
        """Fail every live job past its deadline ("deadline exceeded (...)"), its live
        partitions cancelled; returns their ids."""
        expired = sorted(as_list(self._run("expire_deadlines", [self.keys.jobs_deadlines()], [])))
        if expired:
            self.reap_jobs()
        return expired

    def get_job(self, job_id) -> dict | None:
        """The job hash (``Keys.job``), values typed by :mod:`.codec` (ints, float seconds,
        JSON lists; ``''`` -> None); None for an unknown job."""
        fields = self.redis.hgetall(self.keys.job(job_id))
        return decode(fields) if fields else None

    def job_states(self, job_ids) -> dict:
        """``{job id: its state, or None for an unknown job}`` in one round trip."""
        job_ids = list(job_ids)
        pipe = self.redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hget(self.keys.job(job_id), "state")
        return dict(zip(job_ids, pipe.execute()))

    def get_partition(self, job_id, idx) -> dict | None:
        """The partition hash (``Keys.part``, inputs and proof included), decoded as
        :meth:`get_job`; None if unknown."""
        fields = self.redis.hgetall(self.keys.part(job_id, idx))
        return decode(fields) if fields else None

    def partition_fields(self, job_id, idx, *fields) -> list:
        """Some fields of a partition, decoded (None where absent), in one HMGET: what a
        step needs without reading inputs and proofs."""
        values = self.redis.hmget(self.keys.part(job_id, idx), list(fields))
        return [decode_value(f, v) for f, v in zip(fields, values)]

    def list_partitions(self, job_id) -> list[dict]:
        """Every partition hash of the job, decoded (inputs and proofs too): read
        :attr:`chunk` at a time, each chunk one transaction, so a big job never holds Redis
        long (its partitions may move between chunks; a finished job's do not)."""
        n = int(self.redis.hget(self.keys.job(job_id), "n_partitions") or 0)
        out = []
        for first in range(0, n, self.chunk):
            pipe = self.redis.pipeline(transaction=True)
            for i in range(first, min(first + self.chunk, n)):
                pipe.hgetall(self.keys.part(job_id, i))
            out += [decode(f) for f in pipe.execute() if f]
        return out

    def cancel_job(self, job_id, reason: str = "cancelled by user") -> bool:
        """A pending/running job -> cancelled (error ``reason``) with its live partitions,
        out of routed/unrouted; its held messages are dropped and its on_done callback sent
        (``_lib.lua`` ``finish_job``).  Workers are untouched: a run in flight ends with its
        own prove_end.  A job of more than :attr:`chunk` partitions is only marked in this
        step; its partitions are cancelled by :meth:`reap_jobs`, run before this returns.
        False when the job is unknown or no longer live."""
        ok, _ = self._run("cancel_job", [self.keys.job(job_id)], [job_id, reason])
        if ok:
            self.reap_jobs()  # a big job's partitions: in short steps, before returning
        return bool(ok)

    def trim_callbacks(self, limit: int = 10000) -> int:
        """Drop on_done callbacks whose ``expires`` has passed from the oldest end of the
        lists they were pushed to, stopping at the first live message of each (a list may be
        shared with other senders); at most ``limit`` per call.  Returns how many."""
        return int(self._run("trim_callbacks", [], [int(limit)]))

    # --- refused requests -------------------------------------------------------------

    def reject_request(self, task, task_id, reason, worker="",
                       kept: int = defaults.REQUESTS_REJECTED_KEPT) -> None:
        """Record a message a worker refused before running it (its task name, Celery task
        id and why): an entry on ``Keys.rejected`` (newest first, ``kept`` at most), the
        counter ``requests_rejected:<task>`` and a ``request_rejected`` event."""
        self._run("reject_request", [], [str(task), str(task_id or ""), str(reason),
                                         str(worker or ""), int(kept)])

    def rejected_requests(self, count: int = defaults.REQUESTS_REJECTED_KEPT) -> list[dict]:
        """The latest refused requests (:meth:`reject_request`), newest first."""
        return [json.loads(raw) for raw in self.redis.lrange(self.keys.rejected(), 0, count - 1)]

    # --- partition transitions ------------------------------------------------------

    def synth_begin(self, run: PartitionRun, max_deliveries: int | None = None,
                    time_limit_s: float | None = None) -> SynthBegin:
        """pending -> synthesizing (job pending -> running).  Also accepted, changing nothing,
        when the partition is already synthesizing with this attempt (a redelivered synthesize).
        ``max_deliveries``: count this delivery in ``synth_deliveries``; past it the partition
        and its job fail (reason ``poison``; ``time_limit_s``, the hard limit, is named in the
        error)."""
        return _synth_begin_reply(self._run(
            "synth_begin", *self._synth_begin_call(run, max_deliveries, time_limit_s)))

    def send_synth_begin(self, run: PartitionRun, max_deliveries: int | None = None,
                         time_limit_s: float | None = None) -> "SentStep":
        """:meth:`synth_begin`, sent now; ``.reply()`` is its :class:`SynthBegin`, read when
        the caller gets to it: a CPU worker whose message carries the partition's input
        computes the witness meanwhile, and writes nothing before the reply accepts the run
        (and its stored input is the one the message carried).  A reply that cannot be read
        (the connection lost) runs the step again: a redelivery of the same attempt,
        accepted, which counts one more delivery."""
        return self._send("synth_begin", *self._synth_begin_call(
            run, max_deliveries, time_limit_s)).then(_synth_begin_reply)

    def _synth_begin_call(self, run, max_deliveries, time_limit_s):
        job_id, idx, attempt = _check_run(run)
        return ([self.keys.job(job_id), self.keys.part(job_id, idx)],
                [job_id, idx, attempt, "" if max_deliveries is None else int(max_deliveries),
                 "" if time_limit_s is None else f"{float(time_limit_s):g}"])

    def synth_end(self, run: PartitionRun, witness_ref, synth_ms, route_circuit=None,
                  message=None, curve: str | None = None) -> SynthEnd:
        """synthesizing -> synth_done; ``job:idx`` joins the unrouted set.  ``curve``: the
        circuit's curve (snarkjs name, from its zkey), recorded on the job once.

        With ``route_circuit`` the partition is routed in the same step, as :meth:`route`
        without a worker does (``message``: its prove's outbox entry without a queue, sent
        to the chosen one).
        Without a live device it stays unrouted (``routed.ok`` False, ``no_live_device``)."""
        job_id, idx, attempt = _check_run(run)
        route = route_circuit is not None
        ok, reason, worker, queue = self._run(
            "synth_end", [self.keys.job(job_id), self.keys.part(job_id, idx), self.keys.unrouted()],
            {"job": job_id, "idx": idx, "attempt": attempt, "witness_ref": witness_ref,
             "synth_ms": synth_ms, "curve": curve or "", "route": route,
             "circuit": route_circuit if route else "",
             "message": (message or "") if route else ""})
        routed = None
        if ok and route_circuit is not None:
            routed = (Routed(True, "ok", worker, queue) if worker
                      else Routed(False, "no_live_device"))
        return SynthEnd(bool(ok), reason, routed)

    def route(self, run: PartitionRun, worker_id=None, circuit=None, message=None) -> Routed:
        """synth_done (this attempt, not yet routed) -> routed to ``worker_id``, or when None
        to the best live device worker for ``circuit`` (least outstanding, then one holding
        the circuit, then the smallest id).  At most one route per attempt succeeds.

        ``message``: the partition's prove (an outbox entry without a queue), sent to
        the chosen worker's queue; None: none is sent.

        With host-affine stages (:attr:`host_affine`) a *pending* partition is placed the
        same way, among the devices whose host has a live CPU worker serving ``circuit``;
        ``message`` is then its synthesize, sent to that host's CPU queue (docs/
        architecture.md, "Placement")."""
        job_id, idx, attempt = _check_run(run)
        if worker_id is not None:
            _check_worker_id(worker_id)
        ok, reason, worker, queue = self._run(
            "route", [self.keys.job(job_id), self.keys.part(job_id, idx), self.keys.unrouted()],
            [job_id, idx, attempt, worker_id, circuit, message or ""])
        return Routed(bool(ok), reason, worker or None, queue or None)

    def prove_begin(self, worker_id, run: PartitionRun,
                    max_deliveries: int = defaults.MAX_DELIVERIES) -> ProveBegin:
        """The device worker begins prove: partition (routed to this worker, this
        attempt, in synth_done) -> proving, worker -> proving with job, partition, kind, since and
        a fresh token ``job:idx:attempt:nonce``, recorded on the partition too.  Every accepted
        delivery counts in the partition's ``deliveries`` (summed over attempts); past
        ``max_deliveries`` the partition and its job fail ("poison pill?") instead.  A job
        past its deadline fails here (reason ``deadline``).  See :class:`ProveBegin` for the
        reasons.  A redelivery of the same message (partition already in proving on this worker,
        same attempt) is ACCEPTED and counted as a delivery -- its earlier run died -- and
        gets a new token; the old token is stale."""
        _check_worker_id(worker_id)
        return _prove_begin_reply(self._run("prove_begin",
                                            *self._prove_begin_call(worker_id, run, max_deliveries)))

    def send_prove_begin(self, worker_id, run: PartitionRun,
                         max_deliveries: int = defaults.MAX_DELIVERIES) -> "SentStep":
        """:meth:`prove_begin`, sent now; ``.reply()`` is its :class:`ProveBegin`, read when
        the caller gets to it.  A device starts the run's compute at once and reads the reply
        after it: the compute writes nothing, so a rejected run's result is just dropped, and
        the delivery is counted even if the process dies during the compute (the step is on
        the wire before it starts).  A reply that cannot be read (the connection lost, the
        script not loaded) runs the step again, which is idempotent on its nonce: the run keeps
        its token and counts one delivery."""
        _check_worker_id(worker_id)
        keys, args = self._prove_begin_call(worker_id, run, max_deliveries)
        return self._send("prove_begin", keys, args).then(_prove_begin_reply)

    def _prove_begin_call(self, worker_id, run, max_deliveries):
        job_id, idx, attempt = _check_run(run)
        return ([self.keys.job(job_id), self.keys.part(job_id, idx), self.keys.worker(worker_id),
                 self.keys.workers()],
                [job_id, idx, attempt, worker_id, int(max_deliveries), uuid.uuid4().hex[:12],
                 run.circuit or ""])

    def prove_end(self, worker_id, token, run: PartitionRun, prove_ms, message=None) -> ProveEnd:
        """Compare-and-delete: the worker goes idle only if it still holds ``token``.
        Independently the partition goes proving -> finalizing if it is in proving with this
        attempt and this token (it leaves the worker's routed set): a dead run's late end never
        advances a redelivered partition.  ``message`` (an outbox entry: the partition's
        finalize) is sent, only when the partition advanced.  The ``prove_end`` event is
        written either way."""
        return _prove_end_reply(self._run(*self._prove_end_call(worker_id, token, run,
                                                                prove_ms, message)))

    def send_prove_end(self, worker_id, token, run: PartitionRun, prove_ms,
                       message=None) -> "SentStep":
        """:meth:`prove_end`, sent now; ``.reply()`` is its :class:`ProveEnd`, read when the
        caller gets to it: a device goes on to its next partition without waiting for it.
        Only from a relay store (:attr:`relay`), whose step puts ``message`` on the relay list
        (never back in the reply, whose reading may come late or not at all).  Not reading
        the reply loses nothing: the step is on the wire, and a worker whose clear was lost is
        cleared by its heartbeat (``running`` differs)."""
        if not self.relay:
            raise ValueError("send_prove_end: only a relay store hands its messages on unread")
        return self._send(*self._prove_end_call(worker_id, token, run, prove_ms,
                                                message)).then(_prove_end_reply)

    def finalize_due(self, run: PartitionRun, token, message) -> bool:
        """Record ``message`` (the run's finalize, an outbox entry) if the partition is
        finalizing with this attempt and ``token``: for a device that ended a lone run
        before publishing its finalize itself, when the broker could not take it.  False when
        the partition moved meanwhile (cancelled, re-dispatched)."""
        job_id, idx, attempt = _check_run(run)
        return bool(self._run("finalize_due", [self.keys.part(job_id, idx)],
                              [attempt, token, message]))

    def _prove_end_call(self, worker_id, token, run, prove_ms, message):
        _check_worker_id(worker_id)
        job_id, idx, attempt = _check_run(run)
        return ("prove_end", [self.keys.part(job_id, idx), self.keys.worker(worker_id)],
                {"job": job_id, "idx": idx, "attempt": attempt, "worker": worker_id,
                 "token": token, "prove_ms": prove_ms, "message": message or ""})

    def prove_fault(self, worker_id, token, run: PartitionRun, error, circuit,
                    max_faults: int = defaults.MAX_DELIVERIES, message=None,
                    in_state: str = "proving") -> ProveFault:
        """A run on a device failed because of the device (not the input): its prove
        raised a GpuError (``in_state="proving"``), or the proof made from its partial failed
        self-verification (``in_state="finalizing"``, from finalize).  Compare-and-delete on
        the worker as :meth:`prove_end`; the partition, if this run is its current one, adds the
        worker to its ``avoid`` list, counts ``device_faults`` (and ``verify_faults``) and goes
        to synth_done with attempt + 1, routed in the same step to the best other live device
        (``message``: the retry's prove, built for attempt + 1, without a queue, sent there).  At
        ``max_faults`` faults, at a second self-verification failure (two devices agree: the
        witness is bad), or with no other live device, the partition and its job fail with
        ``error``."""
        _check_worker_id(worker_id)
        job_id, idx, attempt = _check_run(run)
        if in_state not in ("proving", "finalizing"):
            raise StateError(f"in_state must be 'proving' or 'finalizing', got {in_state!r}")
        cleared, outcome, worker, queue = self._run(
            "prove_fault", [self.keys.part(job_id, idx), self.keys.worker(worker_id)],
            {"job": job_id, "idx": idx, "attempt": attempt, "worker": worker_id, "token": token,
             "error": str(error), "circuit": circuit, "max_faults": int(max_faults),
             "message": message or "", "in_state": in_state})
        return ProveFault(bool(cleared), outcome, worker or None, queue or None)

    def finalize_end(self, run: PartitionRun, finalize_ms, proof_json, public_json,
                     token: str | None = None) -> FinalizeEnd:
        """finalizing (or proving, if its run ended without prove_end) -> done with ``proof_json``
        and ``public_json``; the job's ``n_done`` + 1, the counter ``completed:<kind>``, the
        completions zset and the phase histograms; a job past its deadline fails instead
        (reason ``deadline``).  The job -> done for exactly one caller (``job_complete``),
        and in that same step its result (:meth:`collect_result`'s form) is stored with
        ``result_ttl_s`` and its on_done callback, if any, sent (kwargs ``proofs`` null over
        ``ON_DONE_PROOFS_MAX_BYTES``); until then each call releases the job's next held
        synthesize message.  For a job of more than :attr:`chunk` partitions the last call
        only marks it ``completing``: :meth:`reap_jobs`, run before this returns, writes the
        result in steps and ends the job (its on_done carries ``proofs`` null).

        Also a compare-and-delete on the partition's recorded worker, with ``token`` (pass
        the token prove_begin gave the run whose partial this is: always safe) or, when None,
        the partition's recorded token -- then only if the partition was in finalizing."""
        job_id, idx, attempt = _check_run(run)
        if not isinstance(proof_json, str):
            proof_json = json.dumps(proof_json)
        if not isinstance(public_json, str):
            public_json = json.dumps(public_json)
        ok, complete, reason = self._run(
            "finalize_end", [self.keys.job(job_id), self.keys.part(job_id, idx)],
            {"job": job_id, "idx": idx, "attempt": attempt, "finalize_ms": finalize_ms,
             "proof": proof_json, "public": public_json, "token": token,
             "result_ttl": self.result_ttl_s,
             "on_done_max_bytes": defaults.ON_DONE_PROOFS_MAX_BYTES})
        if complete:
            self.reap_jobs()  # a big job's keys get their retention TTL, in short steps
        return FinalizeEnd(bool(ok), bool(complete), reason)

    def fail_partition(self, run: PartitionRun, error, token: str | None = None,
                       any_attempt: bool = False) -> bool:
        """Any live partition -> failed with ``error`` (``run``'s attempt must match, unless
        ``any_attempt``: an operator's), out of routed/unrouted, counted in ``failed:<kind>``
        and the failures list; the
        job -> failed on its first failure (its on_done sent) and its other live partitions
        -> cancelled (a big job's by :meth:`reap_jobs`, before this returns).

        Compare-and-delete of its worker with ``token`` (the ending run's) or, when None, the
        partition's recorded token unless the partition is in proving (its run may be in flight:
        that run clears the worker itself with prove_end)."""
        job_id, idx, attempt = _check_run(run)
        attempt = None if any_attempt else attempt
        ok, _ = self._run("fail_partition", [self.keys.job(job_id), self.keys.part(job_id, idx)],
                          [job_id, idx, attempt, str(error), token])
        if ok:
            self.reap_jobs()  # the job's other partitions, if it is big (one short step if not)
        return bool(ok)

    def redispatch(self, run: PartitionRun, worker_id: str | None = None) -> bool:
        """A routed partition in synth_done|proving with ``attempt`` -> synth_done with attempt + 1,
        unrouted.  The worker hash is not touched.  Of several callers with the same attempt
        only one wins; one that read the partition after the winner (now unrouted) loses too.
        ``worker_id``: also require the partition to be routed to that (dead) worker -- pass it
        from a sweeper, so a partition meanwhile routed to a live device is left alone."""
        job_id, idx, attempt = _check_run(run)
        ok, _ = self._run("redispatch", [self.keys.job(job_id), self.keys.part(job_id, idx),
                                         self.keys.unrouted()], [job_id, idx, attempt, worker_id])
        return bool(ok)

    def stage_partitions(self, limit: int = 10000) -> list[tuple[str, int, str, int, str]]:
        """``(job, idx, state, attempt, worker)`` of the partitions of live jobs whose stage is
        due or running: pending, synthesizing, synth_done and routed, proving, finalizing (at
        most ``limit``).  The sweeper checks each has a queued message or a live lease.
        Read in steps of :attr:`chunk` partitions (not one consistent read)."""
        out, rank, idx = [], 0, 0
        while rank >= 0 and len(out) < limit:  # steps of `chunk` partitions (stage_partitions.lua)
            step = json.loads(self._run("stage_partitions", [self.keys.jobs_active()],
                                        [int(limit) - len(out), rank, idx]))
            out += [(job, int(i), state, int(attempt), worker)
                    for job, i, state, attempt, worker in as_list(step["rows"])]
            rank, idx = int(step["rank"]), int(step["idx"])
        return out

    def queue_depth(self, list_keys) -> int:
        """Messages waiting in the broker lists ``list_keys`` (one queue's priority steps)."""
        pipe = self.redis.pipeline(transaction=False)
        for key in list_keys:
            pipe.llen(key)
        return sum(pipe.execute())

    def recover_stage(self, run: PartitionRun, state, message=None) -> bool:
        """A partition seen in ``state`` with ``run``'s attempt whose stage no one holds (the
        sweeper's finding) moves back one step with attempt + 1: pending and synthesizing to
        pending, with ``message`` (its synthesize, built for attempt + 1) queued; routed
        synth_done, proving and finalizing to unrouted synth_done.  False when it moved meanwhile."""
        job_id, idx, attempt = _check_run(run)
        ok, _ = self._run("recover_stage", [self.keys.job(job_id), self.keys.part(job_id, idx)],
                          [job_id, idx, state, attempt, message or ""])
        return bool(ok)

    def synth_retry(self, run: PartitionRun, reason, message=None) -> bool:
        """A synthesize that met an outage of its host (a full spool disk) hands its partition
        back: synthesizing with ``attempt`` -> pending with attempt + 1 and ``message`` (its
        synthesize, built for attempt + 1) queued; this delivery does not count towards max
        deliveries.  False when the partition moved meanwhile (cancelled, failed, stale)."""
        job_id, idx, attempt = _check_run(run)
        ok, _ = self._run("synth_retry", [self.keys.job(job_id), self.keys.part(job_id, idx)],
                          [job_id, idx, attempt, reason, message or ""])
        return bool(ok)

    # --- results --------------------------------------------------------------------

    def store_result(self, job_id, result: dict) -> None:
        """SET a job's result (JSON) with ``result_ttl_s``.  finalize_end stores its own, in
        the step that makes the job done; this is for a caller (a test) that built one itself."""
        self.redis.set(self.keys.result(job_id), json.dumps(result), ex=self.result_ttl_s)

    def get_result(self, job_id) -> dict | None:
        """The stored result (:meth:`collect_result`'s form), None when there is none (the
        job is not done, or its result expired)."""
        text = self.redis.get(self.keys.result(job_id))
        return json.loads(text) if text else None

    def collect_result(self, job_id) -> dict:
        """``{"job_id", "circuit", "kind", "state", "proofs": [{"idx", "proof", "public"}, ...]}``
        in partition order (proof/public None for a partition without a proof)."""
        job = self.get_job(job_id)
        if job is None:
            raise StateError(f"no such job: {job_id}")
        proofs = []
        for part in self.list_partitions(job_id):
            proofs.append({"idx": part["idx"],
                           "proof": json.loads(part["proof"]) if part.get("proof") else None,
                           "public": json.loads(part["public"]) if part.get("public") else None})
        return {"job_id": job_id, "circuit": job.get("circuit"), "kind": job.get("kind"),
                "state": job.get("state"), "proofs": proofs}

    def job_status(self, job_id, offset: int = 0, limit: int | None = None,
                   fields=reads.PUBLIC_PARTITION_FIELDS) -> dict | None:
        """The public status document of a job, JSON-able: its :data:`reads.PUBLIC_JOB_FIELDS`
        that are set (``on_done`` decoded) plus ``"partitions"`` (``fields``, a subset of
        :data:`reads.PUBLIC_PARTITION_FIELDS`, of the partitions ``offset`` ..
        ``offset + limit - 1``; ``limit`` None = ``defaults.JOB_STATUS_PAGE``), ``"page"``
        ``{"offset", "limit", "count"}`` and ``"counts"`` (partitions by state, all of them);
        None for an unknown job or one still being created.  What ``cuzk.status``,
        ``Client.status`` and ``/api/jobs/<id>`` return -- never a token, a digest, a server
        path or the transitions' bookkeeping (StateError for a ``fields`` outside the public
        ones).  The page is read in one transaction with the job; the counts of a job bigger
        than the page in steps of :attr:`chunk` partitions after it (so Redis is never held
        long at any size)."""
        offset = _check_int("offset", offset)
        limit = defaults.JOB_STATUS_PAGE if limit is None else _check_int("limit", limit)
        fields = list(fields)
        private = [f for f in fields if f not in reads.PUBLIC_PARTITION_FIELDS]
        if private:
            raise StateError(f"job_status: not public partition fields: {private}")
        if "state" not in fields:
            fields.append("state")
        n = self.redis.hget(self.keys.job(job_id), "n_partitions")
        if n is None:
            return None
        n = int(n or 0)
        page = range(min(offset, n), min(offset + limit, n))
        pipe = self.redis.pipeline(transaction=True)
        pipe.hgetall(self.keys.job(job_id))
        for i in page:
            pipe.hmget(self.keys.part(job_id, i), fields)
        got, *parts = pipe.execute()
        if not got or got.get("state") == JobState.CREATING.value:
            return None
        # only the documented fields: the rest of the hash is the transitions' bookkeeping
        job = decode({k: v for k, v in got.items() if k in reads.PUBLIC_JOB_FIELDS})
        if job.get("on_done"):
            job["on_done"] = json.loads(job["on_done"])
        job["partitions"] = [decode(dict(zip(fields, vals))) for vals in parts]
        job["page"] = {"offset": offset, "limit": limit, "count": len(parts)}
        if len(page) == n:
            states = [p.get("state") for p in job["partitions"]]
        else:
            states = []
            for first in range(0, n, self.chunk):
                pipe = self.redis.pipeline(transaction=False)
                for i in range(first, min(first + self.chunk, n)):
                    pipe.hget(self.keys.part(job_id, i), "state")
                states += pipe.execute()
        counts = {}
        for state in states:
            if state:
                counts[state] = counts.get(state, 0) + 1
        job["counts"] = counts
        if job.get("state") in (JobState.PENDING.value, JobState.RUNNING.value):
            job["eta"] = self.job_estimate(job_id)
        return job

    def job_estimate(self, job_id) -> dict | None:
        """A live job's estimate now: ``{"eta_s"`` (seconds from now), ``"eta_at"`` (epoch
        seconds), ``"position"`` (partitions ahead of it), ``"devices"`` (live devices serving
        its circuit)``}``; None when it is not pending or running, or nothing can be said
        (no finished partition of its circuit yet, no live device).  The model:
        docs/architecture.md, "Estimates"."""
        got = self._run("estimate_job", [self.keys.job(job_id)], [job_id])
        if not got:
            return None
        eta_s, ahead, devices = float(got[0]), int(got[1]), int(got[2])
        now = self.redis.time()
        return {"eta_s": round(eta_s, 3), "eta_at": round(now[0] + now[1] / 1e6 + eta_s, 3),
                "position": ahead, "devices": devices}

    def eta_errors(self, limit: int = 1000) -> list[dict]:
        """The newest ``limit`` done jobs that had an ETA: ``{"circuit", "eta_s", "actual_s"}``
        (seconds from submit), newest first."""
        return [json.loads(x) for x in self.redis.lrange(self.keys.eta_errors(), 0, limit - 1)]

    # --- workers ----------------------------------------------------------------------

    def register_worker(self, worker_id, role, host, device=None, queue=None, gpu_name=None,
                        holder: str | None = None, ttl_s: float | None = None) -> "Claim":
        """Call when a worker PROCESS starts: records it and resets its assignment to idle
        (a fresh process runs nothing).

        ``holder`` (``<container host>:<pid>``) with ``ttl_s``: also claim the worker id for
        this process, in the same step -- refused (a falsy :class:`Claim` naming the holder;
        nothing changes) while a live heartbeat of another process holds it; else the
        heartbeat key is set for ``ttl_s`` seconds and the hash records the holder, which the
        process's beats (:meth:`heartbeat` ``holder=``) keep.  Without a holder: no claim."""
        _check_worker_id(worker_id)
        if holder and not (ttl_s and float(ttl_s) > 0):
            raise StateError(f"register_worker: a holder needs ttl_s > 0 seconds, got {ttl_s!r}")
        ttl_ms = max(1, int(round(float(ttl_s) * 1000))) if holder else ""
        reply = self._run("register_worker",
                          [self.keys.workers(), self.keys.worker(worker_id),
                           self.keys.hb(worker_id)],
                          {"worker": worker_id, "role": _check_role(role).value, "host": host,
                           "device": device, "queue": queue, "gpu_name": gpu_name,
                           "holder": holder or "", "ttl_ms": ttl_ms})
        if int(reply[0]):
            return Claim(True)
        return Claim(False, reply[1] or None, int(reply[2]), reply[3] or None)

    def heartbeat(self, worker_id, ttl_s, resident=None, extra: dict | None = None,
                  slot: HostSlot | None = None, holding=None, holding_requests=None,
                  registration: Registration | None = None, holder: str | None = None) -> "Beat":
        """SET the heartbeat key with a TTL of ``ttl_s`` seconds and update the worker hash
        (``resident``: circuit names held, None = unchanged; ``extra``: more fields; ``slot``:
        the worker's host slot, whose claim lives as long as the heartbeat; ``holding``: the
        run (:class:`PartitionRun`) of every stage message the worker holds -- reserved or
        running -- its stage leases, None = unchanged; ``holding_requests``: the Celery task
        ids of the by-name requests -- submit, status, result -- it holds, its request
        leases, None = unchanged).  Never touches the worker's state or token.
        ``extra`` may not name a field the store owns (state, job, partition, kind, token,
        since, role, ...: StateError).
        ``registration``: what :meth:`register_worker` recorded; when the worker hash has lost
        it (Redis came back empty) the beat records it again, with its resident set.
        ``holder``: the process that claimed the worker id (:meth:`register_worker`): while
        the id's heartbeat lives under another holder, the beat changes nothing and says so
        (``Beat.held_by``).  With ``holding`` the beat also ends a stale "proving" record: a
        run that began before the previous beat with ``holding`` and is not held now is over
        (heartbeat.lua, whose header says how).
        Returns a :class:`Beat`, truthy if the worker came (back) online."""
        _check_worker_id(worker_id)
        ttl_ms = max(1, int(round(float(ttl_s) * 1000)))
        args = _named({"worker": worker_id, "ttl_ms": ttl_ms,
                       "set_resident": resident is not None,
                       "resident": json.dumps(list(resident)) if resident is not None else "",
                       "slot_holder": slot.holder if slot else "",
                       "registration": registration.to_json() if registration is not None
                       else "", "holder": holder or ""})
        for k, v in (extra or {}).items():  # then the data: field/value pairs
            if k in _RESERVED_WORKER_FIELDS:
                raise StateError(f"heartbeat extra field {k!r} is reserved")
            args += [k, _arg(v)]
        if holding is not None:
            args += ["holding", json.dumps(sorted(run.member for run in holding))]
        if holding_requests is not None:
            args += ["holding_requests", json.dumps(sorted(str(t) for t in holding_requests))]
        keys = [self.keys.hb(worker_id), self.keys.worker(worker_id), self.keys.workers()]
        if slot is not None:
            keys.append(self.keys.host_slot(slot.group, slot.index))
        online, registered, held, held_by = self._run("heartbeat", keys, args)
        return Beat(bool(online), bool(registered), json.loads(held) if held else None,
                    held_by or None)

    def claim_host_slot(self, group, holder, ttl_s, slots=defaults.HOST_SLOTS_MAX) -> HostSlot:
        """The lowest free host name ``<group>-<n>`` (settings.host_slot), claimed for
        ``holder`` for ``ttl_s`` seconds; the holder's heartbeats keep it (``slot=``).
        Raises StateError when all ``slots`` are held."""
        ttl_ms = max(1, int(round(float(ttl_s) * 1000)))
        index = int(self._run("claim_host_slot", [], [group, holder, ttl_ms, int(slots)]))
        if index < 0:
            raise StateError(f"host slot group {group!r}: all {slots} slots are held by live "
                             "workers (host_slot)")
        return HostSlot(group, index, holder)

    def held_host_slots(self, group, slots=defaults.HOST_SLOTS_MAX) -> dict[int, int]:
        """``{index: milliseconds left}`` of the held slots of ``group`` below its lowest free
        one (the slots a claim now would pass over)."""
        pipe = self.redis.pipeline(transaction=False)
        for n in range(int(slots)):
            pipe.pttl(self.keys.host_slot(group, n))
        held = {}
        for n, ms in enumerate(pipe.execute()):
            if ms == -2:  # absent: the lowest free slot
                break
            held[n] = int(ms)
        return held

    def retire_workers(self, retire_after_s) -> list[str]:
        """Forget every worker offline for longer than ``retire_after_s`` seconds (> 0) with
        no partition routed to it: it leaves the registry, the status page and /metrics.
        Returns the ids retired."""
        if isinstance(retire_after_s, bool) or not float(retire_after_s) > 0:
            raise StateError(f"retire_after_s must be > 0 seconds, got {retire_after_s!r}")
        return sorted(self._run("retire_workers", [self.keys.workers()], [float(retire_after_s)]))

    def set_resident(self, worker_id, names) -> None:
        self.redis.hset(self.keys.worker(_check_worker_id(worker_id)), "resident",
                        json.dumps(list(names)))

    def worker_offline(self, worker_id, slot: HostSlot | None = None,
                       holder: str | None = None) -> bool:
        """Delete the heartbeat key (what expiry does); the stored state stays.  ``slot``:
        release the worker's host slot too (if it still holds it).  ``holder``: only while
        the worker id is still this process's (:meth:`register_worker`), never another's."""
        keys = [self.keys.hb(worker_id), self.keys.worker(worker_id)]
        if slot is not None:
            keys.append(self.keys.host_slot(slot.group, slot.index))
        return bool(self._run("worker_offline", keys,
                              [worker_id, slot.holder if slot else "", holder or ""]))

    def heartbeat_ttl_ms(self, worker_id) -> int:
        """Milliseconds the worker's heartbeat key has left (-2: absent)."""
        return int(self.redis.pttl(self.keys.hb(_check_worker_id(worker_id))))

    def get_worker(self, worker_id) -> dict | None:
        """The worker hash, decoded, plus ``worker_id``, ``state`` (derived: offline without
        a heartbeat), ``stored_state``, ``online``, ``hb_ttl_left_ms``, ``hb_age_s``,
        ``outstanding`` (its routed set's size) and ``resident`` (a list); None if unknown."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hgetall(self.keys.worker(worker_id))
        pipe.pttl(self.keys.hb(worker_id))
        pipe.get(self.keys.hb(worker_id))
        pipe.scard(self.keys.routed(worker_id))
        pipe.time()
        fields, pttl, hb, outstanding, (sec, usec) = pipe.execute()
        if not fields:
            return None
        return worker_record({"id": worker_id, "fields": fields, "hb_pttl": pttl, "hb": hb or "",
                        "outstanding": outstanding}, sec + usec / 1e6)

    def _workers(self) -> list[dict]:
        records = as_list(json.loads(self._run("workers", [self.keys.workers()], [])))
        return sorted((worker_record(r) for r in records), key=lambda w: w["worker_id"])

    def all_workers(self) -> list[dict]:
        """Every registered worker (as :meth:`get_worker`), sorted by id."""
        return self._workers()

    def live_device_workers(self, workers=None) -> list[dict]:
        """Device workers with a heartbeat; each has worker_id, queue, outstanding (size of its
        routed set), resident (list) and the rest of its hash.  ``workers``: what
        :meth:`all_workers` returned, if the caller has it."""
        return [w for w in (self._workers() if workers is None else workers)
                if w.get("role") == WorkerRole.DEVICE.value and w["online"]]

    def devices_serving(self, circuit, workers=None) -> list[dict]:
        """The live device workers a partition of ``circuit`` may be routed to, as the route
        step chooses (_lib.lua ``live_devices``): each advertises the circuit (``circuits``,
        a JSON list; a worker that advertises none serves any) and, with host-affine stages,
        its host has a live CPU worker that serves it and consumes the host's queue."""
        workers = self._workers() if workers is None else workers
        cpu_hosts = {w.get("host") for w in workers
                     if w.get("role") == WorkerRole.CPU.value and w["online"]
                     and w.get("host_queue") and serves(w, circuit)}
        return [w for w in self.live_device_workers(workers) if serves(w, circuit)
                and (not self.host_affine or w.get("host") in cpu_hosts)]

    def dead_workers_with_routed(self, workers=None) -> list[str]:
        """Ids of workers without a heartbeat whose routed set is not empty (``workers`` as
        for :meth:`live_device_workers`)."""
        return [w["worker_id"] for w in (self._workers() if workers is None else workers)
                if not w["online"] and w["outstanding"]]

    def claim_sweep(self, holder: str, ttl_s: float) -> bool:
        """The cluster-wide sweep's lease: True when ``holder`` (a worker id) has it -- it
        was free, or ``holder``'s -- now renewed for ``ttl_s`` seconds; False when another
        sweeper holds it (``claim_sweep.lua``)."""
        _check_worker_id(holder)
        ttl_ms = max(1, int(round(float(ttl_s) * 1000)))
        return bool(self._run("claim_sweep", [self.keys.sweeper()], [holder, ttl_ms]))

    def held_stages(self, workers=None) -> set[PartitionRun]:
        """The runs (identity only) of every stage message an ONLINE worker reported holding in
        its last heartbeat (``holding``): the stage leases that are alive.  ``workers``: what
        :meth:`all_workers` returned, if the caller has it."""
        held = set()
        for w in self.all_workers() if workers is None else workers:
            if w["online"]:
                for text in w.get("holding") or ():
                    try:
                        held.add(PartitionRun(*parse_attempt_member(text)))
                    except ValueError:
                        continue
        return held

    def held_requests(self, workers=None) -> set[str]:
        """Celery task ids of every by-name request (submit, status, result) an ONLINE worker
        reported holding in its last heartbeat (``holding_requests``): the request leases
        that are alive.  ``workers``: what :meth:`all_workers` returned, if the caller has it."""
        return {str(task_id) for w in (self.all_workers() if workers is None else workers)
                if w["online"] for task_id in w.get("holding_requests") or ()}

    def routed_partitions(self, worker_id) -> list[tuple[str, int]]:
        return sorted(parse_member(m) for m in self.redis.smembers(self.keys.routed(worker_id)))

    def unrouted_partitions(self) -> list[tuple[str, int]]:
        return sorted(parse_member(m) for m in self.redis.smembers(self.keys.unrouted()))

    # --- read API -------------------------------------------------------------------------

    def ping(self) -> None:
        """One round trip to Redis; raises redis-py's error when it is unreachable (the web
        app's /healthz, which reaches Redis only through this store)."""
        self.redis.ping()

    def eviction_policy(self) -> str:
        """Redis's ``maxmemory-policy`` (``INFO memory``, which managed Redis services allow
        where ``CONFIG`` is not): ``noeviction`` is the only one under which no job, queued
        message or result can vanish.  Rides out an outage as the transitions do."""
        info = self.redis.info if self._outage is None else \
            (lambda section: self._outage.call(self.redis.info, section))
        return str(info("memory").get("maxmemory_policy") or "noeviction")

    def snapshot(self, queues: dict | None = None,
                 recent_jobs: int = defaults.SNAPSHOT_RECENT_JOBS,
                 failures: int = defaults.FAILURES_KEPT,
                 windows_s=defaults.THROUGHPUT_WINDOWS_S) -> dict:
        """Everything a status panel shows, in one consistent read: :func:`.reads.snapshot`."""
        return reads.snapshot(self, queues, recent_jobs, failures, windows_s)

    def events(self, last_id: str = "$", count: int = 100,
               block_ms: int | None = None) -> list[tuple[str, dict]]:
        """Events after ``last_id``.  ``"$"`` without ``block_ms``: the latest ``count``
        events (oldest first), to start from; with ``block_ms``: wait for new ones."""
        key = self.keys.events()
        if block_ms is None and last_id == "$":
            return list(reversed(self.redis.xrevrange(key, count=count)))
        reply = self.redis.xread({key: last_id}, count=count, block=block_ms)
        if not reply:
            return []
        entries = reply[0][1] if isinstance(reply, list) else reply.get(key, [[]])[0]
        return [(eid, fields) for eid, fields in entries]


__all__ = ["StateStore", "SynthBegin", "SynthEnd", "Routed", "ProveBegin", "ProveEnd", "ProveFault",
           "FinalizeEnd", "member"]
