"""Host-affine stages (issue 27; docs/architecture.md, "Placement"), on a real redis-server.

Without a shared spool (the default) a pending partition is *placed* on a device first, and
its synthesize and finalize go to that device's host's CPU queue (``<cpu_queue>.<host>``):
no witness crosses hosts.  Only a device whose host has a live CPU worker, and that serves
the circuit (``circuits``, advertised by heartbeats), takes partitions.  A lost device, host
or stage sends the partition back to pending with the next attempt, to be placed and
synthesized again elsewhere.  Hosts here are worker records (the processes are the
contexts); tests/test_multihost.py runs real hosts in Linux namespaces.
"""

from __future__ import annotations

import json
import pathlib
import time
import uuid

import pytest
from support.outbox import Recorder
from support.processes import write_circuits_toml

from cuzk_tasks import pipeline
from cuzk_tasks.celery_app import create_app
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.recovery.sweeper import Sweeper
from cuzk_tasks.state import PartitionRun

FIX = pathlib.Path(__file__).resolve().parent / "fixtures"
TTL_S = 0.5


@pytest.fixture
def ctx(redis_server_url, tmp_path):
    prefix = "pl" + uuid.uuid4().hex[:8]
    config = write_circuits_toml(tmp_path / "cuzk.toml", {"mulchain": ("test-mul", FIX / "mulchain")})
    settings = load_settings(config, env={
        "CUZK_REDIS_URL": redis_server_url, "CUZK_PREFIX": prefix, "CUZK_HOSTNAME": "A",
        "CUZK_HEARTBEAT_INTERVAL_S": "0.1", "CUZK_HEARTBEAT_TTL_S": str(TTL_S),
        "CUZK_SPOOL_DIR": str(tmp_path / "spool")})
    assert settings.host_affine and not settings.shared_spool  # the default
    c = pipeline.Context(create_app(settings), settings,
                         pipeline.WorkerIdentity("A:cpu:1", "cpu", "cpu"))
    c.store.publisher = Recorder()
    return c


def _cpu(ctx, host, circuits=("mulchain",), ttl_s=60):
    """A live CPU worker on ``host``, as its heartbeats advertise it."""
    worker = f"{host}:cpu:1"
    ctx.store.register_worker(worker, "cpu", host, queue=ctx.settings.cpu_queue)
    ctx.store.heartbeat(worker, ttl_s, extra={"host_queue": ctx.settings.host_cpu_queue(host),
                                              "circuits": json.dumps(list(circuits))})
    return worker


def _device(ctx, host, device=0, circuits=("mulchain",), ttl_s=60):
    worker = ctx.settings.device_worker_id(device, host)
    ctx.store.register_worker(worker, "device", host, device=device,
                              queue=ctx.settings.device_queue(device, host))
    ctx.store.heartbeat(worker, ttl_s, extra={"circuits": json.dumps(list(circuits))})
    return worker


def _submit(ctx, n):
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    return pipeline.submit_job(ctx, "mulchain", [{"input": inputs}] * n)


def _synthesizes(ctx):
    """(idx, attempt, queue) of every synthesize sent, in order; the record is cleared."""
    out = [(e["args"][1], e["kwargs"].get("attempt", 0), e["queue"])
           for e in ctx.store.publisher.sent if e["task"] == "cuzk.synthesize"]
    ctx.store.publisher.sent.clear()
    return out


def test_partitions_are_placed_on_devices_and_synthesized_on_their_hosts(ctx):
    """Each partition goes to the least loaded device whose host has a CPU worker; its
    synthesize to that host's queue.  Host C has a device but no CPU worker: nothing goes
    there.  A device that does not serve the circuit gets nothing either."""
    _cpu(ctx, "A"), _cpu(ctx, "B")
    a, b = _device(ctx, "A"), _device(ctx, "B")
    _device(ctx, "C")  # no CPU worker on C
    _device(ctx, "B", 1, circuits=("poseidon",))  # serves another circuit only
    job = _submit(ctx, 4)
    sent = _synthesizes(ctx)
    assert sorted(q for _, _, q in sent) == ["cuzk.cpu.A"] * 2 + ["cuzk.cpu.B"] * 2
    placed = {p["idx"]: p["worker"] for p in ctx.store.list_partitions(job)}
    for idx, _, queue in sent:
        assert queue == ctx.settings.host_cpu_queue(placed[idx].split(":")[0])
    assert sorted(placed.values()) == sorted([a, a, b, b])


def test_synth_end_sends_prove_to_the_placed_device_and_finalize_stays_on_the_host(ctx):
    _cpu(ctx, "A")
    dev = _device(ctx, "A")
    job = _submit(ctx, 1)
    assert _synthesizes(ctx) == [(0, 0, "cuzk.cpu.A")]
    assert ctx.store.synth_begin(PartitionRun(job, 0, 0))
    message = ctx.messages.prove(PartitionRun(job, 0, 0, "mulchain", 5), "/spool/w")
    end = ctx.store.synth_end(PartitionRun(job, 0, 0), "/spool/w", 3, route_circuit="mulchain",
                              message=message)
    assert end.routed.worker == dev
    (prove,) = ctx.store.publisher.sent
    assert prove["queue"] == ctx.settings.device_queue(0, "A")
    assert prove["kwargs"]["finalize_queue"] == "cuzk.cpu.A"
    part = ctx.store.get_partition(job, 0)
    assert part["state"] == "synth_done" and part.get("input")  # kept: a lost host re-synthesizes


def test_a_circuit_no_live_device_serves_is_refused_at_submit(ctx):
    from cuzk_tasks.errors import CuzkError

    _cpu(ctx, "A")
    _device(ctx, "A", circuits=("poseidon",))
    with pytest.raises(CuzkError, match="^circuit: no live device worker serves circuit 'mulchain'"):
        _submit(ctx, 2)
    assert _synthesizes(ctx) == []


def test_with_no_device_yet_partitions_wait_and_the_sweeper_places_them(ctx):
    _cpu(ctx, "A")
    job = _submit(ctx, 2)
    assert _synthesizes(ctx) == []
    assert ctx.store.get_job(job)["state"] == "pending"
    assert sorted(ctx.store.unrouted_partitions()) == [(job, 0), (job, 1)]
    _device(ctx, "B"), _cpu(ctx, "B")
    Sweeper(ctx).run_once(leases=False)
    assert sorted(_synthesizes(ctx)) == [(0, 0, "cuzk.cpu.B"), (1, 0, "cuzk.cpu.B")]


def test_a_lost_device_sends_its_partitions_back_to_be_synthesized_on_another_host(ctx):
    """Host A's device dies with a partition placed on it (pending) and one proved there
    (synth_done, witness in A's spool): both go back to pending with attempt 1 and are
    synthesized again on host B."""
    _cpu(ctx, "A"), _cpu(ctx, "B")
    _device(ctx, "A", ttl_s=TTL_S)
    job = _submit(ctx, 2)
    assert {q for _, _, q in _synthesizes(ctx)} == {"cuzk.cpu.A"}
    assert ctx.store.synth_begin(PartitionRun(job, 1, 0))
    message = ctx.messages.prove(PartitionRun(job, 1, 0, "mulchain", 5), "/spool/w")
    assert ctx.store.synth_end(PartitionRun(job, 1, 0), "/spool/w", 3, route_circuit="mulchain",
                               message=message)
    ctx.store.publisher.sent.clear()
    _device(ctx, "B")
    time.sleep(TTL_S + 0.2)  # A's device heartbeat lapses
    Sweeper(ctx).run_once(leases=False)
    assert sorted(_synthesizes(ctx)) == [(0, 1, "cuzk.cpu.B"), (1, 1, "cuzk.cpu.B")]
    for p in ctx.store.list_partitions(job):
        assert (p["state"], int(p["attempt"]), p["worker"]) == ("pending", 1, "B:dev0")


def test_a_host_whose_cpu_worker_died_loses_its_waiting_partitions_to_another_host(ctx):
    """Host A's device lives but its CPU worker died: a synthesize waiting on A's queue is
    held by no one; after a heartbeat TTL of sightings it is placed again, on host B."""
    _cpu(ctx, "A", ttl_s=TTL_S)
    _device(ctx, "A")
    job = _submit(ctx, 1)
    assert _synthesizes(ctx) == [(0, 0, "cuzk.cpu.A")]
    _cpu(ctx, "B"), _device(ctx, "B")
    time.sleep(TTL_S + 0.2)  # A's CPU worker lapses; its queue's message stays unconsumed
    sweeper = Sweeper(ctx)
    deadline = time.monotonic() + 10
    while not sweeper.run_once()["recovered"]:
        assert time.monotonic() < deadline, ctx.store.get_partition(job, 0)
        time.sleep(0.1)
    Sweeper(ctx).run_once(leases=False)
    assert _synthesizes(ctx) == [(0, 1, "cuzk.cpu.B")]
    assert ctx.store.get_partition(job, 0)["worker"] == "B:dev0"


def test_a_device_fault_resynthesizes_the_partition_for_another_device(ctx):
    _cpu(ctx, "A"), _cpu(ctx, "B")
    a = _device(ctx, "A")
    job = _submit(ctx, 1)
    _synthesizes(ctx)
    _device(ctx, "B")
    assert ctx.store.synth_begin(PartitionRun(job, 0, 0))
    prove = ctx.messages.prove(PartitionRun(job, 0, 0, "mulchain", 5), "/spool/w")
    assert ctx.store.synth_end(PartitionRun(job, 0, 0), "/spool/w", 3, route_circuit="mulchain",
                               message=prove)
    started = ctx.store.prove_begin(a, PartitionRun(job, 0, 0), 3)
    retry = ctx.messages.after_device_fault(PartitionRun(job, 0, 0, "mulchain", 5), "/spool/w")
    ctx.store.publisher.sent.clear()
    fault = ctx.store.prove_fault(a, started.token, PartitionRun(job, 0, 0), "CUDA error", "mulchain",
                                  3, message=retry)
    assert (fault.outcome, fault.worker) == ("rerouted", "B:dev0")
    assert _synthesizes(ctx) == [(0, 1, "cuzk.cpu.B")]
    assert ctx.store.get_partition(job, 0)["state"] == "pending"
