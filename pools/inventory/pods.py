"""What a pod contributes to its node: effective requests, phase, GPU-operator role, pool label, and whether it
is a pod of one of our preemptible (low-priority) workloads."""

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pools.engine import QuantityError, parse_quantity
from pools.engine.kube_names import full_value
from pools.inventory.jobs import MANAGED_LABEL, MANAGED_VALUE

GPU = "nvidia.com/gpu"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

TOOLKIT = "toolkit"
DCGM = "dcgm"

# (label key, label value) -> component. Covers the GPU Operator's daemonsets and the standalone Helm charts.
_COMPONENT_LABELS = {
    ("app", "nvidia-container-toolkit-daemonset"): TOOLKIT,
    ("app.kubernetes.io/name", "nvidia-container-toolkit"): TOOLKIT,
    ("app", "nvidia-dcgm-exporter"): DCGM,
    ("app.kubernetes.io/name", "dcgm-exporter"): DCGM,
    ("app.kubernetes.io/name", "nvidia-dcgm-exporter"): DCGM,
}

# Resources that pod-level `spec.resources` may set (PodLevelResources); these replace the container sum.
_POD_LEVEL = frozenset({"cpu", "memory"})
_POD_LEVEL_PREFIX = "hugepages-"

Resources = dict[str, Decimal]


@dataclass(frozen=True, slots=True)
class PodFacts:
    uid: str
    namespace: str
    name: str
    node_name: str
    phase: str
    gpu: int
    cpu_m: int
    memory: int
    component: str
    pool: str
    preemptible: bool = False


PREEMPTIBLE_PRIORITIES = frozenset({"low"})
"""The priorities of our workloads whose pods may be preempted (scheduling's request schema: only low is)."""


def preemptible_of(labels: Mapping[str, Any], prefix: str) -> bool:
    """Whether a pod is one of ours (`<prefix>managed-by`) of a preemptible priority (`<prefix>priority`). A pod
    we did not submit is never preemptible here, whatever its labels say: it counts against the guarantee."""
    return (labels.get(f"{prefix}{MANAGED_LABEL}") == MANAGED_VALUE
            and labels.get(f"{prefix}priority") in PREEMPTIBLE_PRIORITIES)


def pod_facts(pod: Mapping[str, Any], *, pool_label: str) -> PodFacts:
    """The facts of a pod; `pool_label` is `<prefix>pool`, and our other labels share its prefix."""
    metadata = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    status = _mapping(pod.get("status"))
    labels = _mapping(metadata.get("labels"))
    requests = pod_requests(pod)
    return PodFacts(
        uid=str(metadata.get("uid") or ""),
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        node_name=str(spec.get("nodeName") or ""),
        # The API server sets Pending on create; a missing phase only comes from hand-built objects.
        phase=str(status.get("phase") or "Pending"),
        gpu=_whole(requests.get(GPU, 0)),
        cpu_m=_whole(requests.get("cpu", 0) * 1000),
        memory=_whole(requests.get("memory", 0)),
        component=component_of(labels),
        pool=full_value(metadata, pool_label) if pool_label else "",  # a long name is in the annotation
        preemptible=bool(pool_label) and preemptible_of(labels, pool_label.removesuffix("pool")),
    )


def component_of(labels: Mapping[str, Any]) -> str:
    for (key, value), component in _COMPONENT_LABELS.items():
        if labels.get(key) == value:
            return component
    return ""


def is_terminal(pod: Mapping[str, Any] | PodFacts) -> bool:
    if isinstance(pod, PodFacts):
        return pod.phase in TERMINAL_PHASES
    return _mapping(pod.get("status")).get("phase") in TERMINAL_PHASES


def counts_on_node(facts: PodFacts) -> bool:
    """The `kubectl describe node` rule: bound, and not Succeeded or Failed (bound Pending pods hold resources)."""
    return bool(facts.node_name) and facts.phase not in TERMINAL_PHASES


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """Effective requests of every resource, as the scheduler and `kubectl describe node` compute them.

    max(app containers + sidecars, the peak of the init sequence), where an init container runs alongside
    the sidecars started before it; then pod-level requests where set; then the RuntimeClass overhead.
    """
    spec = _mapping(pod.get("spec"))
    total: Resources = {}
    for container in _list(spec.get("containers")):
        _add(total, container_requests(container))

    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in _list(spec.get("initContainers")):
        requests = container_requests(container)
        if _mapping(container).get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            running = dict(sidecars)
        else:
            running = dict(requests)
            _add(running, sidecars)
        for name, value in running.items():
            if value > init_peak.get(name, 0):
                init_peak[name] = value
    for name, value in init_peak.items():
        if value > total.get(name, 0):
            total[name] = value

    pod_level = _requests_of(_mapping(spec.get("resources")))
    for name, value in pod_level.items():
        if name in _POD_LEVEL or name.startswith(_POD_LEVEL_PREFIX):
            total[name] = value

    _add(total, _quantities(spec.get("overhead")))
    return total


def container_requests(container: Mapping[str, Any]) -> Resources:
    return _requests_of(_mapping(_mapping(container).get("resources")))


def _requests_of(resources: Mapping[str, Any]) -> Resources:
    # API-server defaulting: a limit without a request is also the request. Objects that did not pass
    # through the API server (the simulated cluster, fixtures) may not have been defaulted yet.
    requests = _quantities(resources.get("limits"))
    requests.update(_quantities(resources.get("requests")))
    return requests


def _quantities(values: Any) -> Resources:
    parsed: Resources = {}
    for name, value in _mapping(values).items():
        number = _parse(value) if isinstance(value, str) else _parse_uncached(value)
        if number is not None:
            parsed[name] = number
    return parsed


def _parse_uncached(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


# A cluster's pods repeat a few dozen quantity strings ("1", "8", "64Gi") hundreds of thousands of times.
_parse = functools.lru_cache(maxsize=4096)(_parse_uncached)


def _add(into: Resources, more: Resources) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _whole(value: Decimal | int) -> int:
    # Kubernetes' Quantity.Value() and MilliValue() round up, so 0.5m of CPU is 1 millicore.
    return math.ceil(value) if value > 0 else 0


def _mapping(value: Any) -> Mapping[str, Any]:
    # Decoded JSON is always a dict; the exact type test skips the slower abstract-class check.
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []
