"""on_done: the step that ends a job pushes its callback task, once (fakeredis and redis-server).

The message is ``wire.task_message_late_kwargs``'s, its kwargs written and base64-encoded by
the Lua step that ends the job (``_lib.lua``: finish_job -> send_on_done).  Here: the
message against what ``app.send_task`` pushes, each end path (done, failed, poison,
cancelled), exactly once however often an end path runs, and the result stored in the same
step.  ``tests/test_on_done_e2e.py`` runs it through real workers and a foreign Celery app.
"""

from __future__ import annotations

import base64
import json

import pytest

from cuzk_tasks import pipeline, wire
from cuzk_tasks.celery_app import create_app
from cuzk_tasks.errors import CuzkError
from cuzk_tasks.state.store import script_text
from support.message_template import template

ON_DONE = {"task": "svc.job_done", "queue": "svc.callbacks"}


def spec_for(store):
    """ON_DONE with a queue of this store's own (the redis-server backend shares one server)."""
    return {**ON_DONE, "queue": f"{store.prefix}.callbacks"}


def on_done_for(job_id, spec=ON_DONE):
    return spec, wire.task_message_late_kwargs(template(spec["task"]), spec["task"], queue=spec["queue"],
                                               kwargsrepr=f"{{'job_id': {job_id!r}}}")


def new_job(store, n=2, job_id="j1", on_done=True):
    parts = [{"input": json.dumps({"a": i})} for i in range(n)]
    on_done = spec_for(store) if on_done is True else on_done
    got, created = store.create_job(job_id, "c", "k", 5, None, parts,
                                    on_done=on_done_for(job_id, on_done) if on_done else None)
    assert created
    return job_id


def callbacks(store):
    """The messages on the callback queue, oldest first, as (envelope, args, kwargs)."""
    out = []
    for text in reversed(store.redis.lrange(spec_for(store)["queue"], 0, -1)):
        envelope = json.loads(text)
        args, kwargs, embed = json.loads(base64.b64decode(envelope["body"]))
        out.append((envelope, args, kwargs))
    return out


def device(store, worker_id="w1"):
    store.register_worker(worker_id, "device", "host", device=0, queue=f"q.{worker_id}")
    store.heartbeat(worker_id, 30)
    return worker_id


def finish_partition(store, job_id, idx, worker_id, proof, public):
    assert store.synth_begin(job_id, idx, 0)
    assert store.synth_end(job_id, idx, 0, f"/spool/{idx}.wtns", 1.0)
    assert store.route(job_id, idx, 0, worker_id)
    token = store.gpu_start(worker_id, job_id, idx, 0, 3).token
    assert store.gpu_end(worker_id, token, job_id, idx, 0, 1.0).partition_advanced
    return store.finalize_end(job_id, idx, 0, 1.0, json.dumps(proof), json.dumps(public),
                              token=token)


# --- the message --------------------------------------------------------------------------

@pytest.fixture
def celery_app(redis_server_url):
    from cuzk_tasks.config import load_settings

    return create_app(load_settings(env={"CUZK_REDIS_URL": redis_server_url}))


def test_filled_message_matches_what_celery_send_task_pushes(celery_app):
    import uuid

    import redis

    client = redis.Redis.from_url(celery_app.conf.broker_url, decode_responses=True)
    queue = f"ondone.{uuid.uuid4().hex[:8]}"
    kwargs = {"job_id": "j/1", "state": "done", "proofs": [{"idx": 0, "proof": {"pi_a": ["1"]},
                                                             "public": ["7", "\u00e9"]}]}
    # what a foreign app does: no time limits of ours, the default priority (0)
    celery_app.send_task("svc.job_done", kwargs=kwargs, queue=queue, ignore_result=True,
                         time_limit=None, soft_time_limit=None, priority=0,
                         kwargsrepr="{job j/1}")
    late = wire.task_message_late_kwargs(template("svc.job_done"), "svc.job_done", queue=queue, kwargsrepr="{job j/1}")
    ours = wire.fill_body(late, json.dumps(kwargs))
    assert ours.list_key == queue and client.llen(queue) == 1
    theirs, mine = json.loads(client.lpop(queue)), json.loads(ours.payload)
    assert set(mine) == set(theirs)
    assert json.loads(base64.b64decode(mine["body"])) == json.loads(base64.b64decode(theirs["body"]))
    for field in ("lang", "task", "eta", "expires", "retries", "argsrepr", "kwargsrepr", "group",
                  "parent_id", "shadow", "ignore_result"):
        assert mine["headers"][field] == theirs["headers"][field], field
    for field in ("delivery_info", "priority", "body_encoding", "delivery_mode"):
        assert mine["properties"][field] == theirs["properties"][field], field
    assert mine["content-type"] == theirs["content-type"] == "application/json"


def test_lua_fills_the_message_as_wire_does(store):
    """The Lua step's base64 must equal Python's (every padding length, non-ASCII bytes) and
    its kwargs decode to what the job ended with."""
    prelude = script_text("workers").split("-- ==== workers.lua ====")[0]
    for n in range(4):
        job = "jé" + "x" * n
        new_job(store, n=1, job_id=job)
        store.cancel_job(job, "stop/" + "y" * n)
        envelope = json.loads(store.redis.lpop(spec_for(store)["queue"]))
        body = base64.b64decode(envelope["body"]).decode("utf-8")
        assert json.loads(body)[1] == {"job_id": job, "state": "cancelled",
                                       "error": "stop/" + "y" * n}
        assert base64.b64encode(body.encode("utf-8")).decode("ascii") == envelope["body"]
    for text in ("", "a", "ab", "abc", "abcd", "\x00\xff\x80é"):
        got = store.redis.eval(prelude + "return base64(ARGV[#ARGV])", 0, *store.common_args, text)
        assert got == base64.b64encode(text.encode("utf-8")).decode("ascii"), text


# --- each end path -------------------------------------------------------------------------

def test_done_pushes_proofs_and_stores_the_result_in_the_same_step(store):
    new_job(store, n=2)
    w = device(store)
    proofs = [({"pi_a": ["1", "2"], "protocol": "groth16"}, ["3"]), ({"pi_a": ["4"]}, ["5", "6"])]
    assert finish_partition(store, "j1", 0, w, *proofs[0]).ok
    assert callbacks(store) == [] and store.get_result("j1") is None
    end = finish_partition(store, "j1", 1, w, *proofs[1])
    assert end.job_complete
    result = store.get_result("j1")
    assert result == store.collect_result("j1")
    assert result["state"] == "done"
    assert [(p["proof"], p["public"]) for p in result["proofs"]] == proofs
    assert 0 < store.redis.ttl(store.keys.result("j1")) <= store.result_ttl_s
    [(envelope, args, kwargs)] = callbacks(store)
    assert envelope["headers"]["task"] == ON_DONE["task"]
    assert envelope["properties"]["delivery_info"]["routing_key"] == spec_for(store)["queue"]
    assert args == []
    assert list(kwargs) == ["job_id", "state", "proofs"]
    assert kwargs == {"job_id": "j1", "state": "done", "proofs": result["proofs"]}
    job = store.get_job("j1")
    assert json.loads(job["on_done"]) == spec_for(store) and job["on_done_sent_at"] > 0
    assert not store.redis.exists(store.keys.on_done("j1"))


def test_failed_pushes_the_error_once_for_the_first_failure(store):
    new_job(store, n=3)
    assert store.fail_partition("j1", 1, None, "bad input.json: field x")
    assert store.fail_partition("j1", 0, None, "second") is False  # cancelled by the first
    [(_, _, kwargs)] = callbacks(store)
    assert kwargs == {"job_id": "j1", "state": "failed",
                      "error": "partition 1: bad input.json: field x"}
    assert store.cancel_job("j1") is False
    assert len(callbacks(store)) == 1


def test_poison_pill_fails_the_job_with_its_callback(store):
    new_job(store, n=1)
    w = device(store)
    assert store.synth_begin("j1", 0, 0) and store.synth_end("j1", 0, 0, "/w", 1.0)
    assert store.route("j1", 0, 0, w)
    assert store.gpu_start(w, "j1", 0, 0, 1).ok
    assert store.gpu_start(w, "j1", 0, 0, 1).reason == "poison"
    [(_, _, kwargs)] = callbacks(store)
    assert kwargs["state"] == "failed" and "poison pill" in kwargs["error"]


def test_cancelled_pushes_the_reason_once(store):
    new_job(store, n=2)
    assert store.cancel_job("j1", "user changed their mind")
    assert store.cancel_job("j1", "again") is False
    [(_, _, kwargs)] = callbacks(store)
    assert kwargs == {"job_id": "j1", "state": "cancelled", "error": "user changed their mind"}


def test_sent_exactly_once_when_the_end_step_runs_again(store):
    """finish_job re-run on an ended job (a future end path that forgets its guard) sends
    nothing more: the kept message is consumed by the step that sends it."""
    new_job(store, n=1)
    prelude = script_text("workers").split("-- ==== workers.lua ====")[0]
    rerun = prelude + "return send_on_done(ARGV[#ARGV], 'failed', 'late', nil)"
    assert store.cancel_job("j1")
    assert store.redis.eval(rerun, 0, *store.common_args, "j1") == 0
    assert store.redis.eval(prelude + "finish_job(ARGV[#ARGV], 'failed', 'x'); return 1", 0,
                            *store.common_args, "j1") == 1
    assert len(callbacks(store)) == 1


def test_a_job_without_on_done_pushes_nothing(store):
    new_job(store, n=1, on_done=None)
    w = device(store)
    assert finish_partition(store, "j1", 0, w, {"p": 1}, ["1"]).job_complete
    assert store.get_result("j1")["proofs"] == [{"idx": 0, "proof": {"p": 1}, "public": ["1"]}]
    assert not store.redis.exists(spec_for(store)["queue"], store.keys.on_done("j1"))
    assert "on_done" not in store.get_job("j1")


def test_lua_on_done_key_matches_keys_py(store):
    prelude = script_text("workers").split("-- ==== workers.lua ====")[0]
    assert store.redis.eval(prelude + "return K.on_done('J')", 0, *store.common_args) == \
        store.keys.on_done("J")


def test_job_status_reads_states_without_inputs_or_proofs(store):
    new_job(store, n=2)
    assert store.fail_partition("j1", 0, None, "boom")
    status = store.job_status("j1")
    assert status["state"] == "failed" and status["on_done"] == spec_for(store)
    assert [p["state"] for p in status["partitions"]] == ["failed", "cancelled"]
    assert all("input" not in p and "proof" not in p for p in status["partitions"])
    json.dumps(status)
    assert store.job_status("nope") is None


# --- validation at submit -------------------------------------------------------------------

@pytest.mark.parametrize("bad, field", [
    ({"task": "", "queue": "q"}, "on_done.task"),
    ({"task": "has space", "queue": "q"}, "on_done.task"),
    ({"task": 3, "queue": "q"}, "on_done.task"),
    ({"task": "t", "queue": "bad queue"}, "on_done.queue"),
    ({"task": "t"}, "on_done: expected"),
    ({"task": "t", "queue": "q", "eta": 1}, "on_done: expected"),
    ("svc.job_done", "on_done: expected"),
])
def test_bad_on_done_is_a_clear_error(bad, field):
    with pytest.raises(CuzkError, match=field):
        pipeline.check_on_done(bad)


def test_on_done_is_refused_when_the_broker_is_another_redis():
    from cuzk_tasks.config import load_settings

    settings = load_settings(env={"CUZK_REDIS_URL": "redis://127.0.0.1:1/0",
                                  "CUZK_STATE_URL": "redis://127.0.0.1:1/1"})
    ctx = pipeline.Context(create_app(settings), settings, worker_id="t")
    with pytest.raises(CuzkError, match="same Redis database"):
        pipeline.submit_job(ctx, "c", [{"input": {}}], on_done=ON_DONE)


# --- expiry and a queue that is no list (issue 24) -------------------------------------------

def _prelude():
    return script_text("workers").split("-- ==== workers.lua ====")[0]


def test_lua_writes_expires_as_wire_does(store):
    """iso_utc (Lua has no os.date) against Python's datetime, and the slot it looks for."""
    for t in (0, 59, 86399, 86400, 951782400, 951868799, 1709164800, 1796290500.9,
              4107542400, 253402300799):
        got = store.redis.eval(_prelude() + "return iso_utc(tonumber(ARGV[#ARGV]))", 0,
                               *store.common_args, repr(t))
        assert got == wire.expires_text(t), t
    assert store.redis.eval(_prelude() + "return EXPIRES_SLOT", 0, *store.common_args) == \
        json.dumps(wire.EXPIRES_SLOT)


def _expiring_job(store, job_id, ttl_s, queue=None):
    spec = {**spec_for(store), **({"queue": queue} if queue else {})}
    late = wire.task_message_late_kwargs(template(spec["task"]), spec["task"], queue=spec["queue"],
                                         kwargsrepr="{}", expires_s=ttl_s)
    got, created = store.create_job(job_id, "c", "k", 5, None, [{"input": "{}"}],
                                    on_done=(spec, late))
    assert created
    return spec


def test_a_callback_expires_ttl_after_it_is_sent(store):
    from celery.utils.iso8601 import parse_iso8601

    _expiring_job(store, "j1", 600)
    before = store.redis.time()[0]
    store.cancel_job("j1", "stop")
    envelope, args, kwargs = callbacks(store)[0]
    expires = envelope["headers"]["expires"]
    at = parse_iso8601(expires).timestamp()  # what a Celery worker reads
    assert before + 600 <= at <= before + 602, expires
    assert kwargs == {"job_id": "j1", "state": "cancelled", "error": "stop"}
    assert store.redis.zscore(store.keys.on_done_queues(), spec_for(store)["queue"]) >= before + 600


def test_expired_callbacks_no_one_took_are_trimmed_and_live_messages_kept(store):
    """A queue no one reads: its expired callbacks are dropped from the oldest end; a live
    message (another sender's, no expires) stops the trim and is never dropped."""
    import time

    queue = spec_for(store)["queue"]
    _expiring_job(store, "old1", 1)
    _expiring_job(store, "old2", 1)
    _expiring_job(store, "new", 3600)
    store.cancel_job("old1")
    store.cancel_job("old2")
    store.cancel_job("new")
    assert store.trim_callbacks() == 0  # nothing has expired yet
    time.sleep(2.1)
    assert store.trim_callbacks() == 2
    (envelope, _, kwargs), = callbacks(store)
    assert kwargs["job_id"] == "new"
    # another sender's message at the oldest end, then an expired callback: nothing is dropped
    shared = f"{store.prefix}.shared"
    store.redis.lpush(shared, json.dumps({"headers": {"task": "other", "expires": None}}))
    _expiring_job(store, "old3", 1, queue=shared)
    store.cancel_job("old3")
    time.sleep(2.1)
    assert store.trim_callbacks() == 0 and store.redis.llen(shared) == 2
    # every callback there expired and nothing more to drop: the list is no longer watched,
    # the other one is (its callback lives on)
    assert store.redis.zscore(store.keys.on_done_queues(), shared) is None
    assert store.redis.zscore(store.keys.on_done_queues(), queue) is not None
    assert store.redis.llen(queue) == 1


def test_a_callback_queue_that_is_no_list_ends_the_job_and_sends_nothing(store):
    """A job kept from before the on_done.queue check (or a key someone else made since):
    the job still ends -- its keys get their retention, the result is stored -- and the
    callback is recorded as not sent, not a WRONGTYPE error half-way through the step."""
    queue = f"{store.prefix}.taken"
    store.redis.hset(queue, "a", "1")
    _expiring_job(store, "j1", 600, queue=queue)
    w = device(store)
    assert finish_partition(store, "j1", 0, w, {"p": 1}, ["1"]).job_complete
    job = store.get_job("j1")
    assert job["state"] == "done" and "is a Redis hash, not a list" in job["on_done_error"]
    assert store.redis.ttl(store.keys.job("j1")) > 0 and store.get_result("j1")
    assert store.redis.hgetall(queue) == {"a": "1"}


def test_a_callback_queue_under_the_prefix_gets_nothing(store):
    """cuzk:failures is a list of ours: a job kept from before submit refused such a queue
    ends without pushing a callback onto it (the status page once answered 500 for it)."""
    queue = store.keys.failures()
    _expiring_job(store, "j1", 600, queue=queue)
    store.cancel_job("j1", "stop")
    assert "is a key of the state store" in store.get_job("j1")["on_done_error"]
    assert store.redis.llen(queue) == 0
