"""gpuctl-style node labels under the managed prefix (`label node`, `POST /api/nodes/{name}/labels`).
Each writes to the cluster first and then to the database, so the database never claims a label the
cluster does not have; gpuctl's pool files (`pools.fleet.poolfiles`) build on these."""

import re
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

from pools.engine import ConfigError
from pools.fleet.sync import Recompute, cluster_for
from pools.inventory.nodes import node_facts
from pools.models import Node, audit
from pools.models.dbwrites import NotRecorded

_KEY_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class LabelError(ConfigError):
    pass


def prefix() -> str:
    return settings.OSMO_LABEL_PREFIX


def pool_key() -> str:
    return f"{prefix()}pool"


def gpu_type_key() -> str:
    return f"{prefix()}gpu-type"


def parse_label_args(args: list[str]) -> dict[str, str | None]:
    """`KEY=VALUE` sets, `KEY-` removes (kubectl's syntax)."""
    changes: dict[str, str | None] = {}
    for arg in args:
        if arg.endswith("-") and "=" not in arg:
            changes[arg[:-1]] = None
        elif "=" in arg:
            key, value = arg.split("=", 1)
            changes[key] = value
        else:
            raise LabelError(f"{arg!r} is neither KEY=VALUE nor KEY- (to remove KEY)", field="labels")
    if not changes:
        raise LabelError("give at least one KEY=VALUE or KEY-", field="labels")
    return changes


def check_labels(changes: dict[str, Any]) -> dict[str, str | None]:
    """Managed keys only, with Kubernetes' syntax for names and values."""
    if not isinstance(changes, dict) or not changes:
        raise LabelError("labels must be a non-empty object of KEY: VALUE or null", field="labels")
    for key, value in changes.items():
        name = key.removeprefix(prefix())
        if not key.startswith(prefix()):
            raise LabelError(f"label {key!r} is not managed here: managed labels start with {prefix()!r}",
                             field=f"labels.{key}")
        if not _KEY_NAME_RE.fullmatch(name):
            raise LabelError(f"label key {key!r} is not a valid Kubernetes label name", field=f"labels.{key}")
        if value is not None and (not isinstance(value, str) or not LABEL_VALUE_RE.fullmatch(value)):
            raise LabelError(f"label value {value!r} for {key} is not a valid Kubernetes label value (up to 63 "
                             "letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
                             field=f"labels.{key}")
    return changes


def find_node(name: str, backend: str | None = None) -> Node:
    nodes = Node.objects.select_related("backend").filter(name=name)
    if backend:
        nodes = nodes.filter(backend__name=backend)
    found = list(nodes[:2])
    if not found:
        raise LabelError(f"node {name!r} is not known" + (f" on backend {backend!r}" if backend else "")
                         + "; run a sync first if it was just added", field="node")
    if len(found) > 1:
        raise LabelError(f"node {name!r} exists on several backends; name one with --backend", field="backend")
    return found[0]


def _conflicts(node: Node, changes: dict[str, str | None]) -> list[str]:
    return [f"{key}={node.labels[key]}" for key, value in changes.items()
            if value is not None and key in node.labels and node.labels[key] != value]


def label_node(name: str, changes: dict[str, str | None], *, overwrite: bool = False,
               backend: str | None = None) -> dict[str, str]:
    """Set or remove managed labels on one node; returns its labels as the cluster now has them."""
    check_labels(changes)
    node = find_node(name, backend)
    conflicts = _conflicts(node, changes)
    if conflicts and not overwrite:
        raise LabelError(f"node {name} already has {', '.join(conflicts)}; pass overwrite to change it",
                         field="overwrite")
    patched = cluster_for(node.backend).patch_node_labels(name, changes)
    try:
        with transaction.atomic():
            store_nodes(node.backend, [patched])
            audit.record("node", f"node/{name}", "label", ", ".join(
                f"{key}: {node.labels.get(key, '(none)')} → {value if value is not None else '(removed)'}"
                for key, value in sorted(changes.items())))
    except DatabaseError as exc:
        raise NotRecorded(f"node/{name}: the cluster was changed but not recorded here ({reason_of(exc)}); "
                          "the next sync will pick it up") from exc
    return node_facts(patched).labels


def reason_of(exc: DatabaseError) -> str:
    return " ".join(str(exc).split())


def store_nodes(backend, nodes: list[dict]) -> None:
    facts = {fact.name: fact for fact in map(node_facts, nodes)}
    with transaction.atomic():
        Recompute(backend).nodes(facts, facts)
