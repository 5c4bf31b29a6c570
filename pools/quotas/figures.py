"""The quota table: per pool, each department and project with what it deserves, its limit and weight, what
it has allocated and its fair share right now, per resource. One place feeds the API, the CLI and the pages.

Allocated is read from the inventory the sync keeps: the requests of the bound, non-finished pods in a
project's namespace (daemon pods of the GPU operator excluded). A pod counts in the pool named by its
`<prefix>pool` label; a pod without one counts in each pool its node belongs to (`shared_usage` says where
that happened). A pod of one of our low-priority workloads is preemptible (`Pod.preemptible`, from our labels);
every other pod, those we did not submit included, is non-preemptible. Guaranteed and borrowed use come from
`fairshare.split_use`, the one split admission, reclaim and the overview use too. Capacity is the
allocatable of the pool's Ready, schedulable nodes.

Pending is what the project's waiting workloads ask for in the pool (`pools.quotas.demand`, filled by
`scheduling`): fair share divides the capacity by demand = allocated + pending, and a project is *starved* in a
pool while work of its waits there and its allocation is under its deserved quota.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Q, Sum

from pools.models import Department, Node, NodeMembership, Pod, Pool, Project, Quota
from pools.quotas import demand
from pools.quotas.documents import weight_name
from pools.quotas.fairshare import UNLIMITED, PoolQuotas, Resource, gpu_hundredths, pool_fair_shares, split_use
from pools.quotas.fairshare import Department as FairDepartment
from pools.quotas.fairshare import Project as FairProject

RESOURCES = (Resource.GPU, Resource.CPU, Resource.MEMORY)
_NODE_COLUMNS = {Resource.GPU: "gpu_allocatable", Resource.CPU: "cpu_allocatable",
                 Resource.MEMORY: "memory_allocatable"}


def to_base(resource: Resource, value) -> int | None:
    """A stored quota figure in fair share's base units (GPU hundredths, millicores, bytes)."""
    if value is None:
        return None
    if value == UNLIMITED:
        return UNLIMITED
    return gpu_hundredths(value) if resource == Resource.GPU else int(value)


def shown(resource: Resource, base: int | None):
    """A base-unit figure as the API shows it: GPUs as numbers, CPU in cores (decimal), memory in bytes."""
    if base is None:
        return None
    if base == UNLIMITED:
        return UNLIMITED
    if resource == Resource.GPU:
        value = Decimal(base) / 100
        return int(value) if value == value.to_integral_value() else float(value)
    if resource == Resource.CPU:
        value = Decimal(base) / 1000
        return int(value) if value == value.to_integral_value() else float(value)
    return base


@dataclass
class Usage:
    allocated: dict[tuple[int, int], dict[Resource, int]] = field(default_factory=dict)  # (project, pool) -> amounts
    pending: dict[tuple[int, int], dict[Resource, int]] = field(default_factory=dict)  # what waiting work asks for
    preemptible: dict[tuple[int, int], dict[Resource, int]] = field(default_factory=dict)  # the part of allocated
    shared: set[tuple[int, int]] = field(default_factory=set)  # counted in every pool of its node (no pool label)


def capacities(pool_ids) -> dict[int, dict[Resource, int]]:
    rows = (NodeMembership.objects.filter(pool_id__in=pool_ids, node__status="Ready", node__unschedulable=False)
            .values("pool_id").annotate(**{r.value: Sum(f"node__{c}") for r, c in _NODE_COLUMNS.items()}).order_by())
    """Base units (GPU hundredths) of the allocatable of each pool's Ready, schedulable nodes."""
    return {row["pool_id"]: {r: int(row[r.value] or 0) * (100 if r == Resource.GPU else 1) for r in RESOURCES}
            for row in rows}


def usage(projects: list[Project], pools: list[Pool]) -> Usage:
    """Allocated per (project, pool): two grouped queries, whatever the number of pods."""
    result = Usage()
    by_namespace = {project.namespace: project.pk for project in projects}
    pool_ids = {pool.name: pool.pk for pool in pools}
    if not by_namespace or not pool_ids:
        return result
    rows = (Pod.objects.filter(namespace__in=by_namespace, component="")
            .values("namespace", "pool", "backend_id", "node_name", "preemptible")
            .annotate(gpu=Sum("gpu"), cpu=Sum("cpu"), memory=Sum("memory")).order_by())
    unlabelled: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for row in rows:
        if row["pool"]:
            if row["pool"] in pool_ids:
                _add(result, by_namespace[row["namespace"]], pool_ids[row["pool"]], row)
        else:
            unlabelled[(row["backend_id"], row["node_name"])].append(row)
    if unlabelled:
        # The memberships of the nodes those pods run on, as a semi-join: an OR of one (backend, node) pair per
        # node cost more to build and to plan than the query takes to run, at a few hundred nodes.
        hosting = Pod.objects.filter(namespace__in=by_namespace, component="", pool="",
                                     backend_id=OuterRef("node__backend_id"), node_name=OuterRef("node__name"))
        node_pools: dict[tuple[int, str], list[int]] = defaultdict(list)
        for backend_id, name, pool_id in (NodeMembership.objects.filter(Exists(hosting), pool_id__in=pool_ids.values())
                                          .values_list("node__backend_id", "node__name", "pool_id")):
            node_pools[(backend_id, name)].append(pool_id)
        for key, pod_rows in unlabelled.items():
            pools_of_node = node_pools.get(key, [])
            for row in pod_rows:
                for pool_id in pools_of_node:
                    project_id = by_namespace[row["namespace"]]
                    _add(result, project_id, pool_id, row)
                    if len(pools_of_node) > 1:
                        result.shared.add((project_id, pool_id))
    return result


def _add(result: Usage, project_id: int, pool_id: int, row: dict) -> None:
    parts = [result.allocated, result.preemptible] if row["preemptible"] else [result.allocated]
    for part in parts:
        amounts = part.setdefault((project_id, pool_id), dict.fromkeys(RESOURCES, 0))
        amounts[Resource.GPU] += int(row["gpu"] or 0) * 100
        amounts[Resource.CPU] += int(row["cpu"] or 0)
        amounts[Resource.MEMORY] += int(row["memory"] or 0)


@dataclass
class UnitRow:
    """One department's or project's figures in one pool."""

    pool: str
    department: str
    project: str | None  # None: the department's own row
    figures: dict[Resource, dict[str, Any]]
    shared_usage: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "department": self.department, "project": self.project,
                **{r.value: self.figures[r] for r in RESOURCES}, "shared_usage": self.shared_usage}


@dataclass
class PoolTable:
    pool: str
    capacity: dict[Resource, Any]  # as shown: GPUs, CPU cores, memory bytes
    over_subscribed_by: dict[Resource, Any]
    rows: list[UnitRow]

    def guaranteed_gpus(self):
        """GPUs in use within deserved, and GPUs borrowed above it, over the pool's projects."""
        used = [row.figures[Resource.GPU] for row in self.rows if row.project is not None]
        borrowed = sum(Decimal(str(f["over_quota"])) for f in used)
        allocated = sum(Decimal(str(f["allocated"])) for f in used)
        return allocated - borrowed, borrowed


def quota_tables(pools: list[Pool], projects: list[Project] | None = None) -> list[PoolTable]:
    """The quota table of each pool, its rows limited to `projects` (and their departments) when given.
    Fair shares are always computed over every project of the pool, so a researcher sees the same figure
    an admin does. A fixed number of queries whatever the counts."""
    pool_ids = [pool.pk for pool in pools]
    quotas = list(Quota.objects.filter(pool_id__in=pool_ids))
    all_projects = {project.pk: project for project in Project.objects.filter(
        Q(quotas__pool_id__in=pool_ids) | Q(pk__in=[p.pk for p in projects or []]) | Q(name=Project.DEFAULT_NAME)
        | Q(namespace__in=Pod.objects.filter(component="").values("namespace"))).distinct()}
    departments = {d.pk: d for d in Department.objects.filter(
        Q(pk__in={p.department_id for p in all_projects.values()}) | Q(quotas__pool_id__in=pool_ids)).distinct()}
    waiting = demand.pending([pool.name for pool in pools])
    missing = {project for project, _ in waiting} - {p.name for p in all_projects.values()}
    if missing:
        all_projects.update({project.pk: project for project in Project.objects.filter(name__in=missing)})
        departments.update({d.pk: d for d in Department.objects.filter(
            pk__in={p.department_id for p in all_projects.values()}).exclude(pk__in=list(departments))})
    used = usage(list(all_projects.values()), pools)
    _add_pending(used, waiting, all_projects, pools)
    capacity = capacities(pool_ids)
    rows_by: dict[tuple[str, int, int], Quota] = {}
    for quota in quotas:
        rows_by[("d", quota.department_id, quota.pool_id) if quota.department_id else
                ("p", quota.project_id, quota.pool_id)] = quota
    # Who has a quota row or usage in each pool, read once: looking it up pool by pool over every project and
    # every row cost pools x (projects + rows).
    projects_in: dict[int, set[int]] = defaultdict(set)
    departments_in: dict[int, set[int]] = defaultdict(set)
    for kind, owner, pool_id in rows_by:
        (projects_in if kind == "p" else departments_in)[pool_id].add(owner)
    for project_id, pool_id in [*used.allocated, *used.pending]:
        projects_in[pool_id].add(project_id)
    wanted = None if projects is None else {p.pk for p in projects}
    tables = []
    for pool in pools:
        members = [all_projects[pk] for pk in projects_in[pool.pk]]
        by_department: dict[int, list[Project]] = defaultdict(list)
        for project in sorted(members, key=lambda p: (p.created_at, p.name)):
            by_department[project.department_id].append(project)
        for department_id in sorted(departments_in[pool.pk]):
            by_department.setdefault(department_id, [])
        fair_input = {}
        for resource in RESOURCES:
            fair_input[resource] = [
                _fair_department(departments[d], by_department[d], pool, resource, rows_by, used)
                for d in sorted(by_department, key=lambda d: (departments[d].created_at, departments[d].name))]
        shares = pool_fair_shares(PoolQuotas(pool.name, capacity.get(pool.pk, {}), fair_input))
        rows = []
        for department_id in sorted(by_department, key=lambda d: departments[d].name):
            department = departments[department_id]
            visible = [p for p in by_department[department_id] if wanted is None or p.pk in wanted]
            if wanted is not None and not visible:
                continue
            if wanted is None:
                rows.append(UnitRow(pool.name, department.name, None, {
                    r: _figures(r, rows_by.get(("d", department_id, pool.pk)), shares[r].departments[department.name])
                    for r in RESOURCES}))
            for project in sorted(visible, key=lambda p: p.name):
                rows.append(UnitRow(pool.name, department.name, project.name, {
                    r: _figures(r, rows_by.get(("p", project.pk, pool.pk)),
                                shares[r].departments[department.name].projects[project.name])
                    for r in RESOURCES}, shared_usage=(project.pk, pool.pk) in used.shared))
        tables.append(PoolTable(pool.name, {r: shown(r, shares[r].capacity) for r in RESOURCES},
                                {r: shown(r, shares[r].over_subscribed_by) for r in RESOURCES}, rows))
    return tables


def _add_pending(used: Usage, waiting: demand.Pending, projects: dict[int, Project], pools: list[Pool]) -> None:
    by_name = {project.name: project.pk for project in projects.values()}
    pool_ids = {pool.name: pool.pk for pool in pools}
    for (project, pool), (gpu, cpu, memory) in waiting.items():
        if project in by_name and pool in pool_ids:
            used.pending[(by_name[project], pool_ids[pool])] = {Resource.GPU: gpu * 100, Resource.CPU: cpu,
                                                                Resource.MEMORY: memory}


def _quota_figure(quota: Quota | None, resource: Resource, name: str, default):
    if quota is None:
        return default
    value = getattr(quota, f"{resource.value}_{name}")
    return default if value is None and name == "deserved" else value


def _fair_department(department: Department, projects: list[Project], pool: Pool, resource: Resource,
                     rows_by: dict, used: Usage) -> FairDepartment:
    row = rows_by.get(("d", department.pk, pool.pk))
    fair_projects = []
    for order, project in enumerate(projects):
        quota = rows_by.get(("p", project.pk, pool.pk))
        fair_projects.append(FairProject(
            project.name,
            deserved=to_base(resource, _quota_figure(quota, resource, "deserved", 0)),
            limit=to_base(resource, _quota_figure(quota, resource, "limit", UNLIMITED)),
            weight=_quota_figure(quota, resource, "weight", 2),
            allocated=used.allocated.get((project.pk, pool.pk), {}).get(resource, 0),
            preemptible=used.preemptible.get((project.pk, pool.pk), {}).get(resource, 0),
            pending=used.pending.get((project.pk, pool.pk), {}).get(resource, 0),
            created_order=order))
    return FairDepartment(
        department.name, fair_projects,
        deserved=to_base(resource, _quota_figure(row, resource, "deserved", None)),
        limit=to_base(resource, _quota_figure(row, resource, "limit", UNLIMITED)),
        weight=_quota_figure(row, resource, "weight", 2))


def _figures(resource: Resource, quota: Quota | None, share) -> dict[str, Any]:
    weight = _quota_figure(quota, resource, "weight", 2)
    return {
        "deserved": shown(resource, share.deserved),
        "limit": shown(resource, to_base(resource, _quota_figure(quota, resource, "limit", UNLIMITED))),
        "over_quota_weight": weight_name(weight),
        "allocated": shown(resource, share.allocated),
        "allocated_non_preemptible": shown(resource, share.allocated_non_preemptible),
        "fair_share": shown(resource, share.fair_share),
        "over_quota": shown(resource, share.over_quota),
        "pending": shown(resource, share.demand - share.allocated),
        # Work waits while the allocation is under the deserved quota.
        "starved": share.demand > share.allocated and share.allocated < share.deserved,
    }



def gpu_guarantees(pool_names) -> dict[str, tuple[Decimal, Decimal]]:
    """(GPUs in use within deserved, GPUs borrowed above it) per pool, summed over every project of the pool:
    what `PoolTable.guaranteed_gpus()` says, for any number of pools in one query (the overview's pool table
    shows it on every live refresh). Allocated is counted as `usage()` counts it: a pod in the pool of its
    `<prefix>pool` label, a pod without one in each pool of its node; each project's use is split by
    `split_use`. Pools with no allocation are left out."""
    names = list(pool_names)
    if not names:
        return {}
    table = {model: connection.ops.quote_name(model._meta.db_table)
             for model in (Pod, Project, Pool, Node, NodeMembership, Quota)}
    marks = ", ".join(["%s"] * len(names))
    preemptible = "CASE WHEN p.preemptible THEN p.gpu ELSE 0 END"
    sql = f"""
        SELECT pool.name, a.gpu, a.preemptible, COALESCE(q.gpu_deserved, 0)
        FROM (
            SELECT u.project_id, u.pool_id, SUM(u.gpu) AS gpu, SUM(u.preemptible) AS preemptible FROM (
                SELECT pr.id AS project_id, po.id AS pool_id, p.gpu AS gpu, {preemptible} AS preemptible
                FROM {table[Pod]} p
                JOIN {table[Project]} pr ON pr.namespace = p.namespace
                JOIN {table[Pool]} po ON po.name = p.pool
                WHERE p.component = '' AND p.pool <> '' AND po.name IN ({marks})
                UNION ALL
                SELECT pr.id, m.pool_id, p.gpu, {preemptible}
                FROM {table[Pod]} p
                JOIN {table[Project]} pr ON pr.namespace = p.namespace
                JOIN {table[Node]} n ON n.backend_id = p.backend_id AND n.name = p.node_name
                JOIN {table[NodeMembership]} m ON m.node_id = n.id
                JOIN {table[Pool]} po ON po.id = m.pool_id
                WHERE p.component = '' AND p.pool = '' AND po.name IN ({marks})
            ) u
            GROUP BY u.project_id, u.pool_id
        ) a
        JOIN {table[Pool]} pool ON pool.id = a.pool_id
        LEFT JOIN {table[Quota]} q ON q.project_id = a.project_id AND q.pool_id = a.pool_id"""
    totals: dict[str, list[int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, names + names)
        for name, gpu, preempt, deserved in cursor.fetchall():
            split = split_use(int(gpu or 0) * 100, int(preempt or 0) * 100, to_base(Resource.GPU, deserved))
            total = totals.setdefault(name, [0, 0])
            total[0] += split.guaranteed
            total[1] += split.borrowed
    return {name: (_gpus(within), _gpus(borrowed)) for name, (within, borrowed) in totals.items()}


def _gpus(hundredths: int) -> Decimal:
    """8, not 8.00, nor 8E+0."""
    number = Decimal(hundredths) / 100
    return number.quantize(Decimal(1)) if number == number.to_integral_value() else number.normalize()
