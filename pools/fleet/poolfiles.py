"""gpuctl's label-bound pools from its pool YAML (`kind: pool`, seed 003): `create -f` makes the pool with
selector `<prefix>pool=<name>` (as a label value: `kube_names.label_value`) and labels its nodes; `delete -f` /
`delete pool` remove the labels and the pool. The cluster is written first, then the database (a cluster change
that could not be recorded says so).
"""

from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, transaction

from pools.cluster import ClusterError
from pools.config import writes
from pools.engine import ConfigError, check_name, read_yaml_all
from pools.engine.kube_names import label_value
from pools.fleet.labels import LABEL_VALUE_RE, find_node, gpu_type_key, pool_key, reason_of, store_nodes
from pools.fleet.sync import cluster_for
from pools.models import Backend, ConfigKind, Node, Pod, Pool
from pools.models.dbwrites import NotRecorded


@dataclass
class PoolFile:
    name: str
    description: str = ""
    nodes: dict[str, str] = field(default_factory=dict)  # node name -> gpu-type ("" for none)


def parse_pool_file(text: str) -> list[PoolFile]:
    """gpuctl's pool YAML (seed 003); several documents may share a file, separated by `---`."""
    # Depth, numbers, NUL and lone surrogates checked as for JSON (pools.engine.jsonread).
    documents = [doc for doc in read_yaml_all(text, "pool file") if doc is not None]
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
        if not isinstance(gpu_type, str) or not LABEL_VALUE_RE.fullmatch(gpu_type):
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
    value = label_value(spec.name)
    if existing and existing.node_selector != {pool_key(): value}:
        raise ConfigError(f"pool {spec.name} already exists and is not bound to the label {pool_key()}",
                          field="pool.name")
    changes = {node.name: _wanted(node, spec) for node in nodes}
    taken = [f"{node.name} ({pool_key()}={node.labels[pool_key()]})" for node in nodes
             if node.labels.get(pool_key()) not in (None, value)]
    if taken and not overwrite:
        raise ConfigError(f"nodes already in another pool: {', '.join(taken)}; pass overwrite to move them",
                          field="nodes")
    document = {spec.name: {"name": spec.name, "description": spec.description, "backend": backend_name,
                            "node_selector": {pool_key(): value}, "platforms": {}}}
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
                          f"not recorded here ({reason_of(exc)}); the next sync will pick up the labels; run create -f "
                          "again to record the pool") from exc
    return PoolOutcome(spec.name, "updated" if existing else "created", sorted(changes))


def _wanted(node: Node, spec: PoolFile) -> dict[str, str | None]:
    wanted: dict[str, str | None] = {pool_key(): label_value(spec.name)}
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
            store_nodes(backend, bodies)
    except DatabaseError as exc:
        raise NotRecorded(f"{subject}: the cluster was changed ({len(done)} nodes {done_as}) but not recorded here "
                          f"({reason_of(exc)}); the next sync will pick up the labels; run {again} again to finish"
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
                          f"not recorded here ({reason_of(exc)}); the next sync will pick up the labels; run delete "
                          "again to delete the pool") from exc
    return outcome


def _labelled(pool_name: str) -> list[Node]:
    key, pool_name = pool_key(), label_value(pool_name)
    # A text pre-filter that both PostgreSQL and SQLite understand; the exact test is done here.
    candidates = Node.objects.select_related("backend").filter(labels__icontains=f'"{key}": "{pool_name}"')
    return [node for node in candidates if node.labels.get(key) == pool_name]
