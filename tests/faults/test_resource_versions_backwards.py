"""A cluster whose resourceVersions go backwards (etcd restored from a backup, or the cluster recreated behind the
same address). A watch from the stored resourceVersion then answers 200 and sends nothing, as a real kube-apiserver
does, so a sync that only resumed its watches would miss every later change: a deleted node would stay and a new
one never appear. The sync compares the server's current resourceVersion (a list of one item) with the stored one
at the start of each run and every `check_seconds` of a long one, and lists everything every OSMO_RELIST_SECONDS
whatever the numbers say."""

from datetime import timedelta

import pytest

from pools.fleet.sync import BackendSync, cluster_for
from pools.models import Backend, Node
from tests.faults.conftest import NODES, busy_cluster, heartbeats
from tests.kube_objects import make_node
from tests.support.clock import Clock
from tests.support.syncing import run_beside, watch_round
from tests.waiting import until

AFTER = ["gpu-a", "gpu-b", "gpu-new"]  # cpu-a deleted and gpu-new added after the rewind


def node_names(backend) -> list[str]:
    return sorted(Node.objects.filter(backend=backend).values_list("name", flat=True))


def rewind_then_change(standin) -> None:
    standin.rewind()
    standin.delete_node("cpu-a")
    standin.add_node(make_node("gpu-new", gpus=4))


def test_the_stand_in_goes_back_as_a_restored_api_server_does(standin, kube):
    """What the tests below rely on: after a rewind, a watch from the old resourceVersion answers 200 and sends
    nothing (no 410), while a list shows the truth at a lower resourceVersion."""
    busy_cluster(standin)
    old = int(standin.resource_version)
    standin.rewind()
    assert int(standin.resource_version) == 9 < old  # three nodes and six pods, stored again from 1
    standin.delete_node("cpu-a")
    events = list(kube.watch_nodes(str(old), timeout_seconds=1))
    assert events == []
    listed = kube.list_nodes(limit=1)
    assert int(listed.resource_version) < old


@pytest.mark.django_db
def test_a_freshly_started_sync_sees_what_changed_after_the_rewind(standin, backend):
    busy_cluster(standin)
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    assert node_names(backend) == NODES
    rewind_then_change(standin)

    # Not `sync --once`: a run that would resume its watches from the stored resourceVersions.
    stats = watch_round(backend, standin)
    assert stats.relists == 1 and stats.errors == []
    assert node_names(backend) == AFTER
    backend.refresh_from_db()
    assert int(backend.nodes_resource_version) <= int(standin.resource_version)
    assert backend.sync_error == ""


@pytest.mark.django_db(transaction=True)
def test_a_running_sync_sees_what_changed_after_the_rewind(standin, backend):
    busy_cluster(standin)
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    clock = Clock()
    sync = BackendSync(backend, cluster_for(backend), clock=clock.monotonic, now=clock.now)
    sync.check_seconds = 30

    def cluster_side() -> None:
        standin.wait_for_watches(3, timeout=60)
        resumes_before = len(standin.requests_to("/api/v1/nodes", watch=True))
        rewind_then_change(standin)  # the API server restarts: the watches end and are resumed
        until(lambda: len(standin.requests_to("/api/v1/nodes", watch=True)) > resumes_before,
              "the sync to resume its watch from the old resourceVersion")
        clock.advance(31)  # the run's next check
        # Streams end at their timeout, which the clock does not move: end them until the run has checked.
        until(lambda: standin.end_watches() or node_names(backend) == AFTER,
              "the running sync to show the nodes as they are now")

    stats = run_beside(sync, clock, standin, cluster_side)
    assert stats.relists == 1 and stats.errors == []
    assert node_names(backend) == AFTER


@pytest.mark.django_db
def test_a_full_list_every_osmo_relist_seconds_catches_a_rewind_the_numbers_do_not_show(standin, backend, settings):
    settings.OSMO_RELIST_SECONDS = 600
    busy_cluster(standin, changes=10)
    clock = Clock()

    def round_at(seconds: float):
        clock.seconds = seconds
        return watch_round(backend, standin, clock=clock)

    assert round_at(0).relists == 1  # never listed: lists
    stored = int(Backend.objects.get(pk=backend.pk).nodes_resource_version)
    rewind_then_change(standin)
    heartbeats(standin, stored)  # the new cluster is already past our version: the numbers cannot tell
    assert int(standin.resource_version) > stored

    assert round_at(599).relists == 0
    assert node_names(backend) == NODES  # the watch missed the deletion and the new node
    stats = round_at(600)
    assert stats.relists == 1 and stats.errors == []
    assert node_names(backend) == AFTER
    listed_at = Backend.objects.get(pk=backend.pk).listed_at
    assert listed_at == clock.start + timedelta(seconds=600)
    assert round_at(1199).relists == 0 and round_at(1200).relists == 1
