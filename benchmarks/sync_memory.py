"""Benchmark: peak memory (and time) of one full sync of a large cluster (issue 15: "Memory of a full sync").

Usage, from the project root (about 10 minutes on 2 cores with the defaults):

    .venv/bin/python benchmarks/sync_memory.py [--nodes 5000] [--pods-per-node 30] [--repeat 3]

The cluster is the stand-in API server of the tests (tests/kube_standin.py, real HTTP) in a child process, built
by the same generator as benchmarks/sync_cluster.py (5,000 nodes x 30 pods = 150,000 pods by default). Every
measured run is a fresh Python process (`--child MODE`), so its peak RSS (VmHWM from /proc/self/status, read at
the end of the run) is that of the one thing it did, after Django is set up and the sync's modules imported:

  idle      nothing: the floor (Django, the kubernetes client, the project's modules).
  hold      the old way, kept here as the baseline: every page of nodes and pods listed with the sync's own client
            (KubeCluster.list_*, pages of 500) and all of them held at once, as the full sync used to do before
            it wrote anything; nothing is written.
  sync      BackendSync(backend, cluster).run(seconds=0) into empty Node/Pod/NodeMembership tables: the full sync.
  resync    the same over the rows the previous sync stored (a relist where nothing changed, as after a 410).

Each mode runs --repeat times, interleaved (idle, hold, sync, resync, idle, ...); the medians are printed with the
ratio of the sync's peak to the baseline's (hold) measured in the same run.

Database: DATABASE_URL if set (PostgreSQL; its tables are truncated: give it a database of its own), otherwise
postgres://postgres@127.0.0.1:5432/osmo_bench_memory, dropped and recreated at the start and dropped at the end.
"""

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "benchmarks"))

import sync_cluster as bench  # noqa: E402  (the cluster generator, the stand-in process, the bench pools)

DEFAULT_DB = "osmo_bench_memory"
PG_SERVER_URL = "postgresql://postgres@127.0.0.1:5432"
MODES = ("idle", "hold", "sync", "resync")


def vm_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "sync-benchmark-only-not-a-secret")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


# ---- one measured run (a child process) ------------------------------------------------------------------------

def child(mode: str) -> None:
    setup_django()
    from django.db import connection

    from pools.cluster.reflector import list_all
    from pools.fleet.sync import BackendSync, cluster_for
    from pools.models import Backend, Node, Pod

    backend = Backend.objects.get(name=bench.BACKEND)
    cluster = cluster_for(backend)
    connection.ensure_connection()
    before = vm_kib("VmRSS")
    started = time.perf_counter()
    result: dict = {}
    if mode == "hold":
        nodes = list_all(cluster.list_nodes)
        pods = list_all(cluster.list_pods)
        result["listed"] = [len(nodes.items), len(pods.items)]
    elif mode in ("sync", "resync"):
        stats = BackendSync(backend, cluster).run(seconds=0)
        result["stats"] = stats.as_dict()
        result["stored"] = [Node.objects.filter(backend=backend).count(), Pod.objects.filter(backend=backend).count()]
    seconds = time.perf_counter() - started
    cluster.close()
    print(json.dumps({"mode": mode, "seconds": seconds, "rss_before_kib": before, "peak_kib": vm_kib("VmHWM"),
                      **result}))


def run_child(mode: str) -> dict:
    completed = subprocess.run([sys.executable, __file__, "--child", mode], capture_output=True, text=True,
                               env=os.environ.copy(), cwd=BASE_DIR, timeout=1800)
    if completed.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{completed.stdout}\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


# ---- the database ----------------------------------------------------------------------------------------------

def choose_database() -> tuple[str, bool]:
    url = os.environ.get("DATABASE_URL")
    if url:
        if not urlparse(url).scheme.startswith("postgres"):
            raise SystemExit("DATABASE_URL must be PostgreSQL for this benchmark")
        return url, False
    import psycopg

    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DEFAULT_DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DEFAULT_DB}"')
    return f"{PG_SERVER_URL}/{DEFAULT_DB}", True


def drop_database() -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DEFAULT_DB}" WITH (FORCE)')


def empty_tables() -> None:
    from django.db import connection

    from pools.models import Backend, Node, NodeMembership, Pod

    tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in (NodeMembership, Pod, Node))
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {tables}")
    Backend.objects.filter(name=bench.BACKEND).update(nodes_resource_version="", pods_resource_version="",
                                                      jobs_resource_version="")
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {tables}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    modes = [m for m in args.modes.split(",") if m]
    if "resync" in modes and "sync" not in modes:
        parser.error("resync needs sync (it re-syncs over the rows the sync stored)")
    os.chdir(BASE_DIR)
    began = time.perf_counter()
    standin = bench.RemoteStandin()
    standin.start("populate", args.nodes, args.pods_per_node)
    scratch = False
    try:
        url, scratch = choose_database()
        os.environ["DATABASE_URL"] = url
        setup_django()
        from django.core.management import call_command

        from pools.config.defaults import init_defaults

        call_command("migrate", verbosity=0)
        init_defaults()
        if not scratch:
            bench.remove_bench_config()
        workdir = tempfile.mkdtemp(prefix="sync-memory-")
        populated = standin.result()
        kubeconfig = standin.call("kubeconfig", str(Path(workdir) / "kubeconfig"))
        call_command("backend", "add", bench.BACKEND, "--kubeconfig", kubeconfig, stdout=io.StringIO())
        bench.import_pools()
        print(f"database {urlparse(url).path.lstrip('/')}; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}")
        print(f"cluster: {populated['nodes']} nodes, {populated['pods']} pods ({populated['counted_pods']} bound and "
              f"unfinished: the Pod rows), built in {populated['seconds']:.1f} s; each run a fresh process")
        runs: dict[str, list[dict]] = {mode: [] for mode in modes}
        for attempt in range(args.repeat):
            for mode in modes:
                if mode in ("sync", "hold", "idle"):
                    empty_tables()
                result = run_child(mode)
                if mode in ("sync", "resync"):
                    expected = [populated["nodes"], populated["counted_pods"]]
                    if result["stored"] != expected:
                        raise SystemExit(f"{mode}: stored {result['stored']} (nodes, pods), expected {expected}")
                    if mode == "resync" and (result["stats"]["nodes_written"] or result["stats"]["pods_written"]
                                             or result["stats"]["pods_deleted"]):
                        print(f"WARNING: the re-sync wrote {result['stats']}")
                runs[mode].append(result)
                print(f"  run {attempt + 1} {mode:<6}: peak RSS {result['peak_kib'] / 1024:7.0f} MiB "
                      f"(RSS before {result['rss_before_kib'] / 1024:5.0f} MiB), {result['seconds']:6.2f} s",
                      flush=True)

        def median(mode, key):
            return statistics.median(r[key] for r in runs[mode]) if runs.get(mode) else float("nan")

        print(f"\nsummary ({populated['nodes']} nodes, {populated['pods']} pods; median of {args.repeat})")
        print(f"  {'run':<58} {'peak RSS':>10} {'seconds':>8}")
        labels = {"idle": "idle (Django + modules, no work)",
                  "hold": "baseline: list all pages and hold them (the old way)",
                  "sync": "full sync into empty tables",
                  "resync": "re-sync, nothing changed"}
        for mode in modes:
            print(f"  {labels[mode]:<58} {median(mode, 'peak_kib') / 1024:7.0f} MiB {median(mode, 'seconds'):8.2f}")
        if "sync" in modes and "hold" in modes:
            ratio = median("sync", "peak_kib") / median("hold", "peak_kib")
            print(f"  ratio full-sync peak / hold-all baseline peak: {ratio:.2f}x")
        if "sync" in modes and "idle" in modes:
            above = (median("sync", "peak_kib") - median("idle", "peak_kib")) / 1024
            print(f"  full sync above idle: {above:.0f} MiB; "
                  f"goal: peak below 500 MB ({500e6 / 2**20:.0f} MiB)")
        print(f"(whole benchmark: {time.perf_counter() - began:.0f} s)")
    finally:
        standin.close()
        try:
            if scratch:
                drop_database()
            elif "django" in sys.modules and os.environ.get("DATABASE_URL"):
                bench.remove_bench_config()
        except Exception as exc:  # report, but do not hide the original error
            print(f"cleanup failed: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
