"""cuzk_tasks.wire: Celery task messages built without Celery's producer.

The oracle is Celery itself: ``app.send_task`` against a real redis-server pushes the
message kombu's Redis transport would store; ours must land on the same list with the same
envelope.  Real workers consuming wire-built messages are exercised by every process-level
test (test_pipeline_e2e etc.); the last test here runs the pipeline with the broker and the
state store in different Redis databases, where workers publish after the transition.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import time
import uuid

import pytest

from cuzk_tasks import wire
from cuzk_tasks.config import load_settings
from cuzk_tasks.errors import ConfigError, CuzkError
from support.message_template import template

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def _body(envelope):
    return json.loads(base64.b64decode(envelope["body"]))


@pytest.fixture
def celery_app(redis_server_url):
    pytest.importorskip("celery")
    from cuzk_tasks.celery_app import create_app

    return create_app(load_settings(env={"CUZK_REDIS_URL": redis_server_url}))


@pytest.mark.parametrize("late_args", [False, True], ids=["whole", "args-written-later"])
@pytest.mark.parametrize("priority", [0, 3, 9])
def test_message_matches_what_celery_send_task_pushes(celery_app, priority, late_args):
    """Also for a message rendered before its args are known (finalize's, whose argument is
    the prove_start result: task_message_late_args, then fill_args)."""
    import redis

    client = redis.Redis.from_url(celery_app.conf.broker_url, decode_responses=True)
    queue = f"wire.{uuid.uuid4().hex[:8]}"
    args = ({"job": "j1", "idx": 2, "attempt": 0, "partial": {"a": [1, 2]}},)
    kwargs = {"finalize_queue": "cuzk.cpu", "priority": priority}
    celery_app.send_task("cuzk.finalize", args=args, kwargs=kwargs, queue=queue,
                         priority=priority, ignore_result=True, argsrepr="(short,)")
    theirs_key = [k for k in queues.queue_keys(queue) if client.llen(k)]
    from cuzk_tasks.message_templates import render

    if late_args:
        late = wire.task_message_late_args(render(celery_app, "cuzk.finalize"), "cuzk.finalize",
                                           kwargs, queue=queue, priority=priority,
                                           argsrepr="(short,)")
        ours = wire.fill_args(late, args)
    else:
        ours = wire.task_message(render(celery_app, "cuzk.finalize"), "cuzk.finalize", args,
                                 kwargs, queue=queue, priority=priority, argsrepr="(short,)")
    assert theirs_key == [ours.list_key]
    theirs = json.loads(client.lpop(ours.list_key))
    mine = json.loads(ours.payload)

    # the same message but for what differs between any two messages: ids and the tag
    assert set(mine) == set(theirs)
    for field in ("content-type", "content-encoding"):
        assert mine[field] == theirs[field]
    assert _body(mine) == _body(theirs)
    per_message = {"id", "root_id"}
    assert {k: v for k, v in mine["headers"].items() if k not in per_message} == \
        {k: v for k, v in theirs["headers"].items() if k not in per_message}
    assert mine["headers"]["root_id"] == mine["headers"]["id"]
    # (kombu also copies an explicitly given argsrepr / kwargsrepr into the properties; the
    # worker reads the headers' copies)
    per_message = {"correlation_id", "delivery_tag", "argsrepr", "kwargsrepr"}
    assert {k: v for k, v in mine["properties"].items() if k not in per_message} == \
        {k: v for k, v in theirs["properties"].items() if k not in per_message}
    assert mine["properties"]["correlation_id"] == mine["headers"]["id"]


def test_a_message_field_celery_adds_stops_the_worker_at_start(celery_app):
    """The template check (cuzk_tasks/message_templates.py): a header a newer Celery would
    add per message is not silently copied into every message."""
    from cuzk_tasks.errors import ConfigError
    from cuzk_tasks.message_templates import check, render

    good = render(celery_app, "cuzk.synthesize")
    check(good, "cuzk.synthesize")
    bad = json.loads(json.dumps(good.envelope))
    bad["headers"]["trace_id"] = "per-message"
    with pytest.raises(ConfigError, match=r"headers\.trace_id.*written for celery >= 5\.3"):
        check(wire.EnvelopeTemplate(bad), "cuzk.synthesize")


def test_filling_a_template_leaves_it_and_earlier_messages_unchanged():
    """fill copies only the dicts it fills in (headers, properties, the envelope) and shares
    what lies below them: no message may change the template or another message."""
    tmpl = template("cuzk.finalize")
    pristine = json.loads(json.dumps(tmpl.envelope))
    first = tmpl.fill("cuzk.finalize", ({"job": "a"},), {}, "q.one", 3, None, None)
    first_text = json.dumps(first)
    second = tmpl.fill("cuzk.finalize", ({"job": "b"},), {"x": 1}, "q.two", 7, "(b,)", "{x}")
    assert json.dumps(first) == first_text
    assert json.loads(json.dumps(tmpl.envelope)) == pristine
    assert first["headers"]["id"] != second["headers"]["id"]
    assert (first["properties"]["delivery_info"]["routing_key"],
            second["properties"]["delivery_info"]["routing_key"]) == ("q.one", "q.two")
    assert (first["properties"]["priority"], second["properties"]["priority"]) == (3, 7)
    assert second["headers"]["argsrepr"] == "(b,)" and first["headers"]["argsrepr"] == "({'job': 'a'},)"


def test_queue_late_message_fills_to_the_same_message_shape():
    late = wire.task_message_any_queue(template("cuzk.prove_start"), "cuzk.prove_start", ("j", 0, 1, "c", "/w"),
                                       {"finalize_queue": "cuzk.cpu", "priority": 7}, priority=7)
    filled = wire.fill_queue(late, "cuzk.dev.host-a.3")
    assert filled.list_key == "cuzk.dev.host-a.3:7"
    envelope = json.loads(filled.payload)
    assert envelope["properties"]["delivery_info"] == {"exchange": "",
                                                       "routing_key": "cuzk.dev.host-a.3"}
    assert _body(envelope)[0] == ["j", 0, 1, "c", "/w"]
    assert wire.fill_queue(wire.task_message_any_queue(template("t"), "t", priority=0), "q").list_key == "q"


def test_list_keys_follow_the_transport_priority_steps():
    assert queues.queue_keys("q") == ["q"] + [f"q:{n}" for n in range(1, 10)]
    assert [wire.priority_step(p) for p in (0, 5, 9, 12)] == [0, 5, 9, 9]


@pytest.mark.parametrize("name", ["", "has space", 'quote"', "slash/", None])
def test_unusable_queue_names_are_refused(name):
    with pytest.raises(CuzkError, match="queue name"):
        wire.task_message(template("t"), "t", queue=name, priority=0)


def test_config_refuses_a_cpu_queue_the_wire_cannot_carry():
    with pytest.raises(ConfigError, match="cpu_queue"):
        load_settings(env={"CUZK_CPU_QUEUE": "cpu queue"})


def test_broker_is_state_redis_only_for_the_same_url():
    same = load_settings(env={"CUZK_REDIS_URL": "redis://h:1/0"})
    assert same.broker_is_state_redis
    other = load_settings(env={"CUZK_REDIS_URL": "redis://h:1/0", "CUZK_STATE_URL": "redis://h:1/1"})
    assert not other.broker_is_state_redis


@pytest.mark.slow
def test_pipeline_with_broker_and_state_in_different_databases(redis_server_url, tmp_path):
    """Workers publish each next-stage message right after its transition (no outbox)."""
    import redis

    from cuzk_tasks.client import Client
    from cuzk_tasks.groth16 import verify
    from support.processes import start_logged, stop_process_group, worker_argv, write_circuits_toml

    broker_url = redis_server_url
    state_url = redis_server_url.rsplit("/", 1)[0] + "/3"
    config = write_circuits_toml(tmp_path / "cuzk.toml",
                                 {"mulchain": ("test-mul", FIX / "mulchain")})
    env = dict(os.environ, CUZK_CONFIG=str(config), CUZK_REDIS_URL=broker_url,
               CUZK_BROKER_URL=broker_url, CUZK_RESULT_BACKEND=broker_url,
               CUZK_STATE_URL=state_url, CUZK_PREFIX="sep" + uuid.uuid4().hex[:6],
               CUZK_HOSTNAME="sephost", CUZK_CPU_QUEUE="sep.cpu." + uuid.uuid4().hex[:6],
               CUZK_SPOOL_DIR=str(tmp_path / "spool"), CUZK_THREADS="1",
               CUZK_HEARTBEAT_INTERVAL_S="0.25", CUZK_HEARTBEAT_TTL_S="1.5",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    settings = load_settings(env=env)
    assert not settings.broker_is_state_redis
    procs = []
    try:
        for name, args in (("dev0", ["--device", "0", "--backend", "cpu"]),
                           ("cpu", ["--cpu", "--concurrency", "1"])):
            procs.append(start_logged(worker_argv(*args), tmp_path / f"{name}.log", env, ROOT))
        client = Client(settings=settings)
        assert not client._ctx.enqueue_in_store
        deadline = time.monotonic() + 60
        while not client.store.live_device_workers():
            assert time.monotonic() < deadline, (tmp_path / "dev0.log").read_text()[-2000:]
            time.sleep(0.1)
        inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
        job = client.submit("mulchain", [{"input": inputs}] * 3)
        result = client.wait(job, timeout=90)
        vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
        assert len(result["proofs"]) == 3
        assert all(verify(vk, p["public"], p["proof"]) for p in result["proofs"])
        # the state lives only in the state database; the broker lists are drained
        assert redis.Redis.from_url(state_url).exists(client.store.keys.job(job))
        assert not redis.Redis.from_url(broker_url).exists(client.store.keys.job(job))
        broker = redis.Redis.from_url(broker_url)
        for queue in (settings.cpu_queue, settings.device_queue(0)):
            assert sum(broker.llen(k) for k in queues.queue_keys(queue)) == 0
    finally:
        for proc in procs:
            stop_process_group(proc)
