"""TEST ONLY: a TCP forwarder in front of a server, whose open connections a test can cut
silently -- what a NAT, firewall or proxy that drops a flow does: the client's socket stays
open, what it sends goes nowhere and no reply, error or FIN ever comes.  Connections made
after :meth:`TcpProxy.cut` are forwarded as before."""

from __future__ import annotations

import selectors
import socket
import threading


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs = []  # (client, upstream, cut flag)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()

    def url(self, db: int = 0) -> str:
        return f"redis://{self.target[0]}:{self.port}/{db}"

    def connections(self) -> int:
        """Connections made so far."""
        with self._lock:
            return len(self._pairs)

    def cut(self) -> int:
        """Blackhole every connection open now; returns how many."""
        with self._lock:
            for pair in self._pairs:
                pair[2].set()
            return len(self._pairs)

    def close(self):
        self._stop.set()
        self._listener.close()
        with self._lock:
            for client, upstream, _ in self._pairs:
                for s in (client, upstream):
                    try:
                        s.close()
                    except OSError:
                        pass

    def _accept(self):
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            pair = (client, upstream, threading.Event())
            with self._lock:
                self._pairs.append(pair)
            threading.Thread(target=self._pump, args=pair, daemon=True).start()

    def _pump(self, client, upstream, cut):
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.2):
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    if not cut.is_set():  # cut: read and dropped, never answered
                        key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            upstream.close()
            if not cut.is_set():  # a cut flow never ends for its client (close() ends it)
                client.close()
