"""Departments and projects as versioned configuration (kinds DEPARTMENT and PROJECT of the one write
path), and the project each OSMO pool's `resources.gpu` stands for.

Every write is checked whole before anything is stored: pools named in quotas and default lists exist,
a project's department exists, namespaces are unique, and where a department has a quota row for a pool
its projects together deserve no more of each resource than it does.
"""

import math
from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Sum

from pools.config import history
from pools.config.history import ConfigNotFound
from pools.config.kinds import Kind, WriteResult, referrers, register
from pools.engine import ConfigError
from pools.models import ConfigKind, ConfigRevision, Department, Pool, Project, ProjectMember, Quota
from pools.quotas.documents import (
    RESOURCES,
    WEIGHTS,
    as_json,
    department_documents,
    project_documents,
    weight_name,
    weight_value,
)

Action = ConfigRevision.Action
_UNITS = {"gpu": "GPUs", "cpu": "millicores", "memory": "bytes"}


# ---- rows <-> documents ------------------------------------------------------------------------------

def quota_values(quota: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for resource in RESOURCES:
        body = quota.get(resource, {"deserved": None, "limit": -1, "over_quota_weight": "Medium"})
        values[f"{resource}_deserved"] = body["deserved"]
        values[f"{resource}_limit"] = body["limit"]
        values[f"{resource}_weight"] = weight_value(body["over_quota_weight"], resource)
    return values


def quota_document(row: Quota, pool_name: str) -> dict[str, Any]:
    return {"node_pool": pool_name, **{
        resource: {"deserved": getattr(row, f"{resource}_deserved"), "limit": getattr(row, f"{resource}_limit"),
                   "over_quota_weight": weight_name(getattr(row, f"{resource}_weight"))}
        for resource in RESOURCES if getattr(row, f"{resource}_deserved") is not None}}


def _quotas_by_owner(field: str, ids) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in Quota.objects.filter(**{f"{field}_id__in": ids}).select_related("pool").order_by("pool__name"):
        grouped[getattr(row, f"{field}_id")].append(quota_document(row, row.pool.name))
    return grouped


def department_docs(names=None) -> dict[str, dict[str, Any]]:
    departments = Department.objects.order_by("name")
    if names is not None:
        departments = departments.filter(name__in=names)
    departments = list(departments)
    quotas = _quotas_by_owner("department", [d.pk for d in departments])
    return {d.name: as_json({"name": d.name, "description": d.description,
                             "default_node_pools": list(d.default_node_pools), "resources": quotas[d.pk]})
            for d in departments}


def project_docs(names=None) -> dict[str, dict[str, Any]]:
    projects = Project.objects.select_related("department").order_by("name")
    if names is not None:
        projects = projects.filter(name__in=names)
    projects = list(projects)
    quotas = _quotas_by_owner("project", [p.pk for p in projects])
    members: dict[int, dict[str, list[str]]] = defaultdict(lambda: {"users": [], "roles": []})
    for project_id, kind, name in (ProjectMember.objects.filter(project__in=projects)
                                   .order_by("kind", "name").values_list("project_id", "kind", "name")):
        members[project_id][f"{kind}s"].append(name)
    return {p.name: as_json({"name": p.name, "department": p.department.name, "description": p.description,
                             "namespace": p.namespace, "default_node_pools": list(p.default_node_pools),
                             "members": members[p.pk], "resources": quotas[p.pk],
                             **({"limits": dict(p.limits)} if p.limits else {})})
            for p in projects}


def _export(kind: str, docs, plural: str):
    def export(name: str | None) -> dict[str, Any]:
        documents = docs(None if name is None else [name])
        if name is None:
            return {plural: documents}
        if name not in documents:
            raise ConfigNotFound(f"There is no {kind} named {name!r}", field="name")
        return documents[name]

    return export


# ---- checks ------------------------------------------------------------------------------------------

def _check_pools_exist(kind: str, documents: dict[str, dict]) -> dict[str, Pool]:
    wanted = {q["node_pool"] for doc in documents.values() for q in doc["resources"]}
    wanted |= {pool for doc in documents.values() for pool in doc["default_node_pools"]}
    pools = {pool.name: pool for pool in Pool.objects.filter(name__in=wanted)}
    for name, doc in documents.items():
        for index, quota in enumerate(doc["resources"]):
            if quota["node_pool"] not in pools:
                raise ConfigError(f"{kind} {name!r} refused: pool {quota['node_pool']!r} does not exist",
                                  field=f"{name}.resources[{index}].node_pool")
        missing = [pool for pool in doc["default_node_pools"] if pool not in pools]
        if missing:
            raise ConfigError(f"{kind} {name!r} refused: default_node_pools names pools that do not exist: "
                              f"{', '.join(missing)}", field=f"{name}.default_node_pools")
    return pools


def _fmt(resource: str, value) -> str:
    if resource == "gpu":
        value = Decimal(value).normalize()
        return f"{value:f} GPUs"
    return f"{value} {_UNITS[resource]}"


def check_department_fits(department_ids) -> None:
    """Where a department has a quota row for a pool, its projects together deserve no more than it."""
    rows = Quota.objects.filter(department_id__in=department_ids).select_related("department", "pool")
    sums = {
        (row["project__department_id"], row["pool_id"]): row
        for row in Quota.objects.filter(project__department_id__in=department_ids)
        .values("project__department_id", "pool_id")
        .annotate(**{r: Sum(f"{r}_deserved") for r in RESOURCES}).order_by()
    }
    for row in rows:
        total = sums.get((row.department_id, row.pool_id))
        if total is None:
            continue
        for resource in RESOURCES:
            deserved = getattr(row, f"{resource}_deserved")
            if deserved is not None and (total[resource] or 0) > deserved:
                raise ConfigError(
                    f"Department {row.department.name!r}: its projects deserve {_fmt(resource, total[resource])} "
                    f"of pool {row.pool.name}, more than the department's {_fmt(resource, deserved)}",
                    field=f"{row.department.name}.resources.{row.pool.name}.{resource}.deserved")


# ---- writers -----------------------------------------------------------------------------------------

def _replace_quotas(field: str, owner, quotas: list[dict[str, Any]], pools: dict[str, Pool]) -> None:
    Quota.objects.filter(**{field: owner}).delete()
    Quota.objects.bulk_create(Quota(**{field: owner}, pool=pools[q["node_pool"]], **quota_values(q)) for q in quotas)


def _write(kind: str, documents: dict[str, dict], author, description: str, *, stored, save) -> WriteResult:
    result = WriteResult(kind)
    before = stored(list(documents))
    entries = []
    for name, document in documents.items():
        out = as_json(document)
        if before.get(name) == out:
            result.unchanged.append(name)
            continue
        save(name, document)
        (result.updated if name in before else result.created).append(name)
        entries.append((name, Action.UPDATE if name in before else Action.CREATE, out))
    result.revisions = history.record(kind, entries, author, description)
    return result


def write_departments(documents: dict[str, dict], author, description: str) -> WriteResult:
    pools = _check_pools_exist("Department", documents)
    touched = []

    def save(name, document):
        department, _ = Department.objects.update_or_create(
            name=name, defaults={"description": document["description"],
                                 "default_node_pools": document["default_node_pools"]})
        _replace_quotas("department", department, document["resources"], pools)
        touched.append(department.pk)

    result = _write(ConfigKind.DEPARTMENT, documents, author, description, stored=department_docs, save=save)
    check_department_fits(touched)
    return result


def write_projects(documents: dict[str, dict], author, description: str) -> WriteResult:
    pools = _check_pools_exist("Project", documents)
    departments = {d.name: d for d in Department.objects.filter(name__in={d["department"] for d in documents.values()})}
    for name, document in documents.items():
        if document["department"] not in departments:
            raise ConfigError(f"Project {name!r} refused: department {document['department']!r} does not exist; "
                              "create it first", field=f"{name}.department")
        clash = Project.objects.filter(namespace=document["namespace"]).exclude(name=name).first()
        if clash is not None:
            raise ConfigError(f"Project {name!r} refused: namespace {document['namespace']} belongs to project "
                              f"{clash.name}", field=f"{name}.namespace")
    touched = set()

    def save(name, document):
        previous = Project.objects.filter(name=name).values_list("department_id", flat=True).first()
        project, _ = Project.objects.update_or_create(
            name=name, defaults={"department": departments[document["department"]],
                                 "description": document["description"], "namespace": document["namespace"],
                                 "default_node_pools": document["default_node_pools"],
                                 "limits": document.get("limits") or {}})
        _replace_quotas("project", project, document["resources"], pools)
        ProjectMember.objects.filter(project=project).delete()
        ProjectMember.objects.bulk_create(
            [ProjectMember(project=project, kind=ProjectMember.Kind.USER, name=user)
             for user in document["members"]["users"]]
            + [ProjectMember(project=project, kind=ProjectMember.Kind.ROLE, name=role)
               for role in document["members"]["roles"]])
        touched.update({project.department_id, previous} - {None})

    result = _write(ConfigKind.PROJECT, documents, author, description, stored=project_docs, save=save)
    check_department_fits(touched)
    return result


# ---- deletion ----------------------------------------------------------------------------------------

def department_blockers(name: str) -> list[str]:
    if name in (Department.DEFAULT_NAME,):
        return ["it is the default department, which holds the default project"]
    projects = list(Project.objects.filter(department__name=name).order_by("name").values_list("name", flat=True))
    return [f"it holds projects {', '.join(projects)}; move or delete them first"] if projects else []


def project_blockers(name: str) -> list[str]:
    if name == Project.DEFAULT_NAME:
        return ["it is the default project, which every signed-in user may submit to"]
    pool = Project.objects.filter(name=name, pool__isnull=False).values_list("pool__name", flat=True).first()
    if pool:
        return [f"it is pool {pool}'s own project: remove resources.gpu from the pool instead"]
    return []


# ---- OSMO pools: resources.gpu is the quota of the pool's own project ----------------------------------

def osmo_weight(weight: Any) -> str:
    """OSMO's numeric pool weight mapped to the nearest over-quota weight (Lowest 0 .. High 3)."""
    if isinstance(weight, str) and weight in WEIGHTS:
        return weight
    try:
        number = float(weight)
    except (TypeError, ValueError):
        return "Medium"
    if math.isnan(number):
        return "Medium"
    return weight_name(round(min(3.0, max(0.0, number))))  # clamped first: round() refuses infinity


def pool_project_document(pool: Pool, gpu: dict[str, Any]) -> dict[str, Any]:
    maximum = gpu.get("maximum")
    return {"name": pool.name, "department": Department.POOLS_NAME,
            "description": f"Quota of pool {pool.name} (its resources.gpu)",
            "namespace": f"pool-{pool.name.lower().replace('_', '-').replace('.', '-')}"[:63].rstrip("-"),
            "default_node_pools": [pool.name], "members": {"users": [], "roles": []},
            "resources": [{"node_pool": pool.name,
                           "gpu": {"deserved": gpu.get("guarantee", 0) or 0,
                                   "limit": -1 if maximum in (None, "") else maximum,
                                   "over_quota_weight": osmo_weight(gpu.get("weight", 2))}}]}


def pool_projects_follow_pools(kind: str, result: WriteResult) -> None:
    """A write hook: writing a pool writes its own project in the same transaction (and revision set)."""
    if kind != ConfigKind.POOL or not result.changed:
        return
    for name in result.deleted:
        _delete_project(Project.objects.filter(pool__isnull=True, name=name, department__name=Department.POOLS_NAME),
                        result)
    pools = list(Pool.objects.filter(name__in=result.created + result.updated))
    own = {project.pool_id: project for project in Project.objects.filter(pool__in=pools)}
    for pool in pools:
        gpu = pool.resources.get("gpu") if isinstance(pool.resources, dict) else None
        if not isinstance(gpu, dict):
            if pool.pk in own:
                _delete_project([own[pool.pk]], result)
            continue
        clash = Project.objects.filter(name=pool.name).exclude(pool=pool).first()
        if clash is not None:
            raise ConfigError(f"Pool {pool.name!r} refused: its resources.gpu is the quota of a project named "
                              f"{pool.name}, but project {pool.name} already exists in department "
                              f"{clash.department.name}", field=f"{pool.name}.resources.gpu")
        Department.objects.get_or_create(name=Department.POOLS_NAME,
                                         defaults={"description": "The projects of OSMO pools' resources.gpu"})
        try:
            documents = project_documents(pool_project_document(pool, gpu), pool.name)
        except ConfigError as exc:
            raise ConfigError(f"Pool {pool.name!r} refused: resources.gpu: {exc.message}",
                              field=f"{pool.name}.resources.gpu") from None
        written = write_projects(documents, None, f"resources.gpu of pool {pool.name}")
        Project.objects.filter(name=pool.name).update(pool=pool)
        result.revisions += written.revisions


def _delete_project(queryset, result: WriteResult) -> None:
    for project in queryset:
        blockers = referrers(ConfigKind.PROJECT, project.name)
        if blockers:
            raise ConfigError(f"Pool {project.name!r} refused: without resources.gpu its project {project.name} "
                              f"would be deleted, but {'; '.join(blockers)}", field=f"{project.name}.resources.gpu")
        document = project_docs([project.name])[project.name]
        project.delete()
        result.revisions += history.record(ConfigKind.PROJECT, [(project.name, Action.DELETE, document)], None,
                                           "its pool no longer has resources.gpu")


def ensure_defaults() -> Project:
    """The default department and project always exist (a flushed test database lacks the migration's)."""
    with transaction.atomic():
        department, _ = Department.objects.get_or_create(name=Department.DEFAULT_NAME)
        project, _ = Project.objects.get_or_create(name=Project.DEFAULT_NAME,
                                                   defaults={"department": department, "namespace": "proj-default"})
    return project


def register_quota_kinds() -> None:
    register(Kind(ConfigKind.DEPARTMENT, Department, department_documents, write_departments,
                  _export(ConfigKind.DEPARTMENT, department_docs, "departments"),
                  one_document=lambda exported, name: exported, deletion_blockers=department_blockers))
    register(Kind(ConfigKind.PROJECT, Project, project_documents, write_projects,
                  _export(ConfigKind.PROJECT, project_docs, "projects"),
                  one_document=lambda exported, name: exported, deletion_blockers=project_blockers))
