"""The fields of the objects we write that the engines' CRDs declare immutable (an `x-kubernetes-validations` rule
with `oldSelf`, in reference/crds/): a change to one cannot be patched, so the reconcile deletes the object and
creates it again (pure: no Django).

- KAI Topology `spec.levels[*].nodeLabel` ("nodeLabel structure is immutable; only aliases may be edited"): a
  pool's `topology_keys` changed.
- Kueue LocalQueue `spec.clusterQueue` ("field is immutable"): the project's ClusterQueue is named differently.
- Kueue ResourceFlavor `spec.topologyName` ("topologyName is immutable when topologyName is set"): we never set
  it, so a flavor someone gave one is re-created without.
The other `oldSelf` rules are on kinds we do not write (Kueue Topology, Workload).
"""

from collections.abc import Callable
from typing import Any

Spec = dict[str, Any]


def _node_labels(spec: Spec) -> list:
    return [level.get("nodeLabel") for level in spec.get("levels") or [] if isinstance(level, dict)]


def _set_and_changed(field: str) -> Callable[[Spec, Spec], bool]:
    return lambda old, new: field in old and old.get(field) != new.get(field)


_RULES: dict[tuple[str, str], tuple[str, Callable[[Spec, Spec], bool]]] = {
    ("kai.scheduler", "Topology"): ("spec.levels[*].nodeLabel",
                                    lambda old, new: _node_labels(old) != _node_labels(new)),
    ("kueue.x-k8s.io", "LocalQueue"): ("spec.clusterQueue", _set_and_changed("clusterQueue")),
    ("kueue.x-k8s.io", "ResourceFlavor"): ("spec.topologyName", _set_and_changed("topologyName")),
}


def changed(group: str, kind: str, existing: Spec, wanted: Spec) -> str | None:
    """The immutable field that differs between the stored spec and ours (the object must be re-created), or None."""
    rule = _RULES.get((group, kind))
    if rule is None:
        return None
    field, differs = rule
    return field if differs(existing or {}, wanted or {}) else None
