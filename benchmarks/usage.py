"""Benchmark: usage accounting (issue 27).

Usage, from the project root (a few minutes at the default sizes; --days 365 is the issue's full year):

    .venv/bin/python benchmarks/usage.py [--days 365] [--pools 100] [--projects 500] [--users 50]
        [--density 0.15] [--requests 10] [--nodes 5000] [--pods 150000] [--keep]

Part 1, reports: a scratch database `osmo_bench_usage` gets --days of hourly rows for --pools x --projects x
--users with realistic sparsity (each project works in two pools with three of its users, each (project, pool,
user) active in a given hour with probability --density; deserved rows for each project's first pool;
capacity rows per pool and hour), written by PostgreSQL itself (INSERT ... SELECT over generate_series). Then
the server time of `/usage/` and `GET /api/usage/` over the whole period, grouped by project and by user, as
staff (median of --requests, through Django's test client), against the baseline measured in the same run:
a plain `SELECT <group>, SUM(gpu_seconds) FROM scheduling_usagehour WHERE hour in the period GROUP BY <group>`
on a connection of its own, over the hourly rows (what reading them directly costs) and over the daily rows
(which reports longer than 35 days read).

Part 2, the beat rollup: --nodes nodes and --pods pods (the sync's rows), observed three times over one hour
(the first picture opens every pod's interval; at 30 minutes a tenth of the pods are replaced; at 60 another
tenth), then the rollup of that hour: time and rows written, against a baseline of PostgreSQL summing the same
intervals' GPU-, CPU- and memory-seconds per pool x platform x project x user in one INSERT ... SELECT (no
borrowed or starved arithmetic). No quota is set, so every project borrows all it uses: the borrowed sweep runs
for every group (the worst case).
"""

import argparse
import logging
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers

bench.BENCH_DB = os.environ.get("OSMO_BENCH_DB", "osmo_bench_usage")  # another name: runs side by side
BASE_DIR = Path(__file__).resolve().parent.parent
END = datetime(2026, 11, 1, tzinfo=UTC)


def setup_django() -> None:
    sys.path.insert(0, str(BASE_DIR))
    os.chdir(BASE_DIR)
    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    from pools.config.defaults import init_defaults

    init_defaults(author="bench")
    logging.disable(logging.INFO)  # one access-log line per timed request would be most of the output
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB}; django {django.get_version()}, "
          f"python {sys.version.split()[0]}, DEBUG off")


def fill_hours(days: int, pools: int, projects: int, users: int, density: float) -> dict:
    from django.db import connection

    hours = days * 24
    start = END - timedelta(hours=hours)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
        cursor.execute("""
            INSERT INTO scheduling_usagehour (grain, hour, pool, platform, project, department, "user", gpu_seconds,
                cpu_seconds, memory_byte_seconds, borrowed_seconds, preempted_gpu_seconds, gpu_util_seconds,
                gpu_measured_seconds)
            SELECT 'h', %s + h * interval '1 hour', 'pool-' || ((p * 7 + k * 13) %% %s), 'h100', 'project-' || p,
                   'dept-' || (p %% 20), 'user-' || ((p * 3 + u) %% %s), g * 3600, g * 3600 * 8000,
                   g::numeric * 3600 * 68719476736, CASE WHEN g > 4 THEN (g - 4) * 3600 ELSE 0 END,
                   CASE WHEN random() < 0.02 THEN g * 1800 ELSE 0 END, g * 3600 * 55, g * 3600
            FROM generate_series(0, %s - 1) h, generate_series(0, %s - 1) p, generate_series(0, 1) k,
                 generate_series(0, 2) u, LATERAL (SELECT 1 + floor(random() * 8)::int + 0 * h AS g) figure
            WHERE random() < %s""", [start, pools, users, hours, projects, density])
        usage_rows = cursor.rowcount
        cursor.execute("""
            INSERT INTO scheduling_projectpoolhour (grain, hour, pool, project, department, deserved_gpu_seconds,
                starved_seconds, pending_seconds)
            SELECT 'h', %s + h * interval '1 hour', 'pool-' || ((p * 7) %% %s), 'project-' || p, 'dept-' || (p %% 20),
                   4 * 3600, CASE WHEN random() < 0.05 THEN 1200 ELSE 0 END, 0
            FROM generate_series(0, %s - 1) h, generate_series(0, %s - 1) p""", [start, pools, hours, projects])
        project_rows = cursor.rowcount
        cursor.execute("""
            INSERT INTO scheduling_poolhour (grain, hour, pool, capacity_gpu_seconds)
            SELECT 'h', %s + h * interval '1 hour', 'pool-' || q, 256 * 3600
            FROM generate_series(0, %s - 1) h, generate_series(0, %s - 1) q""", [start, hours, pools])
        pool_rows = cursor.rowcount
        # The daily rows the rollup keeps beside the hourly ones (reports longer than 35 days read them).
        cursor.execute("""
            INSERT INTO scheduling_usagehour (grain, hour, pool, platform, project, department, "user", gpu_seconds,
                cpu_seconds, memory_byte_seconds, borrowed_seconds, preempted_gpu_seconds, gpu_util_seconds,
                gpu_measured_seconds)
            SELECT 'd', date_trunc('day', hour AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', pool, platform, project,
                   department, "user", SUM(gpu_seconds), SUM(cpu_seconds), SUM(memory_byte_seconds),
                   SUM(borrowed_seconds), SUM(preempted_gpu_seconds), SUM(gpu_util_seconds), SUM(gpu_measured_seconds)
            FROM scheduling_usagehour WHERE grain = 'h' GROUP BY 2, 3, 4, 5, 6, 7""")
        day_rows = cursor.rowcount
        cursor.execute("""
            INSERT INTO scheduling_projectpoolhour (grain, hour, pool, project, department, deserved_gpu_seconds,
                starved_seconds, pending_seconds)
            SELECT 'd', date_trunc('day', hour AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', pool, project, department,
                   SUM(deserved_gpu_seconds), SUM(starved_seconds), SUM(pending_seconds)
            FROM scheduling_projectpoolhour WHERE grain = 'h' GROUP BY 2, 3, 4, 5""")
        cursor.execute("""
            INSERT INTO scheduling_poolhour (grain, hour, pool, capacity_gpu_seconds)
            SELECT 'd', date_trunc('day', hour AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', pool, SUM(capacity_gpu_seconds)
            FROM scheduling_poolhour WHERE grain = 'h' GROUP BY 2, 3""")
        cursor.execute("ANALYZE scheduling_usagehour; ANALYZE scheduling_projectpoolhour; ANALYZE scheduling_poolhour")
    print(f"hourly rows: {usage_rows:,} usage, {project_rows:,} project x pool, {pool_rows:,} pool; "
          f"{day_rows:,} daily usage rows "
          f"({days} days, {pools} pools, {projects} projects, {users} users, density {density}; "
          f"written in {time.perf_counter() - began:.1f} s)")
    return {"start": start, "end": END}


def median_ms(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        function()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def bench_reports(period: dict, repeat: int) -> None:
    import psycopg
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from rest_framework.test import APIClient

    staff = get_user_model().objects.create_user("bench-staff", is_staff=True, is_superuser=True)
    page, api = Client(), APIClient()
    page.force_login(staff)
    api.force_authenticate(staff)
    query = {"from": period["start"].date().isoformat(), "to": (period["end"] - timedelta(days=1)).date().isoformat()}
    db = connection.settings_dict
    plain = psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"],
                            autocommit=True)
    print(f"\nreports over {query['from']} .. {query['to']} (median of {repeat}, ms):")
    print(f"{'':24} {'server':>9} {'SUM hourly':>11} {'ratio':>7} {'SUM daily':>10} {'ratio':>7}")
    for group in ("project", "user"):
        def baseline(grain, group=group):
            plain.execute(f'SELECT "{group}", SUM(gpu_seconds) FROM scheduling_usagehour WHERE grain = %s '
                          f'AND hour >= %s AND hour < %s GROUP BY "{group}"',
                          [grain, period["start"], period["end"]]).fetchall()

        for door, call in (("page", lambda group=group: page.get("/usage/", {**query, "group_by": group})),
                           ("API", lambda group=group: api.get("/api/usage/", {**query, "group_by": group}))):
            response = call()
            assert response.status_code == 200, response.content[:300]
            ours = median_ms(call, repeat)
            hourly = median_ms(lambda: baseline("h"), repeat)
            daily = median_ms(lambda: baseline("d"), repeat)
            print(f"{door + ' by ' + group:24} {ours:9.1f} {hourly:11.1f} {ours / hourly:6.2f}x {daily:10.1f} "
                  f"{ours / daily:6.1f}x")
    plain.close()


def bench_rollup(nodes: int, pods: int) -> None:
    from django.db import connection
    from django.db.models import Min

    from pools.models import Backend, Department, Node, Pod, Project
    from pools.models.bulk import copy_values
    from scheduling.models import RollupState, UsageHour, UsageInterval
    from scheduling.usage import observe, rollup

    hour = END - timedelta(days=40)
    backend = Backend.objects.get(name="default")
    # Pods of 500 namespaces, each a project's: the rows are per pool x project, as a real cluster's.
    department = Department.objects.create(name="bench")
    Project.objects.bulk_create(Project(name=f"bench-{i}", namespace=f"ns-{i}", department=department)
                                for i in range(500))
    copy_values(Node, ("backend_id", "name", "status", "gpu_total", "pool_names", "platform_names"),
                ((backend.pk, f"node-{i:05d}", "Ready", 8, [f"pool-{i % 100}"], [f"pool-{i % 100}/h100"])
                 for i in range(nodes)))
    generation = {"next": 0}

    def pod_rows(count):
        for _ in range(count):
            i = generation["next"]
            generation["next"] += 1
            yield (backend.pk, f"uid-{i}", f"ns-{i % 500}", f"pod-{i}", f"node-{i % nodes:05d}", "Running",
                   1 + i % 8, 8000, 2**36)

    fields = ("backend_id", "uid", "namespace", "name", "node_name", "phase", "gpu", "cpu", "memory")
    copy_values(Pod, fields, pod_rows(pods))
    timings = {}
    for minute in (0, 30, 60):
        if minute:
            gone = list(Pod.objects.order_by("id").values_list("id", flat=True)[:pods // 10])
            Pod.objects.filter(id__in=gone).delete()
            copy_values(Pod, fields, pod_rows(pods // 10))
        seen = hour + timedelta(minutes=minute)
        Backend.objects.filter(pk=backend.pk).update(last_sync_at=seen)
        began = time.perf_counter()
        summary = observe.observe(seen + timedelta(seconds=5))
        timings[minute] = (time.perf_counter() - began, summary)
    for minute, (seconds, summary) in timings.items():
        print(f"observe at +{minute} min: {seconds:.2f} s ({summary['opened']:,} opened, {summary['closed']:,} closed)")
    RollupState.objects.all().delete()
    now = hour + timedelta(minutes=60, seconds=10)
    began = time.perf_counter()
    result = rollup.run(now=now)
    ours = time.perf_counter() - began
    first = UsageInterval.objects.aggregate(first=Min("start"))["first"]
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("""
            CREATE TEMP TABLE baseline_hours AS
            SELECT date_trunc('hour', start) AS hour, pool, platform, project, "user",
                   SUM(gpu * EXTRACT(EPOCH FROM COALESCE("end", %s) - start)) AS gpu_seconds,
                   SUM(cpu * EXTRACT(EPOCH FROM COALESCE("end", %s) - start)) AS cpu_seconds,
                   SUM(memory * EXTRACT(EPOCH FROM COALESCE("end", %s) - start)) AS memory_seconds
            FROM scheduling_usageinterval WHERE start >= %s
            GROUP BY 1, 2, 3, 4, 5""", [hour + timedelta(minutes=60)] * 3 + [first])
        baseline_rows = cursor.rowcount
        cursor.execute("DROP TABLE baseline_hours")
    base = time.perf_counter() - began
    print(f"rollup of one hour at {nodes:,} nodes and {pods:,} pods ({UsageInterval.objects.count():,} intervals): "
          f"{ours:.2f} s, {result['rows']:,} rows written ({UsageHour.objects.count():,} usage rows) over "
          f"{result['hours']} hours; plain SQL sum of the same intervals {base:.2f} s ({baseline_rows:,} rows): "
          f"{ours / base:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--projects", type=int, default=500)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--density", type=float, default=0.15)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    args = parser.parse_args()
    if min(args.days, args.pools, args.projects, args.users, args.requests, args.nodes, args.pods) < 1:
        parser.error("sizes must be at least 1")
    setup_django()
    try:
        period = fill_hours(args.days, args.pools, args.projects, args.users, args.density)
        bench_reports(period, args.requests)
        bench_rollup(args.nodes, args.pods)
    finally:
        if not args.keep:
            bench.drop_database()


if __name__ == "__main__":
    main()
