"""The stand-in API server refuses what a real kube-apiserver refuses (tests/kube_rules.py), as the real
`kubernetes` client sees it: a 422 Status naming the field, or a 404 for a kind whose CRD is not installed."""

import json

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from pools.cluster.kinds import KAI_TOPOLOGY
from tests.kube_rules import CRDsMissing, Invalid
from tests.kube_standin import KubeStandin

MERGE = "application/merge-patch+json"


def refusal(call, *args, **kwargs) -> dict:
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    body = json.loads(caught.value.body)
    assert caught.value.status == body["code"]
    return body


def job(name: str, labels: dict | None = None, image: str = "busybox") -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": labels or {}},
                                  "spec": {"containers": [{"name": "main", "image": image}],
                                           "restartPolicy": "Never"}}}}


def test_it_refuses_a_namespace_labelled_with_a_project_name_over_63_characters(kube_api):
    project = "vision-long-" + "x" * 58

    body = refusal(client.CoreV1Api(kube_api).create_namespace,
                   {"metadata": {"name": "team-vision", "labels": {"runwhere.ai/project": project}}})

    assert body["reason"] == "Invalid" and body["code"] == 422
    assert body["message"] == (f'Namespace "team-vision" is invalid: metadata.labels: Invalid value: "{project}": '
                               "must be no more than 63 bytes")
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.labels",
                                          "message": f'Invalid value: "{project}": must be no more than 63 bytes'}]


def test_it_refuses_a_namespace_name_that_is_no_dns_label(kube_api, standin):
    body = refusal(client.CoreV1Api(kube_api).create_namespace, {"metadata": {"name": "Team_A"}})

    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert "a lowercase RFC 1123 label must consist of" in body["message"]
    assert standin._collections["namespaces"].objects == {}


def test_it_refuses_a_job_whose_pods_carry_a_65_character_platform_name(kube_api, standin):
    platform = "p" * 65

    body = refusal(client.BatchV1Api(kube_api).create_namespaced_job, "team-a",
                   job("wl-1", {"runwhere.ai/platform": platform}))

    assert body["message"] == (f'Job.batch "wl-1" is invalid: spec.template.labels: Invalid value: "{platform}": '
                               "must be no more than 63 bytes")
    assert standin.jobs() == []


def test_it_refuses_a_job_name_too_long_for_the_job_name_label_of_its_pods(kube_api):
    name = "w" * 64

    body = refusal(client.BatchV1Api(kube_api).create_namespaced_job, "team-a", job(name))

    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec.template.labels",
         "message": f'Invalid value: "{name}": must be no more than 63 bytes'}] * 2


def test_a_job_name_of_63_characters_is_accepted(kube_api, standin):
    client.BatchV1Api(kube_api).create_namespaced_job("team-a", job("w" * 63))

    assert standin.job("w" * 63, namespace="team-a")["metadata"]["name"] == "w" * 63


def test_it_refuses_a_change_to_a_jobs_template_after_creation_and_accepts_one_to_its_parallelism(kube_api, standin):
    batch = client.BatchV1Api(kube_api)
    batch.create_namespaced_job("team-a", job("wl-1"))
    changed = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}}}

    body = refusal(batch.patch_namespaced_job, "wl-1", "team-a", changed, _content_type=MERGE)
    batch.patch_namespaced_job("wl-1", "team-a", {"spec": {"parallelism": 2}}, _content_type=MERGE)

    assert body["reason"] == "Invalid"
    assert [cause["field"] for cause in body["details"]["causes"]] == ["spec.template"]
    assert body["message"].endswith(": field is immutable")
    stored = standin.job("wl-1", namespace="team-a")
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    assert stored["spec"]["parallelism"] == 2


def test_it_refuses_annotations_over_256_kib_in_all(kube_api):
    annotations = {f"note-{i}": "n" * 65_536 for i in range(4)}

    body = refusal(client.CoreV1Api(kube_api).create_namespace,
                   {"metadata": {"name": "team-a", "annotations": annotations}})

    assert body["message"] == ('Namespace "team-a" is invalid: metadata.annotations: Too long: may not be more '
                               "than 262144 bytes")


def test_it_refuses_a_node_label_key_with_two_slashes(kube_api, standin):
    from tests.kube_objects import make_node

    standin.add_node(make_node("gpu-1"))

    body = refusal(client.CoreV1Api(kube_api).patch_node, "gpu-1", {"metadata": {"labels": {"a/b/c": "x"}}})

    assert body["details"]["causes"][0]["field"] == "metadata.labels"
    assert "a qualified name must consist of alphanumeric characters" in body["message"]
    assert "a/b/c" not in standin.node("gpu-1")["metadata"]["labels"]


def topology(levels: list[dict]) -> dict:
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "gb200"},
            "spec": {"levels": levels}}


def test_a_kai_topology_may_rename_its_aliases_but_not_change_its_node_labels(kube_api, standin):
    objects = client.CustomObjectsApi(kube_api)
    levels = [{"nodeLabel": "nvidia.com/gpu.clique"}, {"nodeLabel": "kubernetes.io/hostname"}]
    objects.create_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", topology(levels))
    aliased = [{"nodeLabel": "nvidia.com/gpu.clique", "alias": "nvlink"}, {"nodeLabel": "kubernetes.io/hostname"}]
    relabelled = [{"nodeLabel": "topology.kubernetes.io/zone"}, {"nodeLabel": "kubernetes.io/hostname"}]

    objects.patch_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", "gb200",
                                        {"spec": {"levels": aliased}}, _content_type=MERGE)
    body = refusal(objects.patch_cluster_custom_object, "kai.scheduler", "v1alpha1", "topologies", "gb200",
                   {"spec": {"levels": relabelled}}, _content_type=MERGE)

    assert body["message"] == ('Topology.kai.scheduler "gb200" is invalid: spec.levels: Invalid value: "array": '
                               "nodeLabel structure is immutable; only aliases may be edited")
    assert body["details"] == {"name": "gb200", "group": "kai.scheduler", "kind": "Topology", "causes": [
        {"reason": "FieldValueInvalid", "field": "spec.levels",
         "message": 'Invalid value: "array": nodeLabel structure is immutable; only aliases may be edited'}]}
    assert standin.object("kai.scheduler/v1alpha1/topologies", "gb200")["spec"]["levels"] == aliased


def test_it_refuses_a_kai_topology_with_the_hostname_above_another_level(kube_api):
    levels = [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "nvidia.com/gpu.clique"}]

    body = refusal(client.CustomObjectsApi(kube_api).create_cluster_custom_object, "kai.scheduler", "v1alpha1",
                   "topologies", topology(levels))

    assert body["message"].endswith("the kubernetes.io/hostname label can only be used at the lowest level of "
                                    "topology")


def test_it_refuses_a_kai_queue_whose_quota_is_no_number_and_prunes_unknown_fields(kube_api, standin):
    objects = client.CustomObjectsApi(kube_api)
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "training"},
             "spec": {"resources": {"gpu": {"quota": "lots"}}}}

    body = refusal(objects.create_cluster_custom_object, "scheduling.run.ai", "v2", "queues", queue)
    queue["spec"] = {"resources": {"gpu": {"quota": 8}}, "displayNmae": "typo"}
    created = objects.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue)

    assert body["details"]["causes"][0] == {
        "reason": "FieldValueTypeInvalid", "field": "spec.resources.gpu.quota",
        "message": 'Invalid value: "lots": spec.resources.gpu.quota in body must be of type number: "string"'}
    assert created["spec"] == {"resources": {"gpu": {"quota": 8}}}
    assert standin.object("scheduling.run.ai/v2/queues", "training")["spec"] == created["spec"]


def test_it_refuses_a_kueue_cluster_queue_that_borrows_without_a_cohort(kube_api):
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "training"},
             "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                 {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4}]}
             ]}]}}

    body = refusal(client.CustomObjectsApi(kube_api).create_cluster_custom_object, "kueue.x-k8s.io", "v1beta2",
                   "clusterqueues", queue)

    assert body["message"] == ('ClusterQueue.kueue.x-k8s.io "training" is invalid: spec: Invalid value: "object": '
                               "borrowingLimit must be nil when cohort is empty")


def test_it_refuses_a_kueue_cluster_queue_with_an_unsupported_queueing_strategy(kube_api):
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "training"},
             "spec": {"queueingStrategy": "Random"}}

    body = refusal(client.CustomObjectsApi(kube_api).create_cluster_custom_object, "kueue.x-k8s.io", "v1beta2",
                   "clusterqueues", queue)

    assert body["details"]["causes"][0] == {
        "reason": "FieldValueNotSupported", "field": "spec.queueingStrategy",
        "message": 'Unsupported value: "Random": supported values: "StrictFIFO", "BestEffortFIFO"'}


def test_a_kueue_cluster_queue_is_stored_with_its_schema_defaults(kube_api):
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "training"},
             "spec": {}}

    created = client.CustomObjectsApi(kube_api).create_cluster_custom_object("kueue.x-k8s.io", "v1beta2",
                                                                        "clusterqueues", queue)

    assert created["spec"]["queueingStrategy"] == "BestEffortFIFO"


def test_a_kueue_local_queue_keeps_its_cluster_queue(kube_api):
    objects = client.CustomObjectsApi(kube_api)
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default"},
             "spec": {"clusterQueue": "training"}}
    objects.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team-a", "localqueues", local)

    body = refusal(objects.patch_namespaced_custom_object, "kueue.x-k8s.io", "v1beta2", "team-a", "localqueues",
                   "default", {"spec": {"clusterQueue": "inference"}}, _content_type=MERGE)

    assert body["details"]["causes"][0]["field"] == "spec.clusterQueue"
    assert body["details"]["causes"][0]["message"] == 'Invalid value: "string": field is immutable'


def test_it_answers_404_for_a_kind_whose_crd_is_not_installed_until_it_is(tmp_path):
    with KubeStandin(crds=()) as bare:
        api_client = config.new_client_from_config(bare.kubeconfig(tmp_path / "kubeconfig"))
        objects = client.CustomObjectsApi(api_client)

        body = refusal(objects.list_cluster_custom_object, "scheduling.run.ai", "v2", "queues")
        installed = bare.install_crds("queues.scheduling.run.ai")
        listed = objects.list_cluster_custom_object("scheduling.run.ai", "v2", "queues")
        still = refusal(objects.list_cluster_custom_object, "kueue.x-k8s.io", "v1beta2", "clusterqueues")
        api_client.close()

    assert body["code"] == 404 and body["message"] == "the server could not find the requested resource"
    assert installed == ["queues.scheduling.run.ai"]
    assert listed["items"] == []
    assert still["code"] == 404


def test_a_version_the_crd_does_not_serve_is_not_found(kube_api):
    body = refusal(client.CustomObjectsApi(kube_api).list_cluster_custom_object, "kueue.x-k8s.io", "v1alpha1",
                   "clusterqueues")

    assert body["code"] == 404


def test_the_test_helpers_write_through_the_same_rules(standin):
    from tests.kube_objects import make_node

    with pytest.raises(Invalid, match=r'^Node "gpu-1" is invalid: metadata.labels: Invalid value: "-x"'):
        standin.add_node(make_node("gpu-1", labels={"pool": "-x"}))
    with pytest.raises(Invalid, match=r"spec.levels: Invalid value: \"array\": nodeLabel must be unique"):
        standin.add_object(KAI_TOPOLOGY, topology([{"nodeLabel": "zone"}, {"nodeLabel": "zone"}]))
    with pytest.raises(LookupError, match="no CRD installed"):
        standin.add_object("example.com/v1/widgets", {"metadata": {"name": "w"}})


def test_a_stand_in_without_the_crds_it_was_asked_to_install_fails_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBE_CRD_DIR", str(tmp_path))

    with pytest.raises(CRDsMissing, match=f"no CustomResourceDefinitions under {tmp_path}.*KUBE_CRD_DIR"):
        KubeStandin()


def test_a_kueue_resource_flavor_keeps_its_topology_and_names_a_missing_field_as_cel_does(kube_api):
    objects = client.CustomObjectsApi(kube_api)
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
              "spec": {"topologyName": "gb200", "nodeLabels": {"nvidia.com/gpu.product": "H100"}}}
    objects.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", flavor)

    moved = refusal(objects.patch_cluster_custom_object, "kueue.x-k8s.io", "v1beta2", "resourceflavors", "h100",
                    {"spec": {"topologyName": "h100-racks"}}, _content_type=MERGE)
    unlabelled = refusal(objects.create_cluster_custom_object, "kueue.x-k8s.io", "v1beta2", "resourceflavors",
                         {**flavor, "metadata": {"name": "l40s"}, "spec": {"topologyName": "gb200"}})

    assert moved["message"].endswith('spec: Invalid value: "object": topologyName is immutable when topologyName '
                                     "is set")
    assert unlabelled["message"].endswith('spec: Invalid value: "object": no such key: nodeLabels evaluating rule: '
                                          "!has(self.topologyName) || self.nodeLabels.size() >= 1")


# ---- The built-in kinds of long-running workloads (issue 43), through the client's own typed APIs ----------

def deployment(name: str = "serve", **spec) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "main", "image": "busybox"}]}}, **spec}}


def service(name: str = "serve", port: int = 8000, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": "serve"}, "ports": [{"port": port, "targetPort": port}], **spec}}


def ingress(path: str = "/", host: str = "nb.example.org", **http_path) -> dict:
    backend = {"service": {"name": "serve", "port": {"number": 8000}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "serve"},
            "spec": {"rules": [{"host": host, "http": {"paths": [
                {"path": path, "pathType": "Prefix", "backend": backend, **http_path}]}}]}}


def test_deployments_services_and_ingresses_that_a_server_takes_are_taken(kube_api, standin):
    from pools.cluster.kinds import DEPLOYMENT, INGRESS, SERVICE

    client.AppsV1Api(kube_api).create_namespaced_deployment("team-a", deployment())
    client.CoreV1Api(kube_api).create_namespaced_service("team-a", service())
    client.NetworkingV1Api(kube_api).create_namespaced_ingress("team-a", ingress())
    assert [len(standin.objects(kind)) for kind in (DEPLOYMENT, SERVICE, INGRESS)] == [1, 1, 1]


@pytest.mark.parametrize("spec, field, words", [
    ({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}},
     "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0"),
    ({"selector": {"matchLabels": {"app": "other"}}}, "spec.template.metadata.labels",
     "`selector` does not match template `labels`"),
    ({"selector": {"matchLabels": {}}}, "spec.selector", "empty selector is invalid for deployment"),
    ({"replicas": -1}, "spec.replicas", "must be greater than or equal to 0")])
def test_it_refuses_a_deployment_a_server_refuses(kube_api, spec, field, words):
    body = refusal(client.AppsV1Api(kube_api).create_namespaced_deployment, "team-a", deployment(**spec))
    assert body["reason"] == "Invalid" and field in body["message"] and words in body["message"]


def test_it_refuses_a_deployment_whose_pods_do_not_restart_always(kube_api):
    body = deployment()
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    refused = refusal(client.AppsV1Api(kube_api).create_namespaced_deployment, "team-a", body)
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"' in \
        refused["message"]


def test_a_deployments_selector_is_immutable_and_its_template_is_not(kube_api, kube):
    """Through the product's own client (KubeCluster.patch_object: a JSON merge patch), as dispatch rolls one."""
    from pools.cluster import ClusterError
    from pools.cluster.kinds import DEPLOYMENT

    client.AppsV1Api(kube_api).create_namespaced_deployment("team-a", deployment())
    changed = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}}}
    patched = kube.patch_object(DEPLOYMENT, "serve", changed, namespace="team-a")
    assert patched["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:2"
    with pytest.raises(ClusterError) as refused:
        kube.patch_object(DEPLOYMENT, "serve", {"spec": {"selector": {"matchLabels": {"app": "other"}}}},
                          namespace="team-a")
    assert refused.value.status == 422 and "spec.selector" in refused.value.message
    assert "field is immutable" in refused.value.message


def test_it_refuses_a_statefulset_change_beyond_replicas_and_template(kube_api, kube):
    from pools.cluster import ClusterError
    from pools.cluster.kinds import STATEFULSET

    body = deployment("explore")
    body["kind"] = "StatefulSet"
    body["spec"]["serviceName"] = "explore"
    client.AppsV1Api(kube_api).create_namespaced_stateful_set("team-a", body)
    assert kube.patch_object(STATEFULSET, "explore", {"spec": {"replicas": 0}}, namespace="team-a")
    with pytest.raises(ClusterError) as refused:
        kube.patch_object(STATEFULSET, "explore", {"spec": {"serviceName": "other"}}, namespace="team-a")
    assert "updates to statefulset spec for fields other than 'replicas'" in refused.value.message


@pytest.mark.parametrize("body, field", [
    (service(port=0), "spec.ports[0].port"), (service("1serve"), "metadata.name"),
    ({**service(), "spec": {"selector": {"app": "serve"}}}, "spec.ports")])
def test_it_refuses_a_service_a_server_refuses(kube_api, body, field):
    refused = refusal(client.CoreV1Api(kube_api).create_namespaced_service, "team-a", body)
    assert refused["reason"] == "Invalid" and field in refused["message"], refused["message"]


def test_a_headless_service_needs_no_port_and_an_ingress_its_path_type(kube_api, kube, standin):
    from pools.cluster import ClusterError
    from pools.cluster.kinds import INGRESS, SERVICE

    client.CoreV1Api(kube_api).create_namespaced_service(
        "team-a", {**service(), "spec": {"selector": {"app": "serve"}, "clusterIP": "None"}})
    assert standin.objects(SERVICE)[0]["spec"]["clusterIP"] == "None"
    body = ingress()
    del body["spec"]["rules"][0]["http"]["paths"][0]["pathType"]
    with pytest.raises(ClusterError) as refused:  # the typed client would not send it: the product's client
        kube.create_object(INGRESS, body, namespace="team-a")
    assert "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified" in \
        refused.value.message


@pytest.mark.parametrize("body, field, words", [
    (ingress(path="nb"), "spec.rules[0].http.paths[0].path", "must be an absolute path"),
    (ingress(host="10.0.0.1"), "spec.rules[0].host", "must be a DNS name, not an IP address"),
    (ingress(host="NB.example.org"), "spec.rules[0].host", "RFC 1123 subdomain"),
    (ingress(pathType="Regex"), "spec.rules[0].http.paths[0].pathType", "supported values")])
def test_it_refuses_an_ingress_a_server_refuses(kube_api, body, field, words):
    refused = refusal(client.NetworkingV1Api(kube_api).create_namespaced_ingress, "team-a", body)
    assert field in refused["message"] and words in refused["message"], refused["message"]
