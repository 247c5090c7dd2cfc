"""Confinement of the files a submitter names (``input_ref``, ``witness_ref``).

A job names files on the workers' storage; a worker opens only those that lie inside its
input roots: the spool dir (the pipeline writes witnesses there) and the directories of the
``allowed_input_roots`` setting (empty by default).  The check resolves the path first
(``os.path.realpath``: symlinks and ``..`` count) and never opens the file; the caller opens
the returned real path.  A relative path is refused: a worker would resolve it against its
own working directory, not the submitter's (``cuzk-tasks submit`` makes paths absolute).

The same check runs when the job is submitted (with the submitter's settings) and again in
every worker before it opens the file (with the worker's settings, which are what matter).
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from .errors import CuzkError

OUTSIDE = "is outside the allowed input roots (allowed_input_roots)"
"""The end of the message of a refused path: ``<path> is outside the allowed input roots ...``."""


class OutsideInputRootsError(CuzkError):
    """A submitted path resolves outside the input roots (the file was not opened)."""


def input_roots(settings) -> tuple[str, ...]:
    """The real paths of the directories submitted files may lie in: spool dir first."""
    return tuple(os.path.realpath(root)
                 for root in (settings.spool_dir, *settings.allowed_input_roots))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def confined_path(path, settings, what: str = "") -> str:
    """The real path of ``path`` when it lies inside :func:`input_roots`, else
    :class:`OutsideInputRootsError` ("``what`` <path> is outside the allowed input roots
    (allowed_input_roots)").  Only resolves the name: the file is never opened."""
    prefix = f"{what} " if what else ""
    try:
        given = os.fspath(path)
    except TypeError:
        raise OutsideInputRootsError(f"{prefix}{path!r} {OUTSIDE}: expected a path string") \
            from None
    if not isinstance(given, str) or not given:
        raise OutsideInputRootsError(f"{prefix}{given!r} {OUTSIDE}: expected a path string")
    if not os.path.isabs(given):
        raise OutsideInputRootsError(f"{prefix}{given} {OUTSIDE}: a relative path is not "
                                     "accepted (workers do not share your working directory); "
                                     "give an absolute path")
    try:
        real = os.path.realpath(given)
    except (OSError, ValueError):  # a NUL byte, a symlink loop (strict=False tolerates most)
        raise OutsideInputRootsError(f"{prefix}{given!r} {OUTSIDE}") from None
    if any(_inside(real, root) for root in input_roots(settings)):
        return real
    raise OutsideInputRootsError(f"{prefix}{given} {OUTSIDE}")


def absolute_refs(partitions, cwd=None):
    """``partitions`` with each ``input_ref`` / ``witness_ref`` made absolute against ``cwd``
    (default: the current directory); what ``cuzk-tasks submit`` sends."""
    base = os.getcwd() if cwd is None else os.fspath(cwd)
    out = []
    for part in partitions:
        part = dict(part)
        for key in ("input_ref", "witness_ref"):
            if part.get(key):
                part[key] = os.path.normpath(os.path.join(base, os.path.expanduser(
                    os.fspath(part[key]))))
        out.append(part)
    return out


@contextmanager
def atomic_output(path, mode: str = "wb"):
    """Open a temporary sibling of ``path`` for writing and rename it over ``path`` when the
    block succeeds (removed when it fails): a reader, or a proof started meanwhile, never
    sees a half-written file.  The name carries the pid, so two writers do not collide."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
