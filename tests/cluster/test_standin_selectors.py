"""The stand-in API server reads label and field selectors as a kube-apiserver does, through the real `kubernetes`
client: the examples of the Kubernetes documentation ("Labels and Selectors"), the messages of a real server's
400s for malformed selectors and unsupported field labels, and watches that turn an object entering or leaving
their selection into ADDED or DELETED."""

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from pools.cluster import ClusterError
from pools.cluster.kinds import KAI_QUEUE, KUEUE_LOCAL_QUEUE
from tests.cluster.test_custom_objects import local_queue, queue
from tests.cluster.test_kube_cluster import take
from tests.kube_objects import make_node, make_pod
from tests.kube_standin import HANG

# The labels of the documentation's examples, on five nodes.
LABELLED = {
    "n1": {"environment": "production", "tier": "frontend", "partition": "customerA"},
    "n2": {"environment": "production", "tier": "backend"},
    "n3": {"environment": "qa", "tier": "cache", "partition": "customerB"},
    "n4": {"environment": "dev"},
    "n5": {},
}


@pytest.fixture
def nodes(standin):
    for name, labels in LABELLED.items():
        standin.add_node(make_node(name, labels=labels))


def node_names(kube_api, **selectors):
    return sorted(node.metadata.name for node in k8s.CoreV1Api(kube_api).list_node(**selectors).items)


def refusal(call, *args, **kwargs) -> tuple[int, str]:
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    body = json.loads(caught.value.body)
    assert body["kind"] == "Status" and body["code"] == caught.value.status
    return caught.value.status, body["message"]


@pytest.mark.parametrize(("selector", "selected"), [
    ("environment = production", ["n1", "n2"]),
    ("tier != frontend", ["n2", "n3", "n4", "n5"]),
    ("environment=production,tier!=frontend", ["n2"]),
    ("environment==production", ["n1", "n2"]),
    ("environment in (production, qa)", ["n1", "n2", "n3"]),
    ("tier notin (frontend, backend)", ["n3", "n4", "n5"]),
    ("partition", ["n1", "n3"]),
    ("!partition", ["n2", "n4", "n5"]),
    ("partition,environment notin (qa)", ["n1"]),
    ("  environment  in(production),  tier  ", ["n1", "n2"]),
    ("", ["n1", "n2", "n3", "n4", "n5"]),
])
def test_it_selects_nodes_by_the_label_selectors_of_the_kubernetes_documentation(kube_api, nodes, selector, selected):
    assert node_names(kube_api, label_selector=selector) == selected


@pytest.mark.parametrize(("selector", "message"), [
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("environment in production", "unable to parse requirement: found 'production' expected: '('"),
    ("environment in (production", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("=production", "found '=', expected: !, identifier, or 'end of string'"),
    ("environment,", "found '', expected: identifier after ','"),
    ("environment production", "unable to parse requirement: found 'production', expected: in, notin, =, ==, !=, "
                               "gt, lt"),
    ("-ltier=x", "unable to parse requirement: <nil>: Invalid value: \"-ltier\": name part must consist of"),
    ("tier=front end", "found 'end', expected: ',' or 'end of string'"),
    ("tier=-frontend", "unable to parse requirement: values[0][tier]: Invalid value: \"-frontend\": a valid label"),
])
def test_it_refuses_a_malformed_label_selector_with_a_400_as_a_real_server(kube_api, nodes, selector, message):
    status, text = refusal(k8s.CoreV1Api(kube_api).list_node, label_selector=selector)
    assert status == 400
    assert text.startswith(message)


def test_a_set_based_selector_takes_empty_values_and_keywords_as_values(kube_api, standin):
    standin.add_node(make_node("keyword", labels={"mode": "in"}))
    standin.add_node(make_node("empty", labels={"mode": ""}))
    standin.add_node(make_node("other", labels={"mode": "out"}))
    assert node_names(kube_api, label_selector="mode in (in)") == ["keyword"]
    assert node_names(kube_api, label_selector="mode in (in,)") == ["empty", "keyword"]
    assert node_names(kube_api, label_selector="mode=") == ["empty"]
    assert node_names(kube_api, label_selector="mode notin ()") == ["keyword", "other"]


def test_a_selective_list_of_the_product_refuses_a_malformed_selector_too(kube, standin):
    with pytest.raises(ClusterError) as caught:
        kube.list_jobs("a=b=c")
    assert caught.value.status == 400
    with pytest.raises(ClusterError) as caught:
        list(kube.watch_jobs("a in b", "0", timeout_seconds=HANG))
    assert caught.value.status == 400


# Field selectors


@pytest.fixture
def pods(standin):
    standin.add_pod(make_pod("trainer", "gpu-1", namespace="team-a"))
    standin.add_pod(make_pod("waiting", None, namespace="team-a", phase="Pending"))
    standin.add_pod(make_pod("server", "gpu-2", namespace="team-b"))


def pod_names(kube_api, **selectors):
    return sorted(pod.metadata.name for pod in k8s.CoreV1Api(kube_api).list_pod_for_all_namespaces(**selectors).items)


@pytest.mark.parametrize(("selector", "selected"), [
    ("spec.nodeName=gpu-1", ["trainer"]),
    ("spec.nodeName=", ["waiting"]),
    ("status.phase=Pending", ["waiting"]),
    ("status.phase!=Pending", ["server", "trainer"]),
    ("metadata.namespace==team-a,status.phase=Running", ["trainer"]),
    ("metadata.name=server", ["server"]),
    ("spec.host=gpu-2", ["server"]),  # old clients' name for spec.nodeName, still accepted
])
def test_it_selects_pods_by_the_fields_a_real_server_supports(kube_api, pods, selector, selected):
    assert pod_names(kube_api, field_selector=selector) == selected


def test_field_and_label_selectors_combine(kube_api, standin, pods):
    standin.add_pod(make_pod("labelled", "gpu-1", namespace="team-a", labels={"app": "x"}))
    assert pod_names(kube_api, field_selector="spec.nodeName=gpu-1", label_selector="app") == ["labelled"]


@pytest.mark.parametrize(("list_call", "selector", "message"), [
    ("list_pod_for_all_namespaces", "spec.containers=x", "field label not supported: spec.containers"),
    ("list_pod_for_all_namespaces", "metadata.name = server", "field label not supported: metadata.name "),
    ("list_node", "metadata.namespace=default", "field label not supported: metadata.namespace"),
    ("list_node", "metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
    ("list_node", "metadata.name=a=b", "invalid field selector: unescapedRune character in value: 61"),
])
def test_it_refuses_an_unsupported_or_malformed_field_selector_with_a_400(kube_api, pods, list_call, selector, message):
    assert refusal(getattr(k8s.CoreV1Api(kube_api), list_call), field_selector=selector) == (400, message)


def test_nodes_are_selected_by_name_and_by_unschedulable(kube_api, standin):
    standin.add_node(make_node("cordoned", unschedulable=True))
    standin.add_node(make_node("open"))
    assert node_names(kube_api, field_selector="spec.unschedulable=true") == ["cordoned"]
    assert node_names(kube_api, field_selector="spec.unschedulable=false") == ["open"]
    assert node_names(kube_api, field_selector="metadata.name!=open") == ["cordoned"]


def test_jobs_are_selected_by_the_fields_of_a_job_and_refuse_others_with_the_jobs_message(kube_api, kube, standin):
    for name in ("done", "running"):
        kube.create_job("team-a", {"metadata": {"name": name}, "spec": {"template": {"spec": {
            "containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}}}})
    standin.modify_job("done", {"status": {"succeeded": 1}}, namespace="team-a")
    jobs = k8s.BatchV1Api(kube_api)

    listed = jobs.list_job_for_all_namespaces(field_selector="status.successful=1").items
    assert [job.metadata.name for job in listed] == ["done"]
    listed = jobs.list_job_for_all_namespaces(field_selector="metadata.namespace=team-a,metadata.name=running").items
    assert [job.metadata.name for job in listed] == ["running"]
    assert refusal(jobs.list_job_for_all_namespaces, field_selector="spec.parallelism=1") == (
        400, 'field label "spec.parallelism" not supported for Job')


def test_custom_objects_take_metadata_name_and_namespace_only_where_the_kind_is_namespaced(kube_api, kube):
    kube.create_object(KAI_QUEUE, queue("research"))
    kube.create_object(KAI_QUEUE, queue("vision"))
    kube.create_object(KUEUE_LOCAL_QUEUE, local_queue("lq"), namespace="team-a")
    objects = k8s.CustomObjectsApi(kube_api)

    queues = objects.list_cluster_custom_object("scheduling.run.ai", "v2", "queues",
                                                field_selector="metadata.name=vision")
    assert [item["metadata"]["name"] for item in queues["items"]] == ["vision"]
    local = objects.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "localqueues",
                                               field_selector="metadata.namespace=team-a")
    assert [item["metadata"]["name"] for item in local["items"]] == ["lq"]
    assert refusal(objects.list_cluster_custom_object, "scheduling.run.ai", "v2", "queues",
                   field_selector="metadata.namespace=x") == (400, "field label not supported: metadata.namespace")
    assert refusal(objects.list_cluster_custom_object, "scheduling.run.ai", "v2", "queues",
                   field_selector="spec.parentQueue=x") == (400, "field label not supported: spec.parentQueue")


# Watches: entering and leaving the selection


def test_a_selective_watch_sees_an_object_enter_as_added_and_leave_as_deleted(kube, standin):
    ours = "runwhere.ai/workload"
    kube.create_job("team-a", {"metadata": {"name": "wl", "labels": {"app": "x"}},
                               "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                              "containers": [{"name": "main", "image": "i"}]}}}})
    version = kube.list_jobs(ours).resource_version
    standin.modify_job("wl", {"metadata": {"labels": {ours: "1"}}}, namespace="team-a")  # enters
    standin.modify_job("wl", {"status": {"active": 1}}, namespace="team-a")  # stays
    standin.modify_job("wl", {"metadata": {"labels": {ours: None}}}, namespace="team-a")  # leaves
    standin.modify_job("wl", {"status": {"active": 0}}, namespace="team-a")  # unseen
    standin.modify_job("wl", {"metadata": {"labels": {ours: "2"}}}, namespace="team-a")  # enters again
    kube.delete_job("team-a", "wl")

    events = take(kube.watch_jobs(ours, version, timeout_seconds=HANG), 5)

    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED", "ADDED", "DELETED"]
    left = events[2].object
    # The object as the watch last saw it (still labelled), at the version of the change that took it out.
    assert left["metadata"]["labels"][ours] == "1"
    assert left["status"] == {"active": 1}
    versions = [int(e.resource_version) for e in events]
    assert versions == sorted(versions) and versions[0] > int(version)


def test_a_field_selective_watch_sees_a_pod_leave_when_its_phase_changes(kube_api, standin):
    from kubernetes import watch

    standin.add_pod(make_pod("trainer", "gpu-1", phase="Pending"))
    version = standin.resource_version
    standin.modify_pod("trainer", {"status": {"phase": "Running"}})
    standin.modify_pod("trainer", {"status": {"phase": "Pending"}})
    stream = watch.Watch().stream(k8s.CoreV1Api(kube_api).list_pod_for_all_namespaces,
                                  field_selector="status.phase=Pending", resource_version=version, timeout_seconds=1)
    events = [(event["type"], event["object"].status.phase) for event in stream]
    assert events == [("DELETED", "Pending"), ("ADDED", "Pending")]
