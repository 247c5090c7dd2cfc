"""Circuit registry and resident zkeys.

The registry maps a circuit name to its :class:`~cuzk_tasks.settings.config.CircuitSpec`
(kind, zkey, wasm, priority); it comes from the ``[circuits.NAME]`` tables of
the config.

:class:`ResidentZkeys` keeps parsed zkeys (``read_zkey``, memory-mapped)
resident in a worker process under an LRU memory budget, like cuzk keeps SRS
parameters resident: the first partition of a circuit pays the load, the
next ones do not.  ``names()`` is what the worker publishes as its resident
set, so routing can prefer a device that already holds the circuit.

A circuit's zkey, wasm and native witness generator are the server's files: a job's error names the circuit, not their
paths (:meth:`CircuitRegistry.redact`, :func:`circuit_file_error`); the worker's log has the
paths.
"""

from __future__ import annotations

import collections
import logging
import os
import threading

from ..errors import CuzkError, FormatError
from ..groth16.native_witness import native_binary
from ..settings.config import CircuitSpec, Settings
from ..settings.redis_url import is_outage

log = logging.getLogger(__name__)

__all__ = ["CircuitSpec", "CircuitRegistry", "ResidentZkeys", "circuit_file_error"]


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

    def redact(self, message: str) -> str:
        """``message`` with every configured circuit's zkey, wasm and native witness generator
        path (as configured and as real path) replaced by ``<circuit 'NAME' zkey>`` /
        ``<circuit 'NAME' wasm>`` / ``<circuit 'NAME' witness>`` (its ``.dat`` file then reads
        ``<circuit 'NAME' witness>.dat``): what a job's error may show a submitter (the worker
        logs the message as it was)."""
        for path, label in self._server_paths():
            if path in message:
                message = message.replace(path, label)
        return message

    def _server_paths(self):
        paths = {}
        for spec in self._circuits.values():
            native = native_binary(spec.witness) if spec.witness else None
            for kind, path in (("zkey", spec.zkey), ("wasm", spec.wasm), ("witness", native)):
                if path:
                    for p in {os.fspath(path), os.path.realpath(path)}:
                        paths.setdefault(p, f"<circuit {spec.name!r} {kind}>")
        # longest first: a path that is a prefix of another must not cut it in two
        return sorted(paths.items(), key=lambda item: -len(item[0]))


def circuit_file_error(name, kind, path, exc) -> CuzkError:
    """The job's error for circuit ``name``'s own ``kind`` file (``zkey`` / ``wasm`` /
    ``witness``) at ``path`` that cannot be used (``exc``): names the circuit, not the server's
    path, which goes to the worker's log."""
    log.error("circuit %s: %s %s is unusable: %s", name, kind, path, exc)
    if isinstance(exc, FormatError):
        why = f"{exc.field}: {exc.problem}"
    elif isinstance(exc, OSError):
        why = f"cannot open it ({exc.strerror or type(exc).__name__})"
    else:
        why = str(exc)
    return CuzkError(f"circuit {name!r}: its {kind} is unusable ({why}); the worker's log names "
                     "the file")


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
        from ..groth16.formats.zkey import read_zkey

        spec = self.registry.get(name)
        with self._lock:
            hit = self._held.get(name)
            if hit is not None:
                self._held.move_to_end(name)
                return hit[0]
            try:
                size = os.path.getsize(spec.zkey)
                zkey = read_zkey(spec.zkey)
            except (OSError, FormatError) as exc:
                raise circuit_file_error(name, "zkey", spec.zkey, exc) from None
            self._held[name] = (zkey, size)
            self._evict(keep=name)
            names = list(self._held)
        log.info("zkey %s resident (%d MiB); holding %s", name, size >> 20, names)
        if self.on_change:
            try:
                self.on_change(names)
            except Exception as exc:  # publishing residency must never fail a proof
                if not is_outage(exc):
                    log.exception("could not publish resident zkeys")
                else:  # the state store logs the outage itself
                    log.warning("could not publish resident zkeys %s: Redis unavailable (%s)",
                                names, type(exc).__name__)
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
