"""Client.submit by circuit name (no registry in the client): a CPU worker must answer.

Real redis-server, no worker processes: the check in front of ``cuzk.submit`` reads the
workers the state store knows.  docs/client.md's snippet against a running stack is
tests/test_demo.py.
"""

import time
import uuid

import pytest

from cuzk_tasks import client as client_module
from cuzk_tasks.client import Client
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.errors import CuzkError
from cuzk_tasks.state import WorkerRole
from cuzk_tasks.service.queues import queue_keys

PARTS = [{"input": {"a": "3", "b": "11"}}]


@pytest.fixture
def client(redis_server_url):
    tag = uuid.uuid4().hex[:8]
    settings = load_settings(env={"CUZK_PREFIX": f"t{tag}", "CUZK_CPU_QUEUE": f"cpu-{tag}"})
    c = Client(redis_server_url, settings=settings)
    assert not c.settings.circuits  # only a URL: the job must come from a worker
    yield c
    c.store.redis.delete(*queue_keys(c.settings.cpu_queue))


def _queued(c):
    return sum(c.store.redis.llen(k) for k in queue_keys(c.settings.cpu_queue))


def test_submit_without_a_cpu_worker_fails_at_once_with_the_fix(client):
    t0 = time.monotonic()
    with pytest.raises(CuzkError) as err:
        client.submit("mulchain_1k", PARTS)
    assert time.monotonic() - t0 < 5  # not the 30 s reply timeout
    text = str(err.value)
    assert "'mulchain_1k'" in text and "no cpu worker" in text
    assert "cuzk-tasks worker --cpu" in text and "CUZK_CONFIG" in text
    assert _queued(client) == 0  # nothing sent that no one would answer


def test_an_offline_or_other_queue_cpu_worker_does_not_count(client):
    store = client.store
    store.register_worker("h:cpu:1", WorkerRole.CPU, "h", queue="some-other-queue")
    store.heartbeat("h:cpu:1", 30)
    store.register_worker("h:cpu:2", WorkerRole.CPU, "h", queue=client.settings.cpu_queue)
    store.heartbeat("h:cpu:2", 30)
    store.worker_offline("h:cpu:2")
    with pytest.raises(CuzkError, match="no cpu worker"):
        client.submit("mulchain_1k", PARTS)
    assert _queued(client) == 0


def test_with_a_live_cpu_worker_the_task_is_sent(client, monkeypatch):
    store = client.store
    store.register_worker("h:cpu:3", WorkerRole.CPU, "h", queue=client.settings.cpu_queue)
    store.heartbeat("h:cpu:3", 30)
    monkeypatch.setattr(client_module, "SUBMIT_REPLY_TIMEOUT_S", 0.5)
    with pytest.raises(CuzkError, match="no reply from a cpu worker"):  # no process answers here
        client.submit("mulchain_1k", PARTS)
    assert _queued(client) == 1


def test_status_carries_no_token_path_or_digest(client):
    """Client.status is the public status document (issue 48): past prove_begin the
    partition holds its stage token and witness path, the job its request digest and release
    list; the status shows none of them."""
    from cuzk_tasks.state import PartitionRun

    store = client.store
    job, _ = store.create_job(None, "c", "k", 5, "r-" + uuid.uuid4().hex[:6],
                              [{"input": "{}"}], request_digest="f" * 64)
    assert store.synth_begin(PartitionRun(job, 0, 0))
    assert store.synth_end(PartitionRun(job, 0, 0), "/spool/secret/0.wtns", 1.0)
    store.register_worker("h:dev0", "device", "h", device=0, queue="cuzk.dev.h.0")
    store.heartbeat("h:dev0", 30)
    assert store.route(PartitionRun(job, 0, 0), "h:dev0")
    token = store.prove_begin("h:dev0", PartitionRun(job, 0, 0)).token
    status = client.status(job)
    [part] = status["partitions"]
    assert part["state"] == "proving" and status["state"] == "running"
    for key in ("token", "witness_ref", "request_digest", "release_list"):
        assert key not in status and key not in part
    assert token not in repr(status) and "/spool/" not in repr(status)
