"""A sync round on a clock the test moves: its end is a condition the test waits for, never a window of wall time."""

import threading
from collections.abc import Callable

from tests.support.clock import Clock


def run_beside(sync, clock: Clock, standin, cluster_side: Callable[[], None], *, seconds: float = 3600,
               relist: bool = False):
    """`sync.run(seconds=...)` here, on `clock`, while `cluster_side()` acts in a thread of its own (a connection of
    its own too: such tests need transaction=True to see each other's writes). Once `cluster_side` is done, or
    failed, the run is ended: the clock moved past its end and its streams ended until it returns (a stream opened
    just before the move would otherwise last its whole timeout). `cluster_side`'s failure is raised here."""
    from django.db import connection

    done = threading.Event()
    failures: list[BaseException] = []

    def side() -> None:
        try:
            cluster_side()
        except BaseException as exc:
            failures.append(exc)
        finally:
            clock.advance(seconds + 10_000)
            while not done.wait(0.1):
                standin.end_watches()
            connection.close()

    helper = threading.Thread(target=side, name="cluster-side")
    helper.start()
    try:
        stats = sync.run(seconds=seconds, relist=relist)
    finally:
        done.set()
        helper.join(60)
    if failures:
        raise failures[0]
    return stats


def watch_round(backend, standin, cluster_side: Callable[..., None] = lambda sync: None, *,
                clock: Clock | None = None, sync_class: type | None = None, cluster=None, relist: bool = False):
    """One watching round of `backend`'s sync on a Clock (`clock`, or a new one): once every watch of the round
    is open, `cluster_side(sync)` changes the cluster and waits (tests/waiting.until) for what the sync must have
    seen; then the round ends. `cluster` defaults to the backend's own; `relist` lists in full first. Returns the
    round's Stats."""
    from pools.fleet.sync import BackendSync, cluster_for

    clock = clock or Clock()
    sync = (sync_class or BackendSync)(backend, cluster or cluster_for(backend), clock=clock.monotonic, now=clock.now)

    def side() -> None:
        standin.wait_for_watches(len(sync.kinds), timeout=60)
        cluster_side(sync)

    return run_beside(sync, clock, standin, side, relist=relist)
