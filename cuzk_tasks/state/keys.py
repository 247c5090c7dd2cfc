"""Redis key names of the state store: the ONLY module that builds them.

Every key lives under one prefix (default ``cuzk``).  Each method of :class:`Keys` builds
one key and its docstring says what the key holds: its Redis type first (``hash:``,
``set:``, ``zset:``, ``list:``, ``string``, ``stream:``), then its fields or members --
this is the keyspace's reference (``tests/test_docs_truth.py`` requires it of every method;
docs/architecture.md, "Redis keyspace", is the overview).  The Lua prelude
``scripts/_lib.lua`` mirrors these functions for keys a script discovers while
it runs (a partition's recorded worker, sibling partitions), and
``tests/test_state_store.py::test_lua_key_functions_match_keys_py`` checks the
two agree.
"""

from ..errors import StateError


def member(job_id: str, idx: int) -> str:
    """Set member naming one partition in ``routed``/``unrouted``: ``job:idx``."""
    return f"{job_id}:{int(idx)}"


def parse_member(text: str) -> tuple[str, int]:
    """Inverse of :func:`member` (a job id may itself contain ``:``)."""
    job_id, _, idx = text.rpartition(":")
    return job_id, int(idx)


def attempt_member(job_id: str, idx: int, attempt: int) -> str:
    """One partition attempt in a worker's ``holding`` list (its stage leases): ``job:idx:attempt``."""
    return f"{job_id}:{int(idx)}:{int(attempt)}"


def parse_attempt_member(text: str) -> tuple[str, int, int]:
    """Inverse of :func:`attempt_member`."""
    rest, _, attempt = text.rpartition(":")
    job_id, idx = parse_member(rest)
    return job_id, idx, int(attempt)


class Keys:
    """Key names under ``prefix``; one documented method per key."""

    def __init__(self, prefix: str = "cuzk"):
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise StateError(f"state store prefix must be a non-empty string without spaces, got {prefix!r}")
        self.prefix = prefix

    def job(self, job_id: str) -> str:
        """hash: id, circuit, kind, priority, request_id, state, n_partitions, n_done, n_failed,
        submitted_at, started_at, finished_at, error; curve (the circuit's, recorded once by
        synth_end); with an on_done callback: on_done (JSON
        {"task", "queue"}) and, once sent, on_done_sent_at (or on_done_error: not sent); with a
        deadline: deadline_s, deadline_at; with a request id: request_digest; release_list and
        n_released ('1' when it holds synthesize messages, and how many of them were released
        into the outbox: ``held``); while a big job is
        created: n_written (state ``creating``), discard; while it is reaped: reap_next,
        reap_state, reap_error, reap_except, and while its result is written: completing,
        result_next, result_ttl (``jobs_reaping``)."""
        return f"{self.prefix}:job:{job_id}"

    def part(self, job_id: str, idx: int) -> str:
        """hash: job, idx, state, attempt, deliveries, redispatches, worker (with host-affine
        stages: the device it is placed on, from pending), token (the current run's, from
        prove_begin), input (deleted by synth_end -- the witness replaces it -- except with
        host-affine stages, where it is kept until done), input_ref, witness_ref, timestamps
        t_created, t_synth_start, t_synth_end, t_routed, t_prove_start, t_prove_end,
        t_redispatched, t_done, t_end; synth_ms, prove_ms, finalize_ms, proof, public (JSON
        text), error;
        after a device fault: avoid (comma-separated workers), device_faults, verify_faults,
        last_device_error;
        lost_messages (times the sweeper re-drove a stage no one held, recover_stage.lua);
        synth_deliveries (synthesize deliveries, synth_begin.lua); outage_retries and
        last_outage (synthesize handed back on a full spool disk, synth_retry.lua)."""
        return f"{self.prefix}:part:{job_id}:{int(idx)}"

    def jobs_active(self) -> str:
        """zset: ids of unfinished jobs, scored by submit time."""
        return f"{self.prefix}:jobs:active"

    def jobs_recent(self) -> str:
        """zset: ids of finished jobs, scored by finish time (trimmed to RECENT_JOBS_KEPT)."""
        return f"{self.prefix}:jobs:recent"

    def jobs_deadlines(self) -> str:
        """zset: ids of unfinished jobs with a deadline, scored by it (deadline_at)."""
        return f"{self.prefix}:jobs:deadlines"

    def jobs_creating(self) -> str:
        """zset: ids of the big jobs being created in steps (state ``creating``), scored by
        when their creation began (0: discarded); the sweeper deletes stale ones."""
        return f"{self.prefix}:jobs:creating"

    def jobs_reaping(self) -> str:
        """zset: ids of the ended big jobs whose partitions the reaper has yet to end and
        expire (``reap_jobs.lua``), scored by when they ended."""
        return f"{self.prefix}:jobs:reaping"

    def held(self, job_id: str) -> str:
        """list: the job's synthesize messages not yet released (``JOB_WINDOW``), in
        partition order (outbox entries); one moves into the outbox per finished partition;
        deleted when the job ends."""
        return f"{self.prefix}:held:{job_id}"

    def request(self, request_id: str) -> str:
        """string: the job id created for a client request id (idempotency); expires with
        the job (``job_retention_s`` after its end)."""
        return f"{self.prefix}:request:{request_id}"

    def result(self, job_id: str) -> str:
        """string: a finished job's JSON result (``collect_result``'s form: proofs and public
        signals), with the ``result_ttl_s`` TTL; written by finalize_end in the step that makes
        the job done (for a big job by the reaper, from :meth:`result_building`)."""
        return f"{self.prefix}:result:{job_id}"

    def result_building(self, job_id: str) -> str:
        """string: the result of a job of more than ``STATE_CHUNK`` partitions while the reaper
        writes it (``reap_jobs.lua``), renamed to :meth:`result` in the step that ends the job."""
        return f"{self.prefix}:result_building:{job_id}"

    def workers(self) -> str:
        """set: ids of the registered workers (one offline for longer than ``worker_retire_s``
        with nothing routed to it is removed, with its hash and routed set:
        ``retire_workers.lua``)."""
        return f"{self.prefix}:workers"

    def worker(self, worker_id: str) -> str:
        """hash: state, job, partition, kind, token, since, device, host, role, queue, gpu_name,
        resident (JSON list), registered_at, last_hb, hb_ttl_ms, holding (JSON list of
        ``job:idx:attempt``: the stage messages it holds, its stage leases), holding_at (when
        a beat last reported holding), holding_requests (JSON list of the task ids of the
        by-name requests it holds), holder (``<container host>:<pid>`` of the process that
        claimed the worker id, register_worker.lua), circuits (JSON list: the circuits its
        registry serves), host_queue (a CPU worker with host-affine stages: its host's CPU
        queue, which it consumes), extra heartbeat fields (pid; running: the
        ``job:idx:attempt`` a device's pool process proves now)."""
        return f"{self.prefix}:worker:{worker_id}"

    def hb(self, worker_id: str) -> str:
        """string with TTL: the worker's last heartbeat time; absent = offline.  While it
        lives, the worker id is its holder's (the worker hash's ``holder``): another process
        cannot register under it (register_worker.lua)."""
        return f"{self.prefix}:hb:{worker_id}"

    def host_slot(self, group: str, index: int) -> str:
        """string with TTL: the holder (``<container host>:<pid>``) of host name
        ``<group>-<index>`` (settings.host_slot); refreshed by its worker's heartbeat, deleted
        at its clean stop (worker_offline.lua)."""
        return f"{self.prefix}:slot:{group}:{int(index)}"

    def routed(self, worker_id: str) -> str:
        """set: ``job:idx`` routed to that device worker (with host-affine stages: placed on
        it, from pending) and not yet through prove_end; its size is the device's outstanding
        work, which routing balances."""
        return f"{self.prefix}:routed:{worker_id}"

    def unrouted(self) -> str:
        """set: ``job:idx`` in synth_done (with host-affine stages: in pending) waiting for a
        live device; the sweeper routes them when one appears."""
        return f"{self.prefix}:unrouted"

    def counters(self) -> str:
        """hash: completed:{kind}, failed:{kind}, prove_faults:{kind} (per partition);
        jobs_done|jobs_failed|jobs_cancelled:{kind}; requests_rejected:{task}."""
        return f"{self.prefix}:counters"

    def completions(self) -> str:
        """zset: one ``job:idx:attempt`` per proved partition, scored by completion time
        (throughput windows), kept ``COMPLETIONS_KEPT_S``."""
        return f"{self.prefix}:completions"

    def failures(self) -> str:
        """list: recent partition failures as JSON objects (job, idx, attempt, kind, circuit,
        worker, state, error, at), newest first, capped at FAILURES_KEPT."""
        return f"{self.prefix}:failures"

    def rejected(self) -> str:
        """list: recent requests a worker refused before running them (``reject_request``:
        task, task id, reason, worker, at), JSON objects newest first, capped at
        REQUESTS_REJECTED_KEPT."""
        return f"{self.prefix}:rejected"

    def events(self) -> str:
        """stream: one entry per transition (``type``, ``at``, and job, idx, attempt, worker,
        token ... as it concerns them), XADD MAXLEN ~ EVENTS_MAXLEN; what the status page's
        live updates and ``status_delta`` follow."""
        return f"{self.prefix}:events"

    def on_done(self, job_id: str) -> str:
        """string: the job's on_done outbox entry without its kwargs (JSON, see
        ``cuzk_tasks.service.messages.StageMessages.on_done``), kept from create_job until the job
        ends and deleted in the step that sends it; absent for a job without on_done."""
        return f"{self.prefix}:on_done:{job_id}"

    def on_done_queues(self) -> str:
        """zset: the broker lists on_done callbacks were pushed to, each scored by when the
        newest of them expires (``ON_DONE_TTL_S`` after it was sent); the sweeper's
        ``trim_callbacks`` drops expired callbacks no consumer took from their oldest end."""
        return f"{self.prefix}:on_done_queues"

    def outbox(self) -> str:
        """hash: entry id -> a Celery message to publish (JSON {"task", "queue", "priority",
        "args", "kwargs"[, "expires_s"]}), added by the step that makes it due (_lib.lua
        ``outbox_add``) and deleted once published (``outbox_done.lua``)."""
        return f"{self.prefix}:outbox"

    def outbox_due(self) -> str:
        """zset: the outbox's entry ids, scored by when each was added (or last claimed by the
        sweeper, ``outbox_claim.lua``)."""
        return f"{self.prefix}:outbox:due"

    def sweeper(self) -> str:
        """string with TTL: the worker id of the one CPU worker whose sweeper does the
        cluster-wide checks now (``StateStore.claim_sweep``); renewed by its sweeps, taken
        over by another once it lapses."""
        return f"{self.prefix}:sweeper"

    def estimates(self, circuit: str) -> str:
        """hash: the circuit's stage-time estimates in ms, exponentially weighted means of its
        finished partitions (finalize_end): synth_ms, finalize_ms, prove_ms (any device) and
        prove_ms:<backend> (per device kind); what ETAs and deadline admission use."""
        return f"{self.prefix}:estimates:{circuit}"

    def eta_errors(self) -> str:
        """list: one JSON object per done job that had an ETA (circuit, eta_s, actual_s: from
        submit), newest first, capped at 1000 (_lib.lua ETA_ERRORS_KEPT): /metrics."""
        return f"{self.prefix}:eta_errors"

    def outbox_relay(self) -> str:
        """list: the outbox entries a device's pool process hands on instead of publishing
        them itself, each ``"id time entry"``, pushed by the step that adds them
        (``StateStore.relay``); a CPU worker's relay thread takes them (``take_relayed``) and
        Celery publishes them there."""
        return f"{self.prefix}:outbox:relay"

    def outbox_seq(self) -> str:
        """string: the last outbox entry id (INCR)."""
        return f"{self.prefix}:outbox:seq"

    def phase_histograms(self) -> str:
        """hash: partition phase-duration histograms (``<phase>:<bucket>``, ``<phase>:sum``,
        ``<phase>:count``; phases synth_ms, prove_ms, finalize_ms; buckets ``_lib.lua``
        ``PHASE_BUCKETS_MS`` = ``reads.PHASE_BUCKETS_MS``), counted by the transition
        that completes a partition (``finalize_end``), read by /metrics."""
        return f"{self.prefix}:histograms"
