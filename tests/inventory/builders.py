"""Nodes and pods shaped exactly like the API server's JSON (`kubectl get -o json`), trimmed of nothing
the inventory reads. Defaults describe a healthy 8 x H100 node running the GPU Operator."""

import copy
import itertools

_serial = itertools.count(1)

HEARTBEAT = "2025-06-10T14:02:57Z"
TRANSITION = "2025-05-28T09:14:03Z"

H100_LABELS = {
    "beta.kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
    "node.kubernetes.io/instance-type": "p5.48xlarge",
    "topology.kubernetes.io/region": "us-east-1",
    "topology.kubernetes.io/zone": "us-east-1a",
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "90",
    "nvidia.com/cuda.runtime.major": "12",
    "nvidia.com/cuda.runtime.minor": "4",
    "nvidia.com/gfd.timestamp": "1718035262",
    "nvidia.com/gpu.compute.major": "9",
    "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.deploy.container-toolkit": "true",
    "nvidia.com/gpu.deploy.dcgm": "true",
    "nvidia.com/gpu.deploy.dcgm-exporter": "true",
    "nvidia.com/gpu.deploy.device-plugin": "true",
    "nvidia.com/gpu.deploy.driver": "pre-installed",
    "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
    "nvidia.com/gpu.deploy.operator-validator": "true",
    "nvidia.com/gpu.family": "hopper",
    "nvidia.com/gpu.machine": "p5.48xlarge",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.replicas": "1",
    "nvidia.com/gpu.sharing-strategy": "none",
    "nvidia.com/mig.capable": "false",
}

CPU_LABELS = {
    "beta.kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
    "node.kubernetes.io/instance-type": "m6i.4xlarge",
    "topology.kubernetes.io/region": "us-east-1",
    "topology.kubernetes.io/zone": "us-east-1b",
}

H100_CAPACITY = {
    "cpu": "192",
    "ephemeral-storage": "3750095032Ki",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
    "memory": "2113276932Ki",
    "nvidia.com/gpu": "8",
    "pods": "110",
}
H100_ALLOCATABLE = {
    "cpu": "191450m",
    "ephemeral-storage": "3456067615356",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
    "memory": "2112145412Ki",
    "nvidia.com/gpu": "8",
    "pods": "110",
}
CPU_CAPACITY = {
    "cpu": "16",
    "ephemeral-storage": "104845292Ki",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
    "memory": "65023252Ki",
    "pods": "110",
}
CPU_ALLOCATABLE = {
    "cpu": "15890m",
    "ephemeral-storage": "95551679124",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
    "memory": "64006420Ki",
    "pods": "110",
}

_HEALTHY = {
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
}
_UNHEALTHY = {
    "MemoryPressure": ("True", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
    "DiskPressure": ("True", "KubeletHasDiskPressure", "kubelet has disk pressure"),
    "PIDPressure": ("True", "KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
    "Ready": ("False", "KubeletNotReady", "container runtime network not ready: NetworkReady=false"),
    "NetworkUnavailable": ("True", "NoRouteCreated", "Node created without a route"),
}


def condition(type_, status, reason="", message="", *, heartbeat=HEARTBEAT, transition=TRANSITION):
    return {
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": transition,
        "message": message,
        "reason": reason,
        "status": status,
        "type": type_,
    }


def kubelet_conditions(**statuses):
    """The four kubelet conditions, healthy unless overridden: kubelet_conditions(DiskPressure="True")."""
    conditions = []
    for type_ in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready"):
        status = statuses.pop(type_, _HEALTHY[type_][0])
        if status is None:
            continue
        if status == _HEALTHY[type_][0]:
            _status, reason, message = _HEALTHY[type_]
        elif status == "Unknown":
            reason, message = "NodeStatusUnknown", "Kubelet stopped posting node status."
        else:
            _status, reason, message = _UNHEALTHY[type_]
        conditions.append(condition(type_, status, reason, message))
    if "NetworkUnavailable" in statuses:
        status = statuses.pop("NetworkUnavailable")
        if status == "True":
            conditions.insert(0, condition("NetworkUnavailable", "True", *_UNHEALTHY["NetworkUnavailable"][1:]))
        else:
            calico = ("CalicoIsUp", "Calico is running on this node")
            conditions.insert(0, condition("NetworkUnavailable", status, *calico))
    assert not statuses, f"unknown condition types {statuses}"
    return conditions


def node(
    name="gpu-1",
    *,
    gpu=True,
    labels=None,
    drop_labels=(),
    taints=None,
    unschedulable=None,
    conditions=None,
    capacity=None,
    allocatable=None,
):
    base_labels = copy.deepcopy(H100_LABELS if gpu else CPU_LABELS)
    base_labels["kubernetes.io/hostname"] = name
    base_labels.update(labels or {})
    for key in drop_labels:
        base_labels.pop(key, None)
    spec = {"podCIDR": "10.244.3.0/24", "podCIDRs": ["10.244.3.0/24"], "providerID": f"aws:///us-east-1a/i-0{name}"}
    if taints is not None:
        spec["taints"] = taints
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    serial = next(_serial)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "nfd.node.kubernetes.io/feature-labels": "pci-10de.present",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": "2025-05-28T09:12:44Z",
            "labels": base_labels,
            "name": name,
            "resourceVersion": str(4_100_000 + serial),
            "uid": f"6c1f0e3a-2b7d-4d0e-9f51-{serial:012d}",
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"address": "10.0.12.34", "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": copy.deepcopy(allocatable or (H100_ALLOCATABLE if gpu else CPU_ALLOCATABLE)),
            "capacity": copy.deepcopy(capacity or (H100_CAPACITY if gpu else CPU_CAPACITY)),
            "conditions": kubelet_conditions() if conditions is None else conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "2f0b7a0e-8f47-4b1e-a0c5-3c1d5e0b9a11",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "5.15.0-1066-aws",
                "kubeProxyVersion": "v1.31.2",
                "kubeletVersion": "v1.31.2",
                "machineID": "ec2a5f0d3e5b4b8c9a7e6d5c4b3a2f10",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.4 LTS",
                "systemUUID": "ec2a5f0d-3e5b-4b8c-9a7e-6d5c4b3a2f10",
            },
        },
    }


def taint(key, value=None, effect="NoSchedule", *, time_added=None):
    found = {"effect": effect, "key": key}
    if value is not None:
        found["value"] = value
    if time_added:
        found["timeAdded"] = time_added
    return found


PYTORCH = "nvcr.io/nvidia/pytorch:24.05-py3"


def container(name="main", *, requests=None, limits=None, restart_policy=None, image=PYTORCH):
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    found = {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "name": name,
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if restart_policy is not None:
        found["restartPolicy"] = restart_policy
    return found


def gpu_container(name="main", gpus=1, *, cpu="8", memory="64Gi"):
    # What the API server stores for `limits: {nvidia.com/gpu: N}`: requests defaulted from limits.
    quantities = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}
    return container(name, requests=dict(quantities), limits=dict(quantities))


def pod(
    name="train-0",
    *,
    namespace="team-a",
    node="gpu-1",
    phase="Running",
    containers=None,
    init_containers=None,
    overhead=None,
    pod_resources=None,
    labels=None,
):
    serial = next(_serial)
    spec = {
        "containers": containers if containers is not None else [gpu_container()],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
        ],
    }
    if node:
        spec["nodeName"] = node
    if init_containers is not None:
        spec["initContainers"] = init_containers
    if overhead is not None:
        spec["overhead"] = overhead
        spec["runtimeClassName"] = "kata"
    if pod_resources is not None:
        spec["resources"] = pod_resources
    status = {"phase": phase, "qosClass": "Burstable"}
    if node:
        status.update({"hostIP": "10.0.12.34", "podIP": f"10.244.3.{serial % 250}", "startTime": TRANSITION})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": TRANSITION,
            "labels": labels if labels is not None else {"app": name.rsplit("-", 1)[0]},
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(5_200_000 + serial),
            "uid": f"0b8e6c52-61a4-4f1e-8d3a-{serial:012d}",
        },
        "spec": spec,
        "status": status,
    }


DCGM_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04"


def toolkit_pod(node="gpu-1", *, phase="Running"):
    return pod(
        f"nvidia-container-toolkit-daemonset-{node[-5:]}",
        namespace="gpu-operator",
        node=node,
        phase=phase,
        containers=[container("nvidia-container-toolkit-ctr", image="nvcr.io/nvidia/k8s/container-toolkit:v1.16.2")],
        labels={
            "app": "nvidia-container-toolkit-daemonset",
            "app.kubernetes.io/managed-by": "gpu-operator",
            "controller-revision-hash": "6d9f8b7c5d",
            "helm.sh/chart": "gpu-operator-v24.6.2",
            "pod-template-generation": "1",
        },
    )


def dcgm_pod(node="gpu-1", *, phase="Running"):
    return pod(
        f"nvidia-dcgm-exporter-{node[-5:]}",
        namespace="gpu-operator",
        node=node,
        phase=phase,
        containers=[container("nvidia-dcgm-exporter", image=DCGM_IMAGE)],
        labels={
            "app": "nvidia-dcgm-exporter",
            "app.kubernetes.io/managed-by": "gpu-operator",
            "controller-revision-hash": "7b5d9c6f8",
            "helm.sh/chart": "gpu-operator-v24.6.2",
            "pod-template-generation": "1",
        },
    )
