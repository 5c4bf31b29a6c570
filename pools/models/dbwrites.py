"""Writes that may find the database busy.

On SQLite (the embedded demo) one connection writes at a time; the others wait up to the busy timeout
(settings: `OSMO_SQLITE_BUSY_TIMEOUT_MS`) and then get `OperationalError: database is locked`. A background
writer such as the sync retries such a write a few times with a growing pause; code that has already changed
the cluster says plainly that the change was not recorded (`NotRecorded`).
"""

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError, transaction

log = logging.getLogger("pools.models.dbwrites")

T = TypeVar("T")

TRIES = 4
FIRST_PAUSE = 0.25  # seconds; doubled after each failed try


class NotRecorded(Exception):
    """The cluster was changed but the database could not record the change."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def is_locked(exc: BaseException) -> bool:
    """SQLite's "database is locked" (busy) or "database table is locked"."""
    return isinstance(exc, OperationalError) and "is locked" in str(exc)


def retry_locked(write: Callable[[], T], *, what: str, tries: int = TRIES, pause: float = FIRST_PAUSE,
                 before_retry: Callable[[], None] | None = None) -> T:
    """Run `write` (which opens its own transaction), again after a pause while the database is locked.
    Inside an outer transaction nothing is retried: that transaction has failed and its owner decides."""
    for attempt in range(1, tries + 1):
        try:
            return write()
        except OperationalError as exc:
            if not is_locked(exc) or attempt == tries or transaction.get_connection().in_atomic_block:
                raise
            log.warning("%s: database is locked; trying again in %.2f s (%d of %d)", what, pause, attempt + 1,
                        tries)
            if before_retry is not None:
                before_retry()
            time.sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")
