"""Asking for a reconcile of the engine backends once a configuration write has committed. The rows are the
outbox: beat reconciles every OSMO_ENGINE_RECONCILE_INTERVAL seconds too, so a lost message only delays it."""

import logging

from django.conf import settings
from django.db import transaction

log = logging.getLogger("pools.schedulers")
# (ConfigKind) the documents KAI's and Kueue's objects are made from (templates: a Kueue flavor's node selector)
ENGINE_KINDS = {"POOL", "POD_TEMPLATE", "DEPARTMENT", "PROJECT"}


def _send() -> None:
    from celery import current_app
    from django.core.cache import cache

    if not cache.add("osmo:engine-reconcile-requested", 1, timeout=1):
        return  # one message per second at most; it reads the rows when it runs
    try:
        current_app.send_task("pools.tasks.reconcile_engines", countdown=1)
    except Exception as exc:  # a broker that is down: the periodic reconcile catches up
        log.warning("could not ask for an engine reconcile (%s); beat runs one soon", exc)


def engines_follow_configuration(kind: str, result) -> None:
    """A write hook (`pools.config.kinds.after_write`): a changed document asks for a reconcile once committed."""
    if kind in ENGINE_KINDS and result.changed and settings.OSMO_ENGINE_RECONCILE_ON_COMMIT:
        transaction.on_commit(_send, robust=True)
