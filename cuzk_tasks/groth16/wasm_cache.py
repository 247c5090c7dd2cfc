"""Compiled wasm modules cached across processes, so that a circuit is compiled (Cranelift:
up to ~1.3 s for a big circuit) once per host, not once per CLI run or worker start.

An entry is wasmtime's serialized module (``Module.serialize``), one file per module in the
cache directory (``defaults.wasm_cache_dir()``, env ``CUZK_WASM_CACHE_DIR``), named
``<sha256 of the wasm>-wasmtime<version>-<machine>-<engine settings>.cwasm``.

Trust.  Loading a serialized module (``Module.deserialize_file``) maps machine code from the
file and runs it, unchecked: a file that someone else could have written is arbitrary code
execution in this process.  So the directory is created 0700, and a directory or an entry
that is not owned by this process's uid, or that its group or others may write, is never
loaded: the cache is then off (one log line) or the entry is compiled again and replaced.

Concurrency.  An entry is written to a temporary file in the same directory and renamed over
its name (``os.replace``): a reader sees a whole file or none, and concurrent writers of the
same module each rename a whole, equivalent file (the last one stays).

Staleness.  An entry that wasmtime refuses (written by another wasmtime build, or for other
engine settings, or truncated or corrupt) is compiled again and replaced, with one log line;
never an error.  Nothing here removes old entries: the directory may be deleted at any time.
Compiled code is for this host's CPU: a directory shared by hosts whose CPUs differ works, but
they compile alternately (give each host its own).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import threading
import time
from typing import Callable, Optional

import wasmtime

log = logging.getLogger(__name__)

#: a temporary file older than this is a writer's that died before its rename: removed by
#: the next write
STALE_TEMP_S = 3600

_TEMP_PREFIX = ".tmp-"
_UNUSABLE: set = set()  # directories already reported unusable (one log line per process)
_UNUSABLE_LOCK = threading.Lock()
_VERSION: Optional[str] = None


def wasmtime_version() -> str:
    """The installed wasmtime-py's version (its wheel's, which bundles the runtime)."""
    global _VERSION
    if _VERSION is None:
        _VERSION = _dist_info_version() or _metadata_version()
    return _VERSION


def _dist_info_version() -> Optional[str]:
    # importlib.metadata costs 20-50 ms of a CLI run's start; the wheel's dist-info directory
    # next to the package names the version too
    site = os.path.dirname(os.path.dirname(os.path.abspath(wasmtime.__file__)))
    try:
        names = os.listdir(site)
    except OSError:
        return None
    found = [m.group(1) for m in map(re.compile(r"wasmtime-([^-]+)\.dist-info\Z").match, names)
             if m]
    return found[0] if len(found) == 1 else None


def _metadata_version() -> str:
    # lazy: importlib.metadata is slow to import, and the dist-info lookup usually answers
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wasmtime")
    except PackageNotFoundError:
        return "unknown"


def entry_name(wasm: bytes, settings: str) -> str:
    """The file name of the entry of ``wasm`` compiled by an engine of ``settings``."""
    digest = hashlib.sha256(wasm).hexdigest()
    tag = re.sub(r"[^A-Za-z0-9._-]", "_", f"wasmtime{wasmtime_version()}-{os.uname().machine}"
                                          f"-{settings}")
    return f"{digest}-{tag}.cwasm"


def _private(st: os.stat_result) -> bool:
    """Owned by this process's uid and writable by nobody else."""
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _usable_dir(cache_dir: str) -> bool:
    """Make ``cache_dir`` (0700) if it is missing; True when entries may be loaded from it."""
    why = None
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        st = os.stat(cache_dir)
        if not stat.S_ISDIR(st.st_mode):
            why = "not a directory"
        elif not _private(st):
            why = (f"owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}: it must "
                   f"belong to uid {os.getuid()} and be writable by nobody else")
    except OSError as exc:
        why = exc.strerror or str(exc)
    if why is None:
        return True
    with _UNUSABLE_LOCK:
        if cache_dir not in _UNUSABLE:
            _UNUSABLE.add(cache_dir)
            log.warning("wasm cache %s not used (%s): compiling in every process", cache_dir,
                        why)
    return False


def compiled_module(engine, wasm: bytes, settings: str, cache_dir: Optional[str],
                    what: str = "wasm", prepare: Optional[Callable[[bytes], bytes]] = None):
    """``wasmtime.Module(engine, prepare(wasm))``, loaded from ``cache_dir`` when an entry is
    there, else compiled and stored there.  ``settings`` names the engine settings that change
    the compiled code (e.g. ``"epoch"`` for epoch interruption) and the version of
    ``prepare`` (a rewrite of the module, default none): with the hash of ``wasm`` they name
    the entry, so ``prepare`` runs only when the entry is missing.  ``cache_dir`` None: no
    cache.  ``what`` names the module in log lines.  Compile errors
    (``wasmtime.WasmtimeError``) are the caller's; no cache problem is an error."""
    def compile_it():
        return wasmtime.Module(engine, prepare(wasm) if prepare is not None else wasm)

    if not cache_dir or not _usable_dir(cache_dir):
        return compile_it()
    path = os.path.join(cache_dir, entry_name(wasm, settings))
    module = _load(engine, path, what)
    if module is not None:
        return module
    t0 = time.perf_counter()
    module = compile_it()
    log.debug("wasm cache: compiled %s in %.3f s", what, time.perf_counter() - t0)
    _store(cache_dir, path, module)
    return module


def _load(engine, path: str, what: str):
    """The module of the entry at ``path``; None when there is none to load (missing, not
    trusted, or refused by wasmtime: then it is deleted, the caller writes a fresh one)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.info("wasm cache: entry %s unreadable (%s): compiling %s", path, exc.strerror, what)
        return None
    if not stat.S_ISREG(st.st_mode) or not _private(st):
        log.warning("wasm cache: entry %s ignored (not a regular file of uid %d writable by it "
                    "alone): compiling %s again", path, os.getuid(), what)
        return None
    try:
        module = wasmtime.Module.deserialize_file(engine, path)
    except wasmtime.WasmtimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        log.info("wasm cache: entry %s is stale or damaged (%s): compiling %s again", path,
                 first, what)
        _remove(path)
        return None
    log.debug("wasm cache: loaded %s from %s", what, path)
    return module


def _store(cache_dir: str, path: str, module) -> None:
    """Write ``module``'s entry: a temporary file in the directory, renamed over ``path``."""
    # lazy: tempfile (random, shutil) is needed only by the run that compiles
    import tempfile

    tmp = None
    try:
        data = module.serialize()
        fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".cwasm", dir=cache_dir)
        with os.fdopen(fd, "wb") as f:  # mkstemp: mode 0600
            f.write(data)
        os.replace(tmp, path)
        tmp = None
    except (OSError, wasmtime.WasmtimeError) as exc:
        log.info("wasm cache: could not store %s (%s)", path,
                 getattr(exc, "strerror", None) or exc)
    finally:
        if tmp is not None:
            _remove(tmp)
    _sweep_temps(cache_dir)


def _sweep_temps(cache_dir: str) -> None:
    """Remove the temporary files of writers that died before their rename."""
    now = time.time()
    try:
        with os.scandir(cache_dir) as it:
            for e in it:
                if e.name.startswith(_TEMP_PREFIX):
                    try:
                        if now - e.stat(follow_symlinks=False).st_mtime > STALE_TEMP_S:
                            _remove(e.path)
                    except OSError:
                        pass
    except OSError:
        pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
