"""What a change to a node's stored row means to a person: the events its page and `describe node` list.
Pure: the sync hands over the row's watched fields before and after a write; the pages hand back the pools
the viewer may see, so an event never names another team's pool.

Events (kind, details):
- `added`: the node appeared (details: `status`, `pools`);
- `status`: its status changed (`before`, `after`: "Ready", "Not ready (DiskPressure)", "Unknown"...);
- `cordon`: it was cordoned or uncordoned (`cordoned`);
- `pools`: the pools it belongs to changed (`before`, `after`: pool names);
- `removed`: it left the cluster."""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

ADDED, STATUS, CORDON, POOLS, REMOVED = "added", "status", "cordon", "pools", "removed"
KINDS = (ADDED, STATUS, CORDON, POOLS, REMOVED)
WATCHED = ("status", "unschedulable", "pool_names")


def watched(row: Any) -> dict[str, Any]:
    """The fields a change of which is an event, from a row (object) before it is written."""
    return {name: getattr(row, name) for name in WATCHED}


def node_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[tuple[str, dict]]:
    """The events between two states of a node's watched fields (`before` None: it is new)."""
    if before is None:
        return [(ADDED, {"status": after["status"], "pools": sorted(after["pool_names"])})]
    events = []
    if bool(before["unschedulable"]) != bool(after["unschedulable"]):
        events.append((CORDON, {"cordoned": bool(after["unschedulable"])}))
    if before["status"] != after["status"]:
        events.append((STATUS, {"before": before["status"], "after": after["status"]}))
    if sorted(before["pool_names"]) != sorted(after["pool_names"]):
        events.append((POOLS, {"before": sorted(before["pool_names"]), "after": sorted(after["pool_names"])}))
    return events


def _pools(names: Iterable[str]) -> str:
    return ", ".join(names) or "none"


def describe(kind: str, details: Mapping[str, Any], visible: Callable[[Iterable[str]], list[str]]) -> str:
    """The event in one line, naming only the pools `visible` keeps; "" when what changed is hidden from the
    viewer (pools they may not see)."""
    if kind == ADDED:
        return f"Appeared: {details.get('status', '')}, pools {_pools(visible(details.get('pools', [])))}"
    if kind == STATUS:
        return f"Status {details.get('before', '')} \u2192 {details.get('after', '')}"
    if kind == CORDON:
        return "Cordoned (scheduling disabled)" if details.get("cordoned") else "Uncordoned (scheduling enabled)"
    if kind == POOLS:
        before, after = visible(details.get("before", [])), visible(details.get("after", []))
        return "" if before == after else f"Pools {_pools(before)} \u2192 {_pools(after)}"
    if kind == REMOVED:
        return "Left the cluster"
    return kind
