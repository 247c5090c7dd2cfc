"""on_done: the step that ends a job sends its callback task, once (fakeredis and redis-server).

The callback is an outbox entry (``StageMessages.on_done``: task, queue, priority 0,
``expires_s``) kept with the job; the Lua step that ends the job (``_lib.lua``: finish_job
-> send_on_done) writes its kwargs into it and adds it to the outbox, and the store's
publisher -- here a :class:`support.outbox.Recorder`, or a real Celery app
(``cuzk_tasks.service.publisher.CeleryPublisher``) on a real redis-server -- sends it.  Here: each
end path (done, failed, poison, cancelled), exactly once however often an end path runs,
the result stored in the same step, what Celery puts on the broker (the same message as a
foreign app's ``send_task``, with its ``expires``), the trimming of expired callbacks, and
a broker in another Redis database.  ``tests/test_on_done_e2e.py`` runs it through real
workers and a foreign Celery app.
"""

from __future__ import annotations

import datetime
import json
import uuid

import pytest

from cuzk_tasks.settings import defaults
from cuzk_tasks import pipeline
from cuzk_tasks.service import queues
from cuzk_tasks.celery_app import create_app
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.errors import CuzkError
from cuzk_tasks.service.messages import StageMessages
from cuzk_tasks.state import PartitionRun
from cuzk_tasks.state.store import script_text
from support.outbox import Recorder, queued

ON_DONE = {"task": "svc.job_done", "queue": "svc.callbacks"}


@pytest.fixture
def store(store_factory):
    """A fresh StateStore on this test's backend whose publisher records what it sends
    (``store.publisher``, a Recorder)."""
    return store_factory(publisher=Recorder())


def spec_for(store):
    """ON_DONE with a queue of this store's own (the redis-server backend shares one server)."""
    return {**ON_DONE, "queue": f"{store.prefix}.callbacks"}


def on_done_for(spec=ON_DONE, ttl_s=None):
    """``create_job``'s on_done: the spec and its entry, as a service with default settings
    (or an ``on_done_ttl_s`` of ``ttl_s``) builds it."""
    env = {} if ttl_s is None else {"CUZK_ON_DONE_TTL_S": str(ttl_s)}
    return spec, StageMessages(load_settings(env=env)).on_done(spec)


def new_job(store, n=2, job_id="j1", on_done=True):
    parts = [{"input": json.dumps({"a": i})} for i in range(n)]
    on_done = spec_for(store) if on_done is True else on_done
    got, created = store.create_job(job_id, "c", "k", 5, None, parts,
                                    on_done=on_done_for(on_done) if on_done else None)
    assert created
    return job_id


def callbacks(store):
    """The callback entries the store's publisher sent, oldest first, as (entry, args,
    kwargs)."""
    return [(e, e["args"], e["kwargs"]) for e in store.publisher.sent
            if e["task"] == ON_DONE["task"]]


def device(store, worker_id="w1"):
    store.register_worker(worker_id, "device", "host", device=0, queue=f"q.{worker_id}")
    store.heartbeat(worker_id, 30)
    return worker_id


def finish_partition(store, job_id, idx, worker_id, proof, public):
    assert store.synth_begin(PartitionRun(job_id, idx, 0))
    assert store.synth_end(PartitionRun(job_id, idx, 0), f"/spool/{idx}.wtns", 1.0)
    assert store.route(PartitionRun(job_id, idx, 0), worker_id)
    token = store.prove_begin(worker_id, PartitionRun(job_id, idx, 0), 3).token
    assert store.prove_end(worker_id, token, PartitionRun(job_id, idx, 0), 1.0).partition_advanced
    return store.finalize_end(PartitionRun(job_id, idx, 0), 1.0, json.dumps(proof),
                              json.dumps(public), token=token)


# --- the message --------------------------------------------------------------------------

@pytest.fixture
def celery_app(redis_server_url):
    return create_app(load_settings(env={"CUZK_REDIS_URL": redis_server_url}))


@pytest.fixture
def celery_store(redis_server_url, celery_app):
    """A StateStore on the real redis-server whose outbox entries a real Celery app sends
    to that same server (the broker is the state store's Redis)."""
    import redis

    from cuzk_tasks.service.publisher import CeleryPublisher
    from cuzk_tasks.state import StateStore

    client = redis.Redis.from_url(redis_server_url, decode_responses=True)
    yield StateStore(client, prefix="od" + uuid.uuid4().hex[:10],
                     publisher=CeleryPublisher(celery_app))
    client.close()


def test_a_callback_celery_sends_is_what_a_foreign_send_task_pushes(celery_store, celery_app):
    """The callback's kwargs are written by Lua; Celery builds the message: the same body,
    headers and properties as a foreign app's plain ``send_task`` (the default priority 0,
    no time limits of ours), on the list named by the queue, which any consumer reads."""
    store, client = celery_store, celery_store.redis
    spec = spec_for(store)
    new_job(store, n=1, job_id="j/\u00e9")
    assert store.cancel_job("j/\u00e9", "stop \u00e9")
    kwargs = {"job_id": "j/\u00e9", "state": "cancelled", "error": "stop \u00e9"}
    assert queued(client, spec["queue"]) == [(spec["task"], [], kwargs, 0)]
    assert client.llen(spec["queue"]) == 1  # priority 0: the list named by the queue itself
    assert store.outbox_entries() == {}
    celery_app.send_task(spec["task"], kwargs=kwargs, queue=spec["queue"], priority=0,
                         expires=float(defaults.ON_DONE_TTL_S), ignore_result=True)
    theirs, mine = (json.loads(text) for text in client.lrange(spec["queue"], 0, -1))
    assert set(mine) == set(theirs)
    assert mine["content-type"] == theirs["content-type"] == "application/json"
    assert mine["body"] == theirs["body"]
    for field in ("lang", "task", "eta", "retries", "timelimit", "group", "parent_id",
                  "shadow", "ignore_result"):
        assert mine["headers"][field] == theirs["headers"][field], field
    assert mine["headers"]["timelimit"] == [None, None]
    assert mine["headers"]["ignore_result"] is True  # no one waits for a callback's result
    for field in ("delivery_info", "priority", "body_encoding", "delivery_mode", "expiration"):
        assert mine["properties"][field] == theirs["properties"][field], field
    client.delete(spec["queue"])


def test_the_publisher_waits_for_no_result(celery_store, celery_app):
    """No one reads the result of a message the outbox sends (the stages' results are
    ignored; a callback is fire and forget): Celery is told so, else a process that
    publishes -- a client submitting jobs -- subscribes to one result channel per message
    sent, for ever (the results never come)."""
    store = celery_store
    queue = "od.cpu." + uuid.uuid4().hex[:8]
    m = StageMessages(load_settings(env={"CUZK_CPU_QUEUE": queue, "CUZK_SHARED_SPOOL": "1"}))
    store.create_job("j1", "c", "k", 5, None, [{"input": "{}"}] * 3,
                     messages=[m.synthesize(PartitionRun("j1", i, 0, "c", 5)) for i in range(3)],
                     on_done=on_done_for(spec_for(store)))
    assert store.cancel_job("j1")
    stages = m.settings.stage_queue
    assert [t for t, *_ in queued(store.redis, stages)] == ["cuzk.synthesize"] * 3
    raw = [json.loads(text) for q in (stages, spec_for(store)["queue"])
           for key in queues.queue_keys(q) for text in store.redis.lrange(key, 0, -1)]
    assert len(raw) == 4 and all(e["headers"]["ignore_result"] is True for e in raw)
    assert not celery_app.backend.result_consumer.subscribed_to
    for q in (stages, spec_for(store)["queue"]):
        store.redis.delete(*queues.queue_keys(q))


def test_lua_writes_the_callback_kwargs_as_json(store):
    """The kwargs the Lua step writes into the entry decode to what the job ended with,
    whatever the job id and error hold (non-ASCII, quotes, backslashes, control characters),
    and the rest of the entry is the kept one."""
    for n, text in enumerate(["", "a", "\u00e9\u4e2d", 'say "no"', "back\\slash/", "tab\tnl\n\x01"]):
        job = f"j\u00e9{n}"
        new_job(store, n=1, job_id=job)
        store.cancel_job(job, "stop/" + text)
        entry, args, kwargs = callbacks(store)[-1]
        assert kwargs == {"job_id": job, "state": "cancelled", "error": "stop/" + text}
        assert list(kwargs) == ["job_id", "state", "error"]
        assert args == [] and (entry["task"], entry["queue"], entry["priority"]) == \
            (ON_DONE["task"], spec_for(store)["queue"], 0)
    assert len(callbacks(store)) == 6 and store.outbox_entries() == {}


# --- each end path -------------------------------------------------------------------------

def test_done_sends_proofs_and_stores_the_result_in_the_same_step(store):
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
    [(entry, args, kwargs)] = callbacks(store)
    assert (entry["task"], entry["queue"], entry["priority"]) == \
        (ON_DONE["task"], spec_for(store)["queue"], 0)
    assert args == []
    assert list(kwargs) == ["job_id", "state", "proofs"]
    assert kwargs == {"job_id": "j1", "state": "done", "proofs": result["proofs"]}
    job = store.get_job("j1")
    assert json.loads(job["on_done"]) == spec_for(store) and job["on_done_sent_at"] > 0
    assert not store.redis.exists(store.keys.on_done("j1"))


def test_failed_sends_the_error_once_for_the_first_failure(store):
    new_job(store, n=3)
    assert store.fail_partition(PartitionRun("j1", 1), "bad input.json: field x", any_attempt=True)
    assert store.fail_partition(PartitionRun("j1", 0), "second",
                                any_attempt=True) is False  # cancelled by the first
    [(_, _, kwargs)] = callbacks(store)
    assert kwargs == {"job_id": "j1", "state": "failed",
                      "error": "partition 1: bad input.json: field x"}
    assert store.cancel_job("j1") is False
    assert len(callbacks(store)) == 1


def test_poison_pill_fails_the_job_with_its_callback(store):
    new_job(store, n=1)
    w = device(store)
    run = PartitionRun("j1", 0, 0)
    assert store.synth_begin(run) and store.synth_end(run, "/w", 1.0)
    assert store.route(PartitionRun("j1", 0, 0), w)
    assert store.prove_begin(w, PartitionRun("j1", 0, 0), 1).ok
    assert store.prove_begin(w, PartitionRun("j1", 0, 0), 1).reason == "poison"
    [(_, _, kwargs)] = callbacks(store)
    assert kwargs["state"] == "failed" and "poison pill" in kwargs["error"]


def test_cancelled_sends_the_reason_once(store):
    new_job(store, n=2)
    assert store.cancel_job("j1", "user changed their mind")
    assert store.cancel_job("j1", "again") is False
    [(_, _, kwargs)] = callbacks(store)
    assert kwargs == {"job_id": "j1", "state": "cancelled", "error": "user changed their mind"}


def test_sent_exactly_once_when_the_end_step_runs_again(store):
    """finish_job re-run on an ended job (a future end path that forgets its guard) sends
    nothing more: the kept entry is consumed by the step that adds it to the outbox."""
    new_job(store, n=1)
    prelude = script_text("workers").split("-- ==== workers.lua ====")[0]
    rerun = prelude + "return send_on_done(ARGV[#ARGV], 'failed', 'late', nil)"
    assert store.cancel_job("j1")
    assert store.redis.eval(rerun, 0, *store.common_args, "j1") == 0
    assert store.redis.eval(prelude + "finish_job(ARGV[#ARGV], 'failed', 'x'); return 1", 0,
                            *store.common_args, "j1") == 1
    assert len(callbacks(store)) == 1
    assert store.outbox_entries() == {}  # the re-runs added no entry either


def test_a_job_without_on_done_sends_nothing(store):
    new_job(store, n=1, on_done=None)
    w = device(store)
    assert finish_partition(store, "j1", 0, w, {"p": 1}, ["1"]).job_complete
    assert store.get_result("j1")["proofs"] == [{"idx": 0, "proof": {"p": 1}, "public": ["1"]}]
    assert callbacks(store) == [] and store.outbox_entries() == {}
    assert not store.redis.exists(store.keys.on_done("j1"))
    assert "on_done" not in store.get_job("j1")


def test_lua_on_done_key_matches_keys_py(store):
    prelude = script_text("workers").split("-- ==== workers.lua ====")[0]
    assert store.redis.eval(prelude + "return K.on_done('J')", 0, *store.common_args) == \
        store.keys.on_done("J")


def test_job_status_reads_states_without_inputs_or_proofs(store):
    new_job(store, n=2)
    assert store.fail_partition(PartitionRun("j1", 0), "boom", any_attempt=True)
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


def test_on_done_is_accepted_when_the_broker_is_another_redis(redis_server_url, tmp_path):
    """Celery sends the callback (through the outbox), so on_done works with any broker --
    it was refused when the Lua step pushed it onto the state store's Redis.  Here the state
    store is one database and the broker another: a job (cancelled at once: no worker runs
    here) ends, and its callback waits on the broker's database, none on the state's."""
    import pathlib

    import redis
    from support.processes import write_circuits_toml

    fix = pathlib.Path(__file__).resolve().parent / "fixtures"
    config = write_circuits_toml(tmp_path / "cuzk.toml", {"mulchain": ("test-mul", fix / "mulchain")})
    state_url = redis_server_url.rsplit("/", 1)[0] + "/4"
    queue = "od.cb." + uuid.uuid4().hex[:8]
    settings = load_settings(config, env={"CUZK_REDIS_URL": redis_server_url,
                                          "CUZK_STATE_URL": state_url,
                                          "CUZK_PREFIX": "od" + uuid.uuid4().hex[:8]})
    assert not settings.broker_is_state_redis
    ctx = pipeline.Context(create_app(settings), settings, worker_id="t")
    broker = redis.Redis.from_url(redis_server_url, decode_responses=True)
    state = redis.Redis.from_url(state_url, decode_responses=True)
    try:
        job = pipeline.submit_job(ctx, "mulchain", [{"input": {"a": "3", "b": "11"}}],
                                  on_done={"task": ON_DONE["task"], "queue": queue})
        assert pipeline.cancel_job(ctx, job, "not needed")["cancelled"]
        status = ctx.store.job_status(job)
        assert status["state"] == "cancelled"
        assert status["on_done"] == {"task": ON_DONE["task"], "queue": queue}
        [(task, args, kwargs, priority)] = queued(broker, queue)
        assert (task, args, priority) == (ON_DONE["task"], [], 0)
        assert kwargs == {"job_id": job, "state": "cancelled", "error": "not needed"}
        assert not state.exists(queue) and ctx.store.outbox_entries() == {}
    finally:
        broker.delete(queue)
        for key in state.scan_iter(match=f"{settings.prefix}:*"):
            state.delete(key)
        broker.close()
        state.close()


# --- expiry and a queue that is no list (issue 24) -------------------------------------------

def _prelude():
    return script_text("workers").split("-- ==== workers.lua ====")[0]


def test_lua_iso_utc_is_pythons(store):
    """iso_utc (Lua has no os.date), which trim_callbacks compares a callback's Celery
    ``expires`` with, against Python's datetime."""
    for t in (0, 59, 86399, 86400, 951782400, 951868799, 1709164800, 1796290500.9,
              4107542400, 253402300799):
        got = store.redis.eval(_prelude() + "return iso_utc(tonumber(ARGV[#ARGV]))", 0,
                               *store.common_args, repr(t))
        assert got == datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).isoformat(), t


def _expiring_job(store, job_id, ttl_s, queue=None):
    spec = {**spec_for(store), **({"queue": queue} if queue else {})}
    got, created = store.create_job(job_id, "c", "k", 5, None, [{"input": "{}"}],
                                    on_done=on_done_for(spec, ttl_s=ttl_s))
    assert created
    return spec


def test_the_callback_entry_carries_its_ttl(store):
    """``expires_s`` (on_done_ttl_s) rides in the entry, for Celery's ``expires``; the queue
    is watched for trim_callbacks until then.  A TTL of 0: no expiry, not watched."""
    _expiring_job(store, "j1", 600)
    before = store.redis.time()[0]
    store.cancel_job("j1", "stop")
    [(entry, _, kwargs)] = callbacks(store)
    assert entry["expires_s"] == 600.0
    assert kwargs == {"job_id": "j1", "state": "cancelled", "error": "stop"}
    assert store.redis.zscore(store.keys.on_done_queues(), spec_for(store)["queue"]) >= before + 600
    forever = f"{store.prefix}.forever"
    _expiring_job(store, "j2", 0, queue=forever)
    store.cancel_job("j2", "stop")
    entry, _, _ = callbacks(store)[-1]
    assert entry["queue"] == forever and "expires_s" not in entry
    assert store.redis.zscore(store.keys.on_done_queues(), forever) is None


def test_a_callback_sent_by_celery_expires_ttl_after_it_is_sent(celery_store):
    store = celery_store
    queue = _expiring_job(store, "j1", 600)["queue"]
    before = store.redis.time()[0]
    store.cancel_job("j1", "stop")
    envelope = json.loads(store.redis.lindex(queue, -1))
    expires = envelope["headers"]["expires"]
    at = datetime.datetime.fromisoformat(expires).timestamp()  # what a Celery worker reads
    assert before + 600 <= at <= before + 602, expires
    [(_, _, kwargs, _)] = queued(store.redis, queue)
    assert kwargs == {"job_id": "j1", "state": "cancelled", "error": "stop"}
    store.redis.delete(queue)


def test_expired_callbacks_no_one_took_are_trimmed_and_live_messages_kept(celery_store):
    """A queue no one reads: its expired callbacks (sent by Celery) are dropped from the
    oldest end; a live message (another sender's, no expires) stops the trim and is never
    dropped."""
    import time

    store = celery_store
    queue = spec_for(store)["queue"]
    _expiring_job(store, "old1", 1)
    _expiring_job(store, "old2", 1)
    _expiring_job(store, "new", 3600)
    store.cancel_job("old1")
    store.cancel_job("old2")
    store.cancel_job("new")
    assert len(queued(store.redis, queue)) == 3
    assert store.trim_callbacks() == 0  # nothing has expired yet
    time.sleep(2.1)
    assert store.trim_callbacks() == 2
    [(_, _, kwargs, _)] = queued(store.redis, queue)
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
    store.redis.delete(queue, shared)


def test_a_callback_queue_that_is_no_list_ends_the_job_and_sends_nothing(store):
    """A callback queue whose key someone else made, of another type than a list, since
    submit: the job still ends -- its keys get their retention, the result is stored -- and the
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
    assert callbacks(store) == [] and store.outbox_entries() == {}


def test_a_callback_the_sweeper_sends_late_is_still_trimmed_once_it_expires(celery_store):
    """Celery's ``expires`` counts from the send, which can come after the step that ended
    the job -- the sweeper sends what a process that died left in the outbox, seconds later
    (or later still, after a broker outage).  The queue stays watched until that callback
    has expired too, and it is then dropped: not left on a queue no one reads for ever."""
    import time

    from cuzk_tasks.state import StateStore

    store = celery_store
    dead = StateStore(store.redis, prefix=store.prefix)  # ends the job, then dies unpublished
    queue = _expiring_job(dead, "j1", 2)["queue"]
    dead.cancel_job("j1", "stop")
    assert len(dead.outbox_entries()) == 1
    time.sleep(2.2)  # the step's own expiry has passed: the queue's watch is due
    assert store.publish_overdue(grace_s=0) == 1  # the sweeper sends it: expires in 2 s
    assert len(queued(store.redis, queue)) == 1
    assert store.trim_callbacks() == 0  # live: kept, and the queue still watched
    assert store.redis.zscore(store.keys.on_done_queues(), queue) is not None
    time.sleep(3.1)
    assert store.trim_callbacks() == 1
    assert store.redis.llen(queue) == 0
    assert store.redis.zscore(store.keys.on_done_queues(), queue) is None
