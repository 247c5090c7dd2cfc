"""Forged and replayed stage messages, sent as a hostile caller would (issue 48), on a real
stack: redis-server, one CPU-backend device worker, one CPU worker.

The caller has what every caller has today: the broker (it may push any message on any
queue) and the Redis password (it reads every job, partition and queued message, seals
included), plus the library and the circuits' public files.  Each forged message is sent so
that it runs *before* the real one (a backlog on the device, priority 0), as in the red-team
runs that gave a victim's job a proof of the attacker's statement.  In each test the victim's
job completes with its own proofs -- they verify and their public signals are the ones it
submitted -- and every forged message is refused and recorded (``rejected_requests``, the
``requests_rejected:<task>`` counters behind ``/metrics``).

:data:`FORGED` names, for every internal task the workers register, the tests that forge it:
:func:`test_every_internal_task_has_a_forged_message_test` fails for a new one without.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
from support import instruments
from support.processes import Cluster, write_circuits_toml

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "forgehost"
HB_INTERVAL, HB_TTL = 0.25, 1.5
SLOW_PROVE_MS = 2000  # the backlog's prove (CUZK_TEST_PROVE_DELAY_MS, circuit slow_test)
VICTIM_INPUT = {"a": "3", "b": "11"}   # tests/fixtures/mulchain/input.json
EVIL_INPUT = {"a": "3", "b": "7"}

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from support.redis_server import RedisServer

    from cuzk_tasks.settings.config import load_settings

    base = tmp_path_factory.mktemp("forge")
    inputs = base / "inputs"  # a submitter-writable input root, as in the red-team runs
    inputs.mkdir()
    server = RedisServer()
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(base / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain"),
            "poseidon": ("test-poseidon", FIX / "poseidon"),
            "slow_test": ("test-slow", FIX / "mulchain")})),
        "CUZK_REDIS_URL": server.url,
        "CUZK_PREFIX": "forge",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL),
        "CUZK_HEARTBEAT_TTL_S": str(HB_TTL),
        "CUZK_SPOOL_DIR": str(base / "spool"),
        "CUZK_ALLOWED_INPUT_ROOTS": f"{FIX}:{inputs}",
        "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),  # the TEST INSTRUMENT below
        "CUZK_TEST_PROVE_DELAY_MS": f"slow_test={SLOW_PROVE_MS}",
    })
    settings = load_settings(env=env)
    c = Cluster(base, env, settings, ROOT)
    c.inputs = inputs
    c.redis_server = server
    try:
        c.start_stack()
        yield c
    finally:
        c.stop_all()
        server.stop()


def _caller(c):
    """A plain Celery app on the broker: what any caller can send with."""
    from celery import Celery

    return Celery("caller", broker=c.settings.broker_url, set_as_current=False)


def _witness(c, name, circuit_dir, inputs) -> str:
    """The attacker's witness for ``inputs``, written inside a submitter's input root."""
    path = c.inputs / f"{name}.wtns"
    if not path.exists():
        (c.inputs / f"{name}.json").write_text(json.dumps(inputs))
        subprocess.run([sys.executable, "-m", "cuzk_tasks", "witness",
                        str(FIX / circuit_dir / "circuit.wasm"), str(c.inputs / f"{name}.json"),
                        str(path)], check=True, cwd=ROOT, capture_output=True, timeout=120)
    return str(path)


def _backlog(c, partitions=2) -> str:
    """A job that keeps the device busy (SLOW_PROVE_MS a partition)."""
    return c.client.submit("slow_test", [{"witness_ref": str(FIX / "mulchain" / "witness.wtns")}]
                           * partitions, priority=5)


def _wait_state(c, job, idx, states, timeout=30.0):
    deadline = time.monotonic() + timeout
    while (state := c.store.partition_fields(job, idx, "state")[0]) not in states:
        assert time.monotonic() < deadline, f"partition {job}/{idx} still {state}\n{c.logs()}"
        time.sleep(0.01)


def _rejected_since(c, seen) -> list:
    return [r for r in c.store.rejected_requests() if r["task_id"] not in seen]


def _await_refused(c, seen, task, n, timeout=30.0) -> list:
    deadline = time.monotonic() + timeout
    while len(refused := [r for r in _rejected_since(c, seen) if r["task"] == task]) < n:
        assert time.monotonic() < deadline, f"{task}: {refused}\n{c.logs()}"
        time.sleep(0.05)
    return refused


def _assert_own_proofs(c, job, n=1, circuit_dir="mulchain"):
    """The victim's job ended done with its own proofs: each verifies and its public signals
    are those of the victim's input (the fixture's public.json)."""
    from cuzk_tasks.groth16 import verify

    result = c.client.wait(job, timeout=90)
    vk = json.loads((FIX / circuit_dir / "verification_key.json").read_text())
    public = json.loads((FIX / circuit_dir / "public.json").read_text())
    assert len(result["proofs"]) == n
    for item in result["proofs"]:
        assert item["public"] == public, (item["public"], public)
        assert verify(vk, item["public"], item["proof"])
    return result


def _queued_prove(c, queue, job, timeout=10.0):
    """``(args, kwargs)`` of the service's own prove of ``job`` read off ``queue``, as any
    caller can (the forged ones beside it carry no seal); None when not seen in time."""
    from cuzk_tasks.service.queues import queue_keys
    from support.outbox import decode

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for key in queue_keys(queue):
            for raw in c.store.redis.lrange(key, 0, -1):
                task, args, kwargs, _ = decode(raw)
                if task == "cuzk.prove" and args[0] == job and kwargs.get("seal"):
                    return args, kwargs
        time.sleep(0.01)
    return None


def test_forged_proves_never_prove_the_attackers_statement(stack):
    """Before the real prove of the victim's partition: a prove naming the attacker's witness
    (b = 7; the victim submitted b = 11), one naming another circuit with that circuit's
    witness, and the victim's real message read off the queue with its witness swapped (its
    seal kept).  All three refused; the victim's proof is its own.  The real message, sent
    again after the job is done, changes nothing (a replay is a stale no-op)."""
    c = stack
    evil = _witness(c, "evil", "mulchain", EVIL_INPUT)
    seen = {r["task_id"] for r in c.store.rejected_requests()}
    backlog = _backlog(c)
    victim = c.client.submit("mulchain", [{"input": VICTIM_INPUT}], priority=5)
    _wait_state(c, victim, 0, {"synth_done"})  # its prove is queued behind the backlog
    device_queue = c.settings.device_queue(0)
    app = _caller(c)
    forged_kwargs = {"finalize_queue": c.settings.host_cpu_queue(), "priority": 0}
    sent = [
        app.send_task("cuzk.prove", args=[victim, 0, 0, "mulchain", evil], kwargs=forged_kwargs,
                      queue=device_queue, priority=0),
        app.send_task("cuzk.prove", args=[victim, 0, 0, "poseidon",
                                          str(FIX / "poseidon" / "witness.wtns")],
                      kwargs=forged_kwargs, queue=device_queue, priority=0),
    ]
    real = _queued_prove(c, device_queue, victim)
    if real is not None:  # its seal, on the attacker's witness
        sent.append(app.send_task("cuzk.prove", args=[victim, 0, 0, "mulchain", evil],
                                  kwargs=dict(real[1], priority=0), queue=device_queue,
                                  priority=0))
    result = _assert_own_proofs(c, victim)
    assert real is not None, "the victim's prove message was never seen queued\n" + c.logs()
    args, kwargs = real
    assert kwargs.get("seal"), kwargs
    refused = _await_refused(c, seen, "cuzk.prove", 3)
    assert {r["task_id"] for r in refused} == {s.id for s in sent}
    assert all("seal" in r["reason"] for r in refused), refused
    assert all(evil not in r["reason"] for r in refused)  # never echoes a field
    c.client.wait(backlog, timeout=60)
    # replayed: the real message, seal and all, once its partition is done
    replay = app.send_task("cuzk.prove", args=args, kwargs=kwargs, queue=device_queue, priority=0)
    _await_consumed(c, device_queue, replay.id)
    assert c.client.wait(victim, timeout=5) == result
    assert c.store.get_partition(victim, 0)["state"] == "done"
    assert len(_rejected_since(c, seen)) == 3  # a replay is stale, not forged
    # counted for /metrics (cuzk_requests_refused{task="cuzk.prove"})
    from cuzk_tasks.state import reads

    assert reads.snapshot(c.store)["counters"]["requests_rejected:cuzk.prove"] >= 3


def _await_consumed(c, queue, task_id, timeout=20.0):
    """Until message ``task_id`` is neither queued nor unacked (its worker ran it), then a
    moment more for its effects."""
    from cuzk_tasks.service.queues import queue_keys

    deadline = time.monotonic() + timeout
    while True:
        waiting = [json.loads(raw)["headers"]["id"] for key in queue_keys(queue)
                   for raw in c.store.redis.lrange(key, 0, -1)]
        waiting += [json.loads(raw)[0]["headers"]["id"] for raw in c.store.redis.hvals("unacked")]
        if task_id not in waiting:
            break
        assert time.monotonic() < deadline, c.logs()
        time.sleep(0.05)
    time.sleep(0.5)


def _forged_finalize(c, victim, circuit, witness_ref, token, partial):
    from cuzk_tasks.state import DeviceResult, PartitionRun

    run = PartitionRun(victim, 0, 0, circuit, 5)
    return DeviceResult(run, witness_ref=witness_ref, worker=f"{HOST}:dev0", token=token,
                        backend="cpu", partial=partial, prove_ms=1.0, deadline_at=None,
                        sent_at=time.time()).to_json()


def test_forged_finalizes_neither_fail_nor_finish_the_victims_job(stack):
    """While the victim's partition is proving: a finalize naming ``/etc/passwd`` with a
    made-up token (it once failed the whole job, "outside the allowed input roots"), and a
    finalize with a partial the attacker computed for its own witness and the partition's
    real token, read from Redis (it once ended the job done with the attacker's proof).
    Both refused; the job completes with its own proof."""
    from cuzk_tasks import pipeline

    c = stack
    evil = _witness(c, "evil", "mulchain", EVIL_INPUT)
    attacker = pipeline.Context(None, c.settings, worker_id="attacker")
    partial = attacker.prover.prove_start("slow_test", evil)  # the public zkey: anyone can
    seen = {r["task_id"] for r in c.store.rejected_requests()}
    victim = c.client.submit("slow_test", [{"input": VICTIM_INPUT}], priority=5)
    _wait_state(c, victim, 0, {"proving"})
    token = c.store.partition_fields(victim, 0, "token")[0]
    assert token, "the partition's token is readable"
    queue = c.settings.host_cpu_queue()
    app = _caller(c)
    sent = [app.send_task("cuzk.finalize", args=[started], queue=queue, priority=0)
            for started in (
                _forged_finalize(c, victim, "slow_test", "/etc/passwd", "made-up", partial),
                _forged_finalize(c, victim, "slow_test", evil, token, partial))]
    _assert_own_proofs(c, victim)
    refused = _await_refused(c, seen, "cuzk.finalize", 2)
    assert {r["task_id"] for r in refused} == {s.id for s in sent}
    assert all("root:" not in r["reason"] for r in refused)
    # listed for the operator: cuzk-tasks status names each (ops/runbook.md#refused-messages)
    status = subprocess.run([sys.executable, "-m", "cuzk_tasks", "status"], cwd=ROOT, env=c.env,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    listed = status.stdout.partition("REFUSED MESSAGES")[2]
    assert all(s.id in listed for s in sent), status.stdout
    assert "root:" not in status.stdout


def test_a_forged_synthesize_is_refused_and_a_replayed_one_changes_nothing(stack):
    """A job whose synthesize message waits in the outbox (its submitter published nothing:
    a sweeper sends it after OUTBOX_GRACE_S): a synthesize naming another circuit, sent
    first, is refused; the job proves.  Then the synthesize the service sealed for the
    partition's attempt 0, sent again once the partition is done, is a stale no-op."""
    from cuzk_tasks import pipeline
    from cuzk_tasks.service.messages import StageMessages
    from cuzk_tasks.state import PartitionRun

    c = stack
    seen = {r["task_id"] for r in c.store.rejected_requests()}
    quiet = pipeline.Context(None, c.settings, worker_id="quiet-submitter")  # no publisher
    victim = pipeline.submit_job(quiet, "mulchain", [{"input": VICTIM_INPUT}], priority=5)
    app = _caller(c)
    forged = app.send_task("cuzk.synthesize", args=[victim, 0],
                           kwargs={"circuit": "poseidon", "priority": 0},
                           queue=c.settings.cpu_queue, priority=0)
    result = _assert_own_proofs(c, victim)
    refused = _await_refused(c, seen, "cuzk.synthesize", 1)
    assert refused[0]["task_id"] == forged.id and "seal" in refused[0]["reason"]
    # the message the service seals for the partition's attempt 0, replayed (the seal is
    # the same whoever computes it with the deployment's key)
    entry = json.loads(StageMessages(c.settings).synthesize(
        PartitionRun(victim, 0, 0, "mulchain", 5), queue=c.settings.cpu_queue))
    replay = app.send_task("cuzk.synthesize", args=entry["args"], kwargs=entry["kwargs"],
                           queue=c.settings.cpu_queue, priority=0)
    _await_consumed(c, c.settings.cpu_queue, replay.id)
    assert c.store.get_partition(victim, 0)["state"] == "done"
    assert c.client.wait(victim, timeout=5) == result
    assert _rejected_since(c, seen) == refused  # stale, not forged: nothing more refused


def test_messages_of_an_earlier_attempt_change_nothing(stack):
    """The victim's partition is re-dispatched (attempt 0 -> 1, as the sweeper does when its
    device is lost) while its attempt-0 prove still waits on the device queue.  That prove,
    delivered late and sent again ahead of everything, is a stale no-op; so is a finalize of
    attempt 0 -- sealed with the deployment's key, carrying the attacker's partial and the
    partition's current token -- sent while attempt 1 proves.  The job completes with its
    own one proof, made by attempt 1, and nothing is recorded as refused: the seals are the
    service's, and the attempt guards alone turn these away."""
    from cuzk_tasks import pipeline
    from cuzk_tasks.service.messages import StageMessages
    from cuzk_tasks.state import DeviceResult, PartitionRun

    c = stack
    evil = _witness(c, "evil", "mulchain", EVIL_INPUT)
    attacker = pipeline.Context(None, c.settings, worker_id="attacker")
    partial = attacker.prover.prove_start("slow_test", evil)
    seen = {r["task_id"] for r in c.store.rejected_requests()}
    backlog = _backlog(c)
    victim = c.client.submit("slow_test", [{"input": VICTIM_INPUT}], priority=5)
    _wait_state(c, victim, 0, {"synth_done"})
    device_queue = c.settings.device_queue(0)
    old = _queued_prove(c, device_queue, victim)
    assert old is not None, "the victim's prove message was never seen queued\n" + c.logs()
    assert old[0][2] == 0, old[0]
    first = PartitionRun(victim, 0, 0, "slow_test", 5)
    worker, = c.store.partition_fields(victim, 0, "worker")
    assert c.store.redispatch(first, worker_id=worker)
    deadline = time.monotonic() + 30  # the sweeper routes attempt 1 again
    while c.store.partition_fields(victim, 0, "attempt", "worker") != [1, worker]:
        assert time.monotonic() < deadline, c.store.get_partition(victim, 0)
        time.sleep(0.02)
    app = _caller(c)
    replay = app.send_task("cuzk.prove", args=old[0], kwargs=old[1], queue=device_queue,
                           priority=0)
    _wait_state(c, victim, 0, {"proving"})  # attempt 1's: attempt 0 never began
    attempt, token = c.store.partition_fields(victim, 0, "attempt", "token")
    assert attempt == 1 and token, (attempt, token)
    entry = json.loads(StageMessages(c.settings).finalize(
        c.settings.host_cpu_queue(),
        DeviceResult(first, witness_ref=evil, worker=worker, token=token, backend="cpu",
                     partial=partial, prove_ms=1.0, deadline_at=None, sent_at=time.time())))
    late = app.send_task("cuzk.finalize", args=entry["args"], kwargs=entry["kwargs"],
                         queue=entry["queue"], priority=0)
    result = _assert_own_proofs(c, victim)
    _await_consumed(c, device_queue, replay.id)
    _await_consumed(c, entry["queue"], late.id)
    done = c.store.get_partition(victim, 0)
    assert done["state"] == "done" and done["attempt"] == 1, done
    assert c.client.wait(victim, timeout=5) == result
    assert _rejected_since(c, seen) == []  # stale, not forged
    # each was turned away by its attempt guard (not merely outrun by the real ones)
    device_log = (c.base / "dev0.log").read_text(errors="replace")
    assert device_log.count(f"prove {victim}/0 attempt 0 on {worker} rejected: stale") >= 2, \
        device_log[-3000:]
    cpu_log = (c.base / "cpu.log").read_text(errors="replace")
    assert f"finalize {victim}/0 attempt 0: finalize_end rejected" in cpu_log or \
        f"finalize {victim}/0 attempt 0: partition is" in cpu_log, cpu_log[-3000:]
    c.client.wait(backlog, timeout=60)


#: internal task -> the tests above that forge its messages
FORGED = {
    "cuzk.synthesize": [test_a_forged_synthesize_is_refused_and_a_replayed_one_changes_nothing],
    "cuzk.prove": [test_forged_proves_never_prove_the_attackers_statement,
                   test_messages_of_an_earlier_attempt_change_nothing],
    "cuzk.finalize": [test_forged_finalizes_neither_fail_nor_finish_the_victims_job,
                      test_messages_of_an_earlier_attempt_change_nothing],
}


def test_every_internal_task_has_a_forged_message_test():
    """Every task the workers register but the by-name requests (which callers send) is an
    internal one, whose messages the service alone may send: each needs a test above."""
    from cuzk_tasks.celery_app import create_app
    from cuzk_tasks.service.task_names import REQUEST_TASKS, STAGE_TASKS
    from cuzk_tasks.settings.config import load_settings

    app = create_app(load_settings(env={}))
    app.loader.import_default_modules()
    internal = {name for name in app.tasks if not name.startswith("celery.")} - set(REQUEST_TASKS)
    assert internal, sorted(app.tasks)
    missing = sorted(internal - set(FORGED))
    assert not missing, f"internal tasks without a forged-message test: {missing}"
    assert internal == set(STAGE_TASKS), "a task outside STAGE_TASKS is not sealed"
    for tests in FORGED.values():
        assert tests and all(t.__name__ in globals() for t in tests)
