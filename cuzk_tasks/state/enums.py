"""States of jobs, partitions and workers, as stored in Redis.

Each enum is a ``str`` subclass whose values are exactly the strings the Lua
scripts write, so ``PartitionState.PROVING == "proving"`` holds and a value read from
Redis compares equal to its member.
"""

import enum


class JobState(str, enum.Enum):
    CREATING = "creating"
    """A job of more than ``STATE_CHUNK`` partitions while its partitions are written (in
    steps): no read API returns it and no index lists it (docs/architecture.md)."""
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)

    def __str__(self):
        return self.value


class PartitionState(str, enum.Enum):
    PENDING = "pending"
    SYNTHESIZING = "synthesizing"
    SYNTH_DONE = "synth_done"
    PROVING = "proving"
    FINALIZING = "finalizing"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (PartitionState.DONE, PartitionState.FAILED, PartitionState.CANCELLED)

    def __str__(self):
        return self.value


class WorkerState(str, enum.Enum):
    IDLE = "idle"
    PROVING = "proving"
    OFFLINE = "offline"
    """Never stored: reported by the read API when the heartbeat key has expired."""

    def __str__(self):
        return self.value


class WorkerRole(str, enum.Enum):
    DEVICE = "device"
    CPU = "cpu"

    def __str__(self):
        return self.value
