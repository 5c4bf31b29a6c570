"""Benchmark: importing one pool document through the configuration write path.

The figure from the issue: importing one document of 500 pools with 4 platforms each, its wall time,
and its query count per pool, which must not grow with the number of pools already stored.

Usage, from the project root:

    .venv/bin/python benchmarks/import_pools.py [--pools 500] [--platforms 4] [--repeat 3]

Database: DATABASE_URL if set (only rows named bench-* are touched and removed afterwards);
otherwise PostgreSQL at postgres://postgres@127.0.0.1:5432/osmo_bench, dropped and recreated at
start and dropped at the end; otherwise, when PostgreSQL does not answer, a SQLite file under
.data/ that is removed at the end.

Measured (time.perf_counter, queries counted with CaptureQueriesContext):
  1. import of the document into a pool table holding no bench pools;
  2. the same document again, unchanged (no writes expected);
  3. the same document with every pool and platform description changed;
  4. a 10-pool import with 0, 500 and 2,000 other pools stored (query count must stay flat);
  5. a baseline: the same rows inserted with plain bulk_create, no validation and no revisions.
Settings run with DEBUG=1, so Django's debug cursor is active for every step, the baseline included.
"""

import argparse
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
BENCH_DB = "osmo_bench"
PG_SERVER_URL = "postgresql://postgres@127.0.0.1:5432"
PREFIX = "bench-"
PLATFORM_NAMES = ["a100", "h100", "gb200", "l40s", "h200", "b200", "l4", "t4"]
AUTHOR = "import_pools benchmark"


# ---- database selection (before Django is set up) ---------------------------------------------------

class Database:
    def __init__(self, url: str, label: str, created: str | None = None, sqlite_path: Path | None = None):
        self.url = url
        self.label = label
        self.created = created  # "postgres" or "sqlite" when this script created the database
        self.sqlite_path = sqlite_path


def _pg_admin_connect():
    import psycopg

    return psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3)


def choose_database() -> Database:
    url = os.environ.get("DATABASE_URL")
    if url:
        parsed = urlparse(url)
        where = url.split("://", 1)[-1] if parsed.scheme.startswith("sqlite") else \
            f"{parsed.hostname}:{parsed.port or 5432}{parsed.path}"
        return Database(url, f"{parsed.scheme} at {where} (from DATABASE_URL; only bench-* rows are touched)")
    admin, reason = None, "psycopg is not installed"
    try:
        import psycopg

        try:
            admin = _pg_admin_connect()
        except psycopg.OperationalError as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    except ImportError:
        pass
    if admin is not None:
        with admin:  # reachable: failures from here on are errors, not a reason to fall back
            admin.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{BENCH_DB}"')
            version = admin.execute("SHOW server_version").fetchone()[0]
        return Database(f"{PG_SERVER_URL}/{BENCH_DB}",
                        f"PostgreSQL {version} at 127.0.0.1:5432/{BENCH_DB} (created for this run)", "postgres")
    data_dir = Path(os.environ.get("OSMO_DATA_DIR", str(BASE_DIR / ".data")))
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"{BENCH_DB}.sqlite3"
    _remove_sqlite(path)
    return Database(f"sqlite:///{path}", f"SQLite file {path} (PostgreSQL unreachable: {reason})", "sqlite", path)


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def drop_database(db: Database) -> None:
    from django.db import connections

    connections.close_all()
    if db.created == "postgres":
        with _pg_admin_connect() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
    elif db.created == "sqlite" and db.sqlite_path is not None:
        _remove_sqlite(db.sqlite_path)


# ---- documents ---------------------------------------------------------------------------------------

def platform_names(count: int) -> list[str]:
    return [PLATFORM_NAMES[i] if i < len(PLATFORM_NAMES) else f"platform{i}" for i in range(count)]


def pool_body(index: int, platforms: list[str], tag: str = "") -> dict:
    return {
        "backend": "default",
        "description": f"Benchmark pool {index}{tag}",
        "default_platform": platforms[0] if platforms else None,
        "common_default_variables": {"USER_CPU": 16, "USER_GPU": 1, "USER_MEMORY": "64Gi", "USER_STORAGE": "500Gi"},
        "common_resource_validations": ["default_cpu", "default_memory", "default_storage", "default_gpu"],
        "common_pod_template": ["default_ctrl", "default_user"],
        "default_exec_timeout": "2h",
        "default_queue_timeout": "2h",
        "max_exec_timeout": "8h",
        "max_queue_timeout": "8h",
        "platforms": {
            name: {
                "description": f"{name.upper()} nodes of pool {index}{tag}",
                "default_variables": {"USER_MEMORY": "128Gi"},
                "override_pod_template": ["gpu_toleration"],
                "resource_validations": [],
            }
            for name in platforms
        },
    }


def build_document(prefix: str, count: int, platforms: int, tag: str = "", start: int = 0) -> dict:
    names = platform_names(platforms)
    return {"pools": {f"{prefix}{i:04d}": pool_body(i, names, tag) for i in range(start, start + count)}}


# ---- measuring ---------------------------------------------------------------------------------------

@contextmanager
def measure(sink: dict):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        yield
        sink["seconds"] = time.perf_counter() - start
    sink["queries"] = len(queries.captured_queries)
    sink["transaction"] = sum(q["sql"] in ("BEGIN", "COMMIT", "ROLLBACK") for q in queries.captured_queries)


def timed_import(document: dict) -> tuple[dict, object]:
    from pools.config import writes
    from pools.models import ConfigKind

    sample: dict = {}
    with measure(sample):
        result = writes.import_document(ConfigKind.POOL, document, author=AUTHOR, description="benchmark")
    return sample, result


def delete_bench_rows() -> None:
    from django.db import transaction

    from pools.models import ConfigKind, ConfigRevision, Pool

    with transaction.atomic():
        Pool.objects.filter(name__startswith=PREFIX).delete()  # platforms cascade
        ConfigRevision.objects.filter(kind=ConfigKind.POOL, name__startswith=PREFIX).delete()


def expect(result, *, created=0, updated=0, unchanged=0) -> None:
    got = (len(result.created), len(result.updated), len(result.unchanged))
    if got != (created, updated, unchanged):
        raise SystemExit(f"unexpected import result: created/updated/unchanged = {got}, "
                         f"expected {(created, updated, unchanged)}")


def baseline_insert(document: dict) -> dict:
    """The same pools and platforms with plain bulk_create: no validation, no comparison, no revisions."""
    from django.db import transaction
    from django.utils import timezone

    from pools.models import Backend, Platform, Pool

    backend = Backend.objects.get(name="default")
    sample: dict = {}
    with measure(sample), transaction.atomic():
        now = timezone.now()
        pools = Pool.objects.bulk_create(
            Pool(name=name, backend=backend, updated_at=now,
                 **{k: v for k, v in body.items() if k not in ("backend", "platforms")})
            for name, body in document["pools"].items()
        )
        Platform.objects.bulk_create(
            Platform(pool=pool, name=name, position=position, **platform)
            for pool in pools
            for position, (name, platform) in enumerate(document["pools"][pool.name]["platforms"].items())
        )
    return sample


def summarize(samples: list[dict]) -> tuple[float, float, str]:
    seconds = [s["seconds"] for s in samples]
    counts = sorted({s["queries"] for s in samples})
    queries = str(counts[0]) if len(counts) == 1 else "/".join(str(s["queries"]) for s in samples)
    return statistics.median(seconds), min(seconds), queries


def run(args) -> None:
    from pools.models import Platform, Pool

    pools, platforms = args.pools, args.platforms
    label = f"{pools} pools x {platforms} platforms"
    document = build_document(f"{PREFIX}pool-", pools, platforms)
    changed = build_document(f"{PREFIX}pool-", pools, platforms, tag=" (revised)")
    steps: dict[str, list[dict]] = {"create": [], "unchanged": [], "update": [], "baseline": []}

    delete_bench_rows()
    others = Pool.objects.exclude(name__startswith=PREFIX).count()
    print(f"pools stored before the run (not bench-*): {others}")
    for _ in range(args.repeat):
        delete_bench_rows()
        sample, result = timed_import(document)
        expect(result, created=pools)
        steps["create"].append(sample)
        sample, result = timed_import(document)
        expect(result, unchanged=pools)
        steps["unchanged"].append(sample)
        sample, result = timed_import(changed)
        expect(result, updated=pools)
        steps["update"].append(sample)

        delete_bench_rows()
        steps["baseline"].append(baseline_insert(document))
        stored = (Pool.objects.filter(name__startswith=PREFIX).count(),
                  Platform.objects.filter(pool__name__startswith=PREFIX).count())
        if stored != (pools, pools * platforms):
            raise SystemExit(f"baseline stored {stored} pools/platforms, expected {(pools, pools * platforms)}")
        delete_bench_rows()

    print(f"repeats: {args.repeat} (times: median, min)")
    if steps["create"][0]["transaction"]:
        print(f"(query counts include the {steps['create'][0]['transaction']} BEGIN/COMMIT statements "
              "Django logs per import)")
    for key, title in (("create", f"import {label}"),
                       ("unchanged", f"re-import unchanged {label}"),
                       ("update", f"re-import {label}, every description changed")):
        median, low, queries = summarize(steps[key])
        per_pool = steps[key][0]["queries"] / pools
        print(f"{title}: median {median:.3f} s (min {low:.3f} s), {queries} queries ({per_pool:.3f} per pool)")
    base_median, base_min, base_queries = summarize(steps["baseline"])
    create_median = statistics.median(s["seconds"] for s in steps["create"])
    ratio = create_median / base_median if base_median else float("inf")
    print(f"baseline bulk_create of the same rows: median {base_median:.3f} s (min {base_min:.3f} s), "
          f"{base_queries} queries; ratio {ratio:.1f}x")

    growth(args)


def growth(args) -> None:
    """A 10-pool import (create, unchanged, update) with more and more other pools stored."""
    from pools.models import ConfigKind, ConfigRevision, Pool

    probe_prefix = f"{PREFIX}probe-"
    probe = build_document(probe_prefix, 10, args.platforms)
    probe_changed = build_document(probe_prefix, 10, args.platforms, tag=" (revised)")
    levels = [0, *args.stored]
    rows: list[tuple[int, dict, dict, dict]] = []
    stored = 0
    delete_bench_rows()
    for level in levels:
        if level > stored:  # not measured: one import call per batch of extra pools
            _, result = timed_import(build_document(f"{PREFIX}extra-", level - stored, args.platforms, start=stored))
            expect(result, created=level - stored)
            stored = level
        create, result = timed_import(probe)
        expect(result, created=10)
        unchanged, result = timed_import(probe)
        expect(result, unchanged=10)
        update, result = timed_import(probe_changed)
        expect(result, updated=10)
        rows.append((level, create, unchanged, update))
        Pool.objects.filter(name__startswith=probe_prefix).delete()
        ConfigRevision.objects.filter(kind=ConfigKind.POOL, name__startswith=probe_prefix).delete()

    head = " / ".join(str(level) for level in levels)
    for index, what in ((1, "10-pool import"), (2, "10-pool re-import unchanged"), (3, "10-pool update")):
        counts = " / ".join(str(row[index]["queries"]) for row in rows)
        times = " / ".join(f"{row[index]['seconds'] * 1000:.0f}" for row in rows)
        print(f"{what} with {head} pools stored: {counts} queries ({times} ms)")
    first = [row[1]["queries"] for row in rows]
    if len(set(first)) > 1:
        print(f"WARNING: the 10-pool import's query count grows with the stored pools: {first}")
    delete_bench_rows()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=500)
    parser.add_argument("--platforms", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stored", type=int, nargs="*", default=[500, 2000],
                        help="other pools stored for the 10-pool import (step 4); default 500 2000")
    args = parser.parse_args()
    if args.pools < 1 or args.platforms < 1 or args.repeat < 1:
        parser.error("--pools, --platforms and --repeat must be at least 1")
    if sorted(args.stored) != args.stored or any(level < 1 for level in args.stored):
        parser.error("--stored takes increasing positive numbers")

    sys.path.insert(0, str(BASE_DIR))
    os.chdir(BASE_DIR)
    db = choose_database()
    os.environ["DATABASE_URL"] = db.url
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "1"
    print(f"database: {db.label}")

    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        from pools.config.defaults import init_defaults

        call_command("migrate", verbosity=0)
        init_defaults()
        print(f"django {django.get_version()}, backend {connection.vendor}, python {sys.version.split()[0]}")
        run(args)
    finally:
        if db.created:
            drop_database(db)
        else:
            try:
                delete_bench_rows()
            except Exception as exc:  # report, but do not hide the original error
                print(f"cleanup failed: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
