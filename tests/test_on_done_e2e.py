"""on_done and the by-name reads, from a service that never imports this package.

Real processes: a redis-server, a device worker (CPU backend) and a CPU worker of ours, and
a SECOND Celery app -- a script written here, run with ``python -I -S`` (no PYTHONPATH, no
user site, no site-packages and so no editable-install hook, not our tree) in a clean
environment, on a site directory holding every third-party package of this interpreter but
not this one (:func:`_side_site`), that checks ``import cuzk_tasks`` fails --
which sends ``cuzk.submit`` by name with ``on_done`` pointing at its own task on its own
queue, runs a worker of its own for that queue, records what its task receives, and asks
``cuzk.status`` / ``cuzk.result`` by name.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import time

from support import instruments
import pytest
from support.processes import start_logged, stop_process_group, worker_argv, write_circuits_toml

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
CB_TASK, CB_QUEUE = "svc.job_done", "svc.callbacks"

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)

SIDE_APP = r'''
import sys

sys.path.append(sys.argv.pop(1))  # the side site (-I ignores PYTHONPATH)
import json

try:
    import cuzk_tasks  # noqa: F401
except ImportError:
    pass
else:
    sys.exit("cuzk_tasks is importable here: this app must not see it")

from celery import Celery

mode, url = sys.argv[1], sys.argv[2]
app = Celery("svc", broker=url, backend=url)
app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])


@app.task(name="%(task)s")
def job_done(**kwargs):
    with open(sys.argv[3], "a", encoding="utf-8") as f:
        f.write(json.dumps(kwargs) + "\n")


if mode == "worker":
    app.worker_main(["worker", "-Q", "%(queue)s", "-P", "solo", "-n", "svc@%%h",
                     "--without-mingle", "--without-gossip", "--loglevel", "INFO"])
elif mode == "call":  # [[task, kwargs(, priority)], ...] -> their replies, in order, on stdout
    calls = json.loads(sys.argv[3])
    replies = [app.send_task(c[0], kwargs=c[1], queue="cuzk.cpu",
                             **({"priority": c[2]} if len(c) > 2 else {})).get(timeout=60)
               for c in calls]
    print(json.dumps(replies))
''' % {"task": CB_TASK, "queue": CB_QUEUE}


def _side_site(base):
    """A site directory with every package installed for this interpreter except this one:
    not its files, not an editable install's finder, no ``.pth`` hook at all.  The side app
    runs on the same celery/kombu/redis and has no way to import cuzk_tasks."""
    site = base / "side-site"
    site.mkdir(exist_ok=True)
    ours = ("cuzk_tasks", "cuzk-tasks", "__editable__")
    paths = sysconfig.get_paths()
    for directory in dict.fromkeys([paths["purelib"], paths["platlib"]]):
        for entry in os.listdir(directory):
            if entry.startswith(ours) or entry.endswith(".pth") or (site / entry).exists():
                continue
            (site / entry).symlink_to(os.path.join(directory, entry))
    return site


def _side_python(base, program, *args):
    """argv of the side interpreter, ``python -I -S PROGRAM SIDE_SITE ARGS``: ``program`` is
    ``[script]`` or ``["-c", code]``; it finds the side site in ``sys.argv[1]``."""
    return [sys.executable, "-I", "-S", *program, str(_side_site(base)), *args]


def _clean_env(tmp_path):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
            "LANG": "C.UTF-8"}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from support.redis_server import RedisServer

    from cuzk_tasks.client import Client
    from cuzk_tasks.settings.config import load_settings

    base = tmp_path_factory.mktemp("ondone")
    server = RedisServer()
    config = write_circuits_toml(base / "cuzk.toml", {
        "mulchain": ("test-mul", FIX / "mulchain"),
        "slow_test": ("test-slow", FIX / "mulchain"),  # TEST ONLY: slow prove, to cancel
    })
    env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_REDIS_URL=server.url,
               CUZK_PREFIX="cuzk", CUZK_CPU_QUEUE="cuzk.cpu", CUZK_HOSTNAME="ondonehost",
               CUZK_SPOOL_DIR=str(base / "spool"), CUZK_THREADS="1",
               CUZK_HEARTBEAT_INTERVAL_S="0.25", CUZK_HEARTBEAT_TTL_S="1.5",
               CUZK_TEST_PROVE_DELAY_MS="slow_test=5000", CUZK_ALLOWED_INPUT_ROOTS=str(FIX),
               **instruments.env(os.environ.get("PYTHONPATH", "")))
    side = base / "side_app.py"
    side.write_text(SIDE_APP)
    received = base / "received.jsonl"
    procs = {}
    try:
        procs["dev0"] = start_logged(worker_argv("--device", "0", "--backend", "cpu"),
                                     base / "dev0.log", env, ROOT)
        procs["cpu"] = start_logged(worker_argv("--cpu", "--concurrency", "1"),
                                    base / "cpu.log", env, ROOT)
        procs["svc"] = start_logged(_side_python(base, [str(side)], "worker", server.url,
                                                 str(received)), base / "svc.log", _clean_env(base), base)
        client = Client(settings=load_settings(env=env))
        deadline = time.monotonic() + 60
        while not client.store.live_device_workers():
            for name, proc in procs.items():
                assert proc.poll() is None, f"{name} exited\n" + (base / f"{name}.log").read_text()
            assert time.monotonic() < deadline, (base / "dev0.log").read_text()[-3000:]
            time.sleep(0.1)

        def call(*calls):
            """Run the side app's caller (its own isolated process); its replies."""
            done = subprocess.run(_side_python(base, [str(side)], "call", server.url,
                                               json.dumps([list(c) for c in calls])), cwd=base,
                                  env=_clean_env(base), capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-3000:] + logs()
            return json.loads(done.stdout.strip().splitlines()[-1])

        def logs():
            return "".join(f"\n----- {n} -----\n" + (base / f"{n}.log").read_text()[-3000:]
                           for n in procs)

        def callbacks():
            if not received.exists():
                return []
            return [json.loads(line) for line in received.read_text().splitlines()]

        yield {"call": call, "callbacks": callbacks, "client": client, "logs": logs, "env": env}
    finally:
        for proc in procs.values():
            stop_process_group(proc)
        server.stop()


def test_the_side_app_cannot_import_this_package(service, tmp_path):
    probe = "import sys; sys.path.append(sys.argv[1]); import celery, kombu, redis; import cuzk_tasks"
    done = subprocess.run(_side_python(tmp_path, ["-c", probe]), cwd=tmp_path,
                          env=_clean_env(tmp_path), capture_output=True, text=True)
    # celery and friends import (the isolation is not vacuous); this package does not
    assert done.returncode != 0 and "No module named 'cuzk_tasks'" in done.stderr, done.stderr


def test_done_failed_cancelled_each_call_back_once_and_read_by_name(service):
    from cuzk_tasks.groth16 import verify

    call, client = service["call"], service["client"]
    on_done = {"task": CB_TASK, "queue": CB_QUEUE}
    good = {"input": json.loads((FIX / "mulchain" / "input.json").read_text())}
    ok_job, bad_job, slow_job = call(
        ("cuzk.submit", {"circuit": "mulchain", "partitions": [good, good], "on_done": on_done}),
        # passes submit's checks (inside the input roots), fails at synthesize: no such file
        ("cuzk.submit", {"circuit": "mulchain",
                         "partitions": [{"input_ref": str(FIX / "mulchain" / "no-such.json")}],
                         "on_done": on_done}),
        ("cuzk.submit", {"circuit": "slow_test", "partitions": [good], "on_done": on_done}))
    [cancel] = call(("cuzk.cancel", {"job_id": slow_job, "reason": "the service changed its mind"}))
    assert cancel == {"job_id": slow_job, "state": "cancelled", "cancelled": True}

    jobs = {ok_job, bad_job, slow_job}

    def mine():
        return [c for c in service["callbacks"]() if c["job_id"] in jobs]

    deadline = time.monotonic() + 120
    while len(mine()) < 3:
        assert time.monotonic() < deadline, f"callbacks: {service['callbacks']()}" + service["logs"]()
        time.sleep(0.2)
    time.sleep(1.0)  # nothing more may come
    got = {c["job_id"]: c for c in mine()}
    assert len(mine()) == 3 and set(got) == jobs

    done = got[ok_job]
    assert list(done) == ["job_id", "state", "proofs"] and done["state"] == "done"
    stored = client.store.get_result(ok_job)
    assert done["proofs"] == stored["proofs"] and len(done["proofs"]) == 2
    vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    assert all(verify(vk, p["public"], p["proof"]) for p in done["proofs"])

    failed = got[bad_job]
    assert list(failed) == ["job_id", "state", "error"] and failed["state"] == "failed"
    assert failed["error"].startswith("partition 0: ") and failed["error"] == \
        client.store.get_job(bad_job)["error"]

    assert got[slow_job] == {"job_id": slow_job, "state": "cancelled",
                             "error": "the service changed its mind"}

    status, result, bad_result, slow_result, unknown_status, unknown_result, *cancels = call(
        ("cuzk.status", {"job_id": ok_job}), ("cuzk.result", {"job_id": ok_job}),
        ("cuzk.result", {"job_id": bad_job}), ("cuzk.result", {"job_id": slow_job}),
        ("cuzk.status", {"job_id": "no-such-job"}), ("cuzk.result", {"job_id": "no-such-job"}),
        ("cuzk.cancel", {"job_id": slow_job}), ("cuzk.cancel", {"job_id": ok_job}),
        ("cuzk.cancel", {"job_id": "no-such-job"}))
    assert status["job_id"] == ok_job and status["state"] == "done"
    assert status["on_done"] == on_done and status["on_done_sent_at"] > 0
    assert [p["state"] for p in status["partitions"]] == ["done", "done"]
    assert result == stored
    assert bad_result == {"job_id": bad_job, "state": "failed", "error": failed["error"]}
    assert slow_result["state"] == "cancelled"
    assert unknown_status["state"] == unknown_result["state"] == "unknown"
    assert "no such job" in unknown_result["error"]
    # a cancel sent again, or of a job that ended, changes nothing and says so
    assert cancels[:2] == [{"job_id": slow_job, "state": "cancelled", "cancelled": False},
                           {"job_id": ok_job, "state": "done", "cancelled": False}]
    assert cancels[2]["state"] == "unknown" and cancels[2]["cancelled"] is False
    assert client.result(ok_job) == stored and client.store.get_job(slow_job)["error"] == \
        "the service changed its mind"


def test_cli_submit_takes_on_done(service):
    done = subprocess.run([sys.executable, "-m", "cuzk_tasks", "submit", "mulchain",
                           str(FIX / "mulchain" / "input.json"), "--on-done-task", CB_TASK,
                           "--on-done-queue", CB_QUEUE], cwd=ROOT, env=service["env"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().splitlines()[-1]
    deadline = time.monotonic() + 60
    while not [c for c in service["callbacks"]() if c["job_id"] == job_id]:
        assert time.monotonic() < deadline, service["logs"]()
        time.sleep(0.2)
    [got] = [c for c in service["callbacks"]() if c["job_id"] == job_id]
    assert got["state"] == "done" and got["proofs"] == service["client"].result(job_id)["proofs"]
    bad = subprocess.run([sys.executable, "-m", "cuzk_tasks", "submit", "mulchain",
                          str(FIX / "mulchain" / "input.json"), "--on-done-task", CB_TASK],
                         cwd=ROOT, env=service["env"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--on-done-queue" in bad.stderr


def test_a_plain_celery_client_gets_jobs_done_with_any_message_priority(service):
    """kombu's default priority steps and separator on both sides: a message of any
    priority 0-9 from a Celery app with default settings reaches the workers."""
    call, client = service["call"], service["client"]
    good = {"input": json.loads((FIX / "mulchain" / "input.json").read_text())}
    jobs = call(*[("cuzk.submit", {"circuit": "mulchain", "partitions": [good], "priority": p}, p)
                  for p in range(10)])
    assert len(set(jobs)) == 10
    for job in jobs:
        result = client.wait(job, timeout=120)
        assert result["state"] == "done" and len(result["proofs"]) == 1, service["logs"]()
