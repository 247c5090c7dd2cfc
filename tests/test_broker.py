"""cuzk_tasks.broker: unacknowledged messages of a lost connection go back on their queues
(real redis-server; the process-level check is the Docker test's redis restart)."""

import json
import threading
import time

import pytest

from cuzk_tasks import broker, wire
from support.message_template import template

UNACKED, INDEX = "t-unacked", "t-unacked_index"


@pytest.fixture
def client(redis_server_url):
    import redis

    r = redis.Redis.from_url(redis_server_url)
    yield r
    r.delete(UNACKED, INDEX, "q.restore", "q.restore:7")


def _deliver(client, tag, queue, priority):
    """What kombu's QoS.append records for a delivered message."""
    message = json.loads(wire.task_message(template("cuzk.synthesize"), "cuzk.synthesize", ("j", 1), queue=queue,
                                           priority=priority).payload)
    client.zadd(INDEX, {tag: time.time()})
    client.hset(UNACKED, tag, json.dumps([message, "", queue]))
    return message


def test_restore_tag_puts_the_message_back_on_its_priority_list(client):
    sent = _deliver(client, "tag-1", "q.restore", 7)
    assert broker.restore_tag(client, UNACKED, INDEX, "tag-1") is True
    assert not client.hexists(UNACKED, "tag-1") and client.zscore(INDEX, "tag-1") is None
    (raw,) = client.lrange("q.restore:7", 0, -1)
    back = json.loads(raw)
    assert back["headers"]["redelivered"] is True and back["body"] == sent["body"]
    assert wire.message_partition(raw.decode()) == ("cuzk.synthesize", "j", 1, 0)
    # acknowledged meanwhile (or restored already): nothing is pushed
    assert broker.restore_tag(client, UNACKED, INDEX, "tag-1") is False
    assert client.llen("q.restore:7") == 1


def test_restore_waits_for_redis_and_restores_once_it_answers(client, redis_server_url):
    import redis

    _deliver(client, "tag-2", "q.restore", 0)
    calls = []

    class FlakyPool(redis.ConnectionPool):
        """Refuses the first three connections, as a restarting Redis does."""

        def get_connection(self, *args, **kwargs):
            calls.append(1)
            if len(calls) <= 3:
                raise redis.exceptions.ConnectionError("Connection refused")
            return super().get_connection(*args, **kwargs)

    pool = FlakyPool.from_url(redis_server_url)
    done = []
    thread = threading.Thread(target=lambda: done.append(broker.restore_when_back(
        pool, UNACKED, INDEX, ["tag-2", "acked-tag"], give_up_s=30)))
    thread.start()
    thread.join(timeout=30)
    assert done == [1] and len(calls) > 3
    assert client.llen("q.restore") == 1 and not client.hexists(UNACKED, "tag-2")


def test_celery_apps_use_this_transport_for_redis_brokers():
    from cuzk_tasks.celery_app import create_app
    from cuzk_tasks.config import load_settings

    app = create_app(load_settings(env={"CUZK_REDIS_URL": "redis://127.0.0.1:1/0"}))
    assert app.connection_for_read().transport_cls == broker.TRANSPORT
    assert isinstance(app.connection_for_read().transport, broker.Transport)
    assert broker.Transport.Channel.QoS is broker.QoS


def test_outage_replies_are_told_apart_from_wrong_commands():
    """redis_url.is_outage (issue 24): what Redis answers when it cannot serve NOW -- also
    inside a script's error -- is an outage; a reply that says the command is wrong is not."""
    import redis
    from redis.exceptions import (BusyLoadingError, ConnectionError, OutOfMemoryError,
                                  ReadOnlyError, ResponseError, TimeoutError)

    from cuzk_tasks.redis_url import is_outage

    script = "Error running script (call to f_0a1b): @user_script:390: @user_script: 390: -{} x"
    outages = [ConnectionError("refused"), TimeoutError("t"), BusyLoadingError("loading"),
               OutOfMemoryError("command not allowed"), ReadOnlyError("replica"),
               ResponseError("BUSY Redis is busy running a script."), broker.OutageReplyError("BUSY"),
               ResponseError(script.format("OOM")), ResponseError(script.format("READONLY")),
               ResponseError("UNBLOCKED force unblock from blocking operation"),
               ResponseError("Command # 1 (EVALSHA ef7a 2 k) of pipeline caused error: "
                             + script.format("READONLY")),
               ResponseError("Command # 2 (ZREM k t) of pipeline caused error: BUSY Redis is busy"),
               redis.exceptions.MasterDownError("x")]
    wrong = [ResponseError("WRONGTYPE Operation against a key"), ResponseError(script.format("WRONGTYPE")),
             ResponseError("Command # 1 (SADD k m) of pipeline caused error: WRONGTYPE Operation"),
             ResponseError("Error running script (call to f_0a1b): @user_script:1: attempt to compare"),
             ResponseError("ERR unknown command"), ValueError("BUSY"), KeyError("x")]
    assert [e for e in outages if not is_outage(e)] == []
    assert [e for e in wrong if is_outage(e)] == []


def test_the_transport_raises_busy_as_a_connection_error(redis_server_url):
    """A real script past lua-time-limit: the broker transport's connection raises the BUSY
    reply as OutageReplyError, one of the transport's connection_errors (Celery's consumer then
    reconnects instead of stopping the worker); a plain redis-py connection cannot tell it
    from any other reply error."""
    import redis

    url = redis_server_url
    admin = redis.Redis.from_url(url)
    admin.config_set("lua-time-limit", 100)
    script = ("local t = tonumber(redis.call('TIME')[1]) + 2 "
              "while tonumber(redis.call('TIME')[1]) < t do end return 1")
    busy = threading.Thread(target=lambda: redis.Redis.from_url(url).eval(script, 0))
    try:
        busy.start()
        time.sleep(0.5)
        ours = redis.Redis.from_url(url, connection_class=broker.Connection)
        with pytest.raises(broker.Transport.connection_errors) as caught:
            ours.get("anything")
        assert type(caught.value) is broker.OutageReplyError
        with pytest.raises(redis.exceptions.ResponseError) as plain:
            redis.Redis.from_url(url).get("anything")
        assert not isinstance(plain.value, broker.Transport.connection_errors)
    finally:
        busy.join(10)
        admin.config_set("lua-time-limit", 5000)
