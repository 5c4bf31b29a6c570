"""A Kueue backend's ResourceFlavors, Cohorts, ClusterQueues and LocalQueues kept equal to our quotas and pools,
against the stand-in API server through the real client (pools/schedulers/reconcile.py): the projects' namespaces
made first, ours only, idempotent, one write per change, and the API server's 409 and 410 survived."""

import pytest

from pools.cluster.kinds import KUEUE_CLUSTER_QUEUE, KUEUE_COHORT, KUEUE_LOCAL_QUEUE, KUEUE_RESOURCE_FLAVOR
from pools.config import writes
from pools.models import Backend, ConfigKind, Department, Pool, Project, Quota
from pools.schedulers.desired import _platforms
from pools.schedulers.kueue import flavor_name
from pools.schedulers.reconcile import reconcile, run
from tests.scheduling.conftest import SHARED, project
from tests.support import commands

pytestmark = pytest.mark.django_db
PREFIX = "runwhere.ai/"
MANAGED = {f"{PREFIX}managed-by": "osmo-pools"}
OWNED = {**MANAGED, f"{PREFIX}backend": "default"}  # the backend that wrote them
A100, L40S = flavor_name(SHARED, "a100_platform"), flavor_name(SHARED, "l40s_platform")
POLICY = {"queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
          "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"},
                         "withinClusterQueue": "Never"},
          "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}}
KINDS = (KUEUE_RESOURCE_FLAVOR, KUEUE_COHORT, KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE)


@pytest.fixture
def kueue(world):
    """Departments research (vision, nlp: the world's) and product (serving), on a Kueue backend."""
    Project.objects.filter(name=Project.DEFAULT_NAME).delete()
    Department.objects.filter(name=Department.DEFAULT_NAME).delete()
    writes.import_document(ConfigKind.DEPARTMENT, {"product": {"name": "product", "resources": [
        {"node_pool": "training", "gpu": {"deserved": 8}}]}}, author="tests")
    writes.import_document(ConfigKind.PROJECT, {"serving": {"name": "serving", "department": "product", "resources": [
        {"node_pool": "training", "gpu": {"deserved": 2, "limit": 4, "over_quota_weight": "None"},
         "cpu": {"deserved": "16"}, "memory": {"deserved": "64Gi", "limit": "128Gi"}}]}}, author="tests")
    commands.run("backend", "add", "default", "--simulated", "--scheduler", "kueue")  # reconciled on the stand-in
    return Backend.objects.get(name="default")


def stored(standin, kind) -> dict[str, dict]:
    return {"/".join(filter(None, (item["metadata"].get("namespace"), item["metadata"]["name"]))): item
            for item in standin.objects(kind)}


def gpus(flavors: dict[str, str], cpu="1M", memory="1Pi") -> list[dict]:
    """The flavors of every pool of the backend, most specific first, with these GPUs (the rest not limited)."""
    return [{"name": name, "resources": [
        {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory},
        {"name": "nvidia.com/gpu", "nominalQuota": flavors.get(name, "0")}]}
        for name in (A100, L40S, "training.h100", "default.default")]


def group(flavors: list[dict]) -> list[dict]:
    return [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": flavors}]


def test_quotas_become_kueue_objects_as_specified_in_their_namespaces_and_a_second_run_writes_nothing(
        standin, kube, kueue):
    theirs = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-x"},
              "spec": {"cohortName": "research", "resourceGroups": []}}
    theirs = kube.create_object(KUEUE_CLUSTER_QUEUE, theirs)  # as stored: with the schema's defaults

    first = reconcile(kueue, kube)
    assert first.refused == [] and first.updated == [] and first.deleted == []
    kinds = [name.split("/")[0] for name in first.created]
    assert kinds == sorted(kinds, key=["ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"].index)

    flavors = stored(standin, KUEUE_RESOURCE_FLAVOR)
    assert {name: flavor["spec"] for name, flavor in flavors.items()} == {
        A100: {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100"},
               "nodeTaints": [{"key": "nvidia.com/gpu.product", "value": "NVIDIA-A100", "effect": "NoSchedule"}]},
        L40S: {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
        "training.h100": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "default.default": {}}
    assert flavors[A100]["metadata"]["labels"] == {**OWNED, f"{PREFIX}pool": SHARED,
                                                   f"{PREFIX}platform": "a100_platform"}

    cohorts = stored(standin, KUEUE_COHORT)
    assert {name: cohort["spec"] for name, cohort in cohorts.items()} == {
        "research": {},  # no row: the sum of its queues' quotas
        "product": {"resourceGroups": group(gpus({"training.h100": "6"}, cpu="0", memory="0"))}}  # 8 - serving's 2

    queues = stored(standin, KUEUE_CLUSTER_QUEUE)
    assert set(queues) == {"vision", "nlp", "serving", "team-x"}
    assert queues["team-x"]["spec"] == theirs["spec"] and not queues["team-x"]["metadata"].get("labels")
    vision = gpus({A100: "2", L40S: "2", "training.h100": "4"})
    vision[2]["resources"][2]["borrowingLimit"] = "8"  # limit 12
    assert queues["vision"]["spec"] == {
        "cohortName": "research", "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "proj-vision"}},
        "resourceGroups": group(vision), **POLICY}
    assert queues["nlp"]["spec"]["resourceGroups"] == group(gpus({}))
    serving = gpus({"training.h100": "2"})
    serving[2]["resources"] = [{"name": "cpu", "nominalQuota": "16"},
                               {"name": "memory", "nominalQuota": "64Gi", "borrowingLimit": "64Gi"},
                               {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "0"}]  # weight None
    assert queues["serving"]["spec"] == {
        "cohortName": "product", "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "proj-serving"}},
        "resourceGroups": group(serving), **POLICY}
    assert queues["serving"]["metadata"]["labels"] == {**OWNED, f"{PREFIX}department": "product",
                                                       f"{PREFIX}project": "serving"}

    local = stored(standin, KUEUE_LOCAL_QUEUE)
    assert {name: queue["spec"] for name, queue in local.items()} == {
        f"proj-{name}/{name}": {"clusterQueue": name, "stopPolicy": "None"} for name in ("nlp", "serving", "vision")}
    for name in ("nlp", "serving", "vision"):
        assert standin.namespace(f"proj-{name}")["metadata"]["labels"] == {**OWNED, f"{PREFIX}project": name}

    assert len(standin.requests_to("/api/v1/namespaces", method="POST")) == 3
    standin.clear_requests()
    again = reconcile(kueue, kube)
    assert again.writes == 0 and again.unchanged == len(first.created)
    assert not standin.requests_to("/api/v1/namespaces", method="POST")


def test_a_quota_change_updates_one_cluster_queue_and_a_removed_project_loses_its_queues_only(standin, kube,
                                                                                             kueue):
    reconcile(kueue, kube)
    project("vision", pools={"training": {"deserved": 6, "limit": 12}, SHARED: {"deserved": 2}}, users=["researcher"],
            default_pools=["training"])
    changed = reconcile(kueue, kube)
    assert (changed.created, changed.updated, changed.deleted) == ([], ["ClusterQueue/vision"], [])
    h100 = stored(standin, KUEUE_CLUSTER_QUEUE)["vision"]["spec"]["resourceGroups"][0]["flavors"][2]
    assert h100["resources"][2] == {"name": "nvidia.com/gpu", "nominalQuota": "6", "borrowingLimit": "6"}

    Project.objects.filter(name="nlp").delete()
    removed = reconcile(kueue, kube)
    assert (removed.created, removed.updated) == ([], [])
    assert removed.deleted == ["LocalQueue/proj-nlp/nlp", "ClusterQueue/nlp"]  # the queue first, then what it names
    assert set(stored(standin, KUEUE_CLUSTER_QUEUE)) == {"vision", "serving"}


def test_someone_elses_cluster_queue_is_never_touched_and_a_409_and_a_410_are_survived(standin, kube, kueue):
    theirs = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "nlp"},
              "spec": {"cohortName": "elsewhere", "resourceGroups": []}}
    theirs = kube.create_object(KUEUE_CLUSTER_QUEUE, theirs)  # as stored: with the schema's defaults
    standin.fail_next(1, status=410, path_prefix="/apis/kueue.x-k8s.io/v1beta2/clusterqueues", method="GET")
    # Another worker reconciling at the same time: it creates vision's queue (from older rows) between our list and
    # our create, which the API server then answers with 409.
    older = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
             "metadata": {"name": "vision", "labels": {**MANAGED, f"{PREFIX}project": "vision"}},
             "spec": {"cohortName": "research"}}
    result = reconcile(kueue, Racing(kube, standin, KUEUE_CLUSTER_QUEUE, older))

    assert [refusal.label for refusal in result.refused] == ["ClusterQueue/nlp"]
    assert "ClusterQueue/vision" in result.updated and "ClusterQueue/vision" not in result.created
    queues = stored(standin, KUEUE_CLUSTER_QUEUE)
    assert queues["nlp"]["spec"] == theirs["spec"] and not queues["nlp"]["metadata"].get("labels")
    assert queues["vision"]["spec"]["cohortName"] == "research" and "resourceGroups" in queues["vision"]["spec"]
    assert reconcile(kueue, kube).writes == 0

    commands.run("backend", "add", "default", "--simulated", "--scheduler", "default")
    switched = reconcile(Backend.objects.get(pk=kueue.pk), kube)
    assert not switched.created and not switched.updated
    assert not stored(standin, KUEUE_LOCAL_QUEUE) and not stored(standin, KUEUE_COHORT)
    assert not stored(standin, KUEUE_RESOURCE_FLAVOR)
    assert set(stored(standin, KUEUE_CLUSTER_QUEUE)) == {"nlp"}  # theirs stays


def test_a_field_that_goes_away_goes_from_the_cluster_too(standin, kube, kueue):
    reconcile(kueue, kube)
    commands.configure("POOL", "training", node_selector={"example.com/pool": "training"})
    reconcile(kueue, kube)
    commands.configure("POOL", "training", node_selector={})
    Quota.objects.filter(department__name="product").delete()
    reconcile(kueue, kube)
    assert stored(standin, KUEUE_COHORT)["product"]["spec"] == {}
    assert stored(standin, KUEUE_RESOURCE_FLAVOR)["training.h100"]["spec"] == {
        "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    assert reconcile(kueue, kube).writes == 0


def test_a_configuration_kueue_cannot_hold_is_kept_on_the_backend_as_its_error(standin, kube, kueue):
    commands.configure("POOL", "training", node_selector={f"example.com/k{i}": "v" for i in range(8)})
    assert run(kueue, kube) is None
    error = Backend.objects.get(pk=kueue.pk).engine_error
    assert error.startswith("Kueue cannot hold this configuration: Platform h100 of pool training: ")
    assert "at most 8 node labels" in error
    assert not standin.objects(KUEUE_CLUSTER_QUEUE)


def test_the_platforms_selectors_and_tolerations_are_the_effective_configurations(kueue):
    pools = list(Pool.objects.filter(backend=kueue))
    made = {(platform.pool, platform.name): platform for platform in _platforms(pools)}
    expected = {(pool.name, name): body for pool in pools
                for name, body in writes.effective(pool.name)["platforms"].items()}
    assert set(made) == set(expected)
    for key, body in expected.items():
        assert (made[key].node_selector, list(made[key].tolerations)) == (body["node_selector"], body["tolerations"])


class Racing:
    """The real client, except that just before our first create of `obj`'s name the stand-in stores `obj`, as
    another writer would have."""

    def __init__(self, cluster, standin, kind, obj):
        self.cluster, self.standin, self.kind, self.obj, self.raced = cluster, standin, kind, obj, False

    def create_object(self, kind, obj, *, namespace=None):
        if kind == self.kind and obj["metadata"]["name"] == self.obj["metadata"]["name"] and not self.raced:
            self.raced = True
            self.standin.add_object(kind, self.obj)
        return self.cluster.create_object(kind, obj, namespace=namespace)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def test_a_local_queue_naming_another_cluster_queue_is_re_created_since_the_field_is_immutable(standin, kube,
                                                                                               kueue):
    reconcile(kueue, kube)
    before = standin.object(KUEUE_LOCAL_QUEUE, "vision", namespace="proj-vision")
    standin.delete_object(KUEUE_LOCAL_QUEUE, "vision", namespace="proj-vision")  # the field cannot be patched
    standin.add_object(KUEUE_LOCAL_QUEUE, {"metadata": {"name": "vision", "labels": before["metadata"]["labels"]},
                                           "spec": {**before["spec"], "clusterQueue": "elsewhere"}},
                       namespace="proj-vision")
    standin.clear_requests()

    result = reconcile(kueue, kube)

    assert (result.recreated, result.updated, result.refused) == (["LocalQueue/proj-vision/vision"], [], [])
    assert stored(standin, KUEUE_LOCAL_QUEUE)["proj-vision/vision"]["spec"]["clusterQueue"] == "vision"
    assert not [r for r in standin.requests if r.method == "PATCH"]


def test_a_namespace_the_server_refuses_is_recorded_and_every_queue_is_still_written(standin, kube, kueue):
    forbidden = ('namespaces is forbidden: User "system:serviceaccount:osmo:osmo" cannot create resource '
                 '"namespaces" in API group "" at the cluster scope')
    standin.fail_next(1, status=403, path_prefix="/api/v1/namespaces", method="POST", message=forbidden)

    result = run(kueue, kube)

    (refusal,) = result.refused
    assert (refusal.kind, refusal.action) == ("Namespace", "create") and forbidden in refusal.message
    assert set(stored(standin, KUEUE_CLUSTER_QUEUE)) == {"vision", "nlp", "serving"}
    assert len(stored(standin, KUEUE_LOCAL_QUEUE)) == 3
    (record,) = Backend.objects.get(pk=kueue.pk).engine_refused
    assert record["kind"] == "Namespace" and record["name"] == refusal.name
