"""The status page in headless Chromium during a real pipeline run.

Real redis-server, real workers (two CPU-backend device workers, one CPU worker, as in
tests/test_pipeline_e2e.py), the app served by gunicorn exactly as ``cuzk-tasks web`` does.
Checks: the page updates a worker card and a partition's state live (no reload), logs no
console errors, and leaves a screenshot in artifacts/status-page.png.

Needs ``apt-get install chromium chromium-driver`` and ``pip install selenium`` (the
``browser`` extra); the browser is never downloaded.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
import urllib.request

from support import instruments
import pytest
from support.processes import dump_stacks, start_logged, stop_process_group, write_circuits_toml

from cuzk_tasks.dev.local_redis import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
HOST = "browserhost"
LONG_KIND = "groth16-porep-snap-deal-update-32gib-v1x"  # 40 characters

if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("headless browser test needs Debian's chromium and chromium-driver "
                "(apt-get install -y chromium chromium-driver)", allow_module_level=True)
try:
    import selenium  # noqa: F401
except ImportError:
    pytest.skip("headless browser test needs selenium (pip install 'cuzk-tasks[browser]')",
                allow_module_level=True)
if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


def _config(base):
    return write_circuits_toml(base / "cuzk.toml", {
        "mulchain": (LONG_KIND, FIX / "mulchain"),
        "poseidon": ("poseidon-t3", FIX / "poseidon"),
        "assert_fail": ("assert-check", FIX / "assert_fail")})


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from support.redis_server import RedisServer

    from cuzk_tasks.settings.config import load_settings

    base = tmp_path_factory.mktemp("browser")
    server = RedisServer()
    port = free_port()
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(_config(base)), "CUZK_REDIS_URL": server.url, "CUZK_PREFIX": "br",
        "CUZK_HOSTNAME": HOST, "CUZK_HEARTBEAT_INTERVAL_S": "0.25", "CUZK_HEARTBEAT_TTL_S": "1.5",
        "CUZK_SPOOL_DIR": str(base / "spool"), "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),  # the TEST INSTRUMENTS below
        # TEST INSTRUMENTS: slow enough that a person (and the browser) sees every phase
        "CUZK_TEST_PROVE_DELAY_MS": "900", "CUZK_TEST_FINALIZE_DELAY_MS": "300",
        "CUZK_WEB_BIND": f"127.0.0.1:{port}", "CUZK_WEB_WORKERS": "1",
        "CUZK_WEB_SSE_MIN_INTERVAL_MS": "150", "CUZK_WEB_TIMELINE_WINDOW_S": "60",
    })
    procs = {}

    def start(name, argv, extra_env=None):
        procs[name] = start_logged(argv, base / f"{name}.log", dict(env, **(extra_env or {})), ROOT)

    def logs():
        return "\n".join(f"----- {n} -----\n" + (base / f"{n}.log").read_text(errors="replace")[-20000:]
                         for n in procs)

    try:
        py = [sys.executable, "-m", "cuzk_tasks"]
        start("dev0", py + ["worker", "--device", "0", "--backend", "cpu"])
        # dev1 is a GPU worker whose `import cupy` is the CUDA emulator (tests/support/cupy_emu.py):
        # its card must show what a GPU worker publishes (device name, memory)
        start("dev1", py + ["worker", "--device", "1", "--backend", "gpu"], {"PYTHONPATH": os.pathsep.join(
            [str(ROOT / "tests" / "cuda_emu" / "site"), env["PYTHONPATH"]])})
        start("cpu", py + ["worker", "--cpu", "--concurrency", "2"])
        start("web", py + ["web"])  # cuzk-tasks web: gunicorn -c cuzk_tasks/web/gunicorn.conf.py
        settings = load_settings(env=env)
        from cuzk_tasks.client import Client

        client = Client(settings=settings)
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            live = {w["worker_id"] for w in client.store.live_device_workers()}
            try:
                with urllib.request.urlopen(url + "healthz", timeout=2) as r:
                    web_ok = r.status == 200
            except OSError:
                web_ok = False
            if web_ok and live >= {f"{HOST}:dev0", f"{HOST}:dev1"}:
                break
            for name, p in procs.items():
                assert p.poll() is None, f"{name} exited early\n{logs()}"
            time.sleep(0.2)
        else:
            pytest.fail("stack did not come up\n" + logs())
        yield {"url": url, "client": client, "logs": logs, "base": base, "procs": procs}
    finally:
        for p in procs.values():
            stop_process_group(p)
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
                 f"--user-data-dir={profile}", "--window-size=1440,1900", "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _input(name):
    return json.loads((FIX / name / "input.json").read_text())


def _wait(driver, cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = driver.execute_script(cond)
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


CARD_STATES = "return Array.from(document.querySelectorAll('#devices .card')).map(c => c.className).join('|')"
PART_STATES = ("return Array.from(document.querySelectorAll('#jobs .cell')).map("
               "c => c.closest('tr').dataset.job + '#' + c.dataset.idx + '=' + c.dataset.state)")


def test_status_page_updates_live_without_reload(stack, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    client = stack["client"]
    browser.get(stack["url"])
    browser.execute_script("window.__noReload = 'still-here';")
    _wait(browser, "return document.getElementById('conn').textContent === 'live'", 15, "live stream")
    cards_before = browser.execute_script(CARD_STATES)
    assert "st-proving" not in cards_before, cards_before

    job = client.submit("mulchain", [{"input": _input("mulchain")}] * 8)
    client.submit("poseidon", [{"input": _input("poseidon")}] * 3)
    bad = json.loads((FIX / "assert_fail" / "input_bad.json").read_text())
    client.submit("assert_fail", [{"input": bad}])

    # (2) a worker card turns proving, live
    _wait(browser, "return document.querySelector('#devices .card.st-proving') !== null", 30,
          "a proving worker card")
    card = browser.execute_script(
        "return document.querySelector('#devices .card.st-proving').innerText")
    assert job in card or "poseidon" in card or LONG_KIND in card, card
    # a partition of the job shows a state, then a later one, without reload
    first = _wait(browser, f"return Array.from(document.querySelectorAll('#jobs tr[data-job=\"{job}\"] .cell'))"
                           ".map(c => c.dataset.state).join(',')", 10, "job row")
    _wait(browser, f"return Array.from(document.querySelectorAll('#jobs tr[data-job=\"{job}\"] .cell'))"
                   ".some(c => c.dataset.state === 'proving')", 30, "a partition in proving")
    time.sleep(2.0)  # let the page show a busy moment
    browser.save_screenshot(str(ARTIFACTS / "status-page.png"))
    later = _wait(browser, f"return Array.from(document.querySelectorAll('#jobs tr[data-job=\"{job}\"] .cell'))"
                           ".map(c => c.dataset.state).join(',')", 10, "job row")
    assert later != first, (first, later)
    # the long proof kind is shown in full (no ellipsis, not cut)
    assert browser.execute_script(f"return document.body.innerText.includes({json.dumps(LONG_KIND)})")
    assert browser.execute_script("return window.__noReload") == "still-here"

    # the job finishes: its partitions leave the in-flight table and the card goes idle again
    try:
        client.wait(job, timeout=120)
    except Exception:
        dump_stacks(stack["procs"].values())
        print(stack["logs"]())
        raise
    _wait(browser, f"return document.querySelector('#recent a[href$=\"{job}\"]') !== null", 20,
          "job in the recently finished list")
    _wait(browser, "return document.querySelector('#failures td.error') !== null", 30,
          "the failed job in recent failures")
    # the GPU worker's card shows its device and memory (published after each partition)
    _wait(browser, "return document.body.innerText.includes('cuzk CUDA emulator (CPU)') && "
                   "document.querySelector('#devices progress') !== null", 20, "the GPU worker's device")
    time.sleep(0.5)
    browser.save_screenshot(str(ARTIFACTS / "status-page-after.png"))
    assert browser.execute_script("return window.__noReload") == "still-here"

    # (3) no console errors
    errors = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, errors
