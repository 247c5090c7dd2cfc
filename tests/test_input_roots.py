"""The files a submitter names (input_ref, witness_ref) are confined to the spool dir and
allowed_input_roots, checked before anything opens them (cuzk_tasks.paths).

"Never opened" is shown with FIFOs outside the roots: opening one for reading blocks until a
writer comes, so a pipeline step that opened it would hang (each step runs in a thread with a
deadline, and the FIFO is unblocked afterwards so no thread is left behind).  Inside the roots
only regular files are opened (cuzk_tasks.paths.open_input): a FIFO there fails at once.  A
directory swapped for a symlink to elsewhere while jobs read under it is shown with a real
swapping process.  The pipeline steps run in this process against a real redis-server (no
Celery workers); the process-level tests are in test_pipeline_e2e.py
(test_input_refs_outside_the_roots_fail_the_job_unopened,
test_fifo_and_directory_inputs_inside_the_roots_fail_at_once)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import time
import uuid

import pytest

from cuzk_tasks import pipeline
from cuzk_tasks.service import queues
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.errors import ConfigError, CuzkError, FormatError
from cuzk_tasks.state import PartitionRun
from cuzk_tasks.paths import (NAME_MAX, OUTSIDE, InputRefError, OutsideInputRootsError,
                              absolute_refs, confined_path, open_input)
from cuzk_tasks.celery_app import create_app
from support.outbox import queued

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def _outside_msg(field, path):
    """A refused partition's error; the job's error is ``partition N: `` and this."""
    return f"{field} {path} {OUTSIDE}"


@pytest.fixture
def tree(tmp_path):
    """tmp/inputs (the allowed root), tmp/spool, tmp/outside with a secret JSON and FIFOs."""
    inputs, spool, outside = tmp_path / "inputs", tmp_path / "spool", tmp_path / "outside"
    for d in (inputs, spool, outside):
        d.mkdir()
    (outside / "secret.json").write_text(json.dumps({"api_token": "s3cr3t-value"}))
    os.mkfifo(outside / "fifo.json")
    os.mkfifo(outside / "fifo.wtns")
    (inputs / "input.json").write_text((FIX / "mulchain" / "input.json").read_text())
    # symlinks inside the root that escape it
    (inputs / "link.json").symlink_to(outside / "secret.json")
    (inputs / "link-fifo.wtns").symlink_to(outside / "fifo.wtns")
    (inputs / "linkdir").symlink_to(outside, target_is_directory=True)
    settings = load_settings(env={"CUZK_SPOOL_DIR": str(spool),
                                  "CUZK_ALLOWED_INPUT_ROOTS": str(inputs)})
    yield {"inputs": inputs, "spool": spool, "outside": outside, "settings": settings}
    _unblock_fifos(outside)


def _unblock_fifos(directory):
    """Open each FIFO for writing and close it: a reader blocked on it sees EOF."""
    for fifo in pathlib.Path(directory).glob("fifo*"):
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader: nothing is blocked on it
            continue
        os.close(fd)


# --- the check itself -----------------------------------------------------------

def test_paths_inside_the_roots_resolve_to_their_real_path(tree):
    s = tree["settings"]
    p = tree["inputs"] / "input.json"
    assert confined_path(str(p), s) == os.path.realpath(p)
    assert confined_path(p, s) == os.path.realpath(p)  # a PathLike
    # the spool dir is always allowed, existing file or not
    assert confined_path(str(tree["spool"] / "job" / "0.wtns"), s).endswith("/spool/job/0.wtns")
    # `..` that stays inside is fine
    inner = tree["inputs"] / "sub"
    inner.mkdir()
    assert confined_path(f"{inner}/../input.json", s) == os.path.realpath(p)


@pytest.mark.parametrize("name, how", [
    ("symlink", lambda t: t["inputs"] / "link.json"),
    ("symlinked dir", lambda t: t["inputs"] / "linkdir" / "secret.json"),
    ("dotdot", lambda t: f"{t['inputs']}/../outside/secret.json"),
    ("absolute", lambda t: t["outside"] / "secret.json"),
    ("etc", lambda t: "/etc/passwd"),
    ("sibling prefix", lambda t: f"{t['inputs']}-evil/x.json"),
    ("root itself via dotdot", lambda t: f"{t['spool']}/.."),
])
def test_paths_outside_the_roots_are_refused(tree, name, how):
    path = str(how(tree))
    with pytest.raises(OutsideInputRootsError) as info:
        confined_path(path, tree["settings"], "input_ref")
    assert str(info.value) == _outside_msg("input_ref", path)
    assert isinstance(info.value, CuzkError)


@pytest.mark.parametrize("path", ["in1.json", "./inputs/input.json", ""])
def test_relative_paths_are_refused(tree, path, monkeypatch):
    monkeypatch.chdir(tree["inputs"])  # even where the relative path would land inside
    with pytest.raises(OutsideInputRootsError, match="outside the allowed input roots"):
        confined_path(path, tree["settings"])


def test_a_root_that_is_a_symlink_is_resolved_too(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    s = load_settings(env={"CUZK_SPOOL_DIR": str(tmp_path / "spool"),
                           "CUZK_ALLOWED_INPUT_ROOTS": str(tmp_path / "alias")})
    assert confined_path(str(real / "a.json"), s) == str(real / "a.json")
    assert confined_path(str(tmp_path / "alias" / "a.json"), s) == str(real / "a.json")


def test_default_allows_only_the_spool_dir(tmp_path):
    s = load_settings(env={"CUZK_SPOOL_DIR": str(tmp_path / "spool")})
    assert s.allowed_input_roots == ()
    with pytest.raises(OutsideInputRootsError):
        confined_path(str(FIX / "mulchain" / "input.json"), s)


# --- the setting ----------------------------------------------------------------------

def test_setting_from_toml_and_env(tmp_path):
    toml = tmp_path / "cuzk.toml"
    toml.write_text('allowed_input_roots = ["/srv/a", "rel/b"]\n')
    assert load_settings(toml, env={}).allowed_input_roots == ("/srv/a", str(tmp_path / "rel/b"))
    env = {"CUZK_ALLOWED_INPUT_ROOTS": f"/x{os.pathsep}/y, /z"}
    assert load_settings(env=env).allowed_input_roots == ("/x", "/y", "/z")
    # a string in the file is split as in the environment
    toml.write_text(f'allowed_input_roots = "/srv/a{os.pathsep}/srv/c"\n')
    assert load_settings(toml, env={}).allowed_input_roots == ("/srv/a", "/srv/c")
    # the environment wins over the file
    assert load_settings(toml, env=env).allowed_input_roots == ("/x", "/y", "/z")


@pytest.mark.parametrize("text, env", [
    ("allowed_input_roots = [1]\n", {}),
    ("allowed_input_roots = 3\n", {}),
    ("", {"CUZK_ALLOWED_INPUT_ROOTS": "relative/dir"}),
])
def test_bad_setting_names_the_field(tmp_path, text, env):
    toml = tmp_path / "cuzk.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError, match="allowed_input_roots"):
        load_settings(toml, env=env)


# --- no message quotes a file's bytes --------------------------------------------------

def test_reader_errors_do_not_quote_file_bytes(tmp_path):
    from cuzk_tasks.groth16.witness import load_input_json
    from cuzk_tasks.groth16.formats.wtns import read_wtns

    p = tmp_path / "passwd"
    p.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(FormatError) as info:
        read_wtns(p)
    assert "not a .wtns file (bad magic" in str(info.value)
    assert "root" not in str(info.value).replace(str(tmp_path), "")
    p.write_bytes(b'{"k": "\xffSECRET"}')
    with pytest.raises(FormatError) as info:
        load_input_json(p)
    assert "not UTF-8 text (invalid byte at offset 7)" in str(info.value)
    assert "xff" not in str(info.value) and "SECRET" not in str(info.value)


# --- cuzk-tasks submit: relative paths made absolute ------------------------------------

def test_absolute_refs():
    parts = absolute_refs([{"input_ref": "in1.json"}, {"witness_ref": "../w/x.wtns"},
                           {"input": "{}"}, {"input_ref": "/abs/in.json"}], cwd="/data/run")
    assert parts == [{"input_ref": "/data/run/in1.json"}, {"witness_ref": "/data/w/x.wtns"},
                     {"input": "{}"}, {"input_ref": "/abs/in.json"}]


def test_cli_submit_stores_absolute_paths(tree, redis_server_url, monkeypatch, capsys):
    from cuzk_tasks.cli import main

    toml = tree["inputs"].parent / "cuzk.toml"
    toml.write_text(f'prefix = "cli{uuid.uuid4().hex[:8]}"\nspool_dir = "{tree["spool"]}"\n'
                    f'allowed_input_roots = ["{tree["inputs"]}"]\n'
                    f'cpu_queue = "q.cli.{uuid.uuid4().hex[:8]}"\n\n'
                    f'[circuits.mulchain]\nzkey = "{FIX / "mulchain" / "circuit.zkey"}"\n'
                    f'wasm = "{FIX / "mulchain" / "circuit.wasm"}"\n')
    monkeypatch.chdir(tree["inputs"])
    (tree["inputs"] / "witness.wtns").write_bytes((FIX / "mulchain" / "witness.wtns").read_bytes())
    rc = main(["submit", "mulchain", "input.json", "--witness", "witness.wtns",
               "--config", str(toml), "--redis", redis_server_url])
    assert rc == 0
    job_id = capsys.readouterr().out.strip()
    url = redis_server_url
    settings = load_settings(toml, env={}).replace(redis_url=url, broker_url=url,
                                                   result_backend=url, state_url=url)
    ctx = pipeline.Context(app=create_app(settings), settings=settings, worker_id="test")
    try:
        parts = ctx.store.list_partitions(job_id)
        assert parts[0]["input_ref"] == str(tree["inputs"] / "input.json")
        assert parts[1]["witness_ref"] == str(tree["inputs"] / "witness.wtns")
        # the absolute form of ../outside/... is outside the roots: refused at submit, in one
        # line naming the path (exit 2)
        rc = main(["submit", "mulchain", "input.json", "--witness", "../outside/fifo.wtns",
                   "--config", str(toml), "--redis", redis_server_url])
        fifo = tree["outside"] / "fifo.wtns"
        err = capsys.readouterr().err
        assert rc == 2 and err.strip() == ("cuzk-tasks submit: error: partition 1: "
                                           + _outside_msg("witness_ref", fifo)), err
    finally:
        ctx.store.redis.delete(*queues.queue_keys(settings.cpu_queue))


# --- the pipeline steps, against a real redis-server -----------------------------------

@pytest.fixture
def ctx(tree, redis_server_url):
    toml = tree["inputs"].parent / "circuits.toml"
    toml.write_text(f'[circuits.mulchain]\nzkey = "{FIX / "mulchain" / "circuit.zkey"}"\n'
                    f'wasm = "{FIX / "mulchain" / "circuit.wasm"}"\n')
    settings = load_settings(toml, env={
        "CUZK_REDIS_URL": redis_server_url, "CUZK_PREFIX": "ir" + uuid.uuid4().hex[:8],
        "CUZK_SPOOL_DIR": str(tree["spool"]), "CUZK_ALLOWED_INPUT_ROOTS": str(tree["inputs"]),
        "CUZK_CPU_QUEUE": "q.ir." + uuid.uuid4().hex[:8],
        # stages driven by hand in this process: cluster-wide (synth_end routes the partition)
        "CUZK_SHARED_SPOOL": "1"})
    c = pipeline.Context(app=create_app(settings), settings=settings, worker_id="irhost:dev0")
    c.queue = "q.ir.dev." + uuid.uuid4().hex[:8]
    yield c
    c.store.redis.delete(*queues.queue_keys(settings.cpu_queue), *queues.queue_keys(c.queue))


def _in_thread(fn, *args, timeout=30.0, unblock=None):
    """``fn(*args)`` with a deadline: a step that opened a FIFO would block and miss it."""
    out = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # pragma: no cover (reported below)
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    hung = t.is_alive()
    if hung and unblock is not None:
        _unblock_fifos(unblock)
        t.join(10)
    assert not hung, f"{fn.__name__} blocked: it opened a file outside the roots"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def _job(ctx, parts):
    """A job created straight in the store (as if submitted with other roots): the worker's
    own check must catch it."""
    job = uuid.uuid4().hex
    _, created = ctx.store.create_job(job, "mulchain", "mulchain", 5, None,
                                      pipeline.normalize_partitions(parts))
    assert created
    return job


def _error(ctx, job):
    j = ctx.store.get_job(job)
    assert j["state"] == "failed", j
    return j["error"]


def test_submit_job_refuses_outside_partitions_with_the_message(tree, ctx):
    bad = str(tree["outside"] / "fifo.json")
    with pytest.raises(CuzkError) as info:
        def submit_job(*args):
            return pipeline.submit_job(*args, job_id="refused-job")

        _in_thread(submit_job, ctx, "mulchain",
                   [{"input_ref": str(tree["inputs"] / "input.json")}, {"input_ref": bad}],
                   unblock=tree["outside"])
    assert str(info.value) == "partition 1: " + _outside_msg("input_ref", bad)
    # nothing was created or queued (no synthesize sent, none left in the outbox)
    assert ctx.store.get_job("refused-job") is None
    assert queued(ctx.store.redis, ctx.settings.stage_queue) == []
    assert ctx.store.outbox_entries() == {}


@pytest.mark.parametrize("field, make", [
    ("input_ref", lambda t: t["outside"] / "fifo.json"),
    ("input_ref", lambda t: t["outside"] / "secret.json"),
    ("input_ref", lambda t: t["inputs"] / "link.json"),
    ("input_ref", lambda t: f"{t['inputs']}/../outside/secret.json"),
    ("input_ref", lambda t: "/etc/passwd"),
    ("witness_ref", lambda t: t["outside"] / "fifo.wtns"),
    ("witness_ref", lambda t: t["inputs"] / "link-fifo.wtns"),
    ("witness_ref", lambda t: "/etc/passwd"),
], ids=["fifo-json", "json-outside", "symlink-json", "dotdot-json", "etc-passwd",
        "fifo-wtns", "symlink-fifo-wtns", "etc-passwd-wtns"])
def test_synthesize_refuses_outside_refs_unopened(tree, ctx, field, make):
    path = str(make(tree))
    job = _job(ctx, [{field: path}])
    assert _in_thread(pipeline.synthesize, ctx, PartitionRun(job, 0, 0, "mulchain", 5),
                      unblock=tree["outside"]) is None
    error = _error(ctx, job)
    assert error == "partition 0: " + _outside_msg(field, path)
    for leaked in ("api_token", "s3cr3t", "root:", "found"):
        assert leaked not in error


def test_synthesize_names_unknown_signals_of_a_file_inside_the_roots(tree, ctx):
    """The decision for files inside the roots (the submitters' input storage): the error
    names the signal, as it must to be useful; outside the roots the file is never read."""
    p = tree["inputs"] / "extra.json"
    p.write_text(json.dumps({"a": "3", "b": "5", "api_token": "1"}))
    job = _job(ctx, [{"input_ref": str(p)}])
    assert pipeline.synthesize(ctx, PartitionRun(job, 0, 0, "mulchain", 5)) is None
    assert "signal 'api_token' is not an input" in _error(ctx, job)


def test_synthesize_accepts_refs_inside_the_roots_and_stores_the_real_path(tree, ctx):
    (tree["inputs"] / "w.wtns").symlink_to(FIX / "mulchain" / "witness.wtns")
    (tree["inputs"] / "sub").mkdir()
    spooled = tree["spool"] / "given.wtns"  # the spool dir is always allowed
    spooled.write_bytes((FIX / "mulchain" / "witness.wtns").read_bytes())
    job = _job(ctx, [{"input_ref": str(tree["inputs"] / "sub" / ".." / "input.json")},
                     {"witness_ref": str(spooled)}])
    assert pipeline.synthesize(ctx, PartitionRun(job, 0, 0, "mulchain", 5)) == \
        str(tree["spool"] / job / "0.wtns")
    assert pipeline.synthesize(ctx, PartitionRun(job, 1, 0, "mulchain", 5)) == str(spooled)
    assert ctx.store.get_job(job)["state"] == "running"
    # the symlink to a file outside is refused even though its name is inside
    job2 = _job(ctx, [{"witness_ref": str(tree["inputs"] / "w.wtns")}])
    assert pipeline.synthesize(ctx, PartitionRun(job2, 0, 0, "mulchain", 5)) is None
    link = tree["inputs"] / "w.wtns"
    assert _error(ctx, job2) == "partition 0: " + _outside_msg("witness_ref", link)


def _routed_to_me(ctx, witness_ref):
    """A partition routed to this context's device worker with ``witness_ref`` (as a forged
    or stale prove message would carry)."""
    store = ctx.store
    store.register_worker(ctx.worker_id, "device", "irhost", device=0, queue=ctx.queue)
    store.heartbeat(ctx.worker_id, 30)
    job = _job(ctx, [{"input": "{}"}])
    assert store.synth_begin(PartitionRun(job, 0, 0))
    end = store.synth_end(PartitionRun(job, 0, 0), witness_ref, 1.0, route_circuit="mulchain")
    assert end and end.routed, end
    return job


def _started(job, witness_ref, worker, token):
    """finalize's message for partition 0 as prove sends it (every field), with no
    partial proof: finalize refuses the witness before reading it."""
    return {"job": job, "idx": 0, "attempt": 0, "circuit": "mulchain", "witness_ref": witness_ref,
            "worker": worker, "token": token, "backend": "cpu", "partial": None, "priority": 5,
            "deadline_at": None, "sent_at": time.time()}


def test_prove_refuses_an_outside_witness_unopened(tree, ctx):
    fifo = str(tree["outside"] / "fifo.wtns")
    job = _routed_to_me(ctx, fifo)
    assert _in_thread(pipeline.prove, ctx, PartitionRun(job, 0, 0, "mulchain", 5), fifo,
                      "cuzk.cpu", unblock=tree["outside"]) is None
    assert ctx.store.get_partition(job, 0)["error"] == _outside_msg("witness_ref", fifo)
    assert ctx.store.get_worker(ctx.worker_id)["state"] == "idle"  # the worker keeps going


def test_finalize_refuses_an_outside_witness_unopened(tree, ctx):
    fifo = str(tree["outside"] / "fifo.wtns")
    job = _routed_to_me(ctx, fifo)
    started = ctx.store.prove_begin(ctx.worker_id, PartitionRun(job, 0, 0), 3)
    assert started.ok
    assert ctx.store.prove_end(ctx.worker_id, started.token, PartitionRun(job, 0, 0),
                               1.0).partition_advanced
    result = _started(job, fifo, ctx.worker_id, started.token)
    assert _in_thread(pipeline.finalize, ctx, result, unblock=tree["outside"]) is None
    assert ctx.store.get_partition(job, 0)["error"] == _outside_msg("witness_ref", fifo)


# --- opening: only regular files, never through a symlink swapped in after the check ---

def _open_in_thread(path, settings, what="input_ref", timeout=10.0):
    """open_input with a deadline: one that opened a FIFO for reading would block on it."""
    def read():
        with open_input(path, settings, what) as f:
            return f.read()
    return _in_thread(read, timeout=timeout, unblock=pathlib.Path(path).parent)


def test_open_input_reads_a_regular_file_inside_the_roots_by_its_real_path(tree):
    (tree["inputs"] / "alias.json").symlink_to(tree["inputs"] / "input.json")
    for name in ("input.json", "alias.json"):  # a symlink that stays inside is fine
        with open_input(tree["inputs"] / name, tree["settings"], "input_ref") as f:
            assert f.name == str((tree["inputs"] / "input.json").resolve())
            assert f.read() == (tree["inputs"] / "input.json").read_bytes()
            assert os.get_blocking(f.fileno())  # O_NONBLOCK was only for the open


def test_open_input_refuses_a_fifo_inside_the_roots_at_once(tree):
    fifo = tree["inputs"] / "fifo-in.json"
    os.mkfifo(fifo)
    for what in ("input_ref", "witness_ref"):
        t0 = time.monotonic()
        with pytest.raises(InputRefError) as info:
            _open_in_thread(str(fifo), tree["settings"], what)
        assert str(info.value) == f"{what} {fifo} is a FIFO: expected a regular file"
        assert time.monotonic() - t0 < 5.0


@pytest.mark.parametrize("name, make, expected", [
    ("directory", lambda t: t["inputs"], "is a directory: expected a regular file"),
    ("subdirectory", lambda t: _mkdir(t["inputs"] / "sub"),
     "is a directory: expected a regular file"),
    ("spool dir", lambda t: t["spool"], "is a directory: expected a regular file"),
    ("missing", lambda t: t["inputs"] / "nope.json",
     ": no such file: expected a regular file inside the allowed input roots"),
    ("file as directory", lambda t: t["inputs"] / "input.json" / "x",
     ": a component of the path is not a directory"),
    ("long component", lambda t: t["inputs"] / ("n" * (NAME_MAX + 1)),
     f": file name too long (a path component is {NAME_MAX + 1} bytes; the limit is "
     f"{NAME_MAX})"),
    ("long path", lambda t: t["inputs"].joinpath(*["d" * 200] * 25),
     ": file name too long (the path is"),
])
def test_open_input_gives_clear_errors_naming_the_field(tree, name, make, expected):
    path = str(make(tree))
    with pytest.raises(InputRefError) as info:
        _open_in_thread(path, tree["settings"], "witness_ref")
    message = str(info.value)
    assert message.startswith("witness_ref "), message
    assert expected in message, message
    assert len(message) < 500  # a long name is shortened


def _mkdir(path):
    path.mkdir()
    return path


# Renames the directory aside, puts a symlink to the outside directory in its place, then
# puts the directory back, as fast as it can, until killed.
SWAPPER = r"""
import os, sys
name, aside, outside = sys.argv[1:4]
while True:
    os.rename(name, aside)
    os.symlink(outside, name)
    os.unlink(name)
    os.rename(aside, name)
"""


@pytest.fixture
def swapped(tree):
    """inputs/d (holding in.json, a good input) swapped without pause for a symlink to
    outside/d (holding an in.json whose signal value is a secret) by another process."""
    d, outside_d = tree["inputs"] / "d", tree["outside"] / "d"
    d.mkdir()
    outside_d.mkdir()
    good = json.dumps({"a": "3", "b": "11"})
    (d / "in.json").write_text(good)
    (outside_d / "in.json").write_text(json.dumps({"a": "hunter2-db-password", "b": "1"}))
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(d), str(tree["inputs"] / ".d"),
                             str(outside_d)])
    try:
        yield {"path": str(d / "in.json"), "good": good.encode(), "secret": "hunter2"}
    finally:
        proc.kill()
        proc.wait()


def test_a_symlink_swap_never_makes_open_input_read_outside(tree, swapped):
    """Many reads of inputs/d/in.json while another process swaps inputs/d for a symlink to
    an outside directory: each read returns the inside file or fails with a message about the
    path; none returns the outside file or quotes it."""
    outcomes = {"read": 0, "refused": 0}
    deadline = time.monotonic() + 60
    n = 0
    while n < 3000 or (0 in outcomes.values() and time.monotonic() < deadline):
        n += 1
        try:
            with open_input(swapped["path"], tree["settings"], "input_ref") as f:
                data = f.read()
        except InputRefError as exc:  # outside, no such file (mid-swap), kept changing
            assert swapped["secret"] not in str(exc)
            assert str(exc).startswith(f"input_ref {swapped['path']}"), str(exc)
            outcomes["refused"] += 1
            continue
        assert data == swapped["good"], f"read #{n} returned a file outside the roots"
        outcomes["read"] += 1
    assert outcomes["read"] and outcomes["refused"], outcomes  # the swap raced the reads


def test_a_symlink_swap_never_leaks_outside_content_into_job_errors(tree, ctx, swapped):
    """The issue's case through the pipeline's synthesize: jobs naming a file under a
    directory that another process swaps for a symlink to an outside directory whose file has
    a secret where an integer belongs ("input signal 'a'[0]: '<secret>' is not an integer")."""
    jobs, states = [], []
    deadline = time.monotonic() + 60
    # 300 jobs at least, and on until both outcomes were seen: how often a job lands
    # mid-swap depends on how the two processes share the cores
    while len(jobs) < 300 or (time.monotonic() < deadline and not (
            any(s["state"] == "failed" for s in states)
            and any(s["state"] != "failed" for s in states))):
        job = _job(ctx, [{"input_ref": swapped["path"]}])
        pipeline.synthesize(ctx, PartitionRun(job, 0, 0, "mulchain", 5))
        jobs.append(job)
        states.append(ctx.store.get_job(job))
    errors = [state["error"] for state in states if state["state"] == "failed"]
    leaked = [error for error in errors if swapped["secret"] in error]
    assert not leaked, f"{len(leaked)} of {len(jobs)} jobs read the outside file: {leaked[0]}"
    for error in errors:  # outside, no such file (mid-swap), kept changing: about the path
        assert error.startswith(f"partition 0: input_ref {swapped['path']}"), error
    assert all(state["state"] == "running" for state in states if state["state"] != "failed")
    assert 0 < len(errors) < len(jobs), errors[:3]  # the swap raced the jobs


@pytest.mark.parametrize("field", ["input_ref", "witness_ref"])
def test_synthesize_fails_fifos_directories_and_long_names_inside_the_roots(tree, ctx, field):
    fifo = tree["inputs"] / f"fifo-{field}"
    os.mkfifo(fifo)
    long_name = tree["inputs"] / ("n" * (NAME_MAX + 1))
    cases = [(fifo, "is a FIFO: expected a regular file"),
             (tree["inputs"], "is a directory: expected a regular file"),
             (long_name, "file name too long")]
    for path, expected in cases:
        job = _job(ctx, [{field: str(path)}])
        assert _in_thread(pipeline.synthesize, ctx, PartitionRun(job, 0, 0, "mulchain", 5),
                          unblock=tree["inputs"]) is None
        error = _error(ctx, job)
        assert error.startswith(f"partition 0: {field} {str(path)[:100]}"), error
        assert expected in error and "internal error" not in error, error


def test_prove_and_finalize_refuse_a_fifo_witness_in_the_spool_at_once(tree, ctx):
    fifo = tree["spool"] / "fifo.wtns"
    os.mkfifo(fifo)
    expected = f"witness_ref {fifo} is a FIFO: expected a regular file"
    job = _routed_to_me(ctx, str(fifo))
    assert _in_thread(pipeline.prove, ctx, PartitionRun(job, 0, 0, "mulchain", 5),
                      str(fifo), "cuzk.cpu", unblock=tree["spool"]) is None
    assert ctx.store.get_partition(job, 0)["error"] == expected
    assert ctx.store.get_worker(ctx.worker_id)["state"] == "idle"
    job = _routed_to_me(ctx, str(fifo))
    started = ctx.store.prove_begin(ctx.worker_id, PartitionRun(job, 0, 0), 3)
    assert ctx.store.prove_end(ctx.worker_id, started.token, PartitionRun(job, 0, 0),
                               1.0).partition_advanced
    result = _started(job, str(fifo), ctx.worker_id, started.token)
    assert _in_thread(pipeline.finalize, ctx, result, unblock=tree["spool"]) is None
    assert ctx.store.get_partition(job, 0)["error"] == expected


# --- the circuits' own files: a job's error names the circuit, not the server's path ----

@pytest.fixture
def broken_ctx(tree, redis_server_url):
    """Circuits whose zkey or wasm (server files, in tmp/server) is broken or missing."""
    server = tree["inputs"].parent / "server"
    server.mkdir()
    (server / "garbage.zkey").write_bytes(b"not a zkey at all")
    (server / "garbage.wasm").write_bytes(b"\0asm garbage")
    good = FIX / "mulchain"
    circuits = {"badzkey": (server / "garbage.zkey", good / "circuit.wasm"),
                "nozkey": (server / "missing.zkey", good / "circuit.wasm"),
                "badwasm": (good / "circuit.zkey", server / "garbage.wasm"),
                "nowasm": (good / "circuit.zkey", server / "missing.wasm"),
                "blszkey": (FIX / "bls12381" / "mulchain" / "circuit.zkey", good / "circuit.wasm")}
    toml = tree["inputs"].parent / "broken.toml"
    toml.write_text("".join(f'[circuits.{name}]\nzkey = "{zkey}"\nwasm = "{wasm}"\n\n'
                            for name, (zkey, wasm) in circuits.items()))
    settings = load_settings(toml, env={
        "CUZK_REDIS_URL": redis_server_url, "CUZK_PREFIX": "ib" + uuid.uuid4().hex[:8],
        "CUZK_SPOOL_DIR": str(tree["spool"]), "CUZK_ALLOWED_INPUT_ROOTS": str(tree["inputs"]),
        "CUZK_CPU_QUEUE": "q.ib." + uuid.uuid4().hex[:8]})
    c = pipeline.Context(app=create_app(settings), settings=settings, worker_id="ibhost:dev0")
    c.server_dirs = (str(server), str(good), str(FIX / "bls12381"))
    yield c
    c.store.redis.delete(*queues.queue_keys(settings.cpu_queue))


@pytest.mark.parametrize("circuit, expected", [
    ("badzkey", "circuit 'badzkey': its zkey is unusable (magic: not a .zkey file"),
    ("nozkey", "circuit 'nozkey': its zkey is unusable (cannot open it (No such file"),
    ("badwasm", "circuit 'badwasm': its wasm is unusable (wasm: cannot compile"),
    ("nowasm", "circuit 'nowasm': its wasm is unusable (file: no such file)"),
    # the wasm (BN254) and the zkey (BLS12-381) disagree: FormatError names both files
    ("blszkey", "but zkey <circuit 'blszkey' zkey> is for BLS12-381"),
])
def test_errors_about_a_circuits_files_name_the_circuit_not_the_server_path(
        tree, broken_ctx, circuit, expected):
    c = broken_ctx
    job = uuid.uuid4().hex
    _, created = c.store.create_job(job, circuit, circuit, 5, None, pipeline.normalize_partitions(
        [{"input_ref": str(tree["inputs"] / "input.json")}]))
    assert created
    assert pipeline.synthesize(c, PartitionRun(job, 0, 0, circuit, 5)) is None
    error = _error(c, job)
    assert expected in error, error
    for server_dir in c.server_dirs:
        assert server_dir not in error, error
