"""The one exception hierarchy of cuzk-tasks.

Every error the library raises on purpose derives from :class:`CuzkError`, so
callers (the CLI, Celery tasks) can tell "bad input / failed proof" apart from
programming bugs.
"""


class CuzkError(Exception):
    """Base class for every error cuzk-tasks raises deliberately."""


class FormatError(CuzkError):
    """A snarkjs/circom binary or JSON file is malformed.

    The message names the file, the field and what was expected.
    """

    def __init__(self, path, field, problem):
        self.path = str(path) if path is not None else "<buffer>"
        self.field = field
        self.problem = problem
        super().__init__(f"{self.path}: {field}: {problem}")


class WitnessError(CuzkError):
    """Witness generation failed (bad input.json, circuit assertion, ...)."""


class ProofError(CuzkError):
    """A proof could not be produced or failed its self-verification."""


class SelfVerificationError(ProofError):
    """A finished proof failed its own pairing check: the witness does not satisfy the
    circuit, or a compute kernel returned a wrong result.  After a GPU's prove the
    pipeline first suspects the device and proves the partition again on another one."""


class VerificationError(CuzkError):
    """Verification inputs are invalid (not: the proof is merely wrong)."""


class NativeCoreError(CuzkError):
    """The compiled native core is missing or reported a failure (``status``: the C ABI's
    status code, None when the core could not be loaded)."""

    def __init__(self, message, status=None):
        self.status = status
        super().__init__(message)


class ConfigError(CuzkError):
    """The service configuration (TOML file or CUZK_* environment) is invalid.

    The message names the file (or environment variable) and the field.
    """


class IdentityHeldError(ConfigError):
    """A worker refused to start: a live heartbeat of another process holds its worker id
    (host name and device).  ``holder``: that process (``<container host>:<pid>``, None
    when unknown)."""

    def __init__(self, worker_id, holder, message):
        self.worker_id = worker_id
        self.holder = holder
        super().__init__(message)


class DeadlineRefused(CuzkError):
    """A submit whose ``deadline_s`` is shorter than its estimate: refused, nothing created.
    Made by :meth:`of`, whose ``eta_s`` (seconds from submit), ``ahead`` (partitions ahead of
    it) and ``devices`` (live devices serving its circuit) it keeps; one message argument
    otherwise (as Celery rebuilds it for a by-name caller)."""

    eta_s = ahead = devices = None

    @classmethod
    def of(cls, eta_s: float, ahead: int, devices: int, deadline_s: float | None = None):
        need = f"{deadline_s:g} s cannot be met: " if deadline_s is not None else ""
        exc = cls(f"deadline_s: {need}the job would be done in about {eta_s:.1f} s ({ahead} "
                  f"partition(s) ahead of it on {devices} device(s) serving its circuit); "
                  "nothing was created")
        exc.eta_s, exc.ahead, exc.devices = eta_s, ahead, devices
        return exc


class StateError(CuzkError):
    """The Redis state store was misused or misconfigured.

    Raised for bad arguments (an empty job id, an unknown worker role, a Redis
    client without ``decode_responses=True``).  A transition that is merely
    stale or impossible is *not* an error: it returns a rejection and changes
    nothing.
    """


class JobError(CuzkError):
    """A submitted job failed, was cancelled, or did not finish in time (``Client.wait``)."""

    def __init__(self, job_id, state, message):
        self.job_id = job_id
        self.state = state
        super().__init__(f"job {job_id} {state}: {message}")


class GpuError(CuzkError):
    """The GPU backend cannot run: CuPy missing, no CUDA device or driver, a
    kernel failed to compile, the device ran out of memory, or a CUDA call failed.

    The message says which, and what to do (``--backend cpu`` always works).  It is
    the DEVICE's fault, never the input's: the pipeline retries the partition on
    another device (``prove_fault``).  Input problems the GPU backend finds (a witness
    value >= r, a malformed coefficient, a size it cannot take) are :class:`ProofError`.
    """


class WitnessTimeoutError(WitnessError):
    """Witness generation ran past its time limit (``witness_time_limit_s``) and was stopped
    (wasmtime epoch interruption): a runaway circuit, or a limit too short for it."""


class WitnessInterrupted(WitnessError):
    """Witness generation was stopped on request (``WitnessCalculator.interrupt``: Ctrl-C in
    the command line)."""


class SpoolFullError(CuzkError):
    """The spool cannot take a witness -- full, over quota, read-only or not writable
    (ENOSPC, EDQUOT, EROFS, EACCES): an outage, not the input's fault -- the pipeline retries
    the partition later."""
