"""This process's Celery app pointed at another broker for one test."""

import contextlib

from django.conf import settings


def every_queue() -> list[str]:
    """The queues of all the workers (settings.OSMO_WORKER_QUEUES): a test's one worker serves them all."""
    return sorted({queue for queues in settings.OSMO_WORKER_QUEUES.values() for queue in queues})


@contextlib.contextmanager
def broker_at(url: str, transport: str | None = None):
    """The app sends to `url` (through kombu's `transport`, a class path, when given): its connection and producer
    pools are dropped, so that none keeps the broker an earlier test used, and the per-process debounce of
    `request_cycle` is cleared, so that the first ask for a cycle really sends (an earlier test may have asked
    within the last second)."""
    from django.core.cache import cache

    from osmo_site.celery import app

    def reset() -> None:
        app._pool = None
        app.amqp._producer_pool = None
        cache.delete("osmo:admission-requested")

    saved = {"broker_url": app.conf.broker_url, "broker_transport": app.conf.broker_transport}
    app.conf.update(broker_url=url, broker_transport=transport)
    reset()
    try:
        yield app
    finally:
        app.conf.update(**saved)
        reset()
