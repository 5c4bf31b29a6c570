"""Benchmark: one admission cycle (issue 12): `scheduling.run.cycle.run_cycle` over a large pending queue.

Usage, from the project root (about 40 s on 2 idle cores with the defaults; --profile about doubles it):

    .venv/bin/python benchmarks/admission.py [--pending 10000] [--projects 200] [--departments 20] [--pools 100]
        [--nodes 5000] [--profile] [--keep]

Database: PostgreSQL, a scratch database `osmo_bench_admission` on the server of DATABASE_URL if set (else
postgres://postgres@127.0.0.1:5432), dropped and recreated at start and dropped at the end (--keep leaves it).
DEBUG is off, so Django's debug cursor is not in the times.

Fleet: --pools pools through the configuration write path (benchmarks/pages.py's pools: default platform h100)
on the one backend `default`, marked simulated and synced just now; --nodes nodes (bulk_create) spread evenly
over the pools, each Ready, schedulable, 8 free H100 GPUs, 192 cores and 2 TiB allocatable, nothing requested,
with its membership (platform h100). --departments departments of --projects projects (bulk_create); each
department has --pools / --departments "home" pools, and each of its projects a quota there of an equal share of
the pool's GPUs (deserved; CPU and memory not set), the department the sum. --pending PENDING workloads
(bulk_create), spread round-robin over the projects: 1 to 3 candidate pools among the project's home pools,
1 to 8 GPUs per replica (16 cores and 128 GiB per GPU), 1 replica mostly (8 % two, 2 % four), 70 % normal and
30 % low priority, a template per candidate pool naming its default platform, submitted one second apart.

Measured:
  1. One cycle (`run_cycle()`, wall time including the commit and its dispatch messages, sent on commit to a
     filesystem broker in a scratch data directory): admitted count, seconds, admissions per second, rows written,
     the time after the decisions were written (the commit and the messages) and the messages sent; for
     information, the same admissions sent one message each (as the cycle did before scheduling.run.outbox.BATCH).
     Baseline, same run: every workload restored to PENDING, then, in one transaction, only the
     writes of the same admissions done the fastest way we know: one `UPDATE ... FROM unnest(arrays)` of status,
     pool, platform, placement and admitted_at and a COPY of their events; the ratio cycle / baseline (what
     reading, deciding and the reasons of the rest cost on top of the writes). VACUUM ANALYZE runs before each,
     so both start alike. For information, restored again: the same writes through Django's
     `Workload.objects.bulk_update` (a CASE WHEN per row and field, batches of 1000) and `bulk_create`, which
     the cycle used first (12 s for 8,285 admissions, 684 a second).
  2. Nothing admissible: every workload restored to PENDING and made normal priority, every quota's deserved
     GPUs set to 0; one cycle settles the reasons (timed too), then a second cycle is timed: its seconds and
     the rows it wrote (CycleResult.rows_written; 0 is the target: nothing changed).
--profile also prints, for each scenario, the reading and deciding phases timed apart (snapshot.load,
snapshot.pending, add_fair_shares, decide; in a transaction rolled back), then a cProfile of one more cycle and
its slowest SQL queries with their times.
"""

import argparse
import cProfile
import datetime as dt
import io
import os
import pstats
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py

bench.BENCH_DB = "osmo_bench_admission"
GPUS_PER_NODE = 8
NODE_CPU = 192_000  # millicores
NODE_MEMORY = 2 * 2**40
CPU_PER_GPU = 16_000
MEMORY_PER_GPU = 128 * 2**30
PLATFORM = "h100"  # benchmarks/pages.py's pools' default platform
SCRATCH = tempfile.mkdtemp(prefix="osmo-bench-admission-")


# ---- the world -----------------------------------------------------------------------------------------

def create_database() -> None:
    sys.path.insert(0, str(bench.BASE_DIR))
    os.chdir(bench.BASE_DIR)
    version = bench.create_database()
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")


def setup_django() -> None:
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    # The cycle's dispatch messages go to the filesystem broker of a scratch data directory, removed at the end.
    os.environ["OSMO_DATA_DIR"] = SCRATCH
    os.environ["CELERY_BROKER_URL"] = "filesystem://"
    os.environ["OSMO_ADMISSION_ON_COMMIT"] = "1"
    import django

    django.setup()
    from django.core.management import call_command

    from osmo_site.celery import app
    from pools.config.defaults import init_defaults

    # The site's own broker settings name no folders for the filesystem transport (the demo's broker is SQLite):
    # the scratch directory's, producer and reader alike.
    broker_folder().mkdir(parents=True, exist_ok=True)
    app.conf.broker_transport_options = {"data_folder_in": str(broker_folder()),
                                         "data_folder_out": str(broker_folder())}

    call_command("migrate", verbosity=0)
    init_defaults(author="bench")
    print(f"django {django.get_version()}, python {sys.version.split()[0]}, DEBUG off")


def add_nodes(pools: list[str], count: int) -> None:
    from django.db import transaction
    from django.utils import timezone

    from pools.models import Backend, Node, NodeMembership, Pool

    backend = Backend.objects.get(name="default")
    pool_ids = dict(Pool.objects.values_list("name", "pk"))
    now = timezone.now()
    for first in range(0, count, 5000):
        made = []
        for index in range(first, min(first + 5000, count)):
            pool = pools[index % len(pools)]
            name = f"bench-node-{index:06d}"
            made.append((Node(
                backend=backend, name=name, uid=f"uid-{index:06d}",
                labels={"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                        "runwhere.ai/pool": pool},
                taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                conditions=[{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                cpu_capacity=NODE_CPU + 550, cpu_allocatable=NODE_CPU, memory_capacity=NODE_MEMORY + 2**30,
                memory_allocatable=NODE_MEMORY, pods_capacity=110, pods_allocatable=110,
                gpu_product="NVIDIA-H100-80GB-HBM3", gpu_count=GPUS_PER_NODE, gpu_memory_mib=81_559,
                gpu_family="hopper", gpu_total=GPUS_PER_NODE, gpu_allocatable=GPUS_PER_NODE, gpu_free=GPUS_PER_NODE,
                status="Ready", pool_names=[pool], platform_names=[f"{pool}/{PLATFORM}"], sharing="RESERVED",
                last_seen=now, updated_at=now), pool))
        with transaction.atomic():
            nodes = Node.objects.bulk_create([node for node, _ in made])
            NodeMembership.objects.bulk_create(
                NodeMembership(node=node, pool_id=pool_ids[pool], platforms=[PLATFORM])
                for node, (_, pool) in zip(nodes, made, strict=True))


def home_pools(pools: list[str], departments: int) -> dict[int, list[str]]:
    per = max(1, len(pools) // departments)
    return {d: [pools[(d * per + k) % len(pools)] for k in range(per)] for d in range(departments)}


def add_quotas(pools: list[str], nodes: int, departments: int, projects: int) -> dict[str, list[str]]:
    """Departments, projects and their quotas; returns each project's home pools."""
    from decimal import Decimal

    from pools.models import Department, Pool, Project, Quota

    homes = home_pools(pools, departments)
    pool_ids = dict(Pool.objects.values_list("name", "pk"))
    members = {d: [i for i in range(projects) if i % departments == d] for d in range(departments)}
    gpus_per_pool = nodes // len(pools) * GPUS_PER_NODE
    made = Department.objects.bulk_create(
        Department(name=f"dept-{d:02d}", description="bench", default_node_pools=homes[d][:2])
        for d in range(departments))
    department_of = {d: made[d] for d in range(departments)}
    project_rows = Project.objects.bulk_create(
        Project(name=f"p-{i % departments:02d}-{i // departments:03d}", department=department_of[i % departments],
                namespace=f"proj-p-{i % departments:02d}-{i // departments:03d}",
                default_node_pools=homes[i % departments][:2])
        for i in range(projects))
    quotas = []
    for d in range(departments):
        share = gpus_per_pool // max(1, len(members[d]))
        for pool in homes[d]:
            quotas.append(Quota(department=department_of[d], pool_id=pool_ids[pool],
                                gpu_deserved=Decimal(share * len(members[d])), cpu_deserved=None,
                                memory_deserved=None))
            for i in members[d]:
                quotas.append(Quota(project=project_rows[i], pool_id=pool_ids[pool], gpu_deserved=Decimal(share),
                                    cpu_deserved=None, memory_deserved=None, gpu_weight=(1, 2, 3)[i % 3]))
    Quota.objects.bulk_create(quotas, batch_size=5000)
    return {project_rows[i].name: homes[i % departments] for i in range(projects)}


def add_workloads(homes: dict[str, list[str]], pending: int) -> None:
    from django.utils import timezone

    from pools.models import Project
    from scheduling.models import Priority, Workload

    rng = random.Random(12)
    project_ids = dict(Project.objects.filter(name__in=homes).values_list("name", "pk"))
    names = sorted(homes)
    start = timezone.now() - dt.timedelta(seconds=pending + 60)
    rows = []
    for index in range(pending):
        project = names[index % len(names)]
        candidates = rng.sample(homes[project], min(len(homes[project]), rng.choices((1, 2, 3), (5, 3, 2))[0]))
        gpu = rng.randint(1, 8)
        roll = rng.random()
        replicas = 1 if roll < 0.90 else (2 if roll < 0.98 else 4)
        priority = Priority.LOW if rng.random() < 0.3 else Priority.NORMAL
        cpu, memory = gpu * CPU_PER_GPU, gpu * MEMORY_PER_GPU
        rows.append(Workload(
            name=f"job-{index:05d}", project_id=project_ids[project], submitter_name="bench",
            request={"replicas": replicas, "resources": {"gpu": gpu, "cpu": cpu, "memory": memory}},
            priority=priority, pools=candidates, replicas=replicas, gpu=gpu, cpu=cpu, memory=memory,
            templates={pool: {"platform": PLATFORM, "pod_template": {}} for pool in candidates},
            submitted_at=start + dt.timedelta(seconds=index)))
    Workload.objects.bulk_create(rows, batch_size=2000)


def build(args) -> None:
    from django.utils import timezone

    from pools.models import Backend, Quota

    start = time.perf_counter()
    pools = bench.create_pools(args.pools)
    Backend.objects.filter(name="default").update(kind=Backend.Kind.SIMULATED, last_sync_at=timezone.now())
    pooled = time.perf_counter()
    add_nodes(pools, args.nodes)
    noded = time.perf_counter()
    homes = add_quotas(pools, args.nodes, args.departments, args.projects)
    quoted = time.perf_counter()
    add_workloads(homes, args.pending)
    done = time.perf_counter()
    print(f"fleet: {args.pools} pools ({pooled - start:.1f} s, configuration write path), {args.nodes:,} nodes "
          f"({noded - pooled:.1f} s), {args.departments} departments, {args.projects} projects, "
          f"{Quota.objects.count():,} quota rows ({quoted - noded:.1f} s), {args.pending:,} pending workloads "
          f"({done - quoted:.1f} s)")


# ---- measuring -----------------------------------------------------------------------------------------

def vacuum() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def restore() -> None:
    """Every workload PENDING again, as built (no reasons, no positions), and no events."""
    from django.db import connection

    from scheduling.models import AdmissionState, Status, Workload, WorkloadEvent

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {WorkloadEvent._meta.db_table}")
    Workload.objects.update(status=Status.PENDING, pool=None, platform="", placement={}, admitted_at=None,
                            reasons=[], positions={})
    AdmissionState.objects.all().delete()
    vacuum()


def timed_cycle():
    from django.utils import timezone

    from pools.models import Backend
    from scheduling.run.cycle import run_cycle

    # Synced just now, as a syncing backend is: on a slow run the build's sync would pass OSMO_BACKEND_STALE_SECONDS
    # and the pools turn OFFLINE between two cycles (every reason rewritten).
    Backend.objects.update(last_sync_at=timezone.now())
    start = time.perf_counter()
    result = run_cycle()
    return result, time.perf_counter() - start


def broker_folder() -> Path:
    return Path(SCRATCH) / "broker" / "in"


def messages() -> int:
    """The messages waiting in the scratch broker; emptied."""
    files = list(broker_folder().iterdir())
    for path in files:
        path.unlink()
    return len(files)


def one_message_each(ids: list[str]) -> float:
    from scheduling.run.outbox import send

    start = time.perf_counter()
    for workload_id in ids:
        send("scheduling.tasks.dispatch_workload", workload_id)
    seconds = time.perf_counter() - start
    if messages() != len(ids):
        raise SystemExit("the broker did not get one message per admission")
    return seconds


def baseline(admitted: list[dict]) -> float:
    """Only the writes of the same admissions: the rows' new status, pool, platform, placement and admitted_at,
    and one event each, in one transaction."""
    from django.db import transaction
    from django.utils import timezone

    from pools.models import Pool
    from scheduling.models import Status, Workload, WorkloadEvent

    pool_ids = dict(Pool.objects.values_list("name", "pk"))
    start = time.perf_counter()
    now = timezone.now()
    rows, events = [], []
    for item in admitted:
        rows.append(Workload(id=item["id"], status=Status.ADMITTED, pool_id=pool_ids[item["pool"]],
                             platform=item["platform"], placement=item["placement"], admitted_at=now))
        events.append(WorkloadEvent(workload_id=item["id"], at=now, status=Status.ADMITTED, reason="ADMITTED",
                                    message=f"Admitted to pool {item['pool']}, platform {item['platform']}, on "
                                            f"{', '.join(sorted(item['placement']))}.", pools=[item["pool"]]))
    with transaction.atomic():
        written = Workload.objects.bulk_update(rows, ["status", "pool_id", "platform", "placement", "admitted_at"],
                                               batch_size=1000)
        if written != len(admitted):
            raise SystemExit(f"the baseline's bulk_update wrote {written} rows, not {len(admitted)}")
        WorkloadEvent.objects.bulk_create(events, batch_size=2000)
    return time.perf_counter() - start


def floor(admitted: list[dict]) -> float:
    """For information: the same writes as one UPDATE ... FROM unnest(arrays) and a COPY of the events."""
    import json
    import uuid

    from django.db import connection, transaction
    from django.utils import timezone

    from pools.models import Pool
    from pools.models.bulk import copy_or_bulk_create
    from scheduling.models import Status, Workload, WorkloadEvent

    pool_ids = dict(Pool.objects.values_list("name", "pk"))
    start = time.perf_counter()
    now = timezone.now()
    events = [WorkloadEvent(workload_id=item["id"], at=now, status=Status.ADMITTED, reason="ADMITTED",
                            message=f"Admitted to pool {item['pool']}, platform {item['platform']}, on "
                                    f"{', '.join(sorted(item['placement']))}.", pools=[item["pool"]])
              for item in admitted]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Workload._meta.db_table} AS w SET status = %s, pool_id = v.pool_id, platform = v.platform, "
            "placement = v.placement::jsonb, admitted_at = %s "
            "FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::text[]) AS v(id, pool_id, platform, placement) "
            "WHERE w.id = v.id",
            [Status.ADMITTED, now, [uuid.UUID(item["id"]) for item in admitted],
             [pool_ids[item["pool"]] for item in admitted], [item["platform"] for item in admitted],
             [json.dumps(item["placement"]) for item in admitted]])
        if cursor.rowcount != len(admitted):
            raise SystemExit(f"the UPDATE ... FROM unnest() wrote {cursor.rowcount} rows, not {len(admitted)}")
        copy_or_bulk_create(WorkloadEvent, events)
    return time.perf_counter() - start


def phases() -> str:
    """The cycle's reading and deciding, each timed, in a transaction rolled back (nothing written)."""
    from django.db import transaction

    from scheduling.decisions import admission as pure
    from scheduling.run import snapshot

    with transaction.atomic():
        start = time.perf_counter()
        loaded = snapshot.load()
        loading = time.perf_counter()
        queue, _ = snapshot.pending(loaded)
        reading = time.perf_counter()
        snapshot.add_fair_shares(loaded, queue)
        sharing = time.perf_counter()
        pure.decide(loaded.snapshot, queue)
        deciding = time.perf_counter()
        transaction.set_rollback(True)
    return (f"snapshot.load {loading - start:.2f} s, snapshot.pending {reading - loading:.2f} s, "
            f"add_fair_shares {sharing - reading:.2f} s, decide {deciding - sharing:.2f} s")


def profile_cycle(label: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduling.run.cycle import run_cycle

    profiler = cProfile.Profile()
    with CaptureQueriesContext(connection) as queries:
        profiler.enable()
        start = time.perf_counter()
        result = run_cycle()
        seconds = time.perf_counter() - start
        profiler.disable()
    sql = sum(float(q["time"]) for q in queries.captured_queries)
    print(f"\n   profile, {label}: {seconds:.2f} s under cProfile, {len(result.admitted):,} admitted, "
          f"{result.rows_written:,} rows written; {len(queries.captured_queries)} queries, {sql:.2f} s in SQL")
    slow = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:12]
    print("   slowest queries (s, first 110 characters):")
    for query in slow:
        print(f"   {float(query['time']):7.3f}  {' '.join(query['sql'].split())[:110]}")
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(22)
        lines = out.getvalue().splitlines()
        first = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
        print(f"   cProfile ({order}):")
        print("\n".join("   " + line for line in lines[first:] if line.strip()))


def scenario_admit(args) -> None:
    from scheduling.models import Status, Workload

    print(f"\n1. One admission cycle over {args.pending:,} pending workloads")
    vacuum()
    result, seconds = timed_cycle()
    admitted = result.admitted
    pending = Workload.objects.filter(status=Status.PENDING).count()
    print(f"cycle: considered {result.considered:,}, admitted {len(admitted):,}, still pending {pending:,}, "
          f"preempted {len(result.preempted)}, {result.rows_written:,} rows written")
    print(f"cycle: {seconds:.2f} s wall ({result.seconds:.2f} s inside run_cycle before its commit), "
          f"{len(admitted) / seconds:,.0f} admissions per second")
    print(f"after the decisions were written: {seconds - result.seconds:.2f} s, the commit and "
          f"{messages():,} dispatch messages for the {len(admitted):,} admissions "
          f"(scheduling.run.outbox.BATCH ids each)")
    print(f"(for information: one message per admission, as before the batches, sent the same way: "
          f"{one_message_each([item['id'] for item in admitted]):.2f} s)")
    restore()
    base = floor(admitted)
    print(f"baseline (the {len(admitted):,} admitted rows as one UPDATE ... FROM unnest() + a COPY of their events, "
          f"nothing else): {base:.2f} s, {len(admitted) / base:,.0f} rows per second")
    print(f"ratio cycle / baseline: {seconds / base:.1f}x")
    restore()
    print(f"(for information: the same writes through Django's bulk_update and bulk_create: "
          f"{baseline(admitted):.2f} s)")
    if args.profile:
        restore()
        print(f"\n   phases without writing: {phases()}")
        restore()
        profile_cycle("one cycle, everything pending")


def scenario_nothing(args) -> None:
    from pools.models import Quota
    from scheduling.models import Priority, Workload

    print(f"\n2. Nothing admissible: {args.pending:,} pending, every quota's deserved GPUs 0, all normal priority")
    restore()
    Quota.objects.update(gpu_deserved=0)
    Workload.objects.update(priority=Priority.NORMAL)
    vacuum()
    first, first_seconds = timed_cycle()
    print(f"first cycle (settles the reasons): {first_seconds:.2f} s, {len(first.admitted)} admitted, "
          f"{first.rows_written:,} rows written")
    vacuum()
    second, seconds = timed_cycle()
    if first.admitted or second.admitted:
        raise SystemExit("something was admitted with every deserved quota at 0")
    print(f"second cycle: considered {second.considered:,}, {len(second.admitted)} admitted")
    print(f"nothing admissible: {seconds:.2f} s, {second.rows_written:,} rows written")
    if args.profile:
        print(f"\n   phases without writing: {phases()}")
        profile_cycle("nothing admissible, reasons settled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--departments", type=int, default=20)
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile and the queries of a cycle")
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    args = parser.parse_args()
    if (args.pools < len(bench.TEAMS) or args.departments < 1 or args.projects < args.departments
            or args.pools < args.departments or args.nodes < args.pools or args.pending < 1):
        parser.error("--pools at least 10 and --departments, --projects at least --departments, "
                     "--nodes at least --pools, --pending at least 1")

    create_database()
    try:
        setup_django()
        build(args)
        scenario_admit(args)
        scenario_nothing(args)
    finally:
        if not args.keep:
            bench.drop_database()
        shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()
