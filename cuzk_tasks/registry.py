"""Circuit registry and resident zkeys.

The registry maps a circuit name to its :class:`~cuzk_tasks.config.CircuitSpec`
(kind, zkey, wasm, priority); it comes from the ``[circuits.NAME]`` tables of
the config.

:class:`ResidentZkeys` keeps parsed zkeys (``read_zkey``, memory-mapped)
resident in a worker process under an LRU memory budget, like cuzk keeps SRS
parameters resident: the first partition of a circuit pays the load, the
next ones do not.  ``names()`` is what the worker publishes as its resident
set, so routing can prefer a device that already holds the circuit.
"""

from __future__ import annotations

import collections
import logging
import os
import threading

from .config import CircuitSpec, Settings
from .errors import CuzkError

log = logging.getLogger(__name__)

__all__ = ["CircuitSpec", "CircuitRegistry", "ResidentZkeys"]


class CircuitRegistry:
    def __init__(self, circuits: dict[str, CircuitSpec]):
        self._circuits = dict(circuits)

    @classmethod
    def from_settings(cls, settings: Settings) -> "CircuitRegistry":
        return cls(settings.circuits)

    def get(self, name) -> CircuitSpec:
        spec = self._circuits.get(name)
        if spec is None:
            known = ", ".join(sorted(self._circuits)) or "none configured"
            raise CuzkError(f"unknown circuit {name!r} (known circuits: {known})")
        return spec

    def __contains__(self, name):
        return name in self._circuits

    def names(self):
        return sorted(self._circuits)


class ResidentZkeys:
    """LRU cache of loaded zkeys bounded by ``budget_mb`` (file size counts)."""

    def __init__(self, registry: CircuitRegistry, budget_mb: float, on_change=None):
        self.registry = registry
        self.budget_bytes = int(budget_mb * 1024 * 1024)
        self.on_change = on_change
        self._lock = threading.Lock()
        self._held: "collections.OrderedDict[str, tuple]" = collections.OrderedDict()

    def get(self, name):
        """The loaded ZKey of circuit ``name`` (loads it, evicting LRU entries over budget)."""
        # lazy: the zkey reader loads numpy, which a client's registry (names only) never needs
        from .groth16.zkey import read_zkey

        spec = self.registry.get(name)
        with self._lock:
            hit = self._held.get(name)
            if hit is not None:
                self._held.move_to_end(name)
                return hit[0]
            try:
                size = os.path.getsize(spec.zkey)
            except OSError as exc:
                raise CuzkError(f"circuit {name!r}: cannot open zkey {spec.zkey}: {exc}") from None
            zkey = read_zkey(spec.zkey)
            self._held[name] = (zkey, size)
            self._evict(keep=name)
            names = list(self._held)
        log.info("zkey %s resident (%d MiB); holding %s", name, size >> 20, names)
        if self.on_change:
            try:
                self.on_change(names)
            except Exception:  # publishing residency must never fail a proof
                log.exception("could not publish resident zkeys")
        return zkey

    def _evict(self, keep):
        while self.used_bytes() > self.budget_bytes and len(self._held) > 1:
            name, (zkey, size) = next(iter(self._held.items()))
            if name == keep:
                self._held.move_to_end(name)
                continue
            del self._held[name]
            # no close(): a proof in flight may still hold its arrays; the mapping
            # is released with the last reference
            log.info("dropping resident zkey %s (%d MiB) over budget", name, size >> 20)

    def used_bytes(self) -> int:
        return sum(size for _, size in self._held.values())

    def names(self) -> list[str]:
        with self._lock:
            return list(self._held)

    def __contains__(self, name):
        with self._lock:
            return name in self._held
