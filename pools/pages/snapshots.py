"""Usage history for the charts: the points of each pool's chart, read from the UsageSnapshot rows that
`pools.fleet.snapshots.record` stores."""

from collections import defaultdict
from datetime import datetime, timedelta
from typing import NamedTuple

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import Func, IntegerField

from pools.fleet.snapshots import interval
from pools.models import UsageSnapshot

__all__ = ["CHART_HOURS", "Point", "interval", "series"]

CHART_HOURS = 24


class Point(NamedTuple):
    at: float  # seconds since 1970-01-01 UTC (whole seconds from `series`)
    used: int
    free: int
    total: int


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
