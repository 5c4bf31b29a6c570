"""Which backend owns an engine object (pure: no Django; issue 23; docs/admin/engines.md, "Kept in step").

Everything a reconcile writes carries `<prefix>managed-by=osmo-pools` and `<prefix>backend=<the backend's name as a
label value>`, and a reconcile lists and touches only objects carrying both with its own name, so two backends on
one API server (`backend add --same-cluster-as`) never delete each other's objects. Objects written before the
backend label existed carry only managed-by: a reconcile adopts those whose (namespace, name) it wants (it writes
its label on them) and leaves the others alone, since it cannot tell whose they were.
"""

from pools.engine.kube_names import label_value

from .kai import MANAGED_LABEL, MANAGED_VALUE

BACKEND_LABEL = "backend"


def owner_labels(prefix: str, backend: str) -> dict[str, str]:
    return {f"{prefix}{MANAGED_LABEL}": MANAGED_VALUE, f"{prefix}{BACKEND_LABEL}": label_value(backend)}


def owned_by(prefix: str, backend: str) -> str:
    """The label selector of the backend's objects."""
    return ",".join(f"{key}={value}" for key, value in owner_labels(prefix, backend).items())


def unowned(prefix: str) -> str:
    """The label selector of ours written before the backend label: adopted when wanted, else left alone."""
    return f"{prefix}{MANAGED_LABEL}={MANAGED_VALUE},!{prefix}{BACKEND_LABEL}"


def owner_of(obj: dict, prefix: str) -> str | None:
    """The backend label value of one of ours, "" for one of ours without it, None for somebody else's."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(f"{prefix}{MANAGED_LABEL}") != MANAGED_VALUE:
        return None
    return labels.get(f"{prefix}{BACKEND_LABEL}", "")
