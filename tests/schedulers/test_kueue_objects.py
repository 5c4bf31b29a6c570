"""Kueue's ResourceFlavors, Cohorts, ClusterQueues and LocalQueues from our quotas and platforms
(pools/schedulers/kueue.py, pure)."""

import re
from decimal import Decimal

import pytest

from pools.engine import ConfigError
from pools.schedulers.kai import Unit
from pools.schedulers.kueue import (
    Department,
    Platform,
    Project,
    cluster_queue,
    cluster_queue_name,
    cohort,
    cohort_name,
    flavor_name,
    local_queue,
    local_queue_name,
    objects,
    quantity,
    resource_flavor,
)

PREFIX = "runwhere.ai/"
MANAGED = {f"{PREFIX}managed-by": "osmo-pools"}
GIB = 1024 ** 3
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUEUE_POLICY = {"queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
                "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"},
                               "withinClusterQueue": "Never"},
                "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}}
H100 = Platform("training", "h100", {"nvidia.com/gpu.product": "NVIDIA-H100"})
CPU = Platform("default", "default")
A100 = Platform("shared", "a100", {"nvidia.com/gpu.product": "NVIDIA-A100", "example.com/rack": 7}, [
    {"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "NVIDIA-A100", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "ml", "effect": "NoExecute"},  # operator Equal by default
    {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},  # any value: no one taint
    {"key": "gpu", "operator": "Equal", "value": "yes"},  # every effect: no one taint
    {"key": "soft", "operator": "Equal", "value": "1", "effect": "PreferNoSchedule"},  # Kueue ignores it
])


def test_names_are_predictable_dns_names_and_names_kubernetes_would_refuse_are_made_safe_without_colliding():
    assert flavor_name("training", "h100") == "training.h100"
    assert (cohort_name("research"), cluster_queue_name("vision"), local_queue_name("vision")) == (
        "research", "vision", "vision")
    odd = [flavor_name("shared_pool", "l40s_platform"), flavor_name("shared-pool", "l40s-platform"),
           flavor_name("a.b", "c"), flavor_name("a", "b.c"), cluster_queue_name("R&D"), cluster_queue_name("r-d")]
    assert len(set(odd)) == len(odd) and all(DNS_SUBDOMAIN.match(name) and len(name) <= 253 for name in odd)
    assert len(cluster_queue_name("x" * 128)) <= 63


@pytest.mark.parametrize(("resource", "amount", "expected"), [
    ("cpu", 8000, "8"), ("cpu", 500, "500m"), ("cpu", 1500, "1500m"), ("cpu", 2_000_000, "2k"), ("cpu", 0, "0"),
    ("memory", 64 * GIB, "64Gi"), ("memory", 64 * 10 ** 9, "64G"), ("memory", 1536, "1536"), ("memory", 1024, "1Ki"),
    ("nvidia.com/gpu", Decimal("4.00"), "4"), ("nvidia.com/gpu", Decimal("0.50"), "500m"),
    ("nvidia.com/gpu", Decimal("2.25"), "2250m"), ("nvidia.com/gpu", 1000, "1k"),
])
def test_quantities_are_written_in_the_canonical_form_the_api_server_returns(resource, amount, expected):
    assert quantity(resource, amount) == expected


def test_a_flavor_holds_the_platforms_exact_labels_and_the_taints_its_equal_tolerations_name():
    made = resource_flavor(A100, prefix=PREFIX)
    assert made["apiVersion"] == "kueue.x-k8s.io/v1beta2" and made["kind"] == "ResourceFlavor"
    assert made["metadata"] == {"name": "shared.a100", "labels": {**MANAGED, f"{PREFIX}pool": "shared",
                                                                  f"{PREFIX}platform": "a100"}}
    assert made["spec"] == {
        "nodeLabels": {"example.com/rack": "7", "nvidia.com/gpu.product": "NVIDIA-A100"},
        "nodeTaints": [{"key": "dedicated", "value": "ml", "effect": "NoExecute"},
                       {"key": "nvidia.com/gpu.product", "value": "NVIDIA-A100", "effect": "NoSchedule"}]}
    assert resource_flavor(CPU, prefix=PREFIX)["spec"] == {}  # never null, never empty lists


def test_a_flavor_kueue_cannot_hold_is_refused_by_name():
    crowded = Platform("training", "wide", {f"example.com/k{i}": "v" for i in range(9)})
    with pytest.raises(ConfigError, match=r"Platform wide of pool training: .* at most 8 node labels"):
        resource_flavor(crowded, prefix=PREFIX)


def test_a_cluster_queue_lists_every_flavor_with_the_projects_quota_in_that_flavors_pool():
    vision = Project("vision", "research", "proj-vision", {
        "training": Unit(deserved=(Decimal(4), 32_000, None), limit=(Decimal(12), -1, 512 * GIB)),
        "shared": Unit(deserved=(Decimal("0.5"), None, 64 * GIB), weight=(None, 2, 0))})
    made = cluster_queue(vision, [H100, CPU, A100], prefix=PREFIX)
    assert made["metadata"] == {"name": "vision", "labels": {**MANAGED, f"{PREFIX}department": "research",
                                                             f"{PREFIX}project": "vision"}}
    assert made["spec"] == {
        "cohortName": "research",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "proj-vision"}},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
            # Most specific first: the label-less flavor would take any pod.
            {"name": "shared.a100", "resources": [
                {"name": "cpu", "nominalQuota": "1M"},  # unset: not limited
                {"name": "memory", "nominalQuota": "64Gi"},  # Lowest may borrow: no borrowingLimit
                {"name": "nvidia.com/gpu", "nominalQuota": "500m", "borrowingLimit": "0"}]},  # None: never above
            {"name": "training.h100", "resources": [
                {"name": "cpu", "nominalQuota": "32"},
                {"name": "memory", "nominalQuota": "512Gi", "borrowingLimit": "0"},  # unset, limited: the limit
                {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "8"}]},
            {"name": "default.default", "resources": [  # no row in that pool: 0 GPUs, the rest unset
                {"name": "cpu", "nominalQuota": "1M"}, {"name": "memory", "nominalQuota": "1Pi"},
                {"name": "nvidia.com/gpu", "nominalQuota": "0"}]}]}],
        **QUEUE_POLICY}
    assert "cohort" not in made["spec"]  # v1beta1's name


def test_a_department_without_rows_is_an_empty_cohort_and_one_with_rows_holds_what_its_projects_do_not():
    projects = [Project("vision", "research", "proj-vision", {"training": Unit(deserved=(Decimal(4), 8000, 0))}),
                Project("nlp", "research", "proj-nlp", {"training": Unit(deserved=(Decimal(2), None, 0))})]
    bare = cohort(Department("research"), projects, [H100], prefix=PREFIX)
    assert bare["metadata"] == {"name": "research", "labels": {**MANAGED, f"{PREFIX}department": "research"}}
    assert bare["spec"] == {}
    rows = Department("research", {"training": Unit(deserved=(Decimal(10), 16_000, None)),
                                   "default": Unit(deserved=(Decimal(1), 0, 0))})
    assert cohort(rows, projects, [H100, CPU], prefix=PREFIX)["spec"] == {"resourceGroups": [{
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
            # nlp's CPU is unset (not limited), so the department's 16 cores add nothing; memory unset: its sum.
            {"name": "training.h100", "resources": [{"name": "cpu", "nominalQuota": "0"},
                                                    {"name": "memory", "nominalQuota": "0"},
                                                    {"name": "nvidia.com/gpu", "nominalQuota": "4"}]},
            {"name": "default.default", "resources": [{"name": "cpu", "nominalQuota": "0"},
                                                      {"name": "memory", "nominalQuota": "0"},
                                                      {"name": "nvidia.com/gpu", "nominalQuota": "1"}]}]}]}


def test_a_local_queue_sits_in_the_projects_namespace_and_names_its_cluster_queue():
    made = local_queue(Project("vision", "research", "proj-vision"), prefix=PREFIX)
    assert made["metadata"] == {"name": "vision", "namespace": "proj-vision",
                                "labels": {**MANAGED, f"{PREFIX}department": "research", f"{PREFIX}project": "vision"}}
    assert made["spec"] == {"clusterQueue": "vision", "stopPolicy": "None"}


def test_more_flavors_than_a_resource_group_takes_are_refused_clearly():
    platforms = [Platform(f"pool{i}", "p", {"pool": str(i)}) for i in range(65)]
    with pytest.raises(ConfigError, match=r"at most 64 flavors in a ClusterQueue; .* have 65 platforms"):
        objects(platforms, [Department("research")], [Project("vision", "research", "proj-vision")], prefix=PREFIX)
    flavors, _, queues, _ = objects(platforms[:64], [Department("research")],
                                    [Project("vision", "research", "proj-vision")], prefix=PREFIX)
    assert len(flavors) == 64 and len(queues[0]["spec"]["resourceGroups"][0]["flavors"]) == 64
