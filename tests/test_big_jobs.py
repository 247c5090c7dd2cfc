"""Big jobs (issue 24): size limits refused at submit, chunked creation and end, chunked
release of a job's partitions (fair order), paged status reads -- and no Lua step of ours
holding Redis long at any job size (docs/architecture.md, "Big jobs").

The state-store tests run on fakeredis and a real redis-server (``store_factory``) with a
small ``chunk``, so the chunked paths run at a few partitions; the timing test runs a
10,000-partition job against a real redis-server with SLOWLOG recording every command; the
cluster tests run real workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import time

import pytest

from cuzk_tasks.settings import defaults
from cuzk_tasks import pipeline
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.errors import CuzkError, StateError
from cuzk_tasks.service.messages import StageMessages
from cuzk_tasks.state import PartitionRun
from support.outbox import Recorder

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
QUEUE = "bigq"


def stage_messages():
    """The pipeline's outbox entries, as a service with default settings builds them."""
    return StageMessages(load_settings(env={"CUZK_CPU_QUEUE": QUEUE}))


def synth_messages(job_id, n, priority=5):
    """The job's synthesize messages, as submit_job builds them."""
    m = stage_messages()
    return [m.synthesize(PartitionRun(job_id, i, 0, "c", priority)) for i in range(n)]


def recording(store_factory, **kw):
    """A store whose publisher records what it sends (``store.publisher``)."""
    return store_factory(publisher=Recorder(), **kw)


def sent_idx(store, job_id=None):
    """Partition indexes of the synthesize messages the store sent (of ``job_id``), in
    order."""
    return [e["args"][1] for e in store.publisher.sent
            if e["task"] == "cuzk.synthesize" and job_id in (None, e["args"][0])]


def make_job(store, n, job_id="big", window=3, request_id=None, **kw):
    messages = synth_messages(job_id, n)
    parts = [{"input": json.dumps({"a": i})} for i in range(n)]
    got, created = store.create_job(job_id, "c", "k", 5, request_id, parts, messages=messages,
                                    window=window, **kw)
    return got, created


@contextlib.contextmanager
def killed_before_commit(store):
    """The store's submitter "killed" (KeyboardInterrupt) as it is about to run create_commit:
    a creation cut short between its steps."""
    real_run = store._run

    def dies_before_commit(name, keys, args):
        if name == "create_commit":
            raise KeyboardInterrupt("killed")
        return real_run(name, keys, args)

    store._run = dies_before_commit
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        store._run = real_run


def finish_partition(store, job_id, idx):
    """Drive one partition to done through the transitions (no device: route to w1)."""
    assert store.synth_begin(PartitionRun(job_id, idx, 0))
    assert store.synth_end(PartitionRun(job_id, idx, 0), f"/w/{idx}.wtns", 1.0)
    assert store.route(PartitionRun(job_id, idx, 0), worker_id="w1")
    start = store.prove_begin("w1", PartitionRun(job_id, idx, 0))
    assert start.ok, start
    store.prove_end("w1", start.token, PartitionRun(job_id, idx, 0), 1.0)
    return store.finalize_end(PartitionRun(job_id, idx, 0), 1.0, {"pi": idx}, [str(idx)],
                              token=start.token)


def device(store, worker_id="w1"):
    store.register_worker(worker_id, "device", "host", device=0, queue=f"q.{worker_id}")
    store.heartbeat(worker_id, 60)


# --- limits at submit ---------------------------------------------------------------------

def test_too_many_partitions_are_refused_naming_partitions_before_anything_else():
    many = [{"input": {"x": "1"}}] * 10001
    t0 = time.perf_counter()
    with pytest.raises(CuzkError, match=r"partitions: 10001 partitions, over the limit of "
                                        r"10000 per job \(max_partitions_per_job\)"):
        pipeline.normalize_partitions(many, max_partitions=10000)
    assert time.perf_counter() - t0 < 0.1  # not one partition looked at
    assert len(pipeline.normalize_partitions(many[:10000], max_partitions=10000)) == 10000


def test_inline_bytes_over_the_job_limit_are_refused_naming_partitions():
    part = {"input": {"x": "9" * 1000}}
    with pytest.raises(CuzkError, match=r"partitions: the inputs given by value reach \d+ bytes "
                                        r"at partition 4, over the limit of 5000 bytes per job "
                                        r"\(max_inline_bytes_per_job\)"):
        pipeline.normalize_partitions([part] * 10, max_inline_bytes=5000)
    # by reference costs nothing against it; multi-byte text counts as UTF-8
    assert pipeline.normalize_partitions([part] * 4 + [{"input_ref": "/x.json"}] * 20,
                                         max_inline_bytes=5000)
    with pytest.raises(CuzkError, match="max_inline_bytes_per_job"):
        pipeline.normalize_partitions([{"input": "é" * 3000}], max_inline_bytes=5000)


def test_submit_refuses_a_100_mb_inline_input_fast_and_writes_nothing(store_factory):
    """The tester's case: a 100 MB inline input was refused only after 17 s.  Now
    submit_job (and Client.submit, the same call) refuses it before anything is written."""
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.celery_app import create_app

    store = store_factory()
    settings = load_settings(env={})
    ctx = pipeline.Context(create_app(settings), settings, worker_id="t")
    ctx._store = store
    huge = "1" * (100 << 20)
    t0 = time.perf_counter()
    with pytest.raises(CuzkError, match="partitions: .*max_inline_bytes_per_job"):
        pipeline.submit_job(ctx, "c", [{"input": huge}], request_id="r-huge")
    assert time.perf_counter() - t0 < 1.0
    with pytest.raises(CuzkError, match="partitions: 10001 partitions"):
        pipeline.submit_job(ctx, "c", [{"input": {}}] * 10001)
    assert not store.redis.keys(f"{store.prefix}:*")


def test_the_limits_are_settings_with_env_vars():
    from cuzk_tasks.settings.config import load_settings

    s = load_settings(env={})
    assert (s.max_partitions_per_job, s.max_inline_bytes_per_job, s.job_window) == \
        (defaults.MAX_PARTITIONS_PER_JOB, defaults.MAX_INLINE_BYTES_PER_JOB, defaults.JOB_WINDOW)
    s = load_settings(env={"CUZK_MAX_PARTITIONS_PER_JOB": "7", "CUZK_JOB_WINDOW": "2",
                           "CUZK_MAX_INLINE_BYTES_PER_JOB": "100"})
    assert (s.max_partitions_per_job, s.max_inline_bytes_per_job, s.job_window) == (7, 100, 2)


# --- chunked release (fair order) -------------------------------------------------------

def test_only_the_window_is_queued_and_each_finished_partition_releases_one(store_factory):
    store = recording(store_factory)
    device(store)
    job, created = make_job(store, 5, window=2)
    assert created
    assert sent_idx(store) == [0, 1]
    assert store.redis.llen(store.keys.held(job)) == 3
    assert store.get_job(job)["n_released"] == 2
    # the sweeper's stage check sees only the released partitions
    assert sorted(i for j, i, *_ in store.stage_partitions() if j == job) == [0, 1]
    finish_partition(store, job, 0)
    assert sent_idx(store) == [0, 1, 2]
    assert store.get_job(job)["n_released"] == 3
    for i in (1, 2, 3):
        finish_partition(store, job, i)
    assert sent_idx(store) == [0, 1, 2, 3, 4]
    assert store.redis.llen(store.keys.held(job)) == 0
    assert finish_partition(store, job, 4).job_complete
    assert sent_idx(store) == [0, 1, 2, 3, 4]  # nothing more to release
    # each released message is the one submit built for it, sent once
    assert store.publisher.sent == [json.loads(m) for m in synth_messages(job, 5)]
    assert store.outbox_entries() == {}


def test_ending_a_job_drops_its_held_messages(store_factory):
    store = recording(store_factory)
    job, _ = make_job(store, 6, window=2)
    assert store.cancel_job(job)
    assert not store.redis.exists(store.keys.held(job))
    assert sent_idx(store) == [0, 1]  # at most the window was sent, each a no-op now
    assert not store.synth_begin(PartitionRun(job, 0, 0))
    assert store.outbox_entries() == {}


def test_no_window_queues_every_message_at_once(store_factory):
    store = recording(store_factory)
    job, _ = make_job(store, 4, window=None)
    assert sent_idx(store) == [0, 1, 2, 3]
    assert not store.redis.exists(store.keys.held(job))


def test_a_lost_held_list_releases_the_rest_for_the_sweeper_to_redrive(store_factory):
    store = recording(store_factory)
    device(store)
    job, _ = make_job(store, 4, window=1)
    store.redis.delete(store.keys.held(job))
    finish_partition(store, job, 0)
    assert store.get_job(job)["n_released"] == 4
    assert sent_idx(store) == [0]  # nothing to send: the sweeper's recover_stage re-drives
    assert sorted(i for j, i, *_ in store.stage_partitions() if j == job) == [1, 2, 3]


# --- chunked creation ------------------------------------------------------------------------

def test_a_job_over_the_chunk_is_created_in_steps_and_appears_whole(store_factory):
    store = recording(store_factory, chunk=3)
    calls = []
    real_run = store._run

    def run(name, keys, args):  # what was sent before each step
        calls.append((name, len(store.publisher.sent)))
        return real_run(name, keys, args)

    store._run = run
    job, created = make_job(store, 8, window=2, request_id="r1", deadline_s=600)
    # the job and its first tasks appear together: nothing is sent before the commit
    assert created and calls == [("create_parts", 0)] * 3 + [("create_commit", 0)]
    rec = store.get_job(job)
    assert rec["state"] == "pending" and rec["n_partitions"] == 8 and rec["deadline_at"]
    assert "n_written" not in rec
    assert [p["idx"] for p in store.list_partitions(job)] == list(range(8))
    assert sent_idx(store) == [0, 1] and store.outbox_entries() == {}
    assert store.redis.llen(store.keys.held(job)) == 6
    assert store.redis.get(store.keys.request("r1")) == job
    assert store.redis.zscore(store.keys.jobs_active(), job) is not None
    assert not store.redis.zcard(store.keys.jobs_creating())
    # idempotent on the request id: the first step already answers
    calls.clear()
    assert make_job(store, 8, job_id="other", request_id="r1") == (job, False)
    assert calls == [("create_parts", 2)] and not store.redis.exists(store.keys.job("other"))
    assert sent_idx(store) == [0, 1]


def test_a_creation_cut_short_is_invisible_and_the_sweeper_deletes_it(store_factory):
    """A submitter killed between the steps: no read shows the job, its request id maps to
    nothing (a retry creates the job anew), and reap_creating deletes it once stale."""
    store = recording(store_factory, chunk=3)
    with killed_before_commit(store):
        make_job(store, 8, job_id="half", request_id="r2")
    assert store.redis.hget(store.keys.job("half"), "state") == "creating"
    assert store.publisher.sent == [] and store.outbox_entries() == {}  # no message of it
    assert store.job_status("half") is None
    assert store.redis.get(store.keys.request("r2")) is None
    snap = store.snapshot()
    assert all(j["id"] != "half" for j in snap["jobs"] + snap["recent_jobs"])
    assert store.stage_partitions() == []
    # the retry of the request creates it whole
    job, created = make_job(store, 8, job_id="again", request_id="r2")
    assert (job, created) == ("again", True)
    assert sent_idx(store, "half") == [] and sent_idx(store, "again") == [0, 1, 2]
    # not stale yet: kept; stale: deleted in steps of `chunk` partitions
    assert store.reap_creating(stale_s=3600) == 0 and store.redis.exists(store.keys.job("half"))
    assert store.reap_creating(stale_s=0, max_steps=1) == 1
    assert store.redis.exists(store.keys.job("half"))
    assert store.reap_creating(stale_s=0) == 0
    assert not store.redis.keys(f"{store.prefix}:*half*")
    assert store.job_status("again")["counts"] == {"pending": 8}


def test_a_late_step_of_a_discarded_creation_is_rejected(store_factory):
    store = store_factory(chunk=3)
    real_run = store._run
    seen = []

    def sweeper_strikes_mid_creation(name, keys, args):
        if name == "create_parts" and seen == ["create_parts"]:
            store.reap_creating(stale_s=0)
        seen.append(name)
        return real_run(name, keys, args)

    store._run = sweeper_strikes_mid_creation
    with pytest.raises(StateError, match="discarded"):
        make_job(store, 8, job_id="slow", request_id="r3")
    store._run = real_run
    assert store.reap_creating(stale_s=0) == 0
    assert not store.redis.keys(f"{store.prefix}:*slow*")


def test_two_submits_of_one_request_commit_once(store_factory):
    store = recording(store_factory, chunk=3)
    real_run = store._run
    raced = []

    def other_commits_first(name, keys, args):
        if name == "create_commit" and not raced:
            raced.append(1)
            store._run = real_run
            assert make_job(store, 8, job_id="first", request_id="r4") == ("first", True)
        return real_run(name, keys, args)

    store._run = other_commits_first
    assert make_job(store, 8, job_id="second", request_id="r4") == ("first", False)
    assert store.reap_creating() == 0  # discarded creations go at once, whatever their age
    assert not store.redis.keys(f"{store.prefix}:*second*")
    assert store.job_status("first")["counts"] == {"pending": 8}
    assert sent_idx(store, "first") == [0, 1, 2] and sent_idx(store, "second") == []


# --- chunked end ----------------------------------------------------------------------------

def test_cancelling_a_big_job_ends_its_partitions_in_steps(store_factory):
    store = store_factory(chunk=3, job_retention_s=3600)
    job, _ = make_job(store, 8, window=2, request_id="r5")
    real_run = store._run
    calls = []
    store._run = lambda name, keys, args: calls.append(name) or real_run(name, keys, args)
    assert store.cancel_job(job, "stop")
    assert calls == ["cancel_job", "reap_jobs", "reap_jobs", "reap_jobs"]
    st = store.job_status(job)
    assert st["state"] == "cancelled" and st["counts"] == {"cancelled": 8}
    assert all(p["error"] == "stop" for p in st["partitions"])
    assert not store.redis.zcard(store.keys.jobs_reaping())
    assert "reap_next" not in store.get_job(job)
    for key in [store.keys.job(job), store.keys.request("r5")] + \
            [store.keys.part(job, i) for i in range(8)]:
        assert 0 < store.redis.ttl(key) <= 3600, key
    ended = [f for _, f in store.events(count=100) if f["type"] == "partitions_ended"]
    assert [(f["from"], f["to"]) for f in ended] == [("0", "3"), ("3", "6"), ("6", "8")]


def test_a_failed_partition_of_a_big_job_cancels_the_others_via_the_reaper(store_factory):
    store = store_factory(chunk=3)
    job, _ = make_job(store, 7, window=7)
    assert store.fail_partition(PartitionRun(job, 2, 0), "boom")
    assert store.job_status(job)["counts"] == {"failed": 1, "cancelled": 6}


def test_a_big_job_past_its_deadline_is_reaped(store_factory):
    store = store_factory(chunk=3)
    job, _ = make_job(store, 7, deadline_s=0.05)
    time.sleep(0.1)
    assert store.expire_deadlines() == [job]
    assert store.job_status(job)["counts"] == {"cancelled": 7}


def test_an_ender_that_died_leaves_the_reaping_to_the_sweeper(store_factory):
    store = store_factory(chunk=3)
    job, _ = make_job(store, 7)
    store.script("cancel_job")(keys=[store.keys.job(job)], args=store.common_args + [job, "x"])
    assert store.redis.zcard(store.keys.jobs_reaping()) == 1
    # the job is over for every transition already
    assert store.synth_begin(PartitionRun(job, 0, 0)).reason == "job_cancelled"
    assert store.reap_jobs(max_steps=1) == 1
    assert store.reap_jobs() == 0
    assert store.job_status(job)["counts"] == {"cancelled": 7}


def test_a_done_big_job_gets_its_result_and_retention_by_the_reaper(store_factory):
    """The last finalize_end of a big job only marks it completing; the reaper steps write
    the result (the same document as a small job's) and end the job with its on_done
    (proofs null: they are read from the result)."""
    store = recording(store_factory, chunk=3, job_retention_s=3600)
    device(store)
    spec = {"task": "svc.done", "queue": "svc.cb"}
    job, _ = make_job(store, 7, window=7, on_done=(spec, stage_messages().on_done(spec)),
                      deadline_s=600)
    for i in range(6):
        finish_partition(store, job, i)
    store.reap_jobs = lambda max_steps=None: 0  # the finalizer dies before reaping
    end = finish_partition(store, job, 6)
    assert end.job_complete
    assert store.get_job(job)["state"] == "running" and store.get_result(job) is None
    assert store.redis.zscore(store.keys.jobs_deadlines(), job) is None
    del store.reap_jobs
    assert type(store).reap_jobs(store, max_steps=2) == 1  # 6 of 7 partitions written
    assert store.get_job(job)["state"] == "running" and store.get_result(job) is None
    assert store.publisher.tasks("svc.done") == []  # the job has not ended yet
    assert type(store).reap_jobs(store) == 0
    rec = store.get_job(job)
    assert rec["state"] == "done" and "completing" not in rec
    result = store.get_result(job)
    assert result == store.collect_result(job)  # the same document as a small job's
    assert [p["idx"] for p in result["proofs"]] == list(range(7))
    assert result["proofs"][3] == {"idx": 3, "proof": {"pi": 3}, "public": ["3"]}
    assert 0 < store.redis.ttl(store.keys.result(job)) <= store.result_ttl_s
    assert all(0 < store.redis.ttl(store.keys.part(job, i)) <= 3600 for i in range(7))
    (callback,) = [e for e in store.publisher.sent if e["task"] == "svc.done"]
    assert (callback["queue"], callback["priority"], callback["args"]) == ("svc.cb", 0, [])
    assert callback["kwargs"] == {"job_id": job, "state": "done", "proofs": None}
    assert store.outbox_entries() == {}
    assert not store.redis.exists(store.keys.result_building(job))


def test_the_on_done_callback_carries_proofs_only_up_to_a_size(store_factory, monkeypatch):
    store = recording(store_factory)
    device(store)
    spec = {"task": "svc.done", "queue": "svc.cb"}
    for n, limit, carried in ((2, 1000, True), (2, 40, False)):
        monkeypatch.setattr(defaults, "ON_DONE_PROOFS_MAX_BYTES", limit)
        job, _ = make_job(store, n, job_id=f"j{limit}", window=n,
                          on_done=(spec, stage_messages().on_done(spec)))
        for i in range(n):
            finish_partition(store, job, i)
        kwargs = store.publisher.sent[-1]["kwargs"]
        assert kwargs["job_id"] == job
        proofs = store.get_result(job)["proofs"]
        assert kwargs["proofs"] == (proofs if carried else None), (limit, kwargs)


def test_stage_partitions_reads_in_steps(store_factory):
    store = store_factory(chunk=3)
    for name in ("x", "y"):
        make_job(store, 5, job_id=name, window=5)
    calls = []
    real_run = store._run
    store._run = lambda name, keys, args: calls.append(name) or real_run(name, keys, args)
    rows = store.stage_partitions()
    assert [(j, i) for j, i, *_ in rows] == [(j, i) for j in "xy" for i in range(5)]
    assert calls == ["stage_partitions"] * 4
    assert len(store.stage_partitions(limit=4)) == 4


def test_a_done_big_job_without_retention_leaves_the_reaper_at_once(store_factory):
    store = store_factory(chunk=3, job_retention_s=0)
    device(store)
    job, _ = make_job(store, 7, window=7)
    for i in range(7):
        finish_partition(store, job, i)
    assert store.get_job(job)["state"] == "done" and len(store.get_result(job)["proofs"]) == 7
    assert not store.redis.zcard(store.keys.jobs_reaping())
    assert store.redis.ttl(store.keys.part(job, 0)) == -1


# --- paged status ---------------------------------------------------------------------------

def test_job_status_pages_partitions_and_counts_all_of_them(store_factory):
    store = store_factory(chunk=3)
    device(store)
    job, _ = make_job(store, 8, window=8)
    finish_partition(store, job, 1)
    st = store.job_status(job, offset=0, limit=3)
    assert [p["idx"] for p in st["partitions"]] == [0, 1, 2]
    assert st["page"] == {"offset": 0, "limit": 3, "count": 3}
    assert st["counts"] == {"pending": 7, "done": 1}
    assert [p["idx"] for p in store.job_status(job, offset=6, limit=3)["partitions"]] == [6, 7]
    assert store.job_status(job, offset=20)["partitions"] == []
    assert len(store.job_status(job)["partitions"]) == 8  # default page: JOB_STATUS_PAGE
    with pytest.raises(StateError, match="limit"):
        store.job_status(job, limit=-1)
    # the status read carries the first parts_per_job partitions of a job
    from cuzk_tasks.state import reads

    d = reads.status_delta(store, None, {}, reads.PARTITION_FIELDS, parts_per_job=5)
    assert len(d["jobs"][job]["parts"]) == 5


def test_the_web_job_document_pages(store_factory):
    from cuzk_tasks.web import create_app
    from cuzk_tasks.web.config import WebConfig

    store = store_factory(chunk=3)
    job, _ = make_job(store, 8, window=8)
    app = create_app(WebConfig(prefix=store.prefix), store=store)
    client = app.test_client()
    doc = client.get(f"/api/jobs/{job}?offset=2&limit=4").get_json()
    assert [p["idx"] for p in doc["partitions"]] == [2, 3, 4, 5]
    assert doc["page"] == {"offset": 2, "limit": 4, "count": 4} and doc["counts"] == {"pending": 8}
    bad = client.get(f"/api/jobs/{job}?limit=abc")
    assert bad.status_code == 400 and "limit" in bad.get_json()["error"]
    page = client.get(f"/jobs/{job}?offset=0&limit=3").get_data(as_text=True)
    assert "showing #0–#2 of 8" in page and "next</a>" in page


# --- no long Lua step at 10,000 partitions (real redis-server, SLOWLOG) ----------------------

#: the longest any one command of ours may hold Redis with a 10,000-partition job, in ms:
#: the issue's 50 ms target with a 2x margin for a loaded test host (measured: see the test's
#: docstring).  Redis answers BUSY to everyone after 5 s of one script; before these steps
#: were chunked, creating a 100,000-partition job held it 2-4 s and cancelling it 7 s.
MAX_COMMAND_MS = 100


class Slowlog:
    """Every command redis-server runs, from SLOWLOG (threshold 0), phase by phase."""

    def __init__(self, redis):
        self.redis = redis
        self.old = redis.config_get("slowlog-*")
        redis.config_set("slowlog-log-slower-than", 0)
        redis.config_set("slowlog-max-len", 200000)
        redis.slowlog_reset()
        self.phases = {}

    def phase(self, name):
        entries = self.redis.slowlog_get(200000)
        self.redis.slowlog_reset()
        ours = [e for e in entries if not str(e["command"]).upper().startswith(("SLOWLOG", "B'SLOWLOG"))]
        worst = max(ours, key=lambda e: e["duration"])
        command = worst["command"]
        command = command.decode() if isinstance(command, bytes) else str(command)
        self.phases[name] = (worst["duration"] / 1000.0, command[:60], len(entries))
        return self.phases[name]

    def restore(self):
        for key, value in self.old.items():
            self.redis.config_set(key, value)


@pytest.mark.slow
def test_no_step_holds_redis_long_at_10000_partitions(redis_server_url):
    """Create, read (a page, the counts, the status read), cancel, expire and complete
    10,000-partition jobs, and delete a creation cut short, with SLOWLOG recording every
    command: none may take MAX_COMMAND_MS.  The longest command of each phase is printed
    (``-s``); measured on 2 cores shared with other test runs: create 14-22 ms (one
    create_parts step of 500), read 4 ms, cancel 15 ms, deadline 22 ms, complete 14 ms (a
    reaper step writing 500 proofs into the result), on_done 15 ms, stage_partitions 11 ms,
    reap_creating 14 ms."""
    import redis as redis_py

    from cuzk_tasks.state import StateStore

    client = redis_py.Redis.from_url(redis_server_url, decode_responses=True)
    prefix = "big" + os.urandom(4).hex()
    # its messages published and cleared from the outbox as a service's are (outbox_done)
    store = StateStore(client, prefix=prefix, job_retention_s=3600, publisher=Recorder())
    n = defaults.MAX_PARTITIONS_PER_JOB
    inputs = [{"input": json.dumps({"a": str(i), "b": "7" * 80})} for i in range(n)]
    log = Slowlog(client)
    try:
        def create(job_id, **kw):
            messages = synth_messages(job_id, n)
            got, created = store.create_job(job_id, "c", "k", 5, f"req-{job_id}", inputs,
                                            messages=messages, window=defaults.JOB_WINDOW, **kw)
            assert created
            return got

        create("a")
        log.phase("create")
        st = store.job_status("a")
        assert st["counts"] == {"pending": n} and len(st["partitions"]) == defaults.JOB_STATUS_PAGE
        store.snapshot()
        log.phase("read")
        assert store.cancel_job("a")
        assert store.job_status("a", limit=1)["counts"] == {"cancelled": n}
        log.phase("cancel")

        create("b", deadline_s=0.5)
        time.sleep(0.6)
        client.slowlog_reset()
        assert store.expire_deadlines() == ["b"]
        log.phase("deadline")

        # a job completing: every partition finalizing (set up directly), then finalize_end
        # each -- the last stores the result of 10,000 proofs
        create("c")
        client.hset(store.keys.job("c"), "state", "running")
        for first in range(0, n, 500):
            pipe = client.pipeline(transaction=False)
            for i in range(first, min(first + 500, n)):
                pipe.hset(store.keys.part("c", i), mapping={"state": "finalizing"})
            pipe.execute()
        client.slowlog_reset()
        proof = {"pi_a": ["1" * 77] * 3, "pi_b": [["2" * 77] * 2] * 3, "pi_c": ["3" * 77] * 3,
                 "protocol": "groth16", "curve": "bn128"}
        for i in range(n):
            end = store.finalize_end(PartitionRun("c", i, 0), 1.0, proof, ["5" * 77])
            assert end.ok, end
        assert end.job_complete
        log.phase("complete")
        assert len(store.get_result("c")["proofs"]) == n

        # a job of one chunk with an on_done callback: its last finalize_end stores the
        # result and sends the callback in one step (the proofs left out: over 64 KiB)
        spec = {"task": "svc.done", "queue": f"{prefix}.cb"}
        store.create_job("f", "c", "k", 5, None, inputs[:500],
                         on_done=(spec, stage_messages().on_done(spec)))
        client.hset(store.keys.job("f"), "state", "running")
        for i in range(500):
            client.hset(store.keys.part("f", i), "state", "finalizing")
        client.slowlog_reset()
        for i in range(500):
            end = store.finalize_end(PartitionRun("f", i, 0), 1.0, proof, ["5" * 77])
        assert end.job_complete and len(store.publisher.tasks("svc.done")) == 1
        assert store.publisher.sent[-1]["kwargs"]["proofs"] is None
        log.phase("on_done")

        # the sweeper's stage check over a running 10,000-partition job
        client.hset(store.keys.job("e"), mapping={"state": "running", "n_partitions": n})
        client.zadd(store.keys.jobs_active(), {"e": 1})
        for first in range(0, n, 500):
            pipe = client.pipeline(transaction=False)
            for i in range(first, min(first + 500, n)):
                pipe.hset(store.keys.part("e", i), mapping={"state": "proving", "attempt": 0})
            pipe.execute()
        client.slowlog_reset()
        assert len(store.stage_partitions()) == n
        log.phase("stage_partitions")

        # a creation cut short, deleted by the sweeper's step
        with killed_before_commit(store):
            create("d")
        client.slowlog_reset()
        assert store.reap_creating(stale_s=0) == 0
        log.phase("reap_creating")
    finally:
        log.restore()
        for key in client.scan_iter(match=f"{prefix}*", count=5000):
            client.unlink(key)
        client.close()
    report = ", ".join(f"{name} {ms:.1f} ms ({cmd}; {count} commands)"
                       for name, (ms, cmd, count) in log.phases.items())
    print("longest command per phase:", report)
    worst = max(ms for ms, _, _ in log.phases.values())
    assert worst < MAX_COMMAND_MS, report
