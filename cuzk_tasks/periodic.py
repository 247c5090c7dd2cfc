"""A daemon thread that runs one step every interval (worker heartbeats, the sweeper)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("cuzk_tasks.periodic")


class PeriodicThread:
    """Runs :meth:`step` every ``interval_s`` seconds until :meth:`stop`.

    A failing step is logged and the loop goes on: a Redis hiccup must not end a
    worker's heartbeat or sweeps for good.
    """

    thread_name = "cuzk-periodic"

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = None

    def step(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def step_logged(self):
        """One step, its failure logged (also run once in the starting thread by workers)."""
        try:
            self.step()
        except Exception:
            log.exception("%s failed", self.thread_name)

    def _loop(self):
        while not self._stop.wait(self.interval_s):
            self.step_logged()

    def start(self):
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
