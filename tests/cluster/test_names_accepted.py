"""Every object we write, for every name the configuration accepts (the longest and oddest included), is accepted
by the API server: Namespaces, Jobs (KAI's and Kueue's), PodGroups, KAI Queues and Topologies, Kueue
ResourceFlavors, Cohorts, ClusterQueues and LocalQueues, built by the same code as in production and posted through
the real client to the stand-in. Beside the stand-in's own checks, each object is checked here against
Kubernetes' rules written out independently, the names objects use to refer to each other are checked to agree,
and the full names are read back from what we wrote."""

import dataclasses
import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pools.cluster.kinds import (
    KAI_PODGROUP,
    KAI_QUEUE,
    KAI_TOPOLOGY,
    KUEUE_CLUSTER_QUEUE,
    KUEUE_COHORT,
    KUEUE_LOCAL_QUEUE,
    KUEUE_RESOURCE_FLAVOR,
)
from pools.cluster.kube import KubeCluster
from pools.engine import kube_names
from pools.inventory.pods import pod_facts
from pools.quotas.documents import default_namespace
from pools.schedulers import kai, kueue
from scheduling.specs.jobs import MANAGED, MANAGED_VALUE, Attempt, Engine, job_manifest, podgroup_manifest
from tests.engine.test_kube_names import LONGEST, is_dns_label, is_label_value, is_subdomain, names
from tests.kube_standin import KubeStandin

PREFIX = "runwhere.ai/"
KEYS = [{"key": "zone", "label": "topology.kubernetes.io/zone"}, {"key": "rack", "label": "example.com/rack"}]
TEMPLATE = {"spec": {"containers": [{"name": "main", "image": "busybox", "resources": {
    "limits": {"nvidia.com/gpu": "1"}}}]}}
MAX_INDEX = 10 ** 10 - 1  # the pod of the highest completion index an Indexed Job of ours may have


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    standin = KubeStandin(strict_namespaces=True)
    cluster = KubeCluster.from_kubeconfig(standin.kubeconfig(tmp_path_factory.mktemp("names") / "kubeconfig"))
    yield standin, cluster, {}
    cluster.close()
    standin.close()
    assert not standin.server_errors, standin.server_errors[0]


def is_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (not prefix or is_subdomain(prefix)) and bool(name) and is_label_value(name)


def check_metadata(metadata: dict) -> None:
    for key, value in (metadata.get("labels") or {}).items():
        assert is_key(key) and is_label_value(value), (key, value)
    annotations = metadata.get("annotations") or {}
    assert all(is_key(key) for key in annotations), annotations
    assert sum(len(key) + len(value) for key, value in annotations.items()) <= 256 * 1024


def check_object(obj: dict) -> None:
    """Kubernetes' rules for the object's name (per kind), labels and annotations, and the pod template's."""
    metadata = obj["metadata"]
    name, kind = metadata["name"], obj["kind"]
    if kind in ("Namespace", "Job"):
        assert is_dns_label(name), (kind, name)
    else:
        assert is_subdomain(name), (kind, name)  # custom resources
    if kind == "Job":
        assert is_dns_label(f"{name}-{MAX_INDEX}")  # its pods' hostnames
        assert is_subdomain(f"{name}-{MAX_INDEX}-abcde")  # and names
        check_metadata(obj["spec"]["template"].get("metadata") or {})
    if "namespace" in metadata:
        assert is_dns_label(metadata["namespace"])
    check_metadata(metadata)


def post(server, kind, obj: dict, origin) -> None:
    """Create it unless an object of that name was made from the same names already; a name made from other names
    is a collision."""
    _, cluster, seen = server
    metadata = obj["metadata"]
    key = (kind, metadata.get("namespace", ""), metadata["name"])
    if key in seen:
        assert seen[key] == origin, f"{key} made from {seen[key]} and from {origin}"
        return
    seen[key] = origin
    if kind == "Namespace":
        assert cluster.ensure_namespace(metadata["name"], metadata["labels"], metadata.get("annotations"))
    elif kind == "Job":
        cluster.create_job(metadata["namespace"], obj)
    else:
        cluster.create_object(kind, obj, namespace=metadata.get("namespace"))


def full(obj: dict, key: str) -> str:
    return kube_names.full_value(obj["metadata"], PREFIX + key)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pool=names, department=names, project=names, platform=names, workload=st.uuids())
@example(pool=LONGEST[0], department=LONGEST[1], project=LONGEST[2], platform=LONGEST[3], workload=uuid.UUID(int=1))
@example(pool=LONGEST[4], department=LONGEST[5], project=LONGEST[5], platform=LONGEST[6], workload=uuid.UUID(int=2))
@example(pool="training", department="research", project="vision", platform="h100", workload=uuid.UUID(int=3))
@example(pool="shared_pool", department="R&D"[0], project="Vision.v2", platform="l40s_platform",
         workload=uuid.UUID(int=4))
def test_every_object_we_write_for_any_accepted_names_is_accepted(server, pool, department, project, platform,
                                                                  workload):
    namespace = default_namespace(project)
    labels, annotations = kube_names.labelled(PREFIX, {MANAGED: MANAGED_VALUE, "project": project})
    namespace_obj = {"kind": "Namespace", "metadata": {"name": namespace, "labels": labels,
                                                       **({"annotations": annotations} if annotations else {})}}
    check_object(namespace_obj)
    assert full(namespace_obj, "project") == project
    post(server, "Namespace", namespace_obj, project.lower().replace("_", "-").replace(".", "-"))

    # KAI: the pool's Queues and Topology, then a Job in the project's leaf queue with its PodGroup.
    department_rows = [kai.Department(department, None, {project: kai.Unit()})]
    parent, leaf = kai.queues(pool, department_rows, prefix=PREFIX)
    topology = kai.topology(pool, KEYS, prefix=PREFIX)
    for obj, origin in ((parent, (pool, department)), (leaf, (pool, department, project)), (topology, pool)):
        check_object(obj)
        assert full(obj, "pool") == pool
        post(server, KAI_QUEUE if obj["kind"] == "Queue" else KAI_TOPOLOGY, obj, origin)
    assert leaf["spec"]["parentQueue"] == parent["metadata"]["name"]
    assert (full(leaf, "department"), full(leaf, "project")) == (department, project)

    engine = Engine("kai", kai.queue_name(pool, department, project), preemptible=True,
                    topology=kai.topology_name(pool), required=KEYS[1]["label"], preferred=KEYS[0]["label"])
    attempt = Attempt(str(workload), 1, project, namespace, pool, platform, "normal", 4, TEMPLATE, 3600, engine)
    job = job_manifest(attempt, prefix=PREFIX, ttl_seconds=600)
    check_object(job)
    assert job["metadata"]["labels"]["kai.scheduler/queue"] == leaf["metadata"]["name"]
    assert job["metadata"]["annotations"]["kai.scheduler/topology"] == topology["metadata"]["name"]
    pod = {"metadata": {**job["spec"]["template"]["metadata"], "namespace": namespace, "name": "p"}}
    assert pod_facts(pod, pool_label=PREFIX + "pool").pool == pool  # what the sync reads back
    assert (full(job, "project"), full(job, "platform"), full(job, "pool")) == (project, platform, pool)
    post(server, "Job", job, (str(workload), 1))
    created = server[1].get_job(namespace, job["metadata"]["name"])
    group = podgroup_manifest(attempt, created, prefix=PREFIX)
    check_object(group)
    assert group["spec"]["queue"] == leaf["metadata"]["name"]
    post(server, KAI_PODGROUP, group, (str(workload), 1))

    # Kueue: the platform's flavor, the department's cohort, the project's queues, then a Job in its LocalQueue.
    platforms = [kueue.Platform(pool, platform, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})]
    (flavor,), (cohort,), (cluster_queue,), (local_queue,) = kueue.objects(
        platforms, [kueue.Department(department)], [kueue.Project(project, department, namespace)], prefix=PREFIX)
    for kind, obj, origin in ((KUEUE_RESOURCE_FLAVOR, flavor, (pool, platform)), (KUEUE_COHORT, cohort, department),
                              (KUEUE_CLUSTER_QUEUE, cluster_queue, project), (KUEUE_LOCAL_QUEUE, local_queue, project)):
        check_object(obj)
        post(server, kind, obj, origin)
    assert (full(flavor, "pool"), full(flavor, "platform"), full(cohort, "department")) == (pool, platform, department)
    assert cluster_queue["spec"]["cohortName"] == cohort["metadata"]["name"]
    assert cluster_queue["spec"]["resourceGroups"][0]["flavors"][0]["name"] == flavor["metadata"]["name"]
    assert local_queue["spec"]["clusterQueue"] == cluster_queue["metadata"]["name"]
    kueue_job = job_manifest(dataclasses.replace(attempt, attempt=2, engine=Engine(
        "kueue", kueue.local_queue_name(project))), prefix=PREFIX, ttl_seconds=600)
    check_object(kueue_job)
    assert kueue_job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local_queue["metadata"]["name"]
    post(server, "Job", kueue_job, (str(workload), 2))
