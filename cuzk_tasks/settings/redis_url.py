"""Redis URLs of the service: a single server, or a Redis Sentinel group.

* ``redis://[[user]:password@]host[:port][/db]`` (also ``rediss://`` and ``unix://``): one
  server.
* ``sentinel://[[user]:password@]host:port[/db];sentinel://host:port;...``: the Sentinels
  of a group (kombu's form, Celery's too), with the group's master name in the setting
  ``sentinel_master`` (``CUZK_SENTINEL_MASTER``).  The password and database of the first
  URL are the master's; the Sentinels themselves are asked without one.  Clients follow the
  master through a failover: a connection to a demoted or dead master fails, and the next
  one asks the Sentinels again.

:func:`client` builds a ``redis.Redis`` for either; the broker (kombu's Sentinel transport)
and the result backend (Celery's) read the same URL (``celery_app``).
"""

from __future__ import annotations

import re
import urllib.parse

from ..errors import ConfigError

SCHEMES = ("redis://", "rediss://", "unix://", "sentinel://")
SENTINEL_PORT = 26379


def is_sentinel(url: str) -> bool:
    return str(url).startswith("sentinel://")


def is_redis(url: str) -> bool:
    """Whether ``url`` names a Redis (``redis://``, ``rediss://``, ``sentinel://``)."""
    return url.startswith(("redis://", "rediss://")) or is_sentinel(url)


def sentinel_nodes(url: str) -> tuple[list[tuple[str, int]], dict]:
    """``([(host, port), ...], {"password", "username", "db"})`` of a ``sentinel://`` URL."""
    nodes, master = [], {}
    for i, part in enumerate(p for p in str(url).split(";") if p.strip()):
        parsed = urllib.parse.urlsplit(part.strip())
        if parsed.scheme != "sentinel" or not parsed.hostname:
            raise ConfigError(f"sentinel URL {redact(url)!r}: expected "
                              "sentinel://host:port;sentinel://host:port;...")
        nodes.append((parsed.hostname, parsed.port or SENTINEL_PORT))
        if i == 0:
            if parsed.password:
                master["password"] = urllib.parse.unquote(parsed.password)
            if parsed.username:
                master["username"] = urllib.parse.unquote(parsed.username)
            path = parsed.path.strip("/")
            master["db"] = int(path) if path.isdigit() else 0
    return nodes, master


def celery_url(url: str) -> str:
    """``url`` as kombu (the broker) and Celery's result backend spell it: a ``unix://``
    socket path is ``redis+socket://`` there (neither knows ``unix://``); other URLs as
    they are."""
    url = str(url)
    return "redis+socket://" + url[len("unix://"):] if url.startswith("unix://") else url


def client(url: str, sentinel_master: str = "", **kwargs):
    """A ``redis.Redis`` for ``url``; for a ``sentinel://`` URL, the current master of group
    ``sentinel_master`` (``kwargs`` -- decode_responses, timeouts -- apply to it)."""
    # lazy: config and the state package import this module without connecting; redis-py
    # is loaded only by a process that connects (not by `cuzk-tasks web` before its exec)
    import redis
    from redis.sentinel import Sentinel

    if not is_sentinel(url):
        return redis.Redis.from_url(url, **kwargs)
    if not sentinel_master:
        raise ConfigError("a sentinel:// Redis URL needs the group's master name "
                          "(sentinel_master, CUZK_SENTINEL_MASTER)")
    nodes, master = sentinel_nodes(url)
    timeouts = {k: kwargs[k] for k in ("socket_timeout", "socket_connect_timeout") if k in kwargs}
    sentinel = Sentinel(nodes, sentinel_kwargs=dict(timeouts) or None, **timeouts)
    return sentinel.master_for(sentinel_master, redis_class=redis.Redis,
                               **{**master, **kwargs})


#: the first word of the error replies that say "Redis cannot serve this now", not "this
#: command is wrong": a script running past lua-time-limit (BUSY), a data set loading
#: (LOADING), maxmemory reached with noeviction (OOM), a demoted master (READONLY; its blocked
#: reads end UNBLOCKED), a replica cut off from its master (MASTERDOWN), a slot migrating
#: (TRYAGAIN)
OUTAGE_REPLIES = ("BUSY", "LOADING", "OOM", "READONLY", "UNBLOCKED", "MASTERDOWN", "TRYAGAIN")


def outage_errors() -> tuple[type[BaseException], ...]:
    """The redis-py error classes an outage raises (:func:`is_outage` tells which instance
    is one): the connection errors and timeouts, and ``ResponseError`` -- the class of the
    BUSY reply, and the base of ``OutOfMemoryError`` and ``ReadOnlyError``."""
    # lazy: as in client()
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
            redis.exceptions.ResponseError)


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` means Redis is unreachable or cannot serve for now -- refused or
    dropped connections, timeouts, a Sentinel group without a master, or an
    :data:`OUTAGE_REPLIES` reply -- so the operation is worth trying again later; False
    for a reply that says the command itself is wrong (WRONGTYPE, NOSCRIPT, ERR ...)."""
    # lazy: as in client(); an exception of redis-py means redis-py is loaded already
    import redis

    errors = redis.exceptions
    if isinstance(exc, (errors.ConnectionError, errors.TimeoutError, errors.OutOfMemoryError,
                        errors.ReadOnlyError, errors.MasterDownError, errors.TryAgainError)):
        return True
    if not isinstance(exc, errors.ResponseError):
        return False
    # redis-py prefixes the error of a command in a pipeline with the command
    text = _PIPELINE_ERROR.sub("", str(exc), count=1)
    # a redis.call inside a script that meets OOM (its first write) or READONLY fails the
    # script, before it has written anything, with "ERR Error running script (...): -OOM ..."
    wrapped = _SCRIPT_ERROR.match(text)
    if wrapped:
        return wrapped.group(1) in OUTAGE_REPLIES
    # redis-py keeps the reply's first word apart (status_code) when it knows the word
    code = getattr(exc, "status_code", None) or text.split(" ", 1)[0]
    return code in OUTAGE_REPLIES


_PIPELINE_ERROR = re.compile(r"^Command # \d+ \(.*?\) of pipeline caused error: ", re.S)
_SCRIPT_ERROR = re.compile(r"Error running script \(.*?\): .*?-([A-Z]+) ")


def redact(url: str) -> str:
    """The URL with any password replaced by ``***`` (for errors and logs)."""
    return ";".join(urllib.parse.urlunsplit(_redacted(urllib.parse.urlsplit(p)))
                    for p in str(url).split(";"))


def _redacted(parts):
    if parts.password is None:
        return parts
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return parts._replace(netloc=f"{user}:***@{host}")
