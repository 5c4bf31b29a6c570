"""The pods the simulation runs by itself: the daemonsets' pods on every node, and the workload pods that come
and go in each work slot of the fleet (their plan for a period, names, containers and status at each stage)."""

import random
from typing import Any

from .fleet import A100_TAINT, HARDWARE, POOL_LABEL, RV_PER_TICK, Catalog, NodeSpec, Plan, WorkSlot
from .randomness import compact_dumps, stable_hash, stable_hex, stable_rng, stable_suffix, stable_uid, timestamp

DS_TOOLKIT = "nvidia-container-toolkit-daemonset"
DS_DCGM = "nvidia-dcgm-exporter"


# ---- daemonset pods -----------------------------------------------------------------------------------------

_KUBE_DAEMONSETS = (
    ("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.31.4", "system-node-critical"),
    ("calico-system", "calico-node", "docker.io/calico/node:v3.29.1", "system-node-critical"),
)
_GPU_DAEMONSETS = (
    (DS_TOOLKIT, "nvcr.io/nvidia/k8s/container-toolkit:v1.17.3-ubuntu20.04"),
    ("nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    ("gpu-feature-discovery", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    (DS_DCGM, "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"),
    ("nvidia-operator-validator", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.1"),
)


def daemon_pods(catalog: Catalog) -> dict[str, str]:
    pods: dict[str, str] = {}
    for spec in catalog.nodes.values():
        sets = [(ns, ds, image, priority) for ns, ds, image, priority in _KUBE_DAEMONSETS]
        if spec.gpus:
            for ds, image in _GPU_DAEMONSETS:
                if ds == DS_TOOLKIT and spec.daemon_gap == "toolkit":
                    continue
                if ds == DS_DCGM and spec.daemon_gap in ("dcgm", "dcgm-disabled"):
                    continue
                sets.append(("gpu-operator", ds, image, "system-node-critical"))
        for namespace, ds, image, priority in sets:
            pod = _daemon_pod(catalog, spec, namespace, ds, image, priority)
            pods[f"{namespace}/{pod['metadata']['name']}"] = compact_dumps(pod)
    return pods


def _daemon_pod(catalog: Catalog, spec: NodeSpec, namespace: str, ds: str, image: str, priority: str) -> dict:
    seed = catalog.seed
    started = spec.created + 60 + stable_hash(seed, ds, spec.name) % 600
    name = f"{ds}-{stable_suffix(5, seed, ds, spec.name)}"
    revision = stable_hex(10, seed, ds, "revision")
    container = {
        "name": ds.removesuffix("-daemonset"),
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}} if namespace != "gpu-operator" else {},
        "securityContext": {"privileged": True} if ds in (DS_TOOLKIT, "calico-node", "kube-proxy") else {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    ready_at = timestamp(started + 20)
    return {
        "metadata": {
            "name": name,
            "generateName": f"{ds}-",
            "namespace": namespace,
            "uid": stable_uid(seed, "pod", namespace, name),
            "resourceVersion": str(int(started // catalog.tick_seconds) * RV_PER_TICK),
            "creationTimestamp": timestamp(started),
            "labels": {"app": ds, "controller-revision-hash": revision, "pod-template-generation": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds,
                                 "uid": stable_uid(seed, "daemonset", namespace, ds), "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [spec.name]}]}]}}},
            "containers": [container],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "hostNetwork": namespace != "gpu-operator",
            "nodeName": spec.name,
            "nodeSelector": {f"nvidia.com/gpu.deploy.{ds.removeprefix('nvidia-').removesuffix('-daemonset')}":
                             "true"} if namespace == "gpu-operator" else {"kubernetes.io/os": "linux"},
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 2000001000,
            "priorityClassName": priority,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "serviceAccountName": ds.removesuffix("-daemonset"),
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"operator": "Exists"}],
        },
        "status": {
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": ready_at},
                {"type": "Initialized", "status": "True", "lastTransitionTime": timestamp(started)},
                {"type": "Ready", "status": "True", "lastTransitionTime": ready_at},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": ready_at},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp(started)},
            ],
            "containerStatuses": [{
                "name": container["name"], "image": image, "imageID": f"{image.split(':')[0]}@sha256:"
                + stable_hex(16, image) * 4, "containerID": "containerd://" + stable_hex(16, name) * 4, "ready": True,
                "restartCount": 0, "started": True, "state": {"running": {"startedAt": timestamp(started + 15)}},
            }],
            "hostIP": spec.ip,
            "hostIPs": [{"ip": spec.ip}],
            "phase": "Running",
            "podIP": spec.ip if namespace != "gpu-operator" else pod_ip(spec, name),
            "qosClass": "Burstable" if namespace != "gpu-operator" else "BestEffort",
            "startTime": timestamp(started),
        },
    }


def pod_ip(spec: NodeSpec, name: str) -> str:
    return f"10.244.{spec.index}.{stable_hash(name) % 250 + 2}"


# ---- workload pods ------------------------------------------------------------------------------------------

_MODELS = ("llama-70b", "nemotron-15b", "gr00t-n1", "cosmos-7b", "vla-3b", "mixtral-8x7b", "dino-v2", "bevfusion")
_STAGES = ("pretrain", "sft", "finetune", "ablation", "dpo")
_SCENARIOS = ("warehouse", "humanoid-walk", "pick-place", "drive-urban", "drone-swarm", "factory-floor")
_SERVICES = ("llama-70b-chat", "embed-e5", "reranker", "whisper-large", "vlm-caption", "gr00t-policy")
_BENCHES = ("mmlu", "gsm8k", "humaneval", "mt-bench", "vqa-v2")
_DATASETS = ("fleet-logs", "sim-episodes", "webtext-dedup", "lidar-frames", "teleop-demos")
_IMAGES = {
    "train": "nvcr.io/nvidia/nemo:24.12",
    "finetune": "nvcr.io/nvidia/pytorch:24.12-py3",
    "sim": "nvcr.io/nvidia/isaac-sim:4.5.0",
    "serve": "nvcr.io/nvidia/tritonserver:24.12-trtllm-python-py3",
    "eval": "nvcr.io/nvidia/pytorch:24.12-py3",
    "notebook": "nvcr.io/nvidia/pytorch:24.12-py3",
    "edge": "nvcr.io/nvidia/l4t-jetpack:r36.4.0",
    "etl": "docker.io/library/python:3.11-slim",
    "queued": "nvcr.io/nvidia/nemo:24.12",
}


def work_plan(catalog: Catalog, slot: WorkSlot, period_index: int) -> Plan | None:
    rng = stable_rng(catalog.seed, "plan", slot.key, period_index)
    if rng.random() > slot.activity:
        return None
    begin = period_index * slot.period - slot.phase
    offset = rng.randint(0, max(0, slot.period // 5))
    pull_error = rng.random() < 0.04
    pending = rng.randint(3, max(3, slot.period // 3)) if pull_error else rng.choice((1, 1, 1, 2, 3))
    running = offset + pending
    keep = 0 if slot.kind in ("serve", "queued") else rng.randint(1, 3)
    end = max(running + 1, slot.period - keep)
    if slot.kind == "queued":
        running = end = slot.period  # never scheduled: it gives up and is deleted at the end of its period
    outcome = "Failed" if rng.random() < 0.12 else "Succeeded"
    return Plan(begin + offset, begin + running, begin + end, begin + slot.period, outcome,
                 _workload_name(catalog.seed, slot, period_index, rng), rng.randrange(6), pull_error,
                 rng.choice((0, 0, 0, 0, 1, 2)))


def _workload_name(seed: int, slot: WorkSlot, period_index: int, rng: random.Random) -> str:
    tag = stable_hex(5, seed, slot.key, period_index)
    model = rng.choice(_MODELS)
    if slot.kind == "train":
        return f"{model}-{rng.choice(_STAGES)}-{tag}"
    if slot.kind == "queued":
        return f"{model}-pretrain-{tag}-worker-0"
    if slot.kind == "finetune":
        return f"{model}-finetune-{tag}-{stable_suffix(5, tag)}"
    if slot.kind == "sim":
        return f"sim-{rng.choice(_SCENARIOS)}-{tag}-{stable_suffix(5, tag)}"
    if slot.kind == "serve":
        return f"{rng.choice(_SERVICES)}-{stable_hex(9, tag, 'rs')}-{stable_suffix(5, tag)}"
    if slot.kind == "eval":
        return f"eval-{model}-{rng.choice(_BENCHES)}-{tag}-{stable_suffix(5, tag)}"
    if slot.kind == "notebook":
        return f"jupyter-{slot.namespace.removeprefix('dev-')}-{tag}-0"
    if slot.kind == "edge":
        return f"orin-bench-{model}-{tag}-{stable_suffix(5, tag)}"
    return f"etl-{rng.choice(_DATASETS)}-{tag}-{stable_suffix(5, tag)}"


def _resources(cpu: str, memory: str, gpus: int, guaranteed: bool = True) -> dict:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = dict(requests) if guaranteed else {"memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    return {"limits": limits, "requests": requests}


def _container(name: str, image: str, resources: dict, **extra: Any) -> dict:
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": resources,
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", **extra}


def _workload_spec(slot: WorkSlot, plan: Plan, node: NodeSpec | None) -> tuple[list[dict], list[dict]]:
    """(initContainers, containers). Every shape's effective GPU request equals the slot's GPUs, whichever of
    the `kubectl describe node` rules (max of init containers, sum of containers, sidecars added) applies."""
    gpus, image = slot.gpus, _IMAGES[slot.kind]
    hw = node.hw if node else HARDWARE["h100"]
    # Headroom is left for the daemonsets and the small extra containers of some shapes.
    share = gpus / hw.gpus if hw.gpus else 0.25
    cpu = str(max(1, int(hw.cpu * share * 0.75)))
    memory = f"{max(2, int(hw.memory_gib * share * 0.6))}Gi"
    main = slot.kind if slot.kind not in ("train", "queued") else "pytorch"
    shm = [{"name": "dshm", "mountPath": "/dev/shm"}]
    shape = plan.shape if gpus else plan.shape % 2
    if shape == 1:
        return ([_container("fetch-dataset", "docker.io/amazon/aws-cli:2.22.0", _resources("1", "2Gi", 0))],
                [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)])
    if shape == 2:
        return ([_container("gpu-check", image, _resources("1", "4Gi", gpus), command=["nvidia-smi", "-L"])],
                [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)])
    if shape == 3:
        sidecar = _container("log-shipper", "docker.io/fluent/fluent-bit:3.2.2", _resources("100m", "128Mi", 0),
                             restartPolicy="Always")
        return ([_container("fetch-dataset", "docker.io/amazon/aws-cli:2.22.0", _resources("1", "2Gi", 0)),
                 sidecar], [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)])
    if shape == 4 and gpus >= 2 and gpus % 2 == 0:
        half = gpus // 2
        return ([], [_container(main, image, _resources(cpu, memory, half), volumeMounts=shm),
                     _container("evaluator", image, _resources("4", "16Gi", half))])
    if shape == 5:
        return ([], [_container(main, image, _resources(cpu, memory, gpus, guaranteed=False)),
                     _container("metrics", "docker.io/prom/statsd-exporter:v0.28.0", {})])
    return [], [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)]


def qos_class(containers: list[dict]) -> str:
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        if any(limits.get(key) is None or limits.get(key) != requests.get(key, limits.get(key))
               for key in ("cpu", "memory")):
            return "Burstable"
    return "Guaranteed"


def workload_pod(catalog: Catalog, slot: WorkSlot, plan: Plan, member: int, stage: str) -> dict:
    seed, tick_seconds = catalog.seed, catalog.tick_seconds
    node = catalog.nodes[slot.nodes[member]] if slot.nodes else None
    name = plan.name if slot.kind != "train" else f"{plan.name}-worker-{member}"
    uid = stable_uid(seed, "pod", slot.namespace, name)
    created = plan.start * tick_seconds
    labels: dict[str, str] = {"app.kubernetes.io/part-of": slot.kind, "runwhere.ai/project": slot.namespace}
    owner_kind, owner_name = "Job", plan.name.rsplit("-", 1)[0]
    restart = "Never"
    if slot.kind in ("train", "queued"):
        job = plan.name.removesuffix("-worker-0")
        labels.update({"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker",
                       "training.kubeflow.org/replica-index": str(member)})
        owner_kind, owner_name, restart = "PyTorchJob", job, "OnFailure"
    elif slot.kind == "serve":
        owner_kind, owner_name, restart = "ReplicaSet", plan.name.rsplit("-", 1)[0], "Always"
        labels["app"] = plan.name.rsplit("-", 2)[0]
    elif slot.kind == "notebook":
        owner_kind, owner_name, restart = "StatefulSet", plan.name.removesuffix("-0"), "Always"
    else:
        labels["batch.kubernetes.io/job-name"] = labels["job-name"] = owner_name
    if node is not None and node.pool:
        labels[POOL_LABEL] = node.pool
    init, containers = _workload_spec(slot, plan, node)
    tolerations = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
    ]
    selector: dict[str, str] = {}
    if slot.gpus:
        tolerations.insert(0, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
        product = node.hw.product if node else "NVIDIA-GB200"
        selector["nvidia.com/gpu.product"] = product or ""
        if node is not None and node.hw.kind == "a100":
            tolerations.insert(0, {"key": A100_TAINT["key"], "operator": "Equal", "value": A100_TAINT["value"],
                                   "effect": "NoSchedule"})
        if node is not None and node.pool:
            selector[POOL_LABEL] = node.pool
    spec: dict[str, Any] = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "nodeSelector": selector,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 100 if slot.kind == "serve" else 50,
        "priorityClassName": "inference-high" if slot.kind == "serve" else "batch-default",
        "restartPolicy": restart,
        "schedulerName": "kai-scheduler" if slot.kind in ("train", "queued") else "default-scheduler",
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": tolerations,
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}],
    }
    if init:
        spec["initContainers"] = init
    if node is not None:
        spec["nodeName"] = node.name
    status = _workload_status(catalog, slot, plan, node, name, init, containers, stage)
    stage_tick = {"Pending": plan.start, "Running": plan.running}.get(stage, plan.end)
    return {
        "metadata": {
            "name": name,
            "namespace": slot.namespace,
            "uid": uid,
            "resourceVersion": str(stage_tick * RV_PER_TICK),
            "creationTimestamp": timestamp(created),
            "labels": labels,
            "annotations": {"sim.runwhere.ai/slot": slot.key},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1" if owner_kind == "PyTorchJob" else
                                 "batch/v1" if owner_kind == "Job" else "apps/v1", "kind": owner_kind,
                                 "name": owner_name, "uid": stable_uid(seed, owner_kind, slot.namespace, owner_name),
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
        "status": status,
    }


def _workload_status(catalog, slot, plan, node, name, init, containers, stage) -> dict:
    t = catalog.tick_seconds
    created, running, ended = timestamp(plan.start * t), timestamp(plan.running * t), timestamp(plan.end * t)
    if node is None:
        message = (f"0/{len(catalog.nodes)} nodes are available: {len(catalog.nodes) - 54} node(s) didn't match "
                   f"Pod's node affinity/selector, 54 Insufficient nvidia.com/gpu. preemption: 0/"
                   f"{len(catalog.nodes)} nodes are available: 54 No preemption victims found for incoming pod.")
        return {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                "message": message, "lastTransitionTime": created}],
                "phase": "Pending", "qosClass": qos_class(containers)}
    sidecars = [c for c in init if c.get("restartPolicy") == "Always"]
    image_ids = {c["image"]: c["image"].split(":")[0] + "@sha256:" + stable_hex(16, c["image"]) * 4
                 for c in init + containers}

    def container_status(c: dict, state: dict, ready: bool, restarts: int = 0) -> dict:
        status = {"name": c["name"], "image": c["image"], "imageID": image_ids[c["image"]] if state.get(
            "running") or state.get("terminated") else "", "ready": ready, "restartCount": restarts,
            "started": bool(state.get("running")), "state": state}
        if state.get("running") or state.get("terminated"):
            status["containerID"] = "containerd://" + stable_hex(16, name, c["name"]) * 4
        return status

    conditions = {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                  "ContainersReady": "True", "PodScheduled": "True"}
    base = {"hostIP": node.ip, "hostIPs": [{"ip": node.ip}], "startTime": created,
            "qosClass": qos_class(init + containers)}
    if stage == "Pending":
        conditions.update(Ready="False", ContainersReady="False", PodReadyToStartContainers="False")
        if plan.pull_error:
            waiting = {"waiting": {"reason": "ImagePullBackOff",
                                   "message": f'Back-off pulling image "{containers[0]["image"]}"'}}
        else:
            waiting = {"waiting": {"reason": "PodInitializing" if init else "ContainerCreating"}}
        init_statuses = []
        if init:
            conditions["Initialized"] = "False"
            init_statuses = [container_status(init[0], {"running": {"startedAt": created}}, False)]
            init_statuses += [container_status(c, {"waiting": {"reason": "PodInitializing"}}, False) for c in init[1:]]
        status = {"phase": "Pending", "containerStatuses": [container_status(c, waiting, False) for c in containers]}
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
    elif stage == "Running":
        status = {"phase": "Running", "podIP": pod_ip(node, name),
                  "containerStatuses": [container_status(c, {"running": {"startedAt": running}}, True,
                                                         plan.restarts if i == 0 else 0)
                                        for i, c in enumerate(containers)]}
        if init:
            status["initContainerStatuses"] = [
                container_status(c, {"running": {"startedAt": created}}, True) if c in sidecars else
                container_status(c, {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": created,
                                                    "finishedAt": running}}, False)
                for c in init]
    else:
        failed = stage == "Failed"
        conditions.update(Ready="False", ContainersReady="False", PodReadyToStartContainers="False")
        terminated = {"exitCode": 1 if failed else 0, "reason": "Error" if failed else "Completed",
                      "startedAt": running, "finishedAt": ended}
        if failed and plan.restarts == 2:
            terminated.update(exitCode=137, reason="OOMKilled")
        status = {"phase": stage, "podIP": pod_ip(node, name),
                  "containerStatuses": [container_status(c, {"terminated": terminated}, False) for c in containers]}
        if init:
            status["initContainerStatuses"] = [container_status(c, {"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": created, "finishedAt": running}}, False)
                for c in init]
    transitions = {"Pending": created, "Running": running}
    at = transitions.get(stage, ended)
    status["conditions"] = [
        {"type": kind, "status": value, "lastTransitionTime": created if value == "True" and kind in (
            "PodScheduled", "Initialized") else at, **({"reason": "PodCompleted"} if stage in (
                "Succeeded", "Failed") and value == "False" else {})}
        for kind, value in conditions.items()]
    return {**status, **base}

