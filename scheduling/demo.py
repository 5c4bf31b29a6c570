"""The demo's trickle (`make demo`, beat every OSMO_DEMO_TRICKLE seconds when it is above 0): a few
submissions from the demo projects each round, half of them to the last pool of the project's default list (a
small one, which fills up), so the workload pages show pending, borrowing and reclaimed work. Admitted work is
dispatched like any other: the simulated cluster runs each Job for one to ten minutes and the sync follows it
to COMPLETED. Where the demo has a pool on a simulated KAI backend (kai-training, `manage.py demo`), each round
also sends it up to two gangs (some bound to one zone or rack, some preferring one), from the projects with a
quota there, which wait in KAI's queues (OverLimit, NonPreemptibleOverQuota, Unschedulable) until they fit.
Never enabled outside the demo.

It submits as the demo's researchers, never as an admin: each submission is made by a user member of its project
(the members the demo's projects name, pools/config/defaults/demo.json: alice, chen, ...), whose account the trickle
creates when missing (no password: nobody signs in as them) with the role DEMO_ROLE, which lets them use every pool.
Only the demo's own projects get its work: a project created since, with no demo researcher in it, is left alone."""

import json
import operator
import random
from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce

from django.contrib.auth import get_user_model
from django.db.models import Q

from pools.config import writes
from pools.config.defaults import DEMO_FILE
from pools.engine import ConfigError
from pools.models import Backend, ConfigKind, Pool, Project, ProjectMember, Quota, Role, RoleAssignment
from scheduling.decisions import admission as pure
from scheduling.models import ALIVE, Source, Status, Workload
from scheduling.run import snapshot
from scheduling.submit import submission

MAX_PENDING = 40  # submit nothing while this many wait
SMALL_POOL_SHARE = 0.5
MAX_BORROWERS = 96  # the reclaim scene's
NAMES = ("pretrain", "finetune", "eval", "sweep", "distill", "sim-rollout", "embed", "rl-policy")
KAI_MAX_ALIVE = 14  # send the KAI pools nothing while this many of their workloads are alive
# (priority, GPUs per replica, replicas, topology: (index into the pool's topology_keys, coarsest first; -1 the
# finest), requirement) for the KAI pools' gangs.
KAI_SHAPES = (
    ("low", 8, 2, (0, "required")),
    ("low", 4, 4, (-1, "required")),
    ("low", 2, 2, None),
    ("normal", 8, 1, None),
    ("normal", 4, 2, (-1, "preferred")),
    ("high", 2, 1, None),
)


@dataclass
class Round:
    submitted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"submitted": len(self.submitted), "refused": len(self.refused)}


DEMO_ROLE = "demo-researcher"
DEMO_ROLE_DOCUMENT = {"name": DEMO_ROLE, "description": "The demo's researchers (scheduling.demo): every pool",
                      "policies": [{"actions": [{"base": "http", "path": "/api/pool/*", "method": "post"}]}]}


def researchers() -> dict[str, list]:
    """{project: [the accounts of its user members]} for the demo's own projects (those of demo.json that exist);
    accounts and their DEMO_ROLE made where missing."""
    names = list(json.loads(DEMO_FILE.read_text())["projects"])
    members: dict[str, list[str]] = {}
    for project, user in (ProjectMember.objects.filter(project__name__in=names, kind=ProjectMember.Kind.USER)
                          .order_by("project__name", "name").values_list("project__name", "name")):
        members.setdefault(project, []).append(user)
    if not members:
        return {}
    if not Role.objects.filter(name=DEMO_ROLE).exists():
        writes.import_document(ConfigKind.ROLE, DEMO_ROLE_DOCUMENT, author="demo",
                               description="The demo's researchers")
    role = Role.objects.get(name=DEMO_ROLE)
    accounts = {}
    for name in sorted({user for users in members.values() for user in users}):
        account, created = get_user_model().objects.get_or_create(username=name)
        if created:
            account.set_unusable_password()
            account.save(update_fields=["password"])
        if not (account.is_active and not account.is_staff):
            continue  # someone made this account an admin or turned it off: not the demo's to act as
        RoleAssignment.objects.get_or_create(user=account, role=role, defaults={"assigned_by": "demo"})
        accounts[name] = account
    return {project: [accounts[user] for user in users if user in accounts] for project, users in members.items()
            if any(user in accounts for user in users)}


def submit_some(rng: random.Random, result: Round, count: int, people: dict[str, list]) -> None:
    if Workload.objects.filter(status=Status.PENDING).exclude(name__startswith="borrow-").count() >= MAX_PENDING:
        return
    projects = {project.name: project.default_node_pools or project.department.default_node_pools
                for project in Project.objects.filter(name__in=people).select_related("department")}
    if not projects:
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
        _submit(rng.choice(people[project]), result, data)


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


def find_scene(snapshot: pure.Snapshot, departments: dict[str, str], fewest: int = 4, most: int = 64,
               projects: frozenset[str] | None = None) -> Scene | None:
    """The pool with the fewest free GPUs (from `fewest` to `most`) that has a borrower and a claimant (among
    `projects`, when given), of two departments where there is such a pool."""
    choices = []
    for pool in snapshot.pools.values():
        free = _free(pool)
        if pool.status != "ONLINE" or not fewest <= sum(free.values()) <= most:
            continue
        # Filling the pool must take it above its deserved quota, or there is nothing to reclaim from it.
        gpus = sum(free.values()) * 100
        borrowers = [name for name, quota in pool.projects.items() if (projects is None or name in projects)
                     and quota.weight[0]
                     and quota.used[0] + gpus > (quota.deserved[0] or 0)
                     and (quota.limit[0] == pure.NO_LIMIT or quota.limit[0] - quota.used[0] >= gpus)]
        claimants = [name for name in pool.projects if (projects is None or name in projects)
                     and _may_claim(pool, name, departments)]
        # Projects of two departments first: fair shares split a pool between departments before projects, so
        # there a borrower that takes every free GPU is clearly above its share.
        choices += [(departments.get(borrower) == departments.get(claimant), sum(free.values()), pool.name, borrower,
                     claimant) for borrower in borrowers for claimant in claimants if claimant != borrower]
    if not choices:
        return None
    *_, name, borrower, claimant = min(choices)
    return Scene(name, borrower, claimant, _free(snapshot.pools[name]))


def _room(pool: pure.Pool, project: str, departments: dict[str, str]) -> int:
    """Whole GPUs of non-preemptible room within the project's and its department's deserved quota."""
    quotas = [q for q in (pool.projects[project], pool.departments.get(departments.get(project, ""))) if q]
    if any(quota.deserved[0] is None for quota in quotas):
        return 0
    return min((quota.deserved[0] - quota.used_guaranteed[0]) // 100 for quota in quotas) if quotas else 0


def _may_claim(pool: pure.Pool, project: str, departments: dict[str, str]) -> bool:
    return _room(pool, project, departments) >= 1


def stage_reclaim(people: dict[str, list], result: Round) -> None:
    """Once per demo database: borrowers for every free GPU of the scene's pool, then, once they are all placed,
    the claimant, on the platform of the first borrower."""
    borrowers = Workload.objects.filter(name__startswith="borrow-")
    # A borrower that no cycle has looked at yet holds the claim back, so that the borrowers are placed first; one
    # a cycle left waiting (the simulation's own work took the GPUs it was submitted for) or queued again (its
    # placement broke) may find no room for long: it must not hold the scene back for ever.
    if Workload.objects.filter(name__startswith="claim-").exists() or borrowers.filter(
            status=Status.PENDING, attempt=1, reasons__0__code="SUBMITTED").exists():
        return  # done, or the next cycle places the borrowers first
    loaded = snapshot.load()
    departments = dict(Project.objects.values_list("name", "department__name"))
    first = borrowers.select_related("project").order_by("name").first()
    if first is None:
        scene = find_scene(loaded.snapshot, departments, projects=frozenset(people))
    else:
        pool = loaded.snapshot.pools.get(first.pools[0])
        claimants = sorted((departments.get(name) == departments.get(first.project.name), name)
                           for name in pool.projects if name != first.project.name
                           and name in people and _may_claim(pool, name, departments)) if pool else []
        claimant = claimants[0][1] if claimants else ""
        scene = Scene(first.pools[0], first.project.name, claimant, _free(pool) if pool else {})
    if scene is None or not scene.claimant or scene.borrower not in people:
        return
    count = borrowers.count()
    # Filled once; the claim follows as soon as the borrowers are placed, before their Jobs finish and free
    # GPUs again (the simulated cluster runs each for a minute or more).
    if not count:
        for platform, gpus in scene.free.items():
            for _ in range(min(gpus, MAX_BORROWERS - count)):
                _submit(people[scene.borrower][0], result, {"name": f"borrow-{count:02d}", "project": scene.borrower,
                                        "pools": [scene.pool], "platform": platform, "priority": "low",
                                        "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}})
                count += 1
        return
    # A gang of one-GPU replicas, half of what its quota has room for: more than the GPUs the simulated fleet's own
    # churn frees between two rounds, so the claim needs the borrowers' GPUs back; half, so that the claimant's own
    # work submitted meanwhile does not take it above its guarantee (where it would wait, and reclaim nothing).
    replicas = max(1, min(count, (_room(pool, scene.claimant, departments) if pool else 2) // 2))
    _submit(people[scene.claimant][0], result, {"name": "claim-00", "project": scene.claimant, "pools": [scene.pool],
                            "platform": first.templates[scene.pool]["platform"], "priority": "normal",
                            "replicas": replicas, "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}})


def submit_kai(rng: random.Random, result: Round, count: int | None = None,
               people: dict[str, list] | None = None) -> None:
    """Up to `count` (else none to two) gangs to the pools of simulated KAI backends, from projects with a quota
    there; draws nothing from `rng` where there is no such pool, so the rest of the demo goes as without them."""
    pools = list(Pool.objects.filter(backend__kind=Backend.Kind.SIMULATED, backend__scheduler=Backend.Scheduler.KAI)
                 .order_by("name").values_list("name", "topology_keys"))
    if not pools:
        return
    people = researchers() if people is None else people
    names = [name for name, _ in pools]
    alive = Workload.objects.filter(reduce(operator.or_, (Q(pools=[name]) for name in names)),
                                    status__in=ALIVE).count()
    if not people or alive >= KAI_MAX_ALIVE:
        return
    count = rng.randint(0, 2) if count is None else count
    members: dict[str, list[str]] = {}
    for pool, project in (Quota.objects.filter(pool__name__in=names, project__isnull=False)
                          .filter(project__name__in=people).exclude(project__pool__isnull=False)
                          .values_list("pool__name", "project__name")):
        members.setdefault(pool, []).append(project)
    for _ in range(min(count, KAI_MAX_ALIVE - alive)):
        pool, keys = rng.choice(pools)
        if not members.get(pool):
            continue
        priority, gpus, replicas, topology = rng.choice(KAI_SHAPES)
        data = {"name": f"{rng.choice(NAMES)}-{rng.randrange(1000):03d}", "project": rng.choice(sorted(members[pool])),
                "pools": [pool], "priority": priority, "replicas": replicas,
                "resources": {"gpu": gpus, "cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi"}}
        if topology and keys:
            index, requirement = topology
            data["topology"] = [{"key": keys[index]["key"], "requirement": requirement}]
        _submit(rng.choice(people[data["project"]]), result, data)


def _submit(user, result: Round, data: dict) -> None:
    data = {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"], **data}
    try:
        submitted = submission.submit(user, data, source=Source.API)
    except (ConfigError, submission.SubmissionRefused) as exc:
        result.refused.append(f"{data['name']}: {exc}")
        return
    result.submitted.append(str(submitted.workload.id))


def trickle(rng: random.Random | None = None, now: datetime | None = None, count: int | None = None) -> Round:
    rng = rng or random.Random()
    result = Round()
    people = researchers()
    if people:
        stage_reclaim(people, result)
        submit_some(rng, result, rng.randint(1, 3) if count is None else count, people)
        submit_kai(rng, result, count, people)
    return result
