"""The logic behind the Celery tasks (tasks.py only wraps these functions).

Every step runs a guarded state-store transition first; a rejected (stale,
duplicate, cancelled) transition makes the step log and return without doing
work.  Bad input ends as ``fail_partition`` with the CuzkError's message: a
task never raises out of here for a problem with the job itself.

Stages (docs/architecture.md, "Pipeline"):

* ``submit_job``   create the job (idempotent on request_id) with its synthesize messages
* ``synthesize``   witness from wasm + input (or a .wtns ref) -> spool dir; synth_end, which
                   also routes the partition and queues its prove_start on the chosen device
* ``prove_start``  gpu_start -> token; groth16 prove_start; gpu_end(token) in a finally,
                   which queues finalize (cpu queue) when the partition advanced
* ``finalize``     prove_finish (self-verifies); finalize_end, whose job_complete step also stores
                   the result and sends the job's on_done callback

Each next-stage message is built here (``cuzk_tasks.wire``) and pushed by the transition
that makes it due, in the same Lua step, when the broker is the state store's Redis
(``Settings.broker_is_state_redis``, the default); otherwise
:meth:`Context.publish_after` sends it right after the transition.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid

from . import defaults, wire
from .config import Settings
from .errors import CuzkError, GpuError, SelfVerificationError
from .paths import confined_path

log = logging.getLogger("cuzk_tasks.pipeline")


# --- per-process context -------------------------------------------------------

class Context:
    """What a task needs in this process: settings, store, app, resident zkeys, backend."""

    def __init__(self, app, settings: Settings, worker_id: str | None = None):
        from .registry import CircuitRegistry, ResidentZkeys

        self.app = app
        self.settings = settings
        self.worker_id = worker_id or os.environ.get("CUZK_WORKER_ID") or ""
        self.backend_name = os.environ.get("CUZK_WORKER_BACKEND") or defaults.backend_name()
        self._backend = None
        self._store = None
        self._broker_redis = None
        #: the transitions push the next stage's message themselves (same Redis database)
        self.enqueue_in_store = settings.broker_is_state_redis
        self.registry = CircuitRegistry.from_settings(settings)
        self.resident = ResidentZkeys(self.registry, settings.zkey_budget_mb,
                                      on_change=self._publish_resident)

    @property
    def store(self):
        if self._store is None:
            from .state import StateStore

            self._store = StateStore.from_settings(self.settings)
        return self._store

    @property
    def backend(self):
        if self._backend is None:
            from .groth16.backends import get_backend

            self._backend = get_backend(self.backend_name)
        return self._backend

    @property
    def time_limits(self):
        """(hard, soft) seconds for task messages, as Celery's publish would put them."""
        return (self.settings.time_limit_s, self.settings.soft_time_limit_s)

    def outbox(self, message):
        """``message`` (or a list of them) when the transition should push it itself, else None."""
        return message if self.enqueue_in_store else None

    def publish_after(self, message, queue=None):
        """The transition that makes ``message`` due has run: send it to the broker, unless
        the transition pushed it itself (see :meth:`outbox`).  ``queue`` fills a
        :class:`~cuzk_tasks.wire.QueueLateMessage` (the worker routing chose)."""
        if self.enqueue_in_store:
            return
        if queue is not None:
            message = wire.fill_queue(message, queue)
        self._broker().lpush(message.list_key, message.payload)

    def queue_depth(self, queue) -> int:
        """Messages waiting on ``queue`` (all its priority steps), in the broker's Redis."""
        if self.enqueue_in_store:
            return self.store.queue_depth(wire.queue_keys(queue))
        broker = self._broker()
        return sum(broker.llen(key) for key in wire.queue_keys(queue))

    def _broker(self):
        """A client of the broker's Redis when it is not the state store's."""
        if self._broker_redis is None:
            from .redis_url import client

            self._broker_redis = client(self.settings.broker_url, self.settings.sentinel_master)
        return self._broker_redis

    def _publish_resident(self, names):
        if self.worker_id and os.environ.get("CUZK_WORKER_ROLE") == "device":
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
                ctx = _CONTEXTS[key] = Context(app, app.cuzk_settings)
    return ctx


def _ms_since(t0):
    return round((time.perf_counter() - t0) * 1000.0, 3)


def _fail(ctx, job_id, idx, attempt, error, token=None):
    ok = ctx.store.fail_partition(job_id, idx, attempt, str(error), token=token)
    log.warning("job %s partition %s failed%s: %s", job_id, idx, "" if ok else " (already final)",
                error)
    return ok


def _internal_error(exc):
    return f"internal error: {type(exc).__name__}: {exc}"


# --- submit --------------------------------------------------------------------

def normalize_partitions(partitions):
    """Accept ``[{"input": dict|str} | {"input_ref": path} | {"witness_ref": path}, ...]``.

    A bare dict (an input object) or a string path ending in .wtns / .json is
    also accepted per partition.  Inputs by value are stored as JSON text; paths as
    given (:func:`submit_job` and every worker check them with :func:`ref_path`).
    """
    if isinstance(partitions, (dict, str)) or partitions is None:
        raise CuzkError("partitions must be a non-empty list")
    out = []
    for i, p in enumerate(partitions):
        if isinstance(p, str):
            p = {"witness_ref": p} if p.endswith(".wtns") else {"input_ref": p}
        if not isinstance(p, dict):
            raise CuzkError(f"partition {i}: expected an object, got {type(p).__name__}")
        keys = {"input", "input_ref", "witness_ref"}
        given = [k for k in keys if p.get(k) is not None]
        if not given:
            # a bare input object
            p = {"input": p}
            given = ["input"]
        if len(given) != 1 or set(p) - keys:
            raise CuzkError(f"partition {i}: give exactly one of input, input_ref, witness_ref "
                            f"(got {sorted(p)})")
        entry = {}
        if "input" in given:
            value = p["input"]
            entry["input"] = value if isinstance(value, str) else json.dumps(value)
        else:
            try:
                entry[given[0]] = os.fspath(p[given[0]])
            except TypeError:
                raise CuzkError(f"partition {i}: {given[0]}: expected a path string, got "
                                f"{type(p[given[0]]).__name__}") from None
        out.append(entry)
    if not out:
        raise CuzkError("a job needs at least one partition")
    return out


def ref_path(ctx: Context, field, path) -> str:
    """The real path of a partition's ``field`` (input_ref / witness_ref) when it lies inside
    this process's input roots (spool dir + allowed_input_roots); otherwise the
    OutsideInputRootsError that fails the partition ("input_ref /x is outside the allowed
    input roots (allowed_input_roots)"; the job's error adds "partition N: ").  Call it
    before opening ``path``."""
    return confined_path(path, ctx.settings, field)


def _refused_refs(ctx, parts):
    """``{idx: message}`` of the partitions whose path lies outside the input roots."""
    refused = {}
    for i, p in enumerate(parts):
        for field in ("input_ref", "witness_ref"):
            if p.get(field):
                try:
                    ref_path(ctx, field, p[field])
                except CuzkError as exc:
                    refused[i] = str(exc)
    return refused


def check_on_done(on_done):
    """``on_done={"task": NAME, "queue": QUEUE}`` (or None) checked; CuzkError otherwise."""
    if on_done is None:
        return None
    if not isinstance(on_done, dict) or set(on_done) != {"task", "queue"}:
        raise CuzkError(f"on_done: expected an object with exactly the keys task and queue, got "
                        f"{on_done!r:.200}")
    task = on_done["task"]
    if not isinstance(task, str) or not task.strip() or any(c.isspace() for c in task):
        raise CuzkError(f"on_done.task: expected a task name (a non-empty string without "
                        f"spaces), got {task!r:.200}")
    try:
        wire.check_queue_name(on_done["queue"])
    except CuzkError as exc:
        raise CuzkError(f"on_done.queue: {exc}") from None
    return {"task": task, "queue": on_done["queue"]}


def on_done_message(ctx: Context, job_id, on_done) -> wire.KwargsLateMessage:
    """The job's on_done task without its kwargs (the step ending the job writes them):
    priority 0, so it lands on the list named by the queue, which any Redis consumer reads."""
    kwargsrepr = f"{{'job_id': {job_id!r}, 'state': ..., 'proofs' | 'error': ...}}"
    return wire.task_message_late_kwargs(on_done["task"], queue=on_done["queue"], priority=0,
                                         kwargsrepr=kwargsrepr)


def check_deadline(deadline_s):
    """``deadline_s`` (seconds from submit, > 0, or None) checked; CuzkError otherwise."""
    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) \
            or not deadline_s > 0 or deadline_s != deadline_s:
        raise CuzkError(f"deadline_s: expected seconds > 0 (or none), got {deadline_s!r:.100}")
    return float(deadline_s)


def submit_job(ctx: Context, circuit, partitions, priority=None, request_id=None, job_id=None,
               on_done=None, deadline_s=None):
    """Create the job and queue its synthesize tasks; returns the job id (idempotent on request_id).

    ``on_done={"task": NAME, "queue": QUEUE}``: when the job ends, the task NAME is sent once
    to QUEUE with kwargs ``job_id``, ``state`` and ``proofs`` or ``error`` (pushed by the
    transition that ends the job, so it needs the broker to be the state store's Redis).
    ``deadline_s``: the job fails "deadline exceeded (...)" this many seconds after submit
    (default: the circuit's ``deadline_s``, else none); past it no worker starts a stage of it."""
    on_done = check_on_done(on_done)
    deadline_s = check_deadline(deadline_s)
    if on_done is not None and not ctx.enqueue_in_store:
        raise CuzkError("on_done needs the broker and the state store in the same Redis database "
                        "(the step that ends a job pushes the callback): broker_url is "
                        "not state_url")
    parts = normalize_partitions(partitions)
    spec = ctx.settings.circuits.get(circuit)
    if priority is None:
        priority = spec.priority if spec else ctx.settings.default_priority
    priority = int(priority)
    if deadline_s is None and spec is not None:
        deadline_s = spec.deadline_s
    if not 0 <= priority <= 9:
        raise CuzkError(f"priority must be 0..9, got {priority}")
    limit = ctx.settings.max_inline_input_bytes
    rejected = {}  # partition -> the message it fails with
    for i, p in enumerate(parts):
        size = len(p.get("input", "").encode("utf-8"))
        if size > limit:
            rejected[i] = (f"partition {i}: input is {size} bytes, over the inline limit of "
                           f"{limit} bytes (max_inline_input_bytes); pass it by reference "
                           "(input_ref) instead")
            p["input"] = ""  # never store the oversized payload
    rejected.update(_refused_refs(ctx, parts))
    job_id = job_id or uuid.uuid4().hex
    kind = spec.kind if spec else "unknown"
    messages = []
    if spec is not None and not rejected:
        from .routing import synthesize_message

        messages = [synthesize_message(ctx, job_id, i, circuit, priority) for i in range(len(parts))]
    late = (on_done, on_done_message(ctx, job_id, on_done)) if on_done else None
    job_id, created = ctx.store.create_job(job_id, circuit, kind, priority, request_id, parts,
                                           messages=ctx.outbox(messages) or (), on_done=late,
                                           deadline_s=deadline_s)
    if not created:
        log.info("request %s already submitted as job %s", request_id, job_id)
        return job_id
    if spec is None:
        known = ", ".join(sorted(ctx.settings.circuits)) or "none configured"
        _fail(ctx, job_id, 0, 0, f"unknown circuit {circuit!r} (known circuits: {known})")
        return job_id
    if rejected:
        for i, message in rejected.items():
            _fail(ctx, job_id, i, 0, message)
        return job_id
    for message in messages:
        ctx.publish_after(message)
    log.info("job %s: %s x%d queued (priority %d)", job_id, circuit, len(parts), priority)
    return job_id


# --- synthesize ----------------------------------------------------------------

def _load_inputs(ctx, part, idx):
    from .groth16 import witness as witness_mod

    text = part.get("input")
    if text:
        limit = ctx.settings.max_inline_input_bytes
        if len(text.encode("utf-8")) > limit:
            raise CuzkError(f"partition {idx}: input is over the inline limit of {limit} bytes "
                            "(max_inline_input_bytes); pass it by reference (input_ref)")
        parse_int = getattr(witness_mod, "_parse_int", int)
        try:
            data = json.loads(text, parse_int=parse_int)
        except json.JSONDecodeError as exc:
            raise CuzkError(f"partition {idx}: input.json is malformed: invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CuzkError(f"partition {idx}: input.json is malformed: expected an object "
                            f"mapping signal names to values, got {type(data).__name__}")
        return data, f"<job input #{idx}>"
    ref = part.get("input_ref")
    return witness_mod.load_input_json(ref_path(ctx, "input_ref", ref)), ref


def synthesize(ctx: Context, job_id, idx, circuit=None, priority=None, attempt=0):
    """``circuit``/``priority`` come in messages sent by submit_job; without them (an older
    sender) they are read from the job.  ``attempt``: 0 from submit_job, more from a sweeper
    that found the stage lost (``recover_stage``).  synth_begin rejects a job that is not
    live and a message of another attempt (stale)."""
    from .state import JobState

    store = ctx.store
    if circuit is None or priority is None:
        job = store.get_job(job_id)
        if job is None:
            log.warning("synthesize %s/%s: no such job", job_id, idx)
            return None
        if job["state"] not in (JobState.PENDING.value, JobState.RUNNING.value):
            log.info("synthesize %s/%s: job is %s, skipping", job_id, idx, job["state"])
            return None
        circuit = job["circuit"]
        priority = job.get("priority")
    priority = ctx.settings.default_priority if priority is None else int(priority)
    begun = store.synth_begin(job_id, idx, attempt)
    if not begun:
        log.info("synthesize %s/%s: rejected (%s), skipping", job_id, idx, begun.reason)
        return None
    t0 = time.perf_counter()
    try:
        spec = ctx.registry.get(circuit)
        part = begun.inputs
        zkey = ctx.resident.get(spec.name)
        if part.get("witness_ref"):
            from .groth16.wtns import read_wtns

            ref = ref_path(ctx, "witness_ref", part["witness_ref"])
            w = read_wtns(ref, expected_length=zkey.n_vars)
            w.close()
            witness_ref = ref
        else:
            if not spec.wasm:
                raise CuzkError(f"circuit {spec.name!r} has no wasm configured: partitions must "
                                "give a witness_ref")
            from .groth16.witness import get_calculator
            from .groth16.wtns import wtns_bytes

            inputs, where = _load_inputs(ctx, part, idx)
            calc = get_calculator(spec.wasm)
            values = calc.calculate(inputs, where)
            if values.shape[0] != zkey.n_vars:
                raise CuzkError(f"partition {idx}: witness has {values.shape[0]} values, the zkey "
                                f"of circuit {spec.name!r} expects nVars={zkey.n_vars}")
            witness_ref = _spooled_witness(ctx, job_id, idx)
            os.makedirs(os.path.dirname(witness_ref), exist_ok=True)
            tmp = f"{witness_ref}.tmp{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(wtns_bytes(values, calc.prime))
            os.replace(tmp, witness_ref)
    except CuzkError as exc:
        _fail(ctx, job_id, idx, attempt, exc)
        return None
    except Exception as exc:  # a bug or an I/O problem: fail the partition, keep the worker
        log.exception("synthesize %s/%s crashed", job_id, idx)
        _fail(ctx, job_id, idx, attempt, _internal_error(exc))
        return None
    from .routing import after_route, prove_start_message

    message = prove_start_message(ctx, job_id, idx, attempt, circuit, witness_ref, priority)
    end = store.synth_end(job_id, idx, attempt, witness_ref, _ms_since(t0), route_circuit=circuit,
                          message=ctx.outbox(message))
    if not end:
        log.info("synthesize %s/%s: synth_end rejected (%s)", job_id, idx, end.reason)
        return None
    after_route(ctx, job_id, idx, attempt, end.routed, message)
    return witness_ref


# --- prove_start (device queue) ---------------------------------------------------

def _test_instruments(circuit):
    """TEST ONLY instruments, active only through env vars the tests set."""
    poison = os.environ.get(defaults.TEST_POISON_CIRCUIT_ENV)
    if poison and poison == circuit:
        log.error("TEST INSTRUMENT %s=%s: killing this worker process", defaults.TEST_POISON_CIRCUIT_ENV,
                  poison)
        os._exit(86)
    delay = prove_delay_instrument_ms(os.environ.get(defaults.TEST_PROVE_DELAY_ENV), circuit)
    if delay:
        time.sleep(delay / 1000.0)


def prove_delay_instrument_ms(spec, circuit):
    """TEST ONLY: parse ``"250"`` (every circuit) or ``"slow=4000,mulchain=200"`` (per circuit)."""
    if not spec:
        return 0.0
    default = 0.0
    for item in spec.split(","):
        name, sep, value = item.strip().rpartition("=")
        if not sep:
            default = float(value)
        elif name == circuit:
            return float(value)
    return default


def bench_instrument():
    """BENCH ONLY: ``(T_ms, F_ms, monolithic, host_sleeps)`` from CUZK_BENCH_BUSYWAIT, or None."""
    spec = os.environ.get(defaults.BENCH_BUSYWAIT_ENV, "").strip()
    if not spec:
        return None
    fields = [f.strip() for f in spec.split(",")]
    try:
        return float(fields[0]), float(fields[1]), "monolithic" in fields[2:], "sleep" in fields[2:]
    except (IndexError, ValueError):
        raise CuzkError(f"{defaults.BENCH_BUSYWAIT_ENV}={spec!r}: expected "
                        "'T_MS,F_MS[,monolithic][,sleep]'") from None


def busy_wait(ms):
    """Spin (not sleep) for ``ms`` milliseconds: a stand-in for compute in the benchmark."""
    deadline = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < deadline:
        pass


def _bench_prove_start(ctx, job_id, idx, attempt, circuit, witness_ref, token, bench):
    gpu_ms, finalize_ms, monolithic, host_sleeps = bench
    if host_sleeps:
        time.sleep(gpu_ms / 1000.0)  # the device computes while the host thread blocks
    else:
        busy_wait(gpu_ms)
    result = {"job": job_id, "idx": idx, "attempt": attempt, "circuit": circuit,
              "witness_ref": witness_ref, "worker": ctx.worker_id, "token": token,
              "partial": None, "bench": True, "gpu_ms": gpu_ms}
    if monolithic:
        busy_wait(finalize_ms)  # the CPU tail holding the device worker, as in cuzk before the split
    return result, monolithic


def _bench_finalize(ctx, started, t0, finalize_ms):
    busy_wait(finalize_ms)
    return ctx.store.finalize_end(started["job"], int(started["idx"]), int(started["attempt"]),
                                  _ms_since(t0), json.dumps({"bench": True}), "[]",
                                  token=started.get("token"))


def finalize_message(ctx, result, finalize_queue, priority) -> wire.QueuedMessage:
    """The finalize task of a prove_start result, for gpu_end to queue when the partition
    advances (before this task's own message is acked, as a chain's next step would be)."""
    if priority is None:
        priority = ctx.settings.default_priority
    # argsrepr: a short log form instead of the whole partial proof
    return wire.task_message(wire.TASK_FINALIZE, (result,), queue=finalize_queue, priority=int(priority),
                             argsrepr=f"({{job: {result['job']}, idx: {result['idx']}, "
                                      f"attempt: {result['attempt']}}},)",
                             time_limits=ctx.time_limits)


def _after_gpu_end(ctx, end, message, result):
    """prove_start's return value once gpu_end ran: None when the partition did not advance
    or finalize was queued (published here when the transition could not push it)."""
    if not end.partition_advanced:
        return None
    if message is None:
        return result
    ctx.publish_after(message)
    return None


def prove_start(ctx: Context, job_id, idx, attempt, circuit, witness_ref, finalize_queue=None,
                priority=None):
    """Returns the partial-proof dict for finalize, or None.  With ``finalize_queue`` (what
    routing sends) gpu_end queues finalize there and this task returns None."""
    from .groth16.prover import prove_start as groth16_prove_start
    from .groth16.wtns import read_wtns

    store = ctx.store
    wid = ctx.worker_id
    started = store.gpu_start(wid, job_id, idx, attempt, ctx.settings.max_deliveries)
    if not started.ok:
        log.info("prove_start %s/%s attempt %s on %s rejected: %s", job_id, idx, attempt, wid,
                 started.reason)
        return None
    token = started.token
    t0 = time.perf_counter()
    result = None
    bench = bench_instrument()
    if bench is not None:
        result, finish_here = _bench_prove_start(ctx, job_id, idx, attempt, circuit, witness_ref,
                                                 token, bench)
        message = None
        if finalize_queue and not finish_here:
            message = finalize_message(ctx, result, finalize_queue, priority)
        end = store.gpu_end(wid, token, job_id, idx, attempt, _ms_since(t0),
                            message=ctx.outbox(message))
        if finish_here and end.partition_advanced:
            store.finalize_end(job_id, idx, attempt, 0.0, json.dumps({"bench": True}), "[]", token=token)
            return None
        return _after_gpu_end(ctx, end, message, result)
    message = None
    device_fault = None
    try:
        _test_instruments(circuit)
        path = ref_path(ctx, "witness_ref", witness_ref)
        zkey = ctx.resident.get(circuit)
        witness = read_wtns(path, expected_length=zkey.n_vars)
        try:
            partial = groth16_prove_start(zkey, witness, backend=ctx.backend)
        finally:
            witness.close()
        result = {"job": job_id, "idx": idx, "attempt": attempt, "circuit": circuit,
                  "witness_ref": witness_ref, "worker": wid, "token": token,
                  "backend": getattr(ctx.backend, "name", ctx.backend_name),
                  "partial": partial.to_json(), "gpu_ms": _ms_since(t0), "priority": priority}
        if finalize_queue:
            message = finalize_message(ctx, result, finalize_queue, priority)
    except GpuError as exc:  # the device's fault, not the input's: another device retries
        result = message = None
        device_fault = exc
    except CuzkError as exc:
        result = message = None
        _fail(ctx, job_id, idx, attempt, exc, token=token)
    except Exception as exc:
        result = message = None
        log.exception("prove_start %s/%s crashed", job_id, idx)
        _fail(ctx, job_id, idx, attempt, _internal_error(exc), token=token)
    finally:
        # compare-and-delete on OUR token: never clears a worker that moved on; queues
        # finalize in the same step when the partition advances
        if device_fault is None:
            end = store.gpu_end(wid, token, job_id, idx, attempt, _ms_since(t0),
                                message=ctx.outbox(message))
    if device_fault is not None:
        return _reroute_after_device_fault(ctx, device_fault, token, job_id, idx, attempt, circuit,
                                           witness_ref, priority)
    if result is not None and not end.partition_advanced:
        log.info("prove_start %s/%s attempt %s: partition did not advance (re-dispatched or "
                 "cancelled meanwhile); not finalizing", job_id, idx, attempt)
    returned = _after_gpu_end(ctx, end, message, result)
    if result is not None:
        publish_device_memory(store, wid, ctx.settings.heartbeat_ttl_s, ctx.backend)
    return returned


def _reroute_after_device_fault(ctx, exc, token, job_id, idx, attempt, circuit, witness_ref,
                                priority):
    """gpu_fault: clear this worker (compare-and-delete) and move the partition to another
    live device with its next attempt, or fail it after max faults / with no other device."""
    from .routing import prove_start_message

    if priority is None:
        priority = ctx.settings.default_priority
    retry = prove_start_message(ctx, job_id, idx, attempt + 1, circuit, witness_ref, int(priority))
    fault = ctx.store.gpu_fault(ctx.worker_id, token, job_id, idx, attempt, str(exc), circuit,
                                ctx.settings.max_deliveries, message=ctx.outbox(retry))
    log.warning("prove_start %s/%s attempt %s: device error on %s (%s): %s%s", job_id, idx, attempt,
                ctx.worker_id, exc, fault.outcome,
                f" to {fault.worker}" if fault.outcome == "rerouted" else "")
    if fault.outcome == "rerouted":
        ctx.publish_after(retry, fault.queue)
    return None


def _reroute_after_wrong_proof(ctx, exc, started):
    """A proof from a GPU's partial failed self-verification: a device fault until a second,
    independent device agrees (gpu_fault from finalizing; see docs/architecture.md, "Device
    faults")."""
    from .routing import prove_start_message

    job_id, idx, attempt = started["job"], int(started["idx"]), int(started["attempt"])
    priority = started.get("priority")
    priority = ctx.settings.default_priority if priority is None else int(priority)
    retry = prove_start_message(ctx, job_id, idx, attempt + 1, started["circuit"],
                                started["witness_ref"], priority)
    fault = ctx.store.gpu_fault(started["worker"], started.get("token"), job_id, idx, attempt,
                                str(exc), started["circuit"], ctx.settings.max_deliveries,
                                message=ctx.outbox(retry), in_state="finalizing")
    log.warning("finalize %s/%s attempt %s: the proof from %s's partial failed self-verification:"
                " %s%s", job_id, idx, attempt, started["worker"], fault.outcome,
                f" to {fault.worker}" if fault.outcome == "rerouted" else "")
    if fault.outcome == "rerouted":
        ctx.publish_after(retry, fault.queue)


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


# --- finalize (cpu queue) -------------------------------------------------------------

def finalize(ctx: Context, started):
    from .groth16.prover import PartialProof, prove_finish
    from .groth16.wtns import read_wtns
    from .state import PartitionState

    if not started:
        return None
    store = ctx.store
    job_id, idx, attempt = started["job"], int(started["idx"]), int(started["attempt"])
    # a cheap look first (finalize_end is the guard): a cancelled or re-dispatched
    # partition does not get its CPU tail run
    state, part_attempt = store.partition_fields(job_id, idx, "state", "attempt")
    if state != PartitionState.FINALIZING.value or part_attempt != attempt:
        log.info("finalize %s/%s attempt %s: partition is %s (attempt %s), skipping", job_id, idx,
                 attempt, state, part_attempt)
        return None
    t0 = time.perf_counter()
    if started.get("bench"):
        bench = bench_instrument()
        _bench_finalize(ctx, started, t0, bench[1] if bench else 0.0)
        return None
    try:
        path = ref_path(ctx, "witness_ref", started["witness_ref"])
        zkey = ctx.resident.get(started["circuit"])
        witness = read_wtns(path, expected_length=zkey.n_vars)
        try:
            proof, public = prove_finish(PartialProof.from_json(started["partial"]), zkey, witness)
        finally:
            witness.close()
    except SelfVerificationError as exc:
        if started.get("backend") == "gpu":  # the device may be at fault: prove again elsewhere
            _reroute_after_wrong_proof(ctx, exc, started)
        else:  # the CPU core is the reference: the witness is bad
            _fail(ctx, job_id, idx, attempt, exc, token=started.get("token"))
        return None
    except CuzkError as exc:
        _fail(ctx, job_id, idx, attempt, exc, token=started.get("token"))
        return None
    except Exception as exc:
        log.exception("finalize %s/%s crashed", job_id, idx)
        _fail(ctx, job_id, idx, attempt, _internal_error(exc), token=started.get("token"))
        return None
    if ctx.settings.finalize_delay_ms:
        # TEST/BENCH ONLY: hold the finalizer so it overlaps the device's next prove_start
        time.sleep(ctx.settings.finalize_delay_ms / 1000.0)
    # compare-and-delete with the token of the run that made this partial: if the device has
    # moved on to another partition (another token), it stays busy
    end = store.finalize_end(job_id, idx, attempt, _ms_since(t0), json.dumps(proof),
                             json.dumps(public), token=started.get("token"))
    if not end.ok:
        log.info("finalize %s/%s attempt %s: finalize_end rejected", job_id, idx, attempt)
        return None
    _remove_spooled(ctx, job_id, idx, path)
    if end.job_complete:
        # finalize_end stored the result (and sent on_done) in its own step
        if ctx.settings.results_dir:
            _write_result_file(ctx.settings.results_dir, job_id,
                               store.get_result(job_id) or store.collect_result(job_id))
        _remove_spool_dir(ctx, job_id)
        log.info("job %s done", job_id)
    return {"job": job_id, "idx": idx, "job_complete": bool(end.job_complete)}


def _spooled_witness(ctx, job_id, idx):
    """Where synthesize writes partition ``idx``'s witness."""
    return os.path.join(ctx.settings.spool_dir, job_id, f"{idx}.wtns")


def _remove_spooled(ctx, job_id, idx, path):
    """Delete the witness at real path ``path`` if it is the one synthesize wrote for this
    partition; never a file a submitter named (even one inside the spool dir)."""
    if path != os.path.realpath(_spooled_witness(ctx, job_id, idx)):
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


def _write_result_file(results_dir, job_id, result):
    os.makedirs(results_dir, exist_ok=True)
    path = os.path.join(results_dir, f"{job_id}.json")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


# --- by-name reads (cuzk.status, cuzk.result) ------------------------------------------

def job_status(ctx: Context, job_id) -> dict:
    """The job and its partitions' states (no inputs or proofs); for an unknown job
    ``{"job_id", "state": "unknown", "error"}``."""
    status = ctx.store.job_status(job_id)
    if status is None:
        return {"job_id": job_id, "state": "unknown", "error": f"no such job {job_id!r}"}
    return {"job_id": job_id, **status}


def job_result(ctx: Context, job_id) -> dict:
    """Always ``{"job_id", "state", ...}``: done -> the stored result (with ``proofs``, as
    the on_done callback carries them); failed/cancelled -> ``error``; pending/running ->
    ``n_done``, ``n_partitions`` (no ``proofs`` yet); unknown -> ``error``."""
    job = ctx.store.get_job(job_id)
    if job is None:
        return {"job_id": job_id, "state": "unknown", "error": f"no such job {job_id!r}"}
    state = job.get("state")
    if state == "done":
        # past the result TTL the partitions still hold the proofs
        return ctx.store.get_result(job_id) or ctx.store.collect_result(job_id)
    if state in ("failed", "cancelled"):
        return {"job_id": job_id, "state": state, "error": job.get("error") or ""}
    return {"job_id": job_id, "state": state, "n_done": job.get("n_done") or 0,
            "n_partitions": job.get("n_partitions")}
