"""Spool hygiene: the witnesses of jobs that ended without finalize deleting them.

synthesize writes partition ``idx``'s witness to ``<spool_dir>/<job>/<idx>.wtns`` and finalize
deletes it once the partition is proved; a job that fails, is cancelled or passes its deadline
leaves the witnesses it had written (a cancelled 310-partition job: 310 files).
:func:`sweep_spool` -- run by every CPU worker's sweeper with its lease checks, each CPU host
sweeping the spool it sees -- deletes them: the spool files of a job that is terminal, and of
a job the store no longer knows (its keys expired after ``job_retention_s``, or Redis lost
them) once its directory has not changed for ``job_retention_s`` -- with a retention of 0
(records kept for ever) for ``SPOOL_FORGOTTEN_S``.  Every host sweeps the spool IT sees, so
with a private spool per host each host deletes what it wrote.  It deletes only the names synthesize
writes (``<idx>.wtns`` and their ``.tmp<pid>`` siblings), never a file a submitter put
there, and the job's directory only when that leaves it empty.
"""

from __future__ import annotations

import logging
import os
import re
import time

from ..settings import defaults
from ..state.enums import JobState

log = logging.getLogger("cuzk_tasks.recovery.spool")

#: the names synthesize writes in a job's spool directory (atomic_output's temporaries too)
_SPOOLED = re.compile(r"[0-9]+\.wtns(\.tmp[0-9]+)?")
_JOB_DIR = re.compile(r"[0-9a-f]{32}")  # submit's job ids (uuid4().hex)
_ENDED = {s.value for s in JobState if s.terminal}


def sweep_spool(store, spool_dir, retention_s, now=None) -> int:
    """Delete the spool files of ended or forgotten jobs; returns how many files went.
    ``retention_s``: ``job_retention_s`` (0: a forgotten job's wait is ``SPOOL_FORGOTTEN_S``)."""
    try:
        entries = [e for e in os.scandir(spool_dir)
                   if e.is_dir(follow_symlinks=False) and _JOB_DIR.fullmatch(e.name)]
    except FileNotFoundError:
        return 0
    if not entries:
        return 0
    now = time.time() if now is None else now
    # a job unknown to the store for this long is gone (its keys expired, or Redis lost them);
    # a younger one may be another deployment's on a shared spool, or still being created
    forgotten_s = retention_s if retention_s > 0 else defaults.SPOOL_FORGOTTEN_S
    states = store.job_states(e.name for e in entries)
    removed = 0
    for entry in entries:
        state = states.get(entry.name)
        if state is None:
            try:
                age = now - entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            if age < forgotten_s:
                continue
        elif state not in _ENDED:
            continue
        removed += _remove_job_dir(entry.path)
    if removed:
        log.info("spool: removed %d witness file(s) of ended jobs from %s", removed, spool_dir)
    return removed


def _remove_job_dir(path) -> int:
    removed = 0
    try:
        names = os.listdir(path)
    except OSError:
        return 0
    for name in names:
        if _SPOOLED.fullmatch(name):
            try:
                os.unlink(os.path.join(path, name))
                removed += 1
            except FileNotFoundError:
                pass  # another CPU worker's sweeper or finalize was first
            except OSError as exc:
                log.warning("spool: cannot remove %s: %s", os.path.join(path, name), exc)
    try:
        os.rmdir(path)
    except OSError:
        pass  # not empty (a file of someone else's) or already gone
    return removed
