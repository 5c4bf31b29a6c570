"""Which nodes the kube-scheduler's NodeAffinity filter lets a pod use (k8s.io/component-helpers' nodeaffinity:
`spec.nodeSelector` and the required node affinity): the stand-in has no scheduler, so a test asks this oracle
where a pod it binds may go. Written from the scheduler's rules, never from our code (it imports nothing of pools
or scheduling).

- `nodeSelector`: every label equal.
- Required node affinity: the terms are ORed, the requirements of a term ANDed; a term without requirements
  matches no node. `matchExpressions` read the labels (NotIn and DoesNotExist hold for a missing key; Gt and Lt
  compare integers and fail for a missing or non-integer label); `matchFields` read `metadata.name`.
"""

from __future__ import annotations

from typing import Any


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _holds(requirement: dict[str, Any], values: dict[str, str]) -> bool:
    key, operator, wanted = requirement["key"], requirement["operator"], requirement.get("values") or []
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        have, bound = _integer(values.get(key, "")), _integer(wanted[0] if len(wanted) == 1 else "")
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    raise ValueError(f"no such operator: {operator}")


def _term_matches(term: dict[str, Any], node: dict[str, Any]) -> bool:
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = node["metadata"].get("labels") or {}
    return all(_holds(r, labels) for r in expressions) and \
        all(_holds(r, {"metadata.name": node["metadata"]["name"]}) for r in fields)


def allows(pod_spec: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(key) != value for key, value in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(_term_matches(term, node) for term in required.get("nodeSelectorTerms") or [])


def nodes_for(pod_spec: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    """The names of the `nodes` the pod may be placed on, sorted."""
    return sorted(node["metadata"]["name"] for node in nodes if allows(pod_spec, node))
