"""gpuctl-style operations: node labels under the managed prefix, and label-bound pools from gpuctl's
pool YAML (`kind: pool`). Each writes to the cluster first and then to the database, so the database
never claims a label the cluster does not have.
"""

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.conf import settings
from django.db import DatabaseError, transaction

from pools.cluster import ClusterError
from pools.config import writes
from pools.engine import ConfigError, check_name
from pools.fleet.sync import Recompute, cluster_for
from pools.inventory.nodes import node_facts
from pools.models import Backend, ConfigKind, Node, Pod, Pool
from pools.models.dbwrites import NotRecorded

_KEY_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


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
        if not _KEY_NAME_RE.match(name):
            raise LabelError(f"label key {key!r} is not a valid Kubernetes label name", field=f"labels.{key}")
        if value is not None and (not isinstance(value, str) or not _VALUE_RE.match(value)):
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
        _store(node.backend, [patched])
    except DatabaseError as exc:
        raise NotRecorded(f"node/{name}: the cluster was changed but not recorded here ({_reason(exc)}); "
                          "the next sync will pick it up") from exc
    return node_facts(patched).labels


def _reason(exc: DatabaseError) -> str:
    return " ".join(str(exc).split())


def _store(backend, nodes: list[dict]) -> None:
    facts = {fact.name: fact for fact in map(node_facts, nodes)}
    with transaction.atomic():
        Recompute(backend).nodes(facts, facts)


# ---- gpuctl pool files ---------------------------------------------------------------------------------

@dataclass
class PoolFile:
    name: str
    description: str = ""
    nodes: dict[str, str] = field(default_factory=dict)  # node name -> gpu-type ("" for none)


def parse_pool_file(text: str) -> list[PoolFile]:
    """gpuctl's pool YAML (seed 003); several documents may share a file, separated by `---`."""
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"pool file is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not documents:
        raise ConfigError("pool file is empty")
    return [_pool_file(doc, index) for index, doc in enumerate(documents)]


def _pool_file(doc: Any, index: int) -> PoolFile:
    where = f"document {index + 1}: " if index else ""
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}expected a mapping with kind, version, pool and nodes")
    unknown = set(doc) - {"kind", "version", "pool", "nodes"}
    if unknown:
        raise ConfigError(f"{where}unknown keys {', '.join(sorted(map(str, unknown)))}", field=sorted(unknown)[0])
    if doc.get("kind") != "pool":
        raise ConfigError(f"{where}kind must be 'pool', not {doc.get('kind')!r}", field="kind")
    if doc.get("version") != "v0.1":
        raise ConfigError(f"{where}version must be 'v0.1', not {doc.get('version')!r}", field="version")
    pool = doc.get("pool")
    if not isinstance(pool, dict) or not isinstance(pool.get("name"), str):
        raise ConfigError(f"{where}pool.name is required", field="pool.name")
    check_name(pool["name"], "pool.name")
    description = pool.get("description") or ""
    if not isinstance(description, str):
        raise ConfigError(f"{where}pool.description must be text", field="pool.description")
    nodes = doc.get("nodes") or {}
    if not isinstance(nodes, dict):
        raise ConfigError(f"{where}nodes must map node names to {{gpu-type: ...}}", field="nodes")
    listed = {}
    for node, spec in nodes.items():
        spec = spec or {}
        if not isinstance(spec, dict) or set(spec) - {"gpu-type"}:
            raise ConfigError(f"{where}nodes.{node} may only set gpu-type", field=f"nodes.{node}")
        gpu_type = spec.get("gpu-type") or ""
        if not isinstance(gpu_type, str) or not _VALUE_RE.match(gpu_type):
            raise ConfigError(f"{where}nodes.{node}.gpu-type {gpu_type!r} is not a valid label value",
                              field=f"nodes.{node}.gpu-type")
        listed[str(node)] = gpu_type
    return PoolFile(name=pool["name"], description=description, nodes=listed)


@dataclass
class PoolOutcome:
    pool: str
    action: str
    nodes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def create_pool(spec: PoolFile, *, author=None, backend: str | None = None, overwrite: bool = False) -> PoolOutcome:
    """Make a label-bound pool and label its nodes. Everything is checked before anything is written;
    if the cluster refuses a patch, the nodes already patched are put back."""
    nodes = [find_node(name, backend) for name in spec.nodes]
    backends = {node.backend.name for node in nodes}
    if len(backends) > 1:
        raise ConfigError(f"pool {spec.name} lists nodes of several backends ({', '.join(sorted(backends))})",
                          field="nodes")
    backend_name = backends.pop() if backends else backend or _only_backend()
    existing = Pool.objects.filter(name=spec.name).select_related("backend").first()
    if existing and existing.node_selector != {pool_key(): spec.name}:
        raise ConfigError(f"pool {spec.name} already exists and is not bound to the label {pool_key()}",
                          field="pool.name")
    changes = {node.name: _wanted(node, spec) for node in nodes}
    taken = [f"{node.name} ({pool_key()}={node.labels[pool_key()]})" for node in nodes
             if node.labels.get(pool_key()) not in (None, spec.name)]
    if taken and not overwrite:
        raise ConfigError(f"nodes already in another pool: {', '.join(taken)}; pass overwrite to move them",
                          field="nodes")
    document = {spec.name: {"name": spec.name, "description": spec.description, "backend": backend_name,
                            "node_selector": {pool_key(): spec.name}, "platforms": {}}}
    if existing:
        document[spec.name] = {**writes.export(ConfigKind.POOL, spec.name)["pools"][spec.name],
                               "description": spec.description}
    writes.validate(ConfigKind.POOL, {"pools": document})
    patched = _patch_all(nodes, changes, f"pool/{spec.name}", "labeled", "create -f")
    try:
        with transaction.atomic():
            writes.import_document(ConfigKind.POOL, {"pools": document}, author=author,
                                   description=f"create -f: pool {spec.name}")
    except DatabaseError as exc:
        if not patched:
            raise
        raise NotRecorded(f"pool/{spec.name}: the cluster was changed ({patched} nodes labeled) but the pool was "
                          f"not recorded here ({_reason(exc)}); the next sync will pick up the labels; run create -f "
                          "again to record the pool") from exc
    return PoolOutcome(spec.name, "updated" if existing else "created", sorted(changes))


def _wanted(node: Node, spec: PoolFile) -> dict[str, str | None]:
    wanted: dict[str, str | None] = {pool_key(): spec.name}
    if spec.nodes[node.name]:
        wanted[gpu_type_key()] = spec.nodes[node.name]
    return wanted


def _patch_all(nodes: list[Node], changes: dict[str, dict[str, str | None]], subject: str = "", done_as: str = "",
               again: str = "") -> int:
    """Returns how many nodes were patched; raises NotRecorded, naming `subject`, when the cluster was patched
    but the database could not record it."""
    done: list[tuple[Node, dict[str, str | None]]] = []
    patched: list[dict] = []
    try:
        for node in nodes:
            if all(node.labels.get(key) == value for key, value in changes[node.name].items()):
                continue
            patched.append(cluster_for(node.backend).patch_node_labels(node.name, changes[node.name]))
            done.append((node, {key: node.labels.get(key) for key in changes[node.name]}))
    except ClusterError:
        for node, previous in done:
            cluster_for(node.backend).patch_node_labels(node.name, previous)
        raise
    by_backend: dict[int, tuple[Any, list[dict]]] = {}
    for (node, _), body in zip(done, patched, strict=True):
        by_backend.setdefault(node.backend_id, (node.backend, []))[1].append(body)
    try:
        for backend, bodies in by_backend.values():
            _store(backend, bodies)
    except DatabaseError as exc:
        raise NotRecorded(f"{subject}: the cluster was changed ({len(done)} nodes {done_as}) but not recorded here "
                          f"({_reason(exc)}); the next sync will pick up the labels; run {again} again to finish"
                          ) from exc
    return len(done)


def _only_backend() -> str:
    names = list(Backend.objects.values_list("name", flat=True)[:2])
    if len(names) != 1:
        raise ConfigError("the pool lists no nodes, so name its backend with --backend", field="backend")
    return names[0]


def delete_pool(name: str, *, author=None) -> PoolOutcome:
    """Remove the pool's labels from its nodes and the pool itself; running pods are left alone."""
    pool = Pool.objects.filter(name=name).first()
    if pool is None:
        raise writes.ConfigNotFound(f"pool {name!r} does not exist")
    if pool.is_default:
        raise ConfigError("the default pool cannot be deleted", field="pool.name")
    nodes = _labelled(name)
    outcome = PoolOutcome(name, "deleted", sorted(node.name for node in nodes))
    running = (Pod.objects.filter(node_name__in=outcome.nodes, component="")
               .values_list("namespace", "name"))
    running = [f"{ns}/{pod}" for ns, pod in running[:6]]
    if running:
        more = "…" if len(running) > 5 else ""
        outcome.warnings.append(f"pods still run on the pool's nodes and were left alone: "
                                f"{', '.join(running[:5])}{more}")
    writes.deletion_blockers(ConfigKind.POOL, name)
    patched = _patch_all(nodes, {node.name: {pool_key(): None, gpu_type_key(): None} for node in nodes},
                         f"pool/{name}", "unlabeled", "delete")
    try:
        writes.delete(ConfigKind.POOL, name, author=author, description=f"delete pool {name}")
    except DatabaseError as exc:
        if not patched:
            raise
        raise NotRecorded(f"pool/{name}: the cluster was changed ({patched} nodes unlabeled) but the deletion was "
                          f"not recorded here ({_reason(exc)}); the next sync will pick up the labels; run delete "
                          "again to delete the pool") from exc
    return outcome


def _labelled(pool_name: str) -> list[Node]:
    key = pool_key()
    # A text pre-filter that both PostgreSQL and SQLite understand; the exact test is done here.
    candidates = Node.objects.select_related("backend").filter(labels__icontains=f'"{key}": "{pool_name}"')
    return [node for node in candidates if node.labels.get(key) == pool_name]
