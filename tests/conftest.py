"""Shared fixtures: a real redis-server (session) and the state store on two backends."""

import os
import tempfile
import uuid

import pytest

from support.redis_server import RedisServer, have_redis_server

BACKENDS = ["fakeredis", "redis-server"]

# One stage key for the whole run (cuzk_tasks/service/seal.py), made by its first user, in a
# directory of the run's own: the tests' workers and clients share it through the
# environment (settings loaded from an explicit env dict use the default path).
os.environ.setdefault("CUZK_STAGE_KEY_FILE",
                      os.path.join(tempfile.mkdtemp(prefix="cuzk-test-key-"), "stage.key"))


@pytest.fixture(scope="session")
def redis_server_url():
    """URL of a throwaway redis-server for the whole session (skips without one)."""
    if not have_redis_server():
        pytest.skip("redis-server is not installed (apt-get install redis-server); "
                    "the real-Redis half of the state tests is skipped")
    server = RedisServer()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def store_factory(request):
    """A callable making a fresh StateStore on this test's backend, each with its own keys:
    fakeredis: a new FakeServer per store; redis-server: a unique prefix per store."""
    pytest.importorskip("redis")
    from cuzk_tasks.state import StateStore

    clients = []
    if request.param == "fakeredis":
        fakeredis = pytest.importorskip("fakeredis")
        pytest.importorskip("lupa", reason="fakeredis needs the [lua] extra (lupa) for scripts")

        def make(**kwargs):
            client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
            clients.append(client)
            return StateStore(client, prefix=kwargs.pop("prefix", "cuzk"), **kwargs)
    else:
        import redis

        url = request.getfixturevalue("redis_server_url")
        client = redis.Redis.from_url(url, decode_responses=True)
        clients.append(client)

        def make(**kwargs):
            prefix = kwargs.pop("prefix", "t" + uuid.uuid4().hex[:10])
            return StateStore(client, prefix=prefix, **kwargs)

    make.backend = request.param
    yield make
    for client in clients:
        client.close()


@pytest.fixture
def store(store_factory):
    """A fresh StateStore (parameterised over fakeredis and a real redis-server)."""
    return store_factory()
