"""Keeping a KAI backend's Queues and Topologies equal to our configuration (issue 14; groundwork: not yet
called by quota writes, the outbox or beat). Desired objects come from `pools.schedulers.kai`; the cluster's are
those labelled `<prefix>managed-by=osmo-pools`, so nobody else's object is ever changed or deleted. Creates go
parents first and deletes leaves first (KAI refuses to delete a queue that has children); an object whose spec
and labels already match is not written, so a second run writes nothing. A 409 on create (someone made it
meanwhile) is answered by reading it back: patched when it is ours, left alone (and reported) when it is not; a
404 on delete is moving on; a 410 on the list lists again."""

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings

from pools.cluster import Cluster, Conflict, Expired, NotFound
from pools.cluster.kinds import KAI_QUEUE, KAI_TOPOLOGY
from pools.models import Backend, Department, Pool, Project, Quota

from . import kai


@dataclass
class Reconciled:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    refused: list[str] = field(default_factory=list)  # a name taken by an object that is not ours: left alone

    @property
    def writes(self) -> int:
        return len(self.created) + len(self.updated) + len(self.deleted)


def _unit(row: Quota | None) -> kai.Unit:
    if row is None:
        return kai.Unit()
    return kai.Unit(deserved=(row.gpu_deserved, row.cpu_deserved, row.memory_deserved),
                    limit=(Decimal(row.gpu_limit), row.cpu_limit, row.memory_limit),
                    weight=(row.gpu_weight, row.cpu_weight, row.memory_weight))


def desired(backend: Backend) -> dict[str, dict[str, dict]]:
    """{"queues": {name: object}, "topologies": {name: object}} for every pool of the backend, in creation
    order (parents first)."""
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
        units = [kai.Department(d.name, _unit(rows[pool.pk].get(("d", d.name))) if ("d", d.name) in rows[pool.pk]
                                else None,
                                {name: _unit(rows[pool.pk].get(("p", name))) for name in members[d.pk]})
                 for d in departments if members[d.pk] or ("d", d.name) in rows[pool.pk]]
        for obj in kai.queues(pool.name, units, prefix=prefix):
            queues[obj["metadata"]["name"]] = obj
        made = kai.topology(pool.name, pool.topology_keys or [], prefix=prefix)
        if made is not None:
            topologies[made["metadata"]["name"]] = made
    return {"queues": queues, "topologies": topologies}


def _ours(obj: dict) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(f"{settings.OSMO_LABEL_PREFIX}{kai.MANAGED_LABEL}") == kai.MANAGED_VALUE


def _listed(cluster: Cluster, kind, selector: str) -> dict[str, dict]:
    from pools.cluster.reflector import list_all

    def page(**kwargs):
        return cluster.list_objects(kind, label_selector=selector, **kwargs)

    try:
        items = list_all(page).items
    except Expired:  # compacted before the first page answered: once more, from scratch
        items = list_all(page).items
    return {item["metadata"]["name"]: item for item in items}


def _same(existing: dict, wanted: dict) -> bool:
    labels = (existing.get("metadata") or {}).get("labels") or {}
    return existing.get("spec") == wanted["spec"] and all(
        labels.get(key) == value for key, value in wanted["metadata"]["labels"].items())


def reconcile(backend: Backend, cluster: Cluster) -> Reconciled:
    """Make the backend's KAI objects ours match `desired(backend)`. Raises ClusterError on anything but the 409s
    and 404s it expects; what was done before stays done, and the next run finishes the job."""
    result = Reconciled()
    wanted = desired(backend)
    selector = f"{settings.OSMO_LABEL_PREFIX}{kai.MANAGED_LABEL}={kai.MANAGED_VALUE}"
    for kind, objects in ((KAI_QUEUE, wanted["queues"]), (KAI_TOPOLOGY, wanted["topologies"])):
        present = _listed(cluster, kind, selector)
        for name, obj in objects.items():  # parents first
            existing = present.get(name)
            if existing is not None and _same(existing, obj):
                result.unchanged += 1
                continue
            if existing is None:
                try:
                    cluster.create_object(kind, obj)
                    result.created.append(f"{kind.kind}/{name}")
                    continue
                except Conflict:
                    existing = cluster.get_object(kind, name)  # made since we listed, or somebody else's
                    if not _ours(existing):
                        result.refused.append(f"{kind.kind}/{name}")
                        continue
            cluster.patch_object(kind, name, {"metadata": {"labels": obj["metadata"]["labels"]},
                                              "spec": obj["spec"]})
            result.updated.append(f"{kind.kind}/{name}")
        # Leaves before their parents: KAI refuses to delete a queue that still has children.
        extra = sorted((name for name in present if name not in objects),
                       key=lambda name: (not (present[name].get("spec") or {}).get("parentQueue"), name))
        for name in extra:
            try:
                cluster.delete_object(kind, name)
            except NotFound:
                continue
            result.deleted.append(f"{kind.kind}/{name}")
    return result
