"""Routing choice and the sweeper's re-dispatch, on a real redis-server (no Celery workers).

The prove messages the transitions record in the outbox are published by the context's
Celery app (cuzk_tasks/service/publisher.py) and read back from the device queues' lists."""

import json
import time
import uuid

import pytest
from support.outbox import queued

from cuzk_tasks.service import queues
from cuzk_tasks.pipeline import routing
from cuzk_tasks.recovery.sweeper import Sweeper
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.pipeline import Context
from cuzk_tasks.service.publisher import CeleryPublisher
from cuzk_tasks.state import DeviceResult, PartitionRun
from cuzk_tasks.service.task_names import stage_partition
from cuzk_tasks.celery_app import create_app

# kombu's Redis transport: the hash of delivered, unacknowledged messages (delivery tag ->
# JSON [envelope, exchange, routing key]) and its index (tag -> delivery time)
UNACKED, UNACKED_INDEX = "unacked", "unacked_index"


def test_prove_delay_instrument_parsing():
    from support.instruments import prove_delay_ms

    assert prove_delay_ms(None, "x") == 0
    assert prove_delay_ms("250", "x") == 250
    assert prove_delay_ms("slow=4000,100", "slow") == 4000
    assert prove_delay_ms("slow=4000,100", "other") == 100
    assert prove_delay_ms("slow=4000", "other") == 0


@pytest.fixture
def ctx(redis_server_url):
    settings = load_settings(env={"CUZK_REDIS_URL": redis_server_url,
                                  "CUZK_PREFIX": "r" + uuid.uuid4().hex[:8],
                                  "CUZK_HEARTBEAT_INTERVAL_S": "0.1", "CUZK_HEARTBEAT_TTL_S": "0.5",
                                  # the cluster-wide stages (tests/test_placement.py: host-affine)
                                  "CUZK_SHARED_SPOOL": "1"})
    c = Context(app=create_app(settings), settings=settings, worker_id="test")
    assert isinstance(c.store.publisher, CeleryPublisher)  # the steps' messages go out at once
    c.queues = {}  # worker id -> its (unique) queue name
    yield c
    c.store.redis.delete(*[k for q in c.queues.values() for k in queues.queue_keys(q)] or ["-"])


def _register(ctx, worker, device, alive=True):
    queue = f"q.{uuid.uuid4().hex[:8]}.{device}"
    ctx.queues[worker] = queue
    ctx.store.register_worker(worker, "device", "h", device=device, queue=queue)
    if alive:
        ctx.store.heartbeat(worker, 5)
    return queue


def sent(ctx):
    """(job, idx, attempt, worker) of every prove message waiting on a device queue."""
    out = []
    for worker, queue in ctx.queues.items():
        for task, args, _, _ in queued(ctx.store.redis, queue):
            assert task == "cuzk.prove"
            out.append((args[0], args[1], args[2], worker))
    return sorted(out)


def _job_in_synth_done(store, n=1):
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 5, None, [{"input": "{}"}] * n)
    for i in range(n):
        assert store.synth_begin(PartitionRun(job, i, 0))
        assert store.synth_end(PartitionRun(job, i, 0), f"/spool/{i}.wtns", 1.0)
    return job


def test_sweeper_redispatches_from_dead_device_and_routes_waiting(ctx):
    store = ctx.store
    _register(ctx, "h:dev0", 0, alive=False)
    _register(ctx, "h:dev1", 1, alive=False)
    store.heartbeat("h:dev0", 0.3)
    job = _job_in_synth_done(store)
    # routed to dev0, which starts proving and then dies (its heartbeat expires)
    assert routing.route_partition(ctx, PartitionRun(job, 0, 0, "c", 5), "/spool/0.wtns")
    assert sent(ctx) == [(job, 0, 0, "h:dev0")]
    assert store.prove_begin("h:dev0", PartitionRun(job, 0, 0), 3).ok
    time.sleep(0.4)
    # no live device: re-dispatched, but it waits in the unrouted set
    assert Sweeper(ctx).run_once() == {"redispatched": 1, "routed": 0, "retired": 0, "recovered": 0, "expired": 0, "requests": 0, "outbox": 0}
    part = store.get_partition(job, 0)
    assert part["state"] == "synth_done" and int(part["attempt"]) == 1
    assert store.unrouted_partitions() == [(job, 0)]
    # a second sweep changes nothing (the attempt guard)
    assert Sweeper(ctx).run_once() == {"redispatched": 0, "routed": 0, "retired": 0, "recovered": 0, "expired": 0, "requests": 0, "outbox": 0}
    # dev1 comes up: the partition goes there with the new attempt
    store.heartbeat("h:dev1", 5)
    assert Sweeper(ctx).run_once() == {"redispatched": 0, "routed": 1, "retired": 0, "recovered": 0, "expired": 0, "requests": 0, "outbox": 0}
    assert sent(ctx) == [(job, 0, 0, "h:dev0"), (job, 0, 1, "h:dev1")]
    assert store.unrouted_partitions() == []
    # the old message, if dev0 comes back, is stale
    store.heartbeat("h:dev0", 5)
    assert store.prove_begin("h:dev0", PartitionRun(job, 0, 0), 3).reason == "stale"


def test_route_prefers_least_outstanding(ctx):
    store = ctx.store
    for d in (0, 1):
        _register(ctx, f"h:dev{d}", d)
    job = _job_in_synth_done(store, 4)
    for i in range(4):
        assert routing.route_partition(ctx, PartitionRun(job, i, 0, "c", 5), f"/spool/{i}.wtns")
    assert sorted(w for *_, w in sent(ctx)) == ["h:dev0", "h:dev0", "h:dev1", "h:dev1"]
    # routing twice is refused (exactly one route per attempt) and pushes nothing
    assert not routing.route_partition(ctx, PartitionRun(job, 0, 0, "c", 5), "/spool/0.wtns")
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
    assert store.route(PartitionRun(job, 0, 0), circuit="a").worker == "h:dev2"
    # dev0 and dev1 have 0 outstanding, neither holds b: the smaller id
    assert store.route(PartitionRun(job, 1, 0), circuit="b").worker == "h:dev0"
    assert store.route(PartitionRun(job, 2, 0),
                       circuit="a").worker == "h:dev1"   # least outstanding wins over resident
    assert store.route(PartitionRun(job, 3, 0),
                       circuit="a").worker == "h:dev2"   # all at 1: resident
    store.worker_offline("h:dev0"), store.worker_offline("h:dev1"), store.worker_offline("h:dev2")
    r = store.route(PartitionRun(job, 4, 0), circuit="a")
    assert not r and r.reason == "no_live_device"
    assert store.unrouted_partitions() == [(job, 4)]


def test_synth_end_routes_and_queues_in_one_step_or_leaves_unrouted(ctx):
    store = ctx.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 3, None, [{"input": "{}"}] * 2)
    message = ctx.messages.prove(PartitionRun(job, 0, 0, "c", 3), "/w0")
    assert store.synth_begin(PartitionRun(job, 0, 0))
    end = store.synth_end(PartitionRun(job, 0, 0), "/w0", 1.0, route_circuit="c", message=message)
    assert end and end.routed is not None and not end.routed
    assert end.routed.reason == "no_live_device" and store.unrouted_partitions() == [(job, 0)]
    assert store.outbox_entries() == {}  # nothing recorded for a partition left unrouted
    queue = _register(ctx, "h:dev0", 0)
    assert store.synth_begin(PartitionRun(job, 1, 0))
    message = ctx.messages.prove(PartitionRun(job, 1, 0, "c", 3), "/w1")
    end = store.synth_end(PartitionRun(job, 1, 0), "/w1", 1.0, route_circuit="c", message=message)
    assert end.routed and end.routed.worker == "h:dev0" and end.routed.queue == queue
    # published by Celery on the chosen queue's list of priority step 3, as the entry says
    assert store.redis.llen(queues.queue_list_key(queue, 3)) == 1
    assert queued(store.redis, queue) == [(
        "cuzk.prove", [job, 1, 0, "c", "/w1"],
        {"finalize_queue": ctx.settings.stage_queue, "priority": 3}, 3)]
    assert store.outbox_entries() == {}  # published, then deleted
    assert store.get_partition(job, 1)["worker"] == "h:dev0"
    assert sent(ctx) == [(job, 1, 0, "h:dev0")]


# --- stage leases: a stage no live worker holds is re-driven (docs/architecture.md) ----------


@pytest.fixture
def lossy(redis_server_url):
    """A context of its own cpu queue, so nothing else in this Redis looks like its messages."""
    settings = load_settings(env={"CUZK_REDIS_URL": redis_server_url,
                                  "CUZK_PREFIX": "l" + uuid.uuid4().hex[:8],
                                  "CUZK_CPU_QUEUE": "cpu." + uuid.uuid4().hex[:8],
                                  "CUZK_HEARTBEAT_INTERVAL_S": "0.1", "CUZK_HEARTBEAT_TTL_S": "0.3",
                                  "CUZK_SHARED_SPOOL": "1"})  # cluster-wide stages
    c = Context(app=create_app(settings), settings=settings, worker_id="test")
    c.queues = {}
    yield c
    r = c.store.redis
    r.delete(*queues.queue_keys(settings.stage_queue),
             *[k for q in c.queues.values() for k in queues.queue_keys(q)])
    for tag, raw in r.hgetall(UNACKED).items():
        if settings.cpu_queue in raw:  # its stage queue's name holds it too
            r.hdel(UNACKED, tag)
            r.zrem(UNACKED_INDEX, tag)


def _cpu_messages(ctx):
    """(task, job, idx, attempt) of every stage message waiting on the stage queue."""
    runs = [(task, stage_partition(task, args, kwargs))
            for task, args, kwargs, _ in queued(ctx.store.redis, ctx.settings.stage_queue)]
    return [(task, run.job_id, run.idx, run.attempt) for task, run in runs]


def _publish(ctx, entry):
    """Have Celery send one outbox entry (cuzk_tasks/service/messages.py) as the step's would be."""
    assert CeleryPublisher(ctx.app).send([("test", entry)]) == ["test"]


def _strand(ctx, entry):
    """Send ``entry`` and move the message into kombu's unacked hash, as a worker's delivery
    does (kombu's QoS.append): delivered, then its worker died."""
    _publish(ctx, entry)
    r = ctx.store.redis
    queue = json.loads(entry)["queue"]
    (raw,) = [m for key in queues.queue_keys(queue) for m in [r.rpop(key)] if m is not None]
    tag = json.loads(raw)["properties"]["delivery_tag"]
    r.zadd(UNACKED_INDEX, {tag: time.time()})
    r.hset(UNACKED, tag, json.dumps([json.loads(raw), "", queue]))


def _sweep_twice(sweeper, ctx):
    """Two sweeps a heartbeat TTL apart: what a stage held by no one needs to be re-driven."""
    first = sweeper.run_once()["recovered"]
    time.sleep(ctx.settings.heartbeat_ttl_s + 0.05)
    return first, sweeper.run_once()["recovered"]


def _cpu_worker(ctx, name, holding, ttl_s=5):
    ctx.store.register_worker(name, "cpu", "h", queue=ctx.settings.cpu_queue)
    ctx.store.heartbeat(name, ttl_s, holding=holding)


def test_a_synthesize_held_by_no_one_is_queued_again_with_the_next_attempt(lossy):
    store = lossy.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 4, None, [{"input": "{}"}] * 3)  # queues nothing
    # partition 0's message is stranded in kombu's unacked hash (its worker died): no lease
    _strand(lossy, lossy.messages.synthesize(PartitionRun(job, 0, 0, "c", 4)))
    assert _cpu_messages(lossy) == []
    # partition 1's is held by a live worker (its heartbeat reports it); 2's attempt 0 is
    # reported too, but by a worker that went offline
    _cpu_worker(lossy, "h:cpu:live", [PartitionRun(job, 1, 0)])
    _cpu_worker(lossy, "h:cpu:gone", [PartitionRun(job, 2, 0)])
    store.worker_offline("h:cpu:gone")
    sweeper = Sweeper(lossy)
    assert _sweep_twice(sweeper, lossy) == (0, 2)  # seen once, then re-driven
    assert sorted(_cpu_messages(lossy)) == [("cuzk.synthesize", job, 0, 1),
                                            ("cuzk.synthesize", job, 2, 1)]
    part = store.get_partition(job, 0)
    assert (part["state"], part["attempt"], part["lost_messages"]) == ("pending", 1, 1)
    assert store.get_partition(job, 1)["attempt"] == 0
    # the stranded original, restored at last, is stale; the new message runs
    assert store.synth_begin(PartitionRun(job, 0, 0)).reason == "stale"
    assert store.synth_begin(PartitionRun(job, 0, 1))
    # queued (pending) or held (synthesizing under a lease): nothing more is sent
    _cpu_worker(lossy, "h:cpu:live", [PartitionRun(job, 1, 0), PartitionRun(job, 0, 1)])
    assert _sweep_twice(sweeper, lossy) == (0, 0)
    assert len(_cpu_messages(lossy)) == 2


def test_a_running_synthesize_whose_worker_died_is_queued_again_despite_a_backlog(lossy):
    store = lossy.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 4, None, [{"input": "{}"}])
    assert store.synth_begin(PartitionRun(job, 0, 0))  # delivered and running ...
    _cpu_worker(lossy, "h:cpu:1", [PartitionRun(job, 0, 0)], ttl_s=0.2)  # ... on a worker that dies
    # the queue is busy: irrelevant here
    _publish(lossy, lossy.messages.synthesize(PartitionRun("other-job", 0, 0, "c", 4)))
    sweeper = Sweeper(lossy)
    assert sweeper.run_once()["recovered"] == 0  # its lease is alive
    time.sleep(0.25)  # the worker's heartbeat has expired
    assert _sweep_twice(sweeper, lossy) == (0, 1)
    part = store.get_partition(job, 0)
    assert (part["state"], part["attempt"]) == ("pending", 1)
    assert ("cuzk.synthesize", job, 0, 1) in _cpu_messages(lossy)
    # the dead run's synth_end, had it come, is stale
    assert not store.synth_end(PartitionRun(job, 0, 0), "/w", 1.0)


def test_a_lost_prove_is_rerouted_with_a_new_attempt(lossy):
    store = lossy.store
    queue = _register(lossy, "h:dev0", 0)
    job = _job_in_synth_done(store)
    assert routing.route_partition(lossy, PartitionRun(job, 0, 0, "c", 5), "/spool/0.wtns")
    store.redis.delete(*queues.queue_keys(queue))  # the message is gone
    sweeper = Sweeper(lossy)
    assert _sweep_twice(sweeper, lossy) == (0, 1)
    part = store.get_partition(job, 0)
    assert (part["state"], part["attempt"], part["worker"]) == ("synth_done", 1, "h:dev0")
    assert sent(lossy) == [(job, 0, 1, "h:dev0")]  # routed again, in the same sweep
    # the original, had it survived, is stale now
    assert store.prove_begin("h:dev0", PartitionRun(job, 0, 0), 3).reason == "stale"


def test_a_prove_the_live_device_no_longer_runs_goes_back_and_the_device_goes_idle(lossy):
    store = lossy.store
    _register(lossy, "h:dev0", 0)
    job = _job_in_synth_done(store, 2)
    for i in (0, 1):
        assert routing.route_partition(lossy, PartitionRun(job, i, 0, "c", 5), f"/spool/{i}.wtns")
    assert store.prove_begin("h:dev0", PartitionRun(job, 0, 0), 3).ok
    for q in lossy.queues.values():
        store.redis.delete(*queues.queue_keys(q))
    # the device lives on but reports only partition 1 (reserved): partition 0's run is gone
    store.heartbeat("h:dev0", 5, holding=[PartitionRun(job, 1, 0)])
    assert store.get_worker("h:dev0")["state"] == "proving"
    assert _sweep_twice(Sweeper(lossy), lossy) == (0, 1)
    part = store.get_partition(job, 0)
    assert (part["state"], part["attempt"], part["token"]) == ("synth_done", 1, None)
    assert store.get_worker("h:dev0")["state"] == "idle"  # compare-and-delete on the run's token
    assert store.get_partition(job, 1)["attempt"] == 0
    assert sent(lossy) == [(job, 0, 1, "h:dev0")]


def test_a_prove_the_device_reports_is_left_alone(lossy):
    store = lossy.store
    _register(lossy, "h:dev0", 0)
    job = _job_in_synth_done(store)
    assert routing.route_partition(lossy, PartitionRun(job, 0, 0, "c", 5), "/spool/0.wtns")
    start = store.prove_begin("h:dev0", PartitionRun(job, 0, 0), 3)
    store.heartbeat("h:dev0", 5, holding=[PartitionRun(job, 0, 0)])
    assert _sweep_twice(Sweeper(lossy), lossy) == (0, 0)
    assert store.get_partition(job, 0)["token"] == start.token


def test_a_lost_finalize_proves_the_partition_again(lossy):
    store = lossy.store
    _register(lossy, "h:dev0", 0)
    job = _job_in_synth_done(store)
    assert routing.route_partition(lossy, PartitionRun(job, 0, 0, "c", 5), "/spool/0.wtns")
    start = store.prove_begin("h:dev0", PartitionRun(job, 0, 0), 3)
    assert store.prove_end("h:dev0", start.token, PartitionRun(job, 0, 0),
                           5.0).partition_advanced  # no finalize queued
    for q in lossy.queues.values():
        store.redis.delete(*queues.queue_keys(q))
    assert store.get_partition(job, 0)["state"] == "finalizing"
    assert _sweep_twice(Sweeper(lossy), lossy) == (0, 1)
    part = store.get_partition(job, 0)
    assert (part["state"], part["attempt"]) == ("synth_done", 1)
    assert sent(lossy) == [(job, 0, 1, "h:dev0")]


def test_a_waiting_partition_with_a_busy_queue_is_not_lost(lossy):
    store = lossy.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 4, None, [{"input": "{}"}] * 2)
    # the backlog moves
    _publish(lossy, lossy.messages.synthesize(PartitionRun("other-job", 0, 0, "c", 4)))
    assert _sweep_twice(Sweeper(lossy), lossy) == (0, 0)
    assert store.get_partition(job, 0)["state"] == "pending"


def test_sightings_across_a_gap_in_the_sweeps_do_not_count(lossy):
    """A sweeper held up (a Redis outage or pause) saw the workers' leases before it; they
    may not have reported since: the next sighting is a first one again."""
    store = lossy.store
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 4, None, [{"input": "{}"}])
    sweeper = Sweeper(lossy)
    assert sweeper.run_once()["recovered"] == 0
    settings = lossy.settings
    sweeper._last_look -= settings.heartbeat_ttl_s + settings.heartbeat_interval_s + 1
    for key in sweeper._suspects:
        sweeper._suspects[key] -= 100
    assert sweeper.run_once()["recovered"] == 0
    assert store.get_partition(job, 0)["attempt"] == 0
    time.sleep(settings.heartbeat_ttl_s + 0.05)
    assert sweeper.run_once()["recovered"] == 1


def test_stage_messages_name_their_partition_attempt(lossy):
    """As a worker reads them (Celery's decoded requests): every stage message the steps
    send names its partition attempt; other tasks' name none."""
    m = lossy.messages
    finalize = DeviceResult(PartitionRun("j", 5, 1, "c", 4), witness_ref="/w", worker="d",
                            token="t", backend="cpu", partial=None, sent_at=0.0)
    sent = [json.loads(e) for e in (
        m.synthesize(PartitionRun("j", 3, 0, "c", 4)),
        m.synthesize(PartitionRun("j", 3, 2, "c", 4)),
        m.prove(PartitionRun("j", 4, 2, "c", 4), "/w"), m.finalize("cpu", finalize),
        m.on_done({"task": "svc.cb", "queue": "q"}))]
    assert [stage_partition(e["task"], e["args"], e.get("kwargs", {"job_id": "j"}))
            for e in sent] == [PartitionRun("j", 3, 0), PartitionRun("j", 3, 2),
                               PartitionRun("j", 4, 2), PartitionRun("j", 5, 1), None]
    assert stage_partition("cuzk.finalize", [], {}) is None
    assert stage_partition("cuzk.prove", ["j", 1], {"attempt": 3}) == \
        PartitionRun("j", 1, 3)
    assert stage_partition("cuzk.prove", ["j"], {}) is None  # malformed: names nothing


def test_a_worker_reports_the_stages_and_requests_its_celery_registry_holds(monkeypatch):
    """What the heartbeat reports: Celery's registry of reserved and running requests in
    the worker's main process (celery.worker.state.requests)."""
    from celery.worker import state

    from cuzk_tasks.service.worker import held_messages

    class Request:  # the four attributes of celery.worker.request.Request read
        def __init__(self, task_name, args, kwargs, task_id=None):
            self.task_name, self.args, self.kwargs = task_name, args, kwargs
            self.id = task_id or f"id-{task_name}-{len(args)}"

    monkeypatch.setattr(state, "requests", {
        "a": Request("cuzk.synthesize", ["j", 0], {"circuit": "c", "attempt": 2}),
        "b": Request("cuzk.prove", ["j", 1, 0, "c", "/w"], {}),
        "c": Request("cuzk.finalize", [{"job": "k", "idx": 3, "attempt": 1}], {}),
        "d": Request("cuzk.submit", [], {"circuit": "c"}, "t-submit"),
        "f": Request("cuzk.status", ["j"], {}, "t-status"),
        "g": Request("svc.other", [], {}, "t-other"),  # not ours: held by its own service
        "e": Request("cuzk.prove", ["j"], {}),  # malformed: holds nothing
    })
    held = held_messages()
    assert held.stages == [PartitionRun("j", 0, 2), PartitionRun("j", 1, 0),
                           PartitionRun("k", 3, 1)]
    assert held.requests == ["t-status", "t-submit"]


def _reserved(app, conn, idx, task_id):
    """A synthesize request as Celery's consumer makes one from a message it delivered on
    kombu connection ``conn``: (the request, the channel it came on)."""
    from celery.worker.request import Request

    queue = conn.SimpleQueue(f"cuzk.cpu.{task_id}")
    queue.put((["j", idx], {"circuit": "c", "attempt": 0}, {}), serializer="json",
              headers={"task": "cuzk.synthesize", "id": task_id})
    message = queue.get(timeout=5)
    return Request(message, app=app, task=app.tasks["cuzk.synthesize"]), message.channel


def test_a_request_reserved_on_a_channel_that_closed_is_no_lease(monkeypatch):
    """A reconnect leaves the requests Celery had reserved in its registry (its consumer's
    on_close misses them) though they will never run: the heartbeat must not report them,
    or their stages' leases would never lapse (the chaos test's Redis kill -9 stranded a
    partition so).  Real Celery requests on real kombu channels (the memory transport): one
    reserved on a channel since closed is dropped; one on an open channel, and one a pool
    process accepted before its channel closed, are still held."""
    from celery.worker import state
    from kombu import Connection

    from cuzk_tasks.celery_app import create_app
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.service.worker import held_messages

    app = create_app(load_settings(env={"CUZK_REDIS_URL": "redis://127.0.0.1:1/0"}))

    with Connection("memory://") as old, Connection("memory://") as live:
        lost, lost_channel = _reserved(app, old, 0, "t0")
        running, running_channel = _reserved(app, old, 1, "t1")
        running.on_accepted(pid=123, time_accepted=time.monotonic())
        kept, _ = _reserved(app, live, 2, "t2")
        monkeypatch.setattr(state, "requests", {r.id: r for r in (lost, running, kept)})
        assert held_messages().stages == [PartitionRun("j", i, 0) for i in range(3)]
        lost_channel.close()
        running_channel.close()
        assert held_messages().stages == [PartitionRun("j", 1, 0), PartitionRun("j", 2, 0)]


def test_a_request_reserved_on_a_channel_the_consumer_left_is_no_lease(monkeypatch):
    """kombu's Redis channel, closed while its BRPOP is pending and Redis is gone, raises
    before it marks itself closed (CI stop 44: a synthesize reserved at the instant of a Redis
    kill -9 kept its stage's lease for ever).  So a reserved request on any channel but the
    one the consumer reads now is dropped, closed or not; one on that channel, and one a pool
    process accepted on the old channel, are still held.  The consumer bootstep records the
    channel at each consumer start."""
    from celery.worker import state
    from kombu import Connection

    from cuzk_tasks.celery_app import create_app
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.service.worker import (RecordConsumingChannel, consume_recording_channel,
                                           held_messages)

    app = create_app(load_settings(env={"CUZK_REDIS_URL": "redis://127.0.0.1:1/0"}))
    consuming = consume_recording_channel(app)
    assert RecordConsumingChannel in app.steps["consumer"]

    class Consumer:  # what the bootstep reads of Celery's consumer
        def __init__(self, channel):
            self.app, self.task_consumer = app, type("TaskConsumer", (), {"channel": channel})

    with Connection("memory://") as old, Connection("memory://") as new:
        before, old_channel = _reserved(app, old, 0, "t0")
        running, _ = _reserved(app, old, 1, "t1")
        running.on_accepted(pid=123, time_accepted=time.monotonic())
        RecordConsumingChannel(parent=None).start(Consumer(old_channel))
        monkeypatch.setattr(state, "requests", {r.id: r for r in (before, running)})
        assert held_messages(consuming).stages == [PartitionRun("j", i, 0) for i in range(2)]
        # the connection is lost; the old channel's close failed: not marked closed
        after, new_channel = _reserved(app, new, 2, "t2")
        RecordConsumingChannel(parent=None).start(Consumer(new_channel))
        assert consuming.channel is new_channel and not old_channel.closed
        monkeypatch.setattr(state, "requests", {r.id: r for r in (before, running, after)})
        assert held_messages(consuming).stages == [PartitionRun("j", 1, 0), PartitionRun("j", 2, 0)]


def _unacked(redis, tag, task, task_id, delivered_ago_s, queue, eta=None):
    """An entry of kombu's unacked hash and index, as kombu's Redis transport writes one."""
    headers = {"task": task, "id": task_id, "eta": eta}
    envelope = {"body": "W10=", "headers": headers, "content-type": "application/json",
                "properties": {"priority": 0, "delivery_tag": tag, "body_encoding": "base64",
                               "delivery_info": {"exchange": "", "routing_key": queue}}}
    redis.hset(UNACKED, tag, json.dumps([envelope, "", queue]))
    redis.zadd(UNACKED_INDEX, {tag: time.time() - delivered_ago_s})


def test_request_leases_put_back_only_what_no_live_worker_holds(ctx):
    """The sweeper's request leases (cuzk_tasks/recovery/request_leases.py): a by-name request
    delivered a TTL ago that no online worker reports holding goes back on its queue on the
    second sighting; a held one, a stage message, a request waiting for its ETA and one
    delivered just now stay where they are."""
    import datetime

    from cuzk_tasks.recovery.request_leases import RequestLeases

    r, store = ctx.store.redis, ctx.store
    queue = f"q.{uuid.uuid4().hex[:8]}"
    ctx.queues["cpu"] = queue
    tag = lambda name: f"{queue}-{name}"  # noqa: E731
    store.register_worker("h:cpu:1", "cpu", "h", queue=queue)
    store.heartbeat("h:cpu:1", 5, holding_requests=["t-held"])
    future = (datetime.datetime.now(datetime.timezone.utc)
              + datetime.timedelta(hours=1)).isoformat()
    _unacked(r, tag("held"), "cuzk.submit", "t-held", 5, queue)
    _unacked(r, tag("lost"), "cuzk.submit", "t-lost", 5, queue)
    _unacked(r, tag("stage"), "cuzk.synthesize", "t-stage", 5, queue)
    _unacked(r, tag("eta"), "cuzk.status", "t-eta", 5, queue, eta=future)
    _unacked(r, tag("fresh"), "cuzk.result", "t-fresh", 0, queue)
    leases = RequestLeases(ctx.app, store, ttl_s=0.3, interval_s=0.1)
    try:
        assert leases.recover() == 0  # the first sighting
        assert r.llen(queue) == 0
        time.sleep(0.35)
        assert leases.recover() == 1
        waiting = [json.loads(m)["headers"]["id"] for m in r.lrange(queue, 0, -1)]
        assert waiting == ["t-lost"]
        assert set(r.hkeys(UNACKED)) >= {tag("held"), tag("stage"), tag("eta"), tag("fresh")}
        assert not r.hexists(UNACKED, tag("lost"))
        r.hdel(UNACKED, tag("fresh"))  # acknowledged by its worker meanwhile
        r.zrem(UNACKED_INDEX, tag("fresh"))
        # the holder's heartbeat expires: its request goes back too, after a TTL of sightings
        store.heartbeat("h:cpu:1", 0.05, holding_requests=["t-held"])
        time.sleep(0.1)
        assert leases.recover() == 0
        time.sleep(0.35)
        assert leases.recover() == 1
        waiting = [json.loads(m)["headers"]["id"] for m in r.lrange(queue, 0, -1)]
        assert sorted(waiting) == ["t-held", "t-lost"]
        assert r.hexists(UNACKED, tag("stage")) and r.hexists(UNACKED, tag("eta"))
    finally:
        r.hdel(UNACKED, *[tag(n) for n in ("held", "lost", "stage", "eta", "fresh")])
        r.zrem(UNACKED_INDEX, *[tag(n) for n in ("held", "lost", "stage", "eta", "fresh")])


def test_the_sweeper_thread_checks_leases_every_half_ttl(ctx):
    """The lease checks read every in-flight partition, so the periodic sweep runs them every
    half heartbeat TTL (still two sightings a TTL apart within 1.5 TTLs), not every sweep."""
    sweeper = Sweeper(ctx)
    calls = []
    sweeper.recover_stages = lambda workers=None: calls.append(time.monotonic()) or 0
    for _ in range(3):
        sweeper.step()
    assert len(calls) == 1
    time.sleep(ctx.settings.heartbeat_ttl_s / 2 + 0.02)
    sweeper.step()
    assert len(calls) == 2
    assert sweeper.run_once()["recovered"] == 0 and len(calls) == 3  # run_once: always


def test_a_periodic_loop_logs_a_redis_outage_once_and_its_end_once(caplog):
    """The heartbeat and sweeper loops (issue 24): steps that meet an outage -- refused
    connections, BUSY -- log one warning when it starts and one when a step succeeds again;
    any other failure is logged with its traceback every time."""
    import redis

    from cuzk_tasks.service.periodic import PeriodicThread

    failures = [redis.exceptions.ConnectionError("refused"),
                redis.exceptions.ResponseError("BUSY Redis is busy running a script."),
                redis.exceptions.ConnectionError("refused"), None, ValueError("a bug"), None]

    class Loop(PeriodicThread):
        thread_name = "test-loop"

        def step(self):
            failure = failures.pop(0)
            if failure is not None:
                raise failure

    loop = Loop(1.0)
    with caplog.at_level("WARNING", logger="cuzk_tasks.service.periodic"):
        for _ in range(6):
            loop.step_logged()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["WARNING", "WARNING", "ERROR"], lines
    assert "Redis unavailable" in lines[0][1] and "back" in lines[1][1]


def test_one_sweeper_at_a_time_does_the_cluster_wide_checks(ctx):
    """The sweep's lease (StateStore.claim_sweep): a second CPU worker's sweeper stands by --
    it re-dispatches nothing -- while the first holds the lease, and takes over once the
    first stops renewing it (a heartbeat TTL, here 0.5 s)."""
    store = ctx.store
    _register(ctx, "h:dev0", 0, alive=False)
    store.heartbeat("h:dev0", 0.3)
    job = _job_in_synth_done(store)
    assert routing.route_partition(ctx, PartitionRun(job, 0, 0, "c", 5), "/spool/0.wtns")
    first = Sweeper(ctx)
    first.holder = "h:cpu:1"
    other = Sweeper(ctx)
    other.holder = "g:cpu:2"
    assert "standby" not in first.run_once()
    time.sleep(0.4)  # dev0's heartbeat lapses; the first sweeper's lease (0.5 s) does not
    assert other.run_once()["standby"] is True
    assert store.get_partition(job, 0)["attempt"] == 0  # the standby touched nothing
    time.sleep(0.6)  # the first sweeper is gone: its lease lapses
    taken = other.run_once()
    assert "standby" not in taken and taken["redispatched"] == 1
    assert first.run_once()["standby"] is True
