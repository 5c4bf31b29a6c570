"""Fair share of a pool's capacity among departments and their projects (docs/concepts.md,
"Departments, projects and quotas").

Run:ai's model with KAI's arithmetic, per pool and per resource, independently. With T the pool's usable
capacity, departments divide T, then each department's fair share is the T that its projects divide, by
the same steps:

1. each sibling wants ``min(demand, limit)`` (demand = allocated + pending; limit -1 = none) and first gets
   ``min(deserved, want)``, even when the siblings' deserved add up to more than T (over-subscribed);
2. what is left is offered in rounds, ``left_at_round_start * weight / sum(weights)`` to each sibling with
   weight > 0 that wants more; a sibling whose unmet want fits in its offer takes all of it, the others take
   their offer rounded down to whole units; rounds stop when one gives nothing;
3. whole units still left go one at a time to the siblings that still want more, by the largest sum of the
   fractions they dropped to rounding, then older first (then by name).

Amounts are integers in each resource's base unit, so the arithmetic is exact: GPUs in hundredths (quotas
have two decimals; a whole unit is 100), CPU in millicores and memory in bytes (a whole unit is 1).
``gpu_hundredths`` and ``gpus`` convert GPU amounts.

What a unit uses splits one way everywhere (``split_use``): the part within its deserved quota is guaranteed,
the part above it borrowed, and the borrowed part is taken from preemptible (low-priority) work first, so that
only the preemptible part of what is borrowed can be reclaimed. Non-preemptible use is also what admission holds
against the deserved quota.

A department's demand is the sum of its projects' allocated + pending, not capped by their limits: the
arithmetic of KAI (which sums the children's requests into the parent queue), so that fair shares shown for
backends scheduled by KAI are the ones KAI computes. A department without a quota row deserves the sum of
its projects' deserved.
"""

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

UNLIMITED = -1
"""A limit of -1: no limit."""


class Weight(enum.IntEnum):
    """Over-quota weights. The weight "None" (never above deserved) is Python's ``None``."""

    LOWEST = 0  # may borrow idle capacity, but gets no over-quota fair share
    LOW = 1
    MEDIUM = 2
    HIGH = 3


class Resource(enum.StrEnum):
    GPU = "gpu"
    CPU = "cpu"
    MEMORY = "memory"

    @property
    def whole_unit(self) -> int:
        """How many base units make the whole unit that over-quota offers are rounded down to."""
        return GPU_WHOLE_UNIT if self is Resource.GPU else 1


GPU_WHOLE_UNIT = 100
"""GPU amounts are hundredths of a GPU; offers are rounded down to whole GPUs."""


def gpu_hundredths(gpus: Decimal | int | str) -> int:
    """``Decimal("1.25")`` GPUs -> 125. Refuses more than two decimals rather than rounding them away."""
    try:
        hundredths = Decimal(gpus) * GPU_WHOLE_UNIT
    except InvalidOperation:
        raise ValueError(f"{gpus!r} is not a number of GPUs") from None
    if not hundredths.is_finite() or hundredths != hundredths.to_integral_value():
        raise ValueError(f"{gpus!r} GPUs: GPU amounts take at most two decimals")
    return int(hundredths)


def gpus(hundredths: int) -> Decimal:
    """125 hundredths -> ``Decimal("1.25")`` GPUs."""
    return Decimal(hundredths) / GPU_WHOLE_UNIT


@dataclass(frozen=True, slots=True)
class UseSplit:
    """A unit's use of one resource, split by its deserved quota (base units)."""

    guaranteed: int  # within deserved
    borrowed: int  # above deserved
    reclaimable: int  # the preemptible part of what is borrowed
    non_preemptible: int  # what counts against deserved at admission


def split_use(allocated: int, preemptible: int, deserved: int | None) -> UseSplit:
    """The one split of use into guaranteed and borrowed (docs/architecture/decisions.md, "Usage by priority"):
    ``allocated`` is everything the unit uses, ``preemptible`` the part of it in pods of our low-priority
    workloads (pods we did not submit are never preemptible), ``deserved`` None counts as 0. What is above
    deserved is borrowed, preemptible work first; guaranteed + borrowed is always allocated."""
    preemptible = min(max(preemptible, 0), allocated)
    borrowed = max(0, allocated - (deserved or 0))
    return UseSplit(allocated - borrowed, borrowed, min(preemptible, borrowed), allocated - preemptible)


# ---- input --------------------------------------------------------------------------------------------


def _check_quota(kind: str, name: str, deserved: int | None, limit: int, weight: int | None) -> None:
    if deserved is not None and deserved < 0:
        raise ValueError(f"{kind} {name!r}: deserved {deserved} is negative")
    if limit < UNLIMITED:
        raise ValueError(f"{kind} {name!r}: limit {limit} is neither -1 (none) nor a quantity")
    if weight is not None and weight < 0:
        raise ValueError(f"{kind} {name!r}: over-quota weight {weight} is negative")


@dataclass(frozen=True, slots=True)
class Project:
    """One project's quota and usage in one pool, for one resource, in the resource's base units.

    The defaults are a project without a quota row: deserved 0, no limit, weight Medium.
    ``created_order`` ranks projects by age (smaller is older) for the last whole units. ``preemptible`` is
    the part of ``allocated`` in pods of our low-priority workloads.
    """

    name: str
    deserved: int = 0
    limit: int = UNLIMITED
    weight: int | None = Weight.MEDIUM
    allocated: int = 0
    pending: int = 0
    created_order: int = 0
    preemptible: int = 0

    def __post_init__(self) -> None:
        _check_quota("project", self.name, self.deserved, self.limit, self.weight)
        if self.allocated < 0 or self.pending < 0:
            raise ValueError(f"project {self.name!r}: allocated and pending cannot be negative")
        if not 0 <= self.preemptible <= self.allocated:
            raise ValueError(f"project {self.name!r}: the preemptible part must be between 0 and allocated")

    @property
    def demand(self) -> int:
        return self.allocated + self.pending


@dataclass(frozen=True, slots=True)
class Department:
    """One department's quota in one pool, for one resource, and its projects.

    ``deserved=None`` is a department without a quota row for the pool and resource: it deserves the sum of
    its projects' deserved. Usage is its projects'.
    """

    name: str
    projects: Sequence[Project] = ()
    deserved: int | None = None
    limit: int = UNLIMITED
    weight: int | None = Weight.MEDIUM
    created_order: int = 0

    def __post_init__(self) -> None:
        _check_quota("department", self.name, self.deserved, self.limit, self.weight)

    @property
    def effective_deserved(self) -> int:
        if self.deserved is None:
            return sum(project.deserved for project in self.projects)
        return self.deserved


@dataclass(frozen=True, slots=True)
class PoolQuotas:
    """Everything fair share needs for one pool: per resource, the usable capacity (the allocatable of the
    pool's Ready, schedulable nodes) and the departments. A resource missing from either counts as none."""

    name: str
    capacity: Mapping[Resource, int]
    departments: Mapping[Resource, Sequence[Department]]


# ---- output -------------------------------------------------------------------------------------------
# Not frozen: a frozen dataclass is about ten times slower to build, and a computation builds one Share per
# project, pool and resource.


@dataclass(slots=True)
class Share:
    """A department's or a project's fair share of one resource in one pool (base units)."""

    name: str
    deserved: int
    demand: int  # allocated + pending
    want: int  # demand capped by the limit
    fair_share: int
    allocated: int
    over_quota: int  # allocated above deserved (0 when within it): borrowed, `split_use`
    allocated_non_preemptible: int  # the part of allocated that counts against deserved at admission
    reclaimable: int  # the preemptible part of over_quota


@dataclass(slots=True)
class DepartmentShare(Share):
    projects: dict[str, Share]
    over_subscribed_by: int  # the projects' deserved above the department's (0 when within it)


@dataclass(slots=True)
class ResourceShares:
    """The fair shares of one resource in one pool."""

    resource: Resource
    capacity: int
    over_subscribed_by: int  # the departments' deserved above the capacity (0 when within it)
    departments: dict[str, DepartmentShare]

    @property
    def unassigned(self) -> int:
        """Capacity left out of every department's fair share (0 when over-subscribed)."""
        return max(0, self.capacity - sum(share.fair_share for share in self.departments.values()))


# ---- computation --------------------------------------------------------------------------------------


def _divide(
    capacity: int,
    deserved: Sequence[int],
    want: Sequence[int],
    weight: Sequence[int],
    siblings: Sequence[Project] | Sequence[Department],
    whole_unit: int,
) -> list[int]:
    """The fair shares of siblings dividing ``capacity`` (steps 2 to 4 of the algorithm in docs/concepts.md).

    ``weight`` is 0 for weights Lowest and None, which never take part in the over-quota rounds;
    ``siblings`` are read only for their age (then name) when the last whole units tie.
    """
    shares = [d if d < w else w for d, w in zip(deserved, want, strict=True)]
    remaining = capacity - sum(shares)
    if remaining <= 0:
        return shares
    eligible = [i for i, w in enumerate(weight) if w > 0 and want[i] > shares[i]]
    # The fractions dropped to rounding, summed over rounds, as numerators over one common denominator
    # (the lcm of every round's denominator so far) so that ties compare exactly.
    dropped: dict[int, int] = {}
    common_denominator = 1
    while eligible and remaining > 0:
        total_weight = sum(weight[i] for i in eligible)
        denominator = total_weight * whole_unit
        if common_denominator % denominator:
            grown = math.lcm(common_denominator, denominator)
            scale = grown // common_denominator
            for i in dropped:
                dropped[i] *= scale
            common_denominator = grown
        to_common = common_denominator // denominator
        at_round_start = remaining
        unmet_after_round = []
        for i in eligible:
            unmet = want[i] - shares[i]
            offer_numerator = at_round_start * weight[i]  # the offer is offer_numerator / total_weight
            if unmet * total_weight <= offer_numerator:
                shares[i] += unmet
                remaining -= unmet
                continue
            taken = offer_numerator // denominator * whole_unit
            if taken:
                shares[i] += taken
                remaining -= taken
            fraction = offer_numerator - taken * total_weight  # over `denominator`, in whole units
            if fraction:
                dropped[i] = dropped.get(i, 0) + fraction * to_common
            unmet_after_round.append(i)
        eligible = unmet_after_round
        if remaining == at_round_start:
            break
    if remaining < whole_unit or not eligible:
        return shares
    order = sorted(eligible, key=lambda i: (-dropped.get(i, 0), siblings[i].created_order, siblings[i].name))
    while remaining >= whole_unit and order:
        still_unmet = []
        for i in order:
            if remaining < whole_unit:
                break
            unmet = want[i] - shares[i]
            given = unmet if unmet < whole_unit else whole_unit
            shares[i] += given
            remaining -= given
            if unmet > given:
                still_unmet.append(i)
        order = still_unmet
    return shares


def _capped(demand: int, limit: int) -> int:
    return demand if limit < 0 or demand < limit else limit


def fair_shares(capacity: int, departments: Sequence[Department], whole_unit: int = 1) -> dict[str, DepartmentShare]:
    """The fair shares of one resource in one pool: departments divide ``capacity``, then each department's
    fair share is divided among its projects. Amounts in base units; ``whole_unit`` is the resource's (100
    for GPU hundredths, 1 for millicores and bytes: see ``Resource.whole_unit``)."""
    if whole_unit < 1:
        raise ValueError(f"whole unit {whole_unit} must be at least 1")
    # Plain lists and comprehensions: this runs for every project of every pool and resource.
    columns = []
    department_deserved = []
    department_demand = []
    department_want = []
    department_allocated = []
    for department in departments:
        projects = department.projects
        deserved = [project.deserved for project in projects]
        allocated = [project.allocated for project in projects]
        splits = [split_use(project.allocated, project.preemptible, project.deserved) for project in projects]
        demand = [project.allocated + project.pending for project in projects]
        want = [
            d if project.limit < 0 or d < project.limit else project.limit
            for project, d in zip(projects, demand, strict=True)
        ]
        columns.append((deserved, allocated, demand, want, splits))
        total_demand = sum(demand)
        department_deserved.append(sum(deserved) if department.deserved is None else department.deserved)
        department_demand.append(total_demand)
        department_want.append(_capped(total_demand, department.limit))
        department_allocated.append(sum(allocated))
    department_fair = _divide(
        capacity,
        department_deserved,
        department_want,
        [department.weight or 0 for department in departments],
        departments,
        whole_unit,
    )
    result: dict[str, DepartmentShare] = {}
    for k, department in enumerate(departments):
        projects = department.projects
        deserved, allocated, demand, want, splits = columns[k]
        fair = _divide(
            department_fair[k], deserved, want, [project.weight or 0 for project in projects], projects, whole_unit
        )
        shares = {
            project.name: Share(project.name, d, dm, w, f, a, u.borrowed, u.non_preemptible, u.reclaimable)
            for project, d, dm, w, f, a, u in zip(projects, deserved, demand, want, fair, allocated, splits,
                                                  strict=True)
        }
        if len(shares) != len(projects):
            raise ValueError(f"department {department.name!r}: two projects have the same name")
        department_total = department_deserved[k]
        used = split_use(department_allocated[k], sum(project.preemptible for project in projects), department_total)
        result[department.name] = DepartmentShare(
            department.name,
            department_total,
            department_demand[k],
            department_want[k],
            department_fair[k],
            department_allocated[k],
            used.borrowed,
            used.non_preemptible,
            used.reclaimable,
            shares,
            max(0, sum(deserved) - department_total),
        )
    if len(result) != len(departments):
        raise ValueError("two departments have the same name")
    return result


def over_subscribed_by(capacity: int, departments: Sequence[Department]) -> int:
    """How far the departments' deserved exceed the capacity (0 when they fit): the "over-subscribed by N"
    figure of a pool, for one resource."""
    return max(0, sum(department.effective_deserved for department in departments) - capacity)


def pool_fair_shares(pool: PoolQuotas) -> dict[Resource, ResourceShares]:
    """The fair shares of one pool, for GPU, CPU and memory, each computed on its own."""
    shares = {}
    for resource in Resource:
        capacity = pool.capacity.get(resource, 0)
        departments = pool.departments.get(resource, ())
        shares[resource] = ResourceShares(
            resource,
            capacity,
            over_subscribed_by(capacity, departments),
            fair_shares(capacity, departments, resource.whole_unit),
        )
    return shares


def fair_shares_by_pool(pools: Iterable[PoolQuotas]) -> dict[str, dict[Resource, ResourceShares]]:
    """The fair shares of many pools, by pool name; pools are independent of one another."""
    result = {}
    for pool in pools:
        if pool.name in result:
            raise ValueError(f"pool {pool.name!r} is given twice")
        result[pool.name] = pool_fair_shares(pool)
    return result


def project_shares(departments: Mapping[str, DepartmentShare]) -> dict[str, Share]:
    """Every project's share, by project name, across departments."""
    return {name: share for department in departments.values() for name, share in department.projects.items()}
