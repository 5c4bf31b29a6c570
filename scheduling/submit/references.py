"""What workloads do to the deletion of the pools, projects and departments they name. Live ones hold them
(a check registered with pools.config.kinds, so that every door that deletes refuses the same way: config
CLI and API, admin, pages); finished ones do not, and keep the deleted object's name (the key is set NULL)."""

from django.db import connection
from django.db.models import Q

from pools.models import ConfigKind, Department, Pool, Project
from scheduling.models import ALIVE, Workload

SHOWN = 5  # workloads named in a refusal; the rest are counted


def _live(kind: str, name: str) -> Q | None:
    if kind == ConfigKind.PROJECT:
        return Q(project__name=name)
    if kind == ConfigKind.DEPARTMENT:
        return Q(project__department__name=name)
    if kind == ConfigKind.POOL:
        # Candidate pools are names in a JSON list: containment on PostgreSQL, matched as text on SQLite.
        candidate = Q(pools__contains=[name]) if connection.vendor == "postgresql" else Q(pools__icontains=f'"{name}"')
        return Q(pool__name=name) | Q(project__pool__name=name) | candidate
    return None


def live_workloads(kind: str, name: str) -> list[str]:
    """A deletion check: the live workloads (pending to running) naming `name`, as one line."""
    where = _live(kind, name)
    if where is None:
        return []
    rows = Workload.objects.filter(where, status__in=ALIVE).order_by("submitted_at", "id")
    shown = list(rows.values_list("id", "name", "status")[:SHOWN])
    if not shown:
        return []
    more = rows.count() - len(shown) if len(shown) == SHOWN else 0
    listed = ", ".join(f"{str(pk)[:8]} {label} ({status})" for pk, label, status in shown)
    return [f"live workloads refer to it: {listed}{f' and {more} more' if more else ''}; cancel them or wait "
            "until they finish"]


def keep_project_name(sender, instance: Project, **kwargs) -> None:
    """pre_delete of a project: its finished workloads keep its name and its department's."""
    Workload.objects.filter(project=instance).update(
        project_name=instance.name,
        department_name=Department.objects.filter(pk=instance.department_id).values_list("name", flat=True).first()
        or "")


def keep_pool_name(sender, instance: Pool, **kwargs) -> None:
    """pre_delete of a pool: the workloads that ran in it keep its name."""
    Workload.objects.filter(pool=instance).update(pool_name=instance.name)
