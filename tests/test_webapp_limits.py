"""The status page under hostile clients (issue 24): real redis-server, real gunicorn
(``cuzk-tasks web``, its worker class and config), raw sockets as the clients.

* Slow clients (slowloris: a request head a byte at a time, or connections that send
  nothing) hold no gunicorn thread: /healthz answers meanwhile, and they are cut after
  CUZK_WEB_CLIENT_TIMEOUT_S.
* Live streams are capped per client address and per process: the next one is answered
  429 with Retry-After, /healthz and /api/status still answer, and a closed stream's slot
  is given to the next client.

The server runs ONE process with 24 threads so that a few dozen sockets would exhaust it.
"""

from __future__ import annotations

import os
import pathlib
import socket
import sys
import threading
import time
import urllib.request

import pytest
from support.processes import start_logged, stop_process_group

from cuzk_tasks.dev.local_redis import free_port

pytestmark = [pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parent.parent
THREADS = 24
MAX_STREAMS = 8  # THREADS - WEB_SPARE_THREADS
PER_CLIENT = 3
CLIENT_TIMEOUT_S = 4

if not __import__("shutil").which("redis-server"):
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)
pytest.importorskip("gunicorn")


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    from cuzk_tasks.dev.local_redis import LocalRedis

    base = tmp_path_factory.mktemp("web-limits")
    server = LocalRedis()
    port = free_port()
    env = dict(os.environ, CUZK_REDIS_URL=server.url, CUZK_PREFIX="wl",
               CUZK_WEB_BIND=f"127.0.0.1:{port}", CUZK_WEB_WORKERS="1",
               CUZK_WEB_THREADS=str(THREADS), CUZK_WEB_SSE_MAX_STREAMS=str(MAX_STREAMS),
               CUZK_WEB_SSE_MAX_STREAMS_PER_CLIENT=str(PER_CLIENT),
               CUZK_WEB_CLIENT_TIMEOUT_S=str(CLIENT_TIMEOUT_S), CUZK_WEB_SSE_REFRESH_S="0.5",
               CUZK_WEB_SSE_RETRY_AFTER_S="17", PYTHONPATH=os.pathsep.join(
                   p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    proc = start_logged([sys.executable, "-m", "cuzk_tasks", "web"], base / "web.log", env, ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, (base / "web.log").read_text()
        try:
            if healthz(url, timeout=5) == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, (base / "web.log").read_text()
        time.sleep(0.2)
    try:
        yield {"url": url, "port": port, "log": lambda: (base / "web.log").read_text(errors="replace")}
    finally:
        stop_process_group(proc)
        server.stop()


def healthz(url, timeout=5.0) -> int:
    with urllib.request.urlopen(url + "/healthz", timeout=timeout) as r:
        return r.status


def timed_get(url, path, timeout=8.0):
    """(status, seconds) of a GET; a timeout is a failure of the test, not an exception."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(url + path, timeout=timeout) as r:
            r.read()
            return r.status, time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, time.monotonic() - t0
    except OSError as e:
        return f"{type(e).__name__}: {e}", time.monotonic() - t0


def connect(port, source="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def server_closed(sock) -> bool:
    """Whether the server has closed ``sock`` (EOF or reset), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def test_slow_clients_hold_no_thread_and_are_cut(web):
    """40 connections trickle a request head a byte every 0.5 s and 20 send nothing: more
    than the 24 threads.  /healthz answers within a few seconds all along (with gthread
    each trickler held a thread: it timed out), and the server cuts the tricklers after
    CUZK_WEB_CLIENT_TIMEOUT_S."""
    trickle = [connect(web["port"]) for _ in range(40)]
    idle = [connect(web["port"]) for _ in range(20)]
    for s in trickle:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    stop = threading.Event()

    def drip():
        while not stop.wait(0.5):
            for s in trickle:
                try:
                    s.send(b"a")
                except OSError:
                    pass

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        time.sleep(1.5)
        for _ in range(3):
            status, took = timed_get(web["url"], "/healthz")
            assert status == 200 and took < 4, (status, took, web["log"]()[-2000:])
            time.sleep(0.5)
        deadline = time.monotonic() + CLIENT_TIMEOUT_S + 15
        while not all(server_closed(s) for s in trickle):
            assert time.monotonic() < deadline, \
                f"{sum(not server_closed(s) for s in trickle)} slow clients still connected"
            time.sleep(0.5)
    finally:
        stop.set()
        dripper.join()
        for s in trickle + idle:
            s.close()
    assert timed_get(web["url"], "/healthz")[0] == 200


def read_responses(sock, n):
    """The status codes of ``n`` responses read from ``sock`` (Content-Length bodies)."""
    buf, codes = b"", []
    while len(codes) < n:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, (codes, buf)
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        while len(buf) < length:
            buf += sock.recv(65536)
        buf = buf[length:]
        codes.append(int(head.split(b" ", 2)[1]))
    return codes


def test_clients_that_never_close_do_not_stall_the_worker(web):
    """gthread drains a closing connection for up to 2 s in its main loop: ten clients that
    sent an HTTP/1.0 request and kept their socket open stalled /healthz for 20 s.  Each
    still gets its whole response."""
    socks = [connect(web["port"]) for _ in range(12)]
    try:
        for s in socks:
            s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        time.sleep(0.5)
        status, took = timed_get(web["url"], "/healthz")
        assert status == 200 and took < 3, (status, took)
        assert read_responses(socks[0], 1) == [200]
        last = socks[-1]  # the server half-closes it: a whole response, then EOF
        last.settimeout(15)
        data = b""
        while chunk := last.recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.0 200") and data.endswith(b"}\n"), data
    finally:
        for s in socks:
            s.close()


def test_keep_alive_pipelining_and_bodies_still_work(web):
    """The worker hands complete requests to gthread: two on one kept-alive connection,
    two pipelined in one write, a head split over writes, and a POST body all answer."""
    with connect(web["port"]) as s:
        for _ in range(2):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_responses(s, 1) == [200]
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /api/status HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_responses(s, 2) == [200, 200]
        s.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        time.sleep(0.3)
        s.sendall(b"st: x\r\n\r\n")
        assert read_responses(s, 1) == [200]
        body = b"token=x&next=%2F"
        s.sendall(b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded"
                  b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:5])
        time.sleep(0.3)
        s.sendall(body[5:])
        assert read_responses(s, 1) == [302]  # no token configured: /login sends to /


def test_what_counts_as_a_complete_request():
    from cuzk_tasks.web.worker import MAX_HEAD_BYTES, request_complete

    assert request_complete(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is True
    assert request_complete(b"GET / HTTP/1.1\r\nHost: x\r\n") is False
    assert request_complete(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab") is False
    assert request_complete(b"POST / HTTP/1.1\r\ncontent-length:3\r\n\r\nabc") is True
    # refused unanswered: chunked, too large a body, a head that never ends
    assert request_complete(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") is None
    assert request_complete(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n") is None
    assert request_complete(b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEAD_BYTES) is None


def open_stream(port, source):
    """A raw GET /api/events from ``source``: (socket, status code, head text)."""
    s = connect(port, source)
    s.sendall(b"GET /api/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, head
        head += chunk
    text = head.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    return s, int(text.split(" ", 2)[1]), text


def test_live_streams_are_capped_per_client_and_per_process(web):
    port = web["port"]
    opened, refused = [], []
    try:
        for source in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
            for _ in range(PER_CLIENT + 2):
                sock, code, head = open_stream(port, source)
                (opened if code == 200 else refused).append((source, sock, code, head))
        by_source = {src: sum(1 for s, *_ in opened if s == src) for src in ("127.0.0.1", "127.0.0.2", "127.0.0.3")}
        assert by_source == {"127.0.0.1": PER_CLIENT, "127.0.0.2": PER_CLIENT,
                             "127.0.0.3": MAX_STREAMS - 2 * PER_CLIENT}, by_source
        assert len(refused) == 3 * (PER_CLIENT + 2) - MAX_STREAMS
        for _, _, code, head in refused:
            assert code == 429 and "Retry-After: 17" in head, head
        # every stream slot in use: the spare threads serve the rest
        for path in ("/healthz", "/api/status", "/healthz"):
            status, took = timed_get(web["url"], path)
            assert status == 200 and took < 4, (path, status, took)
        # a stream that ends gives its slot to the next client (freed at the server's next
        # write to it: status pushes every CUZK_WEB_SSE_REFRESH_S)
        src, sock, _, _ = opened.pop(0)
        sock.close()
        deadline = time.monotonic() + 20
        while True:
            s, code, head = open_stream(port, src)
            if code == 200:
                opened.append((src, s, code, head))
                break
            s.close()
            assert time.monotonic() < deadline, "a closed stream's slot was never freed"
            time.sleep(0.5)
    finally:
        for _, sock, *_ in opened + refused:
            sock.close()
