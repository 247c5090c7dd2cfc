"""The status page in headless Chromium when its live stream is refused (issue 24): the
server's per-client cap answers /api/events with 429, and the page polls /api/status
instead -- it shows "polling" and new jobs -- then goes live once a slot is free.

Real redis-server and gunicorn (``cuzk-tasks web``); no workers: jobs are created through
the state store.  Needs Debian's chromium and chromium-driver and selenium, like
tests/test_browser.py.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from support.processes import start_logged, stop_process_group

from cuzk_tasks.dev.local_redis import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("headless browser test needs Debian's chromium and chromium-driver", allow_module_level=True)
pytest.importorskip("selenium", reason="pip install 'cuzk-tasks[browser]'")
if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture
def web(tmp_path):
    from cuzk_tasks.dev.local_redis import LocalRedis
    from cuzk_tasks.state import StateStore

    server = LocalRedis()
    port = free_port()
    env = dict(os.environ, CUZK_REDIS_URL=server.url, CUZK_PREFIX="bl",
               CUZK_WEB_BIND=f"127.0.0.1:{port}", CUZK_WEB_WORKERS="1",
               CUZK_WEB_SSE_MAX_STREAMS_PER_CLIENT="1", CUZK_WEB_POLL_INTERVAL_MS="500",
               CUZK_WEB_SSE_REFRESH_S="0.5", CUZK_WEB_CACHE_MAX_AGE_MS="0",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    proc = start_logged([sys.executable, "-m", "cuzk_tasks", "web"], tmp_path / "web.log", env, ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, (tmp_path / "web.log").read_text()
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=3) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, (tmp_path / "web.log").read_text()
        time.sleep(0.2)
    try:
        yield {"url": url, "port": port, "store": StateStore.from_url(server.url, prefix="bl")}
    finally:
        stop_process_group(proc)
        server.stop()


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="cuzk-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 f"--user-data-dir={profile}", "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_page_polls_while_its_stream_is_refused_then_goes_live(web, browser):
    # this client's one stream slot, taken by a raw connection
    hog = socket.create_connection(("127.0.0.1", web["port"]), timeout=10)
    hog.sendall(b"GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
    assert hog.recv(64).startswith(b"HTTP/1.1 200")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(web["url"] + "/api/events", timeout=10)
    assert refused.value.code == 429
    try:
        browser.get(web["url"] + "/")
        conn = lambda: browser.find_element("id", "conn").text  # noqa: E731
        wait_for(lambda: conn() == "polling", 'the page showing "polling"')
        web["store"].create_job("polled-job", "mulchain", "groth16", 5, None, [{"input": "{}"}])
        wait_for(lambda: "polled-job" in browser.find_element("id", "jobs").text,
                 "a new job on the polling page")
        assert conn() == "polling"
    finally:
        hog.close()
    # the slot frees at the server's next write to the closed stream; the page retries its
    # stream 10 s after the refusal
    wait_for(lambda: conn() == "live", 'the page going "live"', timeout=40)
