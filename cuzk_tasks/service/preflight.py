"""Checks a worker makes before it registers, so that an operator's usual mistakes stop it
at start in one clear line (a :class:`~cuzk_tasks.errors.ConfigError`, which
``cuzk-tasks worker`` prints and exits 2 on) instead of failing, or silently losing, jobs
later: a Redis that evicts keys, a directory the worker writes to that it cannot write, a
circuit whose files do not belong together, a compute backend that cannot start.
"""

from __future__ import annotations

import json
import os
import tempfile

from ..errors import ConfigError
from ..pipeline.circuit_files import check_circuit
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


def _checked(settings: Settings, witness: bool, backend: str | None) -> dict:
    """``{"problems": [one line each], "input_maps": {circuit: its input map}}``."""
    problems, input_maps = [], {}
    for spec in settings.circuits.values():
        try:
            input_map = check_circuit(spec, witness=witness)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        if input_map is not None:
            input_maps[spec.name] = input_map
    started = None
    if backend is not None:
        # lazy: the backend loads numpy and the native core, or CuPy and CUDA
        from ..groth16.backends.select import get_backend

        try:
            started = get_backend(backend).name
        except Exception as exc:  # noqa: BLE001 - whatever stops it, said in one line
            problems.append(f"backend {backend}: {exc}")
    return {"problems": problems, "input_maps": input_maps, "backend": started}


def in_child(fn):
    """``fn()`` (a JSON value) run in a forked child process: what it loads -- a compiled
    wasm and its threads, a CUDA context -- never reaches the worker's main process, from
    which Celery forks its pool.  A child that raises or dies: ``{"problems": [how]}``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
        os.close(read_end)
        try:
            out = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
            out = {"problems": [f"start-up check failed: {type(exc).__name__}: {exc}"]}
        with os.fdopen(write_end, "w", encoding="utf-8") as f:
            f.write(json.dumps(out))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit {os.waitstatus_to_exitcode(status)}")
        return {"problems": [f"the start-up check of circuits and backend died ({how})"]}
    return json.loads(text)


def check_circuits(settings: Settings, witness: bool, backend: str | None = None) -> dict:
    """ConfigError, one line naming each circuit at fault, unless every configured
    circuit's files belong together (:func:`~cuzk_tasks.pipeline.circuit_files.check_circuit`;
    ``witness``: its witness generator too) and, given ``backend``, that backend starts --
    both checked in a child process (:func:`in_child`).  Returns ``{"input_maps": {circuit:
    {signal: number of values}}, "backend": the backend's name ("cpu", "gpu"; None when none
    was asked for)}``."""
    checked = in_child(lambda: _checked(settings, witness, backend))
    if checked["problems"]:
        raise ConfigError("; ".join(checked["problems"]))
    return checked


def check_cpu_worker(settings: Settings, store) -> dict:
    """A CPU worker's checks: Redis keeps every key; it can write its spool (witnesses) and,
    when set, its results directory; each circuit's zkey and witness generator belong
    together.  Returns the circuits' input maps (:func:`check_circuits`), which its submit
    checks inline inputs against."""
    check_no_eviction(settings, store)
    check_writable_dir(settings.spool_dir, "spool_dir", "CUZK_SPOOL_DIR")
    if settings.results_dir:
        check_writable_dir(settings.results_dir, "results_dir", "CUZK_RESULTS_DIR")
    return check_circuits(settings, witness=True)["input_maps"]


def check_device_worker(settings: Settings, store, backend: str) -> str:
    """A device worker's checks: Redis keeps every key (it reads the spool, writes nothing
    there); each circuit's zkey reads; its compute ``backend`` starts.  Returns the name of
    the backend that started (``auto`` resolved), which the worker advertises."""
    check_no_eviction(settings, store)
    return check_circuits(settings, witness=False, backend=backend)["backend"]
