"""StateStore transitions, one by one: happy paths and rejections (fakeredis and redis-server).

Every test runs on both backends through the parameterised ``store`` fixture (conftest.py).
"""

import json
import threading
import time

import pytest

from cuzk_tasks.errors import StateError
from cuzk_tasks.state import (DeviceResult, JobState, Keys, PartitionRun, PartitionState,
                              StateStore, WorkerState)
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.service.messages import StageMessages
from cuzk_tasks.state import reads
from cuzk_tasks.state.store import script_text
from support.outbox import Recorder

# --- helpers ----------------------------------------------------------------------------


def dump(store):
    """Every key of this store except the events stream, with its contents."""
    r = store.redis
    out = {}
    for key in r.scan_iter(match=f"{store.prefix}:*", count=1000):
        kind = r.type(key)
        if kind == "hash":
            out[key] = r.hgetall(key)
        elif kind == "set":
            out[key] = sorted(r.smembers(key))
        elif kind == "zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key] = r.lrange(key, 0, -1)
        elif kind == "string":
            out[key] = r.get(key)
        elif kind == "stream":
            continue
        else:  # pragma: no cover
            out[key] = kind
    return out


def new_job(store, n=2, job_id="j1", request_id=None, kind="k", circuit="c"):
    parts = [{"input": json.dumps({"a": i})} for i in range(n)]
    got, created = store.create_job(job_id, circuit, kind, 5, request_id, parts)
    assert created and got == job_id
    return job_id


def device(store, worker_id="w1", ttl_s=30):
    store.register_worker(worker_id, "device", "host", device=0, queue=f"cuzk.dev.host.{worker_id}")
    store.heartbeat(worker_id, ttl_s)
    return worker_id


def to_synth_done(store, job_id, idx, attempt=0):
    assert store.synth_begin(PartitionRun(job_id, idx, attempt))
    assert store.synth_end(PartitionRun(job_id, idx, attempt), f"/spool/{job_id}/{idx}.wtns", 12.5)


def to_routed(store, job_id, idx, worker_id, attempt=0):
    to_synth_done(store, job_id, idx, attempt)
    assert store.route(PartitionRun(job_id, idx, attempt), worker_id)


def to_proving(store, job_id, idx, worker_id, attempt=0):
    to_routed(store, job_id, idx, worker_id, attempt)
    started = store.prove_begin(worker_id, PartitionRun(job_id, idx, attempt), 3)
    assert started.ok, started
    return started.token


def to_finalizing(store, job_id, idx, worker_id, attempt=0):
    token = to_proving(store, job_id, idx, worker_id, attempt)
    end = store.prove_end(worker_id, token, PartitionRun(job_id, idx, attempt), 100.0)
    assert end.worker_cleared and end.partition_advanced
    return token


def pstate(store, job_id, idx):
    return store.get_partition(job_id, idx)["state"]


def stage_messages():
    """The pipeline's outbox entries, as a service with default settings builds them."""
    return StageMessages(load_settings(env={"CUZK_SHARED_SPOOL": "1"}))  # a bare store's mode


# --- construction, keys ------------------------------------------------------------------


def test_client_must_decode_responses(store_factory, request):
    if store_factory.backend == "fakeredis":
        import fakeredis

        raw = fakeredis.FakeRedis(decode_responses=False)
    else:
        import redis

        raw = redis.Redis.from_url(request.getfixturevalue("redis_server_url"))
    with pytest.raises(StateError, match="decode_responses"):
        StateStore(raw, prefix="x")


def test_from_url(store_factory, request):
    if store_factory.backend != "redis-server":
        pytest.skip("from_url needs a real server")
    url = request.getfixturevalue("redis_server_url")
    store = StateStore.from_url(url, prefix="fromurl")
    assert store.redis.ping()


def test_bad_prefix_and_ids_raise(store):
    with pytest.raises(StateError):
        Keys("")
    with pytest.raises(StateError):
        Keys("a b")
    with pytest.raises(StateError):
        store.create_job("", "c", "k", 5, None, [{"input": "{}"}])
    with pytest.raises(StateError):
        store.create_job("j", "c", "k", 5, None, [])
    with pytest.raises(StateError):
        store.register_worker("w", "gpu-ish", "h")
    with pytest.raises(StateError):
        store.heartbeat("w", 1, extra={"token": "x"})
    with pytest.raises(StateError, match="idx must be a non-negative int"):
        PartitionRun("j", -1, 0)  # a bad run is refused where it is made
    with pytest.raises(StateError, match="expected a PartitionRun"):
        store.synth_begin(("j", 0, 0))


def test_lua_key_functions_match_keys_py(store):
    keys = store.keys
    lua = script_text("workers")  # any script: they all start with the prelude
    prelude = lua.split("-- ==== workers.lua ====")[0]
    body = prelude + """
return {K.job('J'), K.part('J', 3), K.jobs_active(), K.jobs_recent(), K.request('R'),
        K.result('J'), K.workers(), K.worker('W'), K.hb('W'), K.routed('W'), K.unrouted(),
        K.counters(), K.completions(), K.failures(), K.events(), K.host_slot('G', 4),
        K.histograms(), K.held('J'), K.jobs_creating(), K.jobs_reaping(),
        K.result_building('J'), K.rejected(), K.on_done_queues(), K.outbox(),
        K.outbox_due(), K.outbox_seq(), K.outbox_relay()}
"""
    got = store.redis.eval(body, 0, *store.common_args)
    assert got == [keys.job("J"), keys.part("J", 3), keys.jobs_active(), keys.jobs_recent(),
                   keys.request("R"), keys.result("J"), keys.workers(), keys.worker("W"),
                   keys.hb("W"), keys.routed("W"), keys.unrouted(), keys.counters(),
                   keys.completions(), keys.failures(), keys.events(), keys.host_slot("G", 4),
                   keys.phase_histograms(), keys.held("J"), keys.jobs_creating(),
                   keys.jobs_reaping(), keys.result_building("J"), keys.rejected(), keys.on_done_queues(),
                   keys.outbox(), keys.outbox_due(), keys.outbox_seq(), keys.outbox_relay()]


def test_phase_histogram_buckets_are_one_list_in_lua_and_python(store):
    """finalize_end counts into the buckets of _lib.lua; /metrics labels them with
    reads.PHASE_BUCKETS_MS: the two lists are the same."""
    from cuzk_tasks.state import reads

    prelude = script_text("workers").split("-- ==== workers.lua ====")[0]
    got = store.redis.eval(prelude + "return PHASE_BUCKETS_MS", 0, *store.common_args)
    assert tuple(int(b) for b in got) == reads.PHASE_BUCKETS_MS


def test_a_completed_partition_is_counted_in_the_phase_histograms(store):
    """The transition that completes a partition counts its phase durations, so the web
    tier only reads them (reads.phase_histograms)."""
    from cuzk_tasks.state import reads

    new_job(store, n=1)
    w = device(store)
    to_finalizing(store, "j1", 0, w)
    assert store.finalize_end(PartitionRun("j1", 0, 0), 30.0, "{}", "[]").ok
    hist = reads.phase_histograms(store)
    assert hist["finalize_ms"]["count"] == 1 and hist["finalize_ms"]["sum_ms"] == 30.0
    # 30 ms falls in the (25, 50] bucket: cumulative counts 0 up to 25 ms, 1 from 50 ms on
    assert dict(hist["finalize_ms"]["buckets"])[25] == 0
    assert dict(hist["finalize_ms"]["buckets"])[50] == 1
    assert hist["finalize_ms"]["buckets"][-1] == (float("inf"), 1)
    # a stale second finalize of the same partition counts nothing
    assert not store.finalize_end(PartitionRun("j1", 0, 0), 30.0, "{}", "[]").ok
    assert reads.phase_histograms(store)["finalize_ms"]["count"] == 1


def test_every_key_is_under_the_prefix_and_named_by_keys(store):
    # with its messages, left in the outbox (this store has no publisher)
    msgs = [stage_messages().synthesize(PartitionRun("j1", i, 0, "c", 5)) for i in (0, 1)]
    assert store.create_job("j1", "c", "k", 5, "req", [{"input": "{}"}] * 2, messages=msgs)[1]
    w = device(store)
    to_finalizing(store, "j1", 0, w)
    store.finalize_end(PartitionRun("j1", 0, 0), 5.0, "{}", "[]")
    store.fail_partition(PartitionRun("j1", 1, 0), "boom")
    store.store_result("j1", {"x": 1})
    names = set(dump(store)) | {store.keys.events()}
    k = store.keys
    expected = {k.job("j1"), k.part("j1", 0), k.part("j1", 1), k.jobs_recent(), k.request("req"),
                k.result("j1"), k.workers(), k.worker(w), k.hb(w), k.counters(), k.completions(),
                k.failures(), k.events(), k.phase_histograms(), k.outbox(), k.outbox_due(),
                k.outbox_seq(), k.estimates("c")}
    assert names == expected


# --- create_job ------------------------------------------------------------------------------


def test_create_job_fields(store):
    got, created = store.create_job("j1", "mul", "demo", 3, "req-1",
                                    [{"input": '{"a": 1}'}, {"input_ref": "/in.json"},
                                     {"witness_ref": "/w.wtns"}])
    assert (got, created) == ("j1", True)
    job = store.get_job("j1")
    assert job["state"] == JobState.PENDING
    assert (job["circuit"], job["kind"], job["priority"], job["request_id"]) == ("mul", "demo", 3, "req-1")
    assert (job["n_partitions"], job["n_done"], job["n_failed"]) == (3, 0, 0)
    assert job["submitted_at"] > 1e9
    parts = store.list_partitions("j1")
    assert [p["idx"] for p in parts] == [0, 1, 2]
    assert all(p["state"] == PartitionState.PENDING and p["attempt"] == 0 for p in parts)
    assert parts[0]["input"] == '{"a": 1}' and parts[0]["input_ref"] is None
    assert parts[1]["input_ref"] == "/in.json" and parts[2]["witness_ref"] == "/w.wtns"
    assert store.redis.zscore(store.keys.jobs_active(), "j1") is not None


def test_create_job_is_idempotent_on_request_id(store):
    new_job(store, job_id="j1", request_id="req")
    before = dump(store)
    got, created = store.create_job("j2", "c", "k", 5, "req", [{"input": "{}"}])
    assert (got, created) == ("j1", False)
    assert store.get_job("j2") is None
    assert dump(store) == before
    # no request id: a new job each time; a job id that exists is not overwritten
    assert store.create_job("j3", "c", "k", 5, None, [{"input": "{}"}]) == ("j3", True)
    assert store.create_job("j3", "c", "k", 5, None, [{"input": "{}"}]) == ("j3", False)
    generated, created = store.create_job(None, "c", "k", 5, None, [{"input": "{}"}])
    assert created and store.get_job(generated)["state"] == "pending"


def test_create_job_concurrent_same_request_creates_one(store):
    results = []

    def submit(i):
        results.append(store.create_job(f"job{i}", "c", "k", 5, "same", [{"input": "{}"}]))

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sum(created for _, created in results) == 1
    assert len({job for job, _ in results}) == 1
    assert store.redis.zcard(store.keys.jobs_active()) == 1


# --- synth ---------------------------------------------------------------------------------


def test_synth_begin_end_happy(store):
    new_job(store)
    assert store.synth_begin(PartitionRun("j1", 0, 0))
    assert store.get_job("j1")["state"] == JobState.RUNNING
    assert pstate(store, "j1", 0) == PartitionState.SYNTHESIZING
    assert store.synth_end(PartitionRun("j1", 0, 0), "/w0.wtns", 7.25)
    p = store.get_partition("j1", 0)
    assert (p["state"], p["witness_ref"], p["synth_ms"]) == ("synth_done", "/w0.wtns", 7.25)
    assert store.unrouted_partitions() == [("j1", 0)]


def test_synth_rejections_change_nothing(store):
    new_job(store)
    before = dump(store)
    assert not store.synth_begin(PartitionRun("j1", 0, 1))          # wrong attempt
    assert not store.synth_begin(PartitionRun("nope", 0, 0))        # unknown job
    assert not store.synth_begin(PartitionRun("j1", 7, 0))          # unknown partition
    assert not store.synth_end(PartitionRun("j1", 0, 0), "/w", 1)   # not synthesizing
    assert dump(store) == before
    assert store.synth_begin(PartitionRun("j1", 0, 0))
    # a redelivered synthesize: accepted, no change
    assert store.synth_begin(PartitionRun("j1", 0, 0))
    assert store.synth_end(PartitionRun("j1", 0, 0), "/w", 1)
    before = dump(store)
    assert not store.synth_begin(PartitionRun("j1", 0, 0))          # late duplicate after synth_end
    assert not store.synth_end(PartitionRun("j1", 0, 0), "/w", 1)   # duplicate end
    assert dump(store) == before


def test_synth_deliveries_are_counted_and_bounded(store):
    """issue 24: a synthesize whose process keeps dying (killed at the hard time limit, OOM)
    is redelivered or re-driven with the next attempt; each accepted delivery counts, summed
    over attempts, and past max deliveries the partition and its job fail."""
    new_job(store)
    assert store.synth_begin(PartitionRun("j1", 0, 0), max_deliveries=2,
                             time_limit_s=40).reason == "ok"
    assert store.synth_begin(PartitionRun("j1", 0, 0), max_deliveries=2,
                             time_limit_s=40).reason == "redelivered"
    assert store.get_partition("j1", 0)["synth_deliveries"] == 2
    # the sweeper re-drives the lost stage with the next attempt: still counted
    assert store.recover_stage(PartitionRun("j1", 0, 0), "synthesizing")
    third = store.synth_begin(PartitionRun("j1", 0, 1), max_deliveries=2, time_limit_s=40)
    assert (third.ok, third.reason) == (False, "poison")
    p = store.get_partition("j1", 0)
    assert (p["state"], p["synth_deliveries"]) == ("failed", 3)
    assert "synthesize was delivered 3 times without finishing" in p["error"]
    assert "hard time limit of 40 s" in p["error"]
    job = store.get_job("j1")
    assert job["state"] == JobState.FAILED and "partition 0: synthesize was" in job["error"]
    # without max_deliveries (an older caller) nothing is counted
    new_job(store, job_id="j2")
    assert store.synth_begin(PartitionRun("j2", 0, 0)) and \
        store.synth_begin(PartitionRun("j2", 0, 0))
    assert store.get_partition("j2", 0).get("synth_deliveries") is None


def test_synth_retry_hands_the_partition_back_uncounted(store_factory):
    """A full spool disk: synthesizing -> pending, attempt + 1, the synthesize queued; the
    delivery that met the outage does not count towards max deliveries."""
    rec = Recorder()
    store = store_factory(publisher=rec)
    new_job(store)
    assert store.synth_begin(PartitionRun("j1", 0, 0), max_deliveries=1)
    msg = stage_messages().synthesize(PartitionRun("j1", 0, 1, "c", 5))
    assert store.synth_retry(PartitionRun("j1", 0, 0), "spool disk full (/s)", message=msg)
    p = store.get_partition("j1", 0)
    assert (p["state"], p["attempt"], p["synth_deliveries"], p["outage_retries"]) == \
        ("pending", 1, 0, 1)
    assert p["last_outage"] == "spool disk full (/s)"
    assert rec.sent == [json.loads(msg)]
    assert rec.sent[0]["kwargs"]["attempt"] == 1
    assert not store.synth_retry(PartitionRun("j1", 0, 0), "again",
                                 message=msg)  # stale: the attempt moved on
    assert len(rec.sent) == 1  # a refused step records nothing
    assert store.synth_begin(PartitionRun("j1", 0, 1),
                             max_deliveries=1)  # the retry is delivery 1 of 1
    assert store.cancel_job("j1")
    assert not store.synth_retry(PartitionRun("j1", 0, 1), "full",
                                 message=msg)  # an ended job stays ended
    assert len(rec.sent) == 1 and store.outbox_entries() == {}


def test_synth_on_cancelled_or_failed_job_rejected(store):
    new_job(store, job_id="a")
    new_job(store, job_id="b")
    assert store.cancel_job("a")
    assert store.fail_partition(PartitionRun("b", 0, 0), "bad input")
    before = dump(store)
    for job in ("a", "b"):
        assert not store.synth_begin(PartitionRun(job, 1, 0))
    assert dump(store) == before


# --- route -----------------------------------------------------------------------------------


def test_route_happy_and_once_per_attempt(store):
    new_job(store)
    w = device(store)
    to_synth_done(store, "j1", 0)
    before = dump(store)
    assert not store.route(PartitionRun("j1", 0, 1), w)      # wrong attempt
    assert not store.route(PartitionRun("j1", 1, 0), w)      # not synth_done
    assert dump(store) == before
    assert store.route(PartitionRun("j1", 0, 0), w)
    assert store.routed_partitions(w) == [("j1", 0)]
    assert store.unrouted_partitions() == []
    assert store.get_partition("j1", 0)["worker"] == w
    before = dump(store)
    assert not store.route(PartitionRun("j1", 0, 0), w)      # second route of the same attempt
    assert not store.route(PartitionRun("j1", 0, 0), "w2")
    assert dump(store) == before


# --- prove_begin / prove_end ---------------------------------------------------------------------


def test_create_job_sends_its_messages_once(store_factory):
    rec = Recorder()
    store = store_factory(publisher=rec)
    msgs = [stage_messages().synthesize(PartitionRun("jm", i, 0, "c", 4)) for i in (0, 1)]
    parts = [{"input": "{}"}] * 2
    assert store.create_job("jm", "c", "k", 4, "req-m", parts, messages=msgs) == ("jm", True)
    assert rec.sent == [json.loads(m) for m in msgs]  # in partition order
    assert [(e["task"], e["args"], e["queue"], e["priority"]) for e in rec.sent] == \
        [("cuzk.synthesize", ["jm", i], "cuzk.cpu-stages", 4) for i in (0, 1)]
    # the idempotent resubmit creates nothing and sends nothing (not even an outbox entry)
    assert store.create_job("jm2", "c", "k", 4, "req-m", parts, messages=msgs) == ("jm", False)
    assert store.create_job("jm", "c", "k", 4, None, parts, messages=msgs) == ("jm", False)
    assert len(rec.sent) == 2 and store.outbox_entries() == {}
    assert store.redis.get(store.keys.outbox_seq()) == "2"


def test_synth_end_and_route_send_prove_to_the_chosen_queue(store_factory):
    rec = Recorder()
    store = store_factory(publisher=rec)
    new_job(store, n=2)
    late = stage_messages().prove(PartitionRun("j1", 0, 0, "c", 2), "/w")
    assert store.synth_begin(PartitionRun("j1", 0, 0))
    end = store.synth_end(PartitionRun("j1", 0, 0), "/w", 1.0, route_circuit="c", message=late)
    assert end and end.routed.reason == "no_live_device"        # nothing live: unrouted
    assert rec.sent == [] and store.outbox_entries() == {}     # ... and nothing sent
    w = device(store, "w1")
    queue = f"cuzk.dev.host.{w}"
    routed = store.route(PartitionRun("j1", 0, 0), circuit="c", message=late)
    assert routed and (routed.worker, routed.queue) == (w, queue)
    assert rec.sent == [{**json.loads(late), "queue": queue}]
    assert not store.route(PartitionRun("j1", 0, 0), circuit="c", message=late)  # once per attempt
    assert len(rec.sent) == 1
    late1 = stage_messages().prove(PartitionRun("j1", 1, 0, "c", 2), "/w")
    assert store.synth_begin(PartitionRun("j1", 1, 0))
    end = store.synth_end(PartitionRun("j1", 1, 0), "/w", 1.0, route_circuit="c", message=late1)
    assert end.routed and end.routed.worker == w
    assert rec.tasks() == [("cuzk.prove", ["j1", i, 0, "c", "/w"], queue) for i in (0, 1)]
    assert rec.sent[1]["priority"] == 2 and rec.sent[1]["kwargs"]["finalize_queue"] == "cuzk.cpu-stages"
    assert store.get_partition("j1", 1)["worker"] == w and store.unrouted_partitions() == []


def test_a_sent_prove_begin_is_read_after_the_work_and_is_idempotent_on_its_nonce(store_factory):
    """send_prove_begin: the step goes out at once and its reply is read later; a reply that
    cannot be read (connection lost, script not loaded) runs the step again, which keeps the
    token and counts one delivery."""
    store = store_factory()
    new_job(store, n=3)
    w = device(store, "w1")
    for idx in range(3):
        to_routed(store, "j1", idx, w)
    store.redis.script_flush()  # as a fresh Redis: prove_begin not loaded yet
    sent = store.send_prove_begin(w, PartitionRun("j1", 0, 0), 3)
    deadline = time.monotonic() + 5
    while pstate(store, "j1", 0) != "proving":  # it runs before the reply is read, even
        assert time.monotonic() < deadline  # as the first prove_begin this Redis has seen
        time.sleep(0.01)
    started = sent.reply()
    assert started.ok and started.reason == "ok" and started.deliveries == 1
    assert store.get_worker(w)["token"] == started.token and pstate(store, "j1", 0) == "proving"

    lost = store.send_prove_begin(w, PartitionRun("j1", 1, 0), 3)
    assert lost._conn is not None
    time.sleep(0.05)  # the step has run ...
    lost._conn.disconnect()  # ... and its reply is lost with the connection
    again = lost.reply()
    part = store.get_partition("j1", 1)
    assert again.ok and part["token"] == again.token == store.get_worker(w)["token"]
    assert int(part["deliveries"]) == 1

    store.redis.script_flush()  # Redis restarted empty: the EVALSHA finds no script
    flushed = store.send_prove_begin(w, PartitionRun("j1", 2, 0), 3).reply()
    assert flushed.ok and int(store.get_partition("j1", 2)["deliveries"]) == 1
    stale = store.send_prove_begin(w, PartitionRun("j1", 2, 5), 3).reply()
    assert not stale.ok and stale.reason == "stale" and stale.token is None


def test_a_sent_synth_begin_runs_at_once_and_replies_as_synth_begin(store_factory):
    """send_synth_begin: the step runs before its reply is read, and the reply is
    synth_begin's (the inputs; a rejection with its reason); a reply lost with its connection
    runs the step again, a redelivery of the same attempt that counts one more delivery."""
    store = store_factory()
    new_job(store, n=3)
    sent = store.send_synth_begin(PartitionRun("j1", 0, 0), max_deliveries=3, time_limit_s=60)
    deadline = time.monotonic() + 5
    while pstate(store, "j1", 0) != "synthesizing":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    begun = sent.reply()
    assert begun.ok and begun.reason == "ok"
    assert begun.inputs == {"input": '{"a": 0}', "input_ref": None, "witness_ref": None}

    lost = store.send_synth_begin(PartitionRun("j1", 2, 0), max_deliveries=3)
    time.sleep(0.05)  # the step has run ...
    if lost._conn is not None:
        lost._conn.disconnect()  # ... and its reply is lost with the connection
    again = lost.reply()
    assert again.ok and again.reason == "redelivered"
    assert int(store.get_partition("j1", 2)["synth_deliveries"]) == 2
    stale = store.send_synth_begin(PartitionRun("j1", 2, 5)).reply()
    assert not stale.ok and stale.reason == "stale" and stale.inputs == {}
    assert store.cancel_job("j1")
    ended = store.send_synth_begin(PartitionRun("j1", 0, 0)).reply()
    assert not ended.ok and ended.reason == "job_cancelled"


def test_a_prove_begin_that_cannot_be_sent_runs_before_the_work(store_factory, monkeypatch):
    """No connection to send it on (or an old redis-py's pool refusing the call): the step
    runs at once, before the caller's compute, so the delivery is still counted first (a
    poison message that kills the process is caught)."""
    store = store_factory()
    new_job(store, n=1)
    w = device(store, "w1")
    to_routed(store, "j1", 0, w)

    pool = store.redis.connection_pool
    real, refused = pool.get_connection, []

    def no_connection(*args, **kwargs):  # the sent step's request only; the plain run's gets one
        if not refused:
            refused.append(1)
            raise ConnectionError("no connection for a sent step")
        return real(*args, **kwargs)

    monkeypatch.setattr(pool, "get_connection", no_connection)
    sent = store.send_prove_begin(w, PartitionRun("j1", 0, 0), 3)
    monkeypatch.undo()
    part = store.get_partition("j1", 0)  # before any reply is read
    assert part["state"] == "proving" and int(part["deliveries"]) == 1
    started = sent.reply()
    assert started.ok and started.token == store.get_partition("j1", 0)["token"]


def test_prove_end_sends_finalize_only_when_the_partition_advances(store_factory):
    rec = Recorder()
    store = store_factory(publisher=rec)
    new_job(store, n=1)
    w = device(store, "w1")
    token = to_proving(store, "j1", 0, w)
    result = DeviceResult(PartitionRun("j1", 0, 0, "c", 0), witness_ref="/w", worker=w,
                          token=token, backend="cpu", partial=None, sent_at=0.0)
    fin = stage_messages().finalize("cuzk.cpu", result)
    stale = store.prove_end(w, "not-the-token", PartitionRun("j1", 0, 0), 5.0, message=fin)
    assert not stale.partition_advanced and rec.sent == []
    end = store.prove_end(w, token, PartitionRun("j1", 0, 0), 5.0, message=fin)
    assert end.partition_advanced and rec.sent == [json.loads(fin)]
    assert rec.tasks() == [("cuzk.finalize", [result.to_json()], "cuzk.cpu")]
    again = store.prove_end(w, token, PartitionRun("j1", 0, 0), 5.0, message=fin)   # a duplicate end
    assert not again.partition_advanced and len(rec.sent) == 1


def test_a_devices_prove_end_hands_its_finalize_to_the_relay(store_factory):
    """A relay store (a device's pool process) hands prove_end's finalize to the relay, with
    another partition routed to the device (its next one: the hand-over waits for no
    publish) or none: the device sends prove_end unread (send_prove_end), so its reply
    must never carry an entry to publish.  Either way it is in the outbox until published."""
    rec = Recorder()
    base = store_factory()
    store = base.__class__(base.redis, prefix=base.prefix, publisher=rec, relay=True)
    new_job(store, n=2)
    w = device(store, "w1")
    tokens = [to_proving(store, "j1", 0, w)]
    to_routed(store, "j1", 1, w)  # the device's next partition is routed to it already

    def finalize_of(idx, token):
        result = DeviceResult(PartitionRun("j1", idx, 0, "c", 0), witness_ref="/w", worker=w,
                              token=token, backend="cpu", partial=None, sent_at=0.0)
        return stage_messages().finalize("cuzk.cpu", result)

    first = store.prove_end(w, tokens[0], PartitionRun("j1", 0, 0), 5.0,
                            message=finalize_of(0, tokens[0]))
    assert first.partition_advanced and rec.sent == []
    assert store.redis.llen(store.keys.outbox_relay()) == 1 and len(store.outbox_entries()) == 1
    started = store.prove_begin(w, PartitionRun("j1", 1, 0), 3)
    sent = store.send_prove_end(w, started.token, PartitionRun("j1", 1, 0), 5.0,
                                message=finalize_of(1, started.token))
    last = sent.reply()  # nothing else routed now: still the relay's
    assert last.partition_advanced and last.worker_cleared and rec.sent == []
    relayed = store.take_relayed(timeout_s=0, limit=10)
    assert [json.loads(entry)["args"][0]["idx"] for _, entry in relayed] == [0, 1]
    assert len(store.outbox_entries()) == 2


def test_finalize_due_records_the_finalize_only_for_the_run_still_finalizing(store_factory):
    """finalize_due (a lone run's finalize the device could not publish after its prove_end):
    recorded for the partition finalizing with this attempt and token; not for another token,
    another attempt, or a partition no longer finalizing (cancelled meanwhile)."""
    rec = Recorder()
    base = store_factory()
    store = base.__class__(base.redis, prefix=base.prefix, publisher=rec)
    new_job(store, n=1)
    w = device(store, "w1")
    token = to_proving(store, "j1", 0, w)
    run = PartitionRun("j1", 0, 0)
    message = stage_messages().finalize("cuzk.cpu", DeviceResult(
        PartitionRun("j1", 0, 0, "c", 0), witness_ref="/w", worker=w, token=token,
        backend="cpu", partial=None, sent_at=0.0))
    assert not store.finalize_due(run, token, message)  # still proving: not yet
    assert store.prove_end(w, token, run, 5.0).partition_advanced
    assert not store.finalize_due(run, "other-token", message)
    assert not store.finalize_due(PartitionRun("j1", 0, 1), token, message)
    assert rec.sent == []
    assert store.finalize_due(run, token, message)
    assert [e["args"][0]["token"] for e in rec.sent] == [token]  # published, then deleted
    assert store.outbox_entries() == {}
    assert store.cancel_job("j1")
    assert not store.finalize_due(run, token, message)


def test_prove_begin_says_how_many_partitions_wait_behind_the_run(store_factory):
    """prove_begin's ``others_routed``: the partitions routed to the device besides the one
    it begins (0: the device publishes that run's finalize itself, before prove_end).  A
    rejected begin says nothing."""
    store = store_factory()
    new_job(store, n=3)
    w = device(store, "w1")
    for idx in range(3):
        to_routed(store, "j1", idx, w)
    assert store.prove_begin(w, PartitionRun("j1", 0, 0), 3).others_routed == 2
    again = store.prove_begin(w, PartitionRun("j1", 0, 0), 3)  # a redelivery: still 2 behind
    assert again.ok and again.others_routed == 2
    store.prove_end(w, again.token, PartitionRun("j1", 0, 0), 1.0)
    assert store.prove_begin(w, PartitionRun("j1", 1, 0), 3).others_routed == 1
    stale = store.prove_begin(w, PartitionRun("j1", 2, 5), 3)
    assert not stale.ok and stale.others_routed is None


def test_a_finalize_end_before_prove_end_keeps_the_device_time_and_one_completion(
        store_factory):
    """A device that published its finalize before prove_end can be overtaken by it:
    finalize_end takes the partition from proving with the run's token (and frees the
    worker); the late prove_end advances nothing, clears nothing, and records the device
    time on the done partition."""
    store = store_factory()
    new_job(store, n=1)
    w = device(store, "w1")
    token = to_proving(store, "j1", 0, w)
    end = store.finalize_end(PartitionRun("j1", 0, 0), 3.0, "{}", "[]", token=token)
    assert end.ok and end.job_complete
    assert store.get_worker(w)["state"] == "idle"
    late = store.prove_end(w, token, PartitionRun("j1", 0, 0), 42.5)
    assert not late.partition_advanced and not late.worker_cleared
    part = store.get_partition("j1", 0)
    assert part["state"] == "done" and float(part["prove_ms"]) == 42.5 and part["t_prove_end"]
    assert int(store.get_job("j1")["n_done"]) == 1 and store.outbox_entries() == {}
    # another run's late end (another token) records nothing on it
    store.prove_end(w, "j1:0:0:other", PartitionRun("j1", 0, 0), 99.0)
    assert float(store.get_partition("j1", 0)["prove_ms"]) == 42.5


def test_publish_now_sends_through_the_publisher_and_says_whether_it_could(store_factory):
    rec = Recorder()
    base = store_factory()
    assert not base.publish_now(json.dumps({"task": "t"}))  # no publisher: not sent
    store = base.__class__(base.redis, prefix=base.prefix, publisher=rec, relay=True)
    message = stage_messages().synthesize(PartitionRun("j1", 0, 0, "c", 5))
    assert store.publish_now(message)
    assert rec.sent == [json.loads(message)] and store.outbox_entries() == {}
    down = base.__class__(base.redis, prefix=base.prefix, publisher=Recorder(outage=True))
    assert not down.publish_now(message)  # the broker cannot take it: the caller keeps it


def test_recover_stage_sends_the_synthesize_of_a_pending_partition_only(store_factory):
    """The sweeper re-drives a lost stage: a pending or synthesizing partition gets its
    synthesize for attempt + 1 in the same step; a later stage goes back to unrouted
    synth_done (the sweeper routes it), sending nothing."""
    rec = Recorder()
    store = store_factory(publisher=rec)
    new_job(store, n=2)
    w = device(store)
    msg = stage_messages().synthesize(PartitionRun("j1", 0, 1, "c", 5))
    assert not store.recover_stage(PartitionRun("j1", 0, 0), "synthesizing",
                                   message=msg)  # it is pending
    assert rec.sent == []
    assert store.recover_stage(PartitionRun("j1", 0, 0), "pending", message=msg)
    assert rec.sent == [json.loads(msg)]
    assert store.get_partition("j1", 0)["attempt"] == 1
    to_proving(store, "j1", 1, w)
    other = stage_messages().synthesize(PartitionRun("j1", 1, 1, "c", 5))
    assert store.recover_stage(PartitionRun("j1", 1, 0), "proving", message=other)
    assert len(rec.sent) == 1 and store.unrouted_partitions() == [("j1", 1)]


def test_a_partition_in_the_previous_releases_state_gpu_is_recovered_as_proving(store_factory):
    """Upgrade (docs/deploy.md, "Upgrading"): a store written by the release before holds a
    partition in "gpu" (its name of proving) whose run went with its old worker.  The sweeper
    sees it as proving and recover_stage re-drives it like a lost proving: unrouted
    synth_done with attempt + 1, its worker idle by compare-and-delete on the old token."""
    store = store_factory()
    new_job(store, n=1)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    store.redis.hset(store.keys.part("j1", 0), mapping={"state": "gpu", "t_gpu_start": "1.0"})
    assert [row[2:4] for row in store.stage_partitions()] == [("proving", 0)]
    assert store.recover_stage(PartitionRun("j1", 0, 0), "proving")
    part = store.get_partition("j1", 0)
    assert (part["state"], part["attempt"], part["lost_messages"]) == ("synth_done", 1, 1)
    assert store.unrouted_partitions() == [("j1", 0)]
    assert store.get_worker(w)["state"] == "idle", token


def test_prove_fault_reroutes_to_another_device_then_fails_when_none_is_left(store_factory):
    rec = Recorder()
    store = store_factory(publisher=rec)
    new_job(store, n=2)
    w1, w2 = device(store, "w1"), device(store, "w2")
    token = to_proving(store, "j1", 0, w1)
    retry = stage_messages().prove(PartitionRun("j1", 0, 1, "c", 5), "/w")
    # a stale fault (another token) only touches nothing: the run in flight keeps the worker
    stale = store.prove_fault(w1, "other-token", PartitionRun("j1", 0, 0), "late", "c", 3,
                              message=retry)
    assert (stale.worker_cleared, stale.outcome) == (False, "stale")
    assert store.get_worker(w1)["state"] == "proving" and rec.sent == []
    fault = store.prove_fault(w1, token, PartitionRun("j1", 0, 0), "CUDA error: illegal address", "c",
                              3, message=retry)
    assert (fault.worker_cleared, fault.outcome, fault.worker) == (True, "rerouted", w2)
    part = store.get_partition("j1", 0)
    assert (part["state"], part["attempt"], part["worker"]) == ("synth_done", 1, w2)
    assert part["avoid"] == w1 and part["device_faults"] == 1
    assert "illegal address" in part["last_device_error"]
    assert store.get_worker(w1)["state"] == "idle"
    q2 = f"cuzk.dev.host.{w2}"
    assert rec.sent == [{**json.loads(retry), "queue": q2}]
    assert rec.sent[0]["args"] == ["j1", 0, 1, "c", "/w"] and rec.sent[0]["priority"] == 5
    assert store.prove_begin(w1, PartitionRun("j1", 0, 0),
                             3).reason == "stale"  # the old message, if redelivered
    assert store.get_job("j1")["state"] == "running"
    # the retry faults on w2 as well: w1 is avoided, so no device is left -> failed, clearly
    t2 = store.prove_begin(w2, PartitionRun("j1", 0, 1), 3).token
    again = store.prove_fault(w2, t2, PartitionRun("j1", 0, 1), "out of memory", "c", 3,
                              message=retry)
    assert again.outcome == "failed" and store.get_worker(w2)["state"] == "idle"
    assert len(rec.sent) == 1  # no retry sent for a failed partition
    job = store.get_job("j1")
    assert job["state"] == "failed"
    assert "no other live device" in job["error"] and "out of memory" in job["error"]


def test_prove_fault_fails_after_max_faults(store):
    new_job(store, n=1)
    workers = [device(store, f"w{i}" + store.prefix) for i in range(3)]
    attempt = 0
    token = to_proving(store, "j1", 0, workers[0])
    for n in (1, 2):
        fault = store.prove_fault(store.get_partition("j1", 0)["worker"], token,
                                  PartitionRun("j1", 0, attempt), f"fault {n}", "c",
                                  2 if n == 2 else 3)
        if n == 1:
            assert fault.outcome == "rerouted"
            attempt += 1
            token = store.prove_begin(fault.worker, PartitionRun("j1", 0, attempt), 3).token
    assert fault.outcome == "failed"
    assert "device error on 2 devices" in store.get_job("j1")["error"]


def test_routing_skips_devices_the_partition_faulted_on(store):
    new_job(store, n=1)
    w1, w2 = device(store, "w1" + store.prefix), device(store, "w2" + store.prefix)
    token = to_proving(store, "j1", 0, w1)
    assert store.prove_fault(w1, token, PartitionRun("j1", 0, 0), "boom", "c", 3).worker == w2
    # w2 dies; the sweeper's re-dispatch must not send the partition back to w1
    assert store.redispatch(PartitionRun("j1", 0, 1), worker_id=w2)
    store.worker_offline(w2)
    routed = store.route(PartitionRun("j1", 0, 2), circuit="c")
    assert not routed and routed.reason == "no_live_device"
    w3 = device(store, "w3" + store.prefix)
    assert store.route(PartitionRun("j1", 0, 2), circuit="c").worker == w3


def test_synth_begin_returns_the_partition_inputs(store):
    store.create_job("ji", "c", "k", 5, None, [{"input": '{"a": 1}'}, {"witness_ref": "/w.wtns"}])
    assert store.synth_begin(PartitionRun("ji", 0, 0)).inputs == {
        "input": '{"a": 1}', "input_ref": None, "witness_ref": None}
    begun = store.synth_begin(PartitionRun("ji", 1, 0))
    assert begun.reason == "ok" and begun.inputs["witness_ref"] == "/w.wtns"
    assert store.synth_begin(PartitionRun("ji", 1, 0)).reason == "redelivered"
    rejected = store.synth_begin(PartitionRun("ji", 1, 5))
    assert not rejected and rejected.inputs == {}


def test_prove_begin_happy(store):
    new_job(store, kind="demo")
    w = device(store)
    to_routed(store, "j1", 0, w)
    started = store.prove_begin(w, PartitionRun("j1", 0, 0), 3)
    assert started.ok and started.reason == "ok" and started.deliveries == 1
    assert started.token.startswith("j1:0:0:")
    p = store.get_partition("j1", 0)
    assert (p["state"], p["token"], p["deliveries"]) == ("proving", started.token, 1)
    wk = store.get_worker(w)
    assert (wk["state"], wk["job"], wk["partition"], wk["kind"], wk["token"]) == \
        ("proving", "j1", 0, "demo", started.token)


def test_prove_begin_rejections_change_nothing(store):
    new_job(store, n=3)
    w = device(store)
    device(store, "w2")
    to_routed(store, "j1", 0, w)
    to_synth_done(store, "j1", 2)
    before = dump(store)
    assert store.prove_begin("w2", PartitionRun("j1", 0, 0),
                             3).reason == "stale"   # routed to another worker
    assert store.prove_begin(w, PartitionRun("j1", 0, 1), 3).reason == "stale"      # wrong attempt
    assert store.prove_begin(w, PartitionRun("j1", 1, 0), 3).reason == "stale"      # still pending
    assert store.prove_begin(w, PartitionRun("j1", 2, 0),
                             3).reason == "stale"      # synth_done, not routed
    assert store.prove_begin(w, PartitionRun("nope", 0, 0), 3).reason == "unknown"
    assert dump(store) == before
    # done -> proving
    token = store.prove_begin(w, PartitionRun("j1", 0, 0), 3).token
    store.prove_end(w, token, PartitionRun("j1", 0, 0), 1.0)
    assert store.finalize_end(PartitionRun("j1", 0, 0), 1.0, "{}", "[]").ok
    before = dump(store)
    r = store.prove_begin(w, PartitionRun("j1", 0, 0), 3)
    assert (r.ok, r.token, r.reason) == (False, None, "stale")
    assert dump(store) == before


@pytest.mark.parametrize("end", ["cancel", "fail"])
def test_prove_begin_on_finished_job(store, end):
    new_job(store)
    w = device(store)
    to_routed(store, "j1", 0, w)
    if end == "cancel":
        assert store.cancel_job("j1")
    else:
        assert store.fail_partition(PartitionRun("j1", 1, 0), "synth failed")
    before = dump(store)
    r = store.prove_begin(w, PartitionRun("j1", 0, 0), 3)
    assert not r.ok and r.reason == ("job_cancelled" if end == "cancel" else "job_failed")
    assert dump(store) == before
    assert store.get_worker(w)["state"] == "idle"


def test_prove_end_compare_and_delete(store):
    new_job(store)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    before = dump(store)
    # a stale token: neither the worker nor the partition moves
    end = store.prove_end(w, "j1:0:0:someoneelse", PartitionRun("j1", 0, 0), 5.0)
    assert (end.worker_cleared, end.partition_advanced) == (False, False)
    # right token, wrong attempt: worker cleared (it is its own run), partition stays
    assert dump(store) == before
    end = store.prove_end(w, token, PartitionRun("j1", 0, 0), 5.0)
    assert (end.worker_cleared, end.partition_advanced) == (True, True)
    p = store.get_partition("j1", 0)
    assert (p["state"], p["prove_ms"]) == ("finalizing", 5.0)
    assert store.routed_partitions(w) == []
    wk = store.get_worker(w)
    assert wk["state"] == "idle" and wk.get("token") is None and wk.get("job") is None
    # a late duplicate of the same end
    before = dump(store)
    end = store.prove_end(w, token, PartitionRun("j1", 0, 0), 5.0)
    assert (end.worker_cleared, end.partition_advanced) == (False, False)
    assert dump(store) == before


def test_prove_end_of_old_attempt_does_not_advance(store):
    new_job(store)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    assert store.redispatch(PartitionRun("j1", 0, 0))
    assert store.route(PartitionRun("j1", 0, 1), w)
    end = store.prove_end(w, token, PartitionRun("j1", 0, 0), 5.0)
    assert end.worker_cleared and not end.partition_advanced
    p = store.get_partition("j1", 0)
    assert (p["state"], p["attempt"]) == ("synth_done", 1)
    assert store.routed_partitions(w) == [("j1", 0)]  # the new attempt's routing is kept


# --- poison pills ------------------------------------------------------------------------------


def test_poison_pill_counting(store):
    new_job(store, n=2, kind="demo")
    w = device(store)
    to_routed(store, "j1", 0, w)
    to_routed(store, "j1", 1, w)
    first = store.prove_begin(w, PartitionRun("j1", 0, 0), 2)
    assert first.ok and first.deliveries == 1
    # the worker process dies; it restarts (register) and the message is redelivered
    store.register_worker(w, "device", "host", device=0, queue="q")
    second = store.prove_begin(w, PartitionRun("j1", 0, 0), 2)
    assert second.ok and second.reason == "redelivered" and second.deliveries == 2
    assert second.token != first.token
    assert store.get_worker(w)["token"] == second.token
    # ... dies again: the third delivery is the poison pill
    third = store.prove_begin(w, PartitionRun("j1", 0, 0), 2)
    assert (third.ok, third.token, third.reason, third.deliveries) == (False, None, "poison", 3)
    p = store.get_partition("j1", 0)
    assert p["state"] == "failed"
    assert p["error"] == "partition was delivered 3 times without finishing (poison pill?)"
    job = store.get_job("j1")
    assert job["state"] == "failed" and "poison pill" in job["error"]
    assert pstate(store, "j1", 1) == "cancelled"
    assert store.get_worker(w)["state"] == "idle"   # it held the dead run's token
    assert store.routed_partitions(w) == []
    snap = store.snapshot()
    assert snap["counters"]["failed:demo"] == 1
    assert snap["failures"][0]["error"].startswith("partition was delivered 3 times")
    assert store.prove_begin(w, PartitionRun("j1", 0, 0), 2).reason == "job_failed"


def test_deliveries_count_across_attempts(store):
    new_job(store, n=1)
    w1, w2 = device(store, "w1"), device(store, "w2")
    to_routed(store, "j1", 0, w1)
    assert store.prove_begin(w1, PartitionRun("j1", 0, 0), 2).ok
    store.worker_offline(w1)                  # it died; the sweeper re-dispatches
    assert store.redispatch(PartitionRun("j1", 0, 0))
    assert store.route(PartitionRun("j1", 0, 1), w2)
    assert store.prove_begin(w2, PartitionRun("j1", 0, 1), 2).deliveries == 2
    assert store.redispatch(PartitionRun("j1", 0, 1))
    assert store.route(PartitionRun("j1", 0, 2), w1)
    assert store.prove_begin(w1, PartitionRun("j1", 0, 2), 2).reason == "poison"


# --- finalize_end ---------------------------------------------------------------------------------


def test_finalize_end_happy_and_job_completion(store):
    new_job(store, n=2, kind="demo")
    w = device(store)
    to_finalizing(store, "j1", 0, w)
    to_finalizing(store, "j1", 1, w)
    r0 = store.finalize_end(PartitionRun("j1", 0, 0), 30.0, '{"pi_a": 1}', '["1"]')
    assert (r0.ok, r0.job_complete) == (True, False)
    before = dump(store)
    dup = store.finalize_end(PartitionRun("j1", 0, 0), 30.0, '{"pi_a": 1}', '["1"]')
    assert (dup.ok, dup.job_complete, dup.reason) == (False, False, "stale")
    assert dump(store) == before
    assert not store.finalize_end(PartitionRun("j1", 1, 1), 1.0, "{}", "[]").ok   # wrong attempt
    r1 = store.finalize_end(PartitionRun("j1", 1, 0), 31.0, {"pi_a": 2}, ["2"])
    assert (r1.ok, r1.job_complete) == (True, True)
    job = store.get_job("j1")
    assert job["state"] == "done" and job["n_done"] == 2 and job["finished_at"] >= job["submitted_at"]
    assert store.redis.zscore(store.keys.jobs_active(), "j1") is None
    assert store.redis.zscore(store.keys.jobs_recent(), "j1") is not None
    res = store.collect_result("j1")
    assert res["state"] == "done"
    assert [(p["idx"], p["proof"], p["public"]) for p in res["proofs"]] == \
        [(0, {"pi_a": 1}, ["1"]), (1, {"pi_a": 2}, ["2"])]
    assert store.snapshot()["counters"]["completed:demo"] == 2
    # a late finalize of a done job
    late = store.finalize_end(PartitionRun("j1", 1, 0), 31.0, "{}", "[]")
    assert (late.ok, late.job_complete, late.reason) == (False, False, "job_done")


def test_finalize_end_exactly_once_under_concurrency(store):
    n = 6
    new_job(store, n=n)
    w = device(store)
    for i in range(n):
        to_finalizing(store, "j1", i, w)
    outcomes = []
    barrier = threading.Barrier(n * 3)

    def fin(i):
        barrier.wait()
        outcomes.append((i, store.finalize_end(PartitionRun("j1", i, 0), 1.0, "{}", "[]")))

    threads = [threading.Thread(target=fin, args=(i,)) for i in range(n) for _ in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sum(r.ok for _, r in outcomes) == n
    assert {i for i, r in outcomes if r.ok} == set(range(n))
    assert sum(r.job_complete for _, r in outcomes) == 1
    job = store.get_job("j1")
    assert (job["state"], job["n_done"]) == ("done", n)
    assert store.snapshot()["counters"]["completed:k"] == n


def test_finalize_end_accepts_proving_when_prove_end_never_ran(store):
    new_job(store, n=1)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    r = store.finalize_end(PartitionRun("j1", 0, 0), 1.0, "{}", "[]", token=token)
    assert r.ok and r.job_complete
    assert store.get_worker(w)["state"] == "idle"   # its own token: cleared
    assert store.routed_partitions(w) == []


# --- fail_partition ---------------------------------------------------------------------------------


def test_fail_partition(store):
    new_job(store, n=3, kind="demo")
    w = device(store)
    to_finalizing(store, "j1", 0, w)
    to_routed(store, "j1", 1, w)
    before = dump(store)
    assert not store.fail_partition(PartitionRun("j1", 0, 1), "wrong attempt")
    assert not store.fail_partition(PartitionRun("nope", 0, 0), "x")
    assert dump(store) == before
    assert store.fail_partition(PartitionRun("j1", 0, 0), "self-verification failed")
    p = store.get_partition("j1", 0)
    assert (p["state"], p["error"]) == ("failed", "self-verification failed")
    job = store.get_job("j1")
    assert (job["state"], job["n_failed"]) == ("failed", 1)
    assert job["error"] == "partition 0: self-verification failed"
    assert [pstate(store, "j1", i) for i in (1, 2)] == ["cancelled", "cancelled"]
    assert store.routed_partitions(w) == [] and store.unrouted_partitions() == []
    before = dump(store)
    assert not store.fail_partition(PartitionRun("j1", 0), "again", any_attempt=True)  # terminal
    assert not store.fail_partition(PartitionRun("j1", 1), "cancelled", any_attempt=True)  # same
    assert dump(store) == before
    snap = store.snapshot()
    assert snap["counters"]["failed:demo"] == 1 and snap["counters"]["jobs_failed:demo"] == 1
    f = snap["failures"][0]
    assert (f["job"], f["idx"], f["attempt"], f["error"], f["state"]) == \
        ("j1", 0, 0, "self-verification failed", "finalizing")


def test_failures_list_is_capped(store_factory):
    store = store_factory(failures_kept=3)
    for i in range(5):
        new_job(store, n=1, job_id=f"j{i}")
        assert store.fail_partition(PartitionRun(f"j{i}", 0), f"err{i}", any_attempt=True)
    fails = store.snapshot()["failures"]
    assert [f["error"] for f in fails] == ["err4", "err3", "err2"]


def test_fail_partition_in_proving_without_token_keeps_the_worker(store):
    """A fail without the run's token while the partition is in proving cannot know whether that
    run is still in flight: the worker is left to its own prove_end."""
    new_job(store, n=1)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    assert store.fail_partition(PartitionRun("j1", 0, 0), "prove raised")
    assert store.get_worker(w)["token"] == token
    end = store.prove_end(w, token, PartitionRun("j1", 0, 0), 1.0)
    assert end.worker_cleared and not end.partition_advanced
    # with the run's token the worker is cleared at once
    new_job(store, n=1, job_id="j2")
    token = to_proving(store, "j2", 0, w)
    assert store.fail_partition(PartitionRun("j2", 0, 0), "prove raised", token=token)
    assert store.get_worker(w)["state"] == "idle"


# --- redispatch ----------------------------------------------------------------------------------------


def test_redispatch(store):
    new_job(store, n=2)
    w1, w2 = device(store, "w1"), device(store, "w2")
    token = to_proving(store, "j1", 0, w1)
    to_routed(store, "j1", 1, w1)
    store.worker_offline(w1)
    assert store.dead_workers_with_routed() == [w1]
    for job, idx in store.routed_partitions(w1):
        attempt = store.get_partition(job, idx)["attempt"]
        assert store.redispatch(PartitionRun(job, idx, attempt))
    assert store.routed_partitions(w1) == []
    assert store.unrouted_partitions() == [("j1", 0), ("j1", 1)]
    p = store.get_partition("j1", 0)
    assert (p["state"], p["attempt"], p["worker"], p["token"], p["redispatches"]) == \
        ("synth_done", 1, None, None, 1)
    wk = store.get_worker(w1)   # the worker hash is untouched (compare-and-delete only)
    assert (wk["state"], wk["stored_state"], wk["token"]) == ("offline", "proving", token)
    assert store.dead_workers_with_routed() == []
    before = dump(store)
    assert not store.redispatch(PartitionRun("j1", 0, 0))                      # old attempt
    assert store.prove_begin(w1, PartitionRun("j1", 0, 0), 3).reason == "stale"  # the old message
    assert dump(store) == before
    assert store.route(PartitionRun("j1", 0, 1), w2)
    assert store.prove_begin(w2, PartitionRun("j1", 0, 1), 3).ok
    # the old run's end: clears w1 (its own token) but does not advance attempt 1
    end = store.prove_end(w1, token, PartitionRun("j1", 0, 0), 1.0)
    assert end.worker_cleared and not end.partition_advanced
    assert pstate(store, "j1", 0) == "proving"


def test_redispatch_rejections(store):
    new_job(store, n=2)
    w = device(store)
    to_finalizing(store, "j1", 0, w)
    to_synth_done(store, "j1", 1)
    before = dump(store)
    assert not store.redispatch(PartitionRun("j1", 0, 0))    # finalizing
    # synth_done but not routed: already waiting
    assert not store.redispatch(PartitionRun("j1", 1, 0))
    assert dump(store) == before
    assert store.route(PartitionRun("j1", 1, 0), w)
    before = dump(store)
    assert not store.redispatch(PartitionRun("j1", 1, 0), worker_id="other")   # routed elsewhere
    assert dump(store) == before
    assert store.redispatch(PartitionRun("j1", 1, 0), worker_id=w)
    store.cancel_job("j1")
    assert not store.redispatch(PartitionRun("j1", 1, 0))


@pytest.mark.parametrize("pass_worker", [False, True])
def test_two_sweepers_only_one_wins(store, pass_worker):
    new_job(store, n=4)
    w = device(store)
    for i in range(4):
        to_proving(store, "j1", i, w) if i % 2 else to_routed(store, "j1", i, w)
    store.worker_offline(w)
    wins = []
    barrier = threading.Barrier(3)

    def sweeper():
        barrier.wait()
        for dead in store.dead_workers_with_routed():
            for job, idx in store.routed_partitions(dead):
                part = store.get_partition(job, idx)
                run = PartitionRun(job, idx, part["attempt"])
                if part["state"] in ("synth_done", "proving") and store.redispatch(
                        run, worker_id=dead if pass_worker else None):
                    wins.append((job, idx))

    threads = [threading.Thread(target=sweeper) for _ in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(wins) == [("j1", i) for i in range(4)]
    assert all(store.get_partition("j1", i)["attempt"] == 1 for i in range(4))


# --- cancel -----------------------------------------------------------------------------------------------


def test_cancel_job(store):
    new_job(store, n=3, kind="demo")
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    to_synth_done(store, "j1", 1)
    assert store.cancel_job("j1", "client went away")
    job = store.get_job("j1")
    assert (job["state"], job["error"]) == ("cancelled", "client went away")
    assert [pstate(store, "j1", i) for i in range(3)] == ["cancelled"] * 3
    assert store.routed_partitions(w) == [] and store.unrouted_partitions() == []
    # the run in flight still shows, and its own end clears it
    assert store.get_worker(w)["token"] == token
    end = store.prove_end(w, token, PartitionRun("j1", 0, 0), 1.0)
    assert end.worker_cleared and not end.partition_advanced
    before = dump(store)
    assert not store.cancel_job("j1")
    assert not store.finalize_end(PartitionRun("j1", 0, 0), 1.0, "{}", "[]").ok
    assert not store.fail_partition(PartitionRun("j1", 1), "x", any_attempt=True)
    assert dump(store) == before
    assert store.snapshot()["counters"]["jobs_cancelled:demo"] == 1


# --- workers -------------------------------------------------------------------------------------------------


def test_workers_heartbeat_offline_and_routing_views(store):
    store.register_worker("d0", "device", "h", device=0, queue="cuzk.dev.h.0", gpu_name="H200")
    store.register_worker("d1", "device", "h", device=1, queue="cuzk.dev.h.1")
    store.register_worker("c0", "cpu", "h", queue="cuzk.cpu")
    assert store.get_worker("d0")["state"] == "offline"   # no heartbeat yet
    assert store.heartbeat("d0", 30, resident=["mul"], extra={"pid": 42})
    assert not store.heartbeat("d0", 30)                   # already online; resident kept
    store.heartbeat("d1", 30)
    store.heartbeat("c0", 30)
    d0 = store.get_worker("d0")
    assert (d0["state"], d0["role"], d0["device"], d0["queue"], d0["gpu_name"], d0["pid"]) == \
        ("idle", "device", 0, "cuzk.dev.h.0", "H200", 42)
    assert d0["resident"] == ["mul"] and 0 < d0["hb_ttl_left_ms"] <= 30000
    store.set_resident("d1", ["a", "b"])
    new_job(store, n=1)
    to_routed(store, "j1", 0, "d1")
    live = {w["worker_id"]: w for w in store.live_device_workers()}
    assert set(live) == {"d0", "d1"}
    assert (live["d1"]["outstanding"], live["d1"]["resident"], live["d1"]["queue"]) == \
        (1, ["a", "b"], "cuzk.dev.h.1")
    assert store.dead_workers_with_routed() == []
    assert store.worker_offline("d1")
    assert not store.worker_offline("d1")
    assert [w["worker_id"] for w in store.live_device_workers()] == ["d0"]
    assert store.dead_workers_with_routed() == ["d1"]
    assert store.get_worker("d1")["state"] == "offline"
    assert store.get_worker("nobody") is None
    assert {w["worker_id"] for w in store.all_workers()} == {"d0", "d1", "c0"}


def test_heartbeat_expiry_reports_offline(store):
    w = device(store, ttl_s=0.15)
    assert store.get_worker(w)["state"] == "idle"
    deadline = time.monotonic() + 5
    while store.get_worker(w)["state"] != "offline" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.get_worker(w)["state"] == WorkerState.OFFLINE
    assert store.get_worker(w)["stored_state"] == "idle"


def test_register_resets_the_assignment(store):
    new_job(store, n=1)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    store.register_worker(w, "device", "host", device=0, queue="q")   # the process restarted
    wk = store.get_worker(w)
    assert wk["state"] == "idle" and wk.get("token") is None
    assert store.prove_end(w, token, PartitionRun("j1", 0, 0), 1.0).worker_cleared is False


# --- results, events ----------------------------------------------------------------------------------------------


def test_results_roundtrip_with_ttl(store_factory):
    store = store_factory(result_ttl_s=100)
    assert store.get_result("j1") is None
    store.store_result("j1", {"proofs": [1, 2]})
    assert store.get_result("j1") == {"proofs": [1, 2]}
    assert 0 < store.redis.ttl(store.keys.result("j1")) <= 100
    with pytest.raises(StateError):
        store.collect_result("nope")


def test_events(store):
    new_job(store, n=1)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    latest = store.events(count=1000)
    types = [f["type"] for _, f in latest]
    assert types[:1] == ["job_created"]
    assert "prove_begin" in types and "route" in types and "worker_online" in types
    last_id = latest[-1][0]
    assert store.events(last_id) == []
    store.prove_end(w, token, PartitionRun("j1", 0, 0), 1.0)
    new = store.events(last_id)
    assert [f["type"] for _, f in new] == ["worker_idle", "prove_end"]
    assert new[1][1]["token"] == token and new[1][1]["partition_advanced"] == "1"
    if store.redis.__class__.__module__.startswith("redis"):
        assert store.events("$", block_ms=10) == []


def test_events_stream_is_capped(store_factory):
    store = store_factory(events_maxlen=10)
    for i in range(300):
        new_job(store, n=1, job_id=f"j{i}")
    # MAXLEN ~ trims whole stream nodes (100 entries by default): well under 300
    assert store.redis.xlen(store.keys.events()) <= 10 + 100


# --- worker retirement and host slots ---------------------------------------------------


def test_retire_workers_forgets_only_long_offline_workers_without_routed_work(store):
    for w in ("gone", "busy-gone", "alive", "stopped"):
        device(store, w, ttl_s=30)
    new_job(store, n=1)
    to_routed(store, "j1", 0, "busy-gone")
    store.worker_offline("stopped")  # a clean stop: no heartbeat from now on
    store.worker_offline("busy-gone")
    store.heartbeat("gone", 0.05)  # a crash: its heartbeat just expires
    time.sleep(0.3)
    assert store.retire_workers(60) == []  # nobody has been offline that long
    assert store.retire_workers(0.2) == ["gone", "stopped"]
    ids = [w["worker_id"] for w in store.all_workers()]
    assert ids == ["alive", "busy-gone"]  # routed work keeps a dead worker registered
    assert store.get_worker("gone") is None
    assert not store.redis.exists(store.keys.worker("gone"), store.keys.routed("gone"))
    kinds = [fields["type"] for _, fields in store.events("0", count=1000)]
    assert kinds.count("worker_retired") == 2
    with pytest.raises(StateError, match="retire_after_s"):
        store.retire_workers(0)


def test_a_process_re_registering_an_old_id_is_not_retired_before_its_first_beat(store):
    """A recreated worker registers its (stable) id, then beats: between the two its
    predecessor's long-past last heartbeat must not make the sweeper retire it -- that
    deleted the fresh registration, and the next beat left a hash without a role."""
    device(store, "prover-0:dev0", ttl_s=0.05)
    time.sleep(0.3)  # the old process died long ago
    store.register_worker("prover-0:dev0", "device", "prover-0", device=0, queue="q0")
    assert store.retire_workers(0.2) == []
    store.heartbeat("prover-0:dev0", 30)
    assert store.get_worker("prover-0:dev0")["role"] == "device"


def test_host_slots_are_distinct_while_held_and_reused_after_a_clean_stop(store):
    a = store.claim_host_slot("prover", "hostA:7", 5)
    b = store.claim_host_slot("prover", "hostB:7", 5)
    assert (a.host, b.host) == ("prover-0", "prover-1")
    assert store.claim_host_slot("prover", "hostA:7", 5) == a  # asking twice is idempotent
    store.register_worker(f"{a.host}:dev0", "device", a.host, device=0, queue="q0")
    store.heartbeat(f"{a.host}:dev0", 5, slot=a)
    # a clean stop releases the slot: the recreated container gets the same host name back
    store.worker_offline(f"{a.host}:dev0", slot=a)
    again = store.claim_host_slot("prover", "hostC:7", 5)
    assert again.host == "prover-0" and again.holder == "hostC:7"
    # a stale stop (the old holder, after the slot changed hands) releases nothing
    store.worker_offline(f"{a.host}:dev0", slot=a)
    assert store.claim_host_slot("prover", "hostD:7", 5).host == "prover-2"
    # other groups are independent; a full group is a clear error
    assert store.claim_host_slot("other", "hostA:7", 5, slots=1).host == "other-0"
    with pytest.raises(StateError, match="all 1 slots are held"):
        store.claim_host_slot("other", "hostB:7", 5, slots=1)


def test_host_slot_lives_with_the_heartbeat_and_lapses_with_it(store):
    slot = store.claim_host_slot("p", "h:1", 0.2)
    for _ in range(3):  # heartbeats keep it past its first TTL
        time.sleep(0.1)
        store.heartbeat("p-0:dev0", 0.2, slot=slot)
    assert store.claim_host_slot("p", "h:2", 0.2).host == "p-1"
    time.sleep(0.35)  # holder killed: no more beats, no clean stop
    assert store.claim_host_slot("p", "h:3", 5).host == "p-0"
    # the old holder's late heartbeat must not take the slot back
    store.heartbeat("p-0:dev0", 5, slot=slot)
    assert store.redis.get(store.keys.host_slot("p", 0)) == "h:3"


def test_a_finished_jobs_keys_expire_after_the_retention(store_factory):
    """Issue 11: Redis does not grow without bound.  The step that ends a job sets the job
    retention on its job hash, partition hashes and request-id key (the result key keeps its
    own, shorter TTL); the inline input leaves the partition once its witness exists."""
    store = store_factory(result_ttl_s=3600, job_retention_s=7200)
    device(store)
    job = new_job(store, n=2, request_id="req-1")
    to_synth_done(store, job, 0)
    assert "input" not in store.redis.hgetall(store.keys.part(job, 0))  # the witness replaced it
    assert store.redis.hget(store.keys.part(job, 1), "input")  # not yet synthesized
    assert store.redis.ttl(store.keys.job(job)) == -1  # live: no expiry
    store.fail_partition(PartitionRun(job, 1, 0), "bad input")  # ends the job (failed; 0 cancelled)
    keys = [store.keys.job(job), store.keys.part(job, 0), store.keys.part(job, 1),
            store.keys.request("req-1")]
    for key in keys:
        assert 7100 < store.redis.ttl(key) <= 7200, key
    # a done job too, with its result on the shorter TTL
    other = new_job(store, n=1, job_id="j2")
    token = to_proving(store, other, 0, "w1")
    store.prove_end("w1", token, PartitionRun(other, 0, 0), 1.0)
    assert store.finalize_end(PartitionRun(other, 0, 0), 1.0, "{}", "[]").job_complete
    assert 7100 < store.redis.ttl(store.keys.part(other, 0)) <= 7200
    assert 3500 < store.redis.ttl(store.keys.result(other)) <= 3600


def test_expired_jobs_leave_the_recent_list(store_factory):
    """Past the retention a finished job is gone from every read, and the next job's end
    trims the index of finished jobs."""
    import time

    store = store_factory(result_ttl_s=1, job_retention_s=1)
    job = new_job(store, n=1, job_id="old")
    store.cancel_job(job)
    assert [j["id"] for j in store.snapshot()["recent_jobs"]] == ["old"]
    time.sleep(1.2)
    if store_factory.backend == "fakeredis":  # its expiry is lazy: touch the keys
        store.redis.exists(store.keys.job(job), store.keys.part(job, 0))
    assert store.get_job(job) is None and store.snapshot()["recent_jobs"] == []
    store.cancel_job(new_job(store, n=1, job_id="new"))
    assert store.redis.zrange(store.keys.jobs_recent(), 0, -1) == ["new"]


def test_a_job_past_its_deadline_fails_and_no_stage_of_it_starts(store):
    """Issue 11: deadline_s at submit.  Past it the job fails "deadline exceeded (...)" at
    the first stage that looks (here prove_begin), its live partitions are cancelled, and the
    sweeper's expire_deadlines fails a job that no message reaches any more."""
    import time

    w = device(store)
    store.create_job("jd", "c", "k", 5, None, [{"input": "{}"}] * 3, deadline_s=0.4)
    job = store.get_job("jd")
    assert job["deadline_s"] == 0.4 and job["deadline_at"] == pytest.approx(job["submitted_at"] + 0.4)
    to_routed(store, "jd", 0, w)
    assert store.synth_begin(PartitionRun("jd", 1, 0))
    time.sleep(0.5)
    started = store.prove_begin(w, PartitionRun("jd", 0, 0), 3)
    assert not started.ok and started.reason == "deadline"
    job = store.get_job("jd")
    assert job["state"] == "failed"
    assert job["error"] == "deadline exceeded (0.4 s after submit; 0 of 3 partitions done)"
    assert [p["state"] for p in store.list_partitions("jd")] == ["cancelled"] * 3
    assert store.get_worker(w)["state"] == "idle"  # nothing started
    assert not store.synth_end(PartitionRun("jd", 1, 0), "/w",
                               1.0)  # the running synthesize's end is stale
    # no stage reaches the other job: the sweeper's check fails it, once
    store.create_job("je", "c", "k", 5, None, [{"input": "{}"}], deadline_s=0.2)
    store.create_job("jf", "c", "k", 5, None, [{"input": "{}"}], deadline_s=3600)
    assert store.expire_deadlines() == []
    time.sleep(0.3)
    assert store.expire_deadlines() == ["je"]
    assert store.get_job("je")["error"].startswith("deadline exceeded (0.2 s after submit")
    assert store.expire_deadlines() == [] and store.get_job("jf")["state"] == "pending"
    with pytest.raises(StateError, match="deadline_s"):
        store.create_job("jg", "c", "k", 5, None, [{"input": "{}"}], deadline_s=0)


def lose_everything(store):
    """What a Redis restarted without persistence holds of ``store``: nothing (its keys
    only: the redis-server backend is shared by the session's tests)."""
    keys = list(store.redis.scan_iter(match=f"{store.prefix}:*"))
    if keys:
        store.redis.delete(*keys)


def test_a_heartbeat_registers_again_a_worker_whose_record_redis_lost(store):
    """Redis back empty (issue 24): the beat that finds the worker hash without its role
    records the registration again -- role, host, device, queue, resident set -- and the
    worker is routable at once; an intact record is never touched by it."""
    from cuzk_tasks.state import Registration

    reg = Registration("device", "h", device=0, queue="cuzk.dev.h.0", resident=("mul",))
    store.register_worker("d0", "device", "h", device=0, queue="cuzk.dev.h.0", gpu_name="H200")
    beat = store.heartbeat("d0", 30, registration=reg)
    assert beat and not beat.registered and beat.resident is None
    store.set_resident("d0", ["mul", "add"])
    beat = store.heartbeat("d0", 30, registration=reg)
    assert not beat and not beat.registered and beat.resident == ["mul", "add"]
    assert store.get_worker("d0")["gpu_name"] == "H200"  # the intact record keeps its own
    lose_everything(store)                                # Redis restarted without its data
    store.set_resident("d0", ["add"])                     # the pool process wrote first
    beat = store.heartbeat("d0", 30, registration=reg, extra={"pid": 7})
    assert beat and beat.registered and beat.resident == ["add"]
    d0 = store.get_worker("d0")
    assert (d0["role"], d0["host"], d0["device"], d0["queue"], d0["state"], d0["pid"]) == \
        ("device", "h", 0, "cuzk.dev.h.0", "idle", 7)
    assert [w["worker_id"] for w in store.live_device_workers()] == ["d0"]
    lose_everything(store)
    assert store.heartbeat("d0", 30, registration=reg).registered
    assert store.get_worker("d0")["resident"] == ["mul"]  # the registration's, nothing newer
    assert not store.heartbeat("d0", 30, registration=reg).registered
    lose_everything(store)
    assert not store.heartbeat("d0", 30).registered       # no registration given: none made
    assert store.get_worker("d0").get("role") is None
    kinds = [f.get("type") for _, f in store.redis.xrange(store.keys.events())]
    assert "worker_registered" not in kinds


def test_outage_retry_waits_out_busy_and_oom_but_not_a_wrong_command(caplog):
    """OutageRetry (issue 24): BUSY, OOM (also a script's), LOADING are retried with one
    warning per outage; a reply that says the command is wrong is raised at once."""
    from redis.exceptions import BusyLoadingError, OutOfMemoryError, ResponseError

    from cuzk_tasks.state import OutageRetry

    failures = [ResponseError("BUSY Redis is busy running a script."),
                OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
                ResponseError("Error running script (call to f_1): @user_script:9: -OOM x"),
                BusyLoadingError("Redis is loading the dataset in memory")]
    calls = []

    def op():
        calls.append(1)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return "ok"

    retry = OutageRetry(30, first_delay_s=0.001, max_delay_s=0.002)
    with caplog.at_level("WARNING", logger="cuzk_tasks.state"):
        assert retry.call(op) == "ok"
    assert len(calls) == len(failures) + 1
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "BUSY" in lines[0] and "back" in lines[1], lines

    def wrong():
        calls.append(1)
        raise ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

    calls.clear()
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        retry.call(wrong)
    assert len(calls) == 1


# --- one identity, one process (register_worker with a holder) -----------------------------


def test_a_live_worker_id_is_not_registered_by_another_process(store):
    w = "h:dev0"
    assert store.register_worker(w, "device", "h", device=0, queue="q0", holder="box:10", ttl_s=30)
    assert store.get_worker(w)["online"]  # the claim sets the heartbeat in the same step
    before = store.redis.hgetall(store.keys.worker(w))
    store.heartbeat(w, 30, extra={"pid": 10}, holder="box:10")
    refused = store.register_worker(w, "device", "other", device=0, queue="q9",
                                    holder="box2:20", ttl_s=30)
    assert not refused and refused.holder == "box:10" and refused.pid == "10"
    assert 0 < refused.ttl_ms <= 30000
    after = store.redis.hgetall(store.keys.worker(w))
    assert after["queue"] == "q0" and after["holder"] == "box:10" and after.keys() >= before.keys()
    # the holder itself again (a container restarted with the same pid): accepted
    assert store.register_worker(w, "device", "h", device=0, queue="q0", holder="box:10", ttl_s=30)
    # the other one's beat changes nothing and says who holds the id
    beat = store.heartbeat(w, 30, extra={"pid": 20}, holder="box2:20")
    assert beat.held_by == "box:10" and store.get_worker(w)["pid"] == 10
    # ...nor does its stop take the holder's heartbeat away
    assert not store.worker_offline(w, holder="box2:20") and store.get_worker(w)["online"]
    # once the holder is offline the id is free
    assert store.worker_offline(w, holder="box:10")
    assert store.register_worker(w, "device", "h", device=0, queue="q0", holder="box2:20", ttl_s=30)
    assert store.redis.hget(store.keys.worker(w), "holder") == "box2:20"
    # a process without a claim (tests, older workers) registers as before
    assert store.register_worker("h:dev1", "device", "h", device=1, queue="q1")


def test_the_holders_heartbeat_lapsing_frees_the_id(store):
    w = "h:dev0"
    assert store.register_worker(w, "device", "h", device=0, queue="q0", holder="box:10", ttl_s=0.2)
    assert not store.register_worker(w, "device", "h", device=0, queue="q0", holder="box:11",
                                     ttl_s=0.2)
    deadline = time.monotonic() + 10
    while store.heartbeat_ttl_ms(w) != -2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.register_worker(w, "device", "h", device=0, queue="q0", holder="box:11", ttl_s=30)
    # the old holder, back after its key lapsed, finds the id taken: its beat is refused
    assert store.heartbeat(w, 30, holder="box:10").held_by == "box:11"


def test_two_claims_at_once_one_wins(store):
    results, barrier = {}, threading.Barrier(8)

    def claim(n):
        barrier.wait()
        results[n] = bool(store.register_worker("h:dev0", "device", "h", device=0, queue="q",
                                                holder=f"box:{n}", ttl_s=30))

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results.values()) == 1, results


# --- a stale "proving" record ends at the next beat that reports holding --------------------


def _worker_idle_events(store):
    return [f for _, f in store.events("0-0", count=1000) if f["type"] == "worker_idle"]


def test_a_run_not_held_since_the_previous_beat_is_over(store):
    job, w = new_job(store, n=1), device(store, "h:dev0")
    token = to_proving(store, job, 0, w)
    time.sleep(0.002)
    store.heartbeat(w, 30, holding=[])  # its snapshot may predate the run: nothing changes
    assert store.get_worker(w)["stored_state"] == WorkerState.PROVING.value
    time.sleep(0.002)
    # the run began before the previous beat and is not held now, but its partition still
    # names it (in proving under its token): it may be live (a main process reconnecting has not
    # seen its acceptance yet) -- the sweeper's stage lease decides, not the heartbeat
    store.heartbeat(w, 30, holding=[])
    assert store.get_worker(w)["stored_state"] == WorkerState.PROVING.value
    assert store.get_partition(job, 0)["state"] == PartitionState.PROVING.value
    # the partition moved on (re-dispatched elsewhere): the run's end was never recorded
    assert store.redispatch(PartitionRun(job, 0, 0))
    time.sleep(0.002)
    store.heartbeat(w, 30, holding=[])
    worker = store.get_worker(w)
    assert worker["stored_state"] == WorkerState.IDLE.value and not worker.get("token")
    (idle,) = _worker_idle_events(store)
    assert idle["token"] == token and idle["reason"] == "stale"


def test_a_held_or_newer_run_stays_proving(store):
    job, w = new_job(store, n=2), device(store, "h:dev0")
    store.heartbeat(w, 30, holding=[])
    time.sleep(0.002)
    to_proving(store, job, 0, w)  # after that beat's snapshot
    time.sleep(0.002)
    # this beat's snapshot may have been taken before the message arrived: not stale yet
    store.heartbeat(w, 30, holding=[])
    assert store.get_worker(w)["stored_state"] == WorkerState.PROVING.value
    for _ in range(3):  # held (reserved or running): proving, however long it runs
        time.sleep(0.002)
        store.heartbeat(w, 30, holding=[PartitionRun(job, 0, 0), PartitionRun(job, 1, 0)])
    assert store.get_worker(w)["stored_state"] == WorkerState.PROVING.value
    for _ in range(3):  # beats that report no holding (a pool process's) decide nothing
        time.sleep(0.002)
        store.heartbeat(w, 30)
    assert store.get_worker(w)["stored_state"] == WorkerState.PROVING.value
    assert _worker_idle_events(store) == []
    # another attempt of the same partition held is not this run (once it moved on to it)
    assert store.redispatch(PartitionRun(job, 0, 0))
    time.sleep(0.002)
    store.heartbeat(w, 30, holding=[PartitionRun(job, 0, 1)])
    assert store.get_worker(w)["stored_state"] == WorkerState.IDLE.value


def test_a_device_reporting_what_its_pool_runs_ends_a_record_of_another_run(store):
    """A device worker's beats report ``running``: what its pool process proves (RunSlot,
    set before prove_begin, cleared after prove_end).  A proving record of another run that
    began before the previous such beat is over -- even while its partition still names it
    (a prove_end given up in a long outage) -- and ends at once; the run it reports, or one
    that began after the previous beat, stays."""
    job, w = new_job(store, n=2), device(store, "h:dev0")
    store.heartbeat(w, 30, holding=[], extra={"running": ""})
    time.sleep(0.002)
    token = to_proving(store, job, 0, w)  # the slot says j1:0:0 from before this
    time.sleep(0.002)
    store.heartbeat(w, 30, holding=[], extra={"running": ""})  # read before the run began
    assert store.get_worker(w)["stored_state"] == WorkerState.PROVING.value
    for _ in range(3):  # running it (holding nothing: the main process may be reconnecting)
        time.sleep(0.002)
        store.heartbeat(w, 30, holding=[], extra={"running": f"{job}:0:0"})
    assert store.get_worker(w)["stored_state"] == WorkerState.PROVING.value
    assert _worker_idle_events(store) == []
    time.sleep(0.002)
    # the run is over
    store.heartbeat(w, 30, holding=[PartitionRun(job, 0, 0)], extra={"running": ""})
    worker = store.get_worker(w)
    assert worker["stored_state"] == WorkerState.IDLE.value and not worker.get("token")
    (idle,) = _worker_idle_events(store)
    assert idle["token"] == token and idle["reason"] == "stale"
    assert store.get_partition(job, 0)["state"] == PartitionState.PROVING.value  # the sweeper's


def test_a_script_with_named_arguments_stores_what_it_was_sent(store):
    """prove_fault, prove_end, synth_end and finalize_end take named arguments (_lib.lua
    ``named_args``: name/value pairs): text of any kind arrives as a positional argument
    would, and a name the caller did not send fails the script instead of reading as nil."""
    new_job(store, n=1)
    w, other = device(store, "w1"), device(store, "w2")
    token = to_proving(store, "j1", 0, w)
    error = 'CUDA "illegal address" \u00e9\u6f22\u5b57 \U0001f600\nline 2 \\ \x01'
    fault = store.prove_fault(w, token, PartitionRun("j1", 0, 0), error, "c", 3)
    assert fault.outcome == "rerouted" and fault.worker == other
    assert store.get_partition("j1", 0)["last_device_error"] == error
    with pytest.raises(Exception, match="script argument token not given"):
        store._run("prove_end", [store.keys.part("j1", 0), store.keys.worker(other)],
                   {"job": "j1", "idx": 0, "attempt": 1, "worker": other, "prove_ms": 1.0,
                    "message": ""})


# --- the public status document (issue 48) --------------------------------------------------

#: fields the store keeps that no public read may return: a stage token, a server path, the
#: request digest and the transitions' bookkeeping
NEVER_PUBLIC = {"token", "witness_ref", "input_ref", "input", "proof", "public",
                "request_digest", "release_list", "n_released", "n_written", "result_next",
                "result_ttl", "completing", "discard", "avoid", "last_device_error"}


def test_the_status_document_carries_only_the_public_fields(store):
    """job_status (cuzk.status, Client.status, /api/jobs/<id>) of a job past prove_begin:
    the job hash and its partitions hold the token, the witness path, the request digest and
    the release list; the document none of them, only the documented fields."""
    parts = [{"input": json.dumps({"a": i})} for i in range(2)]
    store.create_job("j1", "c", "k", 5, "r1", parts, request_digest="d" * 64)
    w = device(store)
    token = to_proving(store, "j1", 0, w)
    to_synth_done(store, "j1", 1)
    kept = store.redis.hgetall(store.keys.job("j1"))
    assert kept["request_digest"] and "release_list" in kept  # what the old read returned
    assert store.get_partition("j1", 0)["token"] == token

    status = store.job_status("j1")
    assert set(status) - {"partitions", "page", "counts", "eta"} <= set(reads.PUBLIC_JOB_FIELDS)
    assert not NEVER_PUBLIC & set(status)
    assert (status["id"], status["request_id"], status["state"]) == ("j1", "r1", "running")
    for p in status["partitions"]:
        assert set(p) <= set(reads.PUBLIC_PARTITION_FIELDS) and not NEVER_PUBLIC & set(p)
    assert [p["state"] for p in status["partitions"]] == ["proving", "synth_done"]
    text = json.dumps(status)
    assert token not in text and ".wtns" not in text and "d" * 64 not in text
    with pytest.raises(StateError, match="not public"):
        store.job_status("j1", fields=("idx", "token"))


def test_the_public_field_lists_leave_out_the_private_ones():
    assert not set(reads.PRIVATE_PARTITION_FIELDS) & set(reads.PUBLIC_PARTITION_FIELDS)
    assert set(reads.PUBLIC_PARTITION_FIELDS) <= set(reads.PARTITION_FIELDS)
    assert not NEVER_PUBLIC & (set(reads.PUBLIC_JOB_FIELDS) | set(reads.PUBLIC_PARTITION_FIELDS))


def test_a_request_id_conflict_names_no_job(store):
    """The same request id with other content is refused without naming the job it names
    (the id would be a key to another's job); the same content still answers that job."""
    parts = [{"input": json.dumps({"a": 1})}]
    assert store.create_job("first-job", "c", "k", 5, "r1", parts, request_digest="d1") == \
        ("first-job", True)
    assert store.create_job("j2", "c", "k", 5, "r1", parts, request_digest="d1") == \
        ("first-job", False)
    with pytest.raises(StateError, match="request_id 'r1' is already in use") as info:
        store.create_job("j3", "c", "k", 5, "r1", parts, request_digest="d2")
    assert "first-job" not in str(info.value)
    assert not store.redis.exists(store.keys.job("j2"), store.keys.job("j3"))
