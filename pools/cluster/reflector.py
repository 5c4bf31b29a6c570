"""List-and-watch over any `Cluster` implementation (pure Python, no Django).

The pattern is client-go's reflector: list everything once (following continue tokens), then follow a watch
from the list's resourceVersion, resuming from the last seen resourceVersion whenever a stream ends. Only a
410 Expired sends the caller back to a full list; that is the expensive path, so nothing else takes it.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from .interface import DEFAULT_PAGE_SIZE, Expired, ListPage, Unavailable, WatchEvent

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ListPageFn(Protocol):
    def __call__(self, *, limit: int = ..., continue_token: str | None = ...) -> ListPage: ...


class WatchFn(Protocol):
    def __call__(self, resource_version: str, *, timeout_seconds: int = ...) -> Iterator[WatchEvent]: ...


def list_all(list_page: ListPageFn, *, limit: int = DEFAULT_PAGE_SIZE, attempts: int = 3) -> ListPage:
    """Every page of a paged list, e.g. `list_all(cluster.list_nodes)`, all held at once: for small lists. A
    large one (every pod of a cluster) is folded page by page with `fold_pages`.

    The result carries the snapshot's resourceVersion, the one to start a watch from.
    """
    items, resource_version = fold_pages(list_page, list, lambda into, page: into.extend(page.items),
                                         limit=limit, attempts=attempts)
    return ListPage(items, resource_version, None)


def fold_pages(list_page: ListPageFn, start: Callable[[], T], add: Callable[[T, ListPage], None], *,
               limit: int = DEFAULT_PAGE_SIZE, attempts: int = 3) -> tuple[T, str]:
    """Folds a paged list page by page into `start()`'s result with `add(result, page)`, so that no more than
    one decoded page is held at a time; returns (result, the list's resourceVersion: its first page's).

    A continue token expires (410) when the server compacts the snapshot the list was paging through; the
    pages already read then belong to a snapshot that can no longer be continued, so the list starts over
    from a fresh `start()`.
    """
    for attempt in range(1, attempts + 1):
        result = start()
        token: str | None = None
        resource_version = ""
        pages = 0
        try:
            while True:
                page = list_page(limit=limit, continue_token=token)
                resource_version = resource_version or page.resource_version
                pages += 1
                add(result, page)
                if not page.continue_token:
                    return result, resource_version
                token = page.continue_token
                del page  # before the next one is decoded
        except Expired:
            if token is None or attempt == attempts:
                raise
            logger.info("continue token expired after %d pages; listing again (attempt %d)", pages, attempt + 1)
    raise AssertionError("unreachable")  # pragma: no cover


class Backoff:
    """Exponential back-off with full jitter: each delay is uniform in [0, min(cap, base * 2**attempt)).

    Full jitter spreads the retries of many workers that failed together (an API server restart), where
    equal delays would bring them back together.
    """

    def __init__(
        self,
        base: float = 0.5,
        cap: float = 30.0,
        rng: Callable[[], float] = random.random,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.base = base
        self.cap = cap
        self.rng = rng
        self.sleep = sleep
        self.attempt = 0

    def ceiling(self) -> float:
        return min(self.cap, self.base * 2 ** min(self.attempt, 64))

    def next_delay(self) -> float:
        delay = self.rng() * self.ceiling()
        self.attempt += 1
        return delay

    def wait(self, limit: float | None = None) -> float:
        """Sleeps the next delay (at most `limit` seconds) and returns the time slept."""
        delay = self.next_delay()
        if limit is not None:
            delay = max(0.0, min(delay, limit))
        if delay:
            self.sleep(delay)
        return delay

    def reset(self) -> None:
        self.attempt = 0


class Follower:
    """Follows one watch across stream ends and transient failures, e.g.

        follower = Follower(cluster.watch_nodes, listed.resource_version)
        for event in follower.events(deadline=time.monotonic() + 300):
            apply(event)

    `resource_version` always holds the newest version seen (events and bookmarks), so a later call to
    `events()`, or a new Follower, continues exactly where this one stopped. Expired propagates: the caller
    must list again and follow from the new list's resourceVersion.
    """

    # client-go treats a watch that ends within a second without a single event as a failure; resuming it
    # at once would turn a misbehaving server into a tight request loop.
    SHORT_STREAM_SECONDS = 1.0

    def __init__(
        self,
        watch: WatchFn,
        resource_version: str,
        *,
        timeout_seconds: int = 60,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger = logger,
        name: str = "watch",
    ):
        self.watch = watch
        self.resource_version = resource_version
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.log = log
        self.name = name
        self.streams = 0
        self.restarts = 0
        self.errors = 0

    def events(self, deadline: float) -> Iterator[WatchEvent]:
        """Non-bookmark events until `clock()` passes `deadline`. Raises Expired and non-transient errors."""
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                return
            if self.streams:
                self.restarts += 1
            self.streams += 1
            started = self.clock()
            received = 0
            timeout = max(1, math.ceil(min(self.timeout_seconds, remaining)))
            stream = None
            failure = None
            try:
                stream = self.watch(self.resource_version, timeout_seconds=timeout)
                for event in stream:
                    received += 1
                    if event.resource_version:
                        self.resource_version = event.resource_version
                    if event.type != "BOOKMARK":
                        yield event
                    if self.clock() >= deadline:
                        return
            except Expired:
                self.log.info("%s: resourceVersion %s expired; a new list is needed", self.name, self.resource_version)
                raise
            except Unavailable as exc:
                failure = exc
            finally:
                # Before any back-off: an abandoned stream must not hold its connection while we sleep.
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
            if received:
                self.backoff.reset()
            if failure is not None:
                self._back_off(deadline, "%s unavailable (%s)", self.name, failure)
            elif not received and self.clock() - started < self.SHORT_STREAM_SECONDS:
                self._back_off(deadline, "%s: stream ended at once without any event", self.name)

    def _back_off(self, deadline: float, message: str, *args: object) -> None:
        self.errors += 1
        delay = max(0.0, min(self.backoff.next_delay(), deadline - self.clock()))
        self.log.warning(message + "; resuming from resourceVersion %s in %.2fs", *args, self.resource_version, delay)
        if delay:
            self.backoff.sleep(delay)
