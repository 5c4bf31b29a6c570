"""Node status in Run:ai's vocabulary, GPU accounting, and the state of the GPU Operator's components."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pools.engine import ConfigError

from .nodes import NodeFacts
from .pods import DCGM, TOOLKIT, PodFacts, counts_on_node

READY = "Ready"
UNKNOWN = "Unknown"

CONTAINER_TOOLKIT = "container-toolkit"
DCGM_EXPORTER = "dcgm-exporter"

RUNNING = "running"
MISSING = "missing"
DISABLED = "disabled"
HOST = "host"
NOT_APPLICABLE = "not applicable"

# Conditions the kubelet (or the cloud route controller) reports, with the reason shown when they are True.
STANDARD_CONDITIONS = (
    ("DiskPressure", "Disk pressure"),
    ("MemoryPressure", "Memory pressure"),
    ("PIDPressure", "PID pressure"),
    ("NetworkUnavailable", "Network unavailable"),
)
SCHEDULING_DISABLED = "Scheduling disabled"
# A Ready node whose only reason is that it is cordoned: its own status, apart from the broken ones.
CORDONED = "Cordoned"
MISSING_TOOLKIT = "Missing NVIDIA Container Toolkit"
MISSING_DCGM = "Missing NVIDIA DCGM Exporter"
UNDRAINED = "Undrained migrated node"

_POD_COMPONENT = {CONTAINER_TOOLKIT: TOOLKIT, DCGM_EXPORTER: DCGM}


@dataclass(frozen=True, slots=True)
class NodeUsage:
    gpu_used: int = 0
    cpu_requested_m: int = 0
    memory_requested: int = 0
    pod_count: int = 0
    components: frozenset[str] = frozenset()
    pod_pools: frozenset[str] = frozenset()


NO_USAGE = NodeUsage()


@dataclass(frozen=True)
class StatusOptions:
    # The backend says the toolkit is installed on the hosts, so no toolkit pod is expected.
    toolkit_on_host: bool = False
    condition_rules: Mapping[str, Any] = field(default_factory=dict, hash=False)


def usage_from_pods(pods: Iterable[PodFacts]) -> dict[str, NodeUsage]:
    totals: dict[str, list] = {}
    for pod in pods:
        if not counts_on_node(pod):
            continue
        entry = totals.get(pod.node_name)
        if entry is None:
            entry = totals[pod.node_name] = [0, 0, 0, 0, set(), set()]
        entry[0] += pod.gpu
        entry[1] += pod.cpu_m
        entry[2] += pod.memory
        entry[3] += 1
        if pod.component:
            entry[4].add(pod.component)
        if pod.pool:
            entry[5].add(pod.pool)
    return {
        node: NodeUsage(gpu, cpu, memory, count, frozenset(components), frozenset(pools))
        for node, (gpu, cpu, memory, count, components, pools) in totals.items()
    }


def gpu_figures(facts: NodeFacts, usage: NodeUsage | None = NO_USAGE) -> dict[str, int]:
    usage = usage or NO_USAGE
    total = facts.capacity.gpu
    allocatable = facts.allocatable.gpu
    return {
        "total": total,
        "allocatable": allocatable,
        # The device plugin withholds unhealthy GPUs from allocatable (Xid errors, ECC, fell off the bus).
        "unhealthy": max(0, total - allocatable),
        "used": usage.gpu_used,
        "free": max(0, allocatable - usage.gpu_used),
    }


def component_states(
    facts: NodeFacts, usage: NodeUsage | None = NO_USAGE, options: StatusOptions | None = None
) -> dict[str, str]:
    """Per GPU Operator component: running, missing, disabled (deploy label "false"), host, or not applicable."""
    usage = usage or NO_USAGE
    options = options or StatusOptions()
    states = {}
    for component in (CONTAINER_TOOLKIT, DCGM_EXPORTER):
        if _POD_COMPONENT[component] in usage.components:
            states[component] = RUNNING
        elif not facts.gpu_present:
            states[component] = NOT_APPLICABLE
        elif component == CONTAINER_TOOLKIT and options.toolkit_on_host:
            states[component] = HOST
        elif component in facts.deploy_disabled:
            states[component] = DISABLED
        else:
            states[component] = MISSING
    return states


def node_status(
    facts: NodeFacts,
    usage: NodeUsage | None = NO_USAGE,
    options: StatusOptions | None = None,
    *,
    node_pools: frozenset[str] = frozenset(),
) -> tuple[str, list[str]]:
    """("Ready", []), ("Cordoned", ["Scheduling disabled"]) for a node whose only reason is its cordon, ("Unknown",
    reasons) or ("Not ready (<first reason>)", reasons), every reason in order (a cordon is never the reason a
    node with another one is said to be not ready: that one is).

    Staleness (a node not seen within the backend's limit) is the caller's to decide: it knows when the
    facts were read; these functions only see the facts.
    """
    usage = usage or NO_USAGE
    options = options or StatusOptions()
    rules = options.condition_rules or {}
    ignore = set(rules.get("ignore") or ())
    unhealthy_when = rules.get("unhealthy_when") or {}
    conditions = {condition["type"]: condition for condition in facts.conditions}

    reasons = []
    explained = set()
    for type_, reason in STANDARD_CONDITIONS:
        condition = conditions.get(type_)
        if type_ not in ignore and condition is not None and condition["status"] == "True":
            reasons.append(reason)
            explained.add(type_)
    if facts.unschedulable:
        reasons.append(SCHEDULING_DISABLED)
    components = component_states(facts, usage, options)
    if components[CONTAINER_TOOLKIT] == MISSING:
        reasons.append(MISSING_TOOLKIT)
    if components[DCGM_EXPORTER] == MISSING:
        reasons.append(MISSING_DCGM)
    if usage.pod_pools.difference(node_pools, {""}):
        reasons.append(UNDRAINED)

    ready = conditions.get("Ready")
    if ready is not None and ready["status"] == "False":
        reasons.append(_with_detail("Kubelet not ready", ready["reason"]))
        explained.add("Ready")

    for type_, unhealthy_status in unhealthy_when.items():
        condition = conditions.get(type_)
        if type_ in ignore or type_ in explained or condition is None or condition["status"] != unhealthy_status:
            continue
        reasons.append(_with_detail(type_, condition["message"]))

    if ready is None or ready["status"] not in ("True", "False"):
        if ready is None:
            return UNKNOWN, [*reasons, "No Ready condition reported"]
        return UNKNOWN, [*reasons, _with_detail("Kubelet status unknown", ready["reason"])]
    if not reasons:
        return READY, []
    broken = [reason for reason in reasons if reason != SCHEDULING_DISABLED]
    if not broken:
        return CORDONED, reasons
    return f"Not ready ({broken[0]})", reasons


def _with_detail(text: str, detail: str) -> str:
    return f"{text}: {detail}" if detail else text


def check_node_condition_rules(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ConfigError("node_condition_rules must be a JSON object")
    unknown = [key for key in value if key not in ("ignore", "unhealthy_when")]
    if unknown:
        raise ConfigError(f"node_condition_rules: unknown field {', '.join(map(repr, unknown))}; "
                          "use 'ignore' and 'unhealthy_when'")
    ignore = value.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(item, str) for item in ignore):
        raise ConfigError("node_condition_rules.ignore must be a list of condition types")
    unhealthy = value.get("unhealthy_when", {})
    if not isinstance(unhealthy, dict) or any(v not in ("True", "False", "Unknown") for v in unhealthy.values()):
        raise ConfigError('node_condition_rules.unhealthy_when maps condition types to "True", "False" or "Unknown"')
    return value
