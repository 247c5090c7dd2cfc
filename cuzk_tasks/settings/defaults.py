"""Every default setting of cuzk-tasks, with its unit and environment variable.

One place to look up what a knob does and what it is when unset.  Modules read
their defaults from here rather than hard-coding them.
"""

import os

from ..errors import CuzkError

# --- proving library (cuzk_tasks.groth16) ---------------------------------

BACKEND = "auto"
"""Compute backend (env ``CUZK_BACKEND``): ``cpu``, ``gpu`` or ``auto`` (GPU when usable)."""

THREADS = None
"""Native CPU core threads (env ``CUZK_THREADS``, a count); None = all cores (os.cpu_count())."""

SELF_VERIFY = True
"""Check every proof with the pairing equation before returning it (bool).  ~2 ms per BN254
proof on the native pairing (~30-50 ms on the pure-Python one)."""

MSM_WINDOW = None
"""Pippenger window in bits (env ``CUZK_MSM_WINDOW``, 2..22), read by the native core for tuning
only (one window per work unit then); None = window, point ranges and windows per unit chosen
from the MSM size and the thread count."""

GPU_BASES_BUDGET_MB = None
"""Device memory for the zkeys a GPU backend keeps loaded (``GpuBackend.load``: a DeviceZkey's
G1 bases and coefficients), MiB (env ``CUZK_GPU_BASES_BUDGET_MB``); None = 60 % of the
device's total memory.  Idle keys are evicted least recently used first beyond it."""

GPU_SCRATCH_KEEP_MB = 2048
"""Free blocks CuPy's memory pool may keep after an MSM before they are released to the driver,
MiB (env ``CUZK_GPU_SCRATCH_KEEP_MB``)."""

GPU_MSM_WINDOW = None
"""GPU Pippenger window in bits (env ``CUZK_GPU_MSM_WINDOW``, used when 2..20, tuning only); None =
``n.bit_length() - 5`` (floor(log2 n) - 4) clamped to [4, 16] for an MSM of n points."""

WASM_CACHE_DIR = "$XDG_CACHE_HOME/cuzk-tasks/wasm"
"""Directory of compiled circuit wasm modules, shared by every process of a user on the host
(env ``CUZK_WASM_CACHE_DIR``; ``$XDG_CACHE_HOME`` unset or empty: ``~/.cache``; empty or
``off``: no cache, every process compiles).  Compiling a circuit (Cranelift) costs up to
~1.3 s; with the cache a CLI run or a worker loads it in milliseconds (groth16/wasm_cache.py).
Entries are named by the wasm's SHA-256, the wasmtime version and the engine settings; stale
ones are compiled again.  The directory must belong to the user that runs cuzk-tasks and be
writable by nobody else (loading a compiled module runs its machine code): otherwise the cache
is off, with one log line.  Safe to delete at any time; nothing removes old entries."""


def wasm_cache_dir():
    """``$CUZK_WASM_CACHE_DIR`` or WASM_CACHE_DIR expanded; None when the cache is off."""
    value = os.environ.get("CUZK_WASM_CACHE_DIR")
    if value is not None:
        value = value.strip()
        return None if value in ("", "off") else os.path.abspath(os.path.expanduser(value))
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.expanduser("~/.cache")
    # no home directory to expand "~" to: no cache rather than one in the working directory
    return os.path.join(base, "cuzk-tasks", "wasm") if os.path.isabs(base) else None


def env_str(name, default):
    value = os.environ.get(name, "").strip()
    return value if value else default


def env_positive_int(name, default):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise CuzkError(f"environment variable {name} must be a positive integer, got {value!r}")
    return number


def witness_time_limit_s():
    """``$CUZK_WITNESS_TIME_LIMIT_S`` or WITNESS_TIME_LIMIT_S (the library's and the CLI's)."""
    value = os.environ.get("CUZK_WITNESS_TIME_LIMIT_S", "").strip()
    if not value:
        return float(WITNESS_TIME_LIMIT_S)
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise CuzkError("environment variable CUZK_WITNESS_TIME_LIMIT_S must be a positive "
                        f"number of seconds, got {value!r}")
    return seconds


def backend_name():
    return env_str("CUZK_BACKEND", BACKEND).lower()


def thread_count():
    return env_positive_int("CUZK_THREADS", THREADS) or os.cpu_count() or 1


# --- service: Celery + Redis (cuzk_tasks.settings.config) -----------------------------
# Every setting below can be given in the TOML file named by CUZK_CONFIG (key in
# brackets) or by the environment variable named; the environment wins.

CONFIG = None
"""TOML settings file (env ``CUZK_CONFIG``, or ``--config``): the settings below plus the circuit
registry (``[circuits.NAME]`` kind/zkey/wasm/priority); None = environment and defaults only, no
circuits."""

REDIS_URL = "redis://localhost:6379/0"
"""Redis URL (env ``CUZK_REDIS_URL``, toml ``redis_url``); broker, result backend and state default to it."""

BROKER_URL = None
"""Celery broker URL (env ``CUZK_BROKER_URL``, toml ``broker_url``); None = REDIS_URL."""

RESULT_BACKEND = None
"""Celery result backend URL (env ``CUZK_RESULT_BACKEND``, toml ``result_backend``); None = REDIS_URL."""

STATE_URL = None
"""Redis URL of the state store (env ``CUZK_STATE_URL``, toml ``state_url``); None = REDIS_URL."""

PREFIX = "cuzk"
"""Key prefix of the state store (env ``CUZK_PREFIX``, toml ``prefix``)."""

HOSTNAME = None
"""Host name used in device queue names and worker ids (env ``CUZK_HOSTNAME``); None = socket.gethostname()."""

CPU_QUEUE = "cuzk.cpu"
"""Queue of synthesize, finalize and submit (env ``CUZK_CPU_QUEUE``, toml ``cpu_queue``)."""

SHARED_SPOOL = False
"""Whether every host sees one spool (env ``CUZK_SHARED_SPOOL``: 1/0, toml ``shared_spool``).
False (the default): stages are host-affine -- a partition is placed on a device first, and
its synthesize and finalize run on that device's host, on the host's own CPU queue
(``<cpu_queue>.<host>``), so no witness crosses hosts and each host may keep a private
spool.  True: any CPU worker may synthesize or finalize any partition (one spool that every
host mounts), as a single-queue cluster does (docs/architecture.md, "Placement")."""

DEVICE_QUEUE_PATTERN = "cuzk.dev.{host}.{device}"
"""Per-device queue name, host-qualified (env ``CUZK_DEVICE_QUEUE_PATTERN``, toml ``device_queue_pattern``)."""

SOFT_TIME_LIMIT_S = 1800
"""Celery soft time limit per task, seconds (env ``CUZK_SOFT_TIME_LIMIT_S``)."""

TIME_LIMIT_S = 2400
"""Celery hard time limit per task, seconds (env ``CUZK_TIME_LIMIT_S``); must be < VISIBILITY_TIMEOUT_S."""

WITNESS_TIME_LIMIT_S = 1500
"""Longest one witness generation may run, seconds (env ``CUZK_WITNESS_TIME_LIMIT_S``, toml
``witness_time_limit_s``; ``cuzk-tasks witness`` reads the env var too).  Celery's time limits
cannot stop a wasm call -- the soft limit's exception waits for the call to return, the hard
limit kills the process -- so witness.py stops the wasm itself (wasmtime epoch interruption,
checked every 0.1 s) and the partition fails "witness generation exceeded N s" with its worker
alive.  A worker uses at most 90 % of ``soft_time_limit_s`` (``Settings.witness_limit_s``),
so the soft limit never fires inside a wasm call."""

WITNESS_KEEP_INSTANCE_MIB = 512
"""A witness calculator keeps the wasm instance of its last successful calculation for the
next one (snarkjs reuses its instance too; circom's ``init`` resets it) when the instance's
linear memories total at most this many MiB: a fresh instance's memory costs page faults,
about 10 % of a SHA-256 witness.  One instance per circuit and process; a failed calculation's
instance is never reused.  0: a fresh instance every time."""

NATIVE_SERVER_IDLE_S = 600.0
"""Seconds a native witness server (``<binary>.server``, docs/native-witness.md) waits for its
next witness before it exits and gives back its circuit's memory (about the peak RSS of the
generator's one-shot run); the next witness starts a new one."""

NATIVE_SERVER_MAX_WITNESSES = 1000
"""Witnesses one native witness server computes before it is replaced by a fresh one: circom's
runtime leaks a few bytes per input signal and witness (about 16 KiB per SHA-256-2048 witness)."""

VISIBILITY_TIMEOUT_S = 3600
"""Redis broker and result-backend visibility timeout, seconds (env ``CUZK_VISIBILITY_TIMEOUT_S``):
an unacknowledged message is redelivered after this long."""

HEARTBEAT_INTERVAL_S = 5.0
"""Seconds between worker heartbeats and sweeper runs (env ``CUZK_HEARTBEAT_INTERVAL_S``)."""

HEARTBEAT_TTL_S = 15.0
"""Seconds a heartbeat lives; a worker without one is offline (env ``CUZK_HEARTBEAT_TTL_S``)."""

REDIS_OUTAGE_S = 60.0
"""Seconds a state-store transition keeps retrying while Redis is unreachable, restarting,
loading its data set, busy with a script (BUSY), at maxmemory (OOM) or read-only
(``redis_url.is_outage``; env ``CUZK_REDIS_OUTAGE_S``; 0 = no retry), with backoff from 50 ms
to 2 s.  Retrying is safe because every transition checks the state and attempt it expects: a
transition that ran but whose reply was lost is rejected as stale on the retry, and the
next stage's message was already queued by the first run; a BUSY, LOADING, OOM or READONLY
reply means the script did not run, or stopped at its first write before writing anything.
One warning per outage."""

WORKER_STOP_REDIS_S = 2.0
"""Seconds a stopping worker waits for Redis to take its last write (its heartbeat key
deleted, its host slot released): one try, no outage retry, so SIGTERM stops a worker
promptly while Redis is down -- the key then expires by itself within a heartbeat TTL.  Not
configurable."""

SENTINEL_MASTER = ""
"""The master name of the Redis Sentinel group (env ``CUZK_SENTINEL_MASTER``, toml
``sentinel_master``), needed when a Redis URL is ``sentinel://host:port;sentinel://...``
(cuzk_tasks/settings/redis_url.py).  Broker, result backend and state store then follow the master
through a failover."""

CONSUMER_STALL_S = 30.0
"""Seconds a worker's consumer may take nothing while it has room and messages wait in its
queues before the worker leaves (goes offline, exits 75 for its supervisor to restart it):
a broker connection that stopped answering (cuzk_tasks/service/consumer_watch.py; env
``CUZK_CONSUMER_STALL_S``; 0 = never).  Long enough that a reconnect after a Redis restart
never counts."""

CONSUMER_STALL_EXIT_S = 10.0
"""Seconds a worker that left for a stalled consumer waits for its warm shutdown before it
exits hard (its held work is re-driven meanwhile: it is offline)."""

CONSUMER_WATCH_REDIS_S = 5.0
"""Socket timeout, in seconds, of the consumer watch's broker reads: a dead connection
fails a look instead of blocking the watch."""

WORKER_RETIRE_S = 3600.0
"""Seconds a worker may stay offline (no heartbeat) before the sweeper retires it: its
registry entry and hash are deleted, so it leaves the status page, ``/metrics`` and the
alerts (env ``CUZK_WORKER_RETIRE_S``; 0 = never).  A worker with partitions still routed to
it is kept until they are re-dispatched.  Long enough that a crashed device worker's
offline alert fires (2 min) and is seen; a container recreated by an upgrade leaves no
ghost behind for longer than this."""

HOST_SLOT = ""
"""Host-name group for workers without a stable host name of their own (env
``CUZK_HOST_SLOT``; empty = off, the host name is ``hostname``).  A worker started with it
claims the lowest free slot ``<group>-<n>`` (n from 0) and uses that as its host name, so
its worker id and device queue (``<group>-<n>:dev0``, ``cuzk.dev.<group>-<n>.0``) survive a
container's recreation, and replicas get distinct ones.  A slot is held while its worker's
heartbeat lives and released at a clean stop."""

HOST_SLOTS_MAX = 256
"""Slots ``<group>-0`` .. ``<group>-255`` a host-slot group can hand out."""

MAX_DELIVERIES = 3
"""Deliveries of one partition's prove before it is failed as a poison pill (env ``CUZK_MAX_DELIVERIES``)."""

FINALIZE_RECHECK_AFTER_S = 1.0
"""Age, seconds, from which a finalize message is checked against its partition before the
CPU tail runs (a Redis round trip: skipped when the partition was cancelled, re-dispatched
or its job's deadline passed meanwhile).  A younger message -- the usual case, sent by a
prove_end a moment ago -- goes straight to the work, unless its job's deadline is less than
this far off; finalize_end is the guard in either case, so at worst one CPU tail per
partition in flight is spent on a job cancelled within this window.  Ages are read on the
workers' clocks (NTP-synced hosts)."""

RELAY_YIELD_S = 0.003
"""Seconds the CPU worker's outbox relay waits between taking a device's handed-over message
(a finalize, while the device has its next partition routed) and publishing it.  Celery's
publish costs 1-2 ms of CPU; on a host whose devices and CPU workers share cores it would
compete with the device starting that next partition.  A finalize waiting behind a busy
device loses nothing by starting 3 ms later; a lone partition's finalize never takes this
path (the device publishes it itself).  Measured: docs/benchmarks.md, hand-over p50 1.7 ->
1.1-1.2 ms."""

DEVICE_PARENT_NICE = 10
"""Nice value (0-19; higher yields the core sooner) a device worker's main thread takes once
its pool process has forked.  At each hand-over the main thread wakes for the finished
prove's ack, task events and the next reservation -- all of which can wait -- just as the pool
process starts the next partition; at equal weight the scheduler splits a busy host's cores
between them.  Threads the main thread starts afterwards (the heartbeat) inherit it; the pool
process keeps its own (a replacement forked later inherits it and is restored where the OS
allows, service/worker.py).  Measured: docs/benchmarks.md, hand-over p50 1.1 -> 0.6 ms."""

OUTBOX_GRACE_S = 10.0
"""Seconds an outbox entry may wait to be published by the process whose step added it before
the sweeper publishes it instead (that process died, or lost the broker, in between).  Not
configurable: it only bounds how late a message of a crashed process goes out; a message
published twice is a stale no-op for the stage it starts (docs/architecture.md, "The
outbox")."""

RESULT_TTL_S = 86400
"""Seconds a job result is kept in Redis (env ``CUZK_RESULT_TTL_S``)."""

JOB_RETENTION_S = 7 * 86400
"""Seconds a finished job's keys -- job hash, partition hashes (with the proofs), request-id
key -- stay in Redis after the job ends (env ``CUZK_JOB_RETENTION_S``; 0 = for ever).  Never
shorter than ``RESULT_TTL_S``.  Redis then holds about throughput x retention x the bytes
of a finished partition (~2 KB): size ``maxmemory`` from it (ops/redis/README.md)."""

ON_DONE_TTL_S = 86400
"""Seconds an on_done callback waits for a consumer (env ``CUZK_ON_DONE_TTL_S``, toml
``on_done_ttl_s``; 0 = for ever): the message carries a Celery ``expires`` of its send time
plus this, so a consumer that comes later discards it, and the sweeper drops expired ones
from the oldest end of their queue (``StateStore.trim_callbacks``), so callbacks to a queue
no one reads do not pile up in Redis.  Set alike where jobs are submitted."""

RESULTS_DIR = None
"""Directory where each finished job's result JSON is also written (env ``CUZK_RESULTS_DIR``); None = off."""

SPOOL_DIR = "/tmp/cuzk-spool"
"""Directory for witnesses between synthesize and prove (env ``CUZK_SPOOL_DIR``); shared storage
when workers run on several hosts."""

STAGE_KEY_FILE = "~/.config/cuzk-tasks/stage.key"
"""File of the deployment's stage key (env ``CUZK_STAGE_KEY_FILE``, toml ``stage_key_file``): 64
hex digits that seal every stage message (cuzk_tasks/service/seal.py).  A worker that finds no
file makes one (mode 0600).  Every worker of a deployment needs the same key -- on several hosts
or containers, point this at one shared secret file -- and a worker whose key differs from the
live workers' refuses to start.  Keep it out of Redis and out of the input roots: whoever holds
it can forge stage messages."""

STAGE_KEY_BYTES = 32
"""Bytes of a stage key (HMAC-SHA256's own size): a shorter key file is refused."""

SPOOL_FULL_WAIT_S = 15.0
"""Seconds synthesize waits, inside its task, for room when the spool disk is full (ENOSPC or
EDQUOT writing a witness), retrying the write after 1 s, 2 s, 4 s, ...; then it hands the
partition back to the queue (``synth_retry``: pending, attempt + 1, queued at the back, so the
queued finalizes, which free spool space, run first) -- a full disk is an outage, logged
"spool disk full (<dir>)", never a failed job.  Short, so the CPU worker's processes do not
all sit waiting while the finalizes that would free the disk wait for one."""

SPOOL_FORGOTTEN_S = 7 * 86400
"""Seconds, when ``JOB_RETENTION_S`` is 0 (job records kept for ever), that the spool files of
a job the state store does not know -- Redis lost it (back empty) -- are kept after their
directory last changed; then each CPU worker's sweep deletes them (cuzk_tasks/recovery/spool.py).  With
a retention above 0 that retention is the wait instead.  Fixed: no setting."""

ALLOWED_INPUT_ROOTS = ()
"""Directories a job's ``input_ref`` / ``witness_ref`` paths may point into, besides SPOOL_DIR
(always allowed) (env ``CUZK_ALLOWED_INPUT_ROOTS``: absolute directories separated by os.pathsep
``:`` or commas; toml ``allowed_input_roots``: a list, relative entries against the TOML file's
directory); empty = only the spool dir.  Paths are resolved (symlinks, ``..``) before the check and
a path outside fails its partition unopened (cuzk_tasks.paths).  Set it alike on every worker.
A worker opens only regular files there, beneath the root without following a symlink
(``cuzk_tasks.paths.open_input``): a FIFO, device or directory fails its partition at once."""

OPEN_INPUT_TRIES = 3
"""How often a worker resolves a submitted path again when a component of it changed while it
was opened (a directory swapped for a symlink; no setting): after that the partition fails with
"its path kept changing while it was opened"."""

MAX_INLINE_INPUT_BYTES = 1 << 20
"""Largest input.json passed by value, bytes (env ``CUZK_MAX_INLINE_INPUT_BYTES``); larger ones
fail the job (pass an input_ref path instead)."""

MAX_PARTITIONS_PER_JOB = 10000
"""Most partitions one job may have (env ``CUZK_MAX_PARTITIONS_PER_JOB``, toml
``max_partitions_per_job``); a submit with more is refused before anything is written, with an
error naming ``partitions``.  Split bigger work into several jobs.  10,000 keeps a job's
creation, end and status reads a few dozen bounded state-store steps (``STATE_CHUNK``)."""

MAX_INLINE_BYTES_PER_JOB = 16 << 20
"""Most bytes of input.json passed by value in one job, all partitions together (env
``CUZK_MAX_INLINE_BYTES_PER_JOB``, toml ``max_inline_bytes_per_job``); a submit over it is
refused before anything is written, with an error naming ``partitions``.  16 MiB: the inline
inputs stay in Redis until each partition is synthesized, and a by-name submit carries them
in one Celery message (base64, 4/3 larger) that a CPU worker parses whole, so this bounds both
per job (about 16 partitions at ``MAX_INLINE_INPUT_BYTES``, or 10,000 of 1.6 KB); pass bigger
inputs by reference (input_ref)."""

CARRIED_INPUT_BYTES = 4096
"""An inline input of at most this many bytes (its JSON text) also rides in its partition's
first synthesize message (no setting), so the CPU worker computes the witness while
synth_begin is on its way to Redis instead of after its reply: about one Redis round trip
less per partition.  The input in the state store stays the one used: synthesize compares
the two before anything is written.  Only the messages queued at once (``JOB_WINDOW``) carry
it, so a job holds its inputs twice in Redis for at most that many partitions."""

JOB_WINDOW = 32
"""Partitions of one job released to the queues at a time (env ``CUZK_JOB_WINDOW``, toml
``job_window``): a job's first ``JOB_WINDOW`` synthesize messages are queued when it is created,
the rest are held in the state store and released one per finished partition.  So a big job
never has more than this many partitions queued or in flight, and a job submitted after it at
the same priority waits behind at most that many (fair order).  Keep it above the devices'
total pipeline depth (about 2-3 per device) so a lone big job still keeps every device busy."""

MAX_INPUT_DEPTH = 32
"""Deepest nesting of lists and objects in an input passed by value (``{"a": "1"}`` is 1
deep, ``{"a": [["1"]]}`` 3); a deeper one is refused at submit, naming its partition.  Not
configurable: circom inputs nest a few levels, and the bound keeps every by-name message
well inside the recursion limit of the pickling that hands a task to a pool process."""

MAX_REQUEST_BYTES = 64 << 20
"""Largest message body of a task of ours, bytes: a bigger one is refused in the worker's main
process (recorded as a rejected request), never handed to its pool.  Room for a job's inline
inputs (MAX_INLINE_BYTES_PER_JOB) and MAX_PARTITIONS_PER_JOB references; pass large inputs
by reference."""

MAX_REQUEST_ID_CHARS = 256
"""Longest ``request_id`` a submit accepts, characters (it names a Redis key)."""

REQUESTS_REJECTED_KEPT = 100
"""Entries kept in the list of rejected requests ``{p}:rejected``: messages a worker refused
before running them -- by-name ones too deep, too big or with a field of the wrong type, and
stage messages whose seal does not match the stage key."""

REQUEST_THREADS = 4
"""Threads of a CPU worker's request lane (cuzk_tasks/service/request_lane.py), which answers
the by-name requests -- submit, status, result, cancel -- beside the stages.  Each takes
milliseconds."""

STATUS_REFUSED_SHOWN = 10
"""Refused messages (newest first) that ``cuzk-tasks status`` lists."""

ZKEY_BUDGET_MB = 32768
"""Memory budget of resident zkeys per worker process, MiB (env ``CUZK_ZKEY_BUDGET_MB``); least
recently used zkeys are dropped beyond it."""

MAX_MEMORY_PER_CHILD_MB = 8192
"""A second line of defence against a leak: a pool process whose resident memory exceeds
this many MiB after a task is replaced by a fresh one (Celery's
``worker_max_memory_per_child``; env ``CUZK_MAX_MEMORY_PER_CHILD_MB``; 0 = never).  A device
worker's limit adds ``ZKEY_BUDGET_MB``, the zkeys it keeps resident on purpose.  The task
that crossed it completes first; the replacement reloads zkeys (and its CUDA context) on
its first partition."""

CPU_CONCURRENCY = None
"""Processes of a ``worker --cpu`` (env ``CUZK_CPU_CONCURRENCY``); None = os.cpu_count()."""

DEFAULT_PRIORITY = 5
"""Job priority when neither the request nor the circuit gives one: 0 (first) .. 9 (last) (env
``CUZK_DEFAULT_PRIORITY``, toml ``default_priority``)."""

PROVER = "groth16"
"""What computes prove and finalize (env ``CUZK_PROVER``, toml ``prover``): ``groth16``
(the product, cuzk_tasks/pipeline/provers.py) or ``module:Class`` importable in the workers -- how the
tests (``tests/support/instruments.py``: delays, a poison pill) and the pipeline benchmark
(``bench/busywait.py``) swap it.  Set it alike on every worker."""

# --- state store (cuzk_tasks.state) ----------------------------------------
# The store also uses PREFIX, RESULT_TTL_S, JOB_RETENTION_S and MAX_DELIVERIES above.

EVENTS_MAXLEN = 10000
"""Approximate cap (XADD MAXLEN ~) on the events stream ``{p}:events``, in entries."""

FAILURES_KEPT = 100
"""Entries kept in the recent-failures list ``{p}:failures``."""

RECENT_JOBS_KEPT = 1000
"""Finished job ids kept in ``{p}:jobs:recent`` (older ones drop out of the index only)."""

SNAPSHOT_RECENT_JOBS = 20
"""Finished jobs (newest first) that ``StateStore.snapshot()`` reports besides the active ones."""

COMPLETIONS_KEPT_S = 3600
"""Age, in seconds, after which completion timestamps leave ``{p}:completions``."""

THROUGHPUT_WINDOWS_S = (60, 300, 900)
"""Throughput windows reported by ``snapshot()``, in seconds."""

STATE_CHUNK = 500
"""Partitions one Lua step of the state store handles at most, for steps whose work grows
with a job's size: creating a job (its partitions are written in steps of this many, the job
made visible at the end), ending one (its live partitions cancelled and its keys given their
retention TTL afterwards, the reaper) and reading one (``StateStore.job_status`` pages).  Redis
runs nothing else while a script runs: at 500 a step takes a few milliseconds.  Not an
environment setting."""

JOB_STATUS_PAGE = 1000
"""Partitions ``StateStore.job_status`` (``cuzk.status``, ``Client.status``,
``/api/jobs/<id>``) returns per page unless asked otherwise (``offset``/``limit``); a job's
counts by state always cover all of them."""

STATUS_PARTITIONS_PER_JOB = 200
"""Partitions per job the status read (``snapshot``, ``/api/status``) carries: the first this
many of each job; the job's own counters (n_partitions, n_done, n_failed) cover the rest and
``/api/jobs/<id>`` pages through all of them.  Bounds the one status script and its document
at any job size."""

ON_DONE_PROOFS_MAX_BYTES = 64 << 10
"""The most bytes of proofs (the result's ``proofs`` list as JSON) a done job's on_done
callback carries in its kwargs; a job with more gets ``"proofs": null`` and its callback
reads them with ``cuzk.result``.  The callback's body is base64-encoded in the Lua step that
ends the job, at about 1-2 MB/s, while Redis runs nothing else: 64 KiB (about 60 BN254
proofs) keeps that step near 50 ms.  Not an environment setting."""

CREATING_STALE_S = 600.0
"""A job whose chunked creation (over ``STATE_CHUNK`` partitions) started this many seconds ago
and never finished -- its submitter died -- is deleted by the sweeper, in chunks.  Such a job
is invisible meanwhile (no request id maps to it, no index lists it)."""

# --- web status page (cuzk_tasks/web/, ``cuzk-tasks web``) -------------------
# Environment only.  Redis URL and prefix are the service's (CUZK_STATE_URL / CUZK_REDIS_URL,
# CUZK_PREFIX, CUZK_CONFIG).  The page is read-only; it never calls Celery inspect/control.

WEB_BIND = "127.0.0.1:8080"
"""Address gunicorn listens on (env ``CUZK_WEB_BIND``): ``HOST:PORT`` or ``unix:/path``."""

WEB_WORKERS = 2
"""gunicorn worker processes of the status page (env ``CUZK_WEB_WORKERS``)."""

WEB_THREADS = 128
"""Threads per gunicorn worker (env ``CUZK_WEB_THREADS``): each open live stream (SSE) holds one."""

WEB_TIMEOUT_S = 30
"""gunicorn worker timeout, seconds (env ``CUZK_WEB_TIMEOUT_S``); live streams are not limited by it."""

WEB_LOGLEVEL = "info"
"""gunicorn log level (env ``CUZK_WEB_LOGLEVEL``): debug, info, warning, error, critical."""

WEB_FORWARDED_ALLOW_IPS = "127.0.0.1"
"""Proxies whose X-Forwarded-* headers gunicorn trusts (env ``CUZK_WEB_FORWARDED_ALLOW_IPS``):
comma-separated addresses, or ``*``."""

WEB_TOKEN = None
"""Bearer token required by every page but /healthz (env ``CUZK_WEB_TOKEN``); None = no token.
Browsers sign in once at /login (a cookie holds a digest of the token, never the token)."""

WEB_USER = None
"""HTTP basic-auth user (env ``CUZK_WEB_USER``); auth is on when user and password are both set."""

WEB_PASSWORD = None
"""HTTP basic-auth password (env ``CUZK_WEB_PASSWORD``)."""

WEB_METRICS_PUBLIC = False
"""Serve /metrics without auth even when auth is on (env ``CUZK_WEB_METRICS_PUBLIC``, 0/1)."""

WEB_SSE_MIN_INTERVAL_MS = 250
"""Least time between two full status pushes on the live stream, ms (env ``CUZK_WEB_SSE_MIN_INTERVAL_MS``);
transitions themselves are forwarded at once."""

WEB_SSE_REFRESH_S = 2.0
"""A status push at least this often even without transitions (heartbeat ages, expiry, queue depths),
seconds (env ``CUZK_WEB_SSE_REFRESH_S``)."""

WEB_SSE_MAX_STREAM_S = 600
"""A live stream is closed after this many seconds; the browser reconnects (env ``CUZK_WEB_SSE_MAX_STREAM_S``)."""

WEB_SSE_MAX_STREAMS = None
"""Live streams (/api/events) one web process holds at most (env ``CUZK_WEB_SSE_MAX_STREAMS``);
None = half of ``WEB_THREADS``, 0 = no live streams (every page polls).  Each stream holds a
gunicorn thread, so a value must leave at least ``WEB_SPARE_THREADS`` threads for /healthz,
/api/status and the pages (checked at start).  The next stream is answered 429 with
Retry-After and the page falls back to polling.  Per process: the whole service holds at most
``WEB_WORKERS`` times this many."""

WEB_SSE_MAX_STREAMS_PER_CLIENT = 8
"""Live streams one client address holds at most in one web process (env
``CUZK_WEB_SSE_MAX_STREAMS_PER_CLIENT``); the next is answered 429.  Behind a reverse proxy
every client has the proxy's address: raise it there, or let the proxy limit."""

WEB_SSE_RETRY_AFTER_S = 30
"""Retry-After of a live stream refused over a cap, seconds (env ``CUZK_WEB_SSE_RETRY_AFTER_S``);
the page polls meanwhile."""

WEB_SPARE_THREADS = 16
"""Threads of a web process that live streams may never take (not configurable): what
/healthz, /api/status and the pages are served by while every stream slot is in use."""

WEB_CLIENT_TIMEOUT_S = 10.0
"""Seconds a client has to send a whole request head, and a body of up to
``WEB_BUFFERED_BODY_BYTES``, once it started sending it (env ``CUZK_WEB_CLIENT_TIMEOUT_S``).
The web worker (cuzk_tasks/web/worker.py) reads them without blocking and parks an incomplete
request on its poller, closing the connection past this: slow clients (slowloris) hold a
socket, never a thread."""

WEB_BUFFERED_BODY_BYTES = 65536
"""Largest request body (Content-Length) the web worker accepts, bytes (not configurable): it
reads the whole body before the request reaches a thread.  A larger or chunked body closes
the connection unanswered: the page takes bodies only on POST /login (a few hundred bytes)."""

WEB_LOGIN_MAX_FAILURES = 10
"""Failed sign-ins (wrong token or a stale form) one client address may make per
``WEB_LOGIN_WINDOW_S`` before /login answers 429 (env ``CUZK_WEB_LOGIN_MAX_FAILURES``).
Counted in each web process separately (no Redis write: the page is read-only), so the
service allows ``WEB_WORKERS`` times this many."""

WEB_LOGIN_WINDOW_S = 60.0
"""Window of the /login failure limit, seconds (env ``CUZK_WEB_LOGIN_WINDOW_S``)."""

WEB_PUBLISH = None
"""Host address the status page is published on when that is not the host of
``WEB_BIND`` (env ``CUZK_WEB_PUBLISH``): docker compose sets it (default 127.0.0.1) for the
address it publishes the container's port on.  ``cuzk-tasks web`` refuses to start when this
address (else the bind host) is not loopback and neither ``CUZK_WEB_TOKEN`` nor basic auth
is set: the page serves proofs and job data to whoever reaches it."""

WEB_POLL_INTERVAL_MS = 2000
"""Fallback polling interval of the page when the live stream is unavailable, ms (env ``CUZK_WEB_POLL_INTERVAL_MS``)."""

WEB_CACHE_MAX_AGE_MS = 1000
"""A status read is reused while no transition happened and it is younger than this, ms
(env ``CUZK_WEB_CACHE_MAX_AGE_MS``; 0 = always read).  Heartbeat expiry also invalidates it."""

WEB_TIMELINE_WINDOW_S = 300
"""Span of the per-device timeline, seconds (env ``CUZK_WEB_TIMELINE_WINDOW_S``)."""

WEB_REDIS_TIMEOUT_S = 2.0
"""Seconds a status-page read waits for Redis to connect or reply (env
``CUZK_WEB_REDIS_TIMEOUT_S``).  Past it the request is answered 503 "state store unreachable"
at once, instead of holding a gunicorn thread while Redis is down or paused; the page keeps
polling and shows the gap."""
