"""Routing choice and the sweeper's re-dispatch, on a real redis-server (no Celery workers).

The prove_start messages the transitions push are read back from the device queues' lists."""

import base64
import json
import time
import uuid

import pytest

from cuzk_tasks import routing, wire
from cuzk_tasks.config import load_settings
from cuzk_tasks.pipeline import Context, prove_delay_instrument_ms


def test_prove_delay_instrument_parsing():
    assert prove_delay_instrument_ms(None, "x") == 0
    assert prove_delay_instrument_ms("250", "x") == 250
    assert prove_delay_instrument_ms("slow=4000,100", "slow") == 4000
    assert prove_delay_instrument_ms("slow=4000,100", "other") == 100
    assert prove_delay_instrument_ms("slow=4000", "other") == 0


@pytest.fixture
def ctx(redis_server_url):
    settings = load_settings(env={"CUZK_REDIS_URL": redis_server_url,
                                  "CUZK_PREFIX": "r" + uuid.uuid4().hex[:8],
                                  "CUZK_HEARTBEAT_INTERVAL_S": "0.1", "CUZK_HEARTBEAT_TTL_S": "0.5"})
    c = Context(app=None, settings=settings, worker_id="test")
    assert c.enqueue_in_store
    c.queues = {}  # worker id -> its (unique) queue name
    yield c
    c.store.redis.delete(*[k for q in c.queues.values() for k in wire.queue_keys(q)] or ["-"])


def _register(ctx, worker, device, alive=True):
    queue = f"q.{uuid.uuid4().hex[:8]}.{device}"
    ctx.queues[worker] = queue
    ctx.store.register_worker(worker, "device", "h", device=device, queue=queue)
    if alive:
        ctx.store.heartbeat(worker, 5)
    return queue


def sent(ctx):
    """(job, idx, attempt, worker) of every prove_start message waiting on a device queue."""
    out = []
    for worker, queue in ctx.queues.items():
        for key in wire.queue_keys(queue):
            for raw in ctx.store.redis.lrange(key, 0, -1):
                envelope = json.loads(raw)
                assert envelope["properties"]["delivery_info"]["routing_key"] == queue
                assert envelope["headers"]["task"] == "cuzk.prove_start"
                args, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
                out.append((args[0], args[1], args[2], worker))
    return sorted(out)


def _job_in_synth_done(store, n=1):
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 5, None, [{"input": "{}"}] * n)
    for i in range(n):
        assert store.synth_begin(job, i, 0)
        assert store.synth_end(job, i, 0, f"/spool/{i}.wtns", 1.0)
    return job


def test_sweeper_redispatches_from_dead_device_and_routes_waiting(ctx):
    store = ctx.store
    _register(ctx, "h:dev0", 0, alive=False)
    _register(ctx, "h:dev1", 1, alive=False)
    store.heartbeat("h:dev0", 0.3)
    job = _job_in_synth_done(store)
    # routed to dev0, which starts proving and then dies (its heartbeat expires)
    assert routing.route_partition(ctx, job, 0, 0, "c", "/spool/0.wtns", 5)
    assert sent(ctx) == [(job, 0, 0, "h:dev0")]
    assert store.gpu_start("h:dev0", job, 0, 0, 3).ok
    time.sleep(0.4)
    # no live device: re-dispatched, but it waits in the unrouted set
    assert routing.Sweeper(ctx).run_once() == {"redispatched": 1, "routed": 0, "retired": 0, "recovered": 0}
    part = store.get_partition(job, 0)
    assert part["state"] == "synth_done" and int(part["attempt"]) == 1
    assert store.unrouted_partitions() == [(job, 0)]
    # a second sweep changes nothing (the attempt guard)
    assert routing.Sweeper(ctx).run_once() == {"redispatched": 0, "routed": 0, "retired": 0, "recovered": 0}
    # dev1 comes up: the partition goes there with the new attempt
    store.heartbeat("h:dev1", 5)
    assert routing.Sweeper(ctx).run_once() == {"redispatched": 0, "routed": 1, "retired": 0, "recovered": 0}
    assert sent(ctx) == [(job, 0, 0, "h:dev0"), (job, 0, 1, "h:dev1")]
    assert store.unrouted_partitions() == []
    # the old message, if dev0 comes back, is stale
    store.heartbeat("h:dev0", 5)
    assert store.gpu_start("h:dev0", job, 0, 0, 3).reason == "stale"


def test_route_prefers_least_outstanding(ctx):
    store = ctx.store
    for d in (0, 1):
        _register(ctx, f"h:dev{d}", d)
    job = _job_in_synth_done(store, 4)
    for i in range(4):
        assert routing.route_partition(ctx, job, i, 0, "c", f"/spool/{i}.wtns", 5)
    assert sorted(w for *_, w in sent(ctx)) == ["h:dev0", "h:dev0", "h:dev1", "h:dev1"]
    # routing twice is refused (exactly one route per attempt) and pushes nothing
    assert not routing.route_partition(ctx, job, 0, 0, "c", "/spool/0.wtns", 5)
    assert len(sent(ctx)) == 4


def test_route_choice_least_outstanding_then_resident_then_id(ctx):
    store = ctx.store
    _register(ctx, "h:dev0", 0)
    _register(ctx, "h:dev1", 1)
    _register(ctx, "h:dev2", 2)
    _register(ctx, "h:dev3", 3, alive=False)            # no heartbeat: never chosen
    store.register_worker("h:cpu:1", "cpu", "h")        # not a device: never chosen
    store.heartbeat("h:cpu:1", 5)
    store.set_resident("h:dev2", ["a"])
    job = _job_in_synth_done(store, 5)
    # all idle: dev2 holds circuit a
    assert store.route(job, 0, 0, circuit="a").worker == "h:dev2"
    # dev0 and dev1 have 0 outstanding, neither holds b: the smaller id
    assert store.route(job, 1, 0, circuit="b").worker == "h:dev0"
    assert store.route(job, 2, 0, circuit="a").worker == "h:dev1"   # least outstanding wins over resident
    assert store.route(job, 3, 0, circuit="a").worker == "h:dev2"   # all at 1: resident
    store.worker_offline("h:dev0"), store.worker_offline("h:dev1"), store.worker_offline("h:dev2")
    r = store.route(job, 4, 0, circuit="a")
    assert not r and r.reason == "no_live_device"
    assert store.unrouted_partitions() == [(job, 4)]


def test_synth_end_routes_and_queues_in_one_step_or_leaves_unrouted(ctx):
    store = ctx.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 3, None, [{"input": "{}"}] * 2)
    message = routing.prove_start_message(ctx, job, 0, 0, "c", "/w0", 3)
    assert store.synth_begin(job, 0, 0)
    end = store.synth_end(job, 0, 0, "/w0", 1.0, route_circuit="c", message=message)
    assert end and end.routed is not None and not end.routed
    assert end.routed.reason == "no_live_device" and store.unrouted_partitions() == [(job, 0)]
    queue = _register(ctx, "h:dev0", 0)
    assert store.synth_begin(job, 1, 0)
    message = routing.prove_start_message(ctx, job, 1, 0, "c", "/w1", 3)
    end = store.synth_end(job, 1, 0, "/w1", 1.0, route_circuit="c", message=message)
    assert end.routed and end.routed.worker == "h:dev0" and end.routed.queue == queue
    # on the list of priority step 3, exactly what wire.fill_queue would have built
    assert store.redis.lrange(f"{queue}:3", 0, -1) == [wire.fill_queue(message, queue).payload]
    assert store.get_partition(job, 1)["worker"] == "h:dev0"
    assert sent(ctx) == [(job, 1, 0, "h:dev0")]


# --- lost stage messages (kombu can lose one popped just as its connection dropped) --------


@pytest.fixture
def lossy(redis_server_url):
    """A context of its own cpu queue, so nothing else in this Redis looks like its messages."""
    settings = load_settings(env={"CUZK_REDIS_URL": redis_server_url,
                                  "CUZK_PREFIX": "l" + uuid.uuid4().hex[:8],
                                  "CUZK_CPU_QUEUE": "cpu." + uuid.uuid4().hex[:8],
                                  "CUZK_HEARTBEAT_INTERVAL_S": "0.1", "CUZK_HEARTBEAT_TTL_S": "0.3"})
    c = Context(app=None, settings=settings, worker_id="test")
    c.queues = {}
    yield c
    r = c.store.redis
    r.delete(*wire.queue_keys(settings.cpu_queue), *[k for q in c.queues.values() for k in wire.queue_keys(q)])
    for tag, raw in r.hgetall(wire.UNACKED_KEY).items():
        if settings.cpu_queue in raw:
            r.hdel(wire.UNACKED_KEY, tag)


def _cpu_messages(ctx):
    return [wire.message_partition(raw) for key in wire.queue_keys(ctx.settings.cpu_queue)
            for raw in ctx.store.redis.lrange(key, 0, -1)]


def _sweep_twice(sweeper, ctx):
    """Two sweeps a heartbeat TTL apart: what a lost message needs to be declared lost."""
    first = sweeper.run_once()["recovered"]
    time.sleep(ctx.settings.heartbeat_ttl_s + 0.05)
    return first, sweeper.run_once()["recovered"]


def test_a_lost_synthesize_is_queued_again_once(lossy):
    store = lossy.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 4, None, [{"input": "{}"}] * 2)  # queues nothing: both lost
    # partition 1's message is held by a worker (delivered, not yet acked): not lost
    held = routing.synthesize_message(lossy, job, 1, "c", 4)
    store.redis.hset(wire.UNACKED_KEY, "tag-" + job,
                     json.dumps([json.loads(held.payload), "", lossy.settings.cpu_queue]))
    sweeper = routing.Sweeper(lossy)
    assert _sweep_twice(sweeper, lossy) == (0, 1)  # seen once, then re-driven
    assert _cpu_messages(lossy) == [("cuzk.synthesize", job, 0)]
    assert store.get_partition(job, 0)["state"] == "pending"
    assert int(store.get_partition(job, 0)["lost_messages"]) == 1
    # the queue holds it now: nothing more is sent, however long it waits
    assert _sweep_twice(sweeper, lossy) == (0, 0)
    assert len(_cpu_messages(lossy)) == 1


def test_a_lost_prove_start_is_rerouted_with_a_new_attempt(lossy):
    store = lossy.store
    queue = _register(lossy, "h:dev0", 0)
    job = _job_in_synth_done(store)
    assert routing.route_partition(lossy, job, 0, 0, "c", "/spool/0.wtns", 5)
    store.redis.delete(*wire.queue_keys(queue))  # the message is gone
    sweeper = routing.Sweeper(lossy)
    assert _sweep_twice(sweeper, lossy) == (0, 1)
    part = store.get_partition(job, 0)
    assert (part["state"], part["attempt"], part["worker"]) == ("synth_done", 1, "h:dev0")
    assert sent(lossy) == [(job, 0, 1, "h:dev0")]  # routed again, in the same sweep
    # the original, had it survived, is stale now
    assert store.gpu_start("h:dev0", job, 0, 0, 3).reason == "stale"


def test_a_lost_finalize_proves_the_partition_again(lossy):
    store = lossy.store
    _register(lossy, "h:dev0", 0)
    job = _job_in_synth_done(store)
    assert routing.route_partition(lossy, job, 0, 0, "c", "/spool/0.wtns", 5)
    start = store.gpu_start("h:dev0", job, 0, 0, 3)
    assert store.gpu_end("h:dev0", start.token, job, 0, 0, 5.0).partition_advanced  # no finalize queued
    for q in lossy.queues.values():
        store.redis.delete(*wire.queue_keys(q))
    assert store.get_partition(job, 0)["state"] == "finalizing"
    assert _sweep_twice(routing.Sweeper(lossy), lossy) == (0, 1)
    part = store.get_partition(job, 0)
    assert (part["state"], part["attempt"]) == ("synth_done", 1)
    assert sent(lossy) == [(job, 0, 1, "h:dev0")]


def test_a_waiting_partition_with_a_busy_queue_is_not_lost(lossy):
    store = lossy.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 4, None, [{"input": "{}"}] * 2)
    other = routing.synthesize_message(lossy, "other-job", 0, "c", 4)  # the backlog moves
    store.redis.lpush(other.list_key, other.payload)
    assert _sweep_twice(routing.Sweeper(lossy), lossy) == (0, 0)
    assert store.get_partition(job, 0)["state"] == "pending"


def test_message_partition_reads_our_stage_messages_only(lossy):
    synth = routing.synthesize_message(lossy, "j", 3, "c", 4)
    prove = wire.fill_queue(routing.prove_start_message(lossy, "j", 4, 2, "c", "/w", 4), "q")
    assert wire.message_partition(synth.payload) == ("cuzk.synthesize", "j", 3)
    assert wire.message_partition(prove.payload) == ("cuzk.prove_start", "j", 4)
    other = wire.task_message("svc.cb", (), {"job_id": "j"}, queue="q", priority=0)
    assert wire.message_partition(other.payload) is None
    assert wire.message_partition("not json") is None
