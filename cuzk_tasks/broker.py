"""kombu's Redis transport, with the fixes that let a worker ride out a broker restart.

kombu 5.7's Redis channel cannot be closed after Celery has collected its connection: on a
broker connection loss Celery's consumer calls ``Connection.collect()`` (which clears the
transport's ``client``) and then ``Connection.close()``.  A channel whose first close failed
on the dead socket is closed again then; its close restores the unacknowledged messages,
which needs a Redis client built from ``transport.client.hostname`` -- ``None`` by then -- and
the ``AttributeError`` stopped the worker for good ("Unrecoverable error: AttributeError(
"'NoneType' object has no attribute 'hostname'")") instead of reconnecting.

Celery also drops the messages it had reserved but not started when the connection goes (it
expects the broker to redeliver them, as AMQP does); on Redis they would wait in the
``unacked`` hash for the visibility timeout (an hour).  So such a close hands the channel's
delivered tags to a thread that puts them back on their queues as soon as Redis answers
again -- what kombu's own close does when Redis is up.  A tag acknowledged meanwhile is
skipped; a task still running whose message comes back runs again and its transition rejects
it as stale (docs/architecture.md, "Celery settings and why").

Celery's consumer reconnects (with its backoff) only on the transport's ``connection_errors``;
any other error from a Redis command stops the worker ("Unrecoverable error").  Replies that
say Redis cannot serve *now* -- BUSY (a script past ``lua-time-limit``), OOM (maxmemory with
``noeviction``), READONLY (a demoted master), MASTERDOWN, TRYAGAIN -- are outages, not bugs
(:func:`cuzk_tasks.redis_url.is_outage`), so they are connection errors here.  BUSY has no
redis-py class of its own; the transport's connections raise it as :class:`OutageReplyError`.

``celery_app`` selects this transport for ``redis://`` brokers and its Sentinel sibling for
``sentinel://`` ones (``broker_transport``); the message format is kombu's own, unchanged.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import redis
import redis.sentinel
from kombu.transport import redis as kombu_redis

from . import wire
from .redis_url import is_outage

log = logging.getLogger("cuzk_tasks.broker")

#: ``broker_transport`` value naming :class:`Transport` (kombu resolves ``module:Class``),
#: and :class:`SentinelTransport` for ``sentinel://`` brokers.
TRANSPORT = f"{__name__}:Transport"
SENTINEL_TRANSPORT = f"{__name__}:SentinelTransport"

#: How long the restore thread keeps trying to reach Redis (s): kombu's own visibility
#: timeout restores the messages after that anyway.
RESTORE_GIVE_UP_S = 3600.0


class OutageReplyError(redis.exceptions.ResponseError):
    """A reply error that says Redis cannot serve now and that redis-py has no class for:
    BUSY (a script past ``lua-time-limit``: Redis answers nothing else until it ends),
    UNBLOCKED (a blocked read ended by a primary's demotion), a script's OOM or READONLY
    (:func:`cuzk_tasks.redis_url.is_outage`)."""


class _OutageReplies:
    """A Redis connection that raises the outage replies redis-py raises as a plain
    ``ResponseError`` as :class:`OutageReplyError` instead."""

    def read_response(self, *args, **kwargs):
        try:
            return super().read_response(*args, **kwargs)
        except redis.exceptions.ResponseError as exc:
            if type(exc) is redis.exceptions.ResponseError and is_outage(exc):
                raise OutageReplyError(*exc.args) from None
            raise


class Connection(_OutageReplies, redis.Connection):
    pass


class SSLConnection(_OutageReplies, redis.SSLConnection):
    pass


class SentinelManagedConnection(_OutageReplies, redis.sentinel.SentinelManagedConnection):
    pass


class SentinelManagedSSLConnection(_OutageReplies, kombu_redis.SentinelManagedSSLConnection):
    pass


#: the error replies that are outages (a connection error to Celery's consumer: it reconnects)
OUTAGE_REPLY_ERRORS = (OutageReplyError, redis.exceptions.OutOfMemoryError,
                       redis.exceptions.ReadOnlyError, redis.exceptions.MasterDownError,
                       redis.exceptions.TryAgainError)


def restore_tag(client, unacked_key, unacked_index_key, tag) -> bool:
    """Move one delivered, unacknowledged message back onto its queue (the list of its
    priority step, at the end that is served next), as kombu's ``restore_by_tag`` does, in
    one transaction.  False when it was acknowledged (or restored) meanwhile."""
    restored = []

    def move(pipe):
        raw = pipe.hget(unacked_key, tag)
        pipe.multi()
        pipe.zrem(unacked_index_key, tag)
        pipe.hdel(unacked_key, tag)
        restored[:] = []
        if raw:
            message, _exchange, routing_key = json.loads(raw)
            message.setdefault("headers", {})["redelivered"] = True
            message.setdefault("properties", {}).setdefault("delivery_info", {})["redelivered"] = True
            priority = int(message["properties"].get("priority") or 0)
            pipe.rpush(wire.queue_list_key(routing_key, priority), json.dumps(message))
            restored.append(tag)

    client.transaction(move, unacked_key)
    return bool(restored)


def restore_when_back(pool, unacked_key, unacked_index_key, tags, give_up_s=RESTORE_GIVE_UP_S):
    """Restore ``tags`` through ``pool`` once Redis answers again -- or serves again: BUSY,
    OOM, LOADING are waited out too (backoff 0.5 s to 5 s)."""
    client = redis.Redis(connection_pool=pool)
    deadline, delay = time.monotonic() + give_up_s, 0.5
    while True:
        try:
            n = sum(restore_tag(client, unacked_key, unacked_index_key, tag) for tag in tags)
        except redis.exceptions.RedisError as exc:
            if not is_outage(exc):
                raise
            if time.monotonic() > deadline:
                log.warning("gave up restoring %d message(s) of a lost broker connection; the "
                            "visibility timeout will", len(tags))
                return 0
            time.sleep(delay)
            delay = min(2 * delay, 5.0)
            continue
        log.warning("broker back: %d of %d unacknowledged message(s) of the lost connection "
                    "put back on their queues", n, len(tags))
        return n


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client=None):
        """kombu's restore of the delivered, unacknowledged messages (at a channel's close);
        when Redis cannot be reached -- or no client can be built, the connection being
        collected -- the tags go to a thread that restores them once Redis answers."""
        try:
            return super().restore_unacked(client)
        except (redis.exceptions.RedisError, AttributeError) as exc:
            if not (isinstance(exc, AttributeError) or is_outage(exc)):
                raise
            tags = list(self._delivered)
            self._delivered.clear()
            self.channel.restore_later(tags)
            return None


class Channel(kombu_redis.Channel):
    QoS = QoS
    connection_class = Connection
    connection_class_ssl = SSLConnection

    def _get_pool(self, asynchronous=False):
        pool = super()._get_pool(asynchronous=asynchronous)
        if not asynchronous:
            self._restore_pool = pool  # still usable once the connection is collected
        return pool

    def restore_later(self, tags):
        pool = getattr(self, "_restore_pool", None)
        if not tags or pool is None:
            return
        log.warning("broker connection lost: %d unacknowledged message(s) go back on their "
                    "queues when Redis answers again", len(tags))
        threading.Thread(target=restore_when_back, name="cuzk-restore-unacked", daemon=True,
                         args=(pool, self.unacked_key, self.unacked_index_key, tags)).start()

    def close(self):
        transport = self.connection
        if self.closed or transport is None or transport.client is not None:
            return super().close()
        # Celery collected the lost connection: kombu's close would raise AttributeError (no
        # client can be built any more); restore the delivered messages from a thread instead.
        self.closed = True
        if self._qos is not None:
            self._qos.restore_unacked()


class Transport(kombu_redis.Transport):
    Channel = Channel
    connection_errors = kombu_redis.Transport.connection_errors + OUTAGE_REPLY_ERRORS


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The same fixes on kombu's Sentinel channel (its pool follows the group's master)."""

    connection_class = SentinelManagedConnection
    connection_class_ssl = SentinelManagedSSLConnection


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
    connection_errors = kombu_redis.SentinelTransport.connection_errors + OUTAGE_REPLY_ERRORS
