"""One admission cycle over a snapshot (pure: no Django; docs/researcher/workloads.md, "How admission decides").

The caller loads a `Snapshot` (pools with their quotas and usage, nodes with their free capacity after
earlier reservations, the workloads holding capacity) and the pending workloads; `decide` returns what to
admit where, what to preempt, and for everything left pending one reason per candidate pool and its
position in each pool's queue. Each admission is added to the snapshot before the next workload is
checked, so one cycle can never admit beyond a quota or a node (Kueue's rule against over-admission).

Amounts are (GPU, CPU, memory) triples: GPUs in hundredths (as the quotas count them), CPU in
millicores, memory in bytes. A quota's deserved of None for a resource means "not set": CPU and memory
quotas are enforced only where set; GPUs are always (no row deserves 0). A reason's `details` keep these units
inside; `Reason.as_dict`, the only way out, shows them in the API's (GPUs, CPU cores, memory bytes).

A gang of several workloads (an OSMO task group whose tasks differ: `Workload.gang`, one workload per part) is one
decision, taken at the place of its first member in the order: all members are admitted to one pool or none is.
In each candidate pool the members are checked and placed one after another, each tentatively charged to the
snapshot as a single admission is; when one does not fit, every charge of the members placed before it is undone,
so a later workload of the same cycle sees the snapshot as it was. A gang short of a member in the queue waits
whole. A gang within its guarantee that is short of capacity reclaims as a single workload does, the victims
chosen so that every member fits at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

Amounts = tuple[int, int, int]
ZERO: Amounts = (0, 0, 0)
UNSET = (None, None, None)
NAMES = ("GPUs", "CPU", "memory")
NO_LIMIT = -1
GPU_TYPE_FIELD = "gpu_type"  # the request's field, as messages name it (`hints.for_door` words it per door)


class Code(StrEnum):
    QUOTA = "QUOTA"  # non-preemptible over deserved
    LIMIT = "LIMIT"
    NO_OVER_QUOTA = "NO_OVER_QUOTA"  # preemptible, over deserved, weight None
    CAPACITY = "CAPACITY"
    GANG = "GANG"  # fits some replicas, not all
    RECLAIMING = "RECLAIMING"
    MAINTENANCE = "MAINTENANCE"
    OFFLINE = "OFFLINE"
    ENGINE = "ENGINE"  # dispatched to a backend whose own engine (KAI, Kueue) queues it: the engine's reason


def add(a: Amounts, b: Amounts) -> Amounts:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def sub(a: Amounts, b: Amounts) -> Amounts:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def times(a: Amounts, n: int) -> Amounts:
    return (a[0] * n, a[1] * n, a[2] * n)


def fits(need: Amounts, free: Amounts) -> bool:
    return need[0] <= free[0] and need[1] <= free[1] and need[2] <= free[2]


def shown(index: int, amount: int | None) -> int | float | None:
    """An amount in the API's unit: GPUs (from hundredths), CPU cores (from millicores), memory bytes. None (not
    set) and negative amounts (a limit of -1: none) are left as they are."""
    if amount is None or amount < 0 or index == 2:
        return amount
    value = amount / (100 if index == 0 else 1000)
    return int(value) if value == int(value) else value


def short_product(product: str) -> str:
    """"NVIDIA-H100-80GB-HBM3" as "H100": the model word the messages name."""
    for word in product.replace("_", "-").split("-"):
        if word[:1].isalpha() and any(c.isdigit() for c in word):
            return word
    return product


def gpu_names(product: str, label: str = "") -> frozenset[str]:
    """The GPU types a node answers to, lower-cased: its product (nvidia.com/gpu.product, "NVIDIA-H100-80GB-HBM3"),
    that product's model word ("h100"), and the value of the gpuctl pool file's `<prefix>gpu-type` label."""
    return frozenset(name.lower() for name in (product, short_product(product) if product else "", label) if name)


def gpu_type(products: Mapping[str, int] | Iterable[str]) -> str:
    """The GPU type a platform's nodes carry, as the messages name it ("H100"): the model word of each product
    (nvidia.com/gpu.product), the most common first, "/" between several ("H100/A100"); "" for none."""
    counts: Counter[str] = Counter()
    items = products.items() if isinstance(products, Mapping) else ((p, 1) for p in products)
    for product, n in items:
        if product:
            counts[short_product(product)] += n
    return "/".join(name for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def show(index: int, amount: int) -> str:
    """A figure as the messages print it: GPUs whole where they are, CPU in cores, memory in GiB."""
    if index == 0:
        gpus = amount / 100
        return f"{gpus:g}"
    if index == 1:
        return f"{amount / 1000:g}"
    return f"{amount / 1024 ** 3:.3g}Gi"


@dataclass(slots=True)
class Quota:
    """A project's or department's quota in one pool. `deserved` entries of None are not enforced."""

    deserved: tuple[int | None, int | None, int | None] = (0, None, None)
    limit: Amounts = (NO_LIMIT, NO_LIMIT, NO_LIMIT)
    weight: tuple[int | None, int | None, int | None] = (2, 2, 2)
    used: Amounts = ZERO  # everything allocated or reserved
    used_guaranteed: Amounts = ZERO  # the non-preemptible part
    fair_share: int | None = None  # GPUs (hundredths), for reclaim


@dataclass(slots=True)
class Node:
    key: str  # unique across backends, e.g. "backend/node"
    name: str
    free: Amounts
    gpu_names: frozenset[str] = frozenset()  # the GPU types it answers to (`gpu_names`)


@dataclass(slots=True)
class Pool:
    name: str
    status: str = "ONLINE"  # ONLINE, OFFLINE, MAINTENANCE, or ENGINE for KAI/Kueue backends
    spread: bool = False
    gpu_types: dict[str, str] = field(default_factory=dict)  # platform -> its GPU type, as `gpu_type` names it
    platforms: dict[str, list[Node]] = field(default_factory=dict)  # Ready, schedulable nodes per platform
    projects: dict[str, Quota] = field(default_factory=dict)
    departments: dict[str, Quota] = field(default_factory=dict)
    engine: str = ""  # the engine's name when status is ENGINE ("KAI Scheduler", "Kueue")


@dataclass(slots=True)
class Holder:
    """A workload holding capacity in a pool (admitted, or running), as reclaim sees it."""

    id: str
    project: str
    department: str
    pool: str
    per_replica: Amounts
    placement: dict[str, int]  # node key -> replicas
    preemptible: bool
    submitted: float
    preempting: bool = False


@dataclass(slots=True)
class Workload:
    id: str
    project: str
    department: str
    per_replica: Amounts
    replicas: int
    preemptible: bool
    rank: int  # priority: higher first
    submitted: float
    candidates: list[tuple[str, str]]  # (pool, platform), tried in order
    gpu_type: str = ""  # only nodes answering to this GPU type (`gpu_names`); "" any
    gang: str = ""  # the gang's key ("workflow/group") when this is one member of a gang of several; "" none
    gang_size: int = 1  # the members the gang has (in the queue or not)

    @property
    def total(self) -> Amounts:
        return times(self.per_replica, self.replicas)


@dataclass(slots=True)
class Snapshot:
    pools: dict[str, Pool]
    holders: list[Holder] = field(default_factory=list)


@dataclass(slots=True)
class Reason:
    pool: str
    code: Code
    message: str
    details: dict

    def as_dict(self) -> dict:
        """The reason as stored and answered, its details in the API's units."""
        return {"pool": self.pool, "code": self.code.value, "message": self.message,
                "details": shown_details(self.details)}


_QUOTA_FIGURES = ("deserved", "limit", "in_use", "in_use_guaranteed", "requested")
RESOURCE_NAMES = ("gpu", "cpu", "memory")


def shown_details(details: dict) -> dict:
    """A reason's details with every amount in the API's units (`shown`): the quota figures in their
    `resource`'s, `idle_gpus` in GPUs, `per_replica` as [GPUs, CPU cores, memory bytes] and `most_free` by
    resource. The one conversion between admission's units and the API's."""
    result = dict(details)
    if details.get("resource") in RESOURCE_NAMES:
        index = RESOURCE_NAMES.index(details["resource"])
        for key in _QUOTA_FIGURES:
            if key in result:
                result[key] = shown(index, result[key])
    if "idle_gpus" in result:
        result["idle_gpus"] = shown(0, result["idle_gpus"])
    if isinstance(result.get("per_replica"), list | tuple):
        result["per_replica"] = [shown(i, v) for i, v in enumerate(result["per_replica"])]
    if isinstance(result.get("most_free"), dict):
        result["most_free"] = {key: shown(RESOURCE_NAMES.index(key), value) if key in RESOURCE_NAMES else value
                               for key, value in result["most_free"].items()}
    return result


@dataclass(slots=True)
class Admission:
    pool: str
    platform: str
    placement: dict[str, int]  # node name -> replicas; {} when handed to the pool's engine
    engine: str = ""  # the engine that queues and places it (KAI, Kueue), "" for our own admission


@dataclass(slots=True)
class Decision:
    admitted: dict[str, Admission] = field(default_factory=dict)
    reasons: dict[str, list[Reason]] = field(default_factory=dict)
    positions: dict[str, dict[str, int]] = field(default_factory=dict)
    preempt: dict[str, str] = field(default_factory=dict)  # holder id -> why
    order: list[str] = field(default_factory=list)
    classes: dict[str, tuple[bool, int]] = field(default_factory=dict)  # id -> (borrowing, priority rank)


# ---- quota -------------------------------------------------------------------------------------------

def _over(used: Amounts, need: Amounts, bound: Sequence[int | None], skip_negative: bool) -> int | None:
    """The first resource index where used + need exceeds bound (None bounds, and -1 with skip_negative,
    are not enforced); None when within."""
    for i in range(3):
        if need[i] <= 0:
            continue
        b = bound[i]
        if b is None or (skip_negative and b < 0):
            continue
        if used[i] + need[i] > b:
            return i
    return None


DEFAULT_PROJECT = "default"
# The end of a quota refusal in the default project; scheduling.decisions.hints words it for each door.
OTHER_PROJECT_WORDS = "name another project"


def in_default_project(reason: Reason | None, workload: Workload) -> Reason | None:
    """A quota refusal in the `default` project (everyone's) says how to choose another one."""
    if reason is None or workload.project != DEFAULT_PROJECT:
        return reason
    return replace(reason, message=f"{reason.message.rstrip('.')}; or {OTHER_PROJECT_WORDS}.")


def _quota_reason(pool: Pool, platform: str, workload: Workload, idle_gpus: int) -> Reason | None:
    return in_default_project(_project_quota_reason(pool, platform, workload, idle_gpus), workload)


def _project_quota_reason(pool: Pool, platform: str, workload: Workload, idle_gpus: int) -> Reason | None:
    need = workload.total
    units = (("Project", workload.project, pool.projects.get(workload.project) or Quota()),
             ("Department", workload.department, pool.departments.get(workload.department) or Quota(UNSET)))
    for kind, name, quota in units:
        i = _over(quota.used, need, quota.limit, True)
        if i is not None:
            return Reason(pool.name, Code.LIMIT,
                          f"{kind} {name} has reached its limit of {show(i, quota.limit[i])} "
                          f"{_what(pool, platform, i)} in pool {pool.name}: {show(i, quota.used[i])} in use and the "
                          f"workload asks for {show(i, need[i])} more.",
                          _details(kind, name, i, quota, need, idle_gpus))
        if workload.preemptible:
            if any(quota.weight[j] is None for j in range(3) if need[j] > 0):
                i = _over(quota.used, need, quota.deserved, False)
                if i is not None and quota.weight[i] is None:
                    return Reason(pool.name, Code.NO_OVER_QUOTA,
                                  f"{kind} {name} may not go above its {show(i, quota.deserved[i] or 0)} guaranteed "
                                  f"{_what(pool, platform, i)} in pool {pool.name} (over-quota weight None): "
                                  f"{show(i, quota.used[i])} in use, the workload asks for {show(i, need[i])}.",
                                  _details(kind, name, i, quota, need, idle_gpus))
            continue
        i = _over(quota.used_guaranteed, need, quota.deserved, False)
        if i is not None:
            deserved = quota.deserved[i] or 0
            borrow = f"; low priority could borrow {show(0, idle_gpus)} idle GPUs" if i == 0 else \
                "; low priority could borrow idle capacity"
            return Reason(pool.name, Code.QUOTA,
                          f"{kind} {name} has {show(i, quota.used_guaranteed[i])} of {show(i, deserved)} guaranteed "
                          f"{_what(pool, platform, i)} in use in pool {pool.name} and asks for {show(i, need[i])} more"
                          f"{borrow}.",
                          _details(kind, name, i, quota, need, idle_gpus))
    return None


def _what(pool: Pool, platform: str, i: int) -> str:
    """What resource i is called in a message: GPUs by the platform's GPU type ("H100 GPUs")."""
    if i == 0:
        kind = pool.gpu_types.get(platform, "")
        return f"{kind} GPUs" if kind else "GPUs"
    return NAMES[i]


def _details(kind: str, name: str, i: int, quota: Quota, need: Amounts, idle_gpus: int) -> dict:
    return {"unit": kind.lower(), "name": name, "resource": ("gpu", "cpu", "memory")[i],
            "deserved": quota.deserved[i], "limit": quota.limit[i], "in_use": quota.used[i],
            "in_use_guaranteed": quota.used_guaranteed[i], "requested": need[i], "idle_gpus": idle_gpus}


def never_within_deserved(pools: dict[str, Pool], workload: Workload, pool_name: str,
                          platform: str = "") -> Reason | None:
    """A non-preemptible request larger than the project's (or department's) deserved quota in a pool, as
    a reason: it could never be admitted there, whatever else runs."""
    return in_default_project(_never_within(pools, workload, pool_name, platform), workload)


def _never_within(pools: dict[str, Pool], workload: Workload, pool_name: str, platform: str) -> Reason | None:
    pool = pools[pool_name]
    need = workload.total
    for kind, name, quota in (("Project", workload.project, pool.projects.get(workload.project) or Quota()),
                              ("Department", workload.department,
                               pool.departments.get(workload.department) or Quota(UNSET))):
        i = _over(ZERO, need, quota.deserved, False)
        if i is not None:
            return Reason(pool.name, Code.QUOTA,
                          f"{kind} {name} is guaranteed {show(i, quota.deserved[i] or 0)} "
                          f"{_what(pool, platform, i)} in pool {pool.name} and the workload asks for "
                          f"{show(i, need[i])}: non-preemptible work must fit within the guarantee; submit it "
                          "with priority: low to borrow idle capacity.",
                          _details(kind, name, i, quota, need, 0))
    return None


# ---- capacity ----------------------------------------------------------------------------------------

def _place(nodes: list[Node], per: Amounts, replicas: int, spread: bool) -> dict[str, int]:
    """Replicas placed one by one: bin-pack (the fullest node that fits) or spread (the emptiest).
    Returns node key -> replicas; fewer than `replicas` in total when the gang does not fit. Does not
    change the nodes."""
    taken: dict[str, Amounts] = {}  # what is left of the nodes placed on so far (the others: node.free)
    placed: dict[str, int] = {}
    key_index = 0 if per[0] > 0 else (1 if per[1] > 0 else 2)
    need_gpu, need_cpu, need_memory = per
    for _ in range(replicas):
        best, best_room = None, None
        for node in nodes:
            room = taken.get(node.key, node.free) if taken else node.free
            if not (need_gpu <= room[0] and need_cpu <= room[1] and need_memory <= room[2]):  # fits, inlined
                continue
            if best is None or (room[key_index] > best_room[key_index] if spread
                                else room[key_index] < best_room[key_index]):
                best, best_room = node.key, room
        if best is None:
            break
        taken[best] = sub(best_room, per)
        placed[best] = placed.get(best, 0) + 1
    return placed


def nodes_for(pool: Pool, platform: str, workload: Workload) -> list[Node]:
    """The platform's nodes the workload may go to: those of its GPU type, when it names one."""
    nodes = pool.platforms.get(platform, [])
    wanted = workload.gpu_type.lower()
    return [node for node in nodes if wanted in node.gpu_names] if wanted else nodes


def _asked(pool: Pool, platform: str, per: Amounts, free: str = "") -> str:
    """What a replica asks for, in words: "2 free H100 GPUs and 4 CPU" (`free` before the GPUs)."""
    return " and ".join(f"{show(i, per[i])} {free if i == 0 else ''}{_what(pool, platform, 0) if i == 0 else NAMES[i]}"
                        for i in range(3) if per[i] > 0) or "room"


def _capacity_reason(pool: Pool, platform: str, workload: Workload, placed: int) -> Reason:
    nodes = nodes_for(pool, platform, workload)
    per = workload.per_replica
    gpus = _what(pool, platform, 0)
    ask = _asked(pool, platform, per, "free ")
    if not nodes:
        kind = f" of GPU type {workload.gpu_type}" if workload.gpu_type else ""
        return Reason(pool.name, Code.CAPACITY,
                      f"Platform {pool.name}/{platform} has no Ready, schedulable node{kind}.",
                      {"platform": platform, "nodes": 0})
    most = max(nodes, key=lambda node: node.free)
    details = {"platform": platform, "nodes": len(nodes), "per_replica": list(per), "replicas": workload.replicas,
               "placed": placed, "most_free": {"node": most.name, "gpu": most.free[0], "cpu": most.free[1],
                                               "memory": most.free[2]}}
    if placed:
        return Reason(pool.name, Code.GANG,
                      f"Only {placed} of {workload.replicas} replicas fit on platform {pool.name}/{platform} "
                      f"({ask} each); the gang starts whole or not at all.", details)
    return Reason(pool.name, Code.CAPACITY,
                  f"No node of platform {pool.name}/{platform} has {ask} (most free: {show(0, most.free[0])} {gpus} "
                  f"on {most.name}).", details)


def _idle_gpus(pool: Pool) -> int:
    seen: dict[str, int] = {}
    for nodes in pool.platforms.values():
        for node in nodes:
            seen[node.key] = node.free[0]
    return sum(seen.values())


# ---- reclaim -----------------------------------------------------------------------------------------

def _reclaim(snapshot: Snapshot, pool: Pool, parts: list[tuple[str, Workload]]) -> list[Holder] | None:
    """The fewest preemptible holders of projects above their fair share in `pool` whose capacity lets every
    part fit (a workload on its platform; a gang's members, one after another), those already PREEMPTING counted
    first; None when even all of them would not do."""
    on = [nodes_for(pool, platform, workload) for platform, workload in parts]
    nodes = list({node.key: node for found in on for node in found}.values())
    keys = {node.key for node in nodes}
    candidates = [h for h in snapshot.holders
                  if h.pool == pool.name and h.preemptible and any(k in keys for k in h.placement)]
    freed: dict[str, Amounts] = {}

    def release(holder: Holder, sign: int = 1) -> None:
        for key, n in holder.placement.items():
            freed[key] = add(freed.get(key, ZERO), times(holder.per_replica, n * sign))

    def fits_now() -> bool:
        room = {n.key: add(n.free, freed.get(n.key, ZERO)) for n in nodes}
        for (_platform, workload), found in zip(parts, on, strict=True):
            placement = _place([Node(n.key, n.name, room[n.key], n.gpu_names) for n in found], workload.per_replica,
                               workload.replicas, pool.spread)
            if sum(placement.values()) != workload.replicas:
                return False
            for key, n in placement.items():
                room[key] = sub(room[key], times(workload.per_replica, n))
        return True

    for holder in candidates:
        if holder.preempting:
            release(holder)
    if fits_now():
        return []
    used = {name: quota.used[0] for name, quota in pool.projects.items()}

    def above(project: str) -> int:
        # Never below what the project deserves, nor below its fair share: no two projects take turns.
        quota = pool.projects.get(project) or Quota()
        return used.get(project, 0) - max(quota.fair_share or 0, quota.deserved[0] or 0)

    chosen: list[Holder] = []
    remaining = [h for h in candidates if not h.preempting]
    while True:
        eligible = [h for h in remaining if above(h.project) > 0]
        if not eligible:
            return None
        holder = min(eligible, key=lambda h: (-above(h.project), -h.submitted, h.id))
        remaining.remove(holder)
        chosen.append(holder)
        used[holder.project] = used.get(holder.project, 0) - holder.per_replica[0] * sum(holder.placement.values())
        release(holder)
        if fits_now():
            break
    # Drop any victim that turned out not to be needed (the last one chosen always is).
    for holder in chosen[:-1]:
        release(holder, -1)
        if fits_now():
            chosen.remove(holder)
        else:
            release(holder)
    return chosen


# ---- the cycle ---------------------------------------------------------------------------------------

def _borrowing(snapshot: Snapshot, workload: Workload) -> bool:
    """Whether the workload would go above its project's deserved GPUs in its first candidate pool."""
    if not workload.candidates:
        return True
    pool = snapshot.pools.get(workload.candidates[0][0])
    quota = (pool.projects.get(workload.project) if pool else None) or Quota()
    need = workload.total
    return _over(quota.used, need, quota.deserved, False) is not None


def order(snapshot: Snapshot, workloads: Iterable[Workload]) -> list[Workload]:
    """Within-deserved before borrowing, then priority, then submission time (then id, for a total order)."""
    return sorted(workloads, key=lambda w: (_borrowing(snapshot, w), -w.rank, w.submitted, w.id))


def _ordered(snapshot: Snapshot, workloads: Iterable[Workload], decision: Decision) -> list[Workload]:
    """`order`, each workload's class (borrowing, priority rank) kept in the decision: why one sorts before another."""
    keyed = sorted(((_borrowing(snapshot, w), -w.rank, w.submitted, w.id), w) for w in workloads)
    decision.classes = {w.id: (key[0], -key[1]) for key, w in keyed}
    return [w for _, w in keyed]


def _charge(pool: Pool, workload: Workload) -> None:
    need = workload.total
    for quota in (pool.projects.setdefault(workload.project, Quota()),
                  pool.departments.setdefault(workload.department, Quota(UNSET))):
        quota.used = add(quota.used, need)
        if not workload.preemptible:
            quota.used_guaranteed = add(quota.used_guaranteed, need)


def decide(snapshot: Snapshot, workloads: Iterable[Workload]) -> Decision:
    """Admit what fits, in order, each admission charged to the snapshot before the next is checked.
    Mutates the snapshot's quotas, node free capacity and holders."""
    decision = Decision()
    by_key, pools_of = {}, {}  # node key -> the node; -> the pools it is in (whose idle GPUs an admission lowers)
    for pool in snapshot.pools.values():
        for nodes in pool.platforms.values():
            for node in nodes:
                by_key[node.key] = node
                pools_of.setdefault(node.key, set()).add(pool.name)
    queue = _ordered(snapshot, workloads, decision)
    decision.order = [w.id for w in queue]
    idle: dict[str, int] = {}
    gangs: dict[str, list[Workload]] | None = None  # gang key -> its members in the queue, in order; built once
    for workload in queue:
        if workload.gang and workload.gang_size > 1:
            if gangs is None:
                gangs = _gangs(queue)
            members = gangs[workload.gang]
            if members[0] is workload:  # the others were decided with it
                _decide_gang(snapshot, members, workload.gang_size, idle, by_key, pools_of, decision)
            continue
        reasons: list[Reason] = []
        short: list[int] = []  # indexes of reasons where only capacity was missing
        for pool_name, platform in workload.candidates:
            pool = snapshot.pools.get(pool_name)
            if pool is None:
                continue
            if pool.status == Code.ENGINE:
                # The engine owns quota and placement there: hand it over in this order, as it stands.
                decision.admitted[workload.id] = Admission(pool_name, platform, {}, pool.engine)
                break
            if pool.status != "ONLINE":
                reasons.append(_status_reason(pool))
                continue
            if pool_name not in idle:
                idle[pool_name] = _idle_gpus(pool)
            quota_reason = _quota_reason(pool, platform, workload, idle[pool_name])
            if quota_reason is not None:
                reasons.append(quota_reason)
                continue
            placement = _place(nodes_for(pool, platform, workload), workload.per_replica, workload.replicas,
                               pool.spread)
            placed = sum(placement.values())
            if placed == workload.replicas:
                for key, n in placement.items():
                    node = by_key[key]
                    node.free = sub(node.free, times(workload.per_replica, n))
                _charge(pool, workload)
                for key, n in placement.items():  # idle GPUs are the sum of the pools' nodes' free GPUs
                    for name in pools_of[key]:
                        if name in idle:
                            idle[name] -= workload.per_replica[0] * n
                decision.admitted[workload.id] = Admission(pool_name, platform,
                                                           {by_key[k].name: n for k, n in placement.items()})
                break
            short.append(len(reasons))
            reasons.append(_capacity_reason(pool, platform, workload, placed))
        if workload.id in decision.admitted:
            continue
        if not workload.preemptible:
            _try_reclaim(snapshot, workload, reasons, short, decision)
        decision.reasons[workload.id] = reasons
    _positions(decision, queue)
    return decision


# ---- gangs of several workloads ----------------------------------------------------------------------

def _gangs(queue: list[Workload]) -> dict[str, list[Workload]]:
    gangs: dict[str, list[Workload]] = {}
    for workload in queue:
        if workload.gang and workload.gang_size > 1:
            gangs.setdefault(workload.gang, []).append(workload)
    return gangs


def _group(gang: str) -> str:
    """The group a gang key ("workflow/group") names, as the messages say it."""
    return gang.rpartition("/")[2] or gang


def _decide_gang(snapshot: Snapshot, members: list[Workload], size: int, idle: dict[str, int],
                 by_key: dict[str, Node], pools_of: dict[str, set[str]], decision: Decision) -> None:
    """Admit every member of a gang to one pool, or none: the pools in the first member's order, each member on
    its own platform there; the charges of a pool where one member does not fit are undone."""
    first = members[0]
    gang = first.gang
    group = _group(gang)
    reasons: list[Reason] = []
    short: list[int] = []  # indexes of reasons where only capacity was missing
    if len(members) < size:
        details = {"gang": gang, "present": len(members), "size": size}
        message = (f"Waiting for the rest of group {group}: {len(members)} of its {size} parts "
                   f"{'is' if len(members) == 1 else 'are'} in the queue; the group starts whole or not at all.")
        reasons = [Reason(pool_name, Code.GANG, message, dict(details))
                   for pool_name in dict.fromkeys(pool_name for pool_name, _ in first.candidates)]
        for member in members:
            decision.reasons[member.id] = list(reasons)
        return
    platforms_of = []  # per member: pool -> its platform there (its first candidate in that pool)
    for member in members:
        platforms: dict[str, str] = {}
        for pool_name, platform in member.candidates:
            platforms.setdefault(pool_name, platform)
        platforms_of.append(platforms)
    for pool_name in dict.fromkeys(pool_name for pool_name, _ in first.candidates):
        pool = snapshot.pools.get(pool_name)
        if pool is None:
            continue
        missing = next((member for member, platforms in zip(members, platforms_of, strict=True)
                        if pool_name not in platforms), None)
        if missing is not None:
            reasons.append(Reason(pool_name, Code.GANG,
                                  f"Group {group}: one of its parts cannot run in pool {pool_name} (no platform "
                                  "there); the group starts whole or not at all.",
                                  {"gang": gang, "member": missing.id}))
            continue
        if pool.status == Code.ENGINE:
            # The engine owns quota and placement there: hand every member over, as a single workload is.
            for member, platforms in zip(members, platforms_of, strict=True):
                decision.admitted[member.id] = Admission(pool_name, platforms[pool_name], {}, pool.engine)
            return
        if pool.status != "ONLINE":
            reasons.append(_status_reason(pool))
            continue
        reason, capacity = _place_gang(pool, members, [platforms[pool_name] for platforms in platforms_of], idle,
                                       by_key, pools_of, decision)
        if reason is None:
            return
        if capacity:
            short.append(len(reasons))
        reasons.append(reason)
    if short and not any(member.preemptible for member in members):
        _try_reclaim(snapshot, first, reasons, short, decision, who=f"group {group}",
                     parts_in=lambda name: [(platforms[name], member)
                                            for member, platforms in zip(members, platforms_of, strict=True)])
    for member in members:
        decision.reasons[member.id] = list(reasons)


def _place_gang(pool: Pool, members: list[Workload], platforms: list[str], idle: dict[str, int],
                by_key: dict[str, Node], pools_of: dict[str, set[str]], decision: Decision
                ) -> tuple[Reason | None, bool]:
    """Every member placed in `pool` and admitted (None, False), or the reason why not with the snapshot left as
    it was, and whether only capacity was missing (every member within its quotas: reclaim may make room). Each
    member is checked against what those before it tentatively took, as single admissions are."""
    if pool.name not in idle:
        idle[pool.name] = _idle_gpus(pool)
    idle_before = dict(idle)
    nodes_before: list[tuple[Node, Amounts]] = []
    quotas_before: dict[tuple[int, str], tuple[bool, Amounts, Amounts]] = {}  # (0 project | 1 department, name)
    admissions: list[tuple[str, Admission]] = []
    quota_reason = capacity_reason = None
    for member, platform in zip(members, platforms, strict=True):
        # The idle GPUs a refusal offers to borrow are the pool's before the gang: its own charges are undone.
        quota_reason = _quota_reason(pool, platform, member, idle_before[pool.name])
        if quota_reason is not None:
            quota_reason = replace(quota_reason, details={**quota_reason.details, "gang": member.gang,
                                                          "member": member.id})
            break
        for index, units, name in ((0, pool.projects, member.project), (1, pool.departments, member.department)):
            if (index, name) not in quotas_before:
                quota = units.get(name)
                quotas_before[(index, name)] = ((False, ZERO, ZERO) if quota is None
                                                else (True, quota.used, quota.used_guaranteed))
        _charge(pool, member)
        if capacity_reason is not None:  # the rest still checked against their quotas: reclaim needs them within
            continue
        placement = _place(nodes_for(pool, platform, member), member.per_replica, member.replicas, pool.spread)
        placed = sum(placement.values())
        if placed < member.replicas:
            capacity_reason = _gang_capacity_reason(pool, platform, member, placed)
            continue
        for key, n in placement.items():
            node = by_key[key]
            nodes_before.append((node, node.free))
            node.free = sub(node.free, times(member.per_replica, n))
        for key, n in placement.items():
            for name in pools_of[key]:
                if name in idle:
                    idle[name] -= member.per_replica[0] * n
        admissions.append((member.id, Admission(pool.name, platform,
                                                {by_key[k].name: n for k, n in placement.items()})))
    if quota_reason is None and capacity_reason is None:
        decision.admitted.update(admissions)
        return None, False
    for node, free in reversed(nodes_before):
        node.free = free
    for (index, name), (existed, used, used_guaranteed) in quotas_before.items():
        units = pool.projects if index == 0 else pool.departments
        if existed:
            units[name].used, units[name].used_guaranteed = used, used_guaranteed
        else:
            units.pop(name, None)
    idle.clear()
    idle.update(idle_before)
    return quota_reason or capacity_reason, quota_reason is None


def _gang_capacity_reason(pool: Pool, platform: str, member: Workload, placed: int) -> Reason:
    """A member of a gang that does not fit beside the members placed before it: GANG, naming the group."""
    alone = _capacity_reason(pool, platform, member, placed)
    if not alone.details.get("nodes"):
        return replace(alone, details={**alone.details, "gang": member.gang, "member": member.id})
    gpus = _what(pool, platform, 0)
    ask = _asked(pool, platform, member.per_replica)
    most = alone.details["most_free"]
    return Reason(pool.name, Code.GANG,
                  f"Group {_group(member.gang)}: its part of {member.replicas} replica(s) on platform "
                  f"{pool.name}/{platform} does not fit beside the others ({ask} each; {placed} placed; most free: "
                  f"{show(0, most['gpu'])} {gpus} on {most['node']}); the group starts whole or not at all.",
                  {**alone.details, "gang": member.gang, "member": member.id})


def _try_reclaim(snapshot: Snapshot, workload: Workload, reasons: list[Reason], short: list[int],
                 decision: Decision, parts_in=None, who: str = "") -> None:
    """Within its guarantee but short of capacity in some pools: reclaim in the first of them where
    preempting borrowed work would make room. `parts_in(pool)`: a gang's members on their platforms there (else the
    workload on the reason's platform); `who`: what the preempted are told reclaims (else the workload)."""
    for index in short:
        pool = snapshot.pools[reasons[index].pool]
        platform = reasons[index].details.get("platform", "")
        parts = parts_in(pool.name) if parts_in else [(platform, workload)]
        victims = _reclaim(snapshot, pool, parts)
        if victims is None:
            continue
        for victim in victims:
            victim.preempting = True
            decision.preempt[victim.id] = (
                f"Preempted in pool {pool.name}: project {workload.project} reclaims capacity it is guaranteed "
                f"for {who or f'workload {workload.id}'}.")
        waiting = [h.id for h in snapshot.holders if h.preempting and h.pool == pool.name]
        gpus = sum(v.per_replica[0] * sum(v.placement.values()) for v in victims)
        reasons[index] = Reason(
            pool.name, Code.RECLAIMING,
            f"Reclaiming borrowed capacity in pool {pool.name} from {len(waiting)} low-priority workload(s) of "
            "projects above their fair share" + (f" ({show(0, gpus)} GPUs newly preempted)" if victims else "")
            + "; admitted once it is free.",
            {"platform": parts[0][0], "preempting": waiting})
        return


def _status_reason(pool: Pool) -> Reason:
    if pool.status == "MAINTENANCE":
        return Reason(pool.name, Code.MAINTENANCE, f"Pool {pool.name} is in maintenance; queued work waits until "
                                                   "it ends.", {})
    return Reason(pool.name, Code.OFFLINE, f"Pool {pool.name}'s cluster has not reported recently; nothing is "
                                           "admitted there until it does.", {})


def _positions(decision: Decision, queue: list[Workload]) -> None:
    counters: dict[str, int] = {}
    for workload in queue:
        if workload.id in decision.admitted:
            continue
        positions = {}
        for pool_name, _ in workload.candidates:
            counters[pool_name] = counters.get(pool_name, 0) + 1
            positions[pool_name] = counters[pool_name]
        decision.positions[workload.id] = positions


def never_fits(snapshot: Snapshot, workload: Workload, pool_name: str, platform: str,
               allocatable: Sequence[Amounts]) -> Reason | None:
    """Why a workload can never be admitted to (pool, platform), or None: a replica larger than the
    allocatable of every node of the platform, or non-preemptible work above the deserved quota."""
    per = workload.per_replica
    if not any(fits(per, amounts) for amounts in allocatable):
        if allocatable:
            best = max(allocatable)
            pool = snapshot.pools.get(pool_name)
            gpus = _what(pool, platform, 0) if pool is not None else "GPUs"
            message = (f"A replica asks for {show(0, per[0])} {gpus}, {show(1, per[1])} CPU and {show(2, per[2])} "
                       f"memory, more than any node of platform {pool_name}/{platform} has (the largest: "
                       f"{show(0, best[0])} {gpus}, {show(1, best[1])} CPU, {show(2, best[2])}).")
        else:
            message = f"Platform {pool_name}/{platform} has no nodes."
        return Reason(pool_name, Code.CAPACITY, message, {"platform": platform, "never": True})
    if not workload.preemptible:
        return never_within_deserved(snapshot.pools, workload, pool_name, platform)
    return None
