"""The gunicorn worker of the status page: gthread, except that a request reaches a thread
only once it has fully arrived (issue 24, slowloris).

gunicorn's gthread reads each request head in a pool thread with a blocking socket: a
client that sends its head a byte a second holds that thread as long as it likes, and a few
hundred such clients starve /healthz.  Here the pool thread never waits: it takes what the
socket holds without blocking, and until the head (and a body of up to
``WEB_BUFFERED_BODY_BYTES``, by Content-Length) is complete the connection goes back to the
worker's poller, holding a socket but no thread; a larger or chunked body is refused by
closing the connection.  A client gets ``client_timeout_s``
(``CUZK_WEB_CLIENT_TIMEOUT_S``) from its request's first byte; past it the connection is
closed.  A complete request is then served by gthread's own code, reading from the buffer.

Closing a connection: gthread half-closes it and then drains what the client still sends
for up to 2 s in its main loop, blocking -- ten clients that send an HTTP/1.0 request and
keep their socket open stalled a worker for 20 s.  Here the drain waits on the poller.

Requires gunicorn's gthread of version 27 (ops/constraints.txt pins it): it relies on its
connection objects (``TConn``: ``sock``, ``parser``, ``init``) and its pending-connection
poller (``pending_conns``, ``on_pending_socket_readable``).  TLS and HTTP/2 prior-knowledge
connections (neither is used by the page) take gthread's path unchanged.
"""

from __future__ import annotations

import collections
import functools
import os
import re
import selectors
import socket
import time

from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import ThreadWorker

from cuzk_tasks.settings import defaults

#: a head larger than this never completes: the connection is closed
MAX_HEAD_BYTES = 65536
#: a closing connection is drained this long at most (gthread's close_graceful: 2 s, 64 KiB)
CLOSE_LINGER_S = 2.0
CLOSE_DRAIN_BYTES = 65536
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*(\d+)[ \t]*\r\n", re.I)
_TRANSFER_ENCODING = re.compile(rb"\r\ntransfer-encoding[ \t]*:", re.I)
_PARK = object()  # handle(): wait on the poller for more bytes, holding no thread
_CUT = object()  # handle(): close at once (gthread's graceful close would linger on the
#                  main loop, up to 2 s per connection, while a hostile client keeps sending)


class _Arriving:
    """The bytes of a request read so far, and when the client must have sent it all."""

    __slots__ = ("buf", "deadline")

    def __init__(self, buf: bytes, deadline: float):
        self.buf = bytearray(buf)
        self.deadline = deadline


def request_complete(buf) -> bool | None:
    """True when ``buf`` holds a whole request head and its Content-Length body, False when
    more is needed, None when the request is refused unanswered: a head over MAX_HEAD_BYTES,
    a body over WEB_BUFFERED_BODY_BYTES, or a chunked one (the page takes bodies only on
    POST /login, a small form; a thread would wait on a body sent slowly)."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None if len(buf) > MAX_HEAD_BYTES else False
    if _TRANSFER_ENCODING.search(buf, 0, end + 2):
        return None
    match = _CONTENT_LENGTH.search(buf, 0, end + 2)
    length = int(match.group(1)) if match else 0
    if length > defaults.WEB_BUFFERED_BODY_BYTES:
        return None
    return len(buf) >= end + 4 + length


class StatusPageWorker(ThreadWorker):
    """gthread whose pool threads only ever serve requests that have fully arrived."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        raw = os.environ.get("CUZK_WEB_CLIENT_TIMEOUT_S", "").strip()
        self.client_timeout_s = float(raw) if raw else defaults.WEB_CLIENT_TIMEOUT_S
        self.closing_conns = collections.deque()  # half-closed, drained on the poller

    def _gthread_path(self, conn) -> bool:
        return (self.cfg.is_ssl or conn.is_http2
                or negotiation.prior_knowledge_allowed(self.cfg, conn.client))

    def handle(self, conn):
        """Runs in a pool thread: serve the request if it has arrived, else park it."""
        if self._gthread_path(conn):
            return super().handle(conn)
        arriving = getattr(conn, "cuzk_arriving", None)
        if arriving is None:  # a request starts (new connection, or the next on a kept-alive one)
            held = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
            arriving = conn.cuzk_arriving = _Arriving(held, time.monotonic() + self.client_timeout_s)
        try:
            conn.sock.setblocking(False)
            while True:
                chunk = conn.sock.recv(65536)
                if not chunk:
                    return _CUT  # the client went away before finishing its request
                arriving.buf += chunk
                if len(arriving.buf) > MAX_HEAD_BYTES + defaults.WEB_BUFFERED_BODY_BYTES:
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            return _CUT
        complete = request_complete(arriving.buf)
        if complete is None:
            return _CUT
        if not complete:
            if time.monotonic() > arriving.deadline:
                self.log.debug("closing %s: request incomplete after %.0f s", conn.client,
                               self.client_timeout_s)
                return _CUT
            return _PARK
        conn.cuzk_arriving = None
        conn.init()  # the HTTP/1 parser (no-op on a kept-alive connection)
        conn.parser.unreader.unread(bytes(arriving.buf))
        return super().handle(conn)

    def finish_request(self, conn, fs):
        """Runs in the main loop: a parked connection waits on the poller for more bytes."""
        result = None if fs.cancelled() or fs.exception() is not None else fs.result()
        if result is False and not conn.is_http2:
            return self._close_soon(conn)
        if result is not _PARK and result is not _CUT:
            return super().finish_request(conn, fs)
        if result is _CUT or not self.alive:
            return self._drop(conn)
        # gthread's pending list is ordered by timeout: now + the same span keeps it so; a
        # trickling client is cut by handle() at its first byte past its deadline
        conn.timeout = time.monotonic() + self.client_timeout_s
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ,
                             functools.partial(self.on_pending_socket_readable, conn))

    def _close_soon(self, conn):
        """Half-close (FIN after the response), then drain on the poller until the client
        closes too or CLOSE_LINGER_S pass: its last response is not cut by a reset, and
        the main loop never waits."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
            conn.sock.setblocking(False)
        except OSError:
            return self._drop(conn)
        conn.timeout = time.monotonic() + CLOSE_LINGER_S
        conn.cuzk_drained = 0
        self.closing_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ,
                             functools.partial(self._on_closing_readable, conn))

    def _on_closing_readable(self, conn, _sock):
        try:
            data = conn.sock.recv(CLOSE_DRAIN_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        conn.cuzk_drained += len(data)
        if not data or conn.cuzk_drained >= CLOSE_DRAIN_BYTES:
            self.closing_conns.remove(conn)
            self._unregister_and_drop(conn)

    def _unregister_and_drop(self, conn):
        try:
            self.poller.unregister(conn.sock)
        except (OSError, KeyError, ValueError):
            pass
        self._drop(conn)

    def _drop(self, conn):
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self):
        """gthread's sweep of expired waiting connections (each turn of the main loop), and
        of closing connections past their linger."""
        super().murder_pending()
        now = time.monotonic()
        while self.closing_conns and self.closing_conns[0].timeout <= now:
            self._unregister_and_drop(self.closing_conns.popleft())
