"""Custom objects (KAI's and Kueue's kinds) in the simulated cluster: the same calls as against a real API server,
shared by every instance on one state directory, listed and watched at any resourceVersion like the rest."""

import json

import pytest

from pools.cluster import Cluster, ClusterError, Conflict, Expired, NotFound, simulated
from pools.cluster.kinds import KAI_PODGROUP, KAI_QUEUE, KUEUE_LOCAL_QUEUE, KUEUE_WORKLOAD
from tests.cluster.test_simulated import drain


def queue(name: str, gpus: int = 8, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": {"runwhere.ai/pool": "training", **labels}},
            "spec": {"resources": {"gpu": {"quota": gpus, "limit": -1, "overQuotaWeight": 1}}}}


def names(items):
    return [item["metadata"]["name"] for item in items]


def changes(events):
    return [(e.type, e.object["metadata"].get("namespace"), e.object["metadata"]["name"]) for e in events
            if e.type != "BOOKMARK"]


def test_it_implements_the_custom_object_calls_of_the_protocol(cluster):
    def accepts(c: Cluster) -> Cluster:
        return c

    assert accepts(cluster) is cluster
    for method in ("list_objects", "watch_objects", "get_object", "create_object", "patch_object", "delete_object"):
        assert callable(getattr(cluster, method))


def test_a_cluster_scoped_queue_is_created_read_patched_and_deleted_across_instances(cluster, other):
    created = cluster.create_object(KAI_QUEUE, queue("training"))
    assert (created["apiVersion"], created["kind"]) == ("scheduling.run.ai/v2", "Queue")
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    assert other.get_object(KAI_QUEUE, "training") == created
    with pytest.raises(Conflict) as caught:
        other.create_object(KAI_QUEUE, queue("training"))
    assert caught.value.status == 409

    patched = other.patch_object(KAI_QUEUE, "training", {"spec": {"resources": {"gpu": {"quota": 16}}},
                                                         "metadata": {"labels": {"runwhere.ai/pool": None}}})
    assert patched["spec"]["resources"]["gpu"] == {"quota": 16, "limit": -1, "overQuotaWeight": 1}
    assert patched["metadata"]["labels"] == {} and patched["metadata"]["generation"] == 2
    assert cluster.get_object(KAI_QUEUE, "training") == patched
    # A patch that changes nothing makes no new version; a stale precondition is refused.
    assert cluster.patch_object(KAI_QUEUE, "training", {"spec": {"resources": {"gpu": {"quota": 16}}}}) == patched
    with pytest.raises(Conflict):
        cluster.patch_object(KAI_QUEUE, "training", {"metadata": created["metadata"] | {"labels": {}}})

    cluster.delete_object(KAI_QUEUE, "training")
    for call in (lambda: other.get_object(KAI_QUEUE, "training"), lambda: other.delete_object(KAI_QUEUE, "training"),
                 lambda: other.patch_object(KAI_QUEUE, "training", {"spec": {}})):
        with pytest.raises(NotFound):
            call()
    assert cluster.create_object(KAI_QUEUE, queue("training"))["metadata"]["uid"] != created["metadata"]["uid"]


def test_namespaced_objects_are_listed_per_namespace_or_all_page_by_page_and_by_label(cluster):
    for i in range(5):
        cluster.create_object(KUEUE_LOCAL_QUEUE, {"metadata": {"name": f"lq-{i}", "labels": {"team": f"t{i % 2}"}},
                                                  "spec": {"clusterQueue": "training"}}, namespace=f"ns-{i % 3}")
    cluster.create_object(KAI_QUEUE, queue("training"))

    listed, token, pages = [], None, 0
    while True:
        page = cluster.list_objects(KUEUE_LOCAL_QUEUE, limit=2, continue_token=token)
        listed += [(item["metadata"]["namespace"], item["metadata"]["name"]) for item in page.items]
        pages += 1
        token = page.continue_token
        if not token:
            break

    assert pages == 3
    assert listed == [("ns-0", "lq-0"), ("ns-0", "lq-3"), ("ns-1", "lq-1"), ("ns-1", "lq-4"), ("ns-2", "lq-2")]
    assert names(cluster.list_objects(KUEUE_LOCAL_QUEUE, namespace="ns-1").items) == ["lq-1", "lq-4"]
    assert names(cluster.list_objects(KUEUE_LOCAL_QUEUE, label_selector="team=t1").items) == ["lq-3", "lq-1"]
    assert names(cluster.list_objects(KAI_QUEUE).items) == ["training"]
    assert cluster.get_object(KUEUE_LOCAL_QUEUE, "lq-4", namespace="ns-1")["spec"] == {"clusterQueue": "training"}
    with pytest.raises(NotFound):
        cluster.get_object(KUEUE_LOCAL_QUEUE, "lq-4", namespace="ns-0")
    with pytest.raises(ClusterError) as caught:
        cluster.list_objects(KUEUE_LOCAL_QUEUE, label_selector="a in (b")
    assert caught.value.status == 400


def test_invalid_objects_and_scopes_are_refused(cluster):
    with pytest.raises(ValueError, match="namespace is required"):
        cluster.create_object(KAI_PODGROUP, {"metadata": {"name": "pg"}})
    with pytest.raises(ValueError, match="cluster-scoped"):
        cluster.list_objects(KAI_QUEUE, namespace="ns")
    for body, status in (({"metadata": {"name": "Not_Valid"}}, 422), ({"spec": {}}, 422),
                         ({"kind": "Job", "metadata": {"name": "q"}}, 400)):
        with pytest.raises(ClusterError) as caught:
            cluster.create_object(KAI_QUEUE, body)
        assert caught.value.status == status


def test_a_watch_sees_objects_added_modified_and_deleted(cluster, other, clock):
    cluster.create_object(KAI_QUEUE, queue("b"))
    cluster.create_object(KAI_QUEUE, queue("c"))
    start = cluster.list_objects(KAI_QUEUE).resource_version

    other.create_object(KAI_QUEUE, queue("a"))
    other.patch_object(KAI_QUEUE, "b", {"status": {"allocated": {"gpu": 4}}})
    other.delete_object(KAI_QUEUE, "c")
    events = drain(cluster.watch_objects(KAI_QUEUE, start, timeout_seconds=0))

    assert changes(events) == [("ADDED", None, "a"), ("MODIFIED", None, "b"), ("DELETED", None, "c")]
    assert events[1].object["status"] == {"allocated": {"gpu": 4}}
    assert events[0].object["kind"] == "Queue" and events[0].object["apiVersion"] == "scheduling.run.ai/v2"
    version = events[-1].resource_version
    assert version == cluster.current_resource_version()

    # Resuming from there: a change to another kind, or another namespace, is only a bookmark.
    cluster.create_object(KUEUE_LOCAL_QUEUE, {"metadata": {"name": "lq"}, "spec": {}}, namespace="ns-1")
    later = drain(cluster.watch_objects(KAI_QUEUE, version, timeout_seconds=0))
    assert [(e.type, e.object["kind"], e.object["apiVersion"]) for e in later] == [
        ("BOOKMARK", "Queue", "scheduling.run.ai/v2")]
    in_ns_0 = drain(cluster.watch_objects(KUEUE_LOCAL_QUEUE, version, namespace="ns-0", timeout_seconds=0))
    assert changes(in_ns_0) == []
    in_all = drain(cluster.watch_objects(KUEUE_LOCAL_QUEUE, version, timeout_seconds=0))
    assert changes(in_all) == [("ADDED", "ns-1", "lq")]


def test_a_watch_from_version_zero_starts_with_every_object_added(cluster):
    cluster.create_object(KAI_QUEUE, queue("a"))
    cluster.create_object(KAI_QUEUE, queue("b", team="x"))

    events = drain(cluster.watch_objects(KAI_QUEUE, "0", label_selector="team", timeout_seconds=0))

    assert changes(events) == [("ADDED", None, "b")]


def test_a_version_older_than_the_retention_window_is_expired(cluster, clock):
    start = cluster.list_objects(KAI_QUEUE).resource_version
    cluster.create_object(KAI_QUEUE, queue("a"))
    clock.advance(simulated.RETENTION_SECONDS + 10)

    with pytest.raises(Expired) as caught:
        cluster.watch_objects(KAI_QUEUE, start)
    assert caught.value.status == 410
    assert names(cluster.list_objects(KAI_QUEUE).items) == ["a"]


def test_versions_past_the_retention_window_are_forgotten(cluster, clock, tmp_path):
    cluster.create_object(KAI_QUEUE, queue("a"))
    cluster.create_object(KAI_QUEUE, queue("gone"))
    for gpus in (1, 2, 3):
        cluster.patch_object(KAI_QUEUE, "a", {"spec": {"resources": {"gpu": {"quota": gpus}}}})
    cluster.delete_object(KAI_QUEUE, "gone")
    clock.advance(simulated.RETENTION_SECONDS + 10)

    cluster.create_object(KAI_QUEUE, queue("b"))

    state = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert {key: len(record["versions"]) for key, record in state["objects"].items()} == {
        "scheduling.run.ai/v2/queues|/a": 1, "scheduling.run.ai/v2/queues|/b": 1}
    assert cluster.get_object(KAI_QUEUE, "a")["spec"]["resources"]["gpu"]["quota"] == 3


def test_an_object_with_finalizers_stays_marked_until_they_are_removed(cluster):
    body = {"metadata": {"name": "wl-1", "finalizers": ["kueue.x-k8s.io/resource-in-use"]}, "spec": {}}
    cluster.create_object(KUEUE_WORKLOAD, body, namespace="team-a")

    cluster.delete_object(KUEUE_WORKLOAD, "wl-1", namespace="team-a")
    cluster.delete_object(KUEUE_WORKLOAD, "wl-1", namespace="team-a")  # already marked: no change
    marked = cluster.get_object(KUEUE_WORKLOAD, "wl-1", namespace="team-a")
    cluster.patch_object(KUEUE_WORKLOAD, "wl-1", {"metadata": {"finalizers": None}}, namespace="team-a")

    assert marked["metadata"]["deletionTimestamp"]
    with pytest.raises(NotFound):
        cluster.get_object(KUEUE_WORKLOAD, "wl-1", namespace="team-a")
