"""A round that met transient errors and recovered from them (a watch stream broken by an ERROR event, a resume
answered 503 twice, then resumed) is a good sync: the backend's page, its metrics and its sync log show no failure,
and a failure shown from an earlier round is cleared. A round whose watch has not recovered by its end is a failed
one (tests/faults/test_api_server_down.py)."""

import pytest

from pools.cluster import ClusterError
from pools.cluster.reflector import Backoff
from pools.fleet.sync import BackendSync, cluster_for
from pools.models import Backend, Node, SyncLog
from tests.faults.conftest import busy_cluster
from tests.support.clock import Clock
from tests.support.syncing import run_beside
from tests.waiting import until


def sync_state(client, backend) -> str:
    page = client.get("/admin/pools/backend/").content.decode()
    return "failing" if "failing since" in page else "ok" if ">ok<" in page else page[-2000:]


@pytest.mark.django_db(transaction=True)
def test_a_round_that_recovered_from_transient_errors_is_not_reported_as_failed(standin, backend, client, staff,
                                                                                 settings):
    settings.OSMO_METRICS_TOKEN = "scrape"
    client.force_login(staff)
    busy_cluster(standin, changes=0)
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    standin.fail_next(1, status=500, path_prefix="/api/v1/pods")
    with pytest.raises(ClusterError):
        BackendSync(backend, cluster_for(backend)).run(seconds=0)  # an earlier round that did fail
    assert Backend.objects.get(pk=backend.pk).sync_error and sync_state(client, backend) == "failing"
    before = Backend.objects.get(pk=backend.pk).last_sync_at

    clock = Clock()
    sync = BackendSync(backend, cluster_for(backend), clock=clock.monotonic, now=clock.now)
    sync.backoff = lambda: Backoff(cap=0.5)
    seen: dict[str, str] = {}

    def faults() -> None:
        standin.wait_for_watches(3, timeout=60)
        opened = {kind: standin.watches_opened(kind) for kind in ("nodes", "pods")}
        standin.fail_next(2, status=503, path_prefix="/api/v1/nodes", message="etcdserver: leader changed")
        standin.error_next_watch(500, path_prefix="/api/v1/pods", message="etcdserver: request timed out")
        standin.end_watches()  # every stream ends; the nodes' resumes are refused twice, the pods' is cut
        until(lambda: len(sync.stats.transient) >= 3, "the three transient errors")
        # Each resumed: a stream opened after the errors (the pods' one is cut first, so its count grows by two;
        # counting open streams instead could count the cut one before the server let it go).
        until(lambda: standin.watches_opened("nodes") > opened["nodes"]
              and standin.watches_opened("pods") > opened["pods"] + 1, "the watches to resume")
        standin.modify_node("gpu-b", {"spec": {"unschedulable": True}})
        until(lambda: Node.objects.get(backend=backend, name="gpu-b").unschedulable, "the cordon to be applied")
        seen["gpu-b"] = Node.objects.get(backend=backend, name="gpu-b").status

    stats = run_beside(sync, clock, standin, faults)
    assert seen == {"gpu-b": "Cordoned"}
    assert len(stats.transient) == 3 and any("503" in error for error in stats.transient)
    assert any("request timed out" in error for error in stats.transient)
    assert stats.errors == [] and stats.relists == 0  # resumed, nothing lost: no list needed

    backend = Backend.objects.get(pk=backend.pk)
    assert (backend.sync_error, backend.sync_failing_since) == ("", None) and backend.last_sync_at > before
    assert SyncLog.objects.filter(backend=backend).count() == 1  # the earlier round's, nothing more
    assert sync_state(client, backend) == "ok"
    metrics = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape").content.decode()
    assert 'osmo_backend_sync_error{backend="prod"} 0.0' in metrics
