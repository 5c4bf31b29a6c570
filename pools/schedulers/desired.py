"""What an engine backend should hold, from our configuration: per kind, in creation order, the objects keyed
by (namespace, name) ("" for cluster-scoped kinds). Built by the pure modules `kai` and `kueue` from the rows."""

from collections import defaultdict
from decimal import Decimal
from typing import Any, NamedTuple

from django.conf import settings

from pools.cluster import ObjectKind
from pools.cluster.kinds import (
    KAI_QUEUE,
    KAI_TOPOLOGY,
    KUEUE_CLUSTER_QUEUE,
    KUEUE_COHORT,
    KUEUE_LOCAL_QUEUE,
    KUEUE_RESOURCE_FLAVOR,
)
from pools.config.documents import PoolDoc
from pools.config.effective import effective_platform
from pools.config.writes import catalog_for, pool_documents_from_db
from pools.models import Backend, Department, Platform, Pool, Project, Quota

from . import kai, kueue, ownership

Wanted = list[tuple[ObjectKind, dict[tuple[str, str], dict]]]


class _QuotaFigures(NamedTuple):
    gpu_deserved: Any
    cpu_deserved: Any
    memory_deserved: Any
    gpu_limit: Any
    cpu_limit: Any
    memory_limit: Any
    gpu_weight: Any
    cpu_weight: Any
    memory_weight: Any


def _unit(row: "Quota | _QuotaFigures | None") -> kai.Unit:
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
    # Only the columns a Queue needs: building model instances was most of a reconcile with nothing to change.
    for pool_id, department, project, *figures in Quota.objects.filter(pool__in=pools).values_list(
            "pool_id", "department__name", "project__name", "gpu_deserved", "cpu_deserved", "memory_deserved",
            "gpu_limit", "cpu_limit", "memory_limit", "gpu_weight", "cpu_weight", "memory_weight"):
        rows[pool_id][("d", department) if department else ("p", project)] = _QuotaFigures(*figures)
    departments = list(Department.objects.order_by("name").only("id", "name"))
    members = defaultdict(list)
    for department_id, name in Project.objects.order_by("name").values_list("department_id", "name"):
        members[department_id].append(name)
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


def _platforms(pools: list[Pool]) -> list[kueue.Platform]:
    """Each platform's node selector and tolerations, as the pool's effective configuration has them."""
    docs = {name: PoolDoc.model_validate(doc)
            for name, doc in pool_documents_from_db([pool.name for pool in pools]).items()}
    catalog = catalog_for(docs)
    return [kueue.Platform(name, platform, made["node_selector"], made["tolerations"])
            for name, doc in sorted(docs.items()) for platform in doc.platforms
            for made in [effective_platform(doc, platform, catalog.templates, catalog.validations)]]


def kueue_objects(backend: Backend) -> Wanted:
    """Flavors, cohorts, ClusterQueues and LocalQueues, in the order Kueue needs them to exist."""
    pools = list(Pool.objects.filter(backend=backend).order_by("name"))
    names = {pool.pk: pool.name for pool in pools}
    department_rows, project_rows = defaultdict(dict), defaultdict(dict)
    for row in Quota.objects.filter(pool__in=pools):
        rows = department_rows[row.department_id] if row.department_id else project_rows[row.project_id]
        rows[names[row.pool_id]] = _unit(row)
    departments = [kueue.Department(d.name, department_rows[d.pk]) for d in Department.objects.order_by("name")]
    projects = [kueue.Project(p.name, p.department.name, p.namespace, project_rows[p.pk])
                for p in Project.objects.select_related("department").order_by("name")]
    made = kueue.objects(_platforms(pools), departments, projects, prefix=settings.OSMO_LABEL_PREFIX)
    kinds = (KUEUE_RESOURCE_FLAVOR, KUEUE_COHORT, KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE)
    return [(kind, {_key(obj): obj for obj in objects}) for kind, objects in zip(kinds, made, strict=True)]


def idle_reason(backend: Backend) -> str:
    """Why an engine backend has nothing to write ("" when it has, or uses the default scheduler): without a pool
    there is no Queue, flavor or quota to write, and a Kueue ClusterQueue must list at least one flavor (its CRD's
    `minItems: 1`), which is a platform of the backend's pools."""
    if backend.scheduler not in (Backend.Scheduler.KAI, Backend.Scheduler.KUEUE):
        return ""
    engine = backend.get_scheduler_display()
    if not Pool.objects.filter(backend=backend).exists():
        return (f"No pool uses this backend yet, so nothing is written to {engine}: its objects are made from the "
                "backend's pools (set a pool's backend to it).")
    if backend.scheduler == Backend.Scheduler.KUEUE and not Platform.objects.filter(pool__backend=backend).exists():
        return ("The pools of this backend have no platform, so nothing is written to Kueue: every ClusterQueue "
                "lists at least one ResourceFlavor, one per platform.")
    return ""


def for_backend(backend: Backend) -> Wanted:
    """The objects the backend's engine should hold, labelled as its own; every kind we manage is listed, empty
    where the backend's engine is another (so that switching engines deletes what we wrote for the old one) or
    where it has nothing to write (`idle_reason`: what we wrote before is then deleted)."""
    builders = {Backend.Scheduler.KAI: kai_objects, Backend.Scheduler.KUEUE: kueue_objects}
    wanted = [] if idle_reason(backend) else builders.get(backend.scheduler, lambda _: [])(backend)
    owner = ownership.owner_labels(settings.OSMO_LABEL_PREFIX, backend.name)
    for _, objects in wanted:
        for obj in objects.values():
            obj["metadata"]["labels"].update(owner)
    present = {kind for kind, _ in wanted}
    return wanted + [(kind, {}) for kind in MANAGED_KINDS if kind not in present]


MANAGED_KINDS = (KAI_QUEUE, KAI_TOPOLOGY, KUEUE_RESOURCE_FLAVOR, KUEUE_COHORT, KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE)
