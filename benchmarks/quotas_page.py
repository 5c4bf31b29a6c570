"""Benchmark: the quota pages (issue 11): server time and SQL queries of `/quotas/` and its neighbours.

Usage, from the project root (about a minute on 2 cores with the defaults):

    .venv/bin/python benchmarks/quotas_page.py [--nodes 2000] [--pools 100] [--departments 20] [--projects 500]
        [--requests 10] [--keep]

Database: PostgreSQL, a scratch database `osmo_bench_quotas` on the server of DATABASE_URL if set (else
postgres://postgres@127.0.0.1:5432), dropped and recreated at start and dropped at the end (--keep leaves it).
DEBUG is off; query counts are taken in a separate request.

Fleet: benchmarks/pages.py's (its functions, imported): --pools pools through the configuration write path,
--nodes nodes with their memberships, 24 h of snapshots, a staff user and a member whose role osmo-llm grants
the ten llm-* pools. On top: --departments departments, each with a quota on its five "home" pools; --projects
projects spread over them, each with a quota on each of its department's five pools (so every pool has a
quota row per project of one department, and one for the department); the member's role is a member of the
first three projects of every other department. Usage: per project eight running pods of 1 to 4 GPUs, six
labelled with one of its pools and two unlabelled on a node of one of them (some of those nodes are shared by two
pools: usage counted in several), and 20,000 pods in other namespaces (system and unrelated work).

Measured, for staff and the member: median server time of --requests requests (after one warm-up) and the SQL
query count of `/quotas/` (first page: 10 pools), its live fragment, all 100 pools on one page, a department
filter (which computes every pool), the CSV of every row, `/projects/`, a project's page, and one staff edit
(POST /quotas/edit/, alternating two values, so each writes a revision). Baseline, same run: a bare
`quota_tables()` call for the first page's pools and for every pool (the computation the pages wrap), and `/`,
the overview, without the columns GPUs guaranteed / borrowed it now carries (then with them).
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py

bench.BENCH_DB = "osmo_bench_quotas"
HOME_POOLS = 5
MEMBER_PROJECTS = 3


def add_quotas(pools: list[str], departments: int, projects: int) -> dict:
    from django.db import connection

    from pools.config import writes
    from pools.models import Backend, ConfigKind, Node, NodeMembership, Pod

    rng = random.Random(11)
    homes = {d: [pools[(d * HOME_POOLS + k) % len(pools)] for k in range(HOME_POOLS)] for d in range(departments)}
    per_department = projects // departments
    writes.import_document(ConfigKind.DEPARTMENT, [
        {"name": f"dept-{d:02d}", "default_node_pools": homes[d][:2],
         "resources": [{"node_pool": pool, "gpu": {"deserved": per_department + 10, "limit": -1},
                        "cpu": {"deserved": "200"}, "memory": {"deserved": "4Ti"}} for pool in homes[d]]}
        for d in range(departments)], author="bench")
    documents = []
    for index in range(projects):
        d, j = index % departments, index // departments
        members = {"roles": [f"osmo-{bench.MEMBER_TEAM}"]} if d % 2 == 0 and j < MEMBER_PROJECTS else {}
        documents.append({
            "name": f"p-{d:02d}-{j:03d}", "department": f"dept-{d:02d}", "members": {**members, "users": ["bench-x"]},
            "resources": [{"node_pool": pool, "gpu": {"deserved": 1, "limit": 8,
                                                      "over_quota_weight": ("Low", "Medium", "High")[index % 3]},
                           "cpu": {"deserved": "4"}, "memory": {"deserved": "64Gi"}} for pool in homes[d]]})
    start = time.perf_counter()
    writes.import_document(ConfigKind.PROJECT, documents, author="bench")
    written = time.perf_counter() - start
    backend = Backend.objects.get(name="default")
    nodes_of: dict[str, list[str]] = {}
    for name, pool in NodeMembership.objects.values_list("node__name", "pool__name"):
        nodes_of.setdefault(pool, []).append(name)
    pods = []
    for index, document in enumerate(documents):
        project_pools = [quota["node_pool"] for quota in document["resources"]]
        for k in range(8):
            pool = project_pools[rng.randrange(len(project_pools))]
            node = rng.choice(nodes_of.get(pool) or ["nowhere"])
            pods.append(Pod(backend=backend, uid=f"q-{index}-{k}", namespace=f"proj-{document['name']}",
                            name=f"job-{k}", node_name=node, phase="Running", gpu=rng.randint(1, 4),
                            cpu=rng.randint(1, 16) * 1000, memory=rng.randint(1, 64) * 2**30,
                            pool=pool if k < 6 else ""))
    node_names = list(Node.objects.values_list("name", flat=True))
    pods += [Pod(backend=backend, uid=f"other-{i}", namespace=("kube-system", "monitoring", "team-x")[i % 3],
                 name=f"other-{i}", node_name=node_names[i % len(node_names)], phase="Running", cpu=100,
                 component="gpu-operator" if i % 3 == 0 else "") for i in range(20_000)]
    Pod.objects.bulk_create(pods, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would have by then: without statistics the planner guesses
    return {"departments": departments, "projects": projects, "pods": len(pods), "written": written,
            "member_pool": next(pool for d in range(0, departments, 2) for pool in homes[d]
                                if pool.startswith(f"{bench.MEMBER_TEAM}-")),
            "department": f"dept-{departments // 2:02d}", "project": "p-00-000"}


def timed(function, requests: int) -> float:
    function()
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def queries(function) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        function()
    return len(captured.captured_queries)


def get(client, url: str, headers: dict | None = None):
    def run():
        response = client.get(url, **(headers or {}))
        size = sum(len(chunk) for chunk in response.streaming_content) if response.streaming else len(
            response.content)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
        return size
    return run


def row(label: str, who: str, median: float, count: int, size: int | None = None) -> None:
    size_text = f"{size / 1024:8.0f}" if size is not None else f"{'':>8}"
    print(f"{label:<44} {who:<7} {median * 1000:8.1f}ms {count:>8} {size_text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--departments", type=int, default=20)
    parser.add_argument("--projects", type=int, default=500)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    args = parser.parse_args()
    if args.pools < len(bench.TEAMS) or args.departments < 2 or args.projects < args.departments:
        parser.error("--pools at least 10, --departments at least 2, --projects at least --departments")

    with bench.scratch_fleet(args.nodes, args.pools, keep=args.keep) as (pools, users):
        from django.test import Client

        from pools.models import Pool, Quota
        from pools.pages.tables import POOLS
        from pools.quotas.figures import quota_tables

        start = time.perf_counter()
        world = add_quotas(pools, args.departments, args.projects)
        print(f"quotas: {args.departments} departments, {args.projects} projects "
              f"({Quota.objects.count():,} quota rows; the projects' import took {world['written']:.1f} s), "
              f"{world['pods']:,} pods (built in {time.perf_counter() - start:.1f} s)")

        print(f"\nmedian of {args.requests} requests after a warm-up; KiB = size of the answer")
        print(f"{'request':<44} {'user':<7} {'median':>10} {'queries':>8} {'KiB':>8}")
        every = list(Pool.objects.order_by("name"))
        first_page = every[:10]
        for label, pool_list in (("baseline: quota_tables(), first 10 pools", first_page),
                                 (f"baseline: quota_tables(), all {len(every)} pools", every)):
            row(label, "-", timed(lambda pool_list=pool_list: quota_tables(pool_list), args.requests),
                queries(lambda pool_list=pool_list: quota_tables(pool_list)))
        without = ",".join(column.key for column in POOLS.default_columns
                           if column.key not in ("gpu_guaranteed", "gpu_borrowed"))
        cases = [
            ("baseline: / without GPU guaranteed / borrowed", f"/?cols={without}", None),
            ("/ (overview, with them)", "/", None),
            ("/quotas/ (first 10 pools)", "/quotas/", None),
            ("/quotas/ live fragment", "/quotas/", {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "quotas-table"}),
            (f"/quotas/?per_page=100 ({len(every)} pools)", "/quotas/?per_page=100", None),
            ("/quotas/?department=D (every pool computed)", f"/quotas/?department={world['department']}", None),
            ("/quotas/?export=csv (every row)", "/quotas/?export=csv", None),
            ("/projects/", "/projects/", None),
            ("/projects/P/", f"/projects/{world['project']}/", None),
            ("/pools/P/ (with its quota table)", f"/pools/{world['member_pool']}/", None),
        ]
        for label, url, headers in cases:
            for who, user in users.items():
                if who == "member" and "department=" in url:
                    continue  # not one of theirs
                client = Client()
                client.force_login(user)
                fetch = get(client, url, headers)
                size = fetch()
                row(label, who, timed(fetch, args.requests), queries(fetch), size)

        client = Client()
        client.force_login(users["staff"])
        values = iter(["2", "1"] * (args.requests + 2))
        cell = f"project:{world['project']}:{world['member_pool']}:gpu:deserved"

        def edit():
            response = client.post("/quotas/edit/", {"cell": cell, "value": next(values)}, HTTP_HX_REQUEST="true")
            if response.status_code != 200:
                raise SystemExit(f"the edit answered {response.status_code}: {response.content[:200]!r}")

        row("POST /quotas/edit/ (one cell, a revision)", "staff", timed(edit, args.requests), queries(edit))


if __name__ == "__main__":
    main()
