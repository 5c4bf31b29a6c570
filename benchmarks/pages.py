"""Benchmark: the pages (issue 4): server time and SQL queries of `/` and `/nodes/`, and the CSV export.

Usage, from the project root (about 2.5 minutes on 2 cores with the defaults, most of it writing nodes):

    .venv/bin/python benchmarks/pages.py [--nodes 5000] [--pools 100] [--requests 20] [--csv-rows 150000]
        [--csv-repeat 3] [--profile] [--keep]

Database: PostgreSQL only (the CSV fast path and its baseline are PostgreSQL's). A scratch database
`osmo_bench_pages` on the server of DATABASE_URL if set, else on postgres://postgres@127.0.0.1:5432; dropped
and recreated at start and dropped at the end (--keep leaves it). Its own name, so that it never clobbers a
concurrent run of import_pools.py (osmo_bench) or sync_cluster.py (osmo_bench_sync). DEBUG is off, as in
production, so Django's debug cursor is not in the times; query counts are taken in separate requests.

Fleet (rows written with bulk_create): the default configuration, --pools pools imported through the
configuration write path (10 teams, `<team>-<kind>-NN`, platforms h100 / a100 / gb200 / l40s / cpu), the
default backend synced just now, --nodes nodes (H100, A100, GB200, L40S and CPU nodes with realistic
capacity, usage, labels, taints and conditions; 93 % Ready, some not ready, cordoned or Unknown; every
twentieth node in a second pool) with their memberships, and 24 hours of usage snapshots per pool.
Two users: a staff user, and a member whose role osmo-llm grants the ten llm-* pools.

Measured (time.perf_counter around the Django test client's request, the response consumed):
  1. Pages: median and 95th percentile of --requests requests (after two unmeasured ones) and the SQL
     query count (CaptureQueriesContext, one more request) of `/`, `/nodes/` (first page), `/nodes/`
     filtered by pool (and by pool, status and sort), each as a whole page and as the live fragment
     (`HX-Request: true`), plus the charts fragment of `/` (`HX-Target: pool-charts`); for staff and the
     member. Budget from the issue: at most 100 ms median and 10 queries. --profile prints a cProfile of `/`.
  2. CSV: nodes are added (bulk_create) until there are --csv-rows, then `/nodes/?export=csv` as staff
     (the default 16 columns), --csv-repeat times: rows per second (median), and in one more run peak
     memory growth while the streamed response is consumed: tracemalloc's peak, and the process's peak
     RSS growth (VmHWM, reset through /proc/self/clear_refs first where Linux allows it). The same for all
     21 columns, for the member (their pools only), and for the reference Python writer (the fast path
     switched off), whose bytes must equal the fast path's.
     Baseline, same run: PostgreSQL's own `COPY (SELECT <the same raw columns> FROM pools_node JOIN
     pools_backend ... ORDER BY <the export's order>) TO STDOUT WITH CSV` through psycopg's
     `cursor.copy()` on a connection of its own, output read and discarded, run right after each timed
     download so that both see the same load; and once more without ORDER BY, for information.
"""

import argparse
import cProfile
import datetime as dt
import hashlib
import io
import os
import pstats
import random
import resource
import statistics
import sys
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
BENCH_DB = "osmo_bench_pages"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"
TEAMS = ["llm", "vision", "speech", "robotics", "rl", "sim", "infra", "bio", "climate", "search"]
KINDS = ["train", "infer", "dev", "batch", "eval", "research", "prod", "burst", "spot", "reserved"]
MEMBER_TEAM = "llm"
# (share, product, GPUs, GPU memory MiB, family, platform, millicores, memory bytes, instance type)
NODE_TYPES = [
    (0.35, "NVIDIA-H100-80GB-HBM3", 8, 81_559, "hopper", "h100", 191_450, 2_162_836_901_888, "p5.48xlarge"),
    (0.25, "NVIDIA-A100-SXM4-80GB", 8, 81_920, "ampere", "a100", 95_450, 1_081_418_450_944, "p4de.24xlarge"),
    (0.10, "NVIDIA-GB200", 4, 189_471, "blackwell", "gb200", 143_450, 1_717_986_918_400, "gb200-nvl72"),
    (0.10, "NVIDIA-L40S", 4, 46_068, "ada-lovelace", "l40s", 47_450, 540_709_225_472, "g6e.12xlarge"),
    (0.20, "", 0, 0, "", "cpu", 95_450, 386_547_056_640, "m7i.24xlarge"),
]
PLATFORMS = ["h100", "a100", "gb200", "l40s", "cpu"]
BUDGET_MS, BUDGET_QUERIES = 100, 10


# ---- database (before Django is set up) ----------------------------------------------------------------

def server_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        return DEFAULT_SERVER
    parsed = urlparse(url)
    if not parsed.scheme.startswith("postgres"):
        raise SystemExit(f"benchmarks/pages.py needs PostgreSQL; DATABASE_URL is {parsed.scheme}")
    return f"postgresql://{parsed.netloc}"


def admin_connect():
    import psycopg

    return psycopg.connect(f"{server_url()}/postgres", autocommit=True, connect_timeout=3)


def create_database() -> str:
    import psycopg

    try:
        admin = admin_connect()
    except psycopg.OperationalError as exc:
        raise SystemExit(f"PostgreSQL does not answer at {server_url()}: {str(exc).strip()}") from None
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{BENCH_DB}"')
        version = admin.execute("SHOW server_version").fetchone()[0]
    return version


def drop_database() -> None:
    from django.db import connections

    connections.close_all()
    with admin_connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')


# ---- the fleet -----------------------------------------------------------------------------------------

def pool_names(count: int) -> list[str]:
    return [f"{TEAMS[i % len(TEAMS)]}-{KINDS[(i // len(TEAMS)) % len(KINDS)]}-{i // 100:02d}" for i in range(count)]


def pool_body(name: str) -> dict:
    return {
        "backend": "default",
        "description": f"{name.split('-')[0].upper()} team, {name.split('-')[1]} work",
        "common_pod_template": ["default_ctrl", "default_user"],
        "common_resource_validations": ["default_cpu", "default_memory"],
        "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"},
        "default_platform": "h100",
        "platforms": {name: ({} if name == "cpu" else {"override_pod_template": ["gpu_toleration"]})
                      for name in PLATFORMS},
    }


def create_pools(count: int) -> list[str]:
    from pools.config import writes
    from pools.models import ConfigKind

    names = pool_names(count)
    writes.import_document(ConfigKind.POOL, {"pools": {name: pool_body(name) for name in names}}, author="bench")
    writes.import_document(ConfigKind.ROLE, {"name": f"osmo-{MEMBER_TEAM}", "description": "LLM team",
                                              "actions": []}, author="bench")
    return names


def node_type(rng: random.Random):
    roll, total = rng.random(), 0.0
    for spec in NODE_TYPES:
        total += spec[0]
        if roll < total:
            return spec
    return NODE_TYPES[-1]


def make_node(index: int, backend, pools: list[str], rng: random.Random, now):
    from pools.models import Node

    _, product, gpus, gpu_mib, family, platform, millicores, memory, instance = node_type(rng)
    name = f"bench-node-{index:06d}"
    pool = pools[index % len(pools)]
    member_of = [pool] if index % 20 else [pool, pools[(index * 7 + 37) % len(pools)]]
    roll = rng.random()
    status, reasons, cordoned = "Ready", [], False
    if roll < 0.04:
        status, reasons = "Not ready (Disk pressure)", ["Disk pressure"]
    elif roll < 0.05:
        status, reasons, cordoned = "Not ready (Scheduling disabled)", ["Scheduling disabled"], True
    elif roll < 0.07:
        status, reasons = "Unknown", ["Kubelet stopped posting node status"]
    unhealthy = 1 if gpus and rng.random() < 0.02 else 0
    used = rng.randint(0, gpus - unhealthy) if gpus else 0
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance, "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": f"us-east-1{'abcd'[index % 4]}", "runwhere.ai/pool": pool,
    }
    taints = []
    if gpus:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                       "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.memory": str(gpu_mib),
                       "nvidia.com/gpu.family": family, "nvidia.com/cuda.driver.major": "550",
                       "runwhere.ai/gpu-type": platform})
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if cordoned:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    stamp = (now - dt.timedelta(days=3)).isoformat()
    conditions = [{"type": kind, "status": "False", "reason": f"KubeletHas{kind}", "lastTransitionTime": stamp}
                  for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")]
    conditions.append({"type": "Ready", "status": "True" if status == "Ready" else "False",
                       "reason": "KubeletReady", "lastTransitionTime": stamp})
    return Node(
        backend=backend, name=name, uid=f"uid-{index:06d}", labels=labels, taints=taints, unschedulable=cordoned,
        conditions=conditions, components={"toolkit": "running", "dcgm-exporter": "running"} if gpus else {},
        cpu_capacity=millicores + 550, cpu_allocatable=millicores,
        cpu_requested=rng.randint(0, millicores // 500) * 500,
        memory_capacity=memory + 2**30, memory_allocatable=memory, memory_requested=rng.randint(0, 64) * 2**32,
        storage_capacity=3_840_000_000_000, storage_allocatable=3_456_067_615_356, pods_capacity=110,
        pods_allocatable=110, gpu_product=product, gpu_count=gpus, gpu_memory_mib=gpu_mib, gpu_family=family,
        gpu_total=gpus, gpu_allocatable=gpus - unhealthy, gpu_used=used, gpu_free=gpus - unhealthy - used,
        gpu_unhealthy=unhealthy, status=status, reasons=reasons, pool_names=member_of,
        platform_names=[f"{name}/{platform}" for name in member_of],
        sharing="SHARED" if len(member_of) > 1 else "RESERVED",
        last_seen=None if index % 97 == 0 else now - dt.timedelta(seconds=rng.randint(0, 120), microseconds=index),
        updated_at=now,
    ), member_of, platform


def add_nodes(start: int, count: int, pools: list[str], seed: int = 7, batch: int = 5000) -> None:
    from django.db import transaction
    from django.utils import timezone

    from pools.models import Backend, Node, NodeMembership, Pool

    backend = Backend.objects.get(name="default")
    pool_ids = dict(Pool.objects.values_list("name", "pk"))
    rng = random.Random(seed + start)
    now = timezone.now()
    for first in range(start, start + count, batch):
        made = [make_node(i, backend, pools, rng, now) for i in range(first, min(first + batch, start + count))]
        with transaction.atomic():
            nodes = Node.objects.bulk_create([node for node, _, _ in made])
            NodeMembership.objects.bulk_create(
                NodeMembership(node=node, pool_id=pool_ids[name], platforms=[platform])
                for node, (_, member_of, platform) in zip(nodes, made, strict=True) for name in member_of)


def add_snapshots(pools: list[str]) -> None:
    from django.conf import settings
    from django.utils import timezone

    from pools.fleet import usage
    from pools.models import Pool, UsageSnapshot

    now = timezone.now()
    interval = settings.OSMO_USAGE_SNAPSHOT_INTERVAL
    rows = []
    for pool in usage.pools_with_usage(Pool.objects.filter(name__in=pools)):
        for step in range(24 * 3600 // interval):
            used = max(0, min(pool.gpu_total, pool.gpu_used + (step % 9) - 4))
            rows.append(UsageSnapshot(pool=pool, at=now - dt.timedelta(seconds=step * interval),
                                      node_count=pool.node_count, gpu_total=pool.gpu_total, gpu_used=used,
                                      gpu_free=pool.gpu_total - used, gpu_unhealthy=pool.gpu_unhealthy,
                                      cpu_total=pool.cpu_total, cpu_used=pool.cpu_used,
                                      memory_total=pool.memory_total, memory_used=pool.memory_used))
    UsageSnapshot.objects.bulk_create(rows, batch_size=5000)


def create_users():
    from django.contrib.auth import get_user_model

    from pools.models import Role, RoleAssignment

    users = get_user_model().objects
    staff = users.create_user("bench-staff", password="bench-staff-pw", is_staff=True, is_superuser=True)
    member = users.create_user("bench-member", password="bench-member-pw")
    RoleAssignment.objects.create(user=member, role=Role.objects.get(name=f"osmo-{MEMBER_TEAM}"), assigned_by="bench")
    return staff, member


# ---- measuring -----------------------------------------------------------------------------------------

def fetch(client, url: str, headers: dict) -> tuple[int, int]:
    response = client.get(url, **headers)
    size = 0
    if response.streaming:
        for chunk in response.streaming_content:
            size += len(chunk)
    else:
        size = len(response.content)
    response.close()
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    return response.status_code, size


def time_page(client, url: str, headers: dict, requests: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(2):
        fetch(client, url, headers)
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        fetch(client, url, headers)
        times.append(time.perf_counter() - start)
    with CaptureQueriesContext(connection) as queries:
        fetch(client, url, headers)
    times.sort()
    return {"median": statistics.median(times), "p95": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
            "queries": len(queries.captured_queries),
            "sql_ms": sum(float(q["time"]) for q in queries.captured_queries) * 1000}


def page_cases(pools: list[str]) -> list[tuple[str, str, dict]]:
    fragment = {"HTTP_HX_REQUEST": "true"}
    member_pool = next(name for name in pools if name.startswith(f"{MEMBER_TEAM}-"))
    return [
        ("/", "/", {}),
        ("/ fragment", "/", fragment),
        ("/ charts fragment", "/", {**fragment, "HTTP_HX_TARGET": "pool-charts"}),
        ("/nodes/", "/nodes/", {}),
        ("/nodes/ fragment", "/nodes/", fragment),
        ("/nodes/?pool=P", f"/nodes/?pool={member_pool}", {}),
        ("/nodes/?pool=P fragment", f"/nodes/?pool={member_pool}", fragment),
        ("/nodes/?pool=P&status=Ready&sort=-gpu_free", f"/nodes/?pool={member_pool}&status=Ready&sort=-gpu_free", {}),
        ("  (fragment)", f"/nodes/?pool={member_pool}&status=Ready&sort=-gpu_free", fragment),
    ]


def bench_pages(users: dict, pools: list[str], requests: int) -> dict:
    from django.test import Client

    results = {}
    print(f"\n1. Pages ({requests} requests each after 2 warm-ups; budget {BUDGET_MS} ms median, "
          f"{BUDGET_QUERIES} queries)")
    print(f"{'page':<46} {'user':<7} {'median':>8} {'p95':>8} {'queries':>8} {'SQL ms':>7}")
    for label, url, headers in page_cases(pools):
        for who, user in users.items():
            client = Client()
            client.force_login(user)
            sample = time_page(client, url, headers, requests)
            results[(label, who)] = sample
            flag = "" if sample["median"] * 1000 <= BUDGET_MS and sample["queries"] <= BUDGET_QUERIES else "  OVER"
            print(f"{label:<46} {who:<7} {sample['median'] * 1000:7.1f}ms {sample['p95'] * 1000:7.1f}ms "
                  f"{sample['queries']:>8} {sample['sql_ms']:7.1f}{flag}")
    return results


def profile_overview(user, pools: list[str]) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(user)
    fetch(client, "/", {})
    with CaptureQueriesContext(connection) as queries:
        fetch(client, "/", {})
    print("\n   queries of / (ms, first 110 characters):")
    for query in queries.captured_queries:
        print(f"   {float(query['time']) * 1000:7.1f}  {query['sql'][:110]}")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        fetch(client, "/", {})
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
    print("\n   cProfile of 5 requests of / (cumulative):")
    print("\n".join("   " + line for line in out.getvalue().splitlines()[:60]))


def rss_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def consume_csv(client, url: str) -> tuple[int, int, str]:
    response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    digest, size, lines = hashlib.sha256(), 0, 0
    for chunk in response.streaming_content:
        digest.update(chunk)
        size += len(chunk)
        lines += chunk.count(b"\r\n")
    response.close()
    return lines - 1, size, digest.hexdigest()  # lines less the header (no cell of these holds CRLF)


def csv_memory(client, url: str) -> dict:
    """Peak memory growth while one download is read, in a run of its own (tracemalloc slows Python down)."""
    import gc

    gc.collect()
    reset = reset_peak_rss()
    rss_before = rss_kib("VmRSS")
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    traced_before = tracemalloc.get_traced_memory()[0]
    consume_csv(client, url)
    traced_peak = tracemalloc.get_traced_memory()[1] - traced_before
    tracemalloc.stop()
    hwm_after = rss_kib("VmHWM")
    if reset and rss_before is not None and hwm_after is not None:
        rss_growth = (hwm_after - rss_before) / 1024
    else:  # peak RSS since start: grows only past the earlier peak
        rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - maxrss_before) / 1024
    return {"traced_mb": traced_peak / 2**20, "rss_mb": rss_growth, "rss_exact": reset}


def copy_rows(connection, sql: str) -> tuple[float, int]:
    rows = 0
    start = time.perf_counter()
    with connection.cursor() as cursor, cursor.copy(f"COPY ({sql}) TO STDOUT WITH CSV") as copy:
        for _row in copy:
            rows += 1
    return time.perf_counter() - start, rows


def time_csv(client, url: str, repeat: int, baseline_connection=None, baseline_sql: str = "") -> tuple[dict, dict]:
    """The download `repeat` times, each followed by the baseline COPY when one is given, so that both see the
    same load on the machine; medians."""
    import gc

    runs, base_runs, base_rows = [], [], 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        rows, size, digest = consume_csv(client, url)
        runs.append(time.perf_counter() - start)
        if baseline_connection is not None:
            seconds, base_rows = copy_rows(baseline_connection, baseline_sql)
            base_runs.append(seconds)
    seconds = statistics.median(runs)
    result = {"rows": rows, "bytes": size, "digest": digest, "seconds": seconds, "rows_per_s": rows / seconds,
              **csv_memory(client, url)}
    base = {}
    if base_runs:
        base_seconds = statistics.median(base_runs)
        base = {"rows": base_rows, "seconds": base_seconds, "rows_per_s": base_rows / base_seconds}
    return result, base


def baseline_connection():
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    return psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"],
                           password=db["PASSWORD"] or None, autocommit=True)


def baseline_sql(columns, ordered: bool) -> str:
    from pools.models import Node

    fields = {field.name: field.column for field in Node._meta.concrete_fields}
    select = []
    for column in columns:
        for name in column.export_fields:
            # The backend's fields (its name, its last sync for "Last seen") from the joined backend row.
            select.append(f'b."{name.removeprefix("backend__")}"' if name.startswith("backend__")
                          else f'n."{fields[name]}"')
    order = " ORDER BY n.name, b.name, n.id" if ordered else ""
    return f"SELECT {', '.join(select)} FROM pools_node n JOIN pools_backend b ON b.id = n.backend_id{order}"


def bench_csv(users: dict, repeat: int) -> None:
    from django.test import Client

    from pools.models import Node
    from pools.pages import csv as pages_csv
    from pools.pages.tables import NODES

    total = Node.objects.count()
    staff = Client()
    staff.force_login(users["staff"])
    member = Client()
    member.force_login(users["member"])
    everything = ",".join(column.key for column in NODES.columns)
    sixteen, all21 = baseline_sql(NODES.default_columns, True), baseline_sql(NODES.columns, True)
    print(f"\n2. CSV export of {total:,} nodes (rows per second: median of {repeat}, each run followed by its "
          "baseline; memory: one more run)")
    cases = [  # label, client, url, fast path, baseline
        ("fast path, 16 default columns, staff", staff, "/nodes/?export=csv", True, sixteen),
        ("fast path, all 21 columns, staff", staff, f"/nodes/?export=csv&cols={everything}", True, all21),
        ("fast path, 16 columns, member (their pools)", member, "/nodes/?export=csv", True, ""),
        ("Python writer, 16 default columns, staff", staff, "/nodes/?export=csv", False, sixteen),
        ("Python writer, all 21 columns, staff", staff, f"/nodes/?export=csv&cols={everything}", False, all21),
    ]
    results, baselines = {}, {}
    with baseline_connection() as connection:
        for label, client, url, fast, sql in cases:
            pages_csv.FAST_PATH = fast
            try:
                results[label], baselines[label] = time_csv(client, url, repeat if fast else 1,
                                                            connection if sql else None, sql)
            finally:
                pages_csv.FAST_PATH = True
        unordered = [copy_rows(connection, baseline_sql(NODES.default_columns, False)) for _ in range(repeat)]
    print(f"{'export':<46} {'rows':>8} {'MB':>6} {'s':>6} {'rows/s':>9} {'COPY r/s':>9} {'ratio':>6} "
          f"{'traced':>8} {'RSS':>8}")
    for label, result in results.items():
        base = baselines[label]
        ratio = f"{result['rows_per_s'] / base['rows_per_s']:5.2f}x" if base else "   n/a"
        base_text = f"{base['rows_per_s']:9,.0f}" if base else f"{'':>9}"
        print(f"{label:<46} {result['rows']:>8,} {result['bytes'] / 2**20:6.1f} {result['seconds']:6.2f} "
              f"{result['rows_per_s']:9,.0f} {base_text} {ratio} {result['traced_mb']:6.1f}MB "
              f"{result['rss_mb']:6.1f}MB{'' if result['rss_exact'] else '*'}")
    seconds = statistics.median(run[0] for run in unordered)
    print(f"(COPY of the 16 columns without ORDER BY, for information: {unordered[0][1] / seconds:,.0f} rows/s)")
    if not all(result["rss_exact"] for result in results.values()):
        print("* peak RSS since the process started (the kernel refused to reset it): grows only past earlier peaks")
    for columns in ("16 default columns", "all 21 columns"):
        fast, slow = (results[f"{kind}, {columns}, staff"] for kind in ("fast path", "Python writer"))
        same = fast["digest"] == slow["digest"] and fast["bytes"] == slow["bytes"]
        print(f"fast path and Python writer, {columns}: {'byte for byte identical' if same else 'DIFFERENT'} "
              f"({fast['bytes']:,} bytes)")
        if not same:
            raise SystemExit("the CSV fast path differs from the reference writer")
    label = "fast path, 16 default columns, staff"
    fast, base = results[label], baselines[label]
    ratio = fast["rows_per_s"] / base["rows_per_s"]
    ok = ratio >= 0.5 and max(fast["traced_mb"], fast["rss_mb"]) <= 50
    figures = f"{ratio:.2f}x, {fast['traced_mb']:.1f} MB traced, {fast['rss_mb']:.1f} MB RSS"
    if total < 150_000:
        print(f"target (at 150,000 rows: >= 0.5x COPY, <= 50 MB growth): not judged at {total:,} rows ({figures})")
    else:
        print(f"target (>= 0.5x COPY, <= 50 MB growth): {'met' if ok else 'NOT MET'} ({figures})")


@contextmanager
def scratch_fleet(nodes: int, pools: int, *, keep: bool = False):
    """The scratch database BENCH_DB, Django set up on it with DEBUG off, and the fleet of the docstring;
    yields (pool names, {"staff": user, "member": user}); drops the database at the end unless `keep`."""
    sys.path.insert(0, str(BASE_DIR))
    os.chdir(BASE_DIR)
    version = create_database()
    os.environ["DATABASE_URL"] = f"{server_url()}/{BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    print(f"database: PostgreSQL {version}, scratch database {BENCH_DB} (created for this run)")
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.utils import timezone

        from pools.config.defaults import init_defaults
        from pools.models import Backend

        call_command("migrate", verbosity=0)
        # DEBUG off: the pages name their static files through the manifest, which collectstatic writes.
        call_command("collectstatic", "--noinput", verbosity=0)
        init_defaults(author="bench")
        print(f"django {django.get_version()}, python {sys.version.split()[0]}, DEBUG off")
        start = time.perf_counter()
        names = create_pools(pools)
        Backend.objects.filter(name="default").update(last_sync_at=timezone.now())
        add_nodes(0, nodes, names)
        add_snapshots(names)
        staff, member = create_users()
        print(f"fleet: {pools} pools, {nodes:,} nodes, 24 h of snapshots "
              f"(built in {time.perf_counter() - start:.1f} s)")
        yield names, {"staff": staff, "member": member}
    finally:
        if not keep:
            drop_database()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--csv-rows", type=int, default=150_000)
    parser.add_argument("--csv-repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="print the queries and a cProfile of /")
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    args = parser.parse_args()
    if min(args.nodes, args.pools, args.requests, args.csv_repeat) < 1 or args.pools < len(TEAMS):
        parser.error("--nodes, --requests and --csv-repeat must be at least 1, --pools at least 10")

    with scratch_fleet(args.nodes, args.pools, keep=args.keep) as (pools, users):
        bench_pages(users, pools, args.requests)
        if args.profile:
            profile_overview(users["staff"], pools)
        if args.csv_rows > args.nodes:
            start = time.perf_counter()
            add_nodes(args.nodes, args.csv_rows - args.nodes, pools)
            print(f"\n(added {args.csv_rows - args.nodes:,} nodes in {time.perf_counter() - start:.1f} s)")
        bench_csv(users, args.csv_repeat)


if __name__ == "__main__":
    main()
