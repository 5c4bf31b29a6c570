"""A node's events, recorded by every path that changes its row (the sync's list and watch, a configuration
write that moves it, a backend gone silent), against the stand-in API server through the real client; shown
on its page and by `describe node`; dropped after the retention."""

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.config import writes
from pools.fleet import node_history
from pools.fleet.sync import mark_stale_backends
from pools.models import Backend, ConfigKind, NodeEvent
from tests.kube_objects import make_node
from tests.support.syncing import watch_round
from tests.test_sync import small_cluster, sync_once
from tests.waiting import until

pytestmark = pytest.mark.django_db


def kinds(name: str) -> list[tuple[str, dict]]:
    """The node's events, oldest first."""
    return [(event.kind, event.details) for event in NodeEvent.objects.filter(node=name).order_by("at", "id")]


def test_the_sync_records_appearance_status_cordon_and_departure(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    assert kinds("gpu-a") == [("added", {"status": "Ready", "pools": ["default"]})]
    sync_once(backend)
    assert len(kinds("gpu-a")) == 1  # nothing changed, nothing recorded

    def cordon(sync):
        standin.modify_node("gpu-b", {"spec": {"unschedulable": True}})
        until(lambda: sync.stats.events >= 1, "the sync to take the cordon's event")

    watch_round(backend, standin, cordon)
    assert kinds("gpu-b")[1:] == [("cordon", {"cordoned": True}),
                                  ("status", {"before": "Ready", "after": "Cordoned"})]

    standin.delete_node("cpu-a")
    sync_once(backend)
    assert kinds("cpu-a")[-1] == ("removed", {})
    standin.add_nodes([make_node("cpu-a", gpus=0)])
    sync_once(backend)
    assert [kind for kind, _ in kinds("cpu-a")] == ["added", "removed", "added"]


def test_a_pool_write_that_moves_nodes_records_their_pools(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    standin.modify_node("gpu-a", {"metadata": {"labels": {"runwhere.ai/pool": "training"}}})
    sync_once(backend)
    writes.import_document(ConfigKind.POOL, {"pools": {"training": {
        "name": "training", "backend": "prod", "node_selector": {"runwhere.ai/pool": "training"},
        "common_pod_template": ["default_user"], "platforms": {"h100": {"override_pod_template": []}}}}},
        description="test")
    assert kinds("gpu-a")[-1] == ("pools", {"before": ["default"], "after": ["training"]})
    assert [kind for kind, _ in kinds("gpu-b")] == ["added"]  # not moved, nothing recorded


def test_a_silent_backend_records_unknown_and_the_next_sync_ready_again(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    Backend.objects.filter(pk=backend.pk).update(last_sync_at=timezone.now() - timedelta(hours=1))  # by hand: time
    mark_stale_backends()
    assert kinds("gpu-a")[-1] == ("status", {"before": "Ready", "after": "Unknown"})
    mark_stale_backends()
    assert len(kinds("gpu-a")) == 2  # already Unknown: not recorded twice
    sync_once(backend)
    assert kinds("gpu-a")[-1] == ("status", {"before": "Unknown", "after": "Ready"})


def test_events_older_than_the_retention_are_dropped(standin, backend, settings):
    settings.OSMO_NODE_EVENTS_KEEP_DAYS = 2
    now = timezone.now()
    node_history.record(backend, [("old", "removed", {})], now - timedelta(days=2, seconds=1))
    node_history.record(backend, [("new", "removed", {})], now - timedelta(days=1))
    assert node_history.prune(now) == 1
    assert list(NodeEvent.objects.values_list("node", flat=True)) == ["new"]
