"""Usage history for the charts: beat runs `pools.tasks.record_usage_snapshots`, which stores one
UsageSnapshot per pool (the same sums as the pool table, from `usage.pools_with_usage`) and drops rows
older than the retention."""

from collections import defaultdict
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connections, transaction
from django.db.models import Func, IntegerField
from django.utils import timezone

from pools.fleet.usage import pools_with_usage
from pools.models import UsageSnapshot

CHART_HOURS = 24


class Point(NamedTuple):
    at: float  # seconds since 1970-01-01 UTC (whole seconds from `series`)
    used: int
    free: int
    total: int


def interval() -> timedelta:
    return timedelta(seconds=settings.OSMO_USAGE_SNAPSHOT_INTERVAL)


def record(now: datetime | None = None) -> int:
    """One snapshot per pool; returns how many were written. Idempotent: a second run within half an
    interval of the last one (a redelivered or doubled task) writes nothing."""
    now = now or timezone.now()
    with transaction.atomic():
        if UsageSnapshot.objects.filter(at__gt=now - interval() / 2, at__lte=now).exists():
            return 0
        snapshots = [
            UsageSnapshot(pool=pool, at=now, node_count=pool.node_count, gpu_total=pool.gpu_total,
                          gpu_used=pool.gpu_used, gpu_free=pool.gpu_free, gpu_unhealthy=pool.gpu_unhealthy,
                          cpu_total=pool.cpu_total, cpu_used=pool.cpu_used, memory_total=pool.memory_total,
                          memory_used=pool.memory_used)
            for pool in pools_with_usage()
        ]
        UsageSnapshot.objects.bulk_create(snapshots, batch_size=1000)
        UsageSnapshot.objects.filter(at__lt=now - timedelta(days=settings.OSMO_USAGE_SNAPSHOT_KEEP_DAYS)).delete()
    return len(snapshots)


class Epoch(Func):
    """Whole seconds since 1970-01-01 UTC of a datetime column: a chart needs numbers, and parsing a
    datetime per snapshot was most of the time of a page of 100 charts."""

    template = "CAST(FLOOR(DATE_PART('epoch', %(expressions)s)) AS bigint)"  # UTC whatever the session's zone
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra):
        # Django stores UTC text on SQLite (%% twice: once for this template, once for the query's parameters).
        return super().as_sql(compiler, connection, template="CAST(strftime('%%%%s', %(expressions)s) AS integer)",
                              **extra)


def series(pool_names, now: datetime, hours: int = CHART_HOURS) -> dict[str, list[Point]]:
    """Points of the last `hours` per pool name, oldest first (one query for every pool)."""
    points: dict[str, list[Point]] = defaultdict(list)
    rows = (UsageSnapshot.objects.filter(pool__name__in=list(pool_names), at__gte=now - timedelta(hours=hours),
                                         at__lte=now)
            .order_by().values_list("pool__name", Epoch("at"), "gpu_used", "gpu_free", "gpu_total"))
    try:
        sql, params = rows.query.sql_with_params()
    except EmptyResultSet:  # no pool names
        return points
    # The queryset's SQL on a plain cursor: every value is already what a Point holds, and Django's per-row
    # converters were a third of the time at 14,400 rows.
    with connections[rows.db].cursor() as cursor:
        cursor.execute(sql, params)
        for name, seconds, used, free, total in cursor.fetchall():
            points[name].append(Point(seconds, used, free, total))
    for pool_points in points.values():
        pool_points.sort()  # here rather than in SQL, where it took longer; rows come mostly in order already
    return points
