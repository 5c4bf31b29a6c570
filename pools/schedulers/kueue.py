"""Kueue's objects from our configuration (pure: no Django; issue 14; docs/admin/engines.md).

For a Kueue backend, all `kueue.x-k8s.io/v1beta2`:
- a ResourceFlavor per platform of each of its pools, `<pool>.<platform>`, which tells Kueue that platform's nodes;
- a Cohort per department, `<department>`, so that its projects lend each other what they do not use;
- a ClusterQueue per project, `<project>`, in its department's cohort, open to the project's namespace only, with
  one resource group (cpu, memory, nvidia.com/gpu) listing every flavor: nominalQuota is what the project deserves
  in the flavor's pool, borrowingLimit what its limit allows above that;
- a LocalQueue `<project>` in the project's namespace, the queue its Jobs name.
Quotas are per flavor: a project deserving N GPUs in a pool with two platforms may use N on each. The specs also
spell out what Kueue would default (queueingStrategy, stopPolicy, preemption, flavorFungibility), quantities are
written in the canonical form the API server gives them back in, and empty fields are left out, so that what we
wrote and what we read back compare equal and a second reconcile writes nothing.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pools.engine import ConfigError, kube_names

from .kai import Unit, metadata

API = "kueue.x-k8s.io/v1beta2"
COVERED = ("cpu", "memory", "nvidia.com/gpu")
_INDEX = {"nvidia.com/gpu": 0, "cpu": 1, "memory": 2}  # where each sits in Unit's (gpu, cpu, memory)
# What a project whose row leaves a resource unset ("not limited") deserves: more than any cluster holds, yet small
# enough that a department's sum stays far inside Kueue's int64 (it counts CPU in millicores, memory in bytes).
UNSET = {"cpu": Decimal(1_000_000) * 1000, "memory": 2 ** 50, "nvidia.com/gpu": Decimal(1_000_000)}  # "1M", "1Pi"
MAX_FLAVORS = 64  # per resource group; ours is the only group, since every flavor covers the same three resources
MAX_NODE_LABELS = MAX_NODE_TAINTS = 8
# The defaults Kueue fills in, written out so the stored spec equals ours. Reclaiming is "Any": work within its
# project's deserved takes back what other projects borrowed, whatever its priority
# (docs/researcher/workloads.md, "Reclaim").
QUEUE_POLICY = {
    "queueingStrategy": "BestEffortFIFO",
    "stopPolicy": "None",
    "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"},
                   "withinClusterQueue": "Never"},
    "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
}
_SI = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


@dataclass(frozen=True)
class Platform:
    """A platform's effective node selector and tolerations (pools.config.effective)."""

    pool: str
    name: str
    node_selector: Mapping[str, Any] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()


@dataclass
class Project:
    name: str
    department: str
    namespace: str
    rows: dict[str, Unit] = field(default_factory=dict)  # pool -> its row; a pool without one: Unit()


@dataclass
class Department:
    name: str
    rows: dict[str, Unit] = field(default_factory=dict)  # pool -> its row


def flavor_name(pool: str, platform: str) -> str:
    return kube_names.dotted(pool, platform, limit=kube_names.SUBDOMAIN_MAX)


def cohort_name(department: str) -> str:
    return kube_names.dns_label(department)


def cluster_queue_name(project: str) -> str:
    return kube_names.dns_label(project)


def local_queue_name(project: str) -> str:
    """The LocalQueue in the project's namespace; its Jobs carry it as `kueue.x-k8s.io/queue-name`."""
    return kube_names.dns_label(project)


def _decimal(amount: Decimal) -> str:
    """Kubernetes' canonical decimal form: "500m", "8", "64G", "1k"."""
    milli = amount * 1000
    if milli != milli.to_integral_value():
        raise ConfigError(f"{amount} is finer than Kubernetes' millis")
    milli = int(milli)
    if milli % 1000:
        return f"{milli}m"
    whole, exponent = milli // 1000, 0
    while whole and whole % 1000 == 0 and exponent < 18:
        whole, exponent = whole // 1000, exponent + 3
    return f"{whole}{_SI[exponent]}"


def _bytes(amount: int) -> str:
    """The shorter of the canonical decimal and binary forms ("64Gi" rather than "68719476736"); either is kept
    as written by the API server, since the suffix says which it is."""
    decimal = _decimal(Decimal(amount))
    whole, step = amount, 0
    while whole and whole % 1024 == 0 and step < len(_BINARY) - 1:
        whole, step = whole // 1024, step + 1
    binary = f"{whole}{_BINARY[step]}"
    return binary if step and len(binary) < len(decimal) else decimal


def quantity(resource: str, amount: Any) -> str:
    """Ours (GPUs, millicores, bytes) as a Kubernetes quantity."""
    if resource == "cpu":
        return _decimal(Decimal(int(amount)) / 1000)
    if resource == "memory":
        return _bytes(int(amount))
    return _decimal(Decimal(str(amount)))


def _deserved(unit: Unit, resource: str) -> Decimal:
    """In ours, an unset one as UNSET (CPU in millicores)."""
    value = unit.deserved[_INDEX[resource]]
    return Decimal(str(UNSET[resource] if value is None else value))


def _limit(unit: Unit, resource: str) -> Decimal | None:
    value = unit.limit[_INDEX[resource]]
    return None if value is None or Decimal(str(value)) < 0 else Decimal(str(value))


def _nominal(unit: Unit, resource: str) -> Decimal:
    """What it deserves, lowered to its limit should that be less."""
    limit = _limit(unit, resource)
    return _deserved(unit, resource) if limit is None else min(_deserved(unit, resource), limit)


def _quota(unit: Unit, resource: str) -> dict[str, str]:
    """A project's quota for one resource of one flavor; a weight of None (never above deserved) borrows nothing."""
    nominal, limit = _nominal(unit, resource), _limit(unit, resource)
    quota = {"name": resource, "nominalQuota": quantity(resource, nominal)}
    if unit.weight[_INDEX[resource]] is None:
        quota["borrowingLimit"] = "0"
    elif limit is not None:
        quota["borrowingLimit"] = quantity(resource, limit - nominal)
    return quota


def _node_taints(platform: Platform) -> list[dict[str, str]]:
    """The taints the platform's tolerations name exactly (operator Equal, an effect). Exists tolerations and those
    for every effect name no one taint; PreferNoSchedule is left out as Kueue ignores it."""
    taints = {}
    for toleration in platform.tolerations:
        key, effect = toleration.get("key"), toleration.get("effect")
        if (toleration.get("operator") or "Equal") != "Equal" or not key or effect not in ("NoSchedule", "NoExecute"):
            continue
        taint = {"key": str(key), "effect": effect}
        if toleration.get("value") not in (None, ""):
            taint["value"] = str(toleration["value"])
        taints[(taint["key"], taint.get("value", ""), effect)] = taint
    return [taints[key] for key in sorted(taints)]


def resource_flavor(platform: Platform, *, prefix: str) -> dict[str, Any]:
    """The platform's flavor. A node selector is exact key=value pairs, all of which are kept; what else a pod
    template may say about nodes (nodeAffinity, Exists tolerations) has no flavor field and is dropped, so such a
    platform's flavor is broader than its nodes."""
    where = f"Platform {platform.name} of pool {platform.pool}"
    node_labels = {str(key): str(value) for key, value in sorted(platform.node_selector.items())}
    taints = _node_taints(platform)
    if len(node_labels) > MAX_NODE_LABELS or len(taints) > MAX_NODE_TAINTS:
        raise ConfigError(f"{where}: a Kueue ResourceFlavor takes at most {MAX_NODE_LABELS} node labels and "
                          f"{MAX_NODE_TAINTS} taints; it has {len(node_labels)} and {len(taints)}")
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": API, "kind": "ResourceFlavor",
            "metadata": metadata(flavor_name(platform.pool, platform.name), prefix, pool=platform.pool,
                                 platform=platform.name),
            "spec": spec}


def _ordered(platforms: Sequence[Platform]) -> list[Platform]:
    """Kueue gives a pod the first listed flavor its node selector and tolerations allow (and adds that flavor's
    nodeLabels to its node selector); a flavor with fewer labels allows more pods, so the most specific come first
    (stable otherwise). Kueue cannot tell flavors apart by anything else: a pod without a node selector (the default
    pool's) is allowed by every untainted flavor and takes the first, and two pools whose platforms select the same
    labels are one to Kueue, unless the pools carry their own `node_selector`."""
    if len(platforms) > MAX_FLAVORS:
        raise ConfigError(f"Kueue takes at most {MAX_FLAVORS} flavors in a ClusterQueue; the pools of this backend "
                          f"have {len(platforms)} platforms")
    return sorted(platforms, key=lambda p: -(len(p.node_selector) + len(_node_taints(p))))


def cohort(department: Department, projects: Sequence[Project], platforms: Sequence[Platform], *,
           prefix: str) -> dict[str, Any]:
    """A department without a row has `spec: {}`: its capacity is then the sum of its ClusterQueues' nominal
    quotas, as a department without a row deserves the sum of its projects'. With rows, the cohort holds the part
    of the department's deserved its projects do not (a cohort's quota adds to its queues'), so its projects share
    what the department deserves. The department's limit and weight are not written: its cohort has no parent to
    borrow from."""
    spec: dict[str, Any] = {}
    if department.rows:
        flavors = []
        for platform in _ordered(platforms):
            row = department.rows.get(platform.pool)
            resources = []
            for resource in COVERED:
                mine = Decimal(0)
                if row is not None and row.deserved[_INDEX[resource]] is not None:
                    given = sum((_nominal(p.rows.get(platform.pool, Unit()), resource) for p in projects), Decimal(0))
                    mine = max(Decimal(0), _deserved(row, resource) - given)
                resources.append({"name": resource, "nominalQuota": quantity(resource, mine)})
            flavors.append({"name": flavor_name(platform.pool, platform.name), "resources": resources})
        spec["resourceGroups"] = [{"coveredResources": list(COVERED), "flavors": flavors}]
    return {"apiVersion": API, "kind": "Cohort",
            "metadata": metadata(cohort_name(department.name), prefix, department=department.name),
            "spec": spec}


def cluster_queue(project: Project, platforms: Sequence[Platform], *, prefix: str) -> dict[str, Any]:
    """The project's ClusterQueue. A resource its row leaves unset ("not limited") gets UNSET as nominal quota,
    since Kueue needs one for every covered resource; a pool where it has no row counts as a default row (0 GPUs,
    CPU and memory unset, no limit), as for KAI."""
    flavors = [{"name": flavor_name(platform.pool, platform.name),
                "resources": [_quota(project.rows.get(platform.pool, Unit()), resource) for resource in COVERED]}
               for platform in _ordered(platforms)]
    spec = {"cohortName": cohort_name(project.department),
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": project.namespace}},
            "resourceGroups": [{"coveredResources": list(COVERED), "flavors": flavors}], **QUEUE_POLICY}
    return {"apiVersion": API, "kind": "ClusterQueue",
            "metadata": metadata(cluster_queue_name(project.name), prefix, department=project.department,
                                 project=project.name),
            "spec": spec}


def local_queue(project: Project, *, prefix: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "LocalQueue",
            "metadata": {**metadata(local_queue_name(project.name), prefix, department=project.department,
                                    project=project.name), "namespace": project.namespace},
            "spec": {"clusterQueue": cluster_queue_name(project.name), "stopPolicy": "None"}}


def objects(platforms: Sequence[Platform], departments: Sequence[Department], projects: Sequence[Project], *,
            prefix: str) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """(flavors, cohorts, cluster queues, local queues), each sorted by name; none at all without a platform, since
    a ClusterQueue (and a Cohort's resource group) must list at least one flavor (the CRD's `minItems: 1`), and a
    LocalQueue without its ClusterQueue, or a Cohort without queues, holds nothing."""
    if not platforms:
        return [], [], [], []
    members: dict[str, list[Project]] = {}
    for project in projects:
        members.setdefault(project.department, []).append(project)
    by_name = sorted(projects, key=lambda p: p.name)
    return ([resource_flavor(p, prefix=prefix) for p in sorted(platforms, key=lambda p: (p.pool, p.name))],
            [cohort(d, members.get(d.name, []), platforms, prefix=prefix)
             for d in sorted(departments, key=lambda d: d.name)],
            [cluster_queue(p, platforms, prefix=prefix) for p in by_name],
            [local_queue(p, prefix=prefix) for p in by_name])
