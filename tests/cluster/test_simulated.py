"""The simulated cluster behind the demo: content, paging, watches, persistence across processes, Jobs.

Pure and fast: an injected clock, a sleep that only moves that clock, and a state directory under tmp_path.
"""

import json
import multiprocessing
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from pools.cluster import Cluster, ClusterError, Conflict, Expired, NotFound, simulated
from pools.cluster.simulated import RV_PER_TICK, SimulatedCluster

DEMO_DOCUMENTS = Path(simulated.__file__).resolve().parents[2] / "config" / "defaults" / "demo.json"
PRODUCTS = {
    "NVIDIA-GB200": (4, "blackwell"),
    "NVIDIA-H100-80GB-HBM3": (8, "hopper"),
    "NVIDIA-A100-SXM4-80GB": (8, "ampere"),
    "NVIDIA-L40S": (4, "ada-lovelace"),
    "NVIDIA-Jetson-AGX-Orin": (1, "ampere"),
}


def list_all(page_fn, limit=100):
    items, token, versions = [], None, set()
    while True:
        page = page_fn(limit=limit, continue_token=token)
        items += page.items
        versions.add(page.resource_version)
        token = page.continue_token
        if not token:
            assert len(versions) == 1
            return items, versions.pop()


def nodes_of(cluster):
    return {node["metadata"]["name"]: node for node in list_all(cluster.list_nodes)[0]}


def pods_of(cluster):
    return list_all(cluster.list_pods, limit=500)[0]


def conditions(node):
    return {c["type"]: c["status"] for c in node["status"]["conditions"]}


def states(node) -> set[str]:
    found = {kind for kind, status in conditions(node).items() if kind != "Ready" and status == "True"}
    ready = conditions(node)["Ready"]
    if ready != "True":
        found.add(f"Ready{ready}")
    if node["spec"].get("unschedulable"):
        found.add("Cordoned")
    return found


def gpu_request(pod_spec) -> int:
    def gpus(container):
        return int((container.get("resources") or {}).get("requests", {}).get("nvidia.com/gpu", 0))

    init = pod_spec.get("initContainers") or []
    sidecars = sum(gpus(c) for c in init if c.get("restartPolicy") == "Always")
    largest_init = max([gpus(c) for c in init if c.get("restartPolicy") != "Always"], default=0)
    return max(largest_init, sum(gpus(c) for c in pod_spec["containers"]) + sidecars)


def gpu_used(pods) -> dict[str, int]:
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        if pod["spec"].get("nodeName") and pod["status"]["phase"] not in ("Succeeded", "Failed"):
            used[pod["spec"]["nodeName"]] += gpu_request(pod["spec"])
    return used


def drain(events, limit=100_000):
    return [event for _, event in zip(range(limit), events, strict=False)]


def job_body(name="train-1", gpus=1, selector=None, tolerations=None, **annotations):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "nodeSelector": selector or {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": tolerations or [],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.12-py3",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        }}},
    }


# ---- what the cluster holds ---------------------------------------------------------------------------------


def test_it_implements_the_cluster_protocol(cluster):
    def accepts(c: Cluster) -> Cluster:
        return c

    assert accepts(cluster) is cluster
    for method in ("list_nodes", "list_pods", "watch_nodes", "watch_pods", "patch_node_labels", "set_unschedulable",
                   "create_job", "get_job", "delete_job", "list_jobs", "watch_jobs", "ensure_namespace", "list_events",
                   "watch_events"):
        assert callable(getattr(cluster, method))


def test_it_has_over_200_nodes_of_every_gpu_type_and_cpu_only_nodes(cluster):
    nodes = nodes_of(cluster)
    assert len(nodes) >= 200
    products = Counter(node["metadata"]["labels"].get("nvidia.com/gpu.product", "cpu") for node in nodes.values())
    assert set(products) == {*PRODUCTS, "cpu"}
    assert all(count >= 10 for count in products.values())


def test_gpu_nodes_carry_real_feature_discovery_labels_and_capacity(cluster):
    for node in nodes_of(cluster).values():
        labels, status = node["metadata"]["labels"], node["status"]
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert {"kubernetes.io/arch", "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone"} <= set(labels)
        assert {"cpu", "memory", "ephemeral-storage", "pods"} <= set(status["capacity"]) & set(status["allocatable"])
        product = labels.get("nvidia.com/gpu.product")
        if product is None:
            assert "nvidia.com/gpu" not in status["capacity"] and "nvidia.com/gpu.present" not in labels
            continue
        count, family = PRODUCTS[product]
        assert labels["nvidia.com/gpu.count"] == status["capacity"]["nvidia.com/gpu"] == str(count)
        assert labels["nvidia.com/gpu.family"] == family
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.machine"] and labels["nvidia.com/cuda.driver.major"].isdigit()
        assert labels["nvidia.com/gfd.timestamp"].isdigit()
        if product == "NVIDIA-H100-80GB-HBM3":
            assert labels["nvidia.com/gpu.memory"] == "81559"
        if product in ("NVIDIA-Jetson-AGX-Orin", "NVIDIA-GB200"):
            assert labels["kubernetes.io/arch"] == "arm64"
        taints = node["spec"].get("taints", [])
        a100_taint = {"key": "nvidia.com/gpu.product", "value": "NVIDIA-A100", "effect": "NoSchedule"}
        assert (a100_taint in taints) == (product == "NVIDIA-A100-SXM4-80GB")


def test_a_couple_of_nodes_report_an_unhealthy_gpu(cluster):
    unhealthy = [node for node in nodes_of(cluster).values() if "nvidia.com/gpu" in node["status"]["capacity"]
                 and node["status"]["allocatable"]["nvidia.com/gpu"] != node["status"]["capacity"]["nvidia.com/gpu"]]
    assert 2 <= len(unhealthy) <= 4
    for node in unhealthy:
        capacity, allocatable = node["status"]["capacity"], node["status"]["allocatable"]
        assert int(allocatable["nvidia.com/gpu"]) == int(capacity["nvidia.com/gpu"]) - 1


def test_nodes_are_grouped_into_the_demo_pools_and_some_are_left_to_the_default_pool(cluster):
    by_pool = defaultdict(Counter)
    for node in nodes_of(cluster).values():
        labels = node["metadata"]["labels"]
        by_pool[labels.get("runwhere.ai/pool")][labels.get("nvidia.com/gpu.product", "cpu")] += 1
    assert set(by_pool["training"]) == {"NVIDIA-GB200", "NVIDIA-H100-80GB-HBM3"}
    assert set(by_pool["simulation"]) == {"NVIDIA-L40S"}
    assert set(by_pool["inference"]) == {"NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S"}
    assert set(by_pool["dev"]) == {"NVIDIA-H100-80GB-HBM3", "NVIDIA-Jetson-AGX-Orin"}
    assert sum(by_pool[None].values()) >= 10


def test_every_non_ready_state_is_present_at_any_time(cluster, clock):
    wanted = {"DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable", "Cordoned", "ReadyUnknown",
              "ReadyFalse"}
    for _ in range(12):
        seen = Counter(state for node in nodes_of(cluster).values() for state in states(node))
        assert set(seen) == wanted
        assert all(1 <= count <= 4 for count in seen.values()), seen
        clock.advance(37)


def test_a_nodes_trouble_lasts_several_ticks_then_moves_to_another_node(cluster, clock):
    history = []
    for _ in range(60):
        history.append({name for name, node in nodes_of(cluster).items() if states(node)})
        clock.advance(cluster.tick_seconds)
    runs, current = [], Counter()
    for tick, troubled in enumerate(history):
        for name in list(current):
            if name not in troubled:
                if current[name] != tick:  # began before the window: its length is unknown
                    runs.append(current[name])
                del current[name]
        for name in troubled:
            current[name] += 1
        if tick == 0:
            current = Counter({name: 10_000 for name in troubled})
    complete = [length for length in runs if length < 10_000]
    assert complete and min(complete) >= 8
    assert history[0] != history[-1]


def test_troubled_nodes_look_like_a_kubelet_reports_them(cluster, clock):
    nodes = nodes_of(cluster)
    for node in nodes.values():
        found = states(node)
        heartbeats = {c["lastHeartbeatTime"] for c in node["status"]["conditions"] if c["type"] != "NetworkUnavailable"}
        taint_keys = {t["key"] for t in node["spec"].get("taints", [])}
        if "ReadyUnknown" in found:
            assert set(conditions(node).values()) - {"False"} == {"Unknown"}
            assert "node.kubernetes.io/unreachable" in taint_keys
            assert max(heartbeats) < simulated._ts(clock.seconds // 5 * 5)
        else:
            assert heartbeats == {simulated._ts(clock.seconds // 5 * 5)}
        if "DiskPressure" in found:
            assert "node.kubernetes.io/disk-pressure" in taint_keys
        if "Cordoned" in found:
            assert "node.kubernetes.io/unschedulable" in taint_keys


def test_heartbeats_and_feature_discovery_timestamps_move_every_tick(cluster, clock):
    before = nodes_of(cluster)["dgx-h100-001"]
    clock.advance(5)
    after = nodes_of(cluster)["dgx-h100-001"]
    assert int(after["metadata"]["labels"]["nvidia.com/gfd.timestamp"]) == int(
        before["metadata"]["labels"]["nvidia.com/gfd.timestamp"]) + 5
    ready = next(c for c in after["status"]["conditions"] if c["type"] == "Ready")
    assert ready["lastHeartbeatTime"] == simulated._ts(clock.seconds // 5 * 5)
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])


def test_gpu_operator_pods_run_on_gpu_nodes_except_a_few_and_one_opts_out_of_dcgm(cluster):
    nodes, pods = nodes_of(cluster), pods_of(cluster)
    apps = defaultdict(set)
    for pod in pods:
        if pod["metadata"]["namespace"] == "gpu-operator":
            apps[pod["spec"]["nodeName"]].add(pod["metadata"]["labels"]["app"])
    gpu_nodes = [name for name, node in nodes.items() if "nvidia.com/gpu.product" in node["metadata"]["labels"]]
    no_toolkit = [name for name in gpu_nodes if "nvidia-container-toolkit-daemonset" not in apps[name]]
    no_dcgm = [name for name in gpu_nodes if "nvidia-dcgm-exporter" not in apps[name]]
    opted_out = [name for name in gpu_nodes
                 if nodes[name]["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm-exporter"] == "false"]
    assert 1 <= len(no_toolkit) <= 3 and 2 <= len(no_dcgm) <= 4
    assert len(opted_out) == 1 and opted_out[0] in no_dcgm
    assert not apps.keys() - set(gpu_nodes)


def test_workload_pods_come_in_realistic_shapes_and_never_overcommit_gpus(cluster, clock):
    shapes = Counter()
    for _ in range(5):
        nodes, pods = nodes_of(cluster), pods_of(cluster)
        for pod in pods:
            spec, status = pod["spec"], pod["status"]
            if not gpu_request(spec):
                continue
            init = spec.get("initContainers") or []
            shapes["init"] += any(c.get("restartPolicy") != "Always" for c in init)
            shapes["sidecar"] += any(c.get("restartPolicy") == "Always" for c in init)
            shapes["gpu init"] += any(int(c["resources"]["requests"].get("nvidia.com/gpu", 0)) for c in init)
            shapes["two gpu containers"] += sum(
                1 for c in spec["containers"] if "nvidia.com/gpu" in c["resources"].get("requests", {})) > 1
            shapes[f"phase {status['phase']}{'' if spec.get('nodeName') else ' unbound'}"] += 1
        for name, used in gpu_used(pods).items():
            assert used <= int(nodes[name]["status"]["allocatable"].get("nvidia.com/gpu", 0)), name
        clock.advance(60)
    for shape in ("init", "sidecar", "gpu init", "two gpu containers", "phase Running", "phase Pending",
                  "phase Pending unbound", "phase Succeeded", "phase Failed"):
        assert shapes[shape], (shape, shapes)


def test_gpu_usage_moves_over_time(cluster, clock):
    totals = []
    for _ in range(6):
        totals.append(sum(gpu_used(pods_of(cluster)).values()))
        clock.advance(60)
    assert len(set(totals)) > 3
    capacity = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes_of(cluster).values())
    assert all(0.3 * capacity < total < capacity for total in totals)


def test_two_clusters_with_different_names_differ_and_a_seed_pins_the_content(tmp_path, clock):
    first = SimulatedCluster("alpha", tmp_path, clock=clock)
    second = SimulatedCluster("beta", tmp_path, clock=clock)
    pinned = SimulatedCluster("gamma", tmp_path, clock=clock, seed=first.seed)
    assert pods_of(first) != pods_of(second)
    assert [p["metadata"]["uid"] for p in pods_of(first)] == [p["metadata"]["uid"] for p in pods_of(pinned)]


def test_a_tick_is_built_once_and_served_from_cache(cluster, monkeypatch):
    nodes_of(cluster)
    calls = []
    original = simulated.cluster.node_object
    monkeypatch.setattr(simulated.cluster, "node_object", lambda *a, **k: calls.append(1) or original(*a, **k))
    nodes_of(cluster)
    pods_of(cluster)
    assert calls == []


# ---- list and watch ---------------------------------------------------------------------------------------


def test_pages_follow_continue_tokens_and_share_one_snapshot_while_time_moves(cluster, clock):
    first = cluster.list_pods(limit=300)
    assert len(first.items) == 300 and first.continue_token
    clock.advance(20)
    items, token = list(first.items), first.continue_token
    while token:
        page = cluster.list_pods(limit=300, continue_token=token)
        assert page.resource_version == first.resource_version
        items += page.items
        token = page.continue_token
    clock.advance(-20)
    whole = cluster.list_pods(limit=0)
    assert whole.continue_token is None
    assert [p["metadata"]["uid"] for p in items] == [p["metadata"]["uid"] for p in whole.items]
    keys = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in items]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_list_items_are_fresh_copies(cluster):
    node = cluster.list_nodes(limit=1).items[0]
    node["metadata"]["labels"].clear()
    assert cluster.list_nodes(limit=1).items[0]["metadata"]["labels"]


def test_a_continue_token_or_version_older_than_the_retention_window_is_expired(cluster, clock):
    page = cluster.list_nodes(limit=10)
    clock.advance(simulated.RETENTION_SECONDS + 10)
    with pytest.raises(Expired) as caught:
        cluster.list_nodes(limit=10, continue_token=page.continue_token)
    assert caught.value.status == 410
    with pytest.raises(Expired):
        cluster.watch_nodes(page.resource_version)
    with pytest.raises(ClusterError) as caught:
        cluster.list_nodes(continue_token="not-a-token")
    assert caught.value.status == 400


def test_resource_versions_increase_with_time_and_with_changes_from_any_process(cluster, other, clock):
    versions = [int(cluster.list_nodes(limit=1).resource_version)]
    clock.advance(5)
    versions.append(int(cluster.list_nodes(limit=1).resource_version))
    other.patch_node_labels("cpu-001", {"team": "a"})
    versions.append(int(cluster.list_nodes(limit=1).resource_version))
    cluster.set_unschedulable("cpu-002", True)
    versions.append(int(other.list_pods(limit=1).resource_version))
    assert versions == sorted(set(versions))
    assert versions[1] - versions[0] == RV_PER_TICK


def test_watch_yields_modified_nodes_when_time_advances(cluster, clock):
    listed = cluster.list_nodes(limit=0)
    events = cluster.watch_nodes(listed.resource_version, timeout_seconds=30)
    clock.advance(5)
    batch = [next(events) for _ in range(len(listed.items))]
    assert {event.type for event in batch} == {"MODIFIED"}
    assert len({event.object["metadata"]["name"] for event in batch}) == len(listed.items)
    assert batch[0].object["kind"] == "Node" and batch[0].object["apiVersion"] == "v1"
    assert int(batch[-1].resource_version) == int(listed.resource_version) + RV_PER_TICK


def test_watch_pods_reports_pods_that_start_and_finish(cluster, clock):
    listed = cluster.list_pods(limit=0)
    clock.advance(120)
    events = drain(cluster.watch_pods(listed.resource_version, timeout_seconds=0))
    kinds = Counter(event.type for event in events)
    assert kinds["ADDED"] and kinds["MODIFIED"] and kinds["DELETED"]
    finished = [e for e in events if e.type == "MODIFIED" and e.object["status"]["phase"] in ("Succeeded", "Failed")]
    assert finished


def test_watch_replays_to_the_same_state_as_a_fresh_list(cluster, clock):
    def key(pod):
        return pod["metadata"]["namespace"], pod["metadata"]["name"]

    def comparable(pod):
        pod = json.loads(json.dumps(pod))
        pod.pop("kind", None), pod.pop("apiVersion", None), pod["metadata"].pop("resourceVersion")
        return pod

    listed = cluster.list_pods(limit=0)
    state = {key(pod): comparable(pod) for pod in listed.items}
    clock.advance(45)
    for event in drain(cluster.watch_pods(listed.resource_version, timeout_seconds=0)):
        if event.type == "DELETED":
            del state[key(event.object)]
        elif event.type != "BOOKMARK":
            state[key(event.object)] = comparable(event.object)
    assert state == {key(pod): comparable(pod) for pod in cluster.list_pods(limit=0).items}


def test_resuming_from_any_event_of_a_cut_stream_loses_nothing(cluster, clock):
    listed = cluster.list_pods(limit=0)
    clock.advance(60)
    full = drain(cluster.watch_pods(listed.resource_version, timeout_seconds=0))
    assert len(full) > 3
    cut = full[len(full) // 2].resource_version
    resumed = drain(cluster.watch_pods(cut, timeout_seconds=0))
    seen_after_cut = {(e.type, e.object["metadata"]["name"]) for e in resumed}
    assert {(e.type, e.object["metadata"]["name"]) for e in full[len(full) // 2 + 1:]} <= seen_after_cut
    assert full[-1].resource_version == cluster.current_resource_version()


def test_watch_sends_a_bookmark_when_a_new_version_changes_nothing_it_watches(cluster, other, clock):
    start = cluster.list_pods(limit=1).resource_version
    pods = cluster.watch_pods(start, timeout_seconds=5)
    nodes = cluster.watch_nodes(start, timeout_seconds=5)
    other.patch_node_labels("dgx-a100-001", {"runwhere.ai/pool": "training"})
    bookmark = next(pods)
    assert bookmark.type == "BOOKMARK" and bookmark.object["kind"] == "Pod"
    assert int(bookmark.resource_version) > int(start)
    (changed,) = [next(nodes)]
    assert changed.type == "MODIFIED" and changed.object["metadata"]["name"] == "dgx-a100-001"
    assert changed.object["metadata"]["labels"]["runwhere.ai/pool"] == "training"
    assert changed.resource_version == bookmark.resource_version


def test_watch_sleeps_between_ticks_with_the_injected_sleep_and_ends_at_its_timeout(tmp_path, clock):
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock.advance(seconds)

    cluster = SimulatedCluster("default", tmp_path, clock=clock, sleep=sleep)
    events = drain(cluster.watch_pods(cluster.list_pods(limit=1).resource_version, timeout_seconds=12))
    assert sum(slept) == pytest.approx(12, abs=1)
    assert max(slept) <= 1.0
    versions = sorted({int(e.resource_version) for e in events if e is events[-1] or e.type == "BOOKMARK"})
    assert versions and versions[-1] // RV_PER_TICK == clock.seconds // 5


def test_a_watch_on_a_frozen_clock_with_a_no_op_sleep_still_ends(cluster):
    assert drain(cluster.watch_nodes(cluster.list_nodes(limit=1).resource_version, timeout_seconds=30)) == []


def test_a_watch_from_version_zero_starts_with_every_object_added(cluster):
    events = cluster.watch_nodes("0", timeout_seconds=0)
    added = drain(events)
    assert len(added) == len(nodes_of(cluster)) and {e.type for e in added} == {"ADDED"}
    assert added[0].resource_version == "0" and added[-1].resource_version == cluster.current_resource_version()


# ---- what users change --------------------------------------------------------------------------------------


def test_two_instances_on_one_state_dir_agree_and_see_each_others_changes(cluster, other, clock):
    assert nodes_of(cluster) == nodes_of(other)
    assert pods_of(cluster) == pods_of(other)
    returned = cluster.patch_node_labels("ovx-l40s-001", {"runwhere.ai/pool": "inference", "team": "vision"})
    assert returned["metadata"]["labels"]["team"] == "vision"
    seen = nodes_of(other)["ovx-l40s-001"]
    assert seen["metadata"]["labels"]["runwhere.ai/pool"] == "inference"
    assert seen["metadata"]["labels"]["team"] == "vision"
    other.patch_node_labels("ovx-l40s-001", {"team": None})
    assert "team" not in nodes_of(cluster)["ovx-l40s-001"]["metadata"]["labels"]
    clock.advance(600)
    assert nodes_of(cluster)["ovx-l40s-001"]["metadata"]["labels"]["runwhere.ai/pool"] == "inference"
    assert nodes_of(cluster) == nodes_of(other)


def test_a_label_patch_shows_in_a_watch_from_another_instance(cluster, other, clock):
    start = cluster.list_nodes(limit=1).resource_version
    events = other.watch_nodes(start, timeout_seconds=5)
    cluster.patch_node_labels("cpu-003", {"runwhere.ai/pool": "dev"})
    event = next(events)
    assert event.type == "MODIFIED" and event.object["metadata"]["labels"]["runwhere.ai/pool"] == "dev"


def test_label_patches_are_validated_and_need_a_known_node(cluster):
    with pytest.raises(NotFound) as caught:
        cluster.patch_node_labels("no-such-node", {"a": "b"})
    assert caught.value.status == 404
    with pytest.raises(ClusterError) as caught:
        cluster.patch_node_labels("cpu-001", {"bad key!": "x"})
    assert caught.value.status == 422
    with pytest.raises(ClusterError):
        cluster.patch_node_labels("cpu-001", {"ok": "not ok value"})


def test_an_unchanged_patch_does_not_make_a_new_version(cluster):
    before = cluster.current_resource_version()
    cluster.patch_node_labels("cpu-001", {"kubernetes.io/hostname": "cpu-001"})
    assert cluster.current_resource_version() == before


def test_a_users_cordon_and_uncordon_persist_over_the_simulations_own(cluster, other, clock):
    node = cluster.set_unschedulable("dgx-h100-010", True)
    assert node["spec"]["unschedulable"] is True
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}.items() <= next(
        t for t in node["spec"]["taints"] if t["key"] == "node.kubernetes.io/unschedulable").items()
    clock.advance(3600)
    assert nodes_of(other)["dgx-h100-010"]["spec"]["unschedulable"] is True
    simulated_cordon = next(name for name, n in nodes_of(cluster).items()
                            if n["spec"].get("unschedulable") and name != "dgx-h100-010")
    other.set_unschedulable(simulated_cordon, False)
    for _ in range(10):
        clock.advance(60)
        assert "unschedulable" not in nodes_of(cluster)[simulated_cordon]["spec"]
    with pytest.raises(NotFound):
        cluster.set_unschedulable("no-such-node", True)


def _patch_many(state_dir: str, prefix: str) -> None:
    cluster = SimulatedCluster("default", Path(state_dir))
    for n in range(15):
        cluster.patch_node_labels(f"cpu-{n + 1:03d}", {f"{prefix}-{n}": "x"})


def test_concurrent_writers_in_separate_processes_lose_no_change(tmp_path):
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_patch_many, args=(str(tmp_path), prefix)) for prefix in ("a", "b", "c")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    labels = nodes_of(SimulatedCluster("default", tmp_path))
    for n in range(15):
        node_labels = labels[f"cpu-{n + 1:03d}"]["metadata"]["labels"]
        assert {f"a-{n}", f"b-{n}", f"c-{n}"} <= set(node_labels)
    state = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert len(state["ops"]) == 45 and not list(tmp_path.glob("*.tmp"))


# ---- jobs ---------------------------------------------------------------------------------------------------


def test_jobs_are_created_fetched_refused_twice_and_deleted(cluster, other):
    created = cluster.create_job("llm-research", job_body())
    assert created["kind"] == "Job" and created["metadata"]["namespace"] == "llm-research"
    assert created["metadata"]["uid"] and created["spec"]["selector"]["matchLabels"]
    fetched = other.get_job("llm-research", "train-1")
    assert fetched["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(Conflict) as caught:
        other.create_job("llm-research", job_body())
    assert caught.value.status == 409
    cluster.create_job("other-team", job_body())
    other.delete_job("llm-research", "train-1")
    with pytest.raises(NotFound):
        cluster.get_job("llm-research", "train-1")
    with pytest.raises(NotFound):
        cluster.delete_job("llm-research", "train-1")
    assert cluster.get_job("other-team", "train-1")
    recreated = cluster.create_job("llm-research", job_body())
    assert recreated["metadata"]["uid"] != created["metadata"]["uid"]


def test_invalid_jobs_are_refused(cluster):
    with pytest.raises(ClusterError) as caught:
        cluster.create_job("team", {"metadata": {"name": "Bad_Name"}, "spec": {}})
    assert caught.value.status == 422
    with pytest.raises(ClusterError):
        cluster.create_job("team", {"metadata": {"name": "no-containers"}, "spec": {"template": {"spec": {}}}})
    with pytest.raises(ClusterError) as caught:
        cluster.create_job("team", {**job_body(), "metadata": {"name": "x", "namespace": "elsewhere"}})
    assert caught.value.status == 400


def test_a_job_runs_a_pod_on_a_matching_node_until_it_completes(cluster, clock):
    body = job_body("finetune-a100", gpus=2, selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                    tolerations=[{"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "NVIDIA-A100",
                                  "effect": "NoSchedule"}], **{simulated.DURATION_ANNOTATION: "30"})
    start = cluster.list_pods(limit=1).resource_version
    cluster.create_job("inference-eval", body)
    (pod,) = [p for p in pods_of(cluster) if p["metadata"]["labels"].get("job-name") == "finetune-a100"]
    node = nodes_of(cluster)[pod["spec"]["nodeName"]]
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert conditions(node)["Ready"] == "True" and not node["spec"].get("unschedulable")
    assert pod["status"]["phase"] == "Pending" and pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    added = [e for e in drain(cluster.watch_pods(start, timeout_seconds=0)) if e.type == "ADDED"]
    assert pod["metadata"]["name"] in {e.object["metadata"]["name"] for e in added}
    phases = []
    for step in range(8):
        clock.advance(5)
        pods = pods_of(cluster)
        phases.append(next(p for p in pods if p["metadata"]["name"] == pod["metadata"]["name"])["status"]["phase"])
        if step % 3 == 0:
            nodes = nodes_of(cluster)
            for name, used in gpu_used(pods).items():
                assert used <= int(nodes[name]["status"]["allocatable"].get("nvidia.com/gpu", 0)), name
    assert phases[0] == "Running" and phases[-1] == "Succeeded"
    job = cluster.get_job("inference-eval", "finetune-a100")
    assert job["status"]["succeeded"] == 1 and job["status"]["conditions"][-1]["type"] == "Complete"
    cluster.delete_job("inference-eval", "finetune-a100")
    assert pod["metadata"]["name"] not in {p["metadata"]["name"] for p in pods_of(cluster)}


def test_deleting_a_job_with_orphan_propagation_leaves_its_pods(cluster):
    cluster.create_job("team", job_body("keep-pods"))
    cluster.delete_job("team", "keep-pods", propagation_policy="Orphan")
    (pod,) = [p for p in pods_of(cluster) if p["metadata"]["labels"].get("job-name") == "keep-pods"]
    assert "ownerReferences" not in pod["metadata"]
    with pytest.raises(ClusterError) as caught:
        cluster.delete_job("team", "keep-pods", propagation_policy="Sometimes")
    assert caught.value.status == 400


def test_a_job_nothing_can_hold_stays_pending_unscheduled(cluster):
    cluster.create_job("team", job_body("too-big", gpus=16))
    (pod,) = [p for p in pods_of(cluster) if p["metadata"]["labels"].get("job-name") == "too-big"]
    assert "nodeName" not in pod["spec"] and pod["status"]["phase"] == "Pending"
    assert pod["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert cluster.get_job("team", "too-big")["status"]["active"] == 1


def test_a_job_past_its_deadline_fails(cluster, clock):
    body = job_body("slow", **{simulated.DURATION_ANNOTATION: "600"})
    body["spec"]["activeDeadlineSeconds"] = 20
    cluster.create_job("team", body)
    clock.advance(60)
    job = cluster.get_job("team", "slow")
    assert job["status"]["failed"] == 1 and job["status"]["conditions"][-1]["reason"] == "DeadlineExceeded"


# ---- the demo configuration ---------------------------------------------------------------------------------


def _tolerated(taint, tolerations):
    def tolerates(toleration):
        if toleration.get("effect") not in (None, taint["effect"]):
            return False
        if toleration.get("operator") == "Exists":
            return toleration.get("key") in (None, taint["key"])
        return toleration.get("key") == taint["key"] and toleration.get("value") == taint.get("value")

    return any(tolerates(toleration) for toleration in tolerations)


def test_the_demo_documents_import_and_every_platform_finds_simulated_nodes(defaults, cluster):
    from pools.config import writes
    from pools.models import ConfigKind, Platform, Pool

    documents = json.loads(DEMO_DOCUMENTS.read_text())
    writes.import_document(ConfigKind.POD_TEMPLATE, documents["pod_templates"], description="demo")
    writes.import_document(ConfigKind.RESOURCE_VALIDATION, documents["resource_validations"], description="demo")
    result = writes.import_document(ConfigKind.POOL, {"pools": documents["pools"]}, description="demo")
    assert sorted(result.created) == ["dev", "inference", "simulation", "training"]
    assert result.backends_created == []
    assert Platform.objects.filter(pool__name="training").count() == 2
    assert Pool.objects.get(name="training").node_selector == {"runwhere.ai/pool": "training"}

    nodes = list(nodes_of(cluster).values())
    claimed = set()
    for pool_name in documents["pools"]:
        for platform, effective in writes.effective(pool_name)["platforms"].items():
            matched = {
                node["metadata"]["name"] for node in nodes
                if effective["node_selector"].items() <= node["metadata"]["labels"].items()
                and all(_tolerated(taint, effective["tolerations"]) for taint in node["spec"].get("taints", [])
                        if not taint["key"].startswith("node.kubernetes.io/"))
            }
            assert len(matched) >= 4, (pool_name, platform)
            claimed |= matched
    assert len(claimed) < len(nodes)  # the rest fall to the default pool


def test_jobs_are_listed_and_watched_by_label_selector_as_their_status_moves(cluster, clock):
    ours = {"runwhere.ai/workload": "w1"}
    body = job_body("wl-1", **{simulated.DURATION_ANNOTATION: "30"})
    body["metadata"]["labels"] = ours
    start = cluster.list_jobs("runwhere.ai/workload").resource_version
    cluster.create_job("llm-research", body)
    cluster.create_job("llm-research", job_body("theirs"))

    listed, _ = list_all(lambda **page: cluster.list_jobs("runwhere.ai/workload", **page), limit=1)
    assert [job["metadata"]["name"] for job in listed] == ["wl-1"]
    assert [j["metadata"]["name"] for j in cluster.list_jobs("!runwhere.ai/workload").items] == ["theirs"]
    assert cluster.list_jobs("runwhere.ai/workload=w2").items == []

    clock.advance(60)  # past its run time: the Job completes
    events = drain(cluster.watch_jobs("runwhere.ai/workload=w1", start, timeout_seconds=0))
    assert [event.type for event in events if event.type != "BOOKMARK"] == ["ADDED"]
    (added,) = [event for event in events if event.type == "ADDED"]
    assert added.object["kind"] == "Job" and added.object["status"].get("succeeded") == 1
    version = events[-1].resource_version
    cluster.delete_job("llm-research", "wl-1")
    later = drain(cluster.watch_jobs("runwhere.ai/workload=w1", version, timeout_seconds=0))
    assert [event.type for event in later if event.type != "BOOKMARK"] == ["DELETED"]
    with pytest.raises(ClusterError) as caught:
        cluster.list_jobs("a in (b")
    assert caught.value.status == 400


def test_a_pod_that_found_no_room_is_bound_once_its_pinned_node_frees_up(cluster, clock):
    """The kube-scheduler keeps an unschedulable pod queued and binds it when a node has room; the simulated one
    did so only when the Job was created, so a Job dispatched to its planned node a moment after the fleet's own
    work took the GPUs there stayed Unschedulable for ever (issue 24: the demo's jobs, `0/250 nodes`)."""
    from scheduling.specs.jobs import pin_to_nodes

    nodes, used = nodes_of(cluster), gpu_used(pods_of(cluster))
    name, free = next((name, int(node["status"]["allocatable"]["nvidia.com/gpu"]) - used.get(name, 0))
                      for name, node in sorted(nodes.items())
                      if node["metadata"]["labels"].get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3"
                      and not states(node) and not node["spec"].get("taints")
                      and int(node["status"]["allocatable"]["nvidia.com/gpu"]) - used.get(name, 0) >= 2)

    def pinned(job, gpus, **annotations):
        body = job_body(job, gpus=gpus, **annotations)
        pin_to_nodes(body["spec"]["template"]["spec"], [name])
        return body

    def pod_of(job):
        (pod,) = [p for p in pods_of(cluster) if p["metadata"]["labels"].get("job-name") == job]
        return pod

    cluster.create_job("team", pinned("filler", free, **{simulated.DURATION_ANNOTATION: "600"}))
    assert pod_of("filler")["spec"]["nodeName"] == name
    cluster.create_job("team", pinned("waiter", 1))
    waiting = pod_of("waiter")
    assert "nodeName" not in waiting["spec"] and waiting["status"]["conditions"][0]["reason"] == "Unschedulable"
    # kube's words: the one node it may use has too few GPUs, the others do not match its affinity.
    assert waiting["status"]["conditions"][0]["message"].startswith(f"0/{len(nodes)} nodes are available: 1 "
                                                                    "Insufficient nvidia.com/gpu, ")
    clock.advance(5)
    assert "nodeName" not in pod_of("waiter")["spec"]  # still full: it keeps waiting
    cluster.delete_job("team", "filler")
    clock.advance(5)
    bound = pod_of("waiter")
    assert bound["spec"]["nodeName"] == name and bound["status"]["phase"] == "Pending"
    clock.advance(5)
    assert pod_of("waiter")["status"]["phase"] == "Running"
    assert cluster.get_job("team", "waiter")["status"]["ready"] == 1
