"""The status page rides out a Redis outage (issue 11, "Reconnects"): real redis-server with
AOF, real gunicorn (``cuzk-tasks web``), no mocks.

While Redis is killed, paused (SIGSTOP: connections stay open, nothing answers), or busy
with a script past ``lua-time-limit`` (every command answered BUSY), every
page that reads it answers 503 "state store unreachable" within the read timeout -- never
a hang, never a 500, never the Redis URL -- and the same gunicorn workers serve the status
again once Redis is back on its AOF.  Each web process logs one line per outage.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from support.processes import start_logged, stop_process_group
from cuzk_tasks.dev.local_redis import free_port

pytestmark = [pytest.mark.slow, pytest.mark.chaos]

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT_S = 1.0  # CUZK_WEB_REDIS_TIMEOUT_S of the served app

if not __import__("shutil").which("redis-server"):
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


def _get(url, accept="application/json"):
    """(status, headers, body text, seconds) of a GET; HTTP errors are answers too."""
    t0 = time.monotonic()
    req = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read().decode(), time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(), time.monotonic() - t0


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    from cuzk_tasks.dev.local_redis import LocalRedis
    from cuzk_tasks.state import StateStore

    base = tmp_path_factory.mktemp("web-outage")
    server = LocalRedis(aof=True)
    port = free_port()
    env = dict(os.environ, CUZK_REDIS_URL=server.url, CUZK_PREFIX="wo",
               CUZK_WEB_BIND=f"127.0.0.1:{port}", CUZK_WEB_WORKERS="2",
               CUZK_WEB_REDIS_TIMEOUT_S=str(TIMEOUT_S), CUZK_WEB_CACHE_MAX_AGE_MS="0",
               CUZK_WEB_SSE_REFRESH_S="0.5", PYTHONPATH=os.pathsep.join(
                   p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    store = StateStore.from_url(server.url, prefix="wo")
    job, _ = store.create_job(None, "mulchain", "groth16", 0, None, [{"input": "{}"}])
    proc = start_logged([sys.executable, "-m", "cuzk_tasks", "web"], base / "web.log", env, ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, (base / "web.log").read_text()
        try:
            if _get(url + "/healthz")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, (base / "web.log").read_text()
        time.sleep(0.2)
    try:
        yield {"url": url, "server": server, "proc": proc, "job": job,
               "log": lambda: (base / "web.log").read_text(errors="replace")}
    finally:
        stop_process_group(proc)
        server.stop()


def _status_ok(web):
    status, _, body, _ = _get(web["url"] + "/api/status")
    return status == 200 and any(j["id"] == web["job"] for j in json.loads(body)["jobs"])


def _wait_ok(web, timeout_s=15):
    t0 = time.monotonic()
    while not _status_ok(web):
        assert time.monotonic() - t0 < timeout_s, "the page did not serve again\n" + web["log"]()
        time.sleep(0.1)
    return time.monotonic() - t0


def _check_unreachable(web, hang_bound_s):
    """Every Redis-reading route answers 503, fast, without the URL; gunicorn stays up."""
    url, redis_url = web["url"], web["server"].url
    for path, accept in (("/api/status", "application/json"), ("/metrics", "text/plain"),
                         (f"/api/jobs/{web['job']}", "application/json")):
        status, headers, body, took = _get(url + path, accept)
        assert status == 503, (path, status, body)
        doc = json.loads(body)
        assert doc["error"] == "state store unreachable" and doc["retry_after_s"] == 1, doc
        assert doc["redis"] in ("ConnectionError", "TimeoutError", "BusyLoadingError",
                                "ResponseError"), doc  # the last: BUSY
        assert headers["Retry-After"] == "1"
        assert took < hang_bound_s, f"{path} took {took:.2f} s"
        assert redis_url.split("//")[1] not in body
    status, _, body, took = _get(url + "/", "text/html")
    assert status == 503 and "State store unreachable" in body and 'http-equiv="refresh"' in body
    assert took < hang_bound_s
    status, _, body, _ = _get(url + "/healthz")
    assert status == 503 and json.loads(body)["ok"] is False
    assert web["proc"].poll() is None


def _sse_status_frames(url, stop, seen):
    """Reads /api/events until ``stop``; appends (monotonic time, event) per frame."""
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/api/events")
    resp = conn.getresponse()
    while not stop.is_set():
        line = resp.fp.readline()
        if not line:
            seen.append((time.monotonic(), "closed"))
            return
        if line.startswith(b"event: "):
            seen.append((time.monotonic(), line[7:].strip().decode()))
    conn.close()


def test_redis_killed_then_restarted_on_its_aof(web):
    assert _status_ok(web)
    stop, frames = threading.Event(), []
    reader = threading.Thread(target=_sse_status_frames, args=(web["url"], stop, frames),
                              daemon=True)
    reader.start()
    time.sleep(1.5)
    web["server"].kill()
    killed = time.monotonic()
    # a refused connection fails at once: the bound is the reconnect's backoff, not a timeout
    for _ in range(3):
        _check_unreachable(web, hang_bound_s=2 * TIMEOUT_S + 0.5)
        time.sleep(1)
    web["server"].restart()
    restarted = time.monotonic()
    took = _wait_ok(web)
    print(f"Redis down {restarted - killed:.1f} s; the page served again {took:.2f} s after "
          f"the restart")
    time.sleep(1.5)  # the live stream's reader thread reads again: a status frame follows
    stop.set()
    after = [event for at, event in frames if at > restarted]
    assert "status" in after, frames
    assert "closed" not in [event for _, event in frames], frames
    log = web["log"]()
    outages = log.count("Redis unreachable")
    backs = log.count("Redis is back after")
    # one line per web process (2 workers) per outage at most, however many requests failed
    assert 1 <= outages <= 2 and 1 <= backs <= 2, log[-4000:]
    assert "Traceback" not in log, log[-4000:]


def test_redis_paused_longer_than_a_read_timeout(web):
    _wait_ok(web)
    before = web["log"]().count("Redis unreachable")
    web["server"].proc.send_signal(signal.SIGSTOP)
    try:
        # connections stay open and nothing answers: each read waits for its timeout, once
        # more after the reconnect, and no longer
        _check_unreachable(web, hang_bound_s=2 * TIMEOUT_S + 1.5)
    finally:
        web["server"].proc.send_signal(signal.SIGCONT)
    took = _wait_ok(web)
    print(f"the page served again {took:.2f} s after SIGCONT")
    log = web["log"]()
    assert 1 <= log.count("Redis unreachable") - before <= 2, log[-4000:]
    assert "Traceback" not in log, log[-4000:]


def test_redis_busy_with_a_long_script(web):
    """A Lua script past ``lua-time-limit`` (issue 24): Redis answers every read BUSY until
    it ends -- an outage like the others: 503, one log line, no 500, no traceback."""
    import redis

    _wait_ok(web)
    before = web["log"]().count("Redis unreachable")
    operator = redis.Redis(host="127.0.0.1", port=web["server"].port, socket_timeout=30)
    operator.config_set("lua-time-limit", 100)
    script = ("local t = tonumber(redis.call('TIME')[1]) + 3 "
              "while tonumber(redis.call('TIME')[1]) < t do end return 1")
    busy = threading.Thread(target=operator.eval, args=(script, 0))
    busy.start()
    try:
        time.sleep(0.5)
        _check_unreachable(web, hang_bound_s=2 * TIMEOUT_S + 1.5)
    finally:
        busy.join(30)
    took = _wait_ok(web)
    print(f"the page served again {took:.2f} s after the script ended")
    log = web["log"]()
    assert 1 <= log.count("Redis unreachable") - before <= 2, log[-4000:]
    assert "Traceback" not in log, log[-4000:]
