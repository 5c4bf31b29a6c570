import pytest

from pools.inventory import (
    NodeUsage,
    StatusOptions,
    component_states,
    gpu_figures,
    node_facts,
    node_status,
    pod_facts,
    usage_from_pods,
)

from .builders import condition, container, dcgm_pod, gpu_container, kubelet_conditions, node, pod, toolkit_pod

POOL_LABEL = "osmo.nvidia.com/pool"
ALL_REASONS = [
    "Disk pressure",
    "Memory pressure",
    "PID pressure",
    "Network unavailable",
    "Scheduling disabled",
    "Missing NVIDIA Container Toolkit",
    "Missing NVIDIA DCGM Exporter",
    "Undrained migrated node",
    "Kubelet not ready: KubeletNotReady",
]


def usage_of(*pods, node_name="gpu-1"):
    return usage_from_pods(pod_facts(body, pool_label=POOL_LABEL) for body in pods).get(node_name, NodeUsage())


def operator_pods(node_name="gpu-1"):
    return [toolkit_pod(node_name), dcgm_pod(node_name)]


def status_of(body, *pods, options=None, node_pools=frozenset(), with_operator=True):
    pods = [*pods, *(operator_pods(body["metadata"]["name"]) if with_operator else [])]
    usage = usage_of(*pods, node_name=body["metadata"]["name"])
    return node_status(node_facts(body), usage, options or StatusOptions(), node_pools=node_pools)


# Usage


def test_it_adds_up_what_the_pods_on_each_node_request():
    usage = usage_from_pods(
        pod_facts(body, pool_label=POOL_LABEL)
        for body in [
            pod("a", node="gpu-1", containers=[gpu_container(gpus=2, cpu="4", memory="16Gi")]),
            pod("b", node="gpu-1", containers=[gpu_container(gpus=3, cpu="500m", memory="1Gi")]),
            pod("c", node="gpu-2", containers=[gpu_container(gpus=1, cpu="1", memory="1Gi")]),
        ]
    )
    assert usage == {
        "gpu-1": NodeUsage(gpu_used=5, cpu_requested_m=4500, memory_requested=17 * 2**30, pod_count=2),
        "gpu-2": NodeUsage(gpu_used=1, cpu_requested_m=1000, memory_requested=2**30, pod_count=1),
    }


def test_it_counts_bound_pending_pods_and_leaves_out_finished_and_unbound_ones():
    usage = usage_of(
        pod("running", phase="Running", containers=[gpu_container(gpus=1)]),
        pod("starting", phase="Pending", containers=[gpu_container(gpus=2)]),
        pod("done", phase="Succeeded", containers=[gpu_container(gpus=4)]),
        pod("crashed", phase="Failed", containers=[gpu_container(gpus=4)]),
        pod("queued", node=None, phase="Pending", containers=[gpu_container(gpus=8)]),
    )
    assert (usage.gpu_used, usage.pod_count) == (3, 2)


def test_it_leaves_nodes_without_counting_pods_out_of_the_usage():
    assert usage_from_pods([pod_facts(pod(phase="Succeeded"), pool_label=POOL_LABEL)]) == {}


def test_it_records_which_operator_components_and_pools_have_live_pods_on_a_node():
    usage = usage_of(
        toolkit_pod(),
        dcgm_pod(phase="Failed"),
        pod("a", labels={POOL_LABEL: "training"}),
        pod("b", labels={POOL_LABEL: "inference"}, phase="Succeeded"),
        pod("c", labels={"app": "c"}),
    )
    assert usage.components == {"toolkit"}
    assert usage.pod_pools == {"training"}


# GPU figures


def test_it_reports_total_allocatable_used_and_free_gpus():
    facts = node_facts(node())
    assert gpu_figures(facts, usage_of(pod(containers=[gpu_container(gpus=3)]))) == {
        "total": 8,
        "allocatable": 8,
        "unhealthy": 0,
        "used": 3,
        "free": 5,
    }


def test_it_counts_gpus_withheld_from_allocatable_as_unhealthy():
    facts = node_facts(node(allocatable={"cpu": "191450m", "memory": "2Ti", "nvidia.com/gpu": "6", "pods": "110"}))
    figures = gpu_figures(facts, usage_of(pod(containers=[gpu_container(gpus=2)])))
    assert figures == {"total": 8, "allocatable": 6, "unhealthy": 2, "used": 2, "free": 4}


def test_it_never_reports_free_gpus_below_zero():
    # Pods bound before GPUs went unhealthy keep running (and counting) on fewer allocatable GPUs.
    facts = node_facts(node(allocatable={"nvidia.com/gpu": "4"}))
    figures = gpu_figures(facts, usage_of(pod(containers=[gpu_container(gpus=6)])))
    assert (figures["used"], figures["free"]) == (6, 0)


def test_it_never_reports_unhealthy_gpus_below_zero():
    facts = node_facts(node(capacity={"nvidia.com/gpu": "4"}, allocatable={"nvidia.com/gpu": "8"}))
    assert gpu_figures(facts)["unhealthy"] == 0


def test_it_reports_zero_everything_for_a_cpu_node():
    figures = gpu_figures(node_facts(node(gpu=False)), NodeUsage())
    assert figures == {"total": 0, "allocatable": 0, "unhealthy": 0, "used": 0, "free": 0}


def test_it_counts_init_containers_sidecars_and_limits_in_used_gpus():
    body = pod(
        containers=[container(limits={"nvidia.com/gpu": "2"})],
        init_containers=[
            container("sidecar", limits={"nvidia.com/gpu": "1"}, restart_policy="Always"),
            container("init", limits={"nvidia.com/gpu": "4"}),
        ],
    )
    assert gpu_figures(node_facts(node()), usage_of(body))["used"] == 5


# Status


def test_it_reports_a_healthy_gpu_node_as_ready():
    assert status_of(node()) == ("Ready", [])


def test_it_reports_a_healthy_cpu_node_as_ready_without_any_operator_pods():
    assert status_of(node("cpu-1", gpu=False), with_operator=False) == ("Ready", [])


def test_it_works_with_no_usage_and_no_options():
    assert node_status(node_facts(node(gpu=False))) == ("Ready", [])


def test_it_treats_a_node_missing_from_the_usage_map_as_running_nothing():
    facts = node_facts(node())
    usage = usage_from_pods([]).get(facts.name)
    assert node_status(facts, usage)[1] == ["Missing NVIDIA Container Toolkit", "Missing NVIDIA DCGM Exporter"]
    assert gpu_figures(facts, usage)["free"] == 8
    assert component_states(facts, usage)["dcgm-exporter"] == "missing"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"conditions": kubelet_conditions(DiskPressure="True")}, "Disk pressure"),
        ({"conditions": kubelet_conditions(MemoryPressure="True")}, "Memory pressure"),
        ({"conditions": kubelet_conditions(PIDPressure="True")}, "PID pressure"),
        ({"conditions": kubelet_conditions(NetworkUnavailable="True")}, "Network unavailable"),
        ({"unschedulable": True}, "Scheduling disabled"),
        ({"conditions": kubelet_conditions(Ready="False")}, "Kubelet not ready: KubeletNotReady"),
    ],
)
def test_it_names_each_node_level_reason(kwargs, reason):
    # A cordon alone is not a breakage: the node reads Cordoned (test_a_ready_node_whose_only_reason_...).
    status = "Cordoned" if reason == "Scheduling disabled" else f"Not ready ({reason})"
    assert status_of(node(**kwargs)) == (status, [reason])


def test_it_does_not_flag_conditions_that_are_false_or_unknown():
    conditions = kubelet_conditions(NetworkUnavailable="False", DiskPressure="Unknown")
    assert status_of(node(conditions=conditions)) == ("Ready", [])


def test_it_reports_a_missing_container_toolkit():
    assert status_of(node(), dcgm_pod(), with_operator=False) == (
        "Not ready (Missing NVIDIA Container Toolkit)",
        ["Missing NVIDIA Container Toolkit"],
    )


def test_it_reports_a_missing_dcgm_exporter():
    assert status_of(node(), toolkit_pod(), with_operator=False) == (
        "Not ready (Missing NVIDIA DCGM Exporter)",
        ["Missing NVIDIA DCGM Exporter"],
    )


def test_it_reports_operator_pods_that_finished_as_missing():
    _status, reasons = status_of(node(), toolkit_pod(phase="Failed"), dcgm_pod(phase="Succeeded"), with_operator=False)
    assert reasons == ["Missing NVIDIA Container Toolkit", "Missing NVIDIA DCGM Exporter"]


def test_it_does_not_count_operator_pods_on_another_node():
    _status, reasons = status_of(node("gpu-1"), *operator_pods("gpu-2"), with_operator=False)
    assert reasons == ["Missing NVIDIA Container Toolkit", "Missing NVIDIA DCGM Exporter"]


def test_it_never_calls_the_toolkit_or_exporter_missing_on_a_cpu_node():
    facts = node_facts(node("cpu-1", gpu=False))
    assert node_status(facts, NodeUsage(), StatusOptions()) == ("Ready", [])
    assert component_states(facts, NodeUsage(), StatusOptions()) == {
        "container-toolkit": "not applicable",
        "dcgm-exporter": "not applicable",
    }


def test_it_expects_no_toolkit_pod_when_the_toolkit_is_on_the_host():
    options = StatusOptions(toolkit_on_host=True)
    assert status_of(node(), dcgm_pod(), options=options, with_operator=False) == ("Ready", [])
    facts = node_facts(node())
    assert component_states(facts, usage_of(dcgm_pod()), options) == {
        "container-toolkit": "host",
        "dcgm-exporter": "running",
    }


def test_it_still_expects_the_dcgm_exporter_when_the_toolkit_is_on_the_host():
    options = StatusOptions(toolkit_on_host=True)
    assert status_of(node(), options=options, with_operator=False)[1] == ["Missing NVIDIA DCGM Exporter"]


def test_it_shows_a_component_disabled_by_its_deploy_label_as_disabled_not_missing():
    body = node(
        labels={"nvidia.com/gpu.deploy.container-toolkit": "false", "nvidia.com/gpu.deploy.dcgm-exporter": "false"}
    )
    assert status_of(body, with_operator=False) == ("Ready", [])
    assert component_states(node_facts(body), NodeUsage(), StatusOptions()) == {
        "container-toolkit": "disabled",
        "dcgm-exporter": "disabled",
    }


def test_it_disables_only_the_component_named_in_the_deploy_label():
    body = node(labels={"nvidia.com/gpu.deploy.dcgm-exporter": "false"})
    assert status_of(body, with_operator=False)[1] == ["Missing NVIDIA Container Toolkit"]
    assert component_states(node_facts(body), NodeUsage()) == {
        "container-toolkit": "missing",
        "dcgm-exporter": "disabled",
    }


def test_it_shows_running_components_as_running():
    facts = node_facts(node())
    assert component_states(facts, usage_of(*operator_pods()), StatusOptions()) == {
        "container-toolkit": "running",
        "dcgm-exporter": "running",
    }


def test_it_reports_an_undrained_node_whose_pods_belong_to_a_pool_it_left():
    body = node()
    training_pod = pod(labels={POOL_LABEL: "training"})
    assert status_of(body, training_pod, node_pools=frozenset({"inference"})) == (
        "Not ready (Undrained migrated node)",
        ["Undrained migrated node"],
    )
    assert status_of(body, training_pod, node_pools=frozenset({"inference", "training"})) == ("Ready", [])


def test_it_does_not_call_a_node_undrained_for_pods_without_a_pool_label():
    assert status_of(node(), pod(labels={"app": "x"}), node_pools=frozenset({"inference"})) == ("Ready", [])


def test_it_does_not_call_a_node_undrained_for_finished_pods_of_its_old_pool():
    old = pod(labels={POOL_LABEL: "training"}, phase="Succeeded")
    assert status_of(node(), old, node_pools=frozenset({"inference"})) == ("Ready", [])


def test_it_ignores_an_empty_pool_value_when_looking_for_undrained_pods():
    usage = NodeUsage(components=frozenset({"toolkit", "dcgm"}), pod_pools=frozenset({""}))
    assert node_status(node_facts(node()), usage, StatusOptions()) == ("Ready", [])


def test_it_lists_every_reason_in_order_and_leads_with_the_first():
    body = node(
        unschedulable=True,
        conditions=kubelet_conditions(
            DiskPressure="True", MemoryPressure="True", PIDPressure="True", NetworkUnavailable="True", Ready="False"
        ),
    )
    status, reasons = status_of(
        body, pod(labels={POOL_LABEL: "training"}), with_operator=False, node_pools=frozenset({"inference"})
    )
    assert reasons == ALL_REASONS
    assert status == "Not ready (Disk pressure)"


@pytest.mark.parametrize("dropped", range(len(ALL_REASONS)))
def test_it_keeps_the_order_when_any_one_reason_is_absent(dropped):
    statuses = {
        "DiskPressure": "True",
        "MemoryPressure": "True",
        "PIDPressure": "True",
        "NetworkUnavailable": "True",
        "Ready": "False",
    }
    keys = ["DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable"]
    pods, node_pools, unschedulable = [pod(labels={POOL_LABEL: "training"})], frozenset({"inference"}), True
    reason = ALL_REASONS[dropped]
    if dropped < 4:
        statuses[keys[dropped]] = "False"
    elif reason == "Scheduling disabled":
        unschedulable = False
    elif reason == "Missing NVIDIA Container Toolkit":
        pods.append(toolkit_pod())
    elif reason == "Missing NVIDIA DCGM Exporter":
        pods.append(dcgm_pod())
    elif reason == "Undrained migrated node":
        node_pools = frozenset({"inference", "training"})
    else:
        statuses["Ready"] = "True"
    body = node(unschedulable=unschedulable, conditions=kubelet_conditions(**statuses))
    status, reasons = status_of(body, *pods, with_operator=False, node_pools=node_pools)
    expected = [r for r in ALL_REASONS if r != reason]
    assert reasons == expected
    assert status == f"Not ready ({expected[0]})"


def test_it_lists_kubelet_not_ready_after_the_reasons_that_lead():
    body = node(unschedulable=True, conditions=kubelet_conditions(Ready="False"))
    assert status_of(body) == (
        "Not ready (Kubelet not ready: KubeletNotReady)",
        ["Scheduling disabled", "Kubelet not ready: KubeletNotReady"],
    )


def test_a_ready_node_whose_only_reason_is_its_cordon_reads_cordoned():
    assert status_of(node(unschedulable=True)) == ("Cordoned", ["Scheduling disabled"])
    body = node(unschedulable=True, conditions=kubelet_conditions(DiskPressure="True"))
    assert status_of(body) == ("Not ready (Disk pressure)", ["Disk pressure", "Scheduling disabled"])


def test_it_says_kubelet_not_ready_even_without_a_reason():
    conditions = [*kubelet_conditions(Ready=None), condition("Ready", "False")]
    assert status_of(node(conditions=conditions)) == ("Not ready (Kubelet not ready)", ["Kubelet not ready"])


def test_it_reports_unknown_when_the_kubelet_stopped_posting_status():
    conditions = kubelet_conditions(Ready="Unknown", DiskPressure="Unknown", MemoryPressure="Unknown")
    assert status_of(node(conditions=conditions)) == ("Unknown", ["Kubelet status unknown: NodeStatusUnknown"])


def test_it_reports_unknown_when_there_is_no_ready_condition():
    assert status_of(node(conditions=[])) == ("Unknown", ["No Ready condition reported"])


def test_it_still_lists_other_reasons_for_an_unknown_node():
    body = node(unschedulable=True, conditions=kubelet_conditions(Ready="Unknown"))
    assert status_of(body, with_operator=False) == (
        "Unknown",
        [
            "Scheduling disabled",
            "Missing NVIDIA Container Toolkit",
            "Missing NVIDIA DCGM Exporter",
            "Kubelet status unknown: NodeStatusUnknown",
        ],
    )


@pytest.mark.parametrize(
    ("condition_type", "reason"),
    [
        ("DiskPressure", "Disk pressure"),
        ("MemoryPressure", "Memory pressure"),
        ("PIDPressure", "PID pressure"),
        ("NetworkUnavailable", "Network unavailable"),
    ],
)
def test_it_skips_ignored_standard_conditions(condition_type, reason):
    body = node(conditions=kubelet_conditions(**{condition_type: "True"}))
    options = StatusOptions(condition_rules={"ignore": [condition_type]})
    assert status_of(body, options=options) == ("Ready", [])
    assert status_of(body) == (f"Not ready ({reason})", [reason])


def test_it_keeps_the_other_reasons_when_one_condition_is_ignored():
    body = node(conditions=kubelet_conditions(DiskPressure="True", PIDPressure="True"))
    options = StatusOptions(condition_rules={"ignore": ["DiskPressure"]})
    assert status_of(body, options=options) == ("Not ready (PID pressure)", ["PID pressure"])


def xid_condition(status="True", message="GPU 3 reported Xid 79 (fallen off the bus)"):
    return condition("GpuXidError", status, "XidDetected" if status == "True" else "NoXid", message)


def test_it_flags_a_custom_condition_in_its_unhealthy_status_with_its_message():
    body = node(conditions=[*kubelet_conditions(), xid_condition()])
    options = StatusOptions(condition_rules={"unhealthy_when": {"GpuXidError": "True"}})
    assert status_of(body, options=options) == (
        "Not ready (GpuXidError: GPU 3 reported Xid 79 (fallen off the bus))",
        ["GpuXidError: GPU 3 reported Xid 79 (fallen off the bus)"],
    )


def test_it_names_a_custom_condition_without_a_message_by_its_type():
    body = node(conditions=[*kubelet_conditions(), xid_condition(message="")])
    options = StatusOptions(condition_rules={"unhealthy_when": {"GpuXidError": "True"}})
    assert status_of(body, options=options) == ("Not ready (GpuXidError)", ["GpuXidError"])


def test_it_flags_a_custom_condition_that_is_unhealthy_when_false():
    body = node(conditions=[*kubelet_conditions(), condition("NVLinkHealthy", "False", "LinkDown", "")])
    options = StatusOptions(condition_rules={"unhealthy_when": {"NVLinkHealthy": "False"}})
    assert status_of(body, options=options) == ("Not ready (NVLinkHealthy)", ["NVLinkHealthy"])


def test_it_flags_a_custom_condition_that_is_unhealthy_when_unknown():
    body = node(conditions=[*kubelet_conditions(), condition("FabricManager", "Unknown", "", "no report")])
    options = StatusOptions(condition_rules={"unhealthy_when": {"FabricManager": "Unknown"}})
    assert status_of(body, options=options)[1] == ["FabricManager: no report"]


def test_it_leaves_a_custom_condition_in_another_status_alone():
    body = node(conditions=[*kubelet_conditions(), xid_condition(status="False")])
    options = StatusOptions(condition_rules={"unhealthy_when": {"GpuXidError": "True"}})
    assert status_of(body, options=options) == ("Ready", [])


def test_it_leaves_a_rule_for_an_absent_condition_alone():
    options = StatusOptions(condition_rules={"unhealthy_when": {"GpuXidError": "True"}})
    assert status_of(node(), options=options) == ("Ready", [])


def test_it_reports_no_custom_conditions_without_rules():
    assert status_of(node(conditions=[*kubelet_conditions(), xid_condition()])) == ("Ready", [])


def test_it_lets_ignore_win_over_unhealthy_when():
    body = node(conditions=[*kubelet_conditions(), xid_condition()])
    options = StatusOptions(condition_rules={"ignore": ["GpuXidError"], "unhealthy_when": {"GpuXidError": "True"}})
    assert status_of(body, options=options) == ("Ready", [])


def test_it_lists_custom_conditions_last_in_the_order_of_the_rules():
    body = node(
        unschedulable=True,
        conditions=[
            *kubelet_conditions(Ready="False"),
            xid_condition(message=""),
            condition("NVLinkHealthy", "False", "LinkDown", ""),
        ],
    )
    rules = {"unhealthy_when": {"NVLinkHealthy": "False", "GpuXidError": "True"}}
    assert status_of(body, options=StatusOptions(condition_rules=rules))[1] == [
        "Scheduling disabled",
        "Kubelet not ready: KubeletNotReady",
        "NVLinkHealthy",
        "GpuXidError",
    ]


def test_it_does_not_repeat_a_standard_condition_named_in_a_rule():
    body = node(conditions=kubelet_conditions(DiskPressure="True", Ready="False"))
    rules = {"unhealthy_when": {"DiskPressure": "True", "Ready": "False"}}
    assert status_of(body, options=StatusOptions(condition_rules=rules))[1] == [
        "Disk pressure",
        "Kubelet not ready: KubeletNotReady",
    ]


def test_it_lets_a_rule_flag_a_standard_condition_in_a_status_it_does_not_check():
    body = node(conditions=kubelet_conditions(DiskPressure="Unknown"))
    rules = {"unhealthy_when": {"DiskPressure": "Unknown"}}
    assert status_of(body, options=StatusOptions(condition_rules=rules))[1] == [
        "DiskPressure: Kubelet stopped posting node status."
    ]
