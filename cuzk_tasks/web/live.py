"""Server-Sent Events: one reader thread per web process fans the Redis event stream out.

The thread blocks on ``XREAD`` of the state store's events stream.  New transitions are
forwarded at once to every subscriber (``event: transition``); a full status document
(``event: status``) follows, at most every ``sse_min_interval_ms`` and at least every
``sse_refresh_s`` (heartbeat ages and expiry, queue depths change without events).  Each
subscriber keeps only the newest status, so a slow client never makes the others wait.

Each open stream holds a gunicorn thread, so :meth:`Broadcaster.subscribe` caps them: at most
``max_streams`` per process and ``max_per_client`` per client address (WebConfig.stream_cap,
``sse_max_streams_per_client``); over a cap it returns None and the view answers 429.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time

from cuzk_tasks.state.reads import last_event_id

from .outage import OutageLog, is_outage

log = logging.getLogger("cuzk_tasks.web.live")


class Subscriber:
    def __init__(self, client=None, backlog=256):
        self.client = client
        self.cond = threading.Condition()
        self.transitions = collections.deque(maxlen=backlog)
        self.status = None
        self.closed = False

    def push(self, transition=None, status=None):
        with self.cond:
            if transition is not None:
                self.transitions.append(transition)
            if status is not None:
                self.status = status
            self.cond.notify()

    def take(self, timeout):
        """Frames ready to send (bytes), waiting up to ``timeout`` s; [] on timeout."""
        with self.cond:
            if not self.transitions and self.status is None:
                self.cond.wait(timeout)
            frames = list(self.transitions)
            self.transitions.clear()
            if self.status is not None:
                frames.append(self.status)
                self.status = None
            return frames


def frame(event: str, data: bytes, event_id: str | None = None) -> bytes:
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id else "")
    return head.encode() + b"data: " + data + b"\n\n"


class Broadcaster:
    def __init__(self, store, reader, min_interval_ms=250, refresh_s=2.0,
                 outage: OutageLog | None = None, max_streams=None, max_per_client=None):
        self.store = store
        self.max_streams = max_streams  # None: no cap (tests that build one by hand)
        self.max_per_client = max_per_client
        self._per_client = collections.Counter()
        self.outage = outage or OutageLog()
        self.reader = reader
        self.min_interval_s = min_interval_ms / 1000.0
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._subs: set[Subscriber] = set()
        self._thread = None
        self._stop = threading.Event()

    def subscribe(self, client=None) -> Subscriber | None:
        """A new subscriber of ``client`` (its address), or None when a cap is reached."""
        sub = Subscriber(client)
        with self._lock:
            if self.max_streams is not None and len(self._subs) >= self.max_streams:
                return None
            if self.max_per_client is not None and self._per_client[client] >= self.max_per_client:
                return None
            self._per_client[client] += 1
            self._subs.add(sub)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="cuzk-web-sse", daemon=True)
                self._thread.start()
        return sub

    def unsubscribe(self, sub: Subscriber):
        """Idempotent: the stream's end and the response's close both call it."""
        with self._lock:
            if sub in self._subs:
                self._subs.discard(sub)
                self._per_client[sub.client] -= 1
                if self._per_client[sub.client] <= 0:
                    del self._per_client[sub.client]

    def subscribers(self) -> int:
        with self._lock:
            return len(self._subs)

    def stop(self):
        self._stop.set()

    def _broadcast(self, **kw):
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub.push(**kw)

    def status_frame(self) -> bytes:
        _, body, event_id = self.reader.get()
        return frame("status", body, event_id)

    def _run(self):
        last_id = None
        last_status = 0.0
        dirty = False
        while not self._stop.is_set():
            try:
                if last_id is None:
                    last_id = last_event_id(self.store) or "0-0"
                wait_s = self.min_interval_s if dirty else min(1.0, self.refresh_s)
                events = self.store.events(last_id, count=1000, block_ms=max(1, int(wait_s * 1000)))
                self.outage.ok()
                if events:
                    last_id = events[-1][0]
                    data = json.dumps([dict(f, id=eid) for eid, f in events],
                                      separators=(",", ":")).encode()
                    self._broadcast(transition=frame("transition", data, last_id))
                    dirty = True
                now = time.monotonic()
                if self.subscribers() and ((dirty and now - last_status >= self.min_interval_s)
                                           or now - last_status >= self.refresh_s):
                    self._broadcast(status=self.status_frame())
                    last_status, dirty = time.monotonic(), False
                with self._lock:
                    if not self._subs:  # nobody listens: let the thread end
                        self._thread = None
                        return
            except Exception as exc:
                if is_outage(exc):  # Redis down: keep trying, the page shows the gap
                    self.outage.failed(exc)
                else:
                    log.exception("live stream reader failed; retrying in 1 s")
                self._stop.wait(1.0)
