"""Submit jobs and read their progress and results.

::

    from cuzk_tasks.client import Client
    client = Client("redis://localhost:6379/0")
    job = client.submit("poseidon", [{"input": {"x": "1", "y": "2"}}], request_id="req-1")
    result = client.wait(job, timeout=60)      # {"proofs": [{"proof":..., "public":...}, ...]}

The client writes the job into the state store itself when its settings know
the circuit (``Client()`` with ``$CUZK_CONFIG``, or ``Client(settings=...)``) and its stage
key (``stage_key_file``: it seals the synthesize messages) is the live workers';
otherwise it sends the by-name ``cuzk.submit`` task and a CPU worker (whose
registry is authoritative) creates the job -- or, when no CPU worker is online,
``submit`` fails at once instead of waiting for a reply that cannot come.
"""

from __future__ import annotations

import time

from . import pipeline
from .celery_app import create_app
from .errors import ConfigError, CuzkError, JobError
from .pipeline import request_checks
from .service.seal import check_peers
from .service.task_names import TASK_SUBMIT
from .settings.config import Settings, load_settings
from .state import JobState, OutageRetry, WorkerRole

SUBMIT_REPLY_TIMEOUT_S = 30.0


class Client:
    def __init__(self, redis_url=None, settings: Settings | None = None):
        settings = settings or load_settings()
        if redis_url:
            settings = settings.replace(redis_url=redis_url, broker_url=redis_url,
                                        result_backend=redis_url, state_url=redis_url)
        self.settings = settings
        self.app = create_app(settings)
        self._ctx = pipeline.Context(self.app, settings, worker_id="client")
        self._outage = None  # the OutageRetry of reads (made at the first, see _read)
        self._stage_key = None  # whether the stage key is here (see _holds_stage_key)

    @property
    def store(self):
        return self._ctx.store

    def submit(self, circuit, partitions, priority=None, request_id=None, on_done=None,
               deadline_s=None, details=False):
        """Queue a job of one partition per entry; returns its id (idempotent on request_id)
        -- with ``details``, ``{"job_id", "eta"}``: its estimate (``eta_s``, ``eta_at``,
        ``position``, ``devices``; None before its circuit's first finished partition).

        Each partition is ``{"input": {...}}`` (by value, up to max_inline_input_bytes),
        ``{"input_ref": "/shared/input.json"}`` or ``{"witness_ref": "/shared/w.wtns"}``:
        absolute paths inside the workers' spool dir or allowed_input_roots (any other path
        is refused unopened, see :mod:`cuzk_tasks.paths`).  What cannot succeed -- an
        unknown circuit, one no live device serves, an input over its limit -- raises
        CuzkError here (by name: the worker's refusal), nothing created.
        ``on_done={"task": NAME, "queue": QUEUE}``: Celery task NAME is sent once to QUEUE
        when the job ends, with kwargs ``job_id``, ``state`` and ``proofs`` or ``error``.
        ``deadline_s``: the job fails "deadline exceeded (...)" this many seconds after submit
        (default: the circuit's ``deadline_s`` in the registry, else none); one shorter than
        the job's estimate is refused (DeadlineRefused), nothing created.
        """
        request_checks.check_details(details)
        if circuit in self.settings.circuits and self._holds_stage_key():
            job_id = pipeline.submit_job(self._ctx, circuit, partitions, priority=priority,
                                         request_id=request_id, on_done=on_done,
                                         deadline_s=deadline_s)
            return pipeline.submitted(self._ctx, job_id) if details else job_id
        # the fields a worker checks and the job size limits, here too: a refused job never
        # travels to a worker, and a bad field is this call's error at once
        circuit = request_checks.check_circuit(circuit)
        parts = pipeline.normalize_partitions(partitions, self.settings.max_partitions_per_job,
                                              self.settings.max_inline_bytes_per_job)
        kwargs = {"circuit": circuit, "partitions": parts,
                  "priority": request_checks.check_priority(priority),
                  "request_id": request_checks.check_request_id(request_id)}
        if on_done is not None:
            kwargs["on_done"] = pipeline.check_on_done(on_done, self.settings)
        if deadline_s is not None:
            kwargs["deadline_s"] = pipeline.check_deadline(deadline_s)
        if details:
            kwargs["details"] = True
        self._require_cpu_worker(circuit)
        reply = self.app.send_task(TASK_SUBMIT, kwargs=kwargs, queue=self.settings.cpu_queue)
        try:
            return reply.get(timeout=SUBMIT_REPLY_TIMEOUT_S)
        except CuzkError:
            raise  # the worker's answer (a request id reused for other content, ...)
        except Exception as exc:
            try:
                reply.forget()  # stop listening for it (the backend would hold it for good)
            except Exception:  # noqa: BLE001 - Redis may be what failed; the error below says so
                pass
            raise CuzkError(f"submit of circuit {circuit!r}: no reply from a cpu worker in "
                            f"{SUBMIT_REPLY_TIMEOUT_S:.0f} s ({type(exc).__name__}: {exc})") from None

    def _holds_stage_key(self) -> bool:
        """Whether this client seals stage messages as the workers do, so it may write jobs
        itself: its ``stage_key_file`` (made, as a worker makes it, when missing) is the key
        of every live worker.  Decided once per client; with another key it goes by name."""
        if self._stage_key is None:
            try:  # the key its messages are sealed with (made there when missing)
                check_peers(self._ctx.messages.seal, self._read(self.store.all_workers))
                self._stage_key = True
            except ConfigError:
                self._stage_key = False
        return self._stage_key

    def _require_cpu_worker(self, circuit):
        """Only a CPU worker answers ``cuzk.submit``: without one online, say so now."""
        queue = self.settings.cpu_queue
        if any(w.get("role") == WorkerRole.CPU.value and w.get("online") and w.get("queue") == queue
               for w in self.store.all_workers()):  # a script: the store rides out an outage
            return
        known = ", ".join(sorted(self.settings.circuits)) or "none"
        why = (f"this client's stage key ({self.settings.stage_key_file}) is not the live "
               "workers'"
               if circuit in self.settings.circuits else
               f"this client's settings ({self.settings.source}) have no [circuits.{circuit}] "
               f"entry (known: {known})")
        raise CuzkError(
            f"submit of circuit {circuit!r}: {why}, so a cpu worker must create "
            f"the job, and no cpu worker of queue {queue!r} is online (state store prefix "
            f"{self.settings.prefix!r}): start `cuzk-tasks worker --cpu`, or give the client "
            "the circuit registry (Client() with $CUZK_CONFIG, or "
            "Client(settings=load_settings('cuzk.toml')))")

    def _read(self, fn, *args, **kwargs):
        """A read that rides out a Redis outage (a restart, BUSY, LOADING) for up to
        ``redis_outage_s``, as the store's transitions do."""
        if self._outage is None:
            budget = self.settings.redis_outage_s
            self._outage = OutageRetry(budget, what="client reads") if budget > 0 else False
        return self._outage.call(fn, *args, **kwargs) if self._outage else fn(*args, **kwargs)

    def status(self, job_id, offset=0, limit=None) -> dict:
        """The job and one page of its partitions' states (no inputs or proofs): partitions
        ``offset`` .. ``offset + limit - 1`` (``limit`` None: ``JOB_STATUS_PAGE``), with
        ``page`` and ``counts`` (by state, all partitions); ``StateStore.job_status``."""
        job = self._read(self.store.job_status, job_id, offset=offset, limit=limit)
        if job is None:
            raise CuzkError(f"no such job {job_id!r}")
        return job

    def result(self, job_id):
        """The stored result, or None while the job runs (or after the result TTL)."""
        return self._read(self.store.get_result, job_id)

    def wait(self, job_id, timeout=None, poll_s=0.1, progress=None):
        """Block until the job is done and return its result; JobError on failure or timeout.

        ``progress(job_dict)`` is called on every poll when given.  A Redis outage (a
        restart, a failover) is waited out, with one log line when it starts and one when it
        ends, within ``timeout`` like any other wait.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        outage = OutageRetry(float("inf") if timeout is None else timeout,
                             what=f"the wait for job {job_id}")
        while True:
            job = outage.call(self.store.get_job, job_id)
            if job is None:
                raise JobError(job_id, "unknown", "no such job")
            if progress:
                progress(job)
            state = job.get("state")
            if state == JobState.DONE:
                # stored in the step that made the job done; past its TTL, the partitions
                return (outage.call(self.store.get_result, job_id)
                        or outage.call(self.store.collect_result, job_id))
            elif state in (JobState.FAILED, JobState.CANCELLED):
                raise JobError(job_id, state, job.get("error") or "(no error recorded)")
            if deadline is not None and time.monotonic() > deadline:
                raise JobError(job_id, "timed out",
                               f"still {state} after {timeout} s "
                               f"({job.get('n_done', 0)}/{job.get('n_partitions', '?')} partitions done)")
            time.sleep(poll_s)

    def cancel(self, job_id, reason=pipeline.CANCEL_REASON) -> bool:
        return self.store.cancel_job(job_id, reason)
