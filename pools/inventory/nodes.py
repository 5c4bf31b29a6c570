"""The facts about a node that we store and show, read from the API server's JSON.

Only values that mean something change here: heartbeat times and the GPU Feature Discovery timestamp are
dropped because they move every few seconds or minutes and would turn every sync into a write.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pools.engine import QuantityError, parse_quantity

GPU = "nvidia.com/gpu"
GFD_TIMESTAMP = "nvidia.com/gfd.timestamp"
GPU_PRESENT = "nvidia.com/gpu.present"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_MEMORY = "nvidia.com/gpu.memory"
GPU_FAMILY = "nvidia.com/gpu.family"
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."

VOLATILE_LABELS = frozenset({GFD_TIMESTAMP})


@dataclass(frozen=True, slots=True)
class NodeResources:
    cpu_m: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    gpu: int = 0
    pods: int = 0

    def shown(self) -> dict[str, int]:
        return {
            "cpu_m": self.cpu_m,
            "memory": self.memory,
            "ephemeral_storage": self.ephemeral_storage,
            "gpu": self.gpu,
            "pods": self.pods,
        }


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    uid: str = ""
    # Mutable containers stay out of the hash; equal facts still hash equal through the other fields.
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    taints: list[dict[str, str]] = field(default_factory=list, hash=False)
    unschedulable: bool = False
    conditions: list[dict[str, str]] = field(default_factory=list, hash=False)
    capacity: NodeResources = NodeResources()
    allocatable: NodeResources = NodeResources()
    gpu_product: str = ""
    gpu_count: int = 0
    gpu_memory_mib: int = 0
    gpu_family: str = ""
    gpu_present: bool = False
    deploy_disabled: frozenset[str] = frozenset()

    def condition(self, type_: str) -> dict[str, str] | None:
        for condition in self.conditions:
            if condition["type"] == type_:
                return condition
        return None

    def shown(self) -> dict[str, Any]:
        """Plain JSON values; two nodes differ in `shown()` exactly when a stored row would need a write."""
        return {
            "name": self.name,
            "uid": self.uid,
            "labels": dict(self.labels),
            "taints": [dict(taint) for taint in self.taints],
            "unschedulable": self.unschedulable,
            "conditions": [dict(condition) for condition in self.conditions],
            "capacity": self.capacity.shown(),
            "allocatable": self.allocatable.shown(),
            "gpu_product": self.gpu_product,
            "gpu_count": self.gpu_count,
            "gpu_memory_mib": self.gpu_memory_mib,
            "gpu_family": self.gpu_family,
            "gpu_present": self.gpu_present,
            "deploy_disabled": sorted(self.deploy_disabled),
        }


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    metadata = _mapping(node.get("metadata"))
    spec = _mapping(node.get("spec"))
    status = _mapping(node.get("status"))
    labels = {
        str(key): "" if value is None else str(value)
        for key, value in _mapping(metadata.get("labels")).items()
        if key not in VOLATILE_LABELS
    }
    capacity = node_resources(status.get("capacity"))
    return NodeFacts(
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        labels=labels,
        taints=[_taint(taint) for taint in _list(spec.get("taints")) if isinstance(taint, Mapping)],
        unschedulable=spec.get("unschedulable") is True,
        conditions=[_condition(item) for item in _list(status.get("conditions")) if isinstance(item, Mapping)],
        capacity=capacity,
        allocatable=node_resources(status.get("allocatable")),
        gpu_product=labels.get(GPU_PRODUCT, ""),
        gpu_count=_label_int(labels.get(GPU_COUNT)),
        gpu_memory_mib=_label_int(labels.get(GPU_MEMORY)),
        gpu_family=labels.get(GPU_FAMILY, ""),
        gpu_present=gpu_present(labels, capacity.gpu),
        deploy_disabled=deploy_disabled(labels),
    )


def label_text(labels: Mapping[str, Any]) -> str:
    """Labels as the pages show and export them: key=value, sorted by key (code points), joined by ", ".
    Stored beside the labels (`Node.label_text`), so a 150,000-row CSV needs no per-row sort."""
    return ", ".join(f"{key}={value}" for key, value in sorted(labels.items()))


def gpu_present(labels: Mapping[str, str], gpu_capacity: int) -> bool:
    return labels.get(GPU_PRESENT) == "true" or gpu_capacity > 0


def deploy_disabled(labels: Mapping[str, str]) -> frozenset[str]:
    """GPU operator components switched off on this node by `nvidia.com/gpu.deploy.<component>=false`."""
    return frozenset(
        key.removeprefix(DEPLOY_PREFIX) for key, value in labels.items()
        if key.startswith(DEPLOY_PREFIX) and value == "false"
    )


def node_resources(values: Any) -> NodeResources:
    values = _mapping(values)
    return NodeResources(
        cpu_m=_quantity(values.get("cpu"), scale=1000),
        memory=_quantity(values.get("memory")),
        ephemeral_storage=_quantity(values.get("ephemeral-storage")),
        gpu=_quantity(values.get(GPU)),
        pods=_quantity(values.get("pods")),
    )


def _taint(taint: Mapping[str, Any]) -> dict[str, str]:
    # timeAdded is dropped: it is bookkeeping for NoExecute eviction, not something an admin acts on.
    return {
        "key": str(taint.get("key") or ""),
        "value": str(taint.get("value") or ""),
        "effect": str(taint.get("effect") or ""),
    }


def _condition(condition: Mapping[str, Any]) -> dict[str, str]:
    return {
        "type": str(condition.get("type") or ""),
        "status": str(condition.get("status") or "Unknown"),
        "reason": str(condition.get("reason") or ""),
        "message": str(condition.get("message") or ""),
        "last_transition_time": str(condition.get("lastTransitionTime") or ""),
    }


def _quantity(value: Any, *, scale: int = 1) -> int:
    if value is None:
        return 0
    try:
        number = parse_quantity(value) * scale
    except QuantityError:
        return 0
    # Rounds up like Kubernetes' Quantity.Value(); negative capacity is nonsense and reads as none.
    return math.ceil(number) if number > 0 else 0


def _label_int(value: str | None) -> int:
    try:
        number = int(value or 0)
    except ValueError:
        return 0
    return max(number, 0)


def _mapping(value: Any) -> Mapping[str, Any]:
    # Decoded JSON is always a dict; the exact type test skips the slower abstract-class check.
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []
