"""Checks a worker makes before it registers, so that an operator's usual mistakes stop it
at start in one clear line (a :class:`~cuzk_tasks.errors.ConfigError`, which
``cuzk-tasks worker`` prints and exits 2 on) instead of failing, or silently losing, jobs
later: a Redis that evicts keys, and a directory the worker writes to that it cannot write.
"""

from __future__ import annotations

import os
import tempfile

from ..errors import ConfigError
from ..settings.config import Settings
from ..settings.redis_url import redact


def check_no_eviction(settings: Settings, store) -> None:
    """ConfigError unless Redis keeps every key (``maxmemory-policy noeviction``): under any
    other policy Redis drops jobs, queued messages and results when it fills -- jobs then
    vanish ("no such job") or wait for ever, and nothing logs it.  At ``maxmemory`` with
    noeviction writes fail instead, an outage the service rides out."""
    policy = store.eviction_policy()
    if policy != "noeviction":
        raise ConfigError(
            f"Redis at {redact(settings.redis_url)} evicts keys (maxmemory-policy {policy}): "
            "jobs and their queued messages would vanish when it fills; set maxmemory-policy "
            "noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction)")


def check_writable_dir(path: str, setting: str, env: str) -> None:
    """ConfigError naming ``setting`` unless ``path`` is (or can be made) a directory this
    process can create files in: a read-only mount or another owner found here, not job by
    job."""
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".cuzk-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{setting} {path}: this worker cannot write there "
                          f"({exc.strerror or type(exc).__name__}); mount it writable for the "
                          f"worker's user, or set {env}") from None


def check_cpu_worker(settings: Settings, store) -> None:
    """A CPU worker's checks: Redis keeps every key; it can write its spool (witnesses) and,
    when set, its results directory."""
    check_no_eviction(settings, store)
    check_writable_dir(settings.spool_dir, "spool_dir", "CUZK_SPOOL_DIR")
    if settings.results_dir:
        check_writable_dir(settings.results_dir, "results_dir", "CUZK_RESULTS_DIR")


def check_device_worker(settings: Settings, store) -> None:
    """A device worker's checks: Redis keeps every key (it reads the spool, writes nothing
    there)."""
    check_no_eviction(settings, store)
