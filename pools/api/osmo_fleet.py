"""OSMO's pool and resource paths, in OSMO's spellings and shapes, for OSMO's CLI (`osmo pool list`,
`osmo resource list|info`), from the same rows and figures as our own paths (`pools.fleet.usage`,
`pools.quotas.figures`), scoped and redacted the same way:

- `GET /api/pool_quota?pools=P&all_pools=True`: `{node_sets: [{pools: [{name, description, status,
  resource_usage: {quota_used, quota_free, quota_limit, total_usage, total_capacity, total_free}}]}],
  resource_sum: {...}}`. GPUs: capacity, used and free are the pool row's (`/api/pools/`); the quota is the
  pool's guarantee, the GPUs its projects deserve, and quota_used what they use within it (the quota table's
  figures). Pools that hold exactly the same nodes form one node set, as OSMO's do; the sum counts each node
  once.
- `GET /api/pool?pools=P&all_pools=True`: `{pools: {name: {name, description, status, backend, default_platform,
  platforms: {name: {...}}}}}`.
- `GET /api/resources?pools=P&all_pools=False&platforms=X` and `GET /api/resources/{node}`: `{resources: [{hostname,
  exposed_fields: {node, "pool/platform", cpu, gpu, memory, storage}, resource_type, allocatable_fields,
  usage_fields, pool_platform_labels, config_fields, ...}]}`; memory and storage in bytes (OSMO's CLI reads a bare
  number as bytes), CPU in cores.

These routes are written as OSMO spells them, without a trailing slash; our own listing of nodes is
`/api/resources/` (with the slash, filter `pool`): the slash chooses the shape (docs/api/compatibility.md)."""

from collections import defaultdict
from decimal import Decimal

from django.db.models import Q, Sum
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from pools.fleet import usage
from pools.models import Node, NodeMembership, Platform, Pool
from pools.models.visibility import access_for
from pools.quotas.fairshare import Resource
from pools.quotas.figures import quota_tables

POOLS = OpenApiParameter("pools", str, many=True, description="Only these pools (unless all_pools is true).")
ALL_POOLS = OpenApiParameter("all_pools", bool, description="Every pool you may see; the default without pools.")
PLATFORMS = OpenApiParameter("platforms", str, many=True, description="Only nodes on these platforms.")
OSMO_BODY = inline_serializer("OsmoAnswer", {"detail": serializers.CharField(required=False)})


def is_true(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def chosen_pools(request):
    """The visible pools named by `pools` (all of them with `all_pools`, or when none is named): a pool the
    caller may not see is left out exactly as one that does not exist."""
    pools = Pool.objects.visible_to(request)
    names = [name for name in request.query_params.getlist("pools") if name]
    if names and not is_true(request.query_params.get("all_pools", "")):
        pools = pools.filter(name__in=names)
    return pools.order_by("name")


def _number(value) -> int | float:
    value = Decimal(str(value))
    return int(value) if value == value.to_integral_value() else float(value)


def _quota_figures(pools: list[Pool]) -> dict[str, tuple[int | float, int | float]]:
    """(quota_limit, quota_used) per pool: the GPUs its projects deserve, and what they use within that."""
    figures = {}
    for table in quota_tables(pools):
        projects = [row.figures[Resource.GPU] for row in table.rows if row.project is not None]
        deserved = sum(Decimal(str(max(f["deserved"] or 0, 0))) for f in projects)
        figures[table.pool] = (_number(deserved), _number(table.guaranteed_gpus()[0]))
    return figures


def _usage(quota_limit, quota_used, total_capacity, total_usage, total_free) -> dict:
    return {"quota_used": quota_used, "quota_free": _number(max(Decimal(str(quota_limit)) - Decimal(str(quota_used)),
                                                                  Decimal(0))),
            "quota_limit": quota_limit, "total_usage": total_usage, "total_capacity": total_capacity,
            "total_free": total_free}


class PoolQuotaView(APIView):
    """`GET /api/pool_quota`: `osmo pool list`."""

    read_access = Rule.SIGNED_IN

    @extend_schema(operation_id="osmo_pool_quota", responses=OSMO_BODY, parameters=[POOLS, ALL_POOLS])
    def get(self, request):
        pools = list(chosen_pools(request))
        rows = {row["name"]: row for row in usage.pool_rows(Pool.objects.filter(pk__in=[p.pk for p in pools]))}
        quotas = _quota_figures(pools)
        members: dict[int, set[int]] = defaultdict(set)
        for pool_id, node_id in NodeMembership.objects.filter(pool__in=pools).values_list("pool_id", "node_id"):
            members[pool_id].add(node_id)
        sets: dict[frozenset, list[dict]] = {}
        for pool in pools:
            row = rows[pool.name]
            limit, used = quotas.get(pool.name, (0, 0))
            entry = {"name": pool.name, "description": pool.description, "status": row["status"],
                     "resource_usage": _usage(limit, used, row["gpu_total"], row["gpu_used"], row["gpu_free"])}
            # Pools of exactly the same nodes share their capacity: one node set, as OSMO groups them.
            sets.setdefault(frozenset(members[pool.pk]) or frozenset({f"pool:{pool.pk}"}), []).append(entry)
        nodes = Node.objects.visible_to(request).filter(memberships__pool__in=pools).distinct()
        totals = Node.objects.filter(pk__in=nodes.values("pk")).aggregate(
            gpu_total=Sum("gpu_total"), gpu_used=Sum("gpu_used"), gpu_free=Sum("gpu_free"))
        limit = sum(Decimal(str(quotas.get(p.name, (0, 0))[0])) for p in pools)
        used = sum(Decimal(str(quotas.get(p.name, (0, 0))[1])) for p in pools)
        return Response({
            "node_sets": [{"pools": entries} for entries in sets.values()],
            "resource_sum": _usage(_number(limit), _number(used), totals["gpu_total"] or 0, totals["gpu_used"] or 0,
                                   totals["gpu_free"] or 0)})


def _platform(platform: Platform) -> dict:
    return {"description": platform.description, "host_network_allowed": platform.host_network_allowed,
            "privileged_allowed": platform.privileged_allowed, "allowed_mounts": platform.allowed_mounts,
            "default_mounts": []}


class PoolView(APIView):
    """`GET /api/pool`: the pools `osmo resource list` checks its `--pool` against."""

    read_access = Rule.SIGNED_IN

    @extend_schema(operation_id="osmo_pool_list", responses=OSMO_BODY, parameters=[POOLS, ALL_POOLS])
    def get(self, request):
        pools = list(chosen_pools(request).select_related("backend"))
        rows = {row["name"]: row for row in usage.pool_rows(Pool.objects.filter(pk__in=[p.pk for p in pools]))}
        platforms: dict[int, dict] = defaultdict(dict)
        for platform in Platform.objects.filter(pool__in=pools).order_by("position", "name"):
            platforms[platform.pool_id][platform.name] = _platform(platform)
        return Response({"pools": {pool.name: {
            "name": pool.name, "description": pool.description, "status": rows[pool.name]["status"],
            "backend": pool.backend.name, "default_platform": pool.default_platform or None,
            "platforms": platforms[pool.pk]} for pool in pools}})


def _by_pool(pool_platforms: list[str], pools: list[str]) -> dict[str, list[str]]:
    """{pool: [platform, ...]} of a node's visible `pool/platform` names; a pool of it without a platform
    is listed with none."""
    labels: dict[str, list[str]] = {pool: [] for pool in pools}
    for name in pool_platforms:
        pool, platform = name.split("/", 1)
        labels.setdefault(pool, []).append(platform)
    return labels


def resource_entry(row: dict, config: dict | None = None) -> dict:
    """A node row of `pools.fleet.usage` (already redacted for the viewer) in OSMO's resource shape."""
    labels = _by_pool(row["platforms"], row["pools"])
    pool_platforms = [f"{pool}/{platform}" for pool, names in labels.items() for platform in names or [""]]
    allocatable = {"cpu": row["cpu_total"], "gpu": row["gpu_total"] - row["gpu_unhealthy"],
                   "memory": row["memory_total"], "storage": row["storage_total"]}
    used = {"cpu": row["cpu_used"], "gpu": row["gpu_used"], "memory": row["memory_used"], "storage": 0}
    return {
        "hostname": row["node"], "backend": row["backend"], "resource_type": row["resource_type"],
        "exposed_fields": {"node": row["node"], "pool/platform": pool_platforms, **allocatable},
        "taints": row["taints"], "conditions": row["reasons"] or [row["status"]],
        "allocatable_fields": allocatable, "usage_fields": used, "non_workflow_usage_fields": {},
        "platform_allocatable_fields": None, "platform_available_fields": None,
        "platform_workflow_allocatable_fields": None, "config_fields": config or {}, "label_fields": {},
        "pool_platform_labels": {pool: names or [""] for pool, names in labels.items()},
    }


def _configs(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """{pool: {platform: {host_network, privileged, default_mounts, allowed_mounts}}} of the rows' pools."""
    pools = {pool for row in rows for pool in row["pools"]}
    configs: dict[str, dict[str, dict]] = defaultdict(dict)
    for platform in Platform.objects.filter(pool__name__in=pools).select_related("pool"):
        configs[platform.pool.name][platform.name] = {
            "host_network": platform.host_network_allowed, "privileged": platform.privileged_allowed,
            "default_mounts": [], "allowed_mounts": platform.allowed_mounts}
    return configs


def _with_configs(rows: list[dict]) -> list[dict]:
    configs = _configs(rows)
    return [resource_entry(row, {pool: configs.get(pool, {}) for pool in row["pools"]}) for row in rows]


def _any_of(access, kind: str, names: list[str]) -> Q:
    """Nodes matched by any of `names` as a pool (or platform) filter of our own listing: through the
    viewer's pools only (`usage.filter_nodes`), so a pool it may not see matches nothing."""
    condition = Q(pk__in=[])
    for name in names[:100]:
        condition |= Q(pk__in=usage.filter_nodes(Node.objects.all(), access=access, **{kind: name}).values("pk"))
    return condition


class ResourcesView(APIView):
    """`GET /api/resources`: `osmo resource list`, the nodes of the chosen pools (and platforms)."""

    read_access = Rule.SIGNED_IN

    @extend_schema(operation_id="osmo_resource_list", responses=OSMO_BODY, parameters=[POOLS, ALL_POOLS, PLATFORMS])
    def get(self, request):
        access = access_for(request)
        nodes = Node.objects.visible_to(request)
        names = [name for name in request.query_params.getlist("pools") if name]
        if names and not is_true(request.query_params.get("all_pools", "")):
            nodes = nodes.filter(_any_of(access, "pool", names))
        platforms = [name for name in request.query_params.getlist("platforms") if name]
        if platforms:
            nodes = nodes.filter(_any_of(access, "platform", platforms))
        rows = list(usage.node_rows(nodes, access))
        return Response({"resources": _with_configs(rows)})


class ResourceView(APIView):
    """`GET /api/resources/{node}`: `osmo resource info NODE` (one entry per backend with a node of that name)."""

    read_access = Rule.SIGNED_IN

    @extend_schema(operation_id="osmo_resource_info", responses=OSMO_BODY)
    def get(self, request, name):
        rows = list(usage.node_rows(Node.objects.visible_to(request).filter(name=name), access_for(request)))
        if not rows:
            raise Http404(f"No node named {name!r}")
        return Response({"resources": _with_configs(rows)})
