"""Routing choice and the sweeper's re-dispatch, on a real redis-server (no Celery workers)."""

import time
import uuid

import pytest

from cuzk_tasks import routing
from cuzk_tasks.config import load_settings
from cuzk_tasks.pipeline import Context, prove_delay_instrument_ms


def test_choose_worker_least_outstanding_then_resident():
    ws = [{"worker_id": "h:dev0", "queue": "q0", "outstanding": 2, "resident": ["a"]},
          {"worker_id": "h:dev1", "queue": "q1", "outstanding": 1, "resident": []},
          {"worker_id": "h:dev2", "queue": "q2", "outstanding": 1, "resident": ["a"]}]
    assert routing.choose_worker(ws, "a")["worker_id"] == "h:dev2"
    assert routing.choose_worker(ws, "b")["worker_id"] == "h:dev1"
    assert routing.choose_worker([], "a") is None


def test_prove_delay_instrument_parsing():
    assert prove_delay_instrument_ms(None, "x") == 0
    assert prove_delay_instrument_ms("250", "x") == 250
    assert prove_delay_instrument_ms("slow=4000,100", "slow") == 4000
    assert prove_delay_instrument_ms("slow=4000,100", "other") == 100
    assert prove_delay_instrument_ms("slow=4000", "other") == 0


@pytest.fixture
def ctx(redis_server_url, monkeypatch):
    settings = load_settings(env={"CUZK_REDIS_URL": redis_server_url,
                                  "CUZK_PREFIX": "r" + uuid.uuid4().hex[:8],
                                  "CUZK_HEARTBEAT_INTERVAL_S": "0.1", "CUZK_HEARTBEAT_TTL_S": "0.5"})
    sent = []
    monkeypatch.setattr(routing, "send_chain",
                        lambda ctx, worker, job, idx, attempt, *a: sent.append((job, idx, attempt,
                                                                               worker["worker_id"])))
    c = Context(app=None, settings=settings, worker_id="test")
    c.sent = sent
    return c


def _job_in_synth_done(store, n=1):
    job = uuid.uuid4().hex
    store.create_job(job, "c", "k", 5, None, [{"input": "{}"}] * n)
    for i in range(n):
        assert store.synth_begin(job, i, 0)
        assert store.synth_end(job, i, 0, f"/spool/{i}.wtns", 1.0)
    return job


def test_sweeper_redispatches_from_dead_device_and_routes_waiting(ctx):
    store = ctx.store
    store.register_worker("h:dev0", "device", "h", device=0, queue="q0")
    store.register_worker("h:dev1", "device", "h", device=1, queue="q1")
    store.heartbeat("h:dev0", 0.3)
    job = _job_in_synth_done(store)
    # routed to dev0, which starts proving and then dies (its heartbeat expires)
    assert routing.route_partition(ctx, job, 0, 0, "c", "/spool/0.wtns", 5)
    assert ctx.sent == [(job, 0, 0, "h:dev0")]
    assert store.gpu_start("h:dev0", job, 0, 0, 3).ok
    time.sleep(0.4)
    # no live device: re-dispatched, but it waits in the unrouted set
    assert routing.Sweeper(ctx).run_once() == {"redispatched": 1, "routed": 0}
    part = store.get_partition(job, 0)
    assert part["state"] == "synth_done" and int(part["attempt"]) == 1
    assert store.unrouted_partitions() == [(job, 0)]
    # a second sweep changes nothing (the attempt guard)
    assert routing.Sweeper(ctx).run_once() == {"redispatched": 0, "routed": 0}
    # dev1 comes up: the partition goes there with the new attempt
    store.heartbeat("h:dev1", 5)
    assert routing.Sweeper(ctx).run_once() == {"redispatched": 0, "routed": 1}
    assert ctx.sent[-1] == (job, 0, 1, "h:dev1")
    assert store.unrouted_partitions() == []
    # the old message, if dev0 comes back, is stale
    store.heartbeat("h:dev0", 5)
    assert store.gpu_start("h:dev0", job, 0, 0, 3).reason == "stale"


def test_route_prefers_least_outstanding(ctx):
    store = ctx.store
    for d in (0, 1):
        store.register_worker(f"h:dev{d}", "device", "h", device=d, queue=f"q{d}")
        store.heartbeat(f"h:dev{d}", 5)
    job = _job_in_synth_done(store, 4)
    for i in range(4):
        assert routing.route_partition(ctx, job, i, 0, "c", f"/spool/{i}.wtns", 5)
    assert sorted(w for *_, w in ctx.sent) == ["h:dev0", "h:dev0", "h:dev1", "h:dev1"]
    # routing twice is refused (exactly one route per attempt)
    assert not routing.route_partition(ctx, job, 0, 0, "c", "/spool/0.wtns", 5)
