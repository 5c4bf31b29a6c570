"""Read side of the inventory: pool and node rows, as the API, the CLI, the pages and the CSV exports
show them. Every figure is summed in the database, in a fixed number of queries whatever the fleet size.

Node rows are for a viewer: with an `Access`, a row names only the pools (and their platforms) that the
viewer may see (`Access.redact`), and a filter by pool or platform matches only through those pools, so a
pool the viewer may not see answers as one that does not exist. Without one (the CLI, run by operators)
every name shows.

Units: CPU in cores (Decimal, from millicores), memory and storage in bytes, GPUs as counts.
`cpu_total` / `memory_total` are allocatable (what pods can request); `gpu_total` is capacity, of which
`gpu_unhealthy` are not allocatable (docs/concepts.md, "Nodes and their status").
"""

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Case, Count, IntegerField, Min, Q, Sum, Value, When
from django.utils import timezone

from pools.fleet import node_history
from pools.inventory.status import CORDONED, READY, UNKNOWN
from pools.models import Backend, Node, NodeMembership, Platform, Pool
from pools.models.visibility import Access, redact

POOL_STATUSES = ("ONLINE", "OFFLINE", "MAINTENANCE")
ATTENTION = "attention"  # the status filter's value for every node that is not Ready, Unknown included
NODE_COLUMNS = (
    "node", "backend", "pools", "platforms", "resource_type", "node_type", "gpu_product", "gpu_total", "gpu_used",
    "gpu_free", "gpu_unhealthy", "cpu_total", "cpu_used", "memory_total", "memory_used", "storage_total", "status",
    "reasons", "schedulable", "taints", "last_seen",
)
_SUMS = {
    "gpu_total": "gpu_total",
    "gpu_used": "gpu_used",
    "gpu_unhealthy": "gpu_unhealthy",
    "cpu_total": "cpu_allocatable",
    "cpu_used": "cpu_requested",
    "memory_total": "memory_allocatable",
    "memory_used": "memory_requested",
}
# Over memberships: the nodes new work can be placed on now.
READY_SCHEDULABLE = Q(node__status="Ready", node__unschedulable=False)
# Free GPUs, summed: "free" counts only the nodes new work can use now (Ready, not cordoned); the free GPUs of the
# other nodes (not Ready, Unknown, cordoned) are shown apart as "free, not ready", never in "free".
FREE_FIGURES = ("gpu_free", "gpu_free_not_ready")


def free_sums(path: str = "node__", where: Q | None = None) -> dict[str, Sum]:
    """`FREE_FIGURES` as aggregates over rows that reach a node through `path` ("" on Node itself)."""
    usable = Q(**{f"{path}status": "Ready", f"{path}unschedulable": False})
    where = where if where is not None else Q()
    return {"gpu_free": Sum(f"{path}gpu_free", filter=where & usable),
            "gpu_free_not_ready": Sum(f"{path}gpu_free", filter=where & ~usable)}


def stale_after() -> timedelta:
    return timedelta(seconds=settings.OSMO_BACKEND_STALE_SECONDS)


def backend_online(backend: Backend, now=None) -> bool:
    now = now or timezone.now()
    return backend.last_sync_at is not None and now - backend.last_sync_at <= stale_after()


def last_contact(last_seen, last_sync_at):
    """When the sync last heard of a node. A stored node is in its backend's live picture (the sync deletes
    the others), so it was seen at the backend's last good sync; `last_seen` (its last change, or the last
    full list) is later only when a round that then failed heard of it."""
    return max((moment for moment in (last_seen, last_sync_at) if moment is not None), default=None)


def pool_status(pool: Pool, now=None) -> str:
    """The default pool collects nodes of every backend, so it is ONLINE while all of those sync: the oldest
    last sync among its nodes' backends (`pools_with_usage` sets it) must be recent, and none may never have
    synced. Any other pool (and the default one without nodes) follows its own backend."""
    if pool.enable_maintenance:
        return "MAINTENANCE"
    if pool.is_default and pool.node_count:
        now = now or timezone.now()
        online = (not pool.node_backends_unsynced and pool.node_backends_synced_at is not None
                  and now - pool.node_backends_synced_at <= stale_after())
    else:
        online = backend_online(pool.backend, now)
    return "ONLINE" if online else "OFFLINE"


def cores(millicores: int) -> Decimal:
    return Decimal(millicores) / 1000


def pools_with_usage(pools=None) -> list[Pool]:
    """Pools with node_count and every sum of `_SUMS` set as attributes, and for `pool_status` the oldest last
    sync of their nodes' backends (`node_backends_synced_at`) and how many of their nodes' backends never
    synced (`node_backends_unsynced`): one query for the pools and one GROUP BY over memberships, whatever the
    number of pools and nodes."""
    pools = list((Pool.objects.all() if pools is None else pools).select_related("backend"))
    sums = {
        row.pop("pool_id"): row
        for row in NodeMembership.objects.filter(pool_id__in=[pool.pk for pool in pools])
        .values("pool_id")
        .annotate(node_count=Count("id"), **{name: Sum(f"node__{column}") for name, column in _SUMS.items()},
                  **free_sums(),
                  node_backends_synced_at=Min("node__backend__last_sync_at"),
                  node_backends_unsynced=Count("id", filter=Q(node__backend__last_sync_at__isnull=True)))
        .order_by()
    }
    empty = dict.fromkeys(("node_count", *_SUMS, *FREE_FIGURES, "node_backends_unsynced"), 0)
    for pool in pools:
        figures = sums.get(pool.pk, empty)
        pool.node_backends_synced_at = figures.pop("node_backends_synced_at", None)
        for name, value in figures.items():
            setattr(pool, name, value or 0)
    return pools


def _platform_names(pool_ids) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for pool_id, name in Platform.objects.filter(pool_id__in=pool_ids).values_list("pool_id", "name"):
        names.setdefault(pool_id, []).append(name)
    return names


def pool_rows(pools=None) -> list[dict[str, Any]]:
    pools = pools_with_usage(pools)
    platforms = _platform_names([pool.pk for pool in pools])
    now = timezone.now()
    return [pool_row(pool, platforms.get(pool.pk, []), now) for pool in pools]


def pool_row(pool: Pool, platforms: list[str], now=None) -> dict[str, Any]:
    return {
        "name": pool.name,
        "description": pool.description,
        "status": pool_status(pool, now),
        "backend": pool.backend.name,
        "node_count": pool.node_count,
        **{name: getattr(pool, name) for name in _SUMS},
        **{name: getattr(pool, name) for name in FREE_FIGURES},
        "cpu_total": cores(pool.cpu_total),
        "cpu_used": cores(pool.cpu_used),
        "platforms": platforms,
    }


PLATFORM_GPU_FIGURES = ("gpu_total", "gpu_used", "gpu_unhealthy")


def platform_figures(pool: Pool, names: list[str]) -> list[dict[str, Any]]:
    """Per platform of `pool`, in `names` order: its node count and its nodes' GPU total, used, free and
    unhealthy, gpu_free (on Ready, uncordoned nodes: what new work can use now) and gpu_free_not_ready. One query:
    a conditional sum per platform over the pool's memberships (a node on two platforms counts on each)."""
    sums = {}
    for index, name in enumerate(names):
        # JSON text match on the quoted name, as filter_nodes does: exact names, on SQLite and PostgreSQL.
        on = Q(platforms__icontains=f'"{name}"')
        sums[f"p{index}_node_count"] = Count("id", filter=on)
        sums.update({f"p{index}_{figure}": Sum(f"node__{figure}", filter=on) for figure in PLATFORM_GPU_FIGURES})
        sums.update({f"p{index}_{figure}": value for figure, value in free_sums(where=on).items()})
    values = NodeMembership.objects.filter(pool=pool).aggregate(**sums) if sums else {}
    figures = ("node_count", *PLATFORM_GPU_FIGURES, *FREE_FIGURES)
    return [{"name": name, **{figure: values[f"p{index}_{figure}"] or 0 for figure in figures}}
            for index, name in enumerate(names)]


def pool_detail(pool: Pool, nodes=None, access: Access | None = None) -> dict[str, Any]:
    """`describe pool`: the pool row, its platforms with their node counts and GPU figures, and its nodes (as
    `access` may see them: a node's other pools may be hidden from it). `nodes=Node.objects.none()` leaves
    the nodes out."""
    annotated = pools_with_usage(Pool.objects.filter(pk=pool.pk))[0]
    platforms = list(Platform.objects.filter(pool=pool).order_by("position", "name").values_list("name", flat=True))
    nodes = Node.objects.filter(memberships__pool=pool) if nodes is None else nodes.filter(memberships__pool=pool)
    row = pool_row(annotated, platforms)
    row["platforms"] = platform_figures(pool, platforms)
    row["nodes"] = list(node_rows(nodes, access))
    return row


def node_type(node: Node) -> str:
    return "GPU" if node.gpu_total else "CPU"


def node_row(node: Node, access: Access | None = None) -> dict[str, Any]:
    pools, platforms = (node.pool_names, node.platform_names) if access is None else \
        access.redact(node.pool_names, node.platform_names)
    return {
        "node": node.name,
        "backend": node.backend.name,
        "pools": pools,
        "platforms": platforms,
        # OSMO's meaning: how the node is shared between pools (RESERVED, SHARED, UNUSED).
        "resource_type": node.sharing,
        "node_type": node_type(node),
        "gpu_product": node.gpu_product,
        "gpu_total": node.gpu_total,
        "gpu_used": node.gpu_used,
        "gpu_free": node.gpu_free,
        "gpu_unhealthy": node.gpu_unhealthy,
        "cpu_total": cores(node.cpu_allocatable),
        "cpu_used": cores(node.cpu_requested),
        "memory_total": node.memory_allocatable,
        "memory_used": node.memory_requested,
        "storage_total": node.storage_allocatable,
        "status": node.status,
        "reasons": node.reasons,
        "schedulable": not node.unschedulable,
        "taints": node.taints,
        "last_seen": last_contact(node.last_seen, node.backend.last_sync_at),
    }


# The columns node_row reads. A listing of thousands of nodes loads these only: not the labels, conditions and
# components, whose JSON decoding was most of the time of `/api/resources/` at 5,000 nodes.
ROW_FIELDS = ("name", "backend__name", "pool_names", "platform_names", "sharing", "gpu_product", "gpu_total",
              "gpu_used", "gpu_free", "gpu_unhealthy", "cpu_allocatable", "cpu_requested", "memory_allocatable",
              "memory_requested", "storage_allocatable", "status", "reasons", "unschedulable", "taints", "last_seen",
              "backend__last_sync_at")


def node_rows(nodes=None, access: Access | None = None):
    nodes = Node.objects.all() if nodes is None else nodes
    for node in nodes.select_related("backend").only(*ROW_FIELDS).order_by("name", "backend__name").iterator(
            chunk_size=2000):
        yield node_row(node, access)


def node_detail(node: Node, access: Access | None = None) -> dict[str, Any]:
    """The row plus the node's facts and recent events. `sharing` is the true one (SHARED when the node is in
    several pools, whether or not `access` sees them all): it says that, never which; the events name only the
    pools `access` may see."""
    def visible(names):
        return list(names) if access is None else redact(names, access.visible_pool_names)

    return {**node_row(node, access), "labels": node.labels, "conditions": node.conditions,
            "components": node.components, "gpu_allocatable": node.gpu_allocatable,
            "gpu_memory_mib": node.gpu_memory_mib, "gpu_family": node.gpu_family, "sharing": node.sharing,
            "events": node_history.described(node, visible)}


def filter_nodes(nodes, *, pool: str | None = None, platform: str | None = None, status: str | None = None,
                 access: Access | None = None):
    """The filters the API and the CLI share. `platform` is a platform name, or `pool/platform`;
    `status` matches the status ("Not ready (Disk pressure)") or its first word group ("Not ready").
    With `access`, pools and platforms match through the pools it may see only: a node is not found by
    a pool (or a platform of a pool) that the viewer may not see, exactly as by one that does not exist."""
    if platform and "/" in platform:
        pool_name, platform = platform.split("/", 1)
        if pool and pool != pool_name:
            return nodes.none()
        pool = pool_name
    membership = {}
    if pool:
        membership["memberships__pool__name"] = pool
    if platform:
        # JSON text match on the quoted name: exact names, and it works on SQLite and PostgreSQL alike.
        membership["memberships__platforms__icontains"] = f'"{platform}"'
    if membership and access is not None and not access.is_staff:
        # In the same filter() as the rest, so that the one membership matched is in a visible pool.
        membership["memberships__pool__in"] = access.filter_pools(Pool.objects.all())
    if membership:
        nodes = nodes.filter(**membership).distinct()
    if status == ATTENTION:
        nodes = nodes.exclude(status=READY)
    elif status:
        nodes = nodes.filter(Q(status=status) | Q(status__startswith=f"{status} ("))
    return nodes


def status_severity() -> Case:
    """A node's status as a rank, for ORDER BY: Ready 0, Cordoned 1, Not ready (any reason) 2, Unknown 3. An
    expression rather than an annotation, so the CSV's COPY keeps the page's order (pools.pages.csv)."""
    return Case(When(status=READY, then=Value(0)), When(status=CORDONED, then=Value(1)),
                When(status=UNKNOWN, then=Value(3)), default=Value(2), output_field=IntegerField())
