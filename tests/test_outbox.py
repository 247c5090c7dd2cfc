"""The outbox: a step that makes a stage due records its message in the same Lua step;
Celery publishes it right after (cuzk_tasks/service/publisher.py), and a sweeper publishes what a
process that died in between left (docs/architecture.md, "The outbox").

Unit tests on both store backends with a recording publisher; then the static rule (no
module of ours builds or pushes a Celery message, or touches kombu's transport); then real
processes: a job whose creator died before publishing still completes, and the pipeline
runs with the broker and the state store in different Redis databases.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import time
import uuid

import pytest

from cuzk_tasks.settings import defaults
from cuzk_tasks.service import queues
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.errors import ConfigError, CuzkError
from cuzk_tasks.service.messages import StageMessages
from cuzk_tasks.state import PartitionRun
from support.outbox import Recorder

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def _messages():
    return StageMessages(load_settings(env={"CUZK_SHARED_SPOOL": "1"}))  # a bare store's mode


def _job(store, n=2, on_done=None, window=None):
    m = _messages()
    late = (on_done, m.on_done(on_done)) if on_done else None
    store.create_job("j", "c", "groth16", 5, None, [{"input": "{}"}] * n,
                     messages=[m.synthesize(PartitionRun("j", i, 0, "c", 5)) for i in range(n)],
                     on_done=late, window=window)


def test_a_steps_messages_are_published_then_deleted(store_factory, caplog):
    rec = Recorder()
    store = store_factory(publisher=rec)
    _job(store)
    # outbox_done deleted them in one clean step: a script error part-way (it once read one
    # argument past its own) deletes as much but logs "not cleared" on every publish
    assert not [r for r in caplog.records if "not cleared" in r.getMessage()]
    assert [(e["task"], e["args"], e["queue"], e["priority"]) for e in rec.sent] == [
        ("cuzk.synthesize", ["j", 0], "cuzk.cpu-stages", 5), ("cuzk.synthesize", ["j", 1], "cuzk.cpu-stages", 5)]
    kwargs = rec.sent[0]["kwargs"]
    assert {k: v for k, v in kwargs.items() if k != "seal"} == {"circuit": "c", "priority": 5}
    # sealed as built: the seal fits the message as the broker carries it
    assert _messages().seal.problem("cuzk.synthesize", rec.sent[0]["args"], kwargs) is None
    assert store.outbox_entries() == {}
    assert store.redis.zcard(store.keys.outbox_due()) == 0


def test_the_route_step_puts_the_chosen_queue_in_front(store_factory):
    rec = Recorder()
    store = store_factory(publisher=rec)
    _job(store, n=1)
    store.register_worker("h:dev0", "device", "h", device=0, queue="cuzk.dev.h.0")
    store.heartbeat("h:dev0", 30)
    assert store.synth_begin(PartitionRun("j", 0, 0))
    prove = _messages().prove(PartitionRun("j", 0, 0, "c", 3), "/w")
    end = store.synth_end(PartitionRun("j", 0, 0), "/w", 1.0, route_circuit="c", message=prove)
    assert end.routed.queue == "cuzk.dev.h.0"
    sent = rec.sent[-1]
    assert (sent["task"], sent["queue"], sent["priority"]) == ("cuzk.prove", "cuzk.dev.h.0", 3)
    assert sent["args"] == ["j", 0, 0, "c", "/w"] and sent["kwargs"]["finalize_queue"] == "cuzk.cpu-stages"


def test_on_done_gets_its_kwargs_in_the_step_that_ends_the_job(store_factory):
    rec = Recorder()
    store = store_factory(publisher=rec)
    _job(store, n=1, on_done={"task": "svc.done", "queue": "svc.q"})
    assert store.cancel_job("j", "no longer needed")
    sent = rec.sent[-1]
    assert (sent["task"], sent["queue"], sent["priority"]) == ("svc.done", "svc.q", 0)
    assert sent["kwargs"] == {"job_id": "j", "state": "cancelled", "error": "no longer needed"}
    assert sent["expires_s"] == float(defaults.ON_DONE_TTL_S)


def test_a_process_that_dies_before_publishing_leaves_them_to_the_sweeper(store_factory):
    dead = store_factory()  # publishes nothing: as if killed right after the step
    _job(dead)
    assert len(dead.outbox_entries()) == 2
    rec = Recorder()
    sweeper = dead.__class__(dead.redis, prefix=dead.prefix, publisher=rec)
    assert sweeper.publish_overdue(grace_s=60) == 0  # too young: their process may still send them
    assert sweeper.publish_overdue(grace_s=0) == 2
    assert sorted(e["args"][1] for e in rec.sent) == [0, 1]
    assert dead.outbox_entries() == {}
    assert sweeper.publish_overdue(grace_s=0) == 0


def test_a_claim_keeps_other_sweepers_off_until_the_grace_passes(store_factory):
    store = store_factory()
    _job(store, n=1)
    down = store.__class__(store.redis, prefix=store.prefix, publisher=Recorder(outage=True))
    assert down.publish_overdue(grace_s=0) == 1  # claimed; the broker is down: left in place
    assert len(store.outbox_entries()) == 1
    assert down.publish_overdue(grace_s=30) == 0  # re-scored by the claim: not due again yet
    assert down.publish_overdue(grace_s=0) == 1


def test_a_held_message_is_released_into_the_outbox_when_a_partition_ends(store_factory):
    rec = Recorder()
    store = store_factory(publisher=rec)
    _job(store, n=3, window=1)
    assert [e["args"][1] for e in rec.sent] == [0]
    assert store.fail_partition(PartitionRun("j", 0, 0),
                                "boom")  # the job fails: nothing more is released
    assert [e["args"][1] for e in rec.sent] == [0]


def test_no_module_builds_or_pushes_a_celery_message():
    """Celery publishes every message: nothing of ours imports kombu's transports or
    messaging internals, and no Lua script pushes onto a list outside the state store."""
    package = ROOT / "cuzk_tasks"
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert not name.startswith(("kombu.transport", "kombu.messaging",
                                            "celery.app.amqp")), f"{path}: imports {name}"
    pushes = re.compile(r"redis\.call\('(L|R)PUSH', *([^,]+),")
    for path in sorted((package / "state" / "scripts").glob("*.lua")):
        for _, key in pushes.findall(path.read_text()):
            assert key.strip().startswith("K."), f"{path.name}: pushes onto {key}"


@pytest.mark.parametrize("name", ["", "has space", 'quote"', "slash/", None])
def test_unusable_queue_names_are_refused(name):
    with pytest.raises(CuzkError, match="queue name"):
        queues.check_queue_name(name)


def test_config_refuses_a_cpu_queue_no_redis_list_can_name():
    with pytest.raises(ConfigError, match="cpu_queue"):
        load_settings(env={"CUZK_CPU_QUEUE": "cpu queue"})


def test_broker_is_state_redis_only_for_the_same_url():
    same = load_settings(env={"CUZK_REDIS_URL": "redis://h:1/0"})
    assert same.broker_is_state_redis
    other = load_settings(env={"CUZK_REDIS_URL": "redis://h:1/0", "CUZK_STATE_URL": "redis://h:1/1"})
    assert not other.broker_is_state_redis


def _service_env(tmp_path, broker_url, state_url):
    from support.processes import write_circuits_toml

    config = write_circuits_toml(tmp_path / "cuzk.toml", {"mulchain": ("test-mul", FIX / "mulchain")})
    return dict(os.environ, CUZK_CONFIG=str(config), CUZK_REDIS_URL=broker_url,
                CUZK_BROKER_URL=broker_url, CUZK_RESULT_BACKEND=broker_url,
                CUZK_STATE_URL=state_url, CUZK_PREFIX="ob" + uuid.uuid4().hex[:6],
                CUZK_HOSTNAME="obhost", CUZK_CPU_QUEUE="ob.cpu." + uuid.uuid4().hex[:6],
                CUZK_SPOOL_DIR=str(tmp_path / "spool"), CUZK_THREADS="1",
                CUZK_HEARTBEAT_INTERVAL_S="0.25", CUZK_HEARTBEAT_TTL_S="1.5",
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _run_workers(tmp_path, env):
    from support.processes import start_logged, worker_argv

    return [start_logged(worker_argv(*args), tmp_path / f"{name}.log", env, ROOT)
            for name, args in (("dev0", ["--device", "0", "--backend", "cpu"]),
                               ("cpu", ["--cpu", "--concurrency", "1"]))]


def _wait_for_device(client, tmp_path):
    # a device whose host has a live CPU worker: with host-affine stages a partition is
    # placed (and its synthesize message made due) only then
    deadline = time.monotonic() + 60
    while not client.store.devices_serving("mulchain"):
        assert time.monotonic() < deadline, (tmp_path / "dev0.log").read_text()[-2000:]
        time.sleep(0.1)


@pytest.mark.slow
def test_a_job_whose_creator_died_before_publishing_still_completes(redis_server_url, tmp_path):
    """The crash window of a transition-then-publish design: the job is created (its
    synthesize messages in the outbox) and the process dies before Celery sent them.  The
    job completes (the stage leases re-drive a pending partition no one holds after a TTL,
    here 1.5 s), and a CPU worker's sweeper publishes the entries once they are
    OUTBOX_GRACE_S old: stale no-ops by then, the job keeps one proof per partition."""
    from cuzk_tasks.client import Client
    from cuzk_tasks.state import StateStore
    from support.processes import stop_process_group

    env = _service_env(tmp_path, redis_server_url, redis_server_url)
    settings = load_settings(env=env)
    procs = _run_workers(tmp_path, env)
    try:
        client = Client(settings=settings)
        _wait_for_device(client, tmp_path)
        dead = StateStore.from_settings(settings)  # no publisher: it "dies" after the step
        m = StageMessages(settings)
        inputs = json.dumps(json.loads((FIX / "mulchain" / "input.json").read_text()))
        t0 = time.monotonic()
        job = uuid.uuid4().hex
        _, created = dead.create_job(job, "mulchain", "groth16", 5, None, [{"input": inputs}] * 2,
                                     messages=[m.synthesize(PartitionRun(job, i, 0, "mulchain", 5))
                                               for i in range(2)])
        assert created and len(dead.outbox_entries()) == 2
        result = client.wait(job, timeout=90)
        assert result["state"] == "done" and len(result["proofs"]) == 2
        deadline = t0 + defaults.OUTBOX_GRACE_S + 30
        while dead.outbox_entries():
            assert time.monotonic() < deadline, dead.outbox_entries()
            time.sleep(0.2)
        assert time.monotonic() - t0 >= defaults.OUTBOX_GRACE_S - 1  # the sweeper's, not ours
        overdue = [f for _, f in dead.redis.xrange(dead.keys.events())
                   if f["type"] == "outbox_overdue"]
        assert overdue and sum(int(f["entries"]) for f in overdue) == 2
        time.sleep(2)  # the two late messages ran: stale, nothing changed
        assert client.result(job) == result and client.status(job)["state"] == "done"
    finally:
        for proc in procs:
            stop_process_group(proc)


@pytest.mark.slow
def test_pipeline_with_broker_and_state_in_different_databases(redis_server_url, tmp_path):
    import redis

    from cuzk_tasks.client import Client
    from cuzk_tasks.groth16 import verify
    from support.processes import stop_process_group

    state_url = redis_server_url.rsplit("/", 1)[0] + "/3"
    env = _service_env(tmp_path, redis_server_url, state_url)
    settings = load_settings(env=env)
    assert not settings.broker_is_state_redis
    procs = _run_workers(tmp_path, env)
    try:
        client = Client(settings=settings)
        _wait_for_device(client, tmp_path)
        inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
        job = client.submit("mulchain", [{"input": inputs}] * 3)
        result = client.wait(job, timeout=90)
        vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
        assert len(result["proofs"]) == 3
        assert all(verify(vk, p["public"], p["proof"]) for p in result["proofs"])
        # the state lives only in the state database; the broker lists are drained
        assert redis.Redis.from_url(state_url).exists(client.store.keys.job(job))
        broker = redis.Redis.from_url(redis_server_url)
        assert not broker.exists(client.store.keys.job(job))
        for queue in (settings.cpu_queue, settings.device_queue(0)):
            assert sum(broker.llen(k) for k in queues.queue_keys(queue)) == 0
    finally:
        for proc in procs:
            stop_process_group(proc)


def test_a_relay_store_hands_its_messages_to_the_relay_which_publishes_them(store_factory):
    """A device's pool process publishes nothing itself (StateStore(relay=True)): the step
    that adds the entries puts them on the relay list, and a CPU worker's relay thread
    (publisher.OutboxRelay) publishes them in order, then deletes them from the outbox."""
    from cuzk_tasks.service.publisher import OutboxRelay

    never = Recorder()
    device = store_factory()
    device = device.__class__(device.redis, prefix=device.prefix, publisher=never, relay=True)
    _job(device, n=3)
    assert never.sent == [] and len(device.outbox_entries()) == 3
    assert device.redis.llen(device.keys.outbox_relay()) == 3
    rec = Recorder()
    relay = OutboxRelay(device, app=None, wait_s=0.1)
    relay.publisher = rec
    relay.step()  # the first as it comes, then the two queued behind it
    assert [e["args"][1] for e in rec.sent] == [0, 1, 2]
    assert device.outbox_entries() == {}
    relay.step()  # nothing more: waits wait_s and returns
    assert len(rec.sent) == 3


def test_the_relay_publishes_a_taken_item_only_after_its_yield(store_factory):
    """The relay lets the device that handed an item over start its next partition before
    Celery's publish takes a core (defaults.RELAY_YIELD_S): the publish comes no sooner than
    ``yield_s`` after the take."""
    from cuzk_tasks.service.publisher import OutboxRelay

    base = store_factory()
    device = base.__class__(base.redis, prefix=base.prefix, relay=True)
    _job(device, n=1)
    taken, published = [], []
    real_take = device.take_relayed

    def take(*args, **kwargs):
        got = real_take(*args, **kwargs)
        if got:
            taken.append(time.monotonic())
        return got

    class Timed(Recorder):
        def send(self, entries):
            published.append(time.monotonic())
            return super().send(entries)

    device.take_relayed = take
    relay = OutboxRelay(device, app=None, wait_s=0.1, yield_s=0.3)
    relay.publisher = rec = Timed()
    relay.step()
    assert len(rec.sent) == 1 and device.outbox_entries() == {}
    assert published[0] - taken[0] >= 0.3
    assert OutboxRelay(device, app=None).yield_s == defaults.RELAY_YIELD_S > 0


def test_the_relay_leaves_to_the_sweeper_what_was_handed_over_before_the_grace(store_factory):
    """An item older than OUTBOX_GRACE_S on the relay list is the sweeper's: the relay drops
    it unpublished, and the sweeper's claim publishes the entry."""
    from cuzk_tasks.service.publisher import OutboxRelay

    base = store_factory()
    device = base.__class__(base.redis, prefix=base.prefix, relay=True)
    _job(device, n=2)
    later = time.time() + defaults.OUTBOX_GRACE_S + 1
    assert device.take_relayed(timeout_s=0.1, now=later) == []
    fresh = device.take_relayed(timeout_s=0, limit=10)
    assert len(fresh) == 1 and json.loads(fresh[0][1])["args"][1] == 1
    assert device.redis.llen(device.keys.outbox_relay()) == 0
    sweeper = base.__class__(base.redis, prefix=base.prefix, publisher=Recorder())
    assert sweeper.publish_overdue(grace_s=0) == 2
    rec = Recorder()
    relay = OutboxRelay(device, app=None, wait_s=0.1)
    relay.publisher = rec
    relay.step()
    assert rec.sent == []


def test_a_relay_that_meets_a_broker_outage_leaves_the_entries_for_the_sweeper(store_factory):
    """The first publish meets an outage: the relay takes no more, deletes nothing, and the
    entries stay in the outbox for the sweeper's claim after OUTBOX_GRACE_S."""
    from cuzk_tasks.service.publisher import OutboxRelay

    base = store_factory()
    device = base.__class__(base.redis, prefix=base.prefix, relay=True)
    _job(device, n=2)
    relay = OutboxRelay(device, app=None, wait_s=0.1)
    relay.publisher = Recorder(outage=True)
    relay.step()
    assert len(device.outbox_entries()) == 2
    assert device.redis.llen(device.keys.outbox_relay()) == 1  # the one behind, not taken
    sweeper = base.__class__(base.redis, prefix=base.prefix, publisher=Recorder())
    assert sweeper.publish_overdue(grace_s=0) == 2
    assert device.outbox_entries() == {}
