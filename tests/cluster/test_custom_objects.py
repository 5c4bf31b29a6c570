"""Custom objects (KAI's and Kueue's kinds) through the real client against the stand-in API server: one
cluster-scoped kind (a KAI Queue) and namespaced ones (Kueue LocalQueues, KAI PodGroups), created, read, listed
page by page and by label, patched, deleted, and watched."""

import pytest

from pools.cluster import ClusterError, Conflict, Expired, NotFound, ObjectKind, Unavailable
from pools.cluster.kinds import ALL_KINDS, KAI_PODGROUP, KAI_QUEUE, KUEUE_LOCAL_QUEUE, KUEUE_WORKLOAD
from tests.cluster.test_kube_cluster import later, take
from tests.kube_standin import HANG

QUEUES = "/apis/scheduling.run.ai/v2/queues"
LOCAL_QUEUES = "/apis/kueue.x-k8s.io/v1beta2/localqueues"


def queue(name: str, *, parent: str | None = None, gpus: int = 8, **labels: str) -> dict:
    spec: dict = {"resources": {"gpu": {"quota": gpus, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return {"metadata": {"name": name, "labels": {"runwhere.ai/pool": "training", **labels}}, "spec": spec}


def local_queue(name: str, cluster_queue: str = "training") -> dict:
    return {"metadata": {"name": name, "labels": {"runwhere.ai/pool": cluster_queue}},
            "spec": {"clusterQueue": cluster_queue}}


def names(items: list[dict]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def test_the_kinds_name_their_api_versions_and_scopes():
    assert KAI_QUEUE.api_version == "scheduling.run.ai/v2"
    assert KUEUE_WORKLOAD.api_version == "kueue.x-k8s.io/v1beta2"
    assert [kind.kind for kind in ALL_KINDS if kind.namespaced] == ["PodGroup", "LocalQueue", "Workload"]
    assert len({(kind.group, kind.plural) for kind in ALL_KINDS}) == len(ALL_KINDS)
    with pytest.raises(AttributeError):
        KAI_QUEUE.version = "v1"  # frozen: usable as a dict key and shared as a constant


# A cluster-scoped kind


def test_it_creates_gets_patches_and_deletes_a_cluster_scoped_queue(standin, kube):
    created = kube.create_object(KAI_QUEUE, queue("training"))
    fetched = kube.get_object(KAI_QUEUE, "training")
    patched = kube.patch_object(KAI_QUEUE, "training", {"spec": {"resources": {"gpu": {"quota": 16}}},
                                                        "metadata": {"labels": {"runwhere.ai/pool": None}}})

    assert created["apiVersion"] == "scheduling.run.ai/v2" and created["kind"] == "Queue"
    assert created["metadata"]["uid"] and created["metadata"]["creationTimestamp"]
    assert created["metadata"]["generation"] == 1 and "namespace" not in created["metadata"]
    assert fetched == created
    assert patched["spec"]["resources"]["gpu"] == {"quota": 16, "limit": -1, "overQuotaWeight": 1}
    assert patched["metadata"]["labels"] == {}
    assert patched["metadata"]["generation"] == 2
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    (patch,) = standin.requests_to(f"{QUEUES}/training", method="PATCH")
    assert patch.query == {}
    assert standin.object(KAI_QUEUE, "training") == patched

    kube.delete_object(KAI_QUEUE, "training")

    assert standin.objects(KAI_QUEUE) == []
    assert [r.path for r in standin.requests if r.method != "GET"] == [QUEUES, f"{QUEUES}/training",
                                                                       f"{QUEUES}/training"]


def test_creating_an_object_twice_raises_conflict(standin, kube):
    kube.create_object(KAI_QUEUE, queue("training"))

    with pytest.raises(Conflict) as caught:
        kube.create_object(KAI_QUEUE, queue("training", gpus=1))

    assert caught.value.status == 409
    assert str(caught.value) == 'creating Queue training: HTTP 409 queues.scheduling.run.ai "training" already exists'
    assert standin.object(KAI_QUEUE, "training")["spec"]["resources"]["gpu"]["quota"] == 8


def test_a_missing_object_raises_not_found_on_get_patch_and_delete(standin, kube):
    with pytest.raises(NotFound, match=r'^getting Queue nope: HTTP 404 queues.scheduling.run.ai "nope" not found$'):
        kube.get_object(KAI_QUEUE, "nope")
    with pytest.raises(NotFound, match=r"^patching LocalQueue team-a/nope: HTTP 404"):
        kube.patch_object(KUEUE_LOCAL_QUEUE, "nope", {"spec": {}}, namespace="team-a")
    with pytest.raises(NotFound, match=r"^deleting Queue nope: HTTP 404"):
        kube.delete_object(KAI_QUEUE, "nope")


def test_a_patch_carrying_a_stale_resource_version_raises_conflict(standin, kube):
    created = kube.create_object(KAI_QUEUE, queue("training"))
    standin.modify_object(KAI_QUEUE, "training", {"status": {"allocated": {"gpu": 4}}})

    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "spec": {"priority": 1}}
    with pytest.raises(Conflict, match="the object has been modified"):
        kube.patch_object(KAI_QUEUE, "training", stale)

    current = kube.get_object(KAI_QUEUE, "training")
    fresh = {**stale, "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}}
    assert kube.patch_object(KAI_QUEUE, "training", fresh)["spec"]["priority"] == 1


def test_a_patch_that_changes_nothing_makes_no_new_version(standin, kube):
    created = kube.create_object(KAI_QUEUE, queue("training"))

    same = kube.patch_object(KAI_QUEUE, "training", {"spec": {"resources": {"gpu": {"quota": 8}}}})

    assert same == created


def test_the_scope_of_a_kind_is_checked_before_anything_is_sent(standin, kube):
    with pytest.raises(ValueError, match="cluster-scoped"):
        kube.get_object(KAI_QUEUE, "training", namespace="team-a")
    with pytest.raises(ValueError, match="namespace is required"):
        kube.patch_object(KUEUE_LOCAL_QUEUE, "default", {})
    with pytest.raises(ValueError, match="needs a name"):
        kube.delete_object(KAI_QUEUE, "")
    assert standin.requests == []


def test_the_stand_in_refuses_paths_of_the_wrong_scope(standin, kube):
    kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-a")
    as_cluster_scoped = ObjectKind("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")

    with pytest.raises(NotFound):
        kube.get_object(as_cluster_scoped, "default")
    with pytest.raises(ClusterError) as caught:
        kube.create_object(as_cluster_scoped, local_queue("other"))
    assert caught.value.status == 405


# Namespaced kinds


def test_it_creates_lists_patches_and_deletes_namespaced_local_queues(standin, kube):
    standin.strict_namespaces = True
    for namespace in ("team-a", "team-b"):
        standin.add_namespace(namespace)
    a = kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-a")
    # The namespace may come from the body instead.
    b = kube.create_object(KUEUE_LOCAL_QUEUE, {**local_queue("default", "inference"),
                                               "metadata": {"name": "default", "namespace": "team-b"}})

    assert (a["metadata"]["namespace"], b["metadata"]["namespace"]) == ("team-a", "team-b")
    assert standin.requests_to("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-b/localqueues", method="POST")
    assert kube.get_object(KUEUE_LOCAL_QUEUE, "default", namespace="team-b")["spec"]["clusterQueue"] == "inference"
    every = kube.list_objects(KUEUE_LOCAL_QUEUE)
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in every.items] == [
        ("team-a", "default"), ("team-b", "default")]
    assert [i["metadata"]["namespace"] for i in kube.list_objects(KUEUE_LOCAL_QUEUE, namespace="team-b").items] == [
        "team-b"]

    patched = kube.patch_object(KUEUE_LOCAL_QUEUE, "default", {"spec": {"stopPolicy": "Hold"}}, namespace="team-a")
    kube.delete_object(KUEUE_LOCAL_QUEUE, "default", namespace="team-b")

    assert patched["spec"] == {"clusterQueue": "training", "stopPolicy": "Hold"}
    assert [(o["metadata"]["namespace"], o["spec"]) for o in standin.objects(KUEUE_LOCAL_QUEUE)] == [
        ("team-a", {"clusterQueue": "training", "stopPolicy": "Hold"})]
    with pytest.raises(NotFound, match='namespaces "nowhere" not found'):
        kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="nowhere")
    with pytest.raises(Conflict):
        kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-a")


def test_lists_page_with_continue_tokens_and_filter_by_label(standin, kube):
    for i in range(5):
        kube.create_object(KAI_QUEUE, queue(f"q-{i}", team=f"t{i % 2}"))
    standin.add_object(KAI_QUEUE, {"metadata": {"name": "theirs", "labels": {"app": "someone-else"}}, "spec": {}})

    listed, token, pages = [], None, 0
    while True:
        page = kube.list_objects(KAI_QUEUE, label_selector="runwhere.ai/pool", limit=2, continue_token=token)
        listed += names(page.items)
        pages += 1
        token = page.continue_token
        if not token:
            break

    assert pages == 3 and listed == ["q-0", "q-1", "q-2", "q-3", "q-4"]
    assert names(kube.list_objects(KAI_QUEUE, label_selector="team=t1").items) == ["q-1", "q-3"]
    assert names(kube.list_objects(KAI_QUEUE, label_selector="!runwhere.ai/pool").items) == ["theirs"]
    assert len(kube.list_objects(KAI_QUEUE).items) == 6
    first = standin.requests_to(QUEUES)[0]
    assert first.query == {"labelSelector": "runwhere.ai/pool", "limit": "2"}


def test_a_controller_writing_a_status_is_seen_by_get(standin, kube):
    kube.create_object(KAI_PODGROUP, {"metadata": {"name": "pg-wl-1"}, "spec": {"minMember": 4, "queue": "training"}},
                       namespace="team-a")
    condition = {"type": "NotReady", "reason": "Unschedulable", "message": "4 pods need 32 GPUs, 8 free"}

    standin.modify_object(KAI_PODGROUP, "pg-wl-1", {"status": {"schedulingConditions": [condition]}},
                          namespace="team-a")

    status = kube.get_object(KAI_PODGROUP, "pg-wl-1", namespace="team-a")["status"]
    assert status["schedulingConditions"] == [condition]


def test_an_object_with_finalizers_is_only_marked_until_they_are_removed(standin, kube):
    body = {"metadata": {"name": "wl-1", "finalizers": ["kueue.x-k8s.io/resource-in-use"]}, "spec": {}}
    kube.create_object(KUEUE_WORKLOAD, body, namespace="team-a")

    kube.delete_object(KUEUE_WORKLOAD, "wl-1", namespace="team-a")
    marked = kube.get_object(KUEUE_WORKLOAD, "wl-1", namespace="team-a")
    standin.modify_object(KUEUE_WORKLOAD, "wl-1", {"metadata": {"finalizers": None}}, namespace="team-a")

    assert marked["metadata"]["deletionTimestamp"]
    with pytest.raises(NotFound):
        kube.get_object(KUEUE_WORKLOAD, "wl-1", namespace="team-a")


# Watches


def test_a_watch_sees_objects_added_modified_and_deleted(standin, kube):
    kube.create_object(KAI_QUEUE, queue("training"))
    version = kube.list_objects(KAI_QUEUE).resource_version

    kube.create_object(KAI_QUEUE, queue("inference"))
    standin.modify_object(KAI_QUEUE, "training", {"status": {"allocated": {"gpu": 8}}})
    kube.delete_object(KAI_QUEUE, "inference")
    events = take(kube.watch_objects(KAI_QUEUE, version, timeout_seconds=HANG), 3)

    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "inference"), ("MODIFIED", "training"), ("DELETED", "inference")]
    assert events[1].object["status"] == {"allocated": {"gpu": 8}}
    assert int(events[-1].resource_version) > int(version)
    watch = standin.requests_to(QUEUES, watch=True)[0]
    assert watch.query == {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true",
                           "timeoutSeconds": str(HANG)}


def test_a_watch_of_every_namespace_follows_the_selected_objects_as_they_change(standin, kube):
    kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-a")
    version = kube.list_objects(KUEUE_LOCAL_QUEUE, label_selector="runwhere.ai/pool=training").resource_version
    events = kube.watch_objects(KUEUE_LOCAL_QUEUE, version, label_selector="runwhere.ai/pool=training",
                                timeout_seconds=HANG)

    def change():
        standin.wait_for_watches()
        kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default", "inference"), namespace="team-b")
        kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-c")
        kube.patch_object(KUEUE_LOCAL_QUEUE, "default", {"spec": {"stopPolicy": "Hold"}}, namespace="team-a")

    later(0, change)
    seen = take(events, 2)

    assert [(e.type, e.object["metadata"]["namespace"]) for e in seen] == [("ADDED", "team-c"), ("MODIFIED", "team-a")]


def test_a_watch_of_one_namespace_sees_only_that_namespace(standin, kube):
    version = standin.resource_version
    standin.add_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-b")
    standin.add_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-a")

    (event,) = take(kube.watch_objects(KUEUE_LOCAL_QUEUE, version, namespace="team-a", timeout_seconds=HANG), 1)

    assert event.object["metadata"]["namespace"] == "team-a"
    assert standin.requests_to("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues", watch=True)


def test_bookmarks_of_a_custom_kind_carry_its_kind_and_api_version(standin, kube):
    kube.create_object(KAI_QUEUE, queue("training"))
    events = kube.watch_objects(KAI_QUEUE, standin.resource_version, timeout_seconds=HANG)

    def bookmark():
        standin.wait_for_watches()
        standin.bookmark()

    later(0, bookmark)
    (event,) = take(events, 1)

    assert event.object == {"kind": "Queue", "apiVersion": "scheduling.run.ai/v2",
                            "metadata": {"resourceVersion": standin.resource_version}}


def test_a_watch_from_a_compacted_version_raises_expired(standin, kube):
    kube.create_object(KAI_QUEUE, queue("inference"))
    version = kube.list_objects(KAI_QUEUE).resource_version
    kube.create_object(KAI_QUEUE, queue("training"))
    standin.compact()

    with pytest.raises(Expired) as caught:
        list(kube.watch_objects(KAI_QUEUE, version, timeout_seconds=HANG))

    assert caught.value.status == 410
    assert str(caught.value).startswith("watching queues.scheduling.run.ai: HTTP 410 too old resource version")
    assert names(kube.list_objects(KAI_QUEUE).items) == ["inference", "training"]


def test_an_in_stream_410_raises_expired(standin, kube):
    kube.create_object(KAI_QUEUE, queue("a"))
    kube.create_object(KAI_QUEUE, queue("b"))
    standin.error_next_watch(410, after=1, path_prefix=QUEUES)
    events = kube.watch_objects(KAI_QUEUE, "0", timeout_seconds=HANG)

    assert next(events).object["metadata"]["name"] == "a"
    with pytest.raises(Expired):
        next(events)


# Faults


@pytest.mark.parametrize("call", [
    lambda kube: kube.list_objects(KUEUE_LOCAL_QUEUE),
    lambda kube: kube.get_object(KUEUE_LOCAL_QUEUE, "default", namespace="team-a"),
    lambda kube: kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("default"), namespace="team-a"),
    lambda kube: kube.patch_object(KUEUE_LOCAL_QUEUE, "default", {"spec": {}}, namespace="team-a"),
    lambda kube: kube.delete_object(KUEUE_LOCAL_QUEUE, "default", namespace="team-a"),
    lambda kube: list(kube.watch_objects(KUEUE_LOCAL_QUEUE, "0", timeout_seconds=HANG)),
])
def test_a_server_error_raises_unavailable(standin, kube, call):
    standin.fail_next(status=500, path_prefix="/apis/kueue.x-k8s.io/", message="etcdserver: request timed out")

    with pytest.raises(Unavailable) as caught:
        call(kube)

    assert caught.value.status == 500
    assert str(caught.value).endswith("HTTP 500 etcdserver: request timed out")
    assert kube.list_objects(KUEUE_LOCAL_QUEUE).items == []
