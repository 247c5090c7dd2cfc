"""StampedCache: objects built from files, kept per path while the files stay the same.

The witness generators (a compiled wasm, a native binary) are costly to build and are asked
for once per partition; a worker keeps one per circuit file and builds it again when the file
changes (its stamp: mtime, size, inode -- whatever the caller compares)."""

from __future__ import annotations

import threading
from typing import Callable, Dict, Hashable, Tuple, TypeVar

T = TypeVar("T")


class StampedCache:
    """``get(path, stamp, make)``: the object cached for ``path`` if it was made at ``stamp``,
    else ``make()``'s, cached.  Thread-safe; ``make`` runs outside the lock (two threads may
    both build on a miss: the last one stays)."""

    def __init__(self):
        self._items: Dict[str, Tuple[Hashable, object]] = {}
        self._lock = threading.Lock()

    def get(self, path: str, stamp: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            hit = self._items.get(path)
            if hit is not None and hit[0] == stamp:
                return hit[1]
        made = make()
        with self._lock:
            self._items[path] = (stamp, made)
        return made
