"""The stand-in API server updates objects as a kube-apiserver does, through the real `kubernetes` client:
optimistic concurrency (a stale metadata.resourceVersion is a 409 Conflict), identity that cannot change (name,
namespace, uid), and the two patch formats: JSON merge patch (RFC 7386) and strategic merge patch (lists merged
by their Kubernetes merge keys, for built-in kinds only)."""

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from pools.cluster.kinds import KAI_QUEUE
from tests.cluster.test_custom_objects import queue
from tests.kube_objects import make_node
from tests.kube_patches import merge_patch, strategic_merge_patch

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
STALE = "the object has been modified; please apply your changes to the latest version and try again"


@pytest.fixture
def batch_api(kube_api):
    return k8s.BatchV1Api(kube_api)


def job_body(name: str, **metadata) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, **metadata},
            "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}],
                                           "restartPolicy": "Never"}}}}


def refusal(call, *args, **kwargs) -> dict:
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    body = json.loads(caught.value.body)
    assert body["code"] == caught.value.status
    return body


# Optimistic concurrency


def test_a_replace_from_a_stale_read_is_refused_with_409_conflict_and_a_fresh_one_is_applied(standin, kube, batch_api):
    batch_api.create_namespaced_job("team-a", job_body("x"))
    stale = kube.get_job("team-a", "x")
    standin.modify_job("x", {"status": {"active": 1}}, namespace="team-a")  # the Job controller wrote meanwhile

    stale["metadata"]["labels"] = {"team": "a"}
    status = refusal(batch_api.replace_namespaced_job, "x", "team-a", stale)

    assert status["reason"] == "Conflict" and status["code"] == 409
    assert status["message"] == f'Operation cannot be fulfilled on jobs.batch "x": {STALE}'
    assert status["details"] == {"name": "x", "group": "batch", "kind": "jobs"}
    assert "labels" not in standin.job("x", namespace="team-a")["metadata"]
    fresh = kube.get_job("team-a", "x")
    fresh["metadata"]["labels"] = {"team": "a"}
    replaced = batch_api.replace_namespaced_job("x", "team-a", fresh)
    assert replaced.metadata.labels == {"team": "a"}
    assert int(replaced.metadata.resource_version) > int(fresh["metadata"]["resourceVersion"])


def test_a_patch_carrying_a_stale_resource_version_is_refused_and_one_without_is_applied(standin, kube, batch_api):
    created = batch_api.create_namespaced_job("team-a", job_body("x"))
    standin.modify_job("x", {"status": {"active": 1}}, namespace="team-a")

    status = refusal(batch_api.patch_namespaced_job, "x", "team-a", {"metadata": {
        "resourceVersion": created.metadata.resource_version, "labels": {"team": "a"}}}, _content_type=MERGE)
    assert (status["code"], status["reason"]) == (409, "Conflict")
    current = standin.job("x", namespace="team-a")["metadata"]["resourceVersion"]
    conditional = batch_api.patch_namespaced_job("x", "team-a", {"metadata": {"resourceVersion": current,
                                                                         "labels": {"team": "a"}}},
                                            _content_type=MERGE)
    unconditional = batch_api.patch_namespaced_job("x", "team-a", {"metadata": {"labels": {"tier": "b"}}},
                                              _content_type=STRATEGIC)
    assert conditional.metadata.labels == {"team": "a"}
    assert unconditional.metadata.labels == {"team": "a", "tier": "b"}


def test_a_node_patch_with_a_stale_resource_version_is_a_conflict(standin, kube, kube_api):
    stale = standin.add_node(make_node("gpu-1"))["metadata"]["resourceVersion"]
    kube.set_unschedulable("gpu-1", True)
    status = refusal(k8s.CoreV1Api(kube_api).patch_node, "gpu-1",
                     {"metadata": {"resourceVersion": stale, "labels": {"a": "b"}}}, _content_type=MERGE)
    assert (status["code"], status["message"]) == (409, f'Operation cannot be fulfilled on nodes "gpu-1": {STALE}')
    assert status["details"] == {"name": "gpu-1", "kind": "nodes"}
    assert "a" not in standin.node("gpu-1")["metadata"].get("labels", {})


def test_a_custom_object_is_replaced_only_with_its_current_resource_version(standin, kube, kube_api):
    objects = k8s.CustomObjectsApi(kube_api)
    created = kube.create_object(KAI_QUEUE, queue("research"))
    kube.patch_object(KAI_QUEUE, "research", {"spec": {"resources": {"gpu": {"quota": 4}}}})
    body = {**created, "spec": {"resources": {"gpu": {"quota": 2, "limit": -1, "overQuotaWeight": 1}}}}

    stale = refusal(objects.replace_cluster_custom_object, "scheduling.run.ai", "v2", "queues", "research", body)
    unversioned = refusal(objects.replace_cluster_custom_object, "scheduling.run.ai", "v2", "queues", "research",
                          {**body, "metadata": {"name": "research"}})
    current = standin.object(KAI_QUEUE, "research")["metadata"]["resourceVersion"]
    replaced = objects.replace_cluster_custom_object(
        "scheduling.run.ai", "v2", "queues", "research",
        {**body, "metadata": {"name": "research", "resourceVersion": current}})

    assert (stale["code"], stale["message"]) == (
        409, f'Operation cannot be fulfilled on queues.scheduling.run.ai "research": {STALE}')
    # Custom resources allow no unconditional update (built-in kinds do).
    assert (unversioned["code"], unversioned["message"]) == (
        422, 'queues.scheduling.run.ai "research" is invalid: metadata.resourceVersion: Invalid value: 0x0: must '
             "be specified for an update")
    assert replaced["spec"]["resources"]["gpu"]["quota"] == 2
    # What the server owns stays: uid, creation time, and a generation that counts spec changes.
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    assert replaced["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert replaced["metadata"]["generation"] == 3


# Identity


def test_a_replace_naming_another_object_is_refused_with_400(standin, kube, batch_api):
    batch_api.create_namespaced_job("team-a", job_body("x"))
    body = kube.get_job("team-a", "x")
    body["metadata"]["name"] = "y"
    status = refusal(batch_api.replace_namespaced_job, "x", "team-a", body)
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == "the name of the object (y) does not match the name on the URL (x)"


def test_a_patch_cannot_rename_move_or_change_the_uid_of_an_object(standin, batch_api):
    created = batch_api.create_namespaced_job("team-a", job_body("x"))
    version = created.metadata.resource_version

    renamed = refusal(batch_api.patch_namespaced_job, "x", "team-a", {"metadata": {"name": "y"}}, _content_type=MERGE)
    moved = refusal(batch_api.patch_namespaced_job, "x", "team-a", {"metadata": {"namespace": "team-b"}},
                    _content_type=STRATEGIC)
    new_uid = refusal(batch_api.patch_namespaced_job, "x", "team-a", {"metadata": {"uid": "00000000-0000-0000-0000-0"}},
                      _content_type=MERGE)

    assert (renamed["code"], renamed["message"]) == (
        400, "the name of the object (y) does not match the name on the URL (x)")
    assert (moved["code"], moved["message"]) == (
        400, "the namespace of the provided object does not match the namespace sent on the request")
    assert (new_uid["code"], new_uid["reason"]) == (422, "Invalid")
    assert new_uid["message"] == ('Job.batch "x" is invalid: metadata.uid: Invalid value: '
                                  '"00000000-0000-0000-0000-0": field is immutable')
    assert standin.job("x", namespace="team-a")["metadata"]["resourceVersion"] == version


def test_a_replace_without_uid_or_creation_time_keeps_them(standin, kube, batch_api):
    created = batch_api.create_namespaced_job("team-a", job_body("x"))
    body = kube.get_job("team-a", "x")
    for server_owned in ("uid", "creationTimestamp", "generation"):
        del body["metadata"][server_owned]
    replaced = batch_api.replace_namespaced_job("x", "team-a", {**body, "metadata": {**body["metadata"],
                                                                                 "labels": {"a": "b"}}})
    assert replaced.metadata.uid == created.metadata.uid
    assert replaced.metadata.creation_timestamp == created.metadata.creation_timestamp
    assert replaced.metadata.generation == 1  # labels are metadata: no new generation


def test_a_create_whose_namespace_is_not_the_urls_is_refused_not_moved(standin, batch_api):
    status = refusal(batch_api.create_namespaced_job, "team-a", job_body("x", namespace="team-b"))
    assert (status["code"], status["message"]) == (
        400, "the namespace of the provided object does not match the namespace sent on the request")
    assert standin.jobs() == []


# Patch formats


def test_a_node_takes_both_patch_formats_with_a_strategic_merge_of_finalizers_and_owner_references(standin, kube_api):
    nodes = k8s.CoreV1Api(kube_api)
    taint = {"key": "gpu", "value": "broken", "effect": "NoSchedule"}
    standin.add_node(make_node("gpu-1", labels={"keep": "1", "drop": "1"}, taints=[taint]))
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "uid-a"}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "uid-b"}

    nodes.patch_node("gpu-1", {"metadata": {"labels": {"drop": None, "new": "1"}, "finalizers": ["a/x"],
                                            "ownerReferences": [owner]}}, _content_type=STRATEGIC)
    nodes.patch_node("gpu-1", {"metadata": {"finalizers": ["b/y"], "ownerReferences": [other]}},
                     _content_type=STRATEGIC)
    merged = standin.node("gpu-1")["metadata"]
    nodes.patch_node("gpu-1", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"],
                                            "ownerReferences": [{"uid": "uid-a", "$patch": "delete"}]},
                               "spec": {"taints": [{"key": "other", "effect": "NoExecute"}]}},
                     _content_type=STRATEGIC)
    deleted = standin.node("gpu-1")
    nodes.patch_node("gpu-1", {"metadata": {"finalizers": ["c/z"]}}, _content_type=MERGE)

    assert merged["labels"]["keep"] == "1" and merged["labels"]["new"] == "1" and "drop" not in merged["labels"]
    assert merged["finalizers"] == ["a/x", "b/y"]
    assert merged["ownerReferences"] == [owner, other]
    assert deleted["metadata"]["finalizers"] == ["b/y"]
    assert deleted["metadata"]["ownerReferences"] == [other]
    # spec.taints declares no patch strategy in the Kubernetes types: a strategic merge patch replaces it.
    assert deleted["spec"]["taints"] == [{"key": "other", "effect": "NoExecute"}]
    # A JSON merge patch replaces every list.
    assert standin.node("gpu-1")["metadata"]["finalizers"] == ["c/z"]


def test_a_custom_object_refuses_a_strategic_merge_patch_with_415_as_a_real_server(standin, kube, kube_api):
    kube.create_object(KAI_QUEUE, queue("research"))
    status = refusal(k8s.CustomObjectsApi(kube_api).patch_cluster_custom_object, "scheduling.run.ai", "v2", "queues",
                     "research", {"spec": {"priority": 1}}, _content_type=STRATEGIC)
    assert (status["code"], status["reason"]) == (415, "UnsupportedMediaType")
    assert STRATEGIC not in status["message"]


def test_a_custom_object_takes_a_json_merge_patch_that_removes_what_it_nulls(standin, kube, kube_api):
    kube.create_object(KAI_QUEUE, queue("research"))
    patched = k8s.CustomObjectsApi(kube_api).patch_cluster_custom_object(
        "scheduling.run.ai", "v2", "queues", "research",
        {"spec": {"parentQueue": "root", "resources": {"gpu": {"limit": None}}}}, _content_type=MERGE)
    assert patched["spec"] == {"parentQueue": "root", "resources": {"gpu": {"quota": 8, "overQuotaWeight": 1}}}


def test_the_json_merge_patch_is_rfc_7386s_example():
    target = {"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
              "tags": ["example", "sample"], "content": "This will be unchanged"}
    patch = {"title": "Hello!", "phoneNumber": "+01-234-567-8901", "author": {"familyName": None},
             "tags": ["example"]}
    assert merge_patch(target, patch) == {"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
                                          "content": "This will be unchanged", "phoneNumber": "+01-234-567-8901"}


def test_a_strategic_merge_patch_merges_a_pods_containers_and_their_env_by_name_and_replaces_tolerations():
    pod = {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "main", "image": "a",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                       {"name": "sidecar", "image": "s"}],
        "tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    patch = {"spec": {"containers": [{"name": "main", "image": "b", "env": [{"name": "B", "value": "3"},
                                                                           {"name": "C", "value": "4"}]},
                                     {"name": "extra", "image": "e"}],
                      "tolerations": [{"key": "other", "operator": "Exists"}]}}

    patched = strategic_merge_patch(pod, patch, "Pod")
    replaced = strategic_merge_patch(pod, {"spec": {"containers": [{"$patch": "replace"}, {"name": "only"}],
                                                    "tolerations": None}}, "Pod")

    assert patched["spec"]["containers"] == [
        {"name": "main", "image": "b", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                                               {"name": "C", "value": "4"}]},
        {"name": "sidecar", "image": "s"}, {"name": "extra", "image": "e"}]
    assert patched["spec"]["tolerations"] == [{"key": "other", "operator": "Exists"}]
    assert replaced["spec"] == {"containers": [{"name": "only"}]}
    assert pod["spec"]["containers"][0]["image"] == "a"  # the stored object is not modified
    # A JSON merge patch of the same body replaces the list of containers.
    assert [c["name"] for c in merge_patch(pod, patch)["spec"]["containers"]] == ["main", "extra"]
