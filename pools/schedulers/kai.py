"""KAI Scheduler's objects from our configuration (pure: no Django; issue 14; docs/admin/engines.md).

Per pool of a KAI backend, one `scheduling.run.ai/v2` Queue per department (the parent) and one per project (a
leaf, the only kind KAI schedules from), in KAI's units: GPUs as numbers, CPU in millicores, memory in MB (10^6
bytes). Our quota model maps onto KAI's directly: deserved is `quota`, the limit is `limit` (-1: none; written
always, since KAI reads an absent limit as 0), the over-quota weight is `overQuotaWeight`, except `None` (never
above deserved), which KAI has no word for: weight 0 and the limit lowered to the quota. A CPU or memory quota we
do not set is -1 (KAI: not limited). A department without a row deserves the sum of its projects', as in our
admission. A pool with `topology_keys` gets a `kai.scheduler/v1alpha1` Topology, levels coarsest first.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pools.engine import kube_names

MANAGED_LABEL, MANAGED_VALUE = "managed-by", "osmo-pools"
QUEUE_API, TOPOLOGY_API = "scheduling.run.ai/v2", "kai.scheduler/v1alpha1"
RESOURCES = ("gpu", "cpu", "memory")


@dataclass(frozen=True)
class Unit:
    """One department's or project's quota row in one pool, our units: GPUs (Decimal), millicores, bytes; None
    deserved: not set; -1 limit: none; weight None: never above deserved."""

    deserved: tuple[Any, Any, Any] = (0, None, None)
    limit: tuple[Any, Any, Any] = (-1, -1, -1)
    weight: tuple[Any, Any, Any] = (2, 2, 2)


@dataclass
class Department:
    name: str
    row: Unit | None  # None: no row in this pool (deserves the sum of its projects')
    projects: dict[str, Unit] = field(default_factory=dict)  # project name -> its row (a default Unit when none)


def queue_name(pool: str, department: str, project: str | None = None) -> str:
    """`<pool>.<department>` for a parent, `<pool>.<department>.<project>` for a leaf: predictable, and unique
    per pool, as KAI queues are cluster-wide. Jobs name their queue in a label, so it is a label value too."""
    return kube_names.dotted(pool, department, *([project] if project is not None else []))


def _units(resource: str, value: Any) -> int | float:
    if resource == "gpu":
        number = Decimal(str(value))
        return int(number) if number == number.to_integral_value() else float(number)
    if resource == "memory" and value != -1:
        mb = Decimal(int(value)) / 1_000_000
        return int(mb) if mb == mb.to_integral_value() else float(mb)
    return int(value)


def _resources(unit: Unit) -> dict[str, dict[str, int | float]]:
    resources = {}
    for i, resource in enumerate(RESOURCES):
        deserved, limit, weight = unit.deserved[i], unit.limit[i], unit.weight[i]
        quota = -1 if deserved is None else _units(resource, deserved)
        cap = -1 if limit is None or Decimal(str(limit)) < 0 else _units(resource, limit)
        if weight is None:  # never above deserved
            weight = 0
            if quota != -1:
                cap = quota if cap == -1 else min(cap, quota)
        resources[resource] = {"quota": quota, "limit": cap, "overQuotaWeight": int(weight)}
    return resources


def _sum(units: Iterable[Unit]) -> Unit:
    """What a department without a row deserves: the sum of its projects' (None where none of them sets one)."""
    units = list(units)
    deserved = tuple(None if all(u.deserved[i] is None for u in units) else sum(
        (Decimal(str(u.deserved[i])) if i == 0 else u.deserved[i]) for u in units if u.deserved[i] is not None)
        for i in range(3))
    return Unit(deserved=deserved)


def metadata(name: str, prefix: str, **names: str) -> dict[str, Any]:
    """An object's name and our labels (KAI's and Kueue's objects), with the annotations keeping the names that had
    to be shortened."""
    labels, annotations = kube_names.labelled(prefix, {MANAGED_LABEL: MANAGED_VALUE, **names})
    return {"name": name, "labels": labels, **({"annotations": annotations} if annotations else {})}


def queues(pool: str, departments: list[Department], *, prefix: str) -> list[dict[str, Any]]:
    """The pool's Queue objects, every parent before its leaves."""
    parents, leaves = [], []
    for department in sorted(departments, key=lambda d: d.name):
        parent = queue_name(pool, department.name)
        row = department.row or _sum(department.projects.values())
        parents.append(_queue(metadata(parent, prefix, pool=pool, department=department.name), None, row,
                              f"{department.name} in {pool}"))
        for project, unit in sorted(department.projects.items()):
            leaves.append(_queue(metadata(queue_name(pool, department.name, project), prefix, pool=pool,
                                          department=department.name, project=project), parent, unit,
                                 f"{project} in {pool}"))
    return parents + leaves


def _queue(object_metadata: dict[str, Any], parent: str | None, unit: Unit, display: str) -> dict:
    spec: dict[str, Any] = {"displayName": display[:253], "resources": _resources(unit)}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": object_metadata, "spec": spec}


def topology_name(pool: str) -> str:
    return kube_names.dns_label(pool)


def placement(keys: list[dict[str, str]], requests: list[dict[str, str]]) -> tuple[str, str]:
    """A workload's topology requests as KAI's (required, preferred) node labels: per kind the finest level asked
    for, since the pool's levels nest coarsest first and pods sharing a rack share its zone."""
    order = {key["key"]: (i, key["label"]) for i, key in enumerate(keys)}
    chosen = {}
    for item in requests:
        found = order.get(item.get("key"))
        kind = "preferred" if item.get("requirement") == "preferred" else "required"
        if found is not None and (kind not in chosen or found[0] > chosen[kind][0]):
            chosen[kind] = found
    return (chosen["required"][1] if "required" in chosen else "",
            chosen["preferred"][1] if "preferred" in chosen else "")


def topology(pool: str, keys: list[dict[str, str]], *, prefix: str) -> dict[str, Any] | None:
    """The pool's Topology (levels as `topology_keys` orders them, coarsest first), or None without keys."""
    if not keys:
        return None
    return {"apiVersion": TOPOLOGY_API, "kind": "Topology",
            "metadata": metadata(topology_name(pool), prefix, pool=pool),
            "spec": {"levels": [{"nodeLabel": key["label"]} for key in keys]}}
