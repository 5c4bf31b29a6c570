import copy
import json

import pytest

from pools.inventory import NodeFacts, NodeResources, node_facts
from pools.inventory.nodes import label_text

from .builders import condition, kubelet_conditions, node, taint


def test_it_reads_the_name_uid_and_labels_of_a_node():
    body = node("gpu-1")
    found = node_facts(body)
    assert found.name == "gpu-1"
    assert found.uid == body["metadata"]["uid"]
    assert found.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert found.labels["kubernetes.io/hostname"] == "gpu-1"


def test_it_drops_the_gpu_feature_discovery_timestamp_label():
    body = node()
    assert "nvidia.com/gfd.timestamp" in body["metadata"]["labels"]
    found = node_facts(body)
    assert "nvidia.com/gfd.timestamp" not in found.labels
    assert len(found.labels) == len(body["metadata"]["labels"]) - 1


def test_it_reads_capacity_and_allocatable_in_millicores_and_bytes():
    found = node_facts(node())
    assert found.capacity == NodeResources(
        cpu_m=192_000, memory=2113276932 * 1024, ephemeral_storage=3750095032 * 1024, gpu=8, pods=110
    )
    assert found.allocatable == NodeResources(
        cpu_m=191_450, memory=2112145412 * 1024, ephemeral_storage=3456067615356, gpu=8, pods=110
    )


def test_it_reads_the_gpu_feature_discovery_labels():
    found = node_facts(node())
    assert (found.gpu_product, found.gpu_count, found.gpu_memory_mib, found.gpu_family) == (
        "NVIDIA-H100-80GB-HBM3",
        8,
        81559,
        "hopper",
    )
    assert found.gpu_present


def test_it_falls_back_to_empty_gpu_facts_without_feature_discovery():
    gfd = ["nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory", "nvidia.com/gpu.family"]
    found = node_facts(node(drop_labels=gfd))
    assert (found.gpu_product, found.gpu_count, found.gpu_memory_mib, found.gpu_family) == ("", 0, 0, "")


def test_it_reads_a_cpu_only_node_as_having_no_gpus():
    found = node_facts(node("cpu-1", gpu=False))
    assert not found.gpu_present
    assert found.capacity.gpu == found.allocatable.gpu == 0
    assert found.gpu_product == ""
    assert found.capacity.cpu_m == 16_000
    assert found.allocatable.cpu_m == 15_890


def test_it_sees_gpus_from_the_present_label_before_the_device_plugin_reports_them():
    capacity = {"cpu": "192", "memory": "2Ti", "pods": "110"}
    found = node_facts(node(capacity=capacity, allocatable=capacity))
    assert found.capacity.gpu == 0
    assert found.gpu_present


def test_it_sees_gpus_from_capacity_without_feature_discovery_labels():
    found = node_facts(node(drop_labels=["nvidia.com/gpu.present"]))
    assert found.gpu_present


def test_it_does_not_take_a_present_label_other_than_true():
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    found = node_facts(node(gpu=False, labels={"nvidia.com/gpu.present": "false"}, capacity=capacity))
    assert not found.gpu_present


def test_it_lists_the_components_whose_deployment_is_disabled():
    labels = {
        "nvidia.com/gpu.deploy.container-toolkit": "false",
        "nvidia.com/gpu.deploy.dcgm-exporter": "false",
        "nvidia.com/gpu.deploy.driver": "pre-installed",
    }
    assert node_facts(node(labels=labels)).deploy_disabled == {"container-toolkit", "dcgm-exporter"}
    assert node_facts(node()).deploy_disabled == frozenset()


def test_it_reads_taints_without_the_time_they_were_added():
    taints = [
        taint("nvidia.com/gpu", "present", "NoSchedule"),
        taint("node.kubernetes.io/unreachable", None, "NoExecute", time_added="2025-06-10T14:03:12Z"),
    ]
    assert node_facts(node(taints=taints)).taints == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "value": "", "effect": "NoExecute"},
    ]


def test_it_reads_a_node_without_taints_as_having_none():
    assert node_facts(node()).taints == []


@pytest.mark.parametrize(("unschedulable", "expected"), [(True, True), (False, False), (None, False)])
def test_it_reads_whether_scheduling_is_disabled(unschedulable, expected):
    assert node_facts(node(unschedulable=unschedulable)).unschedulable is expected


def test_it_reads_conditions_without_heartbeats():
    found = node_facts(node(conditions=kubelet_conditions(DiskPressure="True")))
    assert found.conditions[1] == {
        "type": "DiskPressure",
        "status": "True",
        "reason": "KubeletHasDiskPressure",
        "message": "kubelet has disk pressure",
        "last_transition_time": "2025-05-28T09:14:03Z",
    }
    assert [c["type"] for c in found.conditions] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]


def test_it_finds_a_condition_by_type():
    found = node_facts(node())
    assert found.condition("Ready")["status"] == "True"
    assert found.condition("NetworkUnavailable") is None


def test_it_ignores_heartbeats_and_the_feature_discovery_timestamp_when_comparing():
    before = node()
    after = copy.deepcopy(before)
    after["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1718035322"
    after["metadata"]["resourceVersion"] = "9999999"
    for item in after["status"]["conditions"]:
        item["lastHeartbeatTime"] = "2025-06-10T14:03:07Z"
    assert node_facts(before) == node_facts(after)
    assert node_facts(before).shown() == node_facts(after).shown()
    assert hash(node_facts(before)) == hash(node_facts(after))


@pytest.mark.parametrize(
    "change",
    [
        lambda body: body["metadata"]["labels"].update({"osmo.nvidia.com/pool": "training"}),
        lambda body: body["spec"].update({"unschedulable": True}),
        lambda body: body["spec"].update({"taints": [taint("dedicated", "team-a")]}),
        lambda body: body["status"]["allocatable"].update({"nvidia.com/gpu": "7"}),
        lambda body: body["status"]["conditions"][3].update({"status": "False", "lastTransitionTime": "x"}),
    ],
)
def test_it_notices_changes_that_matter(change):
    before = node("gpu-1")
    after = copy.deepcopy(before)
    change(after)
    assert node_facts(before).shown() != node_facts(after).shown()


def test_it_shows_plain_json_values():
    shown = node_facts(node(labels={"nvidia.com/gpu.deploy.dcgm-exporter": "false"}, taints=[taint("a", "b")])).shown()
    assert json.loads(json.dumps(shown)) == shown
    assert shown["capacity"]["gpu"] == 8
    assert shown["deploy_disabled"] == ["dcgm-exporter"]
    assert shown["taints"] == [{"key": "a", "value": "b", "effect": "NoSchedule"}]
    assert set(shown) == {
        "name",
        "uid",
        "labels",
        "taints",
        "unschedulable",
        "conditions",
        "capacity",
        "allocatable",
        "gpu_product",
        "gpu_count",
        "gpu_memory_mib",
        "gpu_family",
        "gpu_present",
        "deploy_disabled",
    }


def test_it_is_hashable_so_it_can_be_kept_in_sets():
    first = node("a")
    assert len({node_facts(first), node_facts(copy.deepcopy(first)), node_facts(node("b"))}) == 2


def test_it_turns_malformed_quantities_into_zero():
    capacity = {"cpu": "lots", "memory": "", "ephemeral-storage": None, "nvidia.com/gpu": [8], "pods": "-3"}
    found = node_facts(node(capacity=capacity, allocatable={"cpu": True}))
    assert found.capacity == NodeResources()
    assert found.allocatable == NodeResources()


def test_it_turns_malformed_gpu_labels_into_zero():
    found = node_facts(node(labels={"nvidia.com/gpu.count": "eight", "nvidia.com/gpu.memory": "80 GiB"}))
    assert (found.gpu_count, found.gpu_memory_mib) == (0, 0)


def test_it_survives_an_empty_node():
    assert node_facts({}) == NodeFacts(name="")


def test_it_survives_nulls_where_objects_are_expected():
    body = {
        "metadata": {"name": "odd", "labels": None},
        "spec": {"taints": None},
        "status": {"capacity": None, "conditions": [None, condition("Ready", "True", "KubeletReady")]},
    }
    found = node_facts(body)
    assert found.labels == {}
    assert found.taints == []
    assert [c["type"] for c in found.conditions] == ["Ready"]


def test_it_reads_a_condition_without_a_status_as_unknown():
    found = node_facts(node(conditions=[{"type": "Ready"}]))
    assert found.conditions == [
        {"type": "Ready", "status": "Unknown", "reason": "", "message": "", "last_transition_time": ""}
    ]


def test_label_text_sorts_labels_by_key_in_code_point_order_and_joins_them():
    assert label_text({"z": "1", "Z": "2", "a": "", "é": "3", "kubernetes.io/os": "linux"}) == \
        "Z=2, a=, kubernetes.io/os=linux, z=1, é=3"
    assert label_text({}) == ""
