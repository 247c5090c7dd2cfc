"""Confinement of the files a submitter names (``input_ref``, ``witness_ref``).

A job names files on the workers' storage; a worker opens only those that lie inside its
input roots: the spool dir (the pipeline writes witnesses there) and the directories of the
``allowed_input_roots`` setting (empty by default).  A relative path is refused: a worker
would resolve it against its own working directory, not the submitter's (``cuzk-tasks
submit`` makes paths absolute).

Two functions:

* :func:`confined_path` checks the *name* (``os.path.realpath``: symlinks and ``..`` count;
  no component longer than ``NAME_MAX``) and never opens anything.  It runs when the job is
  submitted (with the submitter's settings) and again in every worker.
* :func:`open_input` is how a worker *opens* such a file, and the only way: a name can change
  between a check and an ``open()`` (a directory swapped for a symlink to elsewhere), so it
  walks the checked real path from a descriptor of its root, one component at a time with
  ``O_NOFOLLOW`` (a symlink that appeared after the check is not followed), opens the file
  with ``O_NONBLOCK`` (a FIFO cannot block the worker) and keeps it only when ``fstat`` says
  it is a regular file and ``/proc/self/fd`` says it still lies inside a root.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from contextlib import contextmanager

from .errors import CuzkError
from .settings import defaults

OUTSIDE = "is outside the allowed input roots (allowed_input_roots)"
"""The end of the message of a refused path: ``<path> is outside the allowed input roots ...``."""

NAME_MAX = 255
"""Bytes in one path component (Linux filesystems' limit): a longer name is refused by name."""

PATH_MAX = 4096
"""Bytes in a whole path, NUL included (Linux's limit): a longer path is refused by name."""


class InputRefError(CuzkError):
    """A submitted path (``input_ref`` / ``witness_ref``) cannot be used; the message names the
    field, the path as submitted and what was expected, never the file's content."""


class OutsideInputRootsError(InputRefError):
    """A submitted path resolves outside the input roots (the file was not opened)."""


def input_roots(settings) -> tuple[str, ...]:
    """The real paths of the directories submitted files may lie in: spool dir first."""
    return tuple(os.path.realpath(root)
                 for root in (settings.spool_dir, *settings.allowed_input_roots))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _shown(path: str) -> str:
    """``path`` for a message: a very long one shortened (a too-long name is its own error)."""
    return path if len(path) <= 240 else f"{path[:160]}...{path[-60:]} ({len(path)} characters)"


def _check_name_length(given: str, prefix: str) -> None:
    try:
        encoded = os.fsencode(given)
    except UnicodeError:  # a lone surrogate: no filesystem name
        raise InputRefError(f"{prefix}{given!r:.240}: expected a path string") from None
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX:
        raise InputRefError(f"{prefix}{_shown(given)}: file name too long (a path component "
                            f"is {longest} bytes; the limit is {NAME_MAX})")
    if len(encoded) >= PATH_MAX:
        raise InputRefError(f"{prefix}{_shown(given)}: file name too long (the path is "
                            f"{len(encoded)} bytes; the limit is {PATH_MAX - 1})")


def confined_path(path, settings, what: str = "") -> str:
    """The real path of ``path`` when it lies inside :func:`input_roots`, else
    :class:`OutsideInputRootsError` ("``what`` <path> is outside the allowed input roots
    (allowed_input_roots)"), or :class:`InputRefError` for a name no file can have (a
    component over :data:`NAME_MAX` bytes: "file name too long").  Only resolves the name:
    the file is never opened (a worker opens it with :func:`open_input`)."""
    prefix = f"{what} " if what else ""
    try:
        given = os.fspath(path)
    except TypeError:
        raise OutsideInputRootsError(f"{prefix}{path!r} {OUTSIDE}: expected a path string") \
            from None
    if not isinstance(given, str) or not given:
        raise OutsideInputRootsError(f"{prefix}{given!r} {OUTSIDE}: expected a path string")
    if not os.path.isabs(given):
        raise OutsideInputRootsError(f"{prefix}{_shown(given)} {OUTSIDE}: a relative path is "
                                     "not accepted (workers do not share your working "
                                     "directory); give an absolute path")
    if "\0" not in given:
        _check_name_length(given, prefix)
    try:
        real = os.path.realpath(given)
    except ValueError:  # a NUL byte
        raise OutsideInputRootsError(f"{prefix}{given!r} {OUTSIDE}") from None
    except OSError as exc:  # a component changed while it was resolved (strict=False
        # tolerates most else)
        raise InputRefError(f"{prefix}{_shown(given)}: its path cannot be resolved "
                            f"({exc.strerror or type(exc).__name__}; did it change meanwhile?)"
                            ": expected a path inside the allowed input roots") from None
    if any(_inside(real, root) for root in input_roots(settings)):
        return real
    raise OutsideInputRootsError(f"{prefix}{_shown(given)} {OUTSIDE}")


class _Changed(Exception):
    """A component of the checked real path is no longer what the check saw (a symlink now, or
    the directory moved out of its root): resolve the name again."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_regular(mode, prefix, given) -> InputRefError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return InputRefError(f"{prefix}{_shown(given)} is {kind}: expected a regular file")


def _open_error(exc: OSError, prefix: str, given: str) -> InputRefError:
    """An open that failed for a reason of the file itself (strerror only: no path, no bytes)."""
    if exc.errno == errno.ENOENT:
        why = "no such file"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied (the worker cannot read it)"
    elif exc.errno == errno.ENAMETOOLONG:
        why = "file name too long"
    else:
        why = f"cannot be opened ({os.strerror(exc.errno) if exc.errno else type(exc).__name__})"
    return InputRefError(f"{prefix}{_shown(given)}: {why}: expected a regular file inside the "
                         "allowed input roots")


def _fd_inside_roots(fd: int, roots) -> bool:
    """Whether the kernel's name of the open ``fd`` lies inside one of ``roots`` (True where
    ``/proc`` is not mounted: the component walk alone then vouches for it)."""
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return True
    return any(_inside(where, root) for root in roots)


def _open_beneath(root: str, real: str, roots, prefix: str, given: str) -> int:
    """A descriptor of ``real`` (a real path inside ``root``) opened by walking down from
    ``root`` without following any symlink; raises :class:`_Changed` or InputRefError."""
    rel = os.path.relpath(real, root)
    parts = [] if rel == os.curdir else rel.split(os.sep)
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dirfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _open_error(exc, prefix, given) from None
    try:
        if not parts:  # the root itself
            raise _not_regular(os.fstat(dirfd).st_mode, prefix, given)
        for name in parts[:-1]:
            try:
                fd = os.open(name, nofollow | os.O_DIRECTORY, dir_fd=dirfd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _changed(name, dirfd):
                    raise _Changed from None
                if exc.errno == errno.ENOTDIR:
                    raise InputRefError(f"{prefix}{_shown(given)}: a component of the path is "
                                        "not a directory: expected a regular file inside the "
                                        "allowed input roots") from None
                raise _open_error(exc, prefix, given) from None
            os.close(dirfd)
            dirfd = fd
        name = parts[-1]
        # look before opening: a device is never opened (opening one can act on it)
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except OSError as exc:
            raise _open_error(exc, prefix, given) from None
        if stat.S_ISLNK(st.st_mode):
            raise _Changed
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(st.st_mode, prefix, given)
        # O_NONBLOCK: should a FIFO take the file's place after the look, opening it returns
        # at once (and fstat refuses it) instead of waiting for a writer
        try:
            fd = os.open(name, nofollow | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dirfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Changed from None
            raise _open_error(exc, prefix, given) from None
    finally:
        os.close(dirfd)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(mode, prefix, given)
        if not _fd_inside_roots(fd, roots):  # a directory on the walk was moved out meanwhile
            raise _Changed
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _changed(name, dirfd) -> bool:
    """Whether directory component ``name`` that could not be opened as one is a symlink now,
    or a directory again, or gone (it is being swapped), rather than a plain file."""
    try:
        mode = os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode
    except OSError:
        return True
    return stat.S_ISLNK(mode) or stat.S_ISDIR(mode)


def open_input(path, settings, what: str = "") -> io.BufferedReader:
    """Open the submitted file ``path`` for reading, binary; ``what`` (``input_ref`` /
    ``witness_ref``) starts every message.  The file opened is the one the name check
    (:func:`confined_path`) resolved, opened beneath its root without following a symlink,
    so a directory swapped for a symlink meanwhile is never followed out of the roots; it
    must be a regular file (a FIFO, a socket, a device or a directory fails at once).  The
    returned file's ``name`` is that real path.

    Raises :class:`OutsideInputRootsError` (outside the roots), or :class:`InputRefError`
    ("is a FIFO: expected a regular file", "no such file", "file name too long", "kept
    changing while it was opened").  No message quotes a byte of any file."""
    prefix = f"{what} " if what else ""
    given = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
    for _ in range(defaults.OPEN_INPUT_TRIES):
        real = confined_path(path, settings, what)  # resolved again on each try
        roots = input_roots(settings)
        root = max((r for r in roots if _inside(real, r)), key=len)
        try:
            fd = _open_beneath(root, real, roots, prefix, given)
        except _Changed:
            continue
        raw = io.FileIO(fd, "rb", closefd=True)
        raw.name = real
        return io.BufferedReader(raw)
    raise InputRefError(f"{prefix}{_shown(given)}: its path kept changing while it was opened "
                        "(a directory or file in it was replaced by a symlink or moved): "
                        "expected a stable path inside the allowed input roots")


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
