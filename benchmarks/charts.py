"""Benchmark: the charts fragment of `/` (`HX-Target: pool-charts`), 100 pools with 24 hours of snapshots.

Usage, from the project root (about half a minute):

    .venv/bin/python benchmarks/charts.py [--nodes 5000] [--pools 100] [--requests 30] [--profile] [--pages]
        [--keep]

Builds the fleet of benchmarks/pages.py (its functions, imported) in a scratch database `osmo_bench_charts`
(dropped at the end unless --keep), then times the charts fragment as staff and as the member, each request
alternating between the current code and the baseline, kept below: the algorithm before the charts were
made fast (datetimes fetched for every snapshot, thinned and drawn in Python, the inside of each <svg>
drawn by the template language, one include per chart). Both responses must be identical but for the white
space between tags. "no chart" is the same request with no chart drawn: what no chart code can save. Target:
at most 100 ms median for the fragment, the issue's budget for a request of `/`. --pages then times the
pages of benchmarks/pages.py (its part 1) on the same fleet.
"""

import argparse
import cProfile
import gc
import io
import pstats
import re
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py

bench.BENCH_DB = "osmo_bench_charts"
TARGET_MS = 100  # the budget for every request of `/`
HEADERS = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "pool-charts"}


# ---- baseline: the charts as they were ------------------------------------------------------------------

# One chart as templates/pages/_chart.html drew it, included once per chart (the id was the include's counter;
# here the pool's name, as now, so that the markup can be compared).
OLD_CHART = """{% if chart.empty %}
<p class="chart-empty muted" data-testid="chart-collecting">{{ chart.summary }}</p>
{% else %}
<svg class="gpu-chart" viewBox="0 0 {{ chart.width }} {{ chart.height }}" role="img" \
aria-labelledby="chart-{{ chart_id }}-title" aria-describedby="chart-{{ chart_id }}-summary">
  <title id="chart-{{ chart_id }}-title">{{ chart.title }}</title>
  {% for y, label in chart.y_ticks %}
  <line class="grid" x1="{{ chart.left }}" x2="{{ chart.right }}" y1="{{ y }}" y2="{{ y }}"/>
  <text class="tick" x="{{ chart.tick_left }}" y="{{ y }}" text-anchor="end" dominant-baseline="middle">{{ label }}\
</text>
  {% endfor %}
  {% for d in chart.free_paths %}<path class="free" d="{{ d }}"/>{% endfor %}
  {% for d in chart.used_paths %}<path class="used" d="{{ d }}"/>{% endfor %}
  {% for x, label in chart.x_ticks %}
  <text class="tick" x="{{ x }}" y="{{ chart.tick_baseline }}" text-anchor="middle">{{ label }}</text>
  {% endfor %}
</svg>
<p class="chart-summary" id="chart-{{ chart_id }}-summary">{{ chart.summary }}</p>
{% endif %}"""


def baseline_pool_charts(rows, now):
    from dataclasses import dataclass

    from django.template import engines

    from pools.models import UsageSnapshot
    from pools.pages import formatting, snapshots
    from pools.pages.charts import HEIGHT, LEFT, MAX_POINTS, PLOT_H, PLOT_W, RIGHT, TOP, WIDTH, collecting
    from pools.pages.charts import Chart as NewChart
    from pools.pages.snapshots import CHART_HOURS, Point

    template = engines["django"].from_string(OLD_CHART)

    @dataclass(frozen=True)
    class Chart(NewChart):
        left: int = LEFT
        right: int = WIDTH - RIGHT
        tick_left: int = LEFT - 4
        tick_baseline: int = HEIGHT - 4

        @property
        def html(self):
            return template.render({"chart": self, "chart_id": self.pool})

    def series(pool_names, now, hours=CHART_HOURS):
        points = defaultdict(list)
        query = (UsageSnapshot.objects.filter(pool__name__in=list(pool_names), at__gte=now - timedelta(hours=hours),
                                              at__lte=now)
                 .order_by("pool__name", "at").values_list("pool__name", "at", "gpu_used", "gpu_free", "gpu_total"))
        for name, at, used, free, total in query:
            points[name].append(Point(at, used, free, total))
        return points

    def segments_of(points, gap):
        segments = []
        for point in points:
            if segments and point.at - segments[-1][-1].at <= gap:
                segments[-1].append(point)
            else:
                segments.append([point])
        return segments

    def thin(points, start, span):
        slots = {}
        for point in points:
            slot = int((point.at - start).total_seconds() / span * MAX_POINTS)
            kept = slots.get(slot)
            if kept is None or point.used >= kept.used:
                slots[slot] = point
        return sorted(slots.values(), key=lambda point: point.at)

    def area(xs, ys, base):
        line = " ".join(f"{px},{round(py)}" for px, py in zip(xs, ys, strict=True))
        return f"M{xs[0]},{base} L{line} {xs[-1]},{base}Z"

    def gpu_chart(pool, points, now, interval, hours=CHART_HOURS):
        title = f"{pool}: GPUs used and free, last {hours} hours"
        if len(points) < 2:  # as the current code says it (not timed: no drawing)
            return Chart(pool, title, collecting([Point(p.at.timestamp(), *p[1:]) for p in points], now, interval))
        start = now - timedelta(hours=hours)
        span = (now - start).total_seconds()
        y_max = max(1, *(max(p.total, p.used + p.free) for p in points))

        def x(at: datetime) -> float:
            return LEFT + max(0.0, min(1.0, (at - start).total_seconds() / span)) * PLOT_W

        def y(value: float) -> float:
            return TOP + PLOT_H - value / y_max * PLOT_H

        used_paths, free_paths = [], []
        base = TOP + PLOT_H
        for segment in segments_of(thin(points, start, span), max(3 * interval, timedelta(minutes=15))):
            xs = [round(x(p.at)) for p in segment]
            if len(segment) == 1:
                segment, xs = [segment[0], segment[0]], [xs[0] - 1, xs[0] + 1]
            used_paths.append(area(xs, [y(p.used) for p in segment], base))
            free_paths.append(area(xs, [y(p.used + p.free) for p in segment], base))
        latest = points[-1]
        peak = max(points, key=lambda p: p.used)
        summary = (f"Now {formatting.number(latest.used)} of {formatting.number(latest.total)} GPUs used and "
                   f"{formatting.number(latest.free)} free (at {formatting.absolute(latest.at)}); at most "
                   f"{formatting.number(peak.used)} used in the last {hours} hours.")
        y_ticks = [(f"{y(value):.1f}", formatting.number(value)) for value in sorted({0, y_max // 2, y_max})]
        step = hours // 4 or 1
        x_ticks = [(f"{x(now - timedelta(hours=h)):.1f}", "now" if h == 0 else f"\u2212{h} h")
                   for h in range(hours, -1, -step)]
        return Chart(pool, title, summary, used_paths, free_paths, y_ticks, x_ticks, latest=latest)

    points = series([row["name"] for row in rows], now)
    return [gpu_chart(row["name"], points.get(row["name"], []), now, snapshots.interval()) for row in rows]


def current_pool_charts(rows, now):
    """The current code drawing the baseline's charts (the large ones, with axes). The overview draws a sparkline
    per pool now, which takes less; this keeps the comparison one of equal markup."""
    from pools.pages import charts, snapshots

    points = snapshots.series([row["name"] for row in rows], now)
    return [charts.gpu_chart(row["name"], points.get(row["name"], []), now, snapshots.interval()) for row in rows]


def no_charts(rows, now):
    """The rest of the request (pool rows, the table's listing, the section): what no chart code can save."""
    return []


# ---- measuring -----------------------------------------------------------------------------------------

def markup(body: bytes) -> bytes:
    """The fragment without the white space between tags, which the template and the Python code lay out
    differently and which SVG ignores."""
    return re.sub(rb">\s+<", b"><", body)


def get(client) -> tuple[float, bytes]:
    gc.collect()  # so that no request pays for the garbage of the one before
    start = time.perf_counter()
    response = client.get("/", **HEADERS)
    content = response.content
    seconds = time.perf_counter() - start
    if response.status_code != 200:
        raise SystemExit(f"/ answered {response.status_code}")
    return seconds, content


def compare(users: dict, requests: int) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from pools.pages import views

    current = views.pool_charts
    print(f"\ncharts fragment of / ({requests} requests each, alternating, after 2 warm-ups; target "
          f"{TARGET_MS} ms median)")
    print(f"{'user':<8} {'baseline':>9} {'current':>9} {'ratio':>6} {'no chart':>9} {'queries':>8} {'KiB':>6}  "
          "same markup")
    for who, user in users.items():
        client = Client()
        client.force_login(user)
        times = {"baseline": [], "current": [], "floor": []}
        bodies = {}
        for index in range(requests + 2):
            for name, function in (("baseline", baseline_pool_charts), ("current", current_pool_charts),
                                   ("floor", no_charts)):
                views.pool_charts = function
                try:
                    seconds, bodies[name] = get(client)
                finally:
                    views.pool_charts = current
                if index >= 2:
                    times[name].append(seconds)
        with CaptureQueriesContext(connection) as queries:
            get(client)
        base, now, floor = (statistics.median(times[name]) * 1000 for name in ("baseline", "current", "floor"))
        same = markup(bodies["baseline"]) == markup(bodies["current"])
        print(f"{who:<8} {base:7.1f}ms {now:7.1f}ms {base / now:5.2f}x {floor:7.1f}ms "
              f"{len(queries.captured_queries):>8} {len(bodies['current']) / 1024:6.0f}  {'yes' if same else 'NO'}"
              f"{'' if now <= TARGET_MS else '  OVER'}")
        if not same:
            Path(f"/tmp/charts-{who}-baseline.html").write_bytes(bodies["baseline"])
            Path(f"/tmp/charts-{who}-current.html").write_bytes(bodies["current"])
            raise SystemExit(f"the charts differ from the baseline's (see /tmp/charts-{who}-*.html)")


def profile(user) -> None:
    from django.test import Client

    client = Client()
    client.force_login(user)
    get(client)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(10):
        get(client)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
    print("\ncProfile of 10 charts requests as staff (own time):")
    print("\n".join("   " + line for line in out.getvalue().splitlines()[:120]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the current code")
    parser.add_argument("--pages", action="store_true", help="then time every page of benchmarks/pages.py too")
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    args = parser.parse_args()
    if min(args.nodes, args.requests) < 1 or args.pools < len(bench.TEAMS):
        parser.error("--nodes and --requests must be at least 1, --pools at least 10")

    with bench.scratch_fleet(args.nodes, args.pools, keep=args.keep) as (pools, users):
        compare(users, args.requests)
        if args.pages:
            bench.bench_pages(users, pools, args.requests)
        if args.profile:
            profile(users["staff"])


if __name__ == "__main__":
    main()
