"""Benchmark: dispatch and following (issue 13): Jobs created per second by the Celery workers, submit to Job
created, and a cluster change to the workload's row.

Usage, from the project root (about 2 minutes on 2 cores with the defaults):

    .venv/bin/python benchmarks/dispatch.py [--workloads 1000] [--workers 2] [--pool prefork] [--submissions 60]
        [--gap 1.1] [--changes 40] [--nodes 32] [--warmup 10] [--redis-url URL] [--keep]
        [--kind training|notebook|inference|compute] [--throughput-only] [--api-latency-ms MS]

`--kind` (issue 43) dispatches workloads of that kind in 1: a notebook writes a StatefulSet, a headless Service
and an Ingress (a link template for the pool is set, OSMO_LINK_TEMPLATES, here and in the workers), an inference
a Deployment, a Service and an Ingress, a compute a Deployment; the baseline loop creates the same objects (the
Service and Ingress owned by the object created before them, as dispatch makes them). `--throughput-only` runs 1
alone. `--api-latency-ms` makes the stand-in answer every write that late (sleeping, the GIL free), as a real API
server's writes wait for etcd: the baseline loop and the workers wait alike, and OSMO_DISPATCH_THREADS (the creates a
worker has in flight) shows what it is for.

Database: PostgreSQL, a scratch database `osmo_bench_dispatch` on the server of DATABASE_URL if set (else
postgres://postgres@127.0.0.1:5432), dropped and recreated at start and dropped at the end (--keep leaves it).
DEBUG is off here and in every child process.

The cluster: the tests' stand-in API server (tests/kube_standin.py, real HTTP) in a thread of this process, with
--nodes H100 nodes of 8 GPUs (labelled runwhere.ai/pool=training) and their GPU Operator pods. The backend
`default` points at it by a kubeconfig (`manage.py backend add default --kubeconfig ...`, as tests/test_sync.py
does), so the workers reach it as in production: `pools.fleet.sync.cluster_for(backend)` and the real
`kubernetes` client. One full sync (`BackendSync.run(seconds=0)`) writes the nodes and their memberships.
The world is benchmarks/submit.py's: the default configuration, a pool `training` on that backend (node
selector runwhere.ai/pool=training, platform h100, pod template default_user, the default validations),
department research, project vision (100,000 GPUs deserved) with member researcher holding a role that
allows the pool.

The workers: --workers real `celery -A osmo_site worker` processes (--pool prefork or solo, concurrency 1
each; no beat), on a private `redis-server` started on a free port and stopped at the end (--redis-url
instead uses that Redis database, which must be empty, and flushes it at the end). Broker and database reach
them through CELERY_BROKER_URL and DATABASE_URL; OSMO_ADMISSION_ON_COMMIT is on everywhere.

Measured (time.perf_counter, wall time):
  1. Dispatch throughput. --workloads ADMITTED workloads (bulk_create: clones of one workload submitted through
     the API, so the same rendered pod template; pool training, platform h100, a placement), and one
     `dispatch_workload` message each, sent as the admission cycle sends them (`outbox.dispatch_on_commit` in
     one transaction). Timed from the first message sent until a poll (every 20 ms) finds every row
     SCHEDULING: Jobs per second. The messages carry up to 25 ids each (scheduling.run.outbox.BATCH); each batch
     is one transaction (`dispatch_many`): its rows locked by one statement, then for each workload its process's
     client for the backend (`shared_cluster_for`: one per backend and process, the first one connects), the
     namespace ensured (a GET, once per client: the process remembers it), the Job created (a POST), up to
     OSMO_DISPATCH_THREADS (default 4) workloads' creates in flight at once; then the rows
     and their events written in one round trip, one commit. --warmup workloads are dispatched first, untimed (the
     workers import the kubernetes client before they fork, at `worker_init`).
     Baseline, same run, same stand-in: the same manifests (`job_manifest` of each row) created by one plain
     loop here calling `KubeCluster.create_job` on one client; those Jobs are deleted before the workers run.
     Printed: both rates and the ratio. For information: the same loop doing the cluster half of each dispatch
     (a client per Job from `cluster_for`, `ensure_namespace`, `create_job`), which separates the cost of
     connecting per dispatch from that of Celery and the database.
  2. Submit to Job created, free capacity: --submissions `POST /api/workloads/` (the example request, 1 GPU)
     through DRF's APIClient in this process, one at a time, at least --gap seconds apart (the submit's
     request for an admission cycle is debounced to one a second, see the notes). For each, the
     time from the POST to the Job appearing in the stand-in (polled every 2 ms) and to its row SCHEDULING
     (polled every 5 ms): median, 95th percentile, max. For reference: the POST's own answer time, the
     countdown of the cycle message (scheduling.run.outbox.CYCLE_DEBOUNCE_SECONDS, read from the code) and the
     cycles' own seconds as the worker recorded them (AdmissionState.last_cycle).
  3. Status lag: `manage.py sync default` (BackendSync rounds, watching nodes, pods and Jobs) as a child
     process, after it has read every Job of 2. For --changes of those workloads one at a time, a Running pod
     of its Job appears in the stand-in (what the kubelet would write; tests/scheduling/test_lifecycle.py's
     `pod()`); timed from the change until a poll (every 5 ms) finds the row RUNNING (the sync stores the
     pod in ManagedJob, commits, and its `managed_jobs_changed` receiver `follow.observe` moves the row).
     Baseline, same changes: a plain `KubeCluster.watch_pods` client in a thread here, from the change to its
     receiving the event. Printed: median and 95th percentile of both and the ratio of the medians.

Notes. The stand-in shares this process (and its GIL) with the baselines' loops, the polls and, in 2, the API;
the workers and the sync are processes of their own, as in production, on the same 2 cores. The submit's cycle
request is debounced: the first in a second sends a cycle that runs when the second ends, so every submission
of that second is in it; --gap spaces the POSTs so that each one's latency includes a whole debounce window
(the worst case) rather than sharing a cycle with the previous one. The status lag includes the sync's batch
window (pools.fleet.sync.BATCH_WAIT, 0.2 s: a batch waits that long for more events once one has come).
"""

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers

bench.BENCH_DB = "osmo_bench_dispatch"
BASE_DIR = Path(__file__).resolve().parent.parent
BACKEND = "default"
POOL = "training"
PLATFORM = "h100"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
TAG = "bench-dispatch"  # Workload.workflow of the rows of scenario 1
H100 = {"h100": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": PRODUCT}}}}
REQUEST = {"name": "resnet", "project": "vision", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
           "command": ["python", "train.py"], "resources": {"gpu": 1, "cpu": "4", "memory": "16Gi"}}
CHILD_ENV = {"DEBUG": "0", "LOG_LEVEL": "WARNING", "OSMO_ADMISSION_ON_COMMIT": "1"}


def percentile(values: list[float], share: float) -> float:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for(what: str, check, timeout: float, interval: float = 0.05, alive=None):
    """Polls `check()` until it is truthy; `alive()` may raise when a child died meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# ---- child processes ---------------------------------------------------------------------------------------

class Children:
    """The processes this run starts (Redis, workers, the sync), each in its own session, stopped by pid."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.processes: list[tuple[str, subprocess.Popen, Path]] = []

    def start(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = self.scratch / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.processes.append((name, process, log))
        return process

    def check(self) -> None:
        for name, process, log in self.processes:
            if process.poll() is not None:
                raise SystemExit(f"{name} exited with {process.returncode}; its log ends:\n{tail(log)}")

    def stop(self, process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        entry = next((e for e in self.processes if e[1] is process), None)
        if entry is None:
            return
        self.processes.remove(entry)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # its own group: the prefork children too
                process.wait(timeout=10)
        # A prefork worker's pool children are in its session; none may outlive the run.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for _, process, _ in reversed(list(self.processes)):
            self.stop(process)


def start_redis(children: Children) -> tuple[str, subprocess.Popen]:
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on PATH: install it, or pass --redis-url redis://HOST:PORT/N "
                         "naming an empty scratch database")
    port = free_port()
    process = children.start("redis", [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--dir", str(children.scratch)])
    client = redis.Redis(port=port)

    def up() -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    wait_for("redis-server", up, 20, alive=children.check)
    return f"redis://127.0.0.1:{port}/0", process


def scratch_redis(url: str) -> None:
    import redis

    size = redis.Redis.from_url(url).dbsize()
    if size:
        raise SystemExit(f"--redis-url {url} holds {size} keys; name an empty scratch database")


def start_workers(children: Children, count: int, pool: str) -> list[subprocess.Popen]:
    from django.conf import settings

    env = {**os.environ, **CHILD_ENV}
    queues = ",".join(sorted({queue for queues in settings.OSMO_WORKER_QUEUES.values() for queue in queues}))
    workers = []
    for index in range(1, count + 1):
        workers.append(children.start(f"worker{index}", [
            sys.executable, "-m", "celery", "-A", "osmo_site", "worker", "--pool", pool, "--concurrency", "1",
            "--hostname", f"bench{index}@%h", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--queues", queues], env))
    from celery import current_app

    def all_answer() -> bool:
        replies = current_app.control.ping(timeout=0.5) or []
        names = {name for reply in replies for name in reply}
        return sum(1 for name in names if name.startswith("bench")) >= count

    wait_for(f"{count} workers to answer a ping", all_answer, 90, alive=children.check)
    return workers


# ---- the world ---------------------------------------------------------------------------------------------

def setup_django(broker: str) -> None:
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["CELERY_BROKER_URL"] = broker
    os.environ.update(CHILD_ENV)
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(f"django {django.get_version()}, python {sys.version.split()[0]}, DEBUG off")


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def drop_database() -> None:
    from django.conf import settings

    if settings.configured:
        bench.drop_database()  # closes Django's connections first
        return
    with bench.admin_connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{bench.BENCH_DB}" WITH (FORCE)')


def fill_cluster(standin, nodes: int) -> list[str]:
    from tests.kube_objects import make_node, make_pod

    names = [f"dgx-{i:03d}" for i in range(nodes)]
    standin.add_nodes(make_node(name, gpus=8, product=PRODUCT, labels={"runwhere.ai/pool": POOL}) for name in names)
    pods = []
    for name in names:
        pods.append(make_pod(f"toolkit-{name}", name, namespace="gpu-operator", cpu="10m", memory="64Mi",
                             labels={"app": "nvidia-container-toolkit-daemonset"}))
        pods.append(make_pod(f"dcgm-{name}", name, namespace="gpu-operator", cpu="10m", memory="64Mi",
                             labels={"app": "nvidia-dcgm-exporter"}))
    standin.add_pods(pods)
    return names


def full_sync() -> None:
    from pools.fleet.sync import BackendSync, cluster_for
    from pools.models import Backend

    backend = Backend.objects.get(name=BACKEND)
    cluster = cluster_for(backend)
    try:
        BackendSync(backend, cluster).run(seconds=0)
    finally:
        cluster.close()


def build_world(kubeconfig: str, nodes: list[str]):
    """The world of the docstring; returns the researcher."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from pools.config import writes
    from pools.config.defaults import init_defaults
    from pools.models import ConfigKind, Node, Role, RoleAssignment

    init_defaults(author="bench")
    call_command("backend", "add", BACKEND, "--kubeconfig", kubeconfig, stdout=open(os.devnull, "w"))  # noqa: SIM115
    writes.import_document(ConfigKind.POD_TEMPLATE, H100, author="bench")
    writes.import_document(ConfigKind.POOL, {"pools": {POOL: {
        "name": POOL, "backend": BACKEND, "default_platform": PLATFORM, "common_pod_template": ["default_user"],
        "node_selector": {"runwhere.ai/pool": POOL},
        "common_resource_validations": ["default_cpu", "default_memory", "default_storage", "default_gpu"],
        "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"},
        "platforms": {PLATFORM: {"override_pod_template": ["h100"]}}}}}, author="bench")
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-training", "policies": [{"actions": [
        {"base": "http", "path": f"/api/pool/{POOL}*", "method": "post"}]}]}, author="bench")
    writes.import_document(ConfigKind.DEPARTMENT, {"research": {"name": "research"}}, author="bench")
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["researcher"]},
        "default_node_pools": [POOL],
        "resources": [{"node_pool": POOL, "gpu": {"deserved": 100_000, "limit": -1}}]}}, author="bench")
    full_sync()
    placed = Node.objects.filter(backend__name=BACKEND, pool_names=[POOL], platform_names=[f"{POOL}/{PLATFORM}"],
                                 status="Ready", gpu_free=8).count()
    if placed != len(nodes):
        found = list(Node.objects.values_list("name", "status", "pool_names", "platform_names", "gpu_free")[:5])
        raise SystemExit(f"{placed} of {len(nodes)} nodes are Ready in {POOL}/{PLATFORM} after the sync: {found}")
    researcher = get_user_model().objects.create_user("researcher")
    RoleAssignment.objects.create(user=researcher, role=Role.objects.get(name="osmo-training"))
    return researcher


def api_client(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client


# ---- 1. dispatch throughput --------------------------------------------------------------------------------

def admitted_rows(user, count: int, nodes: list[str], tag: str, kind: str = "training") -> list[str]:
    """`count` ADMITTED clones of one workload submitted through the API (with no cycle asked for)."""
    from django.test import override_settings
    from django.utils import timezone

    from pools.models import Pool
    from scheduling.models import Status, Workload

    with override_settings(OSMO_ADMISSION_ON_COMMIT=False):
        response = api_client(user).post("/api/workloads/", {**REQUEST, "name": "template", "kind": kind},
                                         format="json")
    if response.status_code != 201:
        raise SystemExit(f"the template submission answered {response.status_code}: {response.content[:300]!r}")
    template = Workload.objects.get(pk=response.json()["id"])
    pool = Pool.objects.get(name=POOL)
    fields = [f.attname for f in Workload._meta.concrete_fields if not f.primary_key]
    now = timezone.now()
    rows = []
    for index in range(count):
        values = {name: getattr(template, name) for name in fields}
        values.update(id=uuid.uuid4(), name=f"dispatch-{index:05d}", workflow=tag, status=Status.ADMITTED,
                      pool_id=pool.pk, platform=PLATFORM, placement={nodes[index % len(nodes)]: 1}, reasons=[],
                      positions={}, admitted_at=now, updated_at=now)
        rows.append(Workload(**values))
    Workload.objects.bulk_create(rows, batch_size=1000)
    template.delete()
    return [str(row.id) for row in rows]


def manifests(tag: str) -> list[tuple[str, "Made"]]:
    """Per workload, what dispatch writes for it (`workload_objects`): the main object (a Job, Deployment or
    StatefulSet) and, for a kind with a port, a function making its Service and Ingress once the main object's
    uid is known."""
    from django.conf import settings

    from pools.cluster.kinds import INGRESS, SERVICE
    from scheduling.models import Workload
    from scheduling.run import links, workload_objects
    from scheduling.run.dispatch import attempt_of
    from scheduling.specs import deployments, ingress

    made = []
    prefix = settings.OSMO_LABEL_PREFIX
    for workload in Workload.objects.filter(workflow=tag).select_related("pool__backend", "project").order_by("name"):
        attempt = attempt_of(workload)
        main = workload_objects.main_of(workload, attempt)
        port, template = workload_objects.port_of(workload), links.template_for(workload)

        def companions(owner, attempt=attempt, workload=workload, port=port, template=template):
            if port is None:
                return []
            service = deployments.service_manifest(attempt, workload.kind, prefix=prefix, port=port, owner=owner)
            found = [(SERVICE, service)]
            if template is not None:
                found.append((INGRESS, ingress.ingress_manifest(
                    template, ingress.Target.of(workload_objects.workload_values(workload), service, port),
                    labels=service["metadata"]["labels"], owner=owner)))
            return found

        made.append((attempt.namespace, Made(main, companions)))
    return made


class Made:
    def __init__(self, main, companions):
        self.main, self.companions = main, companions


def create_objects(cluster, namespace: str, made: "Made") -> int:
    """The objects of one workload, as dispatch creates them; returns how many."""
    from scheduling.run import workload_objects

    owner = workload_objects.create(cluster, made.main, namespace)
    extra = made.companions(owner)
    for kind, body in extra:
        cluster.create_object(kind, body, namespace=namespace)
    return 1 + len(extra)


def delete_jobs(kube, standin) -> None:
    """Everything the baselines or the workers created: Jobs and the long-running kinds' objects."""
    from pools.cluster.kinds import WORKLOAD_KINDS

    for job in standin.jobs():
        kube.delete_job(job["metadata"]["namespace"], job["metadata"]["name"])
    for kind in WORKLOAD_KINDS.values():
        for obj in standin.objects(kind):
            kube.delete_object(kind, obj["metadata"]["name"], namespace=obj["metadata"]["namespace"])


def main_objects(standin, kind: str) -> list[dict]:
    from pools.cluster.kinds import WORKLOAD_KINDS
    from scheduling.specs.deployments import MAIN_KIND

    return standin.jobs() if kind == "training" else standin.objects(WORKLOAD_KINDS[MAIN_KIND[kind]])


def connect_each_time(made: list[tuple[str, dict]]) -> float:
    """What `dispatch` asks of the cluster for each Job, from a plain loop: a client from `cluster_for`, the
    namespace ensured, the Job created. Returns the seconds."""
    from django.conf import settings

    from pools.fleet.sync import cluster_for
    from pools.models import Backend
    from scheduling.specs.jobs import MANAGED, MANAGED_VALUE

    backend = Backend.objects.get(name=BACKEND)
    prefix = settings.OSMO_LABEL_PREFIX
    labels = {f"{prefix}{MANAGED}": MANAGED_VALUE, f"{prefix}project": REQUEST["project"]}
    started = time.perf_counter()
    for namespace, objects in made:
        cluster = cluster_for(backend)
        cluster.ensure_namespace(namespace, labels)
        create_objects(cluster, namespace, objects)
    return time.perf_counter() - started


def send_dispatches(ids: list[str]) -> float:
    """As the admission cycle does: one message per id on commit. Returns the seconds the sending took."""
    from django.db import transaction

    from scheduling.run.outbox import dispatch_on_commit

    started = time.perf_counter()
    with transaction.atomic():
        dispatch_on_commit(ids)
    return time.perf_counter() - started


def scheduled(tag: str) -> int:
    from scheduling.models import Status, Workload

    return Workload.objects.filter(workflow=tag, status=Status.SCHEDULING).count()


def statuses(tag: str) -> dict:
    from django.db.models import Count

    from scheduling.models import Workload

    return dict(Workload.objects.filter(workflow=tag).values_list("status").annotate(n=Count("id")))


def objects_named(standin) -> str:
    from pools.cluster.kinds import WORKLOAD_KINDS

    counts = {"Job": len(standin.jobs()), **{name: len(standin.objects(kind)) for name, kind in WORKLOAD_KINDS.items()}}
    return ", ".join(name for name, n in counts.items() if n)


def bench_throughput(args, user, kube, standin, children: Children, nodes: list[str]) -> None:
    print(f"\n1. Dispatch throughput: {args.workloads:,} ADMITTED workloads, {args.workers} workers "
          f"(--pool {args.pool}, concurrency 1)")
    warm = admitted_rows(user, args.warmup, nodes, f"{TAG}-warmup", args.kind) if args.warmup else []
    ids = admitted_rows(user, args.workloads, nodes, TAG, args.kind)
    made = manifests(TAG)

    started = time.perf_counter()
    count = sum(create_objects(kube, namespace, objects) for namespace, objects in made)
    base = time.perf_counter() - started
    if len(main_objects(standin, args.kind)) != len(made):
        raise SystemExit(f"the baseline left {len(main_objects(standin, args.kind))} objects for {len(made)} "
                         "workloads")
    delete_jobs(kube, standin)
    connecting = connect_each_time(made)
    delete_jobs(kube, standin)

    if warm:
        send_dispatches(warm)
        wait_for("the warm-up dispatches", lambda: scheduled(f"{TAG}-warmup") == len(warm), 120,
                 alive=children.check)
    sending = send_dispatches(ids)  # the clock starts as the first message goes
    started = time.perf_counter() - sending
    deadline = time.monotonic() + max(120, args.workloads * 0.5)
    while (done := scheduled(TAG)) < len(ids):
        children.check()
        if time.monotonic() > deadline:
            raise SystemExit(f"{done} of {len(ids)} dispatched before the deadline; statuses {statuses(TAG)}")
        time.sleep(0.02)
    wall = time.perf_counter() - started
    wanted = set(ids)
    created = sum(1 for obj in main_objects(standin, args.kind)
                  if obj["metadata"]["labels"].get("runwhere.ai/workload") in wanted)
    if created != len(ids):
        raise SystemExit(f"{created} main objects in the stand-in for {len(ids)} workloads SCHEDULING")
    what = f"{args.kind} workloads ({count // len(made)} objects each: {objects_named(standin)})"
    print(f"workers: {len(ids):,} {what} in {wall:.2f} s, {len(ids) / wall:,.1f} workloads/s "
          f"(sending the {len(ids):,} messages took {sending:.2f} s of it)")
    print(f"baseline (the same {count:,} objects, one loop creating them on one client): "
          f"{base:.2f} s, {len(made) / base:,.1f} workloads/s")
    print(f"ratio workers / baseline: {base / wall:.2f} (the baseline is {wall / base:.1f}x faster)")
    print(f"(for information: the same loop doing the cluster half of each dispatch, a client per workload from "
          f"`cluster_for`, `ensure_namespace` and the creates: {connecting:.2f} s, {len(made) / connecting:,.1f} "
          "workloads/s)")

    # Free the capacity for 2: the Jobs and rows of 1 go.
    from scheduling.models import Workload

    delete_jobs(kube, standin)
    Workload.objects.filter(workflow__in=[TAG, f"{TAG}-warmup"]).delete()


# ---- 2. submit to Job created ------------------------------------------------------------------------------

def bench_submit(args, user, standin, children: Children) -> list[str]:
    from scheduling.models import AdmissionState, Status, Workload
    from scheduling.run import outbox
    from scheduling.specs.jobs import job_name

    print(f"\n2. Submit to Job created, free capacity: {args.submissions} submissions, at least {args.gap} s apart")
    full_sync()  # the backend synced just now (admission needs it online), and the rows of 1's Jobs gone
    client = api_client(user)
    namespace = None
    answered, to_job, to_row, cycles, ids, missed = [], [], [], [], [], []
    last = 0.0
    for index in range(args.submissions):
        time.sleep(max(0.0, last + args.gap - time.perf_counter()))
        started = last = time.perf_counter()
        response = client.post("/api/workloads/", {**REQUEST, "name": f"resnet-{index}"}, format="json")
        posted = time.perf_counter()
        if response.status_code != 201:
            raise SystemExit(f"submission {index} answered {response.status_code}: {response.content[:300]!r}")
        workload_id = response.json()["id"]
        namespace = namespace or Workload.objects.select_related("project").get(pk=workload_id).project.namespace
        name = job_name(workload_id, 1)
        deadline = started + 30
        found = None
        while found is None and time.perf_counter() < deadline:
            try:
                standin.job(name, namespace=namespace)
                found = time.perf_counter()
            except KeyError:
                time.sleep(0.002)
        if found is None:
            children.check()
            missed.append(workload_id)
            continue
        while not Workload.objects.filter(pk=workload_id, status=Status.SCHEDULING).exists():
            time.sleep(0.005)
        row = time.perf_counter()
        answered.append(posted - started)
        to_job.append(found - started)
        to_row.append(row - started)
        ids.append(workload_id)
        state = AdmissionState.objects.filter(pk=1).values_list("last_cycle", flat=True).first() or {}
        cycles.append(float(state.get("seconds") or 0))
    if missed:
        print(f"!! {len(missed)} submissions had no Job within 30 s (statuses: "
              f"{sorted(set(Workload.objects.filter(pk__in=missed).values_list('status', flat=True)))})")
    if not to_job:
        raise SystemExit("no submission got its Job")
    print(f"{'from the POST to':<40}{'median':>10}{'p95':>10}{'max':>10}")
    for label, values in (("the POST answered (201)", answered), ("the Job in the stand-in", to_job),
                          ("the row SCHEDULING", to_row)):
        print(f"{label:<40}{ms(statistics.median(values)):>10}{ms(percentile(values, 0.95)):>10}"
              f"{ms(max(values)):>10}")
    print(f"submit to Job created ({len(to_job)} submissions): median {ms(statistics.median(to_job))}, "
          f"95th percentile {ms(percentile(to_job, 0.95))}")
    print(f"(of which: the cycle message's countdown {ms(outbox.CYCLE_DEBOUNCE_SECONDS)} "
          f"(scheduling.run.outbox.CYCLE_DEBOUNCE_SECONDS); the cycle itself, as the worker recorded it, "
          f"median {ms(statistics.median(cycles))})")
    return ids


# ---- 3. status lag -----------------------------------------------------------------------------------------

def running_pod(standin, workload) -> dict:
    """What the kubelet would write for replica 0 of the workload's Job (test_lifecycle.py's `pod()`)."""
    job = standin.job(workload.job_name, namespace=workload.namespace)
    labels = {**job["spec"]["template"]["metadata"]["labels"], "batch.kubernetes.io/job-name": workload.job_name}
    node = next(iter(workload.placement), "dgx-000")
    return {"metadata": {"name": f"{workload.job_name}-0-bench", "namespace": workload.namespace, "labels": labels,
                         "annotations": {"batch.kubernetes.io/job-completion-index": "0"}},
            "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "train", "state": {
                           "running": {"startedAt": "2026-11-25T10:00:00Z"}}}]}}


class RawWatcher:
    """The baseline: a plain pod watch through the real client, noting when each pod's event arrives."""

    def __init__(self, kube, standin):
        self.seen: dict[str, float] = {}
        self.error: BaseException | None = None
        self._kube = kube
        self._version = standin.resource_version
        self._thread = threading.Thread(target=self._run, name="raw-pod-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._kube.watch_pods(self._version, timeout_seconds=3600):
                name = (event.object.get("metadata") or {}).get("name")
                if name and name not in self.seen:
                    self.seen[name] = time.perf_counter()
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def join(self) -> None:
        self._thread.join(timeout=10)


def bench_status_lag(args, ids: list[str], kube, standin, children: Children) -> None:
    from pools.models import ManagedJob
    from scheduling.models import Status, Workload

    workloads = list(Workload.objects.filter(pk__in=ids, status=Status.SCHEDULING).order_by("submitted_at"))
    workloads = workloads[:args.changes]
    print(f"\n3. Status lag: a Running pod in the stand-in to the row RUNNING, {len(workloads)} changes, "
          "`manage.py sync default` watching in a child process")
    if not workloads:
        raise SystemExit("no SCHEDULING workload to change")
    watches = standin.open_watches
    sync = children.start("sync", [sys.executable, "manage.py", "sync", BACKEND], {**os.environ, **CHILD_ENV})
    wait_for("the sync's three watches", lambda: standin.open_watches >= watches + 3, 60, alive=children.check)
    names = [w.job_name for w in workloads]
    wait_for("the sync to store every Job of 2", lambda: ManagedJob.objects.filter(name__in=names).count()
             == len(names), 60, alive=children.check)
    raw = RawWatcher(kube, standin)
    wait_for("the baseline's watch", lambda: standin.open_watches >= watches + 4, 20, alive=children.check)
    time.sleep(0.5)  # let the sync settle (its last batch committed)
    lags, deliveries = [], []
    for workload in workloads:
        pod = running_pod(standin, workload)
        started = time.perf_counter()
        standin.add_pod(pod)
        deadline = started + 30
        while not Workload.objects.filter(pk=workload.pk, status=Status.RUNNING).exists():
            if time.perf_counter() > deadline:
                children.check()
                raise SystemExit(f"workload {workload.pk} not RUNNING 30 s after its pod; its ManagedJob: "
                                 f"{ManagedJob.objects.filter(name=workload.job_name).values('pods', 'job').first()}")
            time.sleep(0.005)
        lags.append(time.perf_counter() - started)
        seen = raw.seen.get(pod["metadata"]["name"])
        if seen is None:
            raise SystemExit(f"the baseline's watch did not see pod {pod['metadata']['name']} ({raw.error!r})")
        deliveries.append(seen - started)
        time.sleep(0.1)
    children.stop(sync, signal.SIGINT, timeout=30)
    standin.end_watches()
    raw.join()
    median, base = statistics.median(lags), statistics.median(deliveries)
    print(f"{'from the change to':<48}{'median':>10}{'p95':>10}{'max':>10}")
    print(f"{'the row RUNNING (sync + follow.observe)':<48}{ms(median):>10}{ms(percentile(lags, 0.95)):>10}"
          f"{ms(max(lags)):>10}")
    print(f"{'baseline: a raw watch_pods client has the event':<48}{ms(base):>10}"
          f"{ms(percentile(deliveries, 0.95)):>10}{ms(max(deliveries)):>10}")
    print(f"status lag: median {ms(median)}, 95th percentile {ms(percentile(lags, 0.95))}; "
          f"ratio to the raw watch's delivery {median / base:.0f}x")


# ---- main --------------------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=1000, help="ADMITTED workloads dispatched in 1")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    parser.add_argument("--pool", choices=("prefork", "solo"), default="prefork", help="the workers' --pool")
    parser.add_argument("--warmup", type=int, default=10, help="untimed dispatches before 1")
    parser.add_argument("--submissions", type=int, default=60, help="POSTs timed in 2")
    parser.add_argument("--gap", type=float, default=1.1, help="seconds at least between the POSTs of 2")
    parser.add_argument("--changes", type=int, default=40, help="pod changes timed in 3 (at most --submissions)")
    parser.add_argument("--nodes", type=int, default=32, help="H100 nodes (8 GPUs each) in the stand-in")
    parser.add_argument("--redis-url", default="", help="an empty scratch Redis database instead of a private "
                                                        "redis-server (flushed at the end)")
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    parser.add_argument("--kind", choices=("training", "notebook", "inference", "compute"), default="training",
                        help="the kind of the workloads of 1 (issue 43)")
    parser.add_argument("--throughput-only", action="store_true", help="run 1 alone")
    parser.add_argument("--api-latency-ms", type=float, default=0.0,
                        help="the stand-in answers each write this late, as a real API server waits for etcd")
    args = parser.parse_args()
    if args.kind in ("notebook", "inference"):  # their link: an Ingress per workload, here and in the workers
        CHILD_ENV["OSMO_LINK_TEMPLATES"] = json.dumps({f"pool/{POOL}": {
            "host": "{name}-{id}.apps.example.org", "tls_secret": "apps-tls", "ingress_class": "nginx"}})
    if min(args.workloads, args.workers, args.submissions, args.changes, args.nodes) < 1 or args.warmup < 0:
        parser.error("the counts must be at least 1 (--warmup at least 0)")

    # SIGTERM cleans up as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    started = time.perf_counter()
    version = bench.create_database()
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    # Every step is undone at the end, the last first, each even when an earlier one fails.
    with contextlib.ExitStack() as cleanup:
        scratch = Path(tempfile.mkdtemp(prefix="osmo-bench-dispatch-"))
        cleanup.callback(shutil.rmtree, scratch, ignore_errors=True)
        if not args.keep:
            cleanup.callback(drop_database)
        if args.redis_url:
            scratch_redis(args.redis_url)  # only a database found empty is flushed at the end
            cleanup.callback(flush_redis, args.redis_url)
        children = Children(scratch)
        cleanup.callback(children.stop_all)
        if args.redis_url:
            broker, where = args.redis_url, f"{args.redis_url} (scratch database)"
        else:
            broker, _ = start_redis(children)
            where = f"{broker} (a private redis-server for this run)"
        setup_django(broker)
        from pools.cluster.kube import KubeCluster
        from tests.kube_standin import KubeStandin

        standin = KubeStandin()
        standin.write_latency = args.api_latency_ms / 1000
        cleanup.callback(standin.close)
        kubeconfig = standin.kubeconfig(scratch / "kubeconfig")
        kube = KubeCluster.from_kubeconfig(kubeconfig)
        cleanup.callback(kube.close)
        nodes = fill_cluster(standin, args.nodes)
        user = build_world(kubeconfig, nodes)
        print(f"cluster: the stand-in API server at {standin.url} (a thread here), {args.nodes} H100 nodes; "
              f"broker {where}")
        start_workers(children, args.workers, args.pool)
        print(f"workers: {args.workers} x `celery -A osmo_site worker --pool {args.pool} --concurrency 1` "
              f"(ready after {time.perf_counter() - started:.0f} s)")
        bench_throughput(args, user, kube, standin, children, nodes)
        if not args.throughput_only:
            ids = bench_submit(args, user, standin, children)
            bench_status_lag(args, ids, kube, standin, children)
        if standin.server_errors:
            print(f"!! the stand-in recorded {len(standin.server_errors)} errors; the first:\n"
                  f"{standin.server_errors[0]}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
