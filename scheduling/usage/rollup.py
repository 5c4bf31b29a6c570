"""The hourly rollup (issue 27 point 2), run by beat after each observation: the hours touched since the last
run (from the earlier of the last run's watermark hour and the start of any interval changed since) are
recomputed whole from the intervals and written in one transaction (delete then insert: idempotent, so a
repeated or overlapping run writes the same rows). Retention: intervals ended more than
OSMO_USAGE_INTERVAL_DAYS ago are pruned; hourly rows are kept for ever unless OSMO_USAGE_BUCKET_DAYS > 0."""

import logging
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import BigIntegerField, DecimalField, IntegerField, Min, Q, Sum
from django.db.models.functions import TruncDay
from django.utils import timezone

from pools.models import Quota
from pools.models.bulk import copy_values
from scheduling.models import (
    CapacityInterval,
    EndReason,
    Grain,
    PoolHour,
    ProjectPoolHour,
    RollupState,
    Status,
    UsageHour,
    UsageInterval,
    UsageWatermark,
    Workload,
    WorkloadEvent,
    accounting_names,
)
from scheduling.usage import buckets
from scheduling.usage.buckets import HOUR, Span
from scheduling.usage.source import source
from scheduling.usage.utilization import NAMESPACE, NotMeasured, Source

log = logging.getLogger(__name__)

USAGE_HOUR_FIELDS = ("hour", "pool", "platform", "project", "department", "user", "work_kind",
                     *buckets.Figures.__slots__)
PROJECT_HOUR_FIELDS = ("hour", "pool", "project", "department", "deserved_gpu_seconds", "starved_seconds",
                       "pending_seconds")
INTERVAL_FIELDS = ("pool", "platform", "project", "department", "user", "start", "end", "backend_id", "gpu", "cpu",
                   "memory", "preemptible", "end_reason", "workload", "attempt", "ours", "namespace", "pod_name")


def epoch(moment: datetime) -> float:
    return moment.timestamp()


def moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def run(now: datetime | None = None, since: datetime | None = None, figures: Source | None = None) -> dict:
    """Recompute the touched hours up to `now` (from `since` when given: a backfill); GPU utilization from
    `figures`, else from what OSMO_PROMETHEUS_URL names."""
    now = now or timezone.now()
    with transaction.atomic():
        state, _ = RollupState.objects.select_for_update().get_or_create(id=1)
        starts = []
        if since is not None:
            starts.append(since)
        if state.through is not None:
            starts.append(state.through)
        changed = (UsageInterval.objects.filter(changed_at__gt=state.last_run_at) if state.last_run_at
                   else UsageInterval.objects.all()).aggregate(first=Min("start"))["first"]
        changed_capacity = (CapacityInterval.objects.filter(changed_at__gt=state.last_run_at) if state.last_run_at
                            else CapacityInterval.objects.all()).aggregate(first=Min("start"))["first"]
        starts += [first for first in (changed, changed_capacity) if first is not None]
        if not starts:
            state.last_run_at = now
            state.save()
            return {"hours": 0, "rows": 0}
        first = buckets.hour_floor(epoch(min(starts)))
        last = buckets.hour_floor(epoch(now))
        rows = recompute(first, last, now, figures)
        # Open intervals keep growing: the next run starts again from the hour of the oldest watermark among
        # backends that hold open ones (a silent backend's were closed: its old watermark holds nothing back).
        growing = (set(UsageInterval.objects.filter(end__isnull=True).values_list("backend_id", flat=True).distinct())
                   | set(CapacityInterval.objects.filter(end__isnull=True).values_list("backend_id", flat=True)))
        marks = list(UsageWatermark.objects.filter(backend_id__in=growing).values_list("observed_at", flat=True))
        state.through = moment(buckets.hour_floor(epoch(min(marks)))) if marks else moment(last)
        state.last_run_at = now
        state.save()
    return {"hours": (last - first) // HOUR + 1, "rows": rows}


def _ends(now: datetime) -> dict:
    return {backend: epoch(mark) for backend, mark in UsageWatermark.objects.values_list("backend_id", "observed_at")}


def spans(first: int, last: int, now: datetime) -> list[Span]:
    """The intervals overlapping hours `first` to `last` as spans; an open one ends at its backend's watermark."""
    ends = _ends(now)
    window_start, window_end = moment(first), moment(last + HOUR)
    rows = UsageInterval.objects.filter(start__lt=window_end).filter(
        Q(end__isnull=True) | Q(end__gt=window_start)).values_list(*INTERVAL_FIELDS).iterator(chunk_size=10000)
    found, rows = [], list(rows)
    # Each workload's kind (issue 43), so that reports split by it: one read for the window's workloads.
    kinds = {str(pk): kind for pk, kind in Workload.objects.filter(
        pk__in={row[13] for row in rows if _uuid(row[13])}).values_list("id", "kind")}
    for (pool, platform, project, department, user, start, end, backend, gpu, cpu, memory, preemptible, reason,
         workload, _attempt, ours, namespace, pod_name) in rows:
        stop = epoch(end) if end is not None else ends.get(backend)
        if stop is None:
            continue
        found.append(Span((pool, platform, project, department, user, kinds.get(workload, "")), epoch(start), stop,
                          gpu, cpu, memory,
                          preemptible, reason == EndReason.PREEMPTED,
                          (namespace, pod_name) if ours and gpu else None))
    return found


def _uuid(text: str) -> bool:
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def deserved_gpus() -> tuple[dict, dict]:
    """({(pool, project): deserved GPUs}, {project: department}) from the project quotas as they are now."""
    deserved, departments = {}, {}
    for pool, project, department, gpus in Quota.objects.filter(project__isnull=False).values_list(
            "pool__name", "project__name", "project__department__name", "gpu_deserved"):
        if gpus:
            deserved[(pool, project)] = float(gpus)
            departments[project] = department
    return deserved, departments


def pending(first: int, last: int, now: datetime) -> dict:
    """{(pool, project): [(start, end)]}: when each project had work waiting for each candidate pool, from the
    workload events (a PENDING event until the workload's next event, or now)."""
    window_start, window_end = moment(first), moment(last + HOUR)
    events = (WorkloadEvent.objects.filter(workload__submitted_at__lt=window_end)
              .filter(Q(workload__finished_at__isnull=True) | Q(workload__finished_at__gte=window_start))
              .order_by("workload_id", "at", "id")
              .annotate(**accounting_names("workload__"))
              .values_list("workload_id", "at", "status", "charged_project", "workload__pools"))
    found: dict = defaultdict(list)
    previous = None
    for workload, at, status, project, pools in [*events, (None, now, "", "", [])]:
        if previous and previous[2] == Status.PENDING:
            end = at if workload == previous[0] else now
            for pool in previous[4] or []:
                found[(pool, previous[3])].append((epoch(previous[1]), epoch(end)))
        previous = (workload, at, status, project, pools)
    return found


def capacity(first: int, last: int, now: datetime) -> list[tuple[str, float, float, int]]:
    ends = _ends(now)
    window_start, window_end = moment(first), moment(last + HOUR)
    found = []
    for pool, start, end, backend, gpus in CapacityInterval.objects.filter(start__lt=window_end).filter(
            Q(end__isnull=True) | Q(end__gt=window_start)).values_list("pool", "start", "end", "backend_id", "gpus"):
        stop = epoch(end) if end is not None else ends.get(backend)
        if stop is not None:
            found.append((pool, epoch(start), stop, gpus))
    return found


def utilization(found: list[Span], first: int, last: int, now: datetime, figures: Source | None = None
                ) -> dict[int, dict]:
    """{hour start: {(namespace, pod): percent}} for our GPU pods over the whole hours `first` to `last` that
    have ended: one range query at a 1 h step (OSMO_PROMETHEUS_URL; none when unset). A failure is logged and
    leaves the hours "not measured": it never stops the rollup (a later run over the same hours fills them)."""
    figures = figures or source()
    pods = {span.pod for span in found if span.pod and NAMESPACE.fullmatch(span.pod[0])}
    if figures is None or not pods:
        return {}
    try:
        series = figures.hourly(pods, moment(first), min(moment(last + HOUR), now))
    except NotMeasured as exc:
        log.warning("usage rollup: GPU utilization not measured for %s to %s: %s", moment(first),
                    moment(last + HOUR), exc.message)
        return {}
    by_hour: dict[int, dict] = defaultdict(dict)
    for pod, points in series.items():
        if pod in pods:
            for hour, percent in points.items():
                by_hour[int(hour)][pod] = percent
    return by_hour


def recompute(first: int, last: int, now: datetime, figures: Source | None = None) -> int:
    """Rewrite the hourly rows of hours `first` to `last` (epoch hour starts); returns the rows written."""
    found = spans(first, last, now)
    measured = utilization(found, first, last, now, figures)
    hours = buckets.by_hour(found, first, last)
    deserved, departments = deserved_gpus()
    waiting = pending(first, last, now)
    capacity_spans = capacity(first, last, now)
    usage_rows, project_rows, pool_rows = [], [], []
    current_hour = buckets.hour_floor(epoch(now))
    for hour in range(first, last + HOUR, HOUR):
        at = moment(hour)
        pieces = hours.get(hour, [])
        for key, figures in buckets.hour_figures(pieces, deserved, measured.get(hour)).items():
            usage_rows.append((at, *key, *figures.rounded().values()))
        # Deserved-seconds count the part of the hour that has passed (the current hour grows).
        span_end = min(hour + HOUR, epoch(now))
        seconds = max(0.0, span_end - hour)
        use_by_group: dict = defaultdict(list)
        for piece in pieces:
            use_by_group[(piece.key[0], piece.key[2])].append(piece)
        for group in set(deserved) | {group for group in waiting if group[1]}:
            pending_s, starved_s = buckets.starved_seconds(waiting.get(group, []), use_by_group.get(group, []),
                                                            deserved.get(group, 0.0), hour, span_end)
            deserved_s = deserved.get(group, 0.0) * seconds
            if deserved_s or pending_s:
                project_rows.append((at, group[0], group[1], departments.get(group[1], ""), round(deserved_s),
                                     round(starved_s), round(pending_s)))
        for pool, gpu_seconds in buckets.capacity_seconds(capacity_spans, hour).items():
            pool_rows.append((at, pool, round(gpu_seconds)))
        if hour >= current_hour:
            break
    window = {"grain": Grain.HOUR, "hour__gte": moment(first), "hour__lte": moment(last)}
    UsageHour.objects.filter(**window).delete()
    ProjectPoolHour.objects.filter(**window).delete()
    PoolHour.objects.filter(**window).delete()
    # COPY on PostgreSQL: a model instance per row cost more than the arithmetic.
    written = (copy_values(UsageHour, USAGE_HOUR_FIELDS, usage_rows)
               + copy_values(ProjectPoolHour, PROJECT_HOUR_FIELDS, project_rows)
               + copy_values(PoolHour, ("hour", "pool", "capacity_gpu_seconds"), pool_rows))
    return written + recompute_days(first, last)


DAY = 24 * HOUR
DAY_SUMS = {
    UsageHour: ("pool", "platform", "project", "department", "user", "work_kind"),
    ProjectPoolHour: ("pool", "project", "department"),
    PoolHour: ("pool",),
}


def recompute_days(first: int, last: int) -> int:
    """The daily rows of the UTC days holding hours `first` to `last`, summed from their hourly rows."""
    day_first, day_last = moment(first // DAY * DAY), moment(last // DAY * DAY + DAY)
    written = 0
    for model, keys in DAY_SUMS.items():
        figures = [field.name for field in model._meta.concrete_fields
                   if isinstance(field, BigIntegerField | IntegerField | DecimalField) and not field.primary_key]
        model.objects.filter(grain=Grain.DAY, hour__gte=day_first, hour__lt=day_last).delete()
        rows = (model.objects.filter(grain=Grain.HOUR, hour__gte=day_first, hour__lt=day_last)
                .values(*keys, day=TruncDay("hour", tzinfo=UTC)).annotate(**{name: Sum(name) for name in figures})
                .order_by().values_list("day", *keys, *figures))
        # Read whole before the COPY starts: the connection cannot stream a cursor while it copies.
        written += copy_values(model, ("hour", *keys, *figures, "grain"), [(*row, Grain.DAY) for row in rows])
    return written


def prune(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    intervals = UsageInterval.objects.filter(
        end__lt=now - timedelta(days=settings.OSMO_USAGE_INTERVAL_DAYS)).delete()[0]
    CapacityInterval.objects.filter(end__lt=now - timedelta(days=settings.OSMO_USAGE_INTERVAL_DAYS)).delete()
    hours = 0
    if settings.OSMO_USAGE_BUCKET_DAYS > 0:
        before = now - timedelta(days=settings.OSMO_USAGE_BUCKET_DAYS)
        hours = sum(model.objects.filter(hour__lt=before).delete()[0]  # both grains
                    for model in (UsageHour, ProjectPoolHour, PoolHour))
    return {"intervals": intervals, "hours": hours}
