"""A daemon thread that runs one step every interval (worker heartbeats, the sweeper)."""

from __future__ import annotations

import logging
import threading
import time

from ..settings.redis_url import is_outage

log = logging.getLogger("cuzk_tasks.service.periodic")


class PeriodicThread:
    """Runs :meth:`step` every ``interval_s`` seconds until :meth:`stop`.

    A failing step is logged and the loop goes on: a Redis hiccup must not end a
    worker's heartbeat or sweeps for good.  A Redis outage (:func:`cuzk_tasks.settings.redis_url.is_outage`)
    is logged once when a step first meets it and once when a step succeeds again, not at
    every step.
    """

    thread_name = "cuzk-periodic"

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = None
        self._outage_since = None  # monotonic time the steps began to meet a Redis outage

    def step(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def step_logged(self):
        """One step, its failure logged (also run once in the starting thread by workers)."""
        try:
            self.step()
        except Exception as exc:
            if not is_outage(exc):
                log.exception("%s failed", self.thread_name)
            elif self._outage_since is None:
                self._outage_since = time.monotonic()
                log.warning("%s: Redis unavailable (%s: %s); trying again every %.1f s",
                            self.thread_name, type(exc).__name__, exc, self.interval_s)
            return
        if self._outage_since is not None:
            log.warning("%s: Redis is back after %.1f s", self.thread_name,
                        time.monotonic() - self._outage_since)
            self._outage_since = None

    def _loop(self):
        while not self._stop.wait(self.interval_s):
            self.step_logged()

    def start(self):
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0):
        """End the loop; waits up to ``timeout_s`` for a step in progress (one waiting out a
        Redis outage is left behind: the thread is a daemon)."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=timeout_s)
