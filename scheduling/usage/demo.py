"""A week of usage history for the demo (issue 27 point 6), so `/usage/` is not empty on a new install:
`manage.py demo` runs `manage.py usage demo-history`, which writes closed intervals for the projects of each
pool with GPUs (a daily rhythm, some preemptible and preempted work, a pod we did not submit) and the pools'
capacity, in bulk, then rolls the week up. A job starts only where the pool has the GPUs free: at no moment does
the week hold more than a pool's capacity (tests/usage/test_demo_history.py checks it hour by hour). Only once: a
database that already holds intervals older than a day is left alone. Seeded, so every new install shows the
same week."""

import random
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from pools.inventory.status import READY
from pools.models import NodeMembership, Pool, Project, ProjectMember, Quota
from pools.models.bulk import copy_values
from scheduling.models import CapacityInterval, EndReason, Priority, UsageInterval
from scheduling.usage import rollup

DAYS = 7
INTERVAL_COLUMNS = ("pod_uid", "namespace", "pod_name", "pool", "project", "department", "user", "priority",
                    "preemptible", "ours", "gpu", "cpu", "memory", "start", "end", "end_reason", "changed_at")
SIZES = (1, 1, 2, 2, 4, 8)


def _users(projects: list[Project]) -> dict[str, list[str]]:
    users: dict[str, list[str]] = {project.name: [] for project in projects}
    for project, name in ProjectMember.objects.filter(kind=ProjectMember.Kind.USER).values_list("project__name",
                                                                                               "name"):
        users.setdefault(project, []).append(name)
    return {project: names or ["demo-user"] for project, names in users.items()}


def generate(now: datetime | None = None, seed: int = 27) -> dict:
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(days=DAYS)
    if UsageInterval.objects.filter(start__lt=now - timedelta(days=1)).exists():
        return {"intervals": 0, "skipped": "history exists"}
    rng = random.Random(seed)
    capacity = dict(NodeMembership.objects.filter(node__status=READY).values("pool__name")
                    .annotate(gpus=Sum("node__gpu_total")).values_list("pool__name", "gpus"))
    projects = list(Project.objects.select_related("department"))
    if not projects:
        return {"intervals": 0, "skipped": "no projects"}
    users = _users(projects)
    quota_projects: dict[str, list[Project]] = {}
    for pool, project_id in Quota.objects.filter(project__isnull=False).values_list("pool__name", "project_id"):
        quota_projects.setdefault(pool, []).extend(p for p in projects if p.pk == project_id)
    intervals, capacities = [], []
    for pool in Pool.objects.order_by("name"):
        gpus = capacity.get(pool.name) or 0
        if not gpus:
            continue
        capacities.append(CapacityInterval(pool=pool.name, gpus=gpus, start=start, end=now, changed_at=now))
        candidates = quota_projects.get(pool.name) or projects
        running: list[tuple[datetime, int]] = []  # (end, GPUs) of the jobs holding the pool's GPUs now
        moment = start
        while moment < now:
            running = [(end, size) for end, size in running if end > moment]
            # Busier in working hours: aim at 35-90 % of the pool; a job starts only where its GPUs are free, so
            # the week never holds more GPUs than the pool has.
            target = gpus * (0.35 + 0.55 * (8 <= moment.hour < 20))
            for _ in range(max(1, round(gpus / 16))):
                size = min(rng.choice(SIZES), gpus)
                if sum(held for _, held in running) + size > target:
                    break
                project = rng.choice(candidates)
                end = min(moment + timedelta(minutes=rng.randint(20, 8 * 60)), now)
                running.append((end, size))
                preemptible = rng.random() < 0.25
                preempted = preemptible and rng.random() < 0.2
                ours = rng.random() < 0.9
                intervals.append((
                    f"demo-{len(intervals)}", project.namespace, f"demo-{project.name}-{len(intervals)}", pool.name,
                    project.name, project.department.name, rng.choice(users[project.name]) if ours else "",
                    Priority.LOW if preemptible else Priority.NORMAL, preemptible, ours, size, size * 8000,
                    size * 64 * 2**30, moment, end, EndReason.PREEMPTED if preempted else EndReason.GONE, now))
            moment += timedelta(minutes=20)
    with transaction.atomic():
        CapacityInterval.objects.bulk_create(capacities, batch_size=5000)
        copy_values(UsageInterval, INTERVAL_COLUMNS, intervals)
    # GPU utilization as the site measures it (OSMO_PROMETHEUS_URL): made up where the demo simulates DCGM
    # (simulated://dcgm, as `manage.py demo` serves it), not measured where no source is set.
    rolled = rollup.run(now=timezone.now(), since=start)
    return {"intervals": len(intervals), "capacity": len(capacities), **rolled}
