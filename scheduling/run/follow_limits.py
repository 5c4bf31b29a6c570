"""How many logs may be followed at once (issue 42). A follow holds a web thread for up to
OSMO_LOG_FOLLOW_SECONDS, so one user opening as many follows as the process has threads starved everyone else.

Two limits, each a 429 with Retry-After beyond it: OSMO_LOG_FOLLOWS_PER_PROCESS, counted in memory under a lock
(the threads it protects are this process's), and OSMO_LOG_FOLLOWS_PER_USER, counted across every web process in
`FollowLease` rows (taken under the user's row lock, so two processes cannot both take the last one; a process
that dies holding one leaves a row that stops counting at the end of its follow's window). The slot is given back
when the response is closed (WSGI servers close every response, read to the end or not)."""

import math
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from scheduling.models import FollowLease

# The time leases are stamped and judged by; tests replace it instead of sleeping.
clock = timezone.now

_lock = threading.Lock()
_open = 0  # follows open in this process


class TooManyFollows(Exception):
    def __init__(self, message: str, limit: str, retry_after: int):
        super().__init__(message)
        self.message, self.limit, self.retry_after = message, limit, retry_after


def open_in_process() -> int:
    return _open


def _take_process_slot() -> None:
    global _open
    most = settings.OSMO_LOG_FOLLOWS_PER_PROCESS
    with _lock:
        if most and _open >= most:
            raise TooManyFollows(f"This server is following {most} logs, its most at once "
                                 "(OSMO_LOG_FOLLOWS_PER_PROCESS); read the log without follow, or try again shortly.",
                                 "OSMO_LOG_FOLLOWS_PER_PROCESS", max(1, settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS))
        _open += 1


def _give_process_slot() -> None:
    global _open
    with _lock:
        _open -= 1


def _lease(user) -> int | None:
    most = settings.OSMO_LOG_FOLLOWS_PER_USER
    if not most:
        return None
    now = clock()
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).exists()  # one taker per user at a time
        FollowLease.objects.filter(user=user, expires_at__lte=now).delete()
        ends = sorted(FollowLease.objects.filter(user=user).values_list("expires_at", flat=True))
        if len(ends) >= most:
            wait = max(1, math.ceil((ends[0] - now).total_seconds()))
            raise TooManyFollows(f"You are following {len(ends)} logs, the most at once (OSMO_LOG_FOLLOWS_PER_USER); "
                                 "end one, or try again later.", "OSMO_LOG_FOLLOWS_PER_USER", wait)
        window = settings.OSMO_LOG_FOLLOW_SECONDS + settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS
        return FollowLease.objects.create(user=user, started_at=now,
                                          expires_at=now + timedelta(seconds=window)).pk


def take(user) -> Callable[[], None]:
    """A slot for one follow of `user`, or TooManyFollows; returns what gives it back (once, whatever calls it)."""
    _take_process_slot()
    try:
        lease = _lease(user)
    except BaseException:
        _give_process_slot()
        raise
    given = threading.Lock()

    def give_back() -> None:
        if not given.acquire(blocking=False):
            return
        try:
            if lease is not None:
                FollowLease.objects.filter(pk=lease).delete()
        finally:
            _give_process_slot()

    return give_back


class Held:
    """A followed log's body that gives its slot back when the server closes it (also when it was never read) or
    when it runs out."""

    def __init__(self, body: Iterator[bytes], give_back: Callable[[], None]):
        self.body, self.give_back = body, give_back

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        try:
            return next(self.body)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.give_back()
