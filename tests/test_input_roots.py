"""The files a submitter names (input_ref, witness_ref) are confined to the spool dir and
allowed_input_roots, checked before anything opens them (cuzk_tasks.paths).

"Never opened" is shown with FIFOs outside the roots: opening one for reading blocks until a
writer comes, so a pipeline step that opened it would hang (each step runs in a thread with a
deadline, and the FIFO is unblocked afterwards so no thread is left behind).  The pipeline
steps run in this process against a real redis-server (no Celery workers); the process-level
test is in test_pipeline_e2e.py (test_input_refs_outside_the_roots_fail_the_job_unopened)."""

from __future__ import annotations

import json
import os
import pathlib
import threading
import uuid

import pytest

from cuzk_tasks import pipeline, wire
from cuzk_tasks.config import load_settings
from cuzk_tasks.errors import ConfigError, CuzkError, FormatError
from cuzk_tasks.paths import OUTSIDE, OutsideInputRootsError, absolute_refs, confined_path
from cuzk_tasks.celery_app import create_app

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
    from cuzk_tasks.groth16.wtns import read_wtns

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
    rc = main(["submit", "mulchain", "input.json", "--witness", "../outside/fifo.wtns",
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
        assert parts[1]["witness_ref"] == str(tree["outside"] / "fifo.wtns")
        # the absolute form of ../outside/... is outside the roots: the job failed at submit
        job = ctx.store.get_job(job_id)
        assert job["state"] == "failed"
        fifo = tree["outside"] / "fifo.wtns"
        assert job["error"] == "partition 1: " + _outside_msg("witness_ref", fifo)
    finally:
        ctx.store.redis.delete(*wire.queue_keys(settings.cpu_queue))


# --- the pipeline steps, against a real redis-server -----------------------------------

@pytest.fixture
def ctx(tree, redis_server_url):
    toml = tree["inputs"].parent / "circuits.toml"
    toml.write_text(f'[circuits.mulchain]\nzkey = "{FIX / "mulchain" / "circuit.zkey"}"\n'
                    f'wasm = "{FIX / "mulchain" / "circuit.wasm"}"\n')
    settings = load_settings(toml, env={
        "CUZK_REDIS_URL": redis_server_url, "CUZK_PREFIX": "ir" + uuid.uuid4().hex[:8],
        "CUZK_SPOOL_DIR": str(tree["spool"]), "CUZK_ALLOWED_INPUT_ROOTS": str(tree["inputs"]),
        "CUZK_CPU_QUEUE": "q.ir." + uuid.uuid4().hex[:8]})
    c = pipeline.Context(app=create_app(settings), settings=settings, worker_id="irhost:dev0")
    c.queue = "q.ir.dev." + uuid.uuid4().hex[:8]
    yield c
    c.store.redis.delete(*wire.queue_keys(settings.cpu_queue), *wire.queue_keys(c.queue))


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


def test_submit_job_fails_outside_partitions_with_the_message(tree, ctx):
    bad = str(tree["outside"] / "fifo.json")
    job = _in_thread(pipeline.submit_job, ctx, "mulchain",
                     [{"input_ref": str(tree["inputs"] / "input.json")}, {"input_ref": bad}],
                     unblock=tree["outside"])
    assert _error(ctx, job) == "partition 1: " + _outside_msg("input_ref", bad)
    assert ctx.store.get_partition(job, 1)["error"] == _outside_msg("input_ref", bad)
    # nothing was queued for the job
    assert ctx.store.redis.llen(wire.queue_keys(ctx.settings.cpu_queue)[0]) == 0


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
    assert _in_thread(pipeline.synthesize, ctx, job, 0, "mulchain", 5,
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
    assert pipeline.synthesize(ctx, job, 0, "mulchain", 5) is None
    assert "signal 'api_token' is not an input" in _error(ctx, job)


def test_synthesize_accepts_refs_inside_the_roots_and_stores_the_real_path(tree, ctx):
    (tree["inputs"] / "w.wtns").symlink_to(FIX / "mulchain" / "witness.wtns")
    (tree["inputs"] / "sub").mkdir()
    spooled = tree["spool"] / "given.wtns"  # the spool dir is always allowed
    spooled.write_bytes((FIX / "mulchain" / "witness.wtns").read_bytes())
    job = _job(ctx, [{"input_ref": str(tree["inputs"] / "sub" / ".." / "input.json")},
                     {"witness_ref": str(spooled)}])
    assert pipeline.synthesize(ctx, job, 0, "mulchain", 5) == str(tree["spool"] / job / "0.wtns")
    assert pipeline.synthesize(ctx, job, 1, "mulchain", 5) == str(spooled)
    assert ctx.store.get_job(job)["state"] == "running"
    # the symlink to a file outside is refused even though its name is inside
    job2 = _job(ctx, [{"witness_ref": str(tree["inputs"] / "w.wtns")}])
    assert pipeline.synthesize(ctx, job2, 0, "mulchain", 5) is None
    link = tree["inputs"] / "w.wtns"
    assert _error(ctx, job2) == "partition 0: " + _outside_msg("witness_ref", link)


def _routed_to_me(ctx, witness_ref):
    """A partition routed to this context's device worker with ``witness_ref`` (as a forged
    or stale prove_start message would carry)."""
    store = ctx.store
    store.register_worker(ctx.worker_id, "device", "irhost", device=0, queue=ctx.queue)
    store.heartbeat(ctx.worker_id, 30)
    job = _job(ctx, [{"input": "{}"}])
    assert store.synth_begin(job, 0, 0)
    end = store.synth_end(job, 0, 0, witness_ref, 1.0, route_circuit="mulchain")
    assert end and end.routed, end
    return job


def test_prove_start_refuses_an_outside_witness_unopened(tree, ctx):
    fifo = str(tree["outside"] / "fifo.wtns")
    job = _routed_to_me(ctx, fifo)
    assert _in_thread(pipeline.prove_start, ctx, job, 0, 0, "mulchain", fifo,
                      unblock=tree["outside"]) is None
    assert ctx.store.get_partition(job, 0)["error"] == _outside_msg("witness_ref", fifo)
    assert ctx.store.get_worker(ctx.worker_id)["state"] == "idle"  # the worker keeps going


def test_finalize_refuses_an_outside_witness_unopened(tree, ctx):
    fifo = str(tree["outside"] / "fifo.wtns")
    job = _routed_to_me(ctx, fifo)
    started = ctx.store.gpu_start(ctx.worker_id, job, 0, 0, 3)
    assert started.ok
    assert ctx.store.gpu_end(ctx.worker_id, started.token, job, 0, 0, 1.0).partition_advanced
    result = {"job": job, "idx": 0, "attempt": 0, "circuit": "mulchain", "witness_ref": fifo,
              "worker": ctx.worker_id, "token": started.token, "partial": None}
    assert _in_thread(pipeline.finalize, ctx, result, unblock=tree["outside"]) is None
    assert ctx.store.get_partition(job, 0)["error"] == _outside_msg("witness_ref", fifo)
