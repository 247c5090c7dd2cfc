"""kombu's Redis transport, with one fix for riding out a broker restart.

kombu 5.7's Redis channel cannot be closed after Celery has collected its connection: on a
broker connection loss Celery's consumer calls ``Connection.collect()`` (which clears the
transport's ``client``) and then ``Connection.close()``.  A channel whose first close failed
on the dead socket is closed again then; its close restores the unacknowledged messages,
which needs a Redis client built from ``transport.client.hostname`` -- ``None`` by then -- and
the ``AttributeError`` stops the worker for good ("Unrecoverable error: AttributeError("'NoneType'
object has no attribute 'hostname'")") instead of reconnecting.  Nothing can be restored
through a collected connection anyway, so such a close only marks the channel closed: its
delivered messages stay in kombu's ``unacked`` hash, exactly as after a crash, and the worker
reconnects.  ``celery_app`` selects this transport for ``redis://`` brokers
(``broker_transport``); the message format is kombu's own, unchanged.
"""

from __future__ import annotations

import logging

from kombu.transport import redis as kombu_redis

log = logging.getLogger("cuzk_tasks.broker")

#: ``broker_transport`` value naming :class:`Transport` (kombu resolves ``module:Class``).
TRANSPORT = f"{__name__}:Transport"


class Channel(kombu_redis.Channel):
    def close(self):
        transport = self.connection
        if not self.closed and transport is not None and transport.client is None:
            log.warning("broker connection lost: channel closed without restoring its "
                        "unacknowledged messages (they stay in the unacked hash)")
            self.closed = True
            return
        super().close()


class Transport(kombu_redis.Transport):
    Channel = Channel
