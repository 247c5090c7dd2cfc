"""The queue list names of cuzk_tasks.service.queues are kombu's own (its Redis transport defaults)."""

from kombu import Connection

from cuzk_tasks.service import queues


def test_the_priority_steps_and_separator_are_kombus_defaults():
    from kombu.transport.redis import Channel

    assert list(queues.PRIORITY_STEPS) == list(Channel.priority_steps)
    assert queues.PRIORITY_SEP == Channel.sep


def test_each_priority_lands_on_the_list_kombu_picks(redis_server_url):
    import redis

    client = redis.Redis.from_url(redis_server_url)
    with Connection(redis_server_url) as conn:
        q = conn.SimpleQueue("cuzk.test-queues")
        for priority in range(10):
            for k in client.keys("cuzk.test-queues*"):
                client.delete(k)
            q.put({"p": priority}, priority=priority)
            lists = [k.decode() for k in client.keys("cuzk.test-queues*")
                     if client.type(k) == b"list"]
            assert lists == [queues.queue_list_key("cuzk.test-queues", priority)], priority
        q.close()
    assert queues.queue_keys("q") == ["q", "q\x06\x163", "q\x06\x166", "q\x06\x169"]
