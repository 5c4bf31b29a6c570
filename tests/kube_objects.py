"""Builders for realistic Node and Pod JSON, shaped like what a kubelet and the API server really return.

The shapes follow `kubectl get node -o json` on GPU nodes running the NVIDIA GPU Operator (GPU Feature
Discovery labels, device-plugin capacity) so that code reading them meets the same keys, string quantities
and timestamps as in production. Uids are derived from names so that runs are reproducible.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

GPU = "nvidia.com/gpu"
CREATED = datetime(2024, 5, 6, 8, 30, 0, tzinfo=UTC)

_PRESSURES = {
    "MemoryPressure": ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
}
_PRESSURE_REASONS_WHEN_TRUE = {
    "MemoryPressure": ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
    "DiskPressure": ("KubeletHasDiskPressure", "kubelet has disk pressure"),
    "PIDPressure": ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
}


@lru_cache(maxsize=1024)
def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stable_uid(kind: str, *parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"standin/{kind}/{'/'.join(parts)}"))


@lru_cache(maxsize=65536)
def _address(name: str) -> str:
    digest = hashlib.sha1(name.encode()).digest()
    return f"10.{digest[0] % 64 + 64}.{digest[1]}.{digest[2] % 254 + 1}"


def node_conditions(
    overrides: dict[str, str] | None = None,
    *,
    heartbeat: datetime | None = None,
    since: datetime = CREATED,
    network: bool = True,
) -> list[dict[str, Any]]:
    """The kubelet's conditions: pressures False and Ready True unless `overrides` ({type: status}) says
    otherwise. `network` adds the NetworkUnavailable condition a CNI (here Cilium) maintains."""
    overrides = overrides or {}
    beat = timestamp(heartbeat or datetime.now(UTC).replace(microsecond=0))
    since_text = timestamp(since)
    conditions = []
    if network:
        status = overrides.get("NetworkUnavailable", "False")
        conditions.append(
            {
                "type": "NetworkUnavailable",
                "status": status,
                "lastHeartbeatTime": since_text,
                "lastTransitionTime": since_text,
                "reason": "CiliumIsUp" if status == "False" else "NoRouteCreated",
                "message": "Cilium is running on this node" if status == "False" else "Node created without a route",
            }
        )
    for kind, (reason, message) in _PRESSURES.items():
        status = overrides.get(kind, "False")
        if status == "True":
            reason, message = _PRESSURE_REASONS_WHEN_TRUE[kind]
        elif status == "Unknown":
            reason, message = "NodeStatusUnknown", "Kubelet stopped posting node status."
        conditions.append(
            {
                "type": kind,
                "status": status,
                "lastHeartbeatTime": beat,
                "lastTransitionTime": since_text,
                "reason": reason,
                "message": message,
            }
        )
    ready = overrides.get("Ready", "True")
    ready_reason = {
        "True": ("KubeletReady", "kubelet is posting ready status"),
        "False": ("KubeletNotReady", "container runtime network not ready: NetworkReady=false"),
        "Unknown": ("NodeStatusUnknown", "Kubelet stopped posting node status."),
    }[ready]
    conditions.append(
        {
            "type": "Ready",
            "status": ready,
            "lastHeartbeatTime": beat,
            "lastTransitionTime": since_text,
            "reason": ready_reason[0],
            "message": ready_reason[1],
        }
    )
    return conditions


def gfd_labels(
    *, gpus: int, product: str, gpu_memory_mib: int, family: str, compute: tuple[int, int] = (9, 0)
) -> dict[str, str]:
    """GPU Feature Discovery labels as the GPU Operator sets them (all values are strings)."""
    return {
        "nvidia.com/cuda.driver-version.full": "550.90.07",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "90",
        "nvidia.com/cuda.driver.rev": "07",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/gfd.timestamp": "1714984312",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
        "nvidia.com/gpu.compute.major": str(compute[0]),
        "nvidia.com/gpu.compute.minor": str(compute[1]),
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.deploy.container-toolkit": "true",
        "nvidia.com/gpu.deploy.dcgm": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.node-status-exporter": "true",
        "nvidia.com/gpu.deploy.operator-validator": "true",
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.machine": "PowerEdge-XE9680",
        "nvidia.com/gpu.memory": str(gpu_memory_mib),
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mps.capable": "false",
    }


def make_node(
    name: str,
    *,
    gpus: int = 8,
    product: str = "NVIDIA-H100-80GB-HBM3",
    gpu_memory_mib: int = 81559,
    family: str = "hopper",
    cpu: str = "128",
    memory: str = "2Ti",
    storage: str = "3Ti",
    max_pods: str = "110",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | dict[str, str] | None = None,
    unschedulable: bool = False,
    unhealthy_gpus: int = 0,
    heartbeat: datetime | None = None,
    created: datetime = CREATED,
    kubelet_version: str = "v1.30.4",
    architecture: str = "amd64",
    resource_version: str = "1",
) -> dict[str, Any]:
    """A Node as the kubelet reports it. `gpus=0` gives a CPU node without any NVIDIA labels.

    `conditions` is either a full list (used as is) or {type: status} overrides of the healthy defaults.
    `unhealthy_gpus` lowers allocatable below capacity, which is how the device plugin reports bad GPUs.
    """
    node_labels = {
        "beta.kubernetes.io/arch": architecture,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": architecture,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "gpu-8x" if gpus else "cpu-only",
        "topology.kubernetes.io/region": "us-west-2",
        "topology.kubernetes.io/zone": "us-west-2a",
    }
    if gpus:
        node_labels.update(gfd_labels(gpus=gpus, product=product, gpu_memory_mib=gpu_memory_mib, family=family))
    node_labels.update(labels or {})

    if isinstance(conditions, list):
        node_conditions_list = conditions
    else:
        node_conditions_list = node_conditions(conditions, heartbeat=heartbeat, since=created)

    capacity = {
        "cpu": cpu,
        "ephemeral-storage": storage,
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": memory,
        "pods": max_pods,
    }
    allocatable = dict(capacity)
    if gpus:
        capacity[GPU] = str(gpus)
        allocatable[GPU] = str(max(gpus - unhealthy_gpus, 0))

    spec: dict[str, Any] = {
        "podCIDR": f"10.244.{int(hashlib.sha1(name.encode()).hexdigest()[:4], 16) % 256}.0/24",
        "providerID": f"aws:///us-west-2a/i-{hashlib.sha1(name.encode()).hexdigest()[:17]}",
    }
    spec["podCIDRs"] = [spec["podCIDR"]]
    node_taints = list(taints or [])
    if unschedulable:
        spec["unschedulable"] = True
        if not any(t.get("key") == "node.kubernetes.io/unschedulable" for t in node_taints):
            node_taints.append(
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": timestamp(created)}
            )
    if node_taints:
        spec["taints"] = node_taints

    address = _address(name)
    images = [
        {"names": ["nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04"], "sizeBytes": 1363262154},
        {"names": ["nvcr.io/nvidia/k8s-device-plugin:v0.15.0"], "sizeBytes": 134717338},
        {"names": ["nvcr.io/nvidia/gpu-feature-discovery:v0.8.2-ubi8"], "sizeBytes": 69530584},
        {"names": ["registry.k8s.io/pause:3.9"], "sizeBytes": 321520},
    ]
    if not gpus:
        images = images[-1:]
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": stable_uid("node", name),
            "resourceVersion": resource_version,
            "creationTimestamp": timestamp(created),
            "labels": node_labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"{name}"}}',
                **(annotations or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": node_conditions_list,
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": hashlib.md5(name.encode()).hexdigest(),
                "systemUUID": stable_uid("system", name).upper(),
                "bootID": stable_uid("boot", name),
                "kernelVersion": "5.15.0-1061-aws",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.20",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "operatingSystem": "linux",
                "architecture": architecture,
            },
            "images": images,
        },
    }


def make_container(
    name: str = "main",
    *,
    gpus: int = 0,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """A container spec. GPUs go in limits (the device plugin requires it) and, as the API server defaults
    them, in requests too; memory is limited to its request; CPU is requested only."""
    container_requests: dict[str, str] = {}
    container_limits: dict[str, str] = {}
    if cpu is not None:
        container_requests["cpu"] = cpu
    if memory is not None:
        container_requests["memory"] = memory
        container_limits["memory"] = memory
    if gpus:
        container_requests[GPU] = str(gpus)
        container_limits[GPU] = str(gpus)
    container_requests.update(requests or {})
    container_limits.update(limits or {})
    resources: dict[str, Any] = {}
    if container_requests:
        resources["requests"] = container_requests
    if container_limits:
        resources["limits"] = container_limits
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "volumeMounts": [
            {
                "name": "kube-api-access",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
    }
    if command:
        container["command"] = command
    return container


def make_pod(
    name: str,
    node: str | None,
    *,
    namespace: str = "default",
    gpus: int = 0,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    phase: str = "Running",
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
    priority_class: str | None = None,
    created: datetime = CREATED,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A Pod bound to `node` (None: not scheduled yet, so Pending). One container `main` asks for `gpus`,
    `cpu` and `memory` unless `containers` is given; `init_containers` are container dicts, see
    make_container()."""
    pod_containers = containers or [make_container("main", gpus=gpus, cpu=cpu, memory=memory, image=image)]
    if node is None:
        phase = "Pending"
    tolerations = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    if any(GPU in c.get("resources", {}).get("limits", {}) for c in pod_containers + (init_containers or [])):
        tolerations.append({"key": GPU, "operator": "Exists", "effect": "NoSchedule"})
    spec: dict[str, Any] = {
        "containers": pod_containers,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": tolerations,
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "volumes": [
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                    "defaultMode": 420,
                },
            }
        ],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node is not None:
        spec["nodeName"] = node

    started = timestamp(created + timedelta(seconds=5))
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if node is None:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": timestamp(created),
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
            }
        ]
    else:
        running = phase == "Running"
        status.update(
            {
                "hostIP": _address(node),
                "podIP": _address(f"{namespace}/{name}"),
                "startTime": started,
                "conditions": [
                    {
                        "type": kind,
                        "status": "True" if running or kind not in ("Ready", "ContainersReady") else "False",
                        "lastProbeTime": None,
                        "lastTransitionTime": started,
                    }
                    for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [_container_status(container, phase, started) for container in pod_containers],
            }
        )
        if init_containers:
            status["initContainerStatuses"] = [
                _container_status(container, "Succeeded", started) for container in init_containers
            ]
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": stable_uid("pod", namespace, name),
        "resourceVersion": resource_version,
        "creationTimestamp": timestamp(created),
        "labels": dict(labels or {}),
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner:
        metadata["ownerReferences"] = [{"controller": True, "blockOwnerDeletion": True, **owner}]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec, "status": status}


def _container_status(container: dict[str, Any], phase: str, started: str) -> dict[str, Any]:
    if phase == "Running":
        state: dict[str, Any] = {"running": {"startedAt": started}}
    elif phase in ("Succeeded", "Failed"):
        state = {
            "terminated": {
                "exitCode": 0 if phase == "Succeeded" else 1,
                "reason": "Completed" if phase == "Succeeded" else "Error",
                "startedAt": started,
                "finishedAt": started,
            }
        }
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    return {
        "name": container["name"],
        "state": state,
        "ready": phase == "Running",
        "restartCount": 0,
        "image": container.get("image", ""),
        "imageID": "",
        "started": phase == "Running",
    }


def operator_pods(node: str, *, toolkit=True, dcgm=True) -> list[dict]:
    """The GPU operator's pods on `node` that the node status looks for (container toolkit, DCGM exporter)."""
    pods = []
    if toolkit:
        pods.append(make_pod(f"toolkit-{node}", node, namespace="gpu-operator", cpu="10m", memory="64Mi",
                             labels={"app": "nvidia-container-toolkit-daemonset"}))
    if dcgm:
        pods.append(make_pod(f"dcgm-{node}", node, namespace="gpu-operator", cpu="10m", memory="64Mi",
                             labels={"app": "nvidia-dcgm-exporter"}))
    return pods
