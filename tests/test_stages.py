"""Each pipeline stage in-process (cuzk_tasks/pipeline/), beside the end-to-end tests.

A real redis-server, the real mulchain circuit and prover, and the real messages: every
stage is called directly, as its Celery task would call it, with the arguments decoded from
the message the previous stage's transition pushed.  So each stage's contract -- what it
reads, what it writes, what it queues next, and what it refuses -- is checked on its own.
"""

from __future__ import annotations

import base64
import json
import pathlib
import time
import uuid

import pytest
from support.processes import write_circuits_toml

from cuzk_tasks import pipeline
from cuzk_tasks.service import queues
from cuzk_tasks.celery_app import create_app
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.state import PartitionRun, WorkerRole
from cuzk_tasks.service.worker import advertised

FIX = pathlib.Path(__file__).resolve().parent / "fixtures"
HOST = "stagehost"


@pytest.fixture
def stack(redis_server_url, tmp_path):
    """A CPU worker's and a device worker's contexts on one settings file, the device
    registered and live."""
    prefix = "st" + uuid.uuid4().hex[:8]
    config = write_circuits_toml(tmp_path / "cuzk.toml", {"mulchain": ("test-mul", FIX / "mulchain")})
    settings = load_settings(config, env={
        "CUZK_REDIS_URL": redis_server_url, "CUZK_PREFIX": prefix, "CUZK_HOSTNAME": HOST,
        "CUZK_SPOOL_DIR": str(tmp_path / "spool"), "CUZK_THREADS": "1",
        "CUZK_CPU_QUEUE": f"{prefix}.cpu",
        "CUZK_DEVICE_QUEUE_PATTERN": f"{prefix}.dev.{{host}}.{{device}}"})
    app = create_app(settings)
    cpu = pipeline.Context(app, settings, pipeline.WorkerIdentity(settings.cpu_worker_id(), "cpu", "cpu"))
    device_id = settings.device_worker_id(0)
    device = pipeline.Context(app, settings, pipeline.WorkerIdentity(device_id, "device", "cpu"))
    cpu.store.register_worker(device_id, "device", HOST, device=0, queue=settings.device_queue(0))
    cpu.store.heartbeat(device_id, 60)
    # the host's CPU worker, as its heartbeats advertise it: the partitions are placed on the
    # device (host-affine stages), their synthesize and finalize on this host's CPU queue
    cpu.store.register_worker(cpu.worker_id, "cpu", HOST, queue=settings.cpu_queue)
    cpu.store.heartbeat(cpu.worker_id, 60, extra=advertised(settings, WorkerRole.CPU,
                                                                  cpu.messages.seal))
    yield {"cpu": cpu, "device": device, "settings": settings, "device_id": device_id}
    keys = [k for q in (settings.cpu_queue, settings.host_cpu_queue(), settings.device_queue(0))
            for k in queues.queue_keys(q)]
    cpu.store.redis.delete(*keys)


def _pop(ctx, queue):
    """(task, args, kwargs) of every message waiting on ``queue``, oldest first; removed."""
    out = []
    for key in queues.queue_keys(queue):
        while (raw := ctx.store.redis.rpop(key)) is not None:
            envelope = json.loads(raw)
            args, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
            out.append((envelope["headers"]["task"], args, kwargs))
    return out


def _synthesize(ctx, args, kwargs):
    """synthesize as its Celery task (tasks.py) calls it with a message's arguments."""
    job, idx = args
    return pipeline.synthesize(ctx, PartitionRun(job, idx, kwargs.get("attempt", 0),
                                                 kwargs["circuit"], kwargs["priority"]),
                               kwargs.get("inline_input"))


def _prove(ctx, args, kwargs):
    """prove as its Celery task (tasks.py) calls it with a message's arguments."""
    job, idx, attempt, circuit, witness_ref = args
    return pipeline.prove(ctx, PartitionRun(job, idx, attempt, circuit, kwargs["priority"]),
                          witness_ref, kwargs["finalize_queue"])


def _prove_message(stack):
    """A one-partition job synthesized up to its prove message: (job id, the message's args,
    its kwargs), taken off the device's queue."""
    cpu, settings = stack["cpu"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    (_, args, kwargs), = _pop(cpu, settings.host_cpu_queue())
    _synthesize(cpu, args, kwargs)
    (_, args, kwargs), = _pop(cpu, settings.device_queue(0))
    return job, args, kwargs


def _input():
    return json.loads((FIX / "mulchain" / "input.json").read_text())


def test_submit_creates_the_job_and_queues_one_synthesize_per_partition(stack):
    cpu, settings = stack["cpu"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}] * 3, request_id="r-1")
    assert cpu.store.get_job(job)["state"] == "pending"
    queued = _pop(cpu, settings.host_cpu_queue())
    assert [(t, a[:2]) for t, a, _ in queued] == [("cuzk.synthesize", [job, i]) for i in range(3)]
    # idempotent on the request id: the same job, nothing queued again
    assert pipeline.submit_job(cpu, "mulchain", [{"input": _input()}] * 3, request_id="r-1") == job
    assert _pop(cpu, settings.host_cpu_queue()) == []


def test_submit_refuses_bad_input_without_creating_or_queueing_anything(stack):
    from cuzk_tasks.errors import CuzkError

    cpu, settings = stack["cpu"], stack["settings"]
    with pytest.raises(CuzkError, match="^circuit: unknown circuit 'no_such_circuit'"):
        pipeline.submit_job(cpu, "no_such_circuit", [{"input": _input()}], job_id="refused-1")
    big = {"input": {"a": "1" * (settings.max_inline_input_bytes + 1)}}
    with pytest.raises(CuzkError, match=r"^partition 1: input is \d+ bytes, over the inline limit"):
        pipeline.submit_job(cpu, "mulchain", [{"input": _input()}, big], job_id="refused-2")
    for refused in ("refused-1", "refused-2"):
        assert cpu.store.get_job(refused) is None
    assert _pop(cpu, settings.host_cpu_queue()) == []


def test_synthesize_writes_the_witness_and_routes_the_partition_to_the_device(stack):
    cpu, settings = stack["cpu"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    (_, args, kwargs), = _pop(cpu, settings.host_cpu_queue())
    witness_ref = _synthesize(cpu, args, kwargs)
    part = cpu.store.get_partition(job, 0)
    assert part["state"] == "synth_done" and part["worker"] == stack["device_id"]
    assert pathlib.Path(witness_ref).read_bytes()[:4] == b"wtns"
    (task, args, kwargs), = _pop(cpu, settings.device_queue(0))
    assert task == "cuzk.prove" and args == [job, 0, 0, "mulchain", witness_ref]
    # a second delivery of the same synthesize is a stale no-op
    assert pipeline.synthesize(cpu, PartitionRun(job, 0, 0, "mulchain", 5)) is None
    assert _pop(cpu, settings.device_queue(0)) == []


def _envelopes(ctx, queue):
    """The envelopes (headers and decoded body) waiting on ``queue``, oldest first; removed."""
    out = []
    for key in queues.queue_keys(queue):
        while (raw := ctx.store.redis.rpop(key)) is not None:
            envelope = json.loads(raw)
            envelope["decoded"] = json.loads(base64.b64decode(envelope["body"]))
            out.append(envelope)
    return out


def test_a_small_inline_input_rides_in_its_synthesize_message_but_not_in_its_log_form(stack):
    """The first job_window synthesize messages carry their partition's input (at most
    CARRIED_INPUT_BYTES) as kwarg inline_input, which their log form (kwargsrepr: Celery's
    logs, Flower) leaves out; held messages, big inputs and input_refs carry none."""
    from cuzk_tasks.settings import defaults

    cpu, settings = stack["cpu"], stack["settings"]
    window = settings.job_window
    big = {"a": "1" * defaults.CARRIED_INPUT_BYTES, "b": "11"}
    job = pipeline.submit_job(cpu, "mulchain", [{"input": big}] + [{"input": _input()}] *
                              (window + 1))
    sent = _envelopes(cpu, settings.host_cpu_queue())
    assert len(sent) == window
    stored = [cpu.store.get_partition(job, i)["input"] for i in range(window)]
    carried = [e["decoded"][1].get("inline_input") for e in sent]
    assert carried[0] is None and len(stored[0]) > defaults.CARRIED_INPUT_BYTES
    assert carried[1:] == stored[1:] and json.loads(carried[1]) == _input()
    for e in sent:
        assert "inline_input" not in e["headers"]["kwargsrepr"]
        assert "circuit" in e["headers"]["kwargsrepr"]
    held = cpu.store.redis.lrange(cpu.store.keys.held(job), 0, -1)
    assert len(held) == 2 and all("inline_input" not in m for m in held), held
    assert cpu.store.cancel_job(job)


def test_synthesize_computes_the_carried_input_while_synth_begin_is_on_the_wire(stack,
                                                                               monkeypatch):
    """With the input in the message, synth_begin has already run (the partition is
    synthesizing, seen from another connection) when the witness is computed; the witness is
    that of the input, and the partition is routed as always."""
    from cuzk_tasks.groth16.witness import WitnessCalculator

    cpu, settings = stack["cpu"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    (_, args, kwargs), = _pop(cpu, settings.host_cpu_queue())
    assert kwargs["inline_input"]
    real, seen = WitnessCalculator.calculate, []

    def watched(self, *a, **kw):
        import redis
        other = redis.Redis.from_url(settings.redis_url, decode_responses=True)
        deadline = time.monotonic() + 5  # the step runs as soon as Redis reads it
        while other.hget(cpu.store.keys.part(job, 0), "state") != "synthesizing" and \
                time.monotonic() < deadline:
            time.sleep(0.001)
        seen.append(other.hget(cpu.store.keys.part(job, 0), "state"))
        return real(self, *a, **kw)

    monkeypatch.setattr(WitnessCalculator, "calculate", watched)
    witness_ref = _synthesize(cpu, args, kwargs)
    assert seen == ["synthesizing"]
    assert cpu.store.get_partition(job, 0)["state"] == "synth_done"
    expected = (FIX / "mulchain" / "witness.wtns").read_bytes()
    assert pathlib.Path(witness_ref).read_bytes() == expected
    (task, _, _), = _pop(cpu, settings.device_queue(0))
    assert task == "cuzk.prove"


def test_a_carried_input_that_is_not_the_stored_one_is_never_used(stack):
    """A synthesize message whose inline_input differs from the partition's stored input (not
    a message of ours) gets the witness of the stored input."""
    cpu, settings = stack["cpu"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    (_, args, kwargs), = _pop(cpu, settings.host_cpu_queue())
    forged = dict(_input())
    forged[next(iter(forged))] = "5"
    assert forged != _input()
    kwargs["inline_input"] = json.dumps(forged)
    witness_ref = _synthesize(cpu, args, kwargs)
    assert pathlib.Path(witness_ref).read_bytes() == \
        (FIX / "mulchain" / "witness.wtns").read_bytes()


def test_a_bad_carried_input_fails_its_job_only_once_synth_begin_accepted_it(stack):
    """The witness of a carried input fails (malformed JSON): the job fails naming it -- but a
    run that synth_begin rejects (its job cancelled) records nothing and writes nothing."""
    cpu, settings = stack["cpu"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}] * 2)
    (_, args0, kwargs0), (_, args1, kwargs1) = _pop(cpu, settings.host_cpu_queue())
    cpu.store.redis.hset(cpu.store.keys.part(job, 0), "input", "{not json")
    kwargs0["inline_input"] = "{not json"
    assert _synthesize(cpu, args0, kwargs0) is None
    assert "input.json is malformed: invalid JSON" in cpu.store.get_job(job)["error"]

    other = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    (_, args, kwargs), = _pop(cpu, settings.host_cpu_queue())
    assert cpu.store.cancel_job(other)
    kwargs["inline_input"] = "{not json"
    assert _synthesize(cpu, args, kwargs) is None
    assert cpu.store.get_job(other)["state"] == "cancelled"
    assert "malformed" not in (cpu.store.get_job(other).get("error") or "")
    assert not (pathlib.Path(settings.spool_dir) / other).exists()


def test_a_redelivered_prove_reads_prove_begin_before_its_compute(stack, monkeypatch):
    """A prove the broker put back (its process died, perhaps in this very compute) reads
    prove_begin's reply before computing: a refused delivery never runs the compute, so a
    poison message ends at max_deliveries instead of killing its process for ever.  A first
    delivery computes while prove_begin is on the wire, its result dropped when refused."""
    from cuzk_tasks.pipeline.provers import Groth16Prover

    cpu, device = stack["cpu"], stack["device"]
    job, args, kwargs = _prove_message(stack)
    computed = []
    real = Groth16Prover.prove_start

    def counted(self, *a, **kw):
        computed.append(a)
        return real(self, *a, **kw)

    monkeypatch.setattr(Groth16Prover, "prove_start", counted)
    assert cpu.store.cancel_job(job)
    _, idx, attempt, circuit, witness_ref = args
    run = PartitionRun(job, idx, attempt, circuit, kwargs["priority"])
    assert pipeline.prove(device, run, witness_ref, kwargs["finalize_queue"],
                          redelivered=True) is None
    assert computed == []
    assert pipeline.prove(device, run, witness_ref, kwargs["finalize_queue"]) is None
    assert len(computed) == 1
    assert cpu.store.get_partition(job, 0)["state"] == "cancelled"


def test_prove_then_finalize_make_a_valid_proof_and_free_the_device(stack):
    from cuzk_tasks.groth16 import verify

    cpu, device, settings = stack["cpu"], stack["device"], stack["settings"]
    job, args, kwargs = _prove_message(stack)
    assert _prove(device, args, kwargs) is None  # finalize was queued instead
    assert cpu.store.get_partition(job, 0)["state"] == "finalizing"
    assert cpu.store.get_worker(stack["device_id"])["state"] == "idle"
    # nothing else is routed to the device: it published finalize itself, not via the relay
    assert cpu.store.take_relayed(timeout_s=0, limit=10) == [] and cpu.store.outbox_entries() == {}
    (task, args, kwargs), = _pop(cpu, settings.host_cpu_queue())
    assert task == "cuzk.finalize" and args[0]["job"] == job and args[0]["backend"] == "cpu"
    pipeline.finalize(cpu, *args)
    assert cpu.store.get_job(job)["state"] == "done"
    assert cpu.store.get_job(job)["curve"] == "bn128"  # recorded by synth_end from the zkey
    result = cpu.store.get_result(job)
    vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    (proof,) = result["proofs"]
    assert verify(vk, proof["public"], proof["proof"])
    # the same finalize again (a redelivery): no second completion
    before = cpu.store.snapshot()["counters"]
    pipeline.finalize(cpu, *args)
    assert cpu.store.snapshot()["counters"] == before


def test_a_stale_prove_does_not_touch_the_device(stack):
    cpu, device, settings = stack["cpu"], stack["device"], stack["settings"]
    job, args, kwargs = _prove_message(stack)
    stale = list(args)
    stale[2] = 7  # an attempt the partition never had
    assert _prove(device, stale, kwargs) is None
    assert cpu.store.get_partition(job, 0)["state"] == "synth_done"
    assert cpu.store.get_worker(stack["device_id"])["state"] == "idle"
    assert _pop(cpu, settings.host_cpu_queue()) == []


def test_a_rejected_prove_drops_what_its_compute_gave_or_raised(stack, monkeypatch):
    """prove_begin's reply is read after the compute (StateStore.send_prove_begin): a run it
    rejects -- here a stale attempt -- leaves no trace of its compute, even one that failed."""
    from cuzk_tasks.errors import CuzkError

    cpu, device, settings = stack["cpu"], stack["device"], stack["settings"]
    job, args, kwargs = _prove_message(stack)
    computed = []

    def broken(circuit, witness_path):
        computed.append(witness_path)
        raise CuzkError("bad witness")

    monkeypatch.setattr(device.prover, "prove_start", broken)
    stale = list(args)
    stale[2] = 7  # an attempt the partition never had
    assert _prove(device, stale, kwargs) is None
    assert computed  # it did run, beside prove_begin ...
    part = cpu.store.get_partition(job, 0)  # ... and counted for nothing
    assert part["state"] == "synth_done" and not part.get("error")
    assert cpu.store.get_job(job)["state"] == "running"
    assert cpu.store.get_worker(stack["device_id"])["state"] == "idle"
    assert _pop(cpu, settings.host_cpu_queue()) == []
    monkeypatch.undo()
    assert _prove(device, args, kwargs) is None  # the real message still proves
    assert cpu.store.get_partition(job, 0)["state"] == "finalizing"


def _queued(ctx, queue):
    """How many messages wait on ``queue`` (all its priority lists); none removed."""
    return sum(ctx.store.redis.llen(key) for key in queues.queue_keys(queue))


def _watch_prove_end(ctx, monkeypatch):
    """Record each prove_end of ``ctx``'s store, waited for (``prove_end``) or sent unread
    (``send_prove_end``), as (how, message, finalizes queued on the host's CPU queue,
    outbox entries) at the moment it is called."""
    calls = []
    cpu_queue = ctx.settings.host_cpu_queue()

    def watch(how):
        real = getattr(ctx.store, how)

        def call(worker_id, token, run, prove_ms, message=None):
            calls.append((how, message, _queued(ctx, cpu_queue), ctx.store.outbox_entries()))
            return real(worker_id, token, run, prove_ms, message=message)
        monkeypatch.setattr(ctx.store, how, call)

    watch("prove_end")
    watch("send_prove_end")
    return calls


def test_a_lone_partitions_prove_end_goes_first_and_its_finalize_out_at_once(stack,
                                                                            monkeypatch):
    """Nothing else routed to the device at prove_begin: prove sends prove_end (without the
    finalize) and then publishes the finalize itself, with no outbox entry (a lone partition
    skips the relay).  With a partition routed behind it, the finalize goes through
    prove_end's outbox (the device's next prove waits for no publish).  Each prove_end is
    sent unread, its reply read after the next run's compute."""
    cpu, device, settings = stack["cpu"], stack["device"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}] * 2)
    for _, args, kwargs in _pop(cpu, settings.host_cpu_queue()):
        _synthesize(cpu, args, kwargs)
    proves = _pop(cpu, settings.device_queue(0))
    assert len(proves) == 2  # both routed to the one device
    calls = _watch_prove_end(device, monkeypatch)
    handed_on = []
    for _, args, kwargs in proves:
        _prove(device, args, kwargs)
        handed_on.append(device.handed_on_end)
    (first_how, first_message, first_queued, first_outbox), \
        (lone_how, lone_message, lone_queued, lone_outbox) = calls
    assert first_how == lone_how == "send_prove_end"
    assert None not in handed_on and handed_on[0] is not handed_on[1]  # the first one read
    assert first_message is not None and first_queued == 0  # prove_end's, for the relay
    assert lone_message is None and lone_queued == 0 and len(lone_outbox) == 1  # end first
    (relayed_id, relayed), = cpu.store.take_relayed(timeout_s=0, limit=10)
    assert list(cpu.store.outbox_entries()) == [relayed_id]  # only the relayed one is kept
    (task, args, _), = _pop(cpu, settings.host_cpu_queue())  # the lone one's, published
    assert task == "cuzk.finalize"
    assert cpu.store.get_partition(job, args[0]["idx"])["state"] == "finalizing"
    for started in (json.loads(relayed)["args"][0], args[0]):
        pipeline.finalize(cpu, started)
    assert cpu.store.get_job(job)["state"] == "done"
    assert cpu.store.get_worker(stack["device_id"])["state"] == "idle"


def test_a_prove_end_sent_unread_takes_effect_and_relays_its_finalize(stack):
    """The prove_end a device sends unread frees the device and advances the partition
    without anyone reading its reply, and its finalize goes to the relay even when, by then,
    nothing is routed to the device any more (the partition behind it was cancelled during
    the run): a reply read late must not carry a message to publish."""
    cpu, device, settings = stack["cpu"], stack["device"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    behind = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    for _, args, kwargs in _pop(cpu, settings.host_cpu_queue()):
        _synthesize(cpu, args, kwargs)
    proves = _pop(cpu, settings.device_queue(0))
    assert len(proves) == 2
    real_prove_start = device.prover.prove_start

    def prove_start(*a):
        assert cpu.store.cancel_job(behind)  # leaves the device's routed set meanwhile
        return real_prove_start(*a)

    device.prover.prove_start = prove_start
    try:
        _prove(device, *proves[0][1:])
    finally:
        device.prover.prove_start = real_prove_start
    assert device.handed_on_end is not None  # sent, its reply not read
    assert cpu.store.get_worker(stack["device_id"])["state"] == "idle"
    assert cpu.store.get_partition(job, 0)["state"] == "finalizing"
    assert _pop(cpu, settings.host_cpu_queue()) == []  # not published by the device
    (_, relayed), = cpu.store.take_relayed(timeout_s=0, limit=10)
    pipeline.finalize(cpu, json.loads(relayed)["args"][0])
    assert cpu.store.get_job(job)["state"] == "done"


def test_a_lone_finalize_the_broker_cannot_take_goes_into_the_outbox(stack, monkeypatch):
    """The lone run's prove_end went first; when its own publish of the finalize fails (the
    broker away), the finalize is recorded in the outbox (finalize_due), for the relay, and
    the job completes from it.  One proof, a valid one."""
    from cuzk_tasks.groth16 import verify

    cpu, device, settings = stack["cpu"], stack["device"], stack["settings"]
    job, args, kwargs = _prove_message(stack)
    monkeypatch.setattr(device.store, "publish_now", lambda message: False)
    _prove(device, args, kwargs)
    assert device.handed_on_end is None  # its reply was read: finalize_due ran after it
    assert cpu.store.get_partition(job, 0)["state"] == "finalizing"
    assert cpu.store.get_worker(stack["device_id"])["state"] == "idle"
    assert _pop(cpu, settings.host_cpu_queue()) == []
    (relayed_id, relayed), = cpu.store.take_relayed(timeout_s=0, limit=10)
    assert list(cpu.store.outbox_entries()) == [relayed_id]
    assert pipeline.finalize(cpu, json.loads(relayed)["args"][0])["job_complete"]
    (proof,) = cpu.store.get_result(job)["proofs"]
    vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    assert verify(vk, proof["public"], proof["proof"])


def _finalize_message(stack):
    """A job proved on the device up to its queued finalize: (job id, finalize's args)."""
    cpu, device, settings = stack["cpu"], stack["device"], stack["settings"]
    job, args, kwargs = _prove_message(stack)
    _prove(device, args, kwargs)  # nothing else routed to the device: it publishes finalize
    (task, args, _), = _pop(cpu, settings.host_cpu_queue())
    assert task == "cuzk.finalize"
    return job, args


def _count_tails(ctx, monkeypatch):
    ran = []
    real = ctx.prover.prove_finish
    monkeypatch.setattr(ctx.prover, "prove_finish", lambda *a: ran.append(1) or real(*a))
    return ran


def test_a_finalize_that_waited_looks_first_and_skips_a_cancelled_partition(stack, monkeypatch):
    from cuzk_tasks.settings import defaults

    cpu = stack["cpu"]
    job, (started,) = _finalize_message(stack)
    assert cpu.store.cancel_job(job)
    ran = _count_tails(cpu, monkeypatch)
    started["sent_at"] -= defaults.FINALIZE_RECHECK_AFTER_S + 1  # it waited in the queue
    assert pipeline.finalize(cpu, started) is None
    assert ran == []  # no CPU tail for a cancelled partition
    assert cpu.store.get_partition(job, 0)["state"] == "cancelled"


def test_a_fresh_finalize_goes_straight_to_work_and_finalize_end_still_guards(stack, monkeypatch):
    cpu = stack["cpu"]
    job, (started,) = _finalize_message(stack)
    assert cpu.store.cancel_job(job)  # within the recheck window: the tail runs ...
    ran = _count_tails(cpu, monkeypatch)
    before = cpu.store.snapshot()["counters"]
    assert pipeline.finalize(cpu, started) is None
    assert ran == [1]
    # ... and finalize_end refuses it: no proof stored, nothing counted
    assert cpu.store.get_partition(job, 0)["state"] == "cancelled"
    assert not cpu.store.get_partition(job, 0).get("proof")
    assert cpu.store.snapshot()["counters"] == before


def _device_result(**fields):
    from cuzk_tasks.state import DeviceResult, PartitionRun

    return DeviceResult(PartitionRun("j", 0, 0, "mulchain", 5), witness_ref="/w", worker="d",
                        token="t", backend="cpu", partial=None, **fields)


def test_whether_finalize_looks_first():
    from cuzk_tasks.pipeline.finalize import may_be_stale

    now = 1_000_000.0
    assert not may_be_stale(_device_result(sent_at=now - 0.01), now, 1.0)
    assert may_be_stale(_device_result(sent_at=now - 1.5), now, 1.0)  # waited
    assert may_be_stale(_device_result(sent_at=now, deadline_at=now + 0.5), now, 1.0)  # near
    assert not may_be_stale(_device_result(sent_at=now, deadline_at=now + 60), now, 1.0)
    assert may_be_stale(_device_result(sent_at=now, deadline_at=now - 1), now, 1.0)  # passed


def test_a_finalize_message_without_a_field_is_an_error_not_a_default():
    """Every field finalize reads is in every message prove sends: one missing is
    refused by name before anything runs (no context is needed to see it); so is one of the
    wrong type."""
    from cuzk_tasks.state.run import FINALIZE_FIELDS

    started = {name: None for name in FINALIZE_FIELDS if name != "sent_at"}
    with pytest.raises(ValueError, match=r"without sent_at \("):
        pipeline.finalize(None, started)
    started = _device_result(sent_at=1.0).to_json()
    started["idx"] = "zero"
    with pytest.raises(ValueError, match=r"finalize message: idx must be a non-negative int"):
        pipeline.finalize(None, started)


def test_out_of_memory_in_synthesize_names_its_cause_not_internal_error(stack, monkeypatch):
    """issue 24: a MemoryError while computing the witness fails the job with "out of memory"
    and the circuit, not "internal error: MemoryError: "."""
    from cuzk_tasks.groth16.witness import WitnessCalculator

    cpu = stack["cpu"]

    def exhausted(self, inputs, where="<input>", time_limit_s=None):
        raise MemoryError()

    monkeypatch.setattr(WitnessCalculator, "calculate", exhausted)
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    assert pipeline.synthesize(cpu, PartitionRun(job, 0, 0, "mulchain", 5)) is None
    error = cpu.store.get_job(job)["error"]
    assert error == ("partition 0: circuit 'mulchain': out of memory computing the witness of "
                     "partition 0 (<circuit 'mulchain' wasm>)"), error


def test_a_synthesize_whose_job_ended_meanwhile_leaves_no_witness(stack, monkeypatch):
    """synth_end refused (the job was cancelled while the witness was computed): the witness
    just written is deleted at once."""
    from cuzk_tasks.groth16.witness import WitnessCalculator

    cpu, settings = stack["cpu"], stack["settings"]
    job = pipeline.submit_job(cpu, "mulchain", [{"input": _input()}])
    real = WitnessCalculator.calculate

    def cancelled_meanwhile(self, *args, **kwargs):
        values = real(self, *args, **kwargs)
        assert cpu.store.cancel_job(job)
        return values

    monkeypatch.setattr(WitnessCalculator, "calculate", cancelled_meanwhile)
    assert pipeline.synthesize(cpu, PartitionRun(job, 0, 0, "mulchain", 5)) is None
    assert not (pathlib.Path(settings.spool_dir) / job / "0.wtns").exists()
