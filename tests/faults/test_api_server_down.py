"""The API server down for 60 s during a watch: the watches back off and keep trying, the round ends failed (the
backend's page says why), the nodes show Unknown once the backend has been silent past OSMO_BACKEND_STALE_SECONDS,
and when the API server is back on the same address they are Ready again without anyone doing anything. Time is
the test's clock: nothing waits 60 s."""

from datetime import timedelta

import pytest

from pools.cluster.reflector import Backoff
from pools.fleet.sync import BackendSync, cluster_for, mark_stale_backends
from pools.fleet.usage import backend_online
from pools.models import Backend, Node, SyncLog
from pools.tasks import sync_backend
from tests.faults.conftest import NODES, busy_cluster
from tests.support.clock import Clock
from tests.support.syncing import run_beside
from tests.waiting import until

STALE = 30  # seconds: the outage (60 s) outlasts it


def statuses(backend) -> set[str]:
    return set(Node.objects.filter(backend=backend).values_list("status", flat=True))


@pytest.mark.django_db
def test_nodes_go_unknown_past_the_staleness_limit_and_come_back_when_the_api_server_does(standin, backend,
                                                                                        settings):
    settings.OSMO_BACKEND_STALE_SECONDS = STALE
    busy_cluster(standin, changes=0)
    assert sync_backend(backend.pk, seconds=0.3)["outcome"] == "ok"
    assert statuses(backend) == {"Ready"}
    good = Backend.objects.get(pk=backend.pk).last_sync_at

    # A round watching when the API server goes away: its watches back off until the round's end.
    clock = Clock()
    sync = BackendSync(backend, cluster_for(backend), clock=clock.monotonic, now=clock.now)

    def outage() -> None:
        standin.wait_for_watches(3, timeout=60)
        standin.stop()
        until(lambda: {"nodes", "pods", "jobs"} <= set(sync._failing), "every watch to fail at least once")

    stats = run_beside(sync, clock, standin, outage)
    assert stats.transient and stats.errors  # it tried again, and had not recovered by the round's end
    failed = Backend.objects.get(pk=backend.pk)
    assert failed.sync_error and failed.sync_failing_since and failed.last_sync_at == good
    assert SyncLog.objects.filter(backend=backend).count() == 1
    assert statuses(backend) == {"Ready"}  # what was last seen, until the limit

    # The beat's check 20 s into the outage; a round meanwhile, which fails and returns; the check at 61 s.
    assert mark_stale_backends(now=good + timedelta(seconds=20)) == []
    assert backend_online(failed, now=good + timedelta(seconds=20))
    assert sync_backend(backend.pk, seconds=0.3)["outcome"] == "failed"
    assert mark_stale_backends(now=good + timedelta(seconds=61)) == ["prod"]
    assert statuses(backend) == {"Unknown"}
    assert not backend_online(Backend.objects.get(pk=backend.pk), now=good + timedelta(seconds=61))

    standin.start()  # the same address
    assert sync_backend(backend.pk, seconds=0.3)["outcome"] == "ok"
    assert statuses(backend) == {"Ready"}
    back = Backend.objects.get(pk=backend.pk)
    assert (back.sync_error, back.sync_failing_since) == ("", None) and back.last_sync_at > good
    assert backend_online(back)
    assert sorted(Node.objects.filter(backend=backend).values_list("name", flat=True)) == NODES


@pytest.mark.django_db(transaction=True)
def test_a_round_still_watching_when_its_nodes_are_marked_unknown_lists_again_once_the_server_is_back(
        standin, backend, settings):
    """The round outlives the outage: it resumes its watches when the API server is back, and must not leave the
    nodes Unknown (no event would ever change them back) nor write back the resourceVersions the staleness check
    forgot, which would make the next round resume instead of listing."""
    settings.OSMO_BACKEND_STALE_SECONDS = STALE
    busy_cluster(standin, changes=0)
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    good = Backend.objects.get(pk=backend.pk).last_sync_at
    clock = Clock()
    sync = BackendSync(backend, cluster_for(backend), clock=clock.monotonic, now=clock.now)
    sync.check_seconds = 30
    sync.backoff = lambda: Backoff(cap=1.0)  # real seconds between tries (the clock above does not move them)
    seen: dict[str, object] = {}

    def outage() -> None:
        standin.wait_for_watches(3, timeout=60)
        standin.stop()
        until(lambda: {"nodes", "pods", "jobs"} <= set(sync._failing), "every watch to fail at least once")
        seen["marked"] = mark_stale_backends(now=good + timedelta(seconds=61))
        seen["during"] = statuses(backend)
        standin.start()
        clock.advance(31)  # the run's next check
        # Streams end at their timeout, which the clock does not move: end them until the run has checked.
        until(lambda: standin.end_watches() or statuses(backend) == {"Ready"}, "the nodes to be Ready again")
        seen["after"] = statuses(backend)

    stats = run_beside(sync, clock, standin, outage)
    assert seen == {"marked": ["prod"], "during": {"Unknown"}, "after": {"Ready"}}
    assert stats.transient and stats.errors == [] and stats.relists == 1
    back = Backend.objects.get(pk=backend.pk)
    assert (back.sync_error, back.sync_failing_since) == ("", None) and back.last_sync_at > good
    assert back.listed_at is not None and back.nodes_resource_version
    assert sync_backend(backend.pk, seconds=0.3)["outcome"] == "ok"
    assert statuses(backend) == {"Ready"}


@pytest.mark.django_db(transaction=True)
def test_a_full_list_after_the_outage_ends_every_watch_s_failure_even_one_not_reopened_yet(standin, backend):
    """Once a full list has answered for every kind, the watches' earlier failures are over: a round that ends before
    one of them has opened its new stream (the previous test, on a loaded machine, with the events watch still in
    its backoff) is not reported as failed with a connection error the server no longer gives."""
    busy_cluster(standin, changes=0)
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    clock = Clock()
    sync = BackendSync(backend, cluster_for(backend), clock=clock.monotonic, now=clock.now)
    sync.backoff = lambda: Backoff(cap=1.0)

    def outage() -> None:
        standin.wait_for_watches(len(sync.kinds), timeout=60)
        standin.stop()
        until(lambda: set(sync.kinds) <= set(sync._failing), "every watch to fail at least once")

    assert run_beside(sync, clock, standin, outage).errors  # the round ended with its watches still failing
    standin.start()
    sync.list_everything()
    assert sync._failing == {}
