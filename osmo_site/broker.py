"""Kombu's Redis transport, with one guard that keeps a Celery 5.7.0 worker alive through a broker outage.

When the worker loses the broker, Celery 5.7.0's consumer (Consumer.on_connection_error_after_connected) first
`collect()`s the connection, which unlinks the transport from it (`transport.client = None`), and then closes it
again. If a message was delivered and not yet acknowledged (acks late: a task running or prefetched), and the
first close was cut short by the outage (the channel was waiting in BRPOP), the second close restores that message,
which needs a new Redis client, whose address is read from `transport.client`: AttributeError ("'NoneType' object
has no attribute 'hostname'"). The clean-up ignores connection errors, not that, so the worker exited
("Unrecoverable error"), about one outage in three. Here that case is what it is, a connection error: the clean-up
goes on and the consumer reconnects once the broker is back. The message stays where the broker keeps it (the
unacknowledged set, delivered again after the visibility timeout) or was lost with it; either way the lifecycle
sweep re-sends whatever is still to do (scheduling/run/outbox.py)."""

import logging

from kombu.transport import redis

log = logging.getLogger("osmo_site.broker")


class Channel(redis.Channel):
    def _connparams(self, asynchronous=False):
        if self.connection.client is None:
            log.info("the broker connection was already closed; what it had delivered and not acknowledged stays "
                     "with the broker")
            raise redis.get_redis_ConnectionError()("the broker connection was already closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(redis.Transport):
    Channel = Channel
