"""Service settings: environment variables and/or a TOML file.

``load_settings()`` reads the TOML file named by ``CUZK_CONFIG`` (or the
``path`` argument), then applies ``CUZK_*`` environment variables on top.
Every default and its unit lives in :mod:`cuzk_tasks.settings.defaults`.

TOML layout::

    redis_url = "redis://localhost:6379/0"
    prefix = "cuzk"
    heartbeat_ttl_s = 15
    allowed_input_roots = ["/srv/inputs"]   # where input_ref / witness_ref may point

    [circuits.porep]
    kind = "porep-c2"
    zkey = "/srv/params/porep.zkey"
    wasm = "/srv/params/porep.wasm"
    witness = "native:/srv/params/porep_cpp/porep"   # optional: circom's C++ witness generator
    priority = 5
    deadline_s = 1800      # optional: a job fails "deadline exceeded" this long after submit

Relative paths (circuits, allowed_input_roots) are resolved against the TOML file's directory.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import socket
import tomllib
from dataclasses import dataclass, field

from ..errors import ConfigError, CuzkError
from ..groth16.native_witness import NATIVE_PREFIX
from ..service.queues import check_queue_name
from . import defaults
from .redis_url import SCHEMES, is_sentinel, redact, sentinel_nodes


@dataclass(frozen=True)
class CircuitSpec:
    """One entry of the circuit registry."""

    name: str
    zkey: str
    wasm: str | None = None
    #: ``native:<path>``: circom's C++ witness generator (docs/native-witness.md), used
    #: instead of the wasm; None = the wasm
    witness: str | None = None
    kind: str = ""
    priority: int = defaults.DEFAULT_PRIORITY
    #: seconds from submit after which a job of this circuit fails (None = no deadline)
    deadline_s: float | None = None

    def __post_init__(self):
        if not self.kind:
            object.__setattr__(self, "kind", self.name)

    @property
    def witness_generator(self) -> str | None:
        """The spec of the witness generator the synthesize stage runs: ``witness`` when
        configured, else the wasm path (None: partitions must give a witness_ref)."""
        return self.witness or self.wasm


def stage_queue_of(cpu_queue: str) -> str:
    """The shared CPU stage queue of a deployment whose request queue is ``cpu_queue``:
    ``<cpu_queue>-stages``, which no host queue (``<cpu_queue>.<host>``) can be."""
    return f"{cpu_queue}-stages"


@dataclass(frozen=True)
class Settings:
    redis_url: str = defaults.REDIS_URL
    broker_url: str = ""
    result_backend: str = ""
    state_url: str = ""
    prefix: str = defaults.PREFIX
    hostname: str = ""
    host_slot: str = defaults.HOST_SLOT
    worker_retire_s: float = defaults.WORKER_RETIRE_S
    consumer_stall_s: float = defaults.CONSUMER_STALL_S
    redis_outage_s: float = defaults.REDIS_OUTAGE_S
    sentinel_master: str = defaults.SENTINEL_MASTER
    cpu_queue: str = defaults.CPU_QUEUE
    shared_spool: bool = defaults.SHARED_SPOOL
    device_queue_pattern: str = defaults.DEVICE_QUEUE_PATTERN
    soft_time_limit_s: float = defaults.SOFT_TIME_LIMIT_S
    time_limit_s: float = defaults.TIME_LIMIT_S
    witness_time_limit_s: float = defaults.WITNESS_TIME_LIMIT_S
    visibility_timeout_s: float = defaults.VISIBILITY_TIMEOUT_S
    heartbeat_interval_s: float = defaults.HEARTBEAT_INTERVAL_S
    heartbeat_ttl_s: float = defaults.HEARTBEAT_TTL_S
    max_deliveries: int = defaults.MAX_DELIVERIES
    result_ttl_s: int = defaults.RESULT_TTL_S
    job_retention_s: int = defaults.JOB_RETENTION_S
    on_done_ttl_s: float = defaults.ON_DONE_TTL_S
    results_dir: str | None = defaults.RESULTS_DIR
    spool_dir: str = defaults.SPOOL_DIR
    stage_key_file: str = defaults.STAGE_KEY_FILE
    #: directories (besides spool_dir) that submitted input_ref / witness_ref paths may name
    allowed_input_roots: tuple = defaults.ALLOWED_INPUT_ROOTS
    max_inline_input_bytes: int = defaults.MAX_INLINE_INPUT_BYTES
    max_partitions_per_job: int = defaults.MAX_PARTITIONS_PER_JOB
    max_inline_bytes_per_job: int = defaults.MAX_INLINE_BYTES_PER_JOB
    job_window: int = defaults.JOB_WINDOW
    zkey_budget_mb: float = defaults.ZKEY_BUDGET_MB
    cpu_concurrency: int | None = defaults.CPU_CONCURRENCY
    max_memory_per_child_mb: float = defaults.MAX_MEMORY_PER_CHILD_MB
    default_priority: int = defaults.DEFAULT_PRIORITY
    #: TEST/BENCH ONLY: sleep in finalize before storing (see defaults.FINALIZE_DELAY_MS).
    prover: str = defaults.PROVER
    circuits: dict = field(default_factory=dict)
    source: str = "<defaults>"

    def __post_init__(self):
        fill = {"broker_url": self.redis_url, "result_backend": self.redis_url,
                "state_url": self.redis_url, "hostname": socket.gethostname()}
        for name, value in fill.items():
            if not getattr(self, name):
                object.__setattr__(self, name, value)
        if isinstance(self.allowed_input_roots, (str, os.PathLike)):
            object.__setattr__(self, "allowed_input_roots", (self.allowed_input_roots,))
        object.__setattr__(self, "allowed_input_roots",
                           tuple(os.fspath(r) for r in self.allowed_input_roots))
        self.validate()

    # --- derived -----------------------------------------------------------
    @property
    def broker_is_state_redis(self) -> bool:
        """True when the broker and the state store are the same Redis database (the same
        URL; the default, both from ``redis_url``): then the queues' depths are read with the
        state store's own client."""
        return self.broker_url == self.state_url

    @property
    def host_affine(self) -> bool:
        """True unless the hosts share one spool (``shared_spool``): a partition's stages run
        on its device's host (defaults.SHARED_SPOOL)."""
        return not self.shared_spool

    @property
    def stage_queue(self) -> str:
        """The CPU stage queue every CPU worker reads (:func:`stage_queue_of`): synthesize
        and finalize with a shared spool, for any host's CPU worker.  Host-affine stages go to
        their host's queue (:meth:`host_cpu_queue`); ``cpu_queue`` itself carries only the
        by-name requests (cuzk_tasks/service/request_lane.py)."""
        return stage_queue_of(self.cpu_queue)

    def host_cpu_queue(self, host=None) -> str:
        """The CPU queue of one host (``<cpu_queue>.<host>``): the synthesize and finalize of
        the partitions placed on that host's devices (host-affine stages)."""
        return f"{self.cpu_queue}.{host or self.hostname}"

    def device_queue(self, device, host=None) -> str:
        return self.device_queue_pattern.format(host=host or self.hostname, device=device)

    def device_worker_id(self, device, host=None) -> str:
        return f"{host or self.hostname}:dev{device}"

    def cpu_worker_id(self, pid=None, host=None) -> str:
        return f"{host or self.hostname}:cpu:{pid or os.getpid()}"

    def priority(self, priority) -> int:
        """``priority`` as an int, ``default_priority`` when it is None (0 is a priority, the
        first served, not "unset")."""
        return self.default_priority if priority is None else int(priority)

    @property
    def witness_limit_s(self) -> float:
        """The time limit synthesize gives one witness generation: ``witness_time_limit_s``,
        at most 90 % of ``soft_time_limit_s`` -- Celery's soft limit cannot interrupt a wasm
        call, so the witness limit has to fire first (defaults.WITNESS_TIME_LIMIT_S)."""
        return min(float(self.witness_time_limit_s), 0.9 * float(self.soft_time_limit_s))

    def inline_input_error(self, idx, text) -> str | None:
        """Why partition ``idx``'s inline input.json is refused (over
        ``max_inline_input_bytes``), or None when it fits.  The text names no partition: the
        job's error adds ``partition <idx>:`` to its partition's."""
        size = len(text.encode("utf-8"))
        if size <= self.max_inline_input_bytes:
            return None
        return (f"input is {size} bytes, over the inline limit of "
                f"{self.max_inline_input_bytes} bytes (max_inline_input_bytes); pass it by "
                "reference (input_ref) instead")

    def circuit(self, name) -> CircuitSpec:
        spec = self.circuits.get(name)
        if spec is None:
            known = ", ".join(sorted(self.circuits)) or "none configured"
            raise CuzkError(f"unknown circuit {name!r} (known circuits: {known})")
        return spec

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)

    # --- checks ------------------------------------------------------------
    def validate(self):
        where = self.source

        def bad(field_name, problem):
            raise ConfigError(f"{where}: {field_name}: {problem}")

        for name in ("soft_time_limit_s", "time_limit_s", "witness_time_limit_s",
                     "visibility_timeout_s",
                     "heartbeat_interval_s", "heartbeat_ttl_s", "max_inline_input_bytes",
                     "max_partitions_per_job", "max_inline_bytes_per_job", "job_window",
                     "zkey_budget_mb", "max_deliveries", "result_ttl_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                bad(name, f"must be a positive number, got {value!r}")
        if self.soft_time_limit_s > self.time_limit_s:
            bad("soft_time_limit_s", f"{self.soft_time_limit_s} s exceeds time_limit_s "
                f"{self.time_limit_s} s")
        if self.time_limit_s >= self.visibility_timeout_s:
            bad("time_limit_s", f"hard time limit {self.time_limit_s} s must be below "
                f"visibility_timeout_s {self.visibility_timeout_s} s, or Redis redelivers a "
                "task that is still running")
        if self.heartbeat_ttl_s <= self.heartbeat_interval_s:
            bad("heartbeat_ttl_s", f"{self.heartbeat_ttl_s} s must exceed heartbeat_interval_s "
                f"{self.heartbeat_interval_s} s")
        if isinstance(self.redis_outage_s, bool) or self.redis_outage_s < 0:
            bad("redis_outage_s", f"must be >= 0 seconds (0 = no retry), got {self.redis_outage_s!r}")
        if isinstance(self.on_done_ttl_s, bool) or self.on_done_ttl_s < 0:
            bad("on_done_ttl_s", f"must be >= 0 seconds (0 = never), got {self.on_done_ttl_s!r}")
        if isinstance(self.consumer_stall_s, bool) or not 0 <= self.consumer_stall_s < math.inf:
            bad("consumer_stall_s", f"must be >= 0 seconds (0 = never), got {self.consumer_stall_s!r}")
        if isinstance(self.worker_retire_s, bool) or self.worker_retire_s < 0:
            bad("worker_retire_s", f"must be >= 0 seconds (0 = never), got {self.worker_retire_s!r}")
        if self.host_slot and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", self.host_slot):
            bad("host_slot", "expected a host-name group of letters, digits, '.', '_' or '-' "
                f"(at most 63), got {self.host_slot!r}")
        if self.prover != "groth16" and not re.fullmatch(r"[\w.]+:\w+", self.prover):
            bad("prover", f"expected 'groth16' or 'module:Class', got {self.prover!r}")
        for root in self.allowed_input_roots:
            if not root or not os.path.isabs(root):
                bad("allowed_input_roots", f"expected absolute directory paths, got {root!r}")
        if self.job_retention_s < 0 or 0 < self.job_retention_s < self.result_ttl_s:
            bad("job_retention_s", f"{self.job_retention_s} s must be 0 (keep for ever) or at "
                f"least result_ttl_s ({self.result_ttl_s} s): a stored result must not outlive "
                "its job")
        if isinstance(self.max_memory_per_child_mb, bool) or self.max_memory_per_child_mb < 0:
            bad("max_memory_per_child_mb", f"must be >= 0 MiB (0 = never), got "
                f"{self.max_memory_per_child_mb!r}")
        if self.cpu_concurrency is not None and self.cpu_concurrency <= 0:
            bad("cpu_concurrency", "must be a positive integer")
        if not 0 <= self.default_priority <= 9:
            bad("default_priority", "must be 0..9")
        try:
            check_queue_name(self.cpu_queue)
        except Exception as exc:
            bad("cpu_queue", str(exc))
        try:
            check_queue_name(self.host_cpu_queue())
        except Exception as exc:
            bad("hostname", f"names the host's queue {self.host_cpu_queue()!r}: {exc}")
        for name in ("{host}", "{device}"):
            if name not in self.device_queue_pattern:
                bad("device_queue_pattern", f"must contain {name}, got {self.device_queue_pattern!r}")
        for key in ("redis_url", "broker_url", "result_backend", "state_url"):
            url = str(getattr(self, key))
            if not url.startswith(SCHEMES):
                bad(key, f"expected a redis:// (or sentinel://) URL, got {redact(url)!r}")
            if is_sentinel(url):
                sentinel_nodes(url)  # a ConfigError when malformed
                if not self.sentinel_master:
                    bad("sentinel_master", f"{key} is a sentinel:// URL: name the Sentinel "
                        "group's master (CUZK_SENTINEL_MASTER)")


# (settings field, env var, TOML key, type)
_FIELDS = [
    ("redis_url", "CUZK_REDIS_URL", "redis_url", str),
    ("broker_url", "CUZK_BROKER_URL", "broker_url", str),
    ("result_backend", "CUZK_RESULT_BACKEND", "result_backend", str),
    ("state_url", "CUZK_STATE_URL", "state_url", str),
    ("prefix", "CUZK_PREFIX", "prefix", str),
    ("hostname", "CUZK_HOSTNAME", "hostname", str),
    ("host_slot", "CUZK_HOST_SLOT", "host_slot", str),
    ("worker_retire_s", "CUZK_WORKER_RETIRE_S", "worker_retire_s", float),
    ("consumer_stall_s", "CUZK_CONSUMER_STALL_S", "consumer_stall_s", float),
    ("redis_outage_s", "CUZK_REDIS_OUTAGE_S", "redis_outage_s", float),
    ("sentinel_master", "CUZK_SENTINEL_MASTER", "sentinel_master", str),
    ("cpu_queue", "CUZK_CPU_QUEUE", "cpu_queue", str),
    ("shared_spool", "CUZK_SHARED_SPOOL", "shared_spool", bool),
    ("device_queue_pattern", "CUZK_DEVICE_QUEUE_PATTERN", "device_queue_pattern", str),
    ("soft_time_limit_s", "CUZK_SOFT_TIME_LIMIT_S", "soft_time_limit_s", float),
    ("time_limit_s", "CUZK_TIME_LIMIT_S", "time_limit_s", float),
    ("witness_time_limit_s", "CUZK_WITNESS_TIME_LIMIT_S", "witness_time_limit_s", float),
    ("visibility_timeout_s", "CUZK_VISIBILITY_TIMEOUT_S", "visibility_timeout_s", float),
    ("heartbeat_interval_s", "CUZK_HEARTBEAT_INTERVAL_S", "heartbeat_interval_s", float),
    ("heartbeat_ttl_s", "CUZK_HEARTBEAT_TTL_S", "heartbeat_ttl_s", float),
    ("max_deliveries", "CUZK_MAX_DELIVERIES", "max_deliveries", int),
    ("result_ttl_s", "CUZK_RESULT_TTL_S", "result_ttl_s", int),
    ("job_retention_s", "CUZK_JOB_RETENTION_S", "job_retention_s", int),
    ("on_done_ttl_s", "CUZK_ON_DONE_TTL_S", "on_done_ttl_s", float),
    ("results_dir", "CUZK_RESULTS_DIR", "results_dir", str),
    ("spool_dir", "CUZK_SPOOL_DIR", "spool_dir", str),
    ("stage_key_file", "CUZK_STAGE_KEY_FILE", "stage_key_file", str),
    ("allowed_input_roots", "CUZK_ALLOWED_INPUT_ROOTS", "allowed_input_roots", tuple),
    ("max_inline_input_bytes", "CUZK_MAX_INLINE_INPUT_BYTES", "max_inline_input_bytes", int),
    ("max_partitions_per_job", "CUZK_MAX_PARTITIONS_PER_JOB", "max_partitions_per_job", int),
    ("max_inline_bytes_per_job", "CUZK_MAX_INLINE_BYTES_PER_JOB", "max_inline_bytes_per_job", int),
    ("job_window", "CUZK_JOB_WINDOW", "job_window", int),
    ("zkey_budget_mb", "CUZK_ZKEY_BUDGET_MB", "zkey_budget_mb", float),
    ("cpu_concurrency", "CUZK_CPU_CONCURRENCY", "cpu_concurrency", int),
    ("max_memory_per_child_mb", "CUZK_MAX_MEMORY_PER_CHILD_MB", "max_memory_per_child_mb", float),
    ("default_priority", "CUZK_DEFAULT_PRIORITY", "default_priority", int),
    ("prover", "CUZK_PROVER", "prover", str),
]
_TOML_KEYS = {toml_key for _, _, toml_key, _ in _FIELDS} | {"circuits"}


def _convert(value, typ, where, key):
    if typ is tuple:  # a list of directories: a TOML array, or "a:b" / "a,b" in the environment
        if isinstance(value, str):
            return tuple(p.strip() for p in value.replace(",", os.pathsep).split(os.pathsep)
                         if p.strip())
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
            raise ConfigError(f"{where}: {key}: expected a list of directory paths, got {value!r}")
        return tuple(value)
    if typ is bool:  # a TOML boolean, or 1/0, true/false, yes/no in the environment
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{where}: {key}: expected true or false (1 or 0), got {value!r}")
    if typ is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key}: expected a string, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ConfigError(f"{where}: {key}: expected a number, got {value!r}")
    try:
        if typ is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value) if not isinstance(value, str) else int(value.strip())
        return float(value)
    except (TypeError, ValueError):
        kind = "an integer" if typ is int else "a number"
        raise ConfigError(f"{where}: {key}: expected {kind}, got {value!r}") from None


def _circuits(table, path, base):
    where = path
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: circuits: expected a table of [circuits.NAME] tables")
    out = {}
    for name, entry in table.items():
        field_name = f"circuits.{name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: {field_name}: expected a table")
        unknown = set(entry) - {"kind", "zkey", "wasm", "witness", "priority", "deadline_s"}
        if unknown:
            raise ConfigError(f"{where}: {field_name}: unknown keys {sorted(unknown)} "
                              "(expected kind, zkey, wasm, witness, priority, deadline_s)")
        zkey = entry.get("zkey")
        if not isinstance(zkey, str) or not zkey:
            raise ConfigError(f"{where}: {field_name}.zkey: required (path to the .zkey)")
        wasm = entry.get("wasm")
        if wasm is not None and not isinstance(wasm, str):
            raise ConfigError(f"{where}: {field_name}.wasm: expected a path string")
        witness = entry.get("witness")
        if witness is not None:
            witness = _native_spec(witness, base, f"{where}: {field_name}.witness")
        kind = entry.get("kind", name)
        if not isinstance(kind, str):
            raise ConfigError(f"{where}: {field_name}.kind: expected a string")
        priority = entry.get("priority", defaults.DEFAULT_PRIORITY)
        if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 9:
            raise ConfigError(f"{where}: {field_name}.priority: expected an integer 0..9, "
                              f"got {priority!r}")
        deadline_s = entry.get("deadline_s")
        if deadline_s is not None and (isinstance(deadline_s, bool)
                                       or not isinstance(deadline_s, (int, float))
                                       or not deadline_s > 0):
            raise ConfigError(f"{where}: {field_name}.deadline_s: expected seconds > 0, "
                              f"got {deadline_s!r}")

        out[name] = CircuitSpec(name=name, zkey=_resolve(zkey, base),
                                wasm=_resolve(wasm, base) if wasm else None, witness=witness,
                                kind=kind,
                                priority=priority,
                                deadline_s=float(deadline_s) if deadline_s is not None else None)
    return out


def _native_spec(value, base, where):
    """A ``witness`` entry: ``native:<path>`` with the path resolved as every path of the file
    (:func:`_resolve`); ConfigError naming the field otherwise."""
    if not isinstance(value, str) or not value.startswith(NATIVE_PREFIX) \
            or not value[len(NATIVE_PREFIX):].strip():
        raise ConfigError(f"{where}: expected \"{NATIVE_PREFIX}<path to circom's C++ witness "
                          f"generator>\" (a wasm goes in the wasm key), got {value!r}")
    return NATIVE_PREFIX + _resolve(value[len(NATIVE_PREFIX):], base)


def _resolve(p, base):
    """A path of the TOML file: ``~`` expanded, relative ones against the file's directory."""
    p = os.path.expanduser(p)
    return p if os.path.isabs(p) or base is None else os.path.join(base, p)


def load_settings(path=None, env=None) -> Settings:
    """Settings from the TOML file ``path`` (default ``$CUZK_CONFIG``) and ``CUZK_*`` env vars."""
    env = os.environ if env is None else env
    path = path or env.get("CUZK_CONFIG") or None
    values = {}
    source = "<environment>"
    circuits = {}
    if path:
        path = os.fspath(path)
        source = path
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such config file (CUZK_CONFIG)") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        unknown = set(data) - _TOML_KEYS
        if unknown:
            raise ConfigError(f"{path}: unknown settings {sorted(unknown)}")
        for attr, _env, key, typ in _FIELDS:
            if key in data:
                values[attr] = _convert(data[key], typ, path, key)
        base = os.path.dirname(os.path.abspath(path))
        circuits = _circuits(data.get("circuits", {}), path, base)
        if "stage_key_file" in values:
            values["stage_key_file"] = _resolve(values["stage_key_file"], base)
        if "allowed_input_roots" in values:
            values["allowed_input_roots"] = tuple(_resolve(p, base)
                                                  for p in values["allowed_input_roots"])
    for attr, env_name, _key, typ in _FIELDS:
        raw = env.get(env_name)
        if raw is not None and raw.strip() != "":
            values[attr] = _convert(raw.strip(), typ, f"environment {env_name}", env_name)
            if path:
                source = f"{path} (+ environment)"
    if "results_dir" in values and not values["results_dir"]:
        values["results_dir"] = None
    return Settings(circuits=circuits, source=source, **values)
