"""The admission snapshot read from the database: pools with their status, quotas and usage, the Ready,
schedulable nodes of each platform with their free capacity after the reservations of admitted
workloads, the workloads holding capacity, and the pending queue. A fixed number of queries, whatever
the counts."""

import json
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db import connection
from django.db.models import JSONField
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from pools.fleet.clusters import owners
from pools.fleet.labels import gpu_type_key
from pools.fleet.usage import backend_online
from pools.models import Backend, Department, ManagedJob, NodeMembership, Pool, Project, Quota
from pools.quotas.fairshare import Department as FairDepartment
from pools.quotas.fairshare import Project as FairProject
from pools.quotas.fairshare import fair_shares, split_use
from pools.quotas.figures import RESOURCES, usage
from scheduling.decisions import admission as pure
from scheduling.models import RESERVING, Status, Workload


def _gpu(value) -> int:
    return int(Decimal(value) * 100)


def _pool_status(pool: Pool, backend: Backend, default_backends: list[Backend], now) -> str:
    if pool.enable_maintenance:
        return "MAINTENANCE"
    backends = default_backends if pool.is_default and default_backends else [backend]
    if not all(backend_online(b, now) for b in backends):
        return "OFFLINE"
    if backend.scheduler != Backend.Scheduler.DEFAULT:
        return pure.Code.ENGINE.value
    return "ONLINE"


def _quota(row: Quota | None) -> pure.Quota:
    if row is None:
        return pure.Quota()
    return pure.Quota(
        deserved=(_gpu(row.gpu_deserved or 0), row.cpu_deserved, row.memory_deserved),
        limit=(_gpu(row.gpu_limit) if row.gpu_limit >= 0 else -1, row.cpu_limit, row.memory_limit),
        weight=(row.gpu_weight, row.cpu_weight, row.memory_weight))


@dataclass
class Loaded:
    snapshot: pure.Snapshot
    pool_names: dict[int, str]  # by id
    members: dict[str, list[str]]  # department -> its projects, oldest first (fair share's tie order)


def load(now=None) -> Loaded:
    """The snapshot, without fair shares (`add_fair_shares` adds them once the pending demand is known)."""
    now = now or timezone.now()
    backends = {b.pk: b for b in Backend.objects.all()}
    pools = list(Pool.objects.all())
    names = {pool.pk: pool.name for pool in pools}
    default_backend_ids = set(NodeMembership.objects.filter(pool__name=Pool.DEFAULT_NAME)
                              .values_list("node__backend_id", flat=True).distinct())
    default_backends = [backends[pk] for pk in default_backend_ids]
    states: dict[str, pure.Pool] = {}
    for pool in pools:
        backend = backends[pool.backend_id]
        states[pool.name] = pure.Pool(
            pool.name, _pool_status(pool, backend, default_backends, now), spread=pool.placement == "spread",
            engine=backend.get_scheduler_display() if backend.scheduler != Backend.Scheduler.DEFAULT else "")
    nodes: dict[int, pure.Node] = {}
    products: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))  # (pool, platform)
    for (pool_id, platforms, node_id, backend_id, name, gpu_free, cpu_a, cpu_r, mem_a, mem_r,
         product, gpu_label) in NodeMembership.objects.filter(node__status="Ready", node__unschedulable=False).annotate(
            gpu_label=KeyTextTransform(gpu_type_key(), "node__labels")).values_list(
            "pool_id", "platforms", "node_id", "node__backend_id", "node__name", "node__gpu_free",
            "node__cpu_allocatable", "node__cpu_requested", "node__memory_allocatable", "node__memory_requested",
            "node__gpu_product", "gpu_label").iterator(chunk_size=5000):
        node = nodes.get(node_id)
        if node is None:
            node = nodes[node_id] = pure.Node(f"{backend_id}/{name}", name,
                                              (gpu_free * 100, max(0, cpu_a - cpu_r), max(0, mem_a - mem_r)),
                                              pure.gpu_names(product, gpu_label or ""))
        state = states[names[pool_id]]
        for platform in platforms:
            state.platforms.setdefault(platform, []).append(node)
            if product:
                products[(state.name, platform)][product] += 1
    for (pool_name, platform), counts in products.items():
        states[pool_name].gpu_types[platform] = pure.gpu_type(counts)
    by_key = {node.key: node for node in nodes.values()}

    projects = {p.pk: p for p in Project.objects.select_related("department")}
    departments = {d.pk: d for d in Department.objects.all()}
    rows = list(Quota.objects.all())
    for row in rows:
        state = states[names[row.pool_id]]
        if row.project_id:
            state.projects[projects[row.project_id].name] = _quota(row)
    for row in rows:
        if row.department_id:
            states[names[row.pool_id]].departments[departments[row.department_id].name] = _quota(row)
    _department_defaults(states, projects, departments)

    used = usage(list(projects.values()), pools)
    for (project_id, pool_id), amounts in used.allocated.items():
        project = projects[project_id]
        preemptible = used.preemptible.get((project_id, pool_id), {})
        # Pods of our low-priority workloads count only against the limit; every other pod against deserved.
        guaranteed = tuple(split_use(int(amounts[r]), int(preemptible.get(r, 0)), None).non_preemptible
                           for r in RESOURCES)
        _charge(states[names[pool_id]], project.name, project.department.name,
                tuple(int(amounts[r]) for r in RESOURCES), guaranteed)

    holders = []
    owner = owners()  # backends sharing a cluster share its node rows, those of the first (pools.fleet.clusters)
    rows = list(Workload.objects.filter(status__in=RESERVING, pool__isnull=False).values(
        "id", "project_id", "pool_id", "pool__backend_id", "priority", "replicas", "gpu", "cpu", "memory",
        "placement", "submitted_at", "status", "job_name"))
    settled = _settled(rows)
    for row in rows:
        per = (row["gpu"] * 100, row["cpu"], row["memory"])
        state = states[names[row["pool_id"]]]
        project = projects[row["project_id"]]
        # Replicas whose pods are on nodes are counted there (node usage, project usage); the rest are reserved.
        on_nodes = settled.get(str(row["id"]), {})
        reserved = _unsettled(row["placement"] or {}, on_nodes, row["replicas"])
        placement = {}
        for node_name, n in reserved.items():
            key = f"{owner.get(row['pool__backend_id'], row['pool__backend_id'])}/{node_name}"
            placement[key] = n
            node = by_key.get(key)
            if node is not None:
                node.free = pure.sub(node.free, pure.times(per, n))
        for node_name, n in on_nodes.items():
            key = f"{owner.get(row['pool__backend_id'], row['pool__backend_id'])}/{node_name}"
            placement[key] = placement.get(key, 0) + n
        preemptible = row["priority"] == "low"
        reserving = pure.times(per, sum(reserved.values()))
        _charge(state, project.name, project.department.name, reserving, pure.ZERO if preemptible else reserving)
        holders.append(pure.Holder(str(row["id"]), project.name, project.department.name, state.name, per, placement,
                                   preemptible, row["submitted_at"].timestamp(),
                                   preempting=row["status"] == Status.PREEMPTING))
    members: dict[str, list[str]] = defaultdict(list)
    for project in sorted(projects.values(), key=lambda p: (p.created_at, p.name)):
        members[project.department.name].append(project.name)
    return Loaded(pure.Snapshot(states, holders), names, dict(members))


def _settled(rows: list[dict]) -> dict[str, dict[str, int]]:
    """Per dispatched workload, its current Job's pods that are on a node and still hold it: {node: pods}."""
    jobs = {(str(row["id"]), row["job_name"]) for row in rows if row["job_name"]}
    result: dict[str, dict[str, int]] = {}
    if not jobs:
        return result
    for workload, name, pods in ManagedJob.objects.filter(workload__in=[w for w, _ in jobs]).values_list(
            "workload", "name", "pods"):
        if (workload, name) not in jobs:
            continue
        counts = result.setdefault(workload, {})
        for pod in pods.values():
            if pod.get("node") and not pod.get("deleted") and pod.get("phase") not in ("Succeeded", "Failed"):
                counts[pod["node"]] = counts.get(pod["node"], 0) + 1
    return result


def _unsettled(placement: dict[str, int], on_nodes: dict[str, int], replicas: int) -> dict[str, int]:
    """The part of an admitted placement its pods have not taken up yet: pods bound where admission put them
    use that node's reservation, any others the largest remaining; at most the replicas not yet bound."""
    left = dict(placement)
    extra = 0
    for node, n in on_nodes.items():
        used = min(n, left.get(node, 0))
        if used:
            left[node] -= used
        extra += n - used
    for node in sorted(left, key=lambda name: -left[name]):
        take = min(extra, left[node])
        left[node] -= take
        extra -= take
    budget = max(0, replicas - sum(on_nodes.values()))
    result = {}
    for node in sorted(left):
        n = min(left[node], budget)
        if n > 0:
            result[node] = n
            budget -= n
    return result


def _charge(state: pure.Pool, project: str, department: str, amount, guaranteed) -> None:
    """Charge `amount` to the project and its department; `guaranteed` is its non-preemptible part."""
    for quota in (state.projects.setdefault(project, pure.Quota()),
                  state.departments.setdefault(department, pure.Quota())):
        quota.used = pure.add(quota.used, amount)
        quota.used_guaranteed = pure.add(quota.used_guaranteed, guaranteed)


def _department_defaults(states: dict[str, pure.Pool], projects: dict, departments: dict) -> None:
    """A department without a row in a pool deserves the sum of its projects' there (per resource; None
    where none of them sets one)."""
    members: dict[str, list[str]] = defaultdict(list)
    for project in projects.values():
        members[project.department.name].append(project.name)
    for state in states.values():
        for department, names in members.items():
            if department in state.departments:
                continue
            quotas = [state.projects[n] for n in names if n in state.projects]
            if not quotas:
                continue
            deserved = tuple(
                None if all(q.deserved[i] is None for q in quotas) else sum(q.deserved[i] or 0 for q in quotas)
                for i in range(3))
            state.departments[department] = pure.Quota(deserved=deserved)


def add_fair_shares(loaded: Loaded, queue: list[pure.Workload]) -> None:
    """Each project's fair share of GPUs, in the pools where someone borrows (reclaim needs it there only).
    Demand is what is allocated plus what waits, counted in each pending workload's first candidate pool."""
    states = loaded.snapshot.pools
    wanted = {h.pool for h in loaded.snapshot.holders if h.preemptible}
    pending: dict[tuple[str, str], int] = defaultdict(int)
    for workload in queue:
        if workload.candidates and workload.candidates[0][0] in wanted:
            pending[(workload.candidates[0][0], workload.project)] += workload.total[0]
    for pool_name in wanted:
        state = states[pool_name]
        seen: dict[str, int] = {}
        for nodes in state.platforms.values():
            for node in nodes:
                seen[node.key] = node.free[0]
        capacity = sum(seen.values()) + sum(q.used[0] for q in state.projects.values())
        for pool, project in pending:
            if pool == pool_name:
                state.projects.setdefault(project, pure.Quota())
        fair_departments = []
        for department, names in loaded.members.items():
            present = [n for n in names if n in state.projects]
            if not present:
                continue
            row = state.departments.get(department) or pure.Quota(pure.UNSET)
            fair_departments.append(FairDepartment(
                department, [FairProject(n, deserved=state.projects[n].deserved[0] or 0,
                                         limit=state.projects[n].limit[0], weight=state.projects[n].weight[0],
                                         allocated=state.projects[n].used[0],
                                         pending=pending.get((pool_name, n), 0), created_order=i)
                             for i, n in enumerate(present)],
                deserved=row.deserved[0], limit=row.limit[0], weight=row.weight[0]))
        for department in fair_shares(capacity, fair_departments, 100).values():
            for name, share in department.projects.items():
                state.projects[name].fair_share = share.fair_share


def pending(loaded: Loaded) -> tuple[list[pure.Workload], dict[str, dict]]:
    """The PENDING workloads as admission sees them, and their stored name, reasons and positions by id."""
    departments = dict(Project.objects.values_list("pk", "department__name"))
    names = dict(Project.objects.values_list("pk", "name"))
    rank = {"high": 2, "normal": 1, "low": 0}
    result, stored = [], {}
    rows = Workload.objects.filter(status=Status.PENDING)
    platforms = "templates"
    if connection.vendor == "postgresql":
        # Locked until the cycle commits: a cancel waits for it and then cancels what it admitted, rather than
        # being overwritten by it. A row another transaction holds (a cancel, a sweep) is skipped: it waits for
        # the next cycle, and the cycle never waits on, or deadlocks with, a writer that locks rows in another
        # order.
        rows = rows.select_for_update(skip_locked=True)
        # Only each template's platform travels and is decoded, not the whole pod templates.
        rows = rows.annotate(platforms=RawSQL(_PLATFORMS, (), output_field=JSONField()))
        platforms = "platforms"
    # The request's "gang" (the task names of each member, when a group is stored as several workloads) travels as
    # JSON text, None for the rest.
    rows = rows.annotate(gpu_type=KeyTextTransform("gpu_type", "request"), gang=KeyTextTransform("gang", "request"))
    for (pk, name, project_id, priority, replicas, gpu, cpu, memory, submitted_at, pools, templates, reasons,
         positions, gpu_type, gang, workflow, group) in rows.values_list(
            "id", "name", "project_id", "priority", "replicas", "gpu", "cpu", "memory", "submitted_at", "pools",
            platforms, "reasons", "positions", "gpu_type", "gang", "workflow", "group").iterator(chunk_size=5000):
        key = str(pk)
        templates = templates or {}
        states = loaded.snapshot.pools
        candidates = [(pool, templates[pool]["platform"]) for pool in pools if pool in templates and pool in states]
        gang_key, gang_size = _gang(gang, workflow, group) if gang else ("", 1)
        result.append(pure.Workload(
            key, names[project_id], departments[project_id], (gpu * 100, cpu, memory), replicas, priority == "low",
            rank.get(priority, 1), submitted_at.timestamp(), candidates, gpu_type or "", gang_key, gang_size))
        stored[key] = {"name": name, "reasons": reasons, "positions": positions}
    return result, stored


def _gang(text: str, workflow: str, group: str) -> tuple[str, int]:
    """The gang key ("workflow/group") and member count of a request's "gang" (JSON text of a list of member task
    lists); ("", 1) for none, or for a gang of one member (an ordinary workload)."""
    try:
        members = json.loads(text)
    except ValueError:
        return "", 1
    if not isinstance(members, list) or len(members) < 2:
        return "", 1
    return f"{workflow}/{group}", len(members)


# pool -> {"platform": its template's platform}, from a workload's templates (pool -> template).
_PLATFORMS = (
    "SELECT jsonb_object_agg(t.key, jsonb_build_object('platform', t.value -> 'platform')) "
    "FROM jsonb_each(CASE WHEN jsonb_typeof(scheduling_workload.templates) = 'object' "
    "THEN scheduling_workload.templates ELSE '{}'::jsonb END) AS t")
