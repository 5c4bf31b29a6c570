from decimal import Decimal

import pytest

from pools.inventory import PodFacts, component_of, counts_on_node, is_terminal, pod_facts, pod_requests

from .builders import container, dcgm_pod, gpu_container, pod, toolkit_pod

POOL_LABEL = "osmo.nvidia.com/pool"


def facts(body, pool_label=POOL_LABEL):
    return pod_facts(body, pool_label=pool_label)


def gpus(**kwargs):
    return facts(pod(**kwargs)).gpu


def test_it_reads_the_identity_and_placement_of_a_pod():
    body = pod("train-0", namespace="team-a", node="gpu-7", phase="Running", labels={POOL_LABEL: "training"})
    found = facts(body)
    assert found == PodFacts(
        uid=body["metadata"]["uid"],
        namespace="team-a",
        name="train-0",
        node_name="gpu-7",
        phase="Running",
        gpu=1,
        cpu_m=8000,
        memory=64 * 2**30,
        component="",
        pool="training",
    )


def test_it_leaves_the_node_empty_for_an_unbound_pod():
    assert facts(pod(node=None, phase="Pending")).node_name == ""


def test_it_leaves_the_pool_empty_when_the_pod_has_no_pool_label():
    assert facts(pod(labels={"app": "x"})).pool == ""


def test_it_leaves_the_pool_empty_when_no_pool_label_key_is_configured():
    assert facts(pod(labels={"": "x", POOL_LABEL: "training"}), pool_label="").pool == ""


def test_it_treats_a_pod_without_a_phase_as_pending():
    body = pod()
    del body["status"]["phase"]
    assert facts(body).phase == "Pending"


def test_it_sums_the_requests_of_app_containers():
    found = facts(pod(containers=[gpu_container("a", 2, cpu="4", memory="16Gi"), gpu_container("b", 3, cpu="500m")]))
    assert (found.gpu, found.cpu_m, found.memory) == (5, 4500, 16 * 2**30 + 64 * 2**30)


def test_it_converts_cpu_to_millicores_and_memory_to_bytes():
    containers = [container(requests={"cpu": "250m", "memory": "1.5G"}), container("b", requests={"cpu": "1.5"})]
    body = pod(containers=containers)
    found = facts(body)
    assert (found.cpu_m, found.memory) == (1750, 1_500_000_000)


def test_it_rounds_sub_millicore_cpu_up_like_kubernetes():
    assert facts(pod(containers=[container(requests={"cpu": "100u"})])).cpu_m == 1


def test_it_counts_a_container_without_resources_as_zero():
    found = facts(pod(containers=[container()]))
    assert (found.gpu, found.cpu_m, found.memory) == (0, 0, 0)


def test_it_takes_an_init_container_larger_than_the_app_containers():
    body = pod(containers=[gpu_container(gpus=2)], init_containers=[gpu_container("warmup", gpus=4)])
    assert facts(body).gpu == 4


def test_it_takes_the_app_containers_when_they_are_larger_than_every_init_container():
    body = pod(containers=[gpu_container(gpus=4)], init_containers=[gpu_container("a", 1), gpu_container("b", 3)])
    assert facts(body).gpu == 4


def test_it_does_not_add_init_containers_together():
    body = pod(containers=[gpu_container(gpus=1)], init_containers=[gpu_container("a", 3), gpu_container("b", 3)])
    assert facts(body).gpu == 3


def test_it_takes_the_maximum_per_resource_independently():
    body = pod(
        containers=[container(requests={"cpu": "1", "memory": "32Gi"})],
        init_containers=[container("unpack", requests={"cpu": "6", "memory": "1Gi"})],
    )
    found = facts(body)
    assert (found.cpu_m, found.memory) == (6000, 32 * 2**30)


def test_it_adds_a_sidecar_to_the_app_containers():
    sidecar = container("proxy", requests={"cpu": "500m", "nvidia.com/gpu": "1"}, restart_policy="Always")
    body = pod(containers=[gpu_container(gpus=2, cpu="2")], init_containers=[sidecar])
    found = facts(body)
    assert (found.gpu, found.cpu_m) == (3, 2500)


def test_it_adds_a_sidecar_only_to_init_containers_declared_after_it():
    # Before the sidecar: 4 CPUs alone. After it: 1 + 2. Apps with the sidecar: 1 + 2. Peak: 4, not 4 + 2.
    body = pod(
        containers=[container(requests={"cpu": "1"})],
        init_containers=[
            container("before", requests={"cpu": "4"}),
            container("proxy", requests={"cpu": "2"}, restart_policy="Always"),
            container("after", requests={"cpu": "1"}),
        ],
    )
    assert facts(body).cpu_m == 4000


def test_it_lets_an_init_container_after_a_sidecar_win_with_the_sidecar_added():
    # "after" runs beside the sidecar: 3 + 2 = 5 beats the app phase (1 + 2) and "before" (4).
    body = pod(
        containers=[container(requests={"cpu": "1"})],
        init_containers=[
            container("before", requests={"cpu": "4"}),
            container("proxy", requests={"cpu": "2"}, restart_policy="Always"),
            container("after", requests={"cpu": "3"}),
        ],
    )
    assert facts(body).cpu_m == 5000


def test_it_accumulates_several_sidecars_for_later_init_containers():
    body = pod(
        containers=[container()],
        init_containers=[
            container("log", requests={"nvidia.com/gpu": "1"}, restart_policy="Always"),
            container("mesh", requests={"nvidia.com/gpu": "1"}, restart_policy="Always"),
            container("load", requests={"nvidia.com/gpu": "2"}),
        ],
    )
    assert facts(body).gpu == 4


def test_it_treats_other_init_restart_policies_as_plain_init_containers():
    body = pod(
        containers=[gpu_container(gpus=1)],
        init_containers=[container("odd", requests={"nvidia.com/gpu": "1"}, restart_policy="OnFailure")],
    )
    assert facts(body).gpu == 1


def test_it_matches_the_sidecar_kep_example():
    # KEP-753: init-1 (2 CPU), sidecar (1 CPU), init-2 (3 CPU), app (2 CPU) -> max(2 + 1, 2, 1, 3 + 1) = 4.
    body = pod(
        containers=[container(requests={"cpu": "2"})],
        init_containers=[
            container("init-1", requests={"cpu": "2"}),
            container("sidecar", requests={"cpu": "1"}, restart_policy="Always"),
            container("init-2", requests={"cpu": "3"}),
        ],
    )
    assert facts(body).cpu_m == 4000


def test_it_adds_the_runtime_class_overhead_after_taking_the_maximum():
    body = pod(
        containers=[container(requests={"cpu": "1", "memory": "1Gi"})],
        init_containers=[container("init", requests={"cpu": "2"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
    )
    found = facts(body)
    assert (found.cpu_m, found.memory) == (2250, 2**30 + 120 * 2**20)


def test_it_counts_a_limit_without_a_request_as_the_request():
    body = pod(containers=[container(limits={"nvidia.com/gpu": "2", "cpu": "4", "memory": "8Gi"})])
    found = facts(body)
    assert (found.gpu, found.cpu_m, found.memory) == (2, 4000, 8 * 2**30)


def test_it_prefers_an_explicit_request_over_the_limit():
    body = pod(containers=[container(requests={"cpu": "1"}, limits={"cpu": "4", "nvidia.com/gpu": "1"})])
    found = facts(body)
    assert (found.gpu, found.cpu_m) == (1, 1000)


def test_it_defaults_limits_only_init_containers_and_sidecars_too():
    body = pod(
        containers=[container()],
        init_containers=[
            container("proxy", limits={"nvidia.com/gpu": "1"}, restart_policy="Always"),
            container("init", limits={"nvidia.com/gpu": "2"}),
        ],
    )
    assert facts(body).gpu == 3


def test_it_uses_pod_level_requests_for_cpu_and_memory_but_not_gpus():
    body = pod(
        containers=[gpu_container(gpus=2, cpu="1", memory="1Gi"), gpu_container("b", 1, cpu="1", memory="1Gi")],
        pod_resources={"requests": {"cpu": "6", "memory": "10Gi"}, "limits": {"cpu": "8", "memory": "12Gi"}},
        overhead={"cpu": "100m"},
    )
    found = facts(body)
    assert (found.gpu, found.cpu_m, found.memory) == (3, 6100, 10 * 2**30)


def test_it_defaults_pod_level_requests_from_pod_level_limits():
    body = pod(containers=[container(requests={"cpu": "1"})], pod_resources={"limits": {"cpu": "3"}})
    assert facts(body).cpu_m == 3000


def test_it_ignores_a_malformed_quantity_instead_of_raising():
    body = pod(containers=[container(requests={"cpu": "lots", "nvidia.com/gpu": "1"})])
    found = facts(body)
    assert (found.gpu, found.cpu_m) == (1, 0)


def test_it_survives_a_pod_with_almost_nothing_in_it():
    assert facts({}) == PodFacts("", "", "", "", "Pending", 0, 0, 0, "", "")
    assert facts({"metadata": None, "spec": {"containers": None, "initContainers": [None]}, "status": None}).gpu == 0


def test_it_reports_every_resource_with_exact_quantities():
    body = pod(
        containers=[
            container(requests={"cpu": "100m", "ephemeral-storage": "10Gi", "hugepages-2Mi": "1Gi"}),
            container("b", requests={"cpu": "200m"}),
        ]
    )
    assert pod_requests(body) == {
        "cpu": Decimal("0.3"),
        "ephemeral-storage": 10 * 2**30,
        "hugepages-2Mi": 2**30,
    }


@pytest.mark.parametrize(
    ("labels", "component"),
    [
        ({"app": "nvidia-container-toolkit-daemonset"}, "toolkit"),
        ({"app.kubernetes.io/name": "nvidia-container-toolkit"}, "toolkit"),
        ({"app": "nvidia-dcgm-exporter"}, "dcgm"),
        ({"app.kubernetes.io/name": "dcgm-exporter"}, "dcgm"),
        ({"app.kubernetes.io/name": "nvidia-dcgm-exporter"}, "dcgm"),
        ({"app": "nvidia-device-plugin-daemonset"}, ""),
        ({"app": "dcgm-exporter"}, ""),
        ({}, ""),
    ],
)
def test_it_recognises_gpu_operator_components_by_label(labels, component):
    assert component_of(labels) == component
    assert facts(pod(labels=labels)).component == component


def test_it_recognises_the_operator_daemonset_pods():
    assert facts(toolkit_pod()).component == "toolkit"
    assert facts(dcgm_pod()).component == "dcgm"


@pytest.mark.parametrize(
    ("node", "phase", "counts"),
    [
        ("gpu-1", "Running", True),
        ("gpu-1", "Pending", True),
        ("gpu-1", "Unknown", True),
        ("gpu-1", "Succeeded", False),
        ("gpu-1", "Failed", False),
        (None, "Pending", False),
    ],
)
def test_it_counts_only_bound_pods_that_have_not_finished(node, phase, counts):
    assert counts_on_node(facts(pod(node=node, phase=phase))) is counts


def test_it_counts_a_bound_pending_pod():
    assert counts_on_node(facts(pod(node="gpu-1", phase="Pending")))


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False), ("Unknown", False)],
)
def test_it_tells_terminal_pods_from_dicts_and_facts(phase, terminal):
    body = pod(phase=phase)
    assert is_terminal(body) is terminal
    assert is_terminal(facts(body)) is terminal


def test_it_does_not_call_a_pod_without_status_terminal():
    assert not is_terminal({"metadata": {"name": "x"}})


def test_only_a_pod_of_one_of_our_low_priority_workloads_is_preemptible():
    ours = {"osmo.nvidia.com/managed-by": "osmo-pools", POOL_LABEL: "training"}
    assert facts(pod(labels={**ours, "osmo.nvidia.com/priority": "low"})).preemptible
    assert not facts(pod(labels={**ours, "osmo.nvidia.com/priority": "normal"})).preemptible
    assert not facts(pod(labels={**ours, "osmo.nvidia.com/priority": "high"})).preemptible
    # A pod we did not submit counts as non-preemptible whatever it says about itself.
    assert not facts(pod(labels={POOL_LABEL: "training", "osmo.nvidia.com/priority": "low"})).preemptible
    assert not facts(pod(labels={**ours, "osmo.nvidia.com/priority": "low"}), pool_label="").preemptible
