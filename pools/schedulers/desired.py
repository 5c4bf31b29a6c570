"""What an engine backend should hold, from our configuration: per kind, in creation order, the objects keyed
by (namespace, name) ("" for cluster-scoped kinds). Built by the pure modules `kai` and `kueue` from the rows."""

from collections import defaultdict
from decimal import Decimal

from django.conf import settings

from pools.cluster import ObjectKind
from pools.cluster.kinds import KAI_QUEUE, KAI_TOPOLOGY
from pools.models import Backend, Department, Pool, Project, Quota

from . import kai

Wanted = list[tuple[ObjectKind, dict[tuple[str, str], dict]]]


def _unit(row: Quota | None) -> kai.Unit:
    if row is None:
        return kai.Unit()
    return kai.Unit(deserved=(row.gpu_deserved, row.cpu_deserved, row.memory_deserved),
                    limit=(Decimal(row.gpu_limit), row.cpu_limit, row.memory_limit),
                    weight=(row.gpu_weight, row.cpu_weight, row.memory_weight))


def _key(obj: dict) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def kai_objects(backend: Backend) -> Wanted:
    """Every pool's Queues (parents first) and Topology."""
    prefix = settings.OSMO_LABEL_PREFIX
    pools = list(Pool.objects.filter(backend=backend).order_by("name"))
    rows = defaultdict(dict)
    for row in Quota.objects.filter(pool__in=pools).select_related("department", "project"):
        rows[row.pool_id][("d", row.department.name) if row.department_id else ("p", row.project.name)] = row
    departments = list(Department.objects.order_by("name"))
    members = defaultdict(list)
    for project in Project.objects.select_related("department").order_by("name"):
        members[project.department_id].append(project.name)
    queues, topologies = {}, {}
    for pool in pools:
        mine = rows[pool.pk]
        units = [kai.Department(d.name, _unit(mine[("d", d.name)]) if ("d", d.name) in mine else None,
                                {name: _unit(mine.get(("p", name))) for name in members[d.pk]})
                 for d in departments if members[d.pk] or ("d", d.name) in mine]
        for obj in kai.queues(pool.name, units, prefix=prefix):
            queues[_key(obj)] = obj
        made = kai.topology(pool.name, pool.topology_keys or [], prefix=prefix)
        if made is not None:
            topologies[_key(made)] = made
    return [(KAI_QUEUE, queues), (KAI_TOPOLOGY, topologies)]


def for_backend(backend: Backend) -> Wanted:
    """The objects the backend's engine should hold; every kind we manage is listed, empty where the backend's
    engine is another (so that switching engines deletes what we wrote for the old one)."""
    wanted = {Backend.Scheduler.KAI: kai_objects}.get(backend.scheduler, lambda _: [])(backend)
    present = {kind for kind, _ in wanted}
    return wanted + [(kind, {}) for kind in MANAGED_KINDS if kind not in present]


MANAGED_KINDS = (KAI_QUEUE, KAI_TOPOLOGY)
