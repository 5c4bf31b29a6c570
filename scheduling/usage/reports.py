"""Usage reports over the hourly rows (issue 27 points 3 and 4): one statement, whatever the period, joining by
UNION ALL a GROUP BY over `UsageHour` for the use, one over `ProjectPoolHour` for deserved and starved time and
one over `PoolHour` for capacity (a year of hourly rows answers in that one query), and one more for the
chart. The page, the CSV, `GET /api/usage/` and `manage.py usage report` all read `report()`, so they
cannot disagree.

Scoping (`Scope`): staff see every row; anyone else the rows of projects they belong to
(`Project.objects.visible_to`) in pools they may see, and their own rows in those pools; grouped by user, only
their own row. Pods of namespaces of no project ("unattributed") are staff-only. A period is read as the
whole hours it overlaps (the rollup's grain); one longer than DAILY_AFTER as the whole UTC days it overlaps,
read from the daily rows (24 times fewer)."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Case, CharField, DecimalField, F, FloatField, Q, Sum, Value, When
from django.db.models.functions import Cast, Concat, TruncDay, TruncHour

from pools.models import Pool, Project
from pools.models.visibility import access_for
from scheduling.models import Grain, PoolHour, ProjectPoolHour, UsageHour
from scheduling.usage import source
from scheduling.usage.params import Params

GROUP_FIELDS = {"department": "department", "project": "project", "user": "user", "pool": "pool",
                "platform": "platform", "kind": "work_kind"}
CHART_SERIES = 6
CHART_HOURLY = timedelta(days=2)
DAILY_AFTER = timedelta(days=35)  # longer periods read the daily rows
MAX_STEPS = 400
OTHER = "other"
CENT = Decimal("0.01")


def hours_of(seconds) -> Decimal:
    return (Decimal(int(seconds or 0)) / 3600).quantize(CENT, ROUND_HALF_UP)


@dataclass(frozen=True)
class Scope:
    staff: bool
    username: str = ""
    projects: object = None  # a queryset of visible project names (a subquery), None for staff
    pools: object = None  # a queryset of visible pool names, None for staff

    def usage(self, group_by: str) -> Q:
        if self.staff:
            return Q()
        own = Q(user=self.username) if self.username else Q(pk__in=[])
        if group_by == "user":
            return own & Q(pool__in=self.pools)
        return (Q(project__in=self.projects) | own) & Q(pool__in=self.pools)

    def quotas(self) -> Q:
        return Q() if self.staff else Q(project__in=self.projects, pool__in=self.pools)

    def capacity(self) -> Q:
        return Q() if self.staff else Q(pool__in=self.pools)


def scope_for(subject) -> Scope:
    """The scope of a request or a user (None: the CLI, run by operators, sees everything)."""
    if subject is None:
        return Scope(staff=True)
    access = access_for(subject)
    if access.is_staff:
        return Scope(staff=True)
    if not access.signed_in:
        return Scope(staff=False, projects=Project.objects.none().values("name"),
                     pools=Pool.objects.none().values("name"))
    return Scope(staff=False, username=access.user.get_username(),
                 projects=Project.objects.visible_to(access.user).values("name"),
                 pools=access.filter_pools(Pool.objects.all()).values("name"))


@dataclass
class Report:
    params: Params
    rows: list[dict]
    totals: dict
    capacity_hours: Decimal
    chart: dict = field(default_factory=dict)

    @property
    def top(self) -> list[dict]:
        return sorted(self.rows, key=lambda row: (-row["gpu_hours"], row["group"]))[:5]


def daily(params: Params) -> bool:
    return params.end - params.start > DAILY_AFTER


def _window(params: Params) -> Q:
    """Hourly rows of the whole hours the period overlaps; past DAILY_AFTER, daily rows of its whole UTC days."""
    start = params.start.replace(minute=0, second=0, microsecond=0)
    if daily(params):
        return Q(grain=Grain.DAY, hour__gte=start.replace(hour=0), hour__lt=params.end)
    return Q(grain=Grain.HOUR, hour__gte=start, hour__lt=params.end)


def _filters(params: Params) -> Q:
    condition = Q()
    if params.pool:
        condition &= Q(pool=params.pool)
    if params.project:
        condition &= Q(project=params.project)
    return condition


def _group_value(group_by: str):
    if group_by == "platform":
        return Concat("pool", Value("/"), "platform")
    return F(GROUP_FIELDS[group_by])


SUMS = {"gpu": "gpu_seconds", "cpu": "cpu_seconds", "memory": "memory_byte_seconds", "borrowed": "borrowed_seconds",
        "preempted": "preempted_gpu_seconds", "util": "gpu_util_seconds", "measured": "gpu_measured_seconds"}


def _step(params: Params):
    # In UTC whatever TIME_ZONE says: the steps are matched to `steps_of`'s.
    return TruncHour("hour", tzinfo=UTC) if params.end - params.start <= CHART_HOURLY else TruncDay("hour", tzinfo=UTC)


USED, DESERVED, CAPACITY = "u", "q", "c"
QUOTA_SUMS = {"deserved": "deserved_gpu_seconds", "starved": "starved_seconds", "pending": "pending_seconds"}
COLUMNS = (*SUMS, *QUOTA_SUMS, "capacity")


def _shaped(queryset, kind: str, group, sums: dict):
    """One part of the report's statement: per group, every column of COLUMNS (0 where this part has none), so
    the parts line up for UNION ALL."""
    figures = {name: sums.get(name) or Value(0, output_field=DecimalField(max_digits=38, decimal_places=0))
               for name in COLUMNS}
    return queryset.values(kind=Value(kind, output_field=CharField()), group=group).annotate(**figures).order_by()


def _sum(column: str):
    """SUM of a column; memory-byte-seconds in floating point: a month of a large group passes 2**63, which SQLite's
    integer SUM refuses ("integer overflow"; PostgreSQL's is numeric), and GiB-hours need no more than 15 digits."""
    return Sum(Cast(column, FloatField())) if column == "memory_byte_seconds" else Sum(column)


def aggregates(params: Params, scope: Scope):
    """The use per group, the deserved and starved time per group (department, project and pool groupings) and
    the capacity per pool, in one statement (three GROUP BYs joined by UNION ALL): rows of `kind` USED, DESERVED
    or CAPACITY."""
    group_by = params.group_by
    base = UsageHour.objects.filter(_window(params) & _filters(params) & scope.usage(group_by))
    parts = [_shaped(base, USED, _group_value(group_by), {name: _sum(column) for name, column in SUMS.items()})]
    if group_by in ("department", "project", "pool"):
        quota_rows = ProjectPoolHour.objects.filter(_window(params) & _filters(params) & scope.quotas())
        parts.append(_shaped(quota_rows, DESERVED, F(GROUP_FIELDS[group_by]),
                             {name: Sum(column) for name, column in QUOTA_SUMS.items()}))
    pool_filter = Q(pool=params.pool) if params.pool else Q()
    parts.append(_shaped(PoolHour.objects.filter(_window(params) & pool_filter & scope.capacity()), CAPACITY,
                         F("pool"), {"capacity": Sum("capacity_gpu_seconds")}))
    return base, parts[0].union(*parts[1:], all=True)


def report(params: Params, scope: Scope, *, chart: bool = False) -> Report:
    """The table (one statement), and with `chart` the chart's series (a second aggregate: the top groups per
    step)."""
    group_by = params.group_by
    base, statement = aggregates(params, scope)
    used, quotas, capacity = [], {}, {}
    for row in statement:
        if row["kind"] == USED:
            used.append(row)
        elif row["kind"] == DESERVED:
            quotas[row["group"]] = row
        else:
            capacity[row["group"]] = int(row["capacity"] or 0)
    used.sort(key=lambda row: (-(row["gpu"] or 0), row["group"]))
    total_capacity = sum(capacity.values())
    rows = [_row(row["group"], row, quotas.get(row["group"]),
                 _capacity_of(group_by, row["group"], capacity, total_capacity)) for row in used]
    seen = {row["group"] for row in rows}
    for group, quota in quotas.items():  # deserved a share and used none: still a row (it says so)
        if group not in seen:
            rows.append(_row(group, {}, quota, _capacity_of(group_by, group, capacity, total_capacity)))
    totals_row = _totals(rows, total_capacity, bool(quotas) or group_by in ("department", "project", "pool"))
    result = Report(params, rows, totals_row, hours_of(total_capacity))
    if chart:
        result.chart = series(base, params, [row["group"] for row in result.top])
    return result


def _capacity_of(group_by: str, group: str, capacity: dict, total: int) -> int:
    if group_by == "pool":
        return capacity.get(group, 0)
    if group_by == "platform":
        return capacity.get(group.split("/", 1)[0], 0)
    return total


def _percent(part, whole) -> Decimal | None:
    if not whole:
        return None
    return (Decimal(int(part or 0)) * 100 / Decimal(int(whole))).quantize(CENT, ROUND_HALF_UP)


def _utilization(util_seconds, measured_seconds) -> Decimal | None:
    """The GPU-seconds-weighted average utilization (percent) of what was measured; None: not measured."""
    if not measured_seconds:
        return None
    return (Decimal(int(util_seconds or 0)) / Decimal(int(measured_seconds))).quantize(Decimal("0.1"), ROUND_HALF_UP)


def _row(group: str, used: dict, quota: dict | None, capacity_seconds: int) -> dict:
    return {
        "group": group,
        "gpu_hours": hours_of(used.get("gpu")),
        "capacity_share_percent": _percent(used.get("gpu"), capacity_seconds),
        "deserved_hours": hours_of(quota["deserved"]) if quota else None,
        "used_of_deserved_percent": _percent(used.get("gpu"), quota["deserved"]) if quota else None,
        "borrowed_hours": hours_of(used.get("borrowed")),
        "preempted_hours": hours_of(used.get("preempted")),
        "starved_hours": hours_of(quota["starved"]) if quota else None,
        "pending_hours": hours_of(quota["pending"]) if quota else None,
        "cpu_core_hours": hours_of(Decimal(used.get("cpu") or 0) / 1000),
        "memory_gib_hours": hours_of(Decimal(used.get("memory") or 0) / 2**30),
        "gpu_util_percent": _utilization(used.get("util"), used.get("measured")),
        "_gpu_seconds": int(used.get("gpu") or 0),
        "_util_seconds": int(used.get("util") or 0),
        "_measured_seconds": int(used.get("measured") or 0),
        "_deserved_seconds": int(quota["deserved"]) if quota else None,
    }


def _totals(rows: list[dict], capacity_seconds: int, with_quotas: bool) -> dict:
    gpu = sum(row["_gpu_seconds"] for row in rows)
    deserved = sum(row["_deserved_seconds"] or 0 for row in rows)
    totals = {"group": "Total", "gpu_hours": hours_of(gpu), "capacity_share_percent": _percent(gpu, capacity_seconds)}
    for name in ("borrowed_hours", "preempted_hours", "cpu_core_hours", "memory_gib_hours"):
        totals[name] = sum((row[name] for row in rows), Decimal("0.00"))
    for name in ("deserved_hours", "starved_hours", "pending_hours"):
        totals[name] = sum((row[name] or Decimal(0) for row in rows), Decimal("0.00")) if with_quotas else None
    totals["used_of_deserved_percent"] = _percent(gpu, deserved) if with_quotas else None
    totals["gpu_util_percent"] = _utilization(sum(row["_util_seconds"] for row in rows),
                                              sum(row["_measured_seconds"] for row in rows))
    return totals


def steps_of(params: Params) -> list[datetime]:
    """Every step of the period (hours up to two days, else days), so that a quiet step shows as a gap."""
    hourly = params.end - params.start <= CHART_HOURLY
    first = params.start.replace(minute=0, second=0, microsecond=0)
    if not hourly:
        first = first.replace(hour=0)
    size = timedelta(hours=1) if hourly else timedelta(days=1)
    found, moment = [], first
    while moment < params.end and len(found) < MAX_STEPS:
        found.append(moment)
        moment += size
    return found


def series(base, params: Params, groups: list[str]) -> dict:
    """GPU-hours per step for the top groups, the rest summed as "other" by the database (a row per step and
    series, however many groups)."""
    top = groups[:CHART_SERIES]
    named = Case(When(group__in=top, then=F("group")), default=Value(OTHER), output_field=CharField())
    values: dict = defaultdict(lambda: defaultdict(int))
    for row in (base.annotate(group=_group_value(params.group_by)).annotate(step=_step(params), series=named)
                .values("step", "series").annotate(gpu=Sum("gpu_seconds")).order_by()):
        values[row["step"]][row["series"] if row["series"] in top else OTHER] += row["gpu"] or 0
    names = [*top, *([OTHER] if any(OTHER in v for v in values.values()) else [])]
    steps = steps_of(params)
    return {"steps": steps, "names": names,
            "values": [[float(hours_of(values[moment].get(name, 0))) for moment in steps] for name in names]}


def public(row: dict) -> dict:
    return {key: value for key, value in row.items() if not key.startswith("_")}


def moment_text(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def body(result: Report) -> dict:
    """The report as the usage API answers it (`GET /api/usage/`) and `manage.py usage report --format json`
    prints it: rows by GPU hours, most first."""
    params = result.params
    return {
        "group_by": params.group_by,
        "from": moment_text(params.start),
        "to": moment_text(params.end),
        "pool": params.pool or None,
        "project": params.project or None,
        "capacity_hours": result.capacity_hours,
        "gpu_util_percent": result.totals["gpu_util_percent"],
        "gpu_util_source": source.kind(),
        "rows": [public(row) for row in sorted(result.rows, key=lambda row: (-row["gpu_hours"], row["group"]))],
        "totals": public(result.totals),
    }
