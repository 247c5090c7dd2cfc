"""Celery's own tools against a running stack (issue 26): Flower, and Celery's CLI without our code.

A real redis-server, two device workers (CPU backend) and one CPU worker, all real processes.

* ``test_flower_lists_the_workers_and_a_jobs_tasks``: a real Flower (the ``flower`` package,
  test extra; skipped when it is not installed) started with only ``--broker`` shows, through
  its HTTP API, every worker online (their ``worker-heartbeat`` events) and one job's
  ``cuzk.submit``, ``cuzk.synthesize``, ``cuzk.prove`` and ``cuzk.finalize`` tasks in
  state SUCCESS (their task events).
* ``test_celery_cli_without_our_code_lists_every_worker``: ``celery --broker=URL inspect ping``,
  ``inspect active`` and ``status``, run with a clean environment from an empty directory (no
  ``-A``: Celery's and kombu's defaults), each get a reply from every worker; so does Flower's
  own inspect (``/api/workers?refresh=true``), ``test_flower_inspect_lists_every_worker``.

Why a default client got no reply before the workers used kombu's defaults (issue 26):
kombu's Redis transport joins the fields of an exchange binding (``_kombu.binding.<exchange>``
set members: routing key, pattern, queue) with its ``sep`` transport option, the same
separator it puts between a queue name and its priority step.  A default client binds its
reply queue as ``<id>\\x06\\x16\\x06\\x16<id>.reply.celery.pidbox``; a worker whose ``sep`` was
``":"`` split that member on ``":"``, got one field instead of three, and its reply publish
failed ("Control command error: ValueError('not enough values to unpack (expected 3, got
1)')").  With kombu 5.6 that error also left the worker's event loop without its BRPOP:
Flower's own inspect at its start stopped the stack.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from support.processes import Cluster, start_logged, stop_process_group, write_circuits_toml

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "toolshost"
HB_INTERVAL, HB_TTL = 0.25, 3.0
#: generous: two busy cores, shared with other test runs
STARTUP_S = 90
INSPECT_TIMEOUT_S = 10
#: a reply line of `celery inspect ...` / `celery status`: "->  dev0@host: OK"
REPLY_LINE = re.compile(r"^->\s+(\S+):\s+OK\b", re.M)
STAGE_TASKS = ("cuzk.submit", "cuzk.synthesize", "cuzk.prove", "cuzk.finalize")

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture(scope="module")
def tools_redis():
    """A redis-server of this module's own (Celery's queue and pidbox keys are not prefixed)."""
    from support.redis_server import RedisServer

    server = RedisServer()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stack(tools_redis, tmp_path_factory):
    """Two device workers and one CPU worker; ``stack.nodes``: their Celery node names."""
    from cuzk_tasks.settings.config import load_settings

    base = tmp_path_factory.mktemp("stack")
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(base / "cuzk.toml",
                                               {"mulchain": ("test-mul", FIX / "mulchain")})),
        "CUZK_REDIS_URL": tools_redis,
        "CUZK_PREFIX": "tools",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL),
        "CUZK_HEARTBEAT_TTL_S": str(HB_TTL),
        "CUZK_SPOOL_DIR": str(base / "spool"),
        "CUZK_RESULTS_DIR": str(base / "results"),
        "CUZK_THREADS": "1",
    })
    settings = load_settings(env=env)
    c = Cluster(base, env, settings, ROOT)
    try:
        c.start("dev0", "--device", "0", "--backend", "cpu")
        c.start("dev1", "--device", "1", "--backend", "cpu")
        c.start("cpu", "--cpu", "--concurrency", "1")
        # the node names worker.py gives Celery: devN@host, cpu<pid>@host
        c.nodes = {f"dev0@{HOST}", f"dev1@{HOST}", f"cpu{c.procs['cpu'].pid}@{HOST}"}
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            online = {w["worker_id"] for w in c.store.all_workers() if w.get("online")}
            if online >= {f"{HOST}:dev0", f"{HOST}:dev1"} and len(online) >= 3:
                break
            for name, proc in c.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{c.logs()}"
            time.sleep(0.2)
        else:
            pytest.fail("workers did not come up\n" + c.logs())
        yield c
    finally:
        c.stop_all()


def _clean_env(home):
    """Nothing of ours: no PYTHONPATH, no CUZK_*, no CELERY_* settings."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}


def _celery(*args):
    """Celery's command line of this interpreter's environment (``celery ARGS``)."""
    return [sys.executable, "-m", "celery", *args]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url, timeout=15):
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return json.loads(reply.read().decode())


def _poll(what, fn, deadline_s, on_timeout):
    """``fn()`` until it returns something true (connection errors count as not yet)."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {deadline_s} s (last: {last!r})\n{on_timeout()}")


def _job_tasks(tasks, job_id):
    """Flower's tasks of one job (its id in the task's args, kwargs or result), by name."""
    by_name = {}
    for task in tasks.values():
        text = " ".join(str(task.get(k) or "") for k in ("args", "kwargs", "result"))
        if job_id in text:
            by_name.setdefault(task.get("name"), []).append(task)
    return by_name


@pytest.fixture
def flower(stack, tmp_path):
    """A real Flower on the stack's broker (only ``--broker``: Celery's defaults, no app of
    ours), its API open (``FLOWER_UNAUTHENTICATED_API``); yields its base URL and a
    function returning its log and the workers'."""
    if importlib.util.find_spec("flower") is None:
        pytest.skip("Flower is not installed (pip install flower, or the 'test' extra)")
    port = _free_port()
    env = {**_clean_env(tmp_path), "FLOWER_UNAUTHENTICATED_API": "true"}
    log = tmp_path / "flower.log"
    proc = start_logged(_celery(f"--broker={stack.settings.broker_url}", "flower",
                                f"--port={port}", "--address=127.0.0.1",
                                f"--inspect_timeout={INSPECT_TIMEOUT_S * 1000}"),
                        log, env, tmp_path)
    url = f"http://127.0.0.1:{port}"

    def logs():
        return f"----- flower -----\n{log.read_text(errors='replace')[-4000:]}\n{stack.logs()}"

    try:
        def up():
            assert proc.poll() is None, f"flower exited ({proc.returncode})\n{logs()}"
            return _get_json(f"{url}/api/workers?status=true") is not None

        _poll("Flower answers", up, STARTUP_S, logs)
        yield url, logs
    finally:
        stop_process_group(proc)


def test_flower_lists_the_workers_and_a_jobs_tasks(stack, flower):
    from cuzk_tasks.client import Client

    url, logs = flower
    # every worker online in Flower's event state (worker-online / worker-heartbeat events);
    # also proves Flower's event receiver is connected before the job's events are sent
    _poll("Flower shows every worker online",
          lambda: {n for n, alive in _get_json(f"{url}/api/workers?status=true").items()
                   if alive} >= stack.nodes or None,
          STARTUP_S, logs)

    # by name, as a client without the circuit registry sends it: a cuzk.submit task
    client = Client(settings=stack.settings.replace(circuits={}))
    job_id = client.submit("mulchain", [{"input": json.loads((FIX / "mulchain" / "input.json").read_text())}])
    client.wait(job_id, timeout=STARTUP_S)

    def job_tasks_done():
        found = _job_tasks(_get_json(f"{url}/api/tasks"), job_id)
        ok = all(any(t.get("state") == "SUCCESS" for t in found.get(name, []))
                 for name in STAGE_TASKS)
        return found if ok else None

    found = _poll(f"Flower shows job {job_id}'s tasks in SUCCESS", job_tasks_done, STARTUP_S,
                  lambda: f"{_get_json(f'{url}/api/tasks')}\n{logs()}")
    for name in STAGE_TASKS:
        # one job of one partition: one task of each stage, run by a worker of the stack
        assert len(found[name]) == 1, (name, found[name])
        assert found[name][0]["worker"] in stack.nodes, (name, found[name][0])
    assert found["cuzk.prove"][0]["worker"] in {f"dev0@{HOST}", f"dev1@{HOST}"}


def test_flower_shows_a_job_as_one_tree(stack, flower):
    """Issue 49 item 5: every stage task of a job submitted by name has the job's
    ``cuzk.submit`` as its root, and as its parent the task whose step made it due
    (synthesize: submit; prove: its partition's synthesize; finalize: its prove), including
    the finalizes a CPU worker's relay thread publishes for the devices (before: 124 of 138
    had neither)."""
    from cuzk_tasks.client import Client

    url, logs = flower
    _poll("Flower shows every worker online",
          lambda: {n for n, alive in _get_json(f"{url}/api/workers?status=true").items()
                   if alive} >= stack.nodes or None,
          STARTUP_S, logs)
    parts = 4
    client = Client(settings=stack.settings.replace(circuits={}))
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    job_id = client.submit("mulchain", [{"input": inputs} for _ in range(parts)])
    client.wait(job_id, timeout=STARTUP_S)

    def tree_seen():
        found = _job_tasks(_get_json(f"{url}/api/tasks"), job_id)
        counts = {name: len([t for t in found.get(name, []) if t.get("state") == "SUCCESS"])
                  for name in STAGE_TASKS}
        done = counts == {"cuzk.submit": 1, "cuzk.synthesize": parts, "cuzk.prove": parts,
                          "cuzk.finalize": parts}
        return found if done else None

    found = _poll(f"Flower shows job {job_id}'s {parts} partitions' tasks in SUCCESS", tree_seen,
                  STARTUP_S, lambda: f"{_get_json(f'{url}/api/tasks')}\n{logs()}")
    submit = found["cuzk.submit"][0]["uuid"]
    by_id = {t["uuid"]: t for name in STAGE_TASKS for t in found[name]}
    parent_of = {"cuzk.synthesize": "cuzk.submit", "cuzk.prove": "cuzk.synthesize",
                 "cuzk.finalize": "cuzk.prove"}
    for name, parent_name in parent_of.items():
        for task in found[name]:
            assert task.get("root_id") == submit, (name, task)
            parent = by_id.get(task.get("parent_id"))
            assert parent is not None and parent["name"] == parent_name, (name, task)
    # one chain per partition: each synthesize has exactly one prove child, each prove one
    # finalize child
    for name in ("cuzk.prove", "cuzk.finalize"):
        parents = [t["parent_id"] for t in found[name]]
        assert len(set(parents)) == parts, (name, parents)


def test_flower_inspect_lists_every_worker(stack, flower):
    url, logs = flower
    workers = _get_json(f"{url}/api/workers?refresh=true", timeout=INSPECT_TIMEOUT_S * 3)
    assert set(workers) >= stack.nodes, (sorted(workers), logs())


@pytest.mark.parametrize("command", [("inspect", "ping"), ("inspect", "active"), ("status",)],
                         ids=lambda c: "-".join(c))
def test_celery_cli_without_our_code_lists_every_worker(stack, tmp_path, command):
    """No ``-A``, nothing of ours on the path or in the environment, an empty cwd."""
    argv = _celery(f"--broker={stack.settings.broker_url}", *command,
                   f"--timeout={INSPECT_TIMEOUT_S}")
    run = subprocess.run(argv, cwd=tmp_path, env=_clean_env(tmp_path), capture_output=True,
                         text=True, timeout=INSPECT_TIMEOUT_S + 60)
    why = f"{' '.join(command)}: rc {run.returncode}\n{run.stdout}\n{run.stderr}\n{stack.logs()}"
    assert run.returncode == 0, why
    # what a user reads: one "-> NODE: OK" line per worker that replied
    assert set(REPLY_LINE.findall(run.stdout)) >= stack.nodes, why
    if command == ("status",):
        assert re.search(rf"^{len(stack.nodes)} nodes online\.$", run.stdout, re.M), why
