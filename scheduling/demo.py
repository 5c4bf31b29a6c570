"""The demo's trickle (`make demo`, beat every OSMO_DEMO_TRICKLE seconds when it is above 0): a few
submissions from the demo projects each round, half of them to the last pool of the project's default list (a
small one, which fills up), so the workload pages show pending, borrowing and reclaimed work; and a stand-in for
dispatch until it exists: an ADMITTED workload "runs" for one to five minutes and completes, a PREEMPTING one is
stopped at once (FAILED_PREEMPTED). Both say in their event that the demo did it. Never enabled outside the
demo."""

import random
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from pools.engine import ConfigError
from pools.models import Project

from . import admission as pure
from . import snapshot, submission
from .models import Source, Status, Workload, WorkloadEvent
from .outbox import request_cycle

MAX_PENDING = 40  # submit nothing while this many wait
SMALL_POOL_SHARE = 0.5
MAX_BORROWERS = 96  # the reclaim scene's
NAMES = ("pretrain", "finetune", "eval", "sweep", "distill", "sim-rollout", "embed", "rl-policy")


@dataclass
class Round:
    submitted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    finished: int = 0
    stopped: int = 0

    def summary(self) -> dict:
        return {"submitted": len(self.submitted), "refused": len(self.refused), "finished": self.finished,
                "stopped": self.stopped}


def run_seconds(name: str) -> int:
    """How long a demo workload "runs": one to five minutes, fixed by its name."""
    return 60 + zlib.crc32(name.encode()) % 240


def finish(now: datetime, result: Round) -> None:
    for workload in Workload.objects.filter(status=Status.ADMITTED, admitted_at__isnull=False).only(
            "id", "name", "admitted_at"):
        if workload.admitted_at + timedelta(seconds=run_seconds(workload.name)) <= now:
            result.finished += _end(workload.pk, Status.ADMITTED, Status.COMPLETED, "DEMO_FINISHED", now,
                                    "The demo's stand-in for dispatch ran it and it completed.")
    for workload in Workload.objects.filter(status=Status.PREEMPTING).only("id"):
        result.stopped += _end(workload.pk, Status.PREEMPTING, Status.FAILED_PREEMPTED, "DEMO_PREEMPTED", now,
                               "The demo's stand-in for dispatch stopped it to return borrowed capacity.")


def _end(pk, before: str, status: str, reason: str, now: datetime, message: str) -> int:
    with transaction.atomic():
        changed = Workload.objects.filter(pk=pk, status=before).update(status=status, finished_at=now,
                                                                       updated_at=now)
        if changed:
            WorkloadEvent.objects.create(workload_id=pk, at=now, status=status, reason=reason, message=message)
            transaction.on_commit(request_cycle)
    return changed


def submit_some(rng: random.Random, result: Round, count: int) -> None:
    if Workload.objects.filter(status=Status.PENDING).exclude(name__startswith="borrow-").count() >= MAX_PENDING:
        return
    admin = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
    projects = {project.name: project.default_node_pools or project.department.default_node_pools
                for project in Project.objects.exclude(name=Project.DEFAULT_NAME).select_related("department")}
    if admin is None or not projects:
        return
    for _ in range(count):
        project = rng.choice(sorted(projects))
        defaults = projects[project]
        if defaults and rng.random() < SMALL_POOL_SHARE:
            # The project's last default pool (dev, simulation: the small ones), where big low-priority gangs
            # borrow until it is full and a project within its quota then reclaims.
            priority = rng.choices(["low", "normal"], weights=[7, 3])[0]
            gpus, replicas, pools = (4, 2, defaults[-1:]) if priority == "low" else (2, 1, defaults[-1:])
        else:
            priority = rng.choices(["low", "normal", "high"], weights=[5, 4, 1])[0]
            gpus = rng.choice([1, 2, 4, 8]) if priority != "low" else rng.choice([1, 2, 4, 8, 8])
            replicas, pools = 1, []
        data = {"name": f"{rng.choice(NAMES)}-{rng.randrange(1000):03d}", "project": project,
                "priority": priority, "replicas": replicas,
                "resources": {"gpu": gpus, "cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi"}}
        if pools:
            data["pools"] = pools
        _submit(admin, result, data)


@dataclass
class Scene:
    """Where reclaim can be shown: in `pool`, `borrower` (preemptible work may go above its deserved quota)
    fills every free GPU with one-GPU workloads (the whole pool, so it ends above its fair share); then
    `claimant` (room left within its own and its department's deserved) asks for one GPU at normal priority,
    and the next cycle reclaims one borrower for it."""

    pool: str
    borrower: str
    claimant: str
    free: dict[str, int]  # platform -> free GPUs


def _free(pool: pure.Pool) -> dict[str, int]:
    return {name: sum(node.free[0] // 100 for node in nodes) for name, nodes in pool.platforms.items()}


def find_scene(snapshot: pure.Snapshot, departments: dict[str, str], fewest: int = 4, most: int = 64) -> Scene | None:
    """The pool with the fewest free GPUs (from `fewest` to `most`) that has a borrower and a claimant, of two
    departments where there is such a pool."""
    choices = []
    for pool in snapshot.pools.values():
        free = _free(pool)
        if pool.status != "ONLINE" or not fewest <= sum(free.values()) <= most:
            continue
        # Filling the pool must take it above its deserved quota, or there is nothing to reclaim from it.
        gpus = sum(free.values()) * 100
        borrowers = [name for name, quota in pool.projects.items() if quota.weight[0]
                     and quota.used[0] + gpus > (quota.deserved[0] or 0)
                     and (quota.limit[0] == pure.NO_LIMIT or quota.limit[0] - quota.used[0] >= gpus)]
        claimants = [name for name in pool.projects if _may_claim(pool, name, departments)]
        # Projects of two departments first: fair shares split a pool between departments before projects, so
        # there a borrower that takes every free GPU is clearly above its share.
        choices += [(departments.get(borrower) == departments.get(claimant), sum(free.values()), pool.name, borrower,
                     claimant) for borrower in borrowers for claimant in claimants if claimant != borrower]
    if not choices:
        return None
    *_, name, borrower, claimant = min(choices)
    return Scene(name, borrower, claimant, _free(snapshot.pools[name]))


def _may_claim(pool: pure.Pool, project: str, departments: dict[str, str]) -> bool:
    """Room for a non-preemptible GPU within the project's and its department's deserved quota."""
    quotas = [pool.projects[project], pool.departments.get(departments.get(project, ""))]
    return all(quota is None or (quota.deserved[0] is not None and quota.deserved[0] - quota.used_guaranteed[0] >= 100)
               for quota in quotas)


def stage_reclaim(admin, result: Round) -> None:
    """Once per demo database: borrowers until the scene's pool has no free GPU (topped up each round, as other
    work finishes), then the claimant, on the platform of the first borrower."""
    borrowers = Workload.objects.filter(name__startswith="borrow-")
    if Workload.objects.filter(name__startswith="claim-").exists() or borrowers.filter(status=Status.PENDING).exists():
        return  # done, or the next cycle places the borrowers first
    loaded = snapshot.load()
    departments = dict(Project.objects.values_list("name", "department__name"))
    first = borrowers.select_related("project").order_by("name").first()
    if first is None:
        scene = find_scene(loaded.snapshot, departments)
    else:
        pool = loaded.snapshot.pools.get(first.pools[0])
        claimants = sorted((departments.get(name) == departments.get(first.project.name), name)
                           for name in pool.projects if name != first.project.name
                           and _may_claim(pool, name, departments)) if pool else []
        claimant = claimants[0][1] if claimants else ""
        scene = Scene(first.pools[0], first.project.name, claimant, _free(pool) if pool else {})
    if scene is None or not scene.claimant:
        return
    count = borrowers.count()
    if any(scene.free.values()) and count < MAX_BORROWERS:
        for platform, gpus in scene.free.items():
            for _ in range(gpus):
                _submit(admin, result, {"name": f"borrow-{count:02d}", "project": scene.borrower,
                                        "pools": [scene.pool], "platform": platform, "priority": "low",
                                        "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}})
                count += 1
        return
    _submit(admin, result, {"name": "claim-00", "project": scene.claimant, "pools": [scene.pool],
                            "platform": first.templates[scene.pool]["platform"], "priority": "normal",
                            "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}})


def _submit(admin, result: Round, data: dict) -> None:
    data = {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"], **data}
    try:
        submitted = submission.submit(admin, data, source=Source.API)
    except (ConfigError, submission.SubmissionRefused) as exc:
        result.refused.append(f"{data['name']}: {exc}")
        return
    result.submitted.append(str(submitted.workload.id))


def trickle(rng: random.Random | None = None, now: datetime | None = None, count: int | None = None) -> Round:
    rng = rng or random.Random()
    result = Round()
    finish(now or timezone.now(), result)
    admin = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
    if admin is not None:
        stage_reclaim(admin, result)
    submit_some(rng, result, rng.randint(1, 3) if count is None else count)
    return result
