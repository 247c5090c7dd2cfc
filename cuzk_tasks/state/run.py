"""One partition's run, as a type: :class:`PartitionRun` (which attempt of which partition,
of which circuit, at which priority) and :class:`DeviceResult` (what the device stage,
prove, hands finalize).

They live in the state package -- beneath the store, the messages and the pipeline, which
all take them -- and import nothing of the service.  On the wire they are plain JSON
objects (Celery's JSON arguments; never pickle): :meth:`PartitionRun.to_json` /
:meth:`DeviceResult.to_json` write them and ``from_json`` reads them back, checking every
field and naming the one that is wrong (:class:`RunError`).  A finalize message is a
DeviceResult's JSON, with the same keys prove has always sent (``job``, ``idx``,
``attempt``, ...).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..errors import StateError
from .keys import attempt_member


class RunError(StateError, ValueError):
    """A partition run or device result that is not well formed: a StateError where the
    store is handed one (as a bad job id or index always was), a ValueError where a message
    is decoded (finalize's contract)."""


def _field(data, name, where):
    if not isinstance(data, dict):
        raise RunError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if name not in data:
        raise RunError(f"{where} without {name}")
    return data[name]


def _int(value, name, where) -> int:
    # ints as JSON gives them; a numeric string too, as the tasks' int(idx) always took
    if isinstance(value, bool):
        raise RunError(f"{where}: {name} must be a non-negative int, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise RunError(f"{where}: {name} must be a non-negative int, got {value!r}") from None
    if number < 0 or (isinstance(value, float) and value != number):
        raise RunError(f"{where}: {name} must be a non-negative int, got {value!r}")
    return number


def _text(value, name, where, blank_ok=False) -> str:
    if not isinstance(value, str) or (not value and not blank_ok):
        raise RunError(f"{where}: {name} must be a{'' if blank_ok else ' non-empty'} string, "
                         f"got {value!r:.100}")
    return value


def _seconds(value, name, where, none_ok=False) -> float | None:
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise RunError(f"{where}: {name} must be a number of seconds"
                         f"{' or null' if none_ok else ''}, got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class PartitionRun:
    """Attempt ``attempt`` of partition ``idx`` of job ``job_id``: what every state
    transition of a partition is guarded by (a message of another attempt is stale), and
    what every stage message names.  ``circuit`` and ``priority`` ride with it in every
    stage message, so no stage reads the job for them; a run the sweeper rebuilds from a
    partition hash (its redispatch, its recovery) leaves them None -- the store's
    transitions key on ``(job_id, idx, attempt)`` alone."""

    job_id: str
    idx: int
    attempt: int = 0
    circuit: str | None = None
    priority: int | None = None

    def __post_init__(self):
        where = "partition run"
        _text(self.job_id, "job", where)  # the store checks the rest (create_job)
        for name in ("idx", "attempt"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise RunError(f"{where}: {name} must be a non-negative int, got {value!r}")
        if self.circuit is not None:
            _text(self.circuit, "circuit", where)
        if self.priority is not None and (isinstance(self.priority, bool)
                                          or not isinstance(self.priority, int)):
            raise RunError(f"{where}: priority must be an int, got {self.priority!r}")

    def next_attempt(self) -> "PartitionRun":
        """The same partition's next attempt (a retry, a recovery, a re-dispatch)."""
        return dataclasses.replace(self, attempt=self.attempt + 1)

    @property
    def member(self) -> str:
        """``job:idx:attempt`` (:func:`~.keys.attempt_member`): the run in a worker's
        ``holding`` list and its run slot."""
        return attempt_member(self.job_id, self.idx, self.attempt)

    def to_json(self) -> dict:
        """``{"job", "idx", "attempt", "circuit", "priority"}`` (the keys of a finalize
        message); a run without its circuit or priority is not sent (ValueError)."""
        if self.circuit is None or self.priority is None:
            raise RunError(f"partition run {self.member}: a message needs its circuit and "
                             f"priority, got {self.circuit!r}, {self.priority!r}")
        return {"job": self.job_id, "idx": self.idx, "attempt": self.attempt,
                "circuit": self.circuit, "priority": self.priority}

    @classmethod
    def from_json(cls, data, where: str = "partition run") -> "PartitionRun":
        """The run of :meth:`to_json`'s object (other keys ignored): every field required,
        a missing or mistyped one a ValueError naming it."""
        job = _text(_field(data, "job", where), "job", where)
        idx = _int(_field(data, "idx", where), "idx", where)
        attempt = _int(_field(data, "attempt", where), "attempt", where)
        circuit = _text(_field(data, "circuit", where), "circuit", where)
        priority = _field(data, "priority", where)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise RunError(f"{where}: priority must be an int, got {priority!r}")
        return cls(job, idx, attempt, circuit, priority)


#: the keys of a run in a message (:meth:`PartitionRun.to_json`)
RUN_FIELDS = ("job", "idx", "attempt", "circuit", "priority")
#: the keys of a finalize message (a DeviceResult's JSON) that it may not lack: its run's
#: and the device's (``prove_ms`` may be absent)
FINALIZE_FIELDS = RUN_FIELDS + ("witness_ref", "worker", "token", "backend", "partial",
                                "deadline_at", "sent_at")


@dataclasses.dataclass(frozen=True)
class DeviceResult:
    """What prove (the device stage) hands finalize, in finalize's message: the run;
    the witness both open (``witness_ref``, a real path); the device worker and the token
    prove_begin gave this run (finalize's compare-and-delete, a device fault's); the compute
    backend that made ``partial`` (the prover's partial proof, JSON-able); ``prove_ms``, how
    long it took (None: not reported); ``deadline_at``, the job's deadline (Unix time, Redis
    clock; None: none); ``sent_at``, when prove sent it (its clock), for finalize's
    look before its CPU tail."""

    run: PartitionRun
    witness_ref: str
    worker: str
    token: str
    backend: str
    partial: Any
    sent_at: float
    deadline_at: float | None = None
    prove_ms: float | None = None

    def __post_init__(self):
        if not isinstance(self.run, PartitionRun) or self.run.circuit is None \
                or self.run.priority is None:
            raise RunError(f"device result: run must be a PartitionRun with its circuit and "
                             f"priority, got {self.run!r}")

    def to_json(self) -> dict:
        """The finalize message's one argument: :data:`FINALIZE_FIELDS` and ``prove_ms``."""
        return {**self.run.to_json(), "witness_ref": self.witness_ref, "worker": self.worker,
                "token": self.token, "backend": self.backend, "partial": self.partial,
                "prove_ms": self.prove_ms, "deadline_at": self.deadline_at, "sent_at": self.sent_at}

    @classmethod
    def from_json(cls, data, where: str = "finalize message") -> "DeviceResult":
        """The result of :meth:`to_json`'s object.  A message that lacks a field (``prove_ms``
        aside) is a ValueError naming it ("finalize message without sent_at"), never a
        default; so is one of the wrong type."""
        if isinstance(data, dict):
            missing = [n for n in FINALIZE_FIELDS if n not in data]
            if missing:
                raise RunError(f"{where} without {', '.join(missing)} "
                                 "(prove sends every one of them)")
        run = PartitionRun.from_json(data, where)
        return cls(run,
                   witness_ref=_text(data["witness_ref"], "witness_ref", where),
                   worker=_text(data["worker"], "worker", where),
                   token=_text(data["token"], "token", where),
                   backend=_text(data["backend"], "backend", where),
                   partial=data["partial"],
                   sent_at=_seconds(data["sent_at"], "sent_at", where),
                   deadline_at=_seconds(data["deadline_at"], "deadline_at", where, none_ok=True),
                   # LEGACY "gpu_ms": the previous release's name of prove_ms (a finalize
                   # message it queued); may go after one release
                   prove_ms=_seconds(data.get("prove_ms", data.get("gpu_ms")), "prove_ms", where,
                                     none_ok=True))
