"""cuzk_tasks/service/consumer_watch.py: a worker whose consumer stops taking messages is not
left "live" holding work (issue 49 item 6).  Real processes throughout: a redis-server,
two CPU-backend device workers and a CPU worker.

* ``test_a_device_whose_broker_connection_went_silent_leaves``: device worker dev0 reaches
  the broker through a TCP proxy (tests/support/tcp_proxy.py), its state store directly.
  The proxy then drops dev0's open broker connections silently, as a NAT or firewall that
  forgets a flow does: no reply, no error, ever.  Before the watch, dev0's consumer took
  nothing from then on while its heartbeat kept it live, so the partitions placed on it
  waited for ever.  Now it goes offline within ``consumer_stall_s`` and exits 75, and every
  job completes on dev1.
* ``test_every_job_completes_while_client_connections_are_killed``: while 40 jobs run, every
  normal client connection is killed (``CLIENT KILL TYPE normal``) 20 times: the workers'
  consumers, state store and heartbeat connections alike.  Filed (2026-12-07): kombu's hub
  spun on a closed BRPOP socket (kombu #2214, celery #10205) in 2 runs of 5, 37 and 14 of 40
  jobs stuck 8 minutes and more.  ``CUZK_TEST_WATCH_RUNS`` runs it that many times.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import time

import pytest
from support.processes import Cluster, write_circuits_toml


ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "watchhost"
JOBS = 40
KILLS = 20
KILL_GAP_S = 0.5

needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server is not installed (apt-get install redis-server)")


class _Qos:
    def __init__(self):
        self.room = True

    def can_consume(self):
        return self.room


class _Consumer:  # what the watch reads of a kombu consumer
    def __init__(self, *queues):
        self.channel = type("Channel", (), {"qos": _Qos()})()
        self.queues = [type("Queue", (), {"name": q})() for q in queues]
        self.cancelled = False

    def consuming_from(self, queue):
        return not self.cancelled


class _Consuming:
    def __init__(self, *consumers):
        self.list = list(consumers)

    def consumers(self):
        return tuple(self.list)


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def watched(monkeypatch):
    """A ConsumerWatch (stall 10 s) on fakeredis, its clock the test's; yields (watch, redis,
    consumer, clock, stalls)."""
    import fakeredis

    from cuzk_tasks.service import consumer_watch

    clock = _Clock()
    monkeypatch.setattr(consumer_watch.time, "monotonic", clock)
    redis = fakeredis.FakeRedis()
    consumer = _Consumer("q")
    stalls = []
    watch = consumer_watch.ConsumerWatch(_Consuming(consumer), redis, 10.0,
                                         lambda queues, s: stalls.append((queues, s)))
    return watch, redis, consumer, clock, stalls


def _looks(watch, clock, seconds, step=2.0):
    end = clock.now + seconds
    while clock.now < end:
        clock.now += step
        watch.step_logged()


def test_a_consumer_with_room_that_takes_nothing_while_a_message_waits_is_stalled(watched):
    watch, redis, _consumer, clock, stalls = watched
    redis.lpush("q\x06\x163", b"m1")  # priority step 3 of queue q
    _looks(watch, clock, 8)
    assert stalls == []  # not yet consumer_stall_s
    redis.lpush("q\x06\x163", b"m2")  # a newer message: the oldest one still waits
    _looks(watch, clock, 4)
    assert stalls == [(["q"], pytest.approx(10.0, abs=2.0))] and watch.stalled
    _looks(watch, clock, 20)
    assert len(stalls) == 1  # told once


@pytest.mark.parametrize("case", ["taken", "full", "empty", "cancelled", "outage"])
def test_a_consumer_is_not_stalled_when(watched, case):
    watch, redis, consumer, clock, stalls = watched
    redis.lpush("q", b"m1", b"m2", b"m3", b"m4", b"m5", b"m6", b"m7", b"m8", b"m9")
    if case == "empty":
        redis.delete("q")
    if case == "full":  # no room: kombu has no BRPOP out, the oldest message rightly waits
        consumer.channel.qos.room = False
    if case == "cancelled":  # Celery reconnecting (or stopping) cancelled its queues
        consumer.cancelled = True
    for _ in range(8):
        clock.now += 2.0
        if case == "taken":  # the consumer (or another of the queue) takes one per look
            redis.rpop("q")
        if case == "outage" and _ == 3:  # a look that cannot read the broker starts over
            real, redis.pipeline = redis.pipeline, lambda **kw: (_ for _ in ()).throw(
                ConnectionError("down"))
            watch.step_logged()
            redis.pipeline = real
            continue
        watch.step_logged()
    assert stalls == [] and not watch.stalled


STALL_S = 3.0


def _env(tmp_path, server):
    from support.redis_server import RedisServer  # noqa: F401 - the caller made `server`

    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(tmp_path / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain")})),
        "CUZK_REDIS_URL": server.url, "CUZK_PREFIX": "watch", "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": "0.5", "CUZK_HEARTBEAT_TTL_S": "3",
        "CUZK_SPOOL_DIR": str(tmp_path / "spool"), "CUZK_ALLOWED_INPUT_ROOTS": str(FIX),
        "CUZK_THREADS": "1", "CUZK_CONSUMER_STALL_S": str(STALL_S),
    })
    return env


@pytest.fixture
def stack(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    from support.redis_server import RedisServer

    from cuzk_tasks.settings.config import load_settings

    server = RedisServer()
    env = _env(tmp_path, server)
    settings = load_settings(env=env)
    c = Cluster(tmp_path, env, settings, ROOT)
    c.server = server
    try:
        c.start_stack(devices=2)
        yield c
    finally:
        c.stop_all()
        server.stop()


@pytest.mark.slow
@needs_redis
def test_a_device_whose_broker_connection_went_silent_leaves(tmp_path):
    from support.redis_server import RedisServer
    from support.tcp_proxy import TcpProxy

    from cuzk_tasks.service.consumer_watch import EXIT_CONSUMER_STALLED
    from cuzk_tasks.settings.config import load_settings

    server = RedisServer()
    proxy = TcpProxy(server.port)
    env = _env(tmp_path, server)
    c = Cluster(tmp_path, env, load_settings(env=env), ROOT)
    try:
        dev0 = c.start("dev0", "--device", "0", "--backend", "cpu", env=dict(
            env, CUZK_BROKER_URL=proxy.url(), CUZK_STATE_URL=server.url,
            CUZK_RESULT_BACKEND=server.url))
        c.start("dev1", "--device", "1", "--backend", "cpu")
        c.start("cpu", "--cpu", "--concurrency", "2")
        c.await_roles()
        deadline = time.monotonic() + 30
        # dev0's consumer is up: it has consumed a message (its own ping, by Celery's inspect)
        while not c.client.app.control.inspect(destination=[f"dev0@{HOST}"], timeout=1).ping():
            assert time.monotonic() < deadline, c.logs()
        assert len(c.store.live_device_workers()) == 2
        assert proxy.cut() > 0  # dev0's broker connections: silent from now on
        good = {"input": json.loads((FIX / "mulchain" / "input.json").read_text())}
        cut_at = time.monotonic()
        jobs = [c.client.submit("mulchain", [good] * 2) for _ in range(6)]
        for job in jobs:
            result = c.client.wait(job, timeout=120)
            assert result["state"] == "done" and len(result["proofs"]) == 2, (result, c.logs())
        # dev0 left: offline, and its process exited for its supervisor
        assert dev0.wait(timeout=60) == EXIT_CONSUMER_STALLED, c.logs()
        live = [w["worker_id"] for w in c.store.live_device_workers()]
        assert live == [c.settings.device_worker_id(1)], live
        log = (tmp_path / "dev0.log").read_text(errors="replace")
        assert "has taken nothing for" in log and "exits 75" in log, log[-3000:]
        # within the stall window, a look interval and the warm-shutdown grace of the cut
        assert time.monotonic() - cut_at < 120
    finally:
        c.stop_all()
        proxy.close()
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("run", range(int(os.environ.get("CUZK_TEST_WATCH_RUNS", "1"))))
def test_every_job_completes_while_client_connections_are_killed(stack, run):
    import redis

    c = stack
    good = {"input": json.loads((FIX / "mulchain" / "input.json").read_text())}
    admin = redis.Redis.from_url(c.settings.redis_url)
    jobs = [c.client.submit("mulchain", [good], priority=i % 3) for i in range(JOBS)]
    for _ in range(KILLS):
        admin.execute_command("CLIENT", "KILL", "TYPE", "normal")
        time.sleep(KILL_GAP_S)
    deadline = time.monotonic() + 180
    states = {}
    while time.monotonic() < deadline:
        states = {j: c.client.status(j)["state"] for j in jobs}
        if all(s == "done" for s in states.values()):
            break
        time.sleep(1)
    stuck = [j for j, s in states.items() if s != "done"]
    assert not stuck, (f"{len(stuck)} of {JOBS} jobs not done: {stuck[:3]}\n"
                       f"{c.client.status(stuck[0])}\n{c.logs(6000)}")
