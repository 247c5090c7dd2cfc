"""The estimates (_lib.lua ``estimate``): each job's ETA and position from its circuit's
measured stage times, the work ahead of it and the live devices serving it; a deadline
shorter than the estimate refused in the create step (issue 49 item 3).  Both halves of
``store``: fakeredis and a real redis-server."""

from __future__ import annotations

import json

import pytest

from cuzk_tasks.errors import DeadlineRefused

PARTS = [{"input": "{}"}]


def _device(store, n, backend="cpu", circuits=("c",)):
    worker = f"h:dev{n}"
    store.register_worker(worker, "device", "h", device=n, queue=f"q.dev{n}")
    store.heartbeat(worker, 60, extra={"backend": backend, "circuits": json.dumps(list(circuits))})
    return worker


def _estimates(store, circuit="c", **ms):
    store.redis.hset(store.keys.estimates(circuit), mapping={k: str(v) for k, v in ms.items()})


def test_no_estimate_without_a_sample_of_the_circuit(store):
    _device(store, 0)
    job, created = store.create_job(None, "c", "c", 5, None, PARTS * 2, deadline_s=0.001)
    assert created  # nothing can be said: no refusal either
    status = store.job_status(job)
    assert status["eta"] is None and "eta_s" not in status


def test_the_eta_counts_the_work_ahead_by_priority_step_then_submit_order(store):
    _device(store, 0)
    _device(store, 1)
    _estimates(store, prove_ms=1000, synth_ms=100, finalize_ms=50)
    a, _ = store.create_job(None, "c", "c", 5, None, PARTS * 4)
    # its own 4 partitions in 2 rounds over 2 devices, one synthesize, one finalize
    assert store.job_status(a)["eta_s"] == pytest.approx(2.15)
    assert store.job_status(a)["position"] == 0
    b, _ = store.create_job(None, "c", "c", 4, None, PARTS * 2)  # priority step 3, as a's
    assert store.job_status(b)["eta_s"] == pytest.approx(2.0 + 1.0 + 0.15)
    assert store.job_status(b)["position"] == 4
    urgent, _ = store.create_job(None, "c", "c", 1, None, PARTS)  # step 0: ahead of both
    assert store.job_status(urgent)["eta_s"] == pytest.approx(1.15)
    assert store.job_status(urgent)["position"] == 0
    now = store.job_status(b)["eta"]  # b's estimate now: the urgent job went ahead of it
    assert now["position"] == 5 and now["devices"] == 2
    assert now["eta_s"] == pytest.approx(2.5 + 1.0 + 0.15, abs=0.01)


def test_each_device_proves_at_its_kinds_rate(store):
    _device(store, 0, backend="gpu")
    _device(store, 1, backend="cpu")
    _estimates(store, **{"prove_ms": 500, "prove_ms:gpu": 100, "prove_ms:cpu": 900})
    job, _ = store.create_job(None, "c", "c", 5, None, PARTS * 10)
    rate = 1 / 100 + 1 / 900  # partitions per ms
    assert store.job_status(job)["eta_s"] == pytest.approx(5 * 2 / rate / 1000, rel=1e-3)


def test_a_deadline_the_estimate_says_cannot_be_met_is_refused_and_nothing_created(store):
    _device(store, 0)
    _estimates(store, prove_ms=1000)
    store.create_job(None, "c", "c", 5, None, PARTS * 3)
    with pytest.raises(DeadlineRefused) as info:
        # refused only when even half of the estimate (2.5 s) would miss it
        store.create_job("late", "c", "c", 5, "req-late", PARTS * 2, deadline_s=2.4)
    assert (info.value.eta_s, info.value.ahead, info.value.devices) == (5.0, 3, 1)
    assert store.get_job("late") is None
    assert store.redis.get(store.keys.request("req-late")) is None
    job, created = store.create_job("in-time", "c", "c", 5, None, PARTS * 2, deadline_s=2.6)
    assert created and store.job_status(job)["eta_s"] == pytest.approx(5.0)


def test_a_big_job_is_admitted_in_its_last_step(store_factory):
    store = store_factory(chunk=4)
    _device(store, 0)
    _estimates(store, prove_ms=1000)
    with pytest.raises(DeadlineRefused):
        store.create_job("big", "c", "c", 5, None, PARTS * 10, deadline_s=4.9)
    assert store.get_job("big") is None or store.get_job("big")["state"] == "creating"
    job, created = store.create_job("big2", "c", "c", 5, None, PARTS * 10, deadline_s=5.1)
    assert created and store.job_status(job)["eta_s"] == pytest.approx(10.0)


def test_a_partition_a_device_proves_now_goes_first(store):
    """A later job's partition that a device is proving now finishes before an urgent job's
    first: half a partition's time on average, over the devices."""
    from cuzk_tasks.state import PartitionRun

    dev = _device(store, 0)
    _estimates(store, prove_ms=1000)
    late, _ = store.create_job(None, "c", "c", 9, None, PARTS * 3)
    assert store.synth_begin(PartitionRun(late, 0, 0))
    assert store.synth_end(PartitionRun(late, 0, 0), "/spool/w.wtns", 1.0)
    assert store.route(PartitionRun(late, 0, 0), dev).ok
    assert store.prove_begin(dev, PartitionRun(late, 0, 0)).ok
    urgent, _ = store.create_job(None, "c", "c", 0, None, PARTS)
    assert store.job_status(urgent)["eta_s"] == pytest.approx(0.5 + 1.0)
    assert store.job_status(urgent)["position"] == 0
