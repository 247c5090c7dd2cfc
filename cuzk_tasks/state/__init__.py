"""Redis state store of cuzk-tasks: jobs, partitions, workers (see docs/architecture.md).

Usable without Celery (the web app reads it).  Every transition is one Lua script in
``scripts/``; the worker busy flag is a token cleared only by compare-and-delete.
"""

from .enums import JobState, PartitionState, WorkerRole, WorkerState
from .keys import Keys, member, parse_member
from .run import DeviceResult, PartitionRun
from .store import (Beat, FinalizeEnd, HostSlot, OutageRetry, ProveBegin, ProveEnd, ProveFault,
                    Registration, Routed, StateStore, SynthBegin, SynthEnd, serves)

__all__ = ["StateStore", "PartitionRun", "DeviceResult",
           "JobState", "PartitionState", "WorkerState", "WorkerRole", "Keys",
           "SynthBegin", "SynthEnd", "Routed", "ProveBegin", "ProveEnd", "ProveFault", "FinalizeEnd", "HostSlot", "OutageRetry", "Registration", "Beat", "member",
           "parse_member", "serves"]
