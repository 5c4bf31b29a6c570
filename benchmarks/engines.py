"""Benchmark: the engine backends (issue 14): reconciling KAI's Queues and Kueue's queues from our quotas, and the
lag from an engine's reason on a PodGroup to the workload's reasons.

Usage, from the project root (about 20 seconds on 2 cores with the defaults; about 50 s with --departments 20
--projects-per 25):

    .venv/bin/python benchmarks/engines.py [--pools 8] [--departments 10] [--projects-per 10] [--repeat 3]
        [--workloads 30] [--keep] [--parts 1,2,3,4]

4,000 KAI Queues with one refused (part 4 alone, about 3 minutes):

    .venv/bin/python benchmarks/engines.py --parts 4 --departments 20 --projects-per 24

Database: PostgreSQL, a scratch database `osmo_bench_engines` on the server of DATABASE_URL if set (else
postgres://postgres@127.0.0.1:5432; OSMO_BENCH_DB names another), dropped and recreated at start and dropped at
the end (--keep leaves it).
DEBUG is off here and in the child process. OSMO_ENGINE_RECONCILE_ON_COMMIT and OSMO_ADMISSION_ON_COMMIT are off
(no Celery: every reconcile, cycle and dispatch is called here).

The cluster: the tests' stand-in API server (tests/kube_standin.py, real HTTP) in a thread of this process, a
fresh one for each measurement, reached through the real `kubernetes` client
(`KubeCluster.from_kubeconfig(standin.kubeconfig(path))`).

The world: the default configuration; a backend `engines` (KAI or Kueue as each part needs); --pools pools on it
(`pool-00`...), each with platforms h100 and a100 (pod templates selecting the GPU product, and the pool's own
node selector); --departments departments `dept-DD` of --projects-per projects `p-DD-JJJ` each, through the
configuration write path (`import_document`): every department and every project has a quota row in every pool
(GPU, CPU and memory; departments deserve more than their projects together). The migration's default department
and project are removed, as tests/schedulers/test_kueue_reconcile.py does, so the figures count ours only. With
the defaults that is 8 x (10 + 100) = 880 KAI Queues, or 16 ResourceFlavors, 10 Cohorts, 100 ClusterQueues and
100 LocalQueues (in 100 namespaces) for Kueue.

Measured (time.perf_counter, wall time):
  1. KAI reconcile (`pools.schedulers.reconcile.reconcile(backend, cluster)`, which builds the wanted objects from
     the rows with `desired.for_backend` and applies them): into an empty stand-in (every Queue created); again
     with nothing changed (it must write nothing: `writes == 0`); after one project's GPU quota in one pool changed
     (one Queue patched; the quota going back and forth). Each --repeat times, median; the first run into a fresh
     stand-in each time. For each: HTTP requests by method (the stand-in's log), and, on an untimed extra run, the
     SQL queries; `for_backend` alone is timed too.
     Baseline, same run, each time in turn with the reconcile: the same objects (`for_backend`'s, in its order)
     created by a plain loop of `KubeCluster.create_object` into a fresh stand-in, and one plain paged
     `list_objects` of them (pages of 500, as the reconcile lists). Printed: objects/s of the first run and of the
     baseline's creates, and the ratio; the no-op run against the plain list, and the ratio; the one-change run.
  2. Kueue reconcile: the same world on a Kueue backend, the same three timings and baselines. The reconcile also
     ensures each project's namespace (a GET, and a POST when missing), so the baseline's creates ensure them too
     (the same `ensure_namespace` calls) and that share is printed apart; the plain list is of the four kinds.
  3. Engine reason lag: a KAI backend whose stand-in holds 4 H100 nodes of pool-00 (one full sync: the backend is
     online). --workloads workloads submitted through the API (DRF's APIClient, project p-00-000, pool pool-00,
     1 GPU), one `run_cycle` (the cycle hands them to KAI), each dispatched (`dispatch(id, clusters=...)`: a Job
     and a PodGroup in the stand-in). Then `manage.py sync engines` follows the backend in a child process
     (watching nodes, pods, Jobs and PodGroups). For each workload, one at a time, an OverLimit
     `schedulingConditions` is written into its PodGroup (what KAI would write); timed from the change until a
     poll (every 5 ms) finds that reason in the workload row's `reasons` (the sync stores the PodGroup's facts in
     ManagedJob, commits, and its `managed_jobs_changed` receiver `follow.observe` writes the reasons).
     Baseline, same changes: a plain `watch_objects(KAI_PODGROUP, ...)` client in a thread here, from the change
     to its receiving the event. Printed: median and 95th percentile of both and the ratio of the medians.

  4. A refused object (issue 23): the KAI world into a fresh stand-in that refuses the first Queue created (HTTP 422,
     as a real server refuses a label value over 63 characters), through `reconcile.run` (which records the refusal
     on the backend row): time, objects written and requests; then the next run, which creates that one and clears
     the record. Baseline, same run, in turn: the same objects by a plain loop of `create_object` into a fresh
     stand-in refusing the same one (caught), and a plain paged list. Printed: both times and the ratios.

Notes. The stand-in shares this process (and its GIL) with the reconcile, the baselines and the polls; the sync of
3 is a process of its own, as in production. Its lag includes the sync's batch window (pools.fleet.sync.BATCH_WAIT,
0.2 s: a batch waits that long for more events once one has come).
"""

import argparse
import contextlib
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers

bench.BENCH_DB = os.environ.get("OSMO_BENCH_DB", "osmo_bench_engines")  # another name: runs side by side
BASE_DIR = Path(__file__).resolve().parent.parent
BACKEND = "engines"
PLATFORMS = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB"}
TEMPLATES = {f"bench-{name}": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": product}}}
             for name, product in PLATFORMS.items()}
PROJECT_GPUS, PROJECT_CPU, PROJECT_MEMORY_GI = 2, 16, 64
CHILD_ENV = {"DEBUG": "0", "LOG_LEVEL": "WARNING", "OSMO_ADMISSION_ON_COMMIT": "0",
             "OSMO_ENGINE_RECONCILE_ON_COMMIT": "0", "CELERY_BROKER_URL": "memory://"}
MAX_KUEUE_FLAVORS = 64  # pools.schedulers.kueue.MAX_FLAVORS


def percentile(values: list[float], share: float) -> float:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 0.1 else f"{seconds * 1000:,.0f} ms"


def wait_for(what: str, check, timeout: float, interval: float = 0.05, alive=None):
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


def pool_names(count: int) -> list[str]:
    return [f"pool-{i:02d}" for i in range(count)]


# ---- setup ---------------------------------------------------------------------------------------------------

def setup_django() -> None:
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ.update(CHILD_ENV)
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(f"django {django.get_version()}, python {sys.version.split()[0]}, DEBUG off, {os.cpu_count()} CPUs")


def drop_database() -> None:
    from django.conf import settings

    if settings.configured:
        bench.drop_database()  # closes Django's connections first
        return
    with bench.admin_connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{bench.BENCH_DB}" WITH (FORCE)')


def project_document(name: str, department: str, pools: list[str], gpus: int = PROJECT_GPUS, **more) -> dict:
    return {"name": name, "department": department, **more, "resources": [
        {"node_pool": pool, "gpu": {"deserved": gpus, "limit": 4 * PROJECT_GPUS, "over_quota_weight": "Medium"},
         "cpu": {"deserved": str(PROJECT_CPU)}, "memory": {"deserved": f"{PROJECT_MEMORY_GI}Gi"}}
        for pool in pools]}


def build_world(args) -> dict:
    """The world of the docstring; returns the project documents (to change one later)."""
    from django.contrib.auth import get_user_model

    from pools.config import writes
    from pools.config.defaults import init_defaults
    from pools.models import Backend, ConfigKind, Department, Project, Quota, Role, RoleAssignment

    started = time.perf_counter()
    init_defaults(author="bench")
    Backend.objects.create(name=BACKEND, kind=Backend.Kind.KUBERNETES, scheduler=Backend.Scheduler.KAI,
                           description="benchmarks/engines.py")
    writes.import_document(ConfigKind.POD_TEMPLATE, TEMPLATES, author="bench")
    pools = pool_names(args.pools)
    writes.import_document(ConfigKind.POOL, {"pools": {pool: {
        "name": pool, "backend": BACKEND, "default_platform": "h100", "common_pod_template": ["default_user"],
        "node_selector": {"runwhere.ai/pool": pool},
        "common_resource_validations": ["default_cpu", "default_memory", "default_storage", "default_gpu"],
        "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"},
        "platforms": {name: {"override_pod_template": [f"bench-{name}"]} for name in PLATFORMS}}
        for pool in pools}}, author="bench")
    Project.objects.filter(name=Project.DEFAULT_NAME).delete()
    Department.objects.filter(name=Department.DEFAULT_NAME).delete()
    per = args.projects_per
    writes.import_document(ConfigKind.DEPARTMENT, [{"name": f"dept-{d:02d}", "resources": [
        {"node_pool": pool, "gpu": {"deserved": per * PROJECT_GPUS + 8, "limit": -1},
         "cpu": {"deserved": str(per * PROJECT_CPU + 16)}, "memory": {"deserved": f"{per * PROJECT_MEMORY_GI + 64}Gi"}}
        for pool in pools]} for d in range(args.departments)], author="bench")
    documents = {}
    for d in range(args.departments):
        for j in range(per):
            name = f"p-{d:02d}-{j:03d}"
            more = {"members": {"users": ["researcher"]}, "default_node_pools": [pools[0]]} if not d and not j else {}
            documents[name] = project_document(name, f"dept-{d:02d}", pools, **more)
    writes.import_document(ConfigKind.PROJECT, list(documents.values()), author="bench")
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-engines", "policies": [{"actions": [
        {"base": "http", "path": f"/api/pool/{pools[0]}*", "method": "post"}]}]}, author="bench")
    researcher = get_user_model().objects.create_user("researcher")
    RoleAssignment.objects.create(user=researcher, role=Role.objects.get(name="osmo-engines"))
    print(f"world: {len(pools)} pools x {len(PLATFORMS)} platforms on backend {BACKEND}, "
          f"{args.departments} departments x {per} projects, "
          f"{Quota.objects.filter(pool__name__in=pools).count():,} quota rows "
          f"(written in {time.perf_counter() - started:.1f} s)")
    return {"documents": documents, "pools": pools, "researcher": researcher}


class Stand:
    """A fresh stand-in API server and the real client on it; closed by `close()` or at the end of the run."""

    def __init__(self, scratch: Path, name: str, cleanup: contextlib.ExitStack):
        from pools.cluster.kube import KubeCluster
        from tests.kube_standin import KubeStandin

        self.server = KubeStandin()
        self.kubeconfig = self.server.kubeconfig(scratch / f"kubeconfig-{name}")
        self.kube = KubeCluster.from_kubeconfig(self.kubeconfig)
        self._open = True
        cleanup.callback(self.close)

    def close(self) -> None:
        if self._open:
            self._open = False
            self.kube.close()
            self.server.close()

    def requests_since(self, mark: int) -> str:
        counts: dict[str, int] = {}
        for request in list(self.server.requests)[mark:]:
            counts[request.method] = counts.get(request.method, 0) + 1
        return ", ".join(f"{n} {method}" for method, n in sorted(counts.items())) or "none"

    def check(self) -> None:
        if self.server.server_errors:
            print(f"!! the stand-in recorded {len(self.server.server_errors)} errors; the first:\n"
                  f"{self.server.server_errors[0]}")


# ---- 1 and 2: reconcile --------------------------------------------------------------------------------------

def timed_reconcile(backend, stand: Stand):
    from pools.schedulers.reconcile import reconcile

    mark = len(stand.server.requests)
    started = time.perf_counter()
    result = reconcile(backend, stand.kube)
    return result, time.perf_counter() - started, stand.requests_since(mark)


def query_count(function) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        function()
    return len(captured.captured_queries)


def change_quota(world: dict, gpus: int) -> str:
    """One project's GPU quota in one pool (the first of each), through the configuration write path."""
    from pools.config import writes
    from pools.models import ConfigKind

    name = next(iter(world["documents"]))
    document = world["documents"][name]
    resources = [dict(r) for r in document["resources"]]
    resources[0] = {**resources[0], "gpu": {**resources[0]["gpu"], "deserved": gpus}}
    writes.import_document(ConfigKind.PROJECT, {name: {**document, "resources": resources}}, author="bench")
    return f"{name} in {resources[0]['node_pool']}"


def baseline_creates(stand: Stand, wanted, namespaces: dict[str, dict]) -> tuple[float, float]:
    """The same objects by a plain create loop, namespaces ensured first as the reconcile does: (namespaces s,
    objects s)."""
    started = time.perf_counter()
    for namespace, labels in namespaces.items():
        stand.kube.ensure_namespace(namespace, labels)
    ensured = time.perf_counter() - started
    started = time.perf_counter()
    for kind, objects in wanted:
        for (namespace, _), obj in objects.items():
            stand.kube.create_object(kind, obj, namespace=namespace or None)
    return ensured, time.perf_counter() - started


def baseline_list(stand: Stand, wanted) -> tuple[float, int]:
    """One plain paged list of each kind that holds objects, as the reconcile pages: (seconds, objects)."""
    from pools.cluster.reflector import list_all
    from pools.schedulers.reconcile import selector

    started = time.perf_counter()
    listed = 0
    for kind, objects in wanted:
        if objects:
            listed += len(list_all(lambda kind=kind, **kw: stand.kube.list_objects(
                kind, label_selector=selector(BACKEND), **kw)).items)
    return time.perf_counter() - started, listed


def bench_reconcile(engine: str, label: str, number: int, args, world: dict, scratch: Path,
                    cleanup: contextlib.ExitStack) -> None:
    from django.conf import settings

    from pools.cluster.kinds import KUEUE_LOCAL_QUEUE
    from pools.models import Backend
    from pools.schedulers import kai
    from pools.schedulers.desired import for_backend

    Backend.objects.filter(name=BACKEND).update(scheduler=engine)
    backend = Backend.objects.get(name=BACKEND)
    wanted = for_backend(backend)
    total = sum(len(objects) for _, objects in wanted)
    kinds = ", ".join(f"{len(objects):,} {kind.kind}s" for kind, objects in wanted if objects)
    prefix = settings.OSMO_LABEL_PREFIX
    namespaces = {}
    if engine == Backend.Scheduler.KUEUE:
        for (namespace, _), obj in sorted(dict(wanted)[KUEUE_LOCAL_QUEUE].items()):
            namespaces[namespace] = {f"{prefix}{kai.MANAGED_LABEL}": kai.MANAGED_VALUE,
                                     f"{prefix}project": obj["metadata"]["labels"][f"{prefix}project"]}
    print(f"\n{number}. {label} reconcile: {total:,} objects ({kinds}) from {len(world['pools'])} pools, "
          f"{args.departments} departments, {args.departments * args.projects_per} projects"
          + (f"; {len(namespaces)} namespaces ensured" if namespaces else ""))

    # Creates: the reconcile and the baseline in turn, each into a fresh stand-in, --repeat times.
    firsts, ensured, creates = [], [], []
    stand = base_stand = None
    first_requests = ""
    for index in range(args.repeat):
        for old in (stand, base_stand):
            if old is not None:
                old.check()
                old.close()
        stand = Stand(scratch, f"{engine}-{index}", cleanup)
        first, seconds, first_requests = timed_reconcile(backend, stand)
        if first.writes != total or len(first.created) != total or first.refused:
            raise SystemExit(f"the first run into an empty stand-in did {first.summary()} for {total} objects")
        firsts.append(seconds)
        base_stand = Stand(scratch, f"{engine}-baseline-{index}", cleanup)
        seconds_ns, seconds_objects = baseline_creates(base_stand, wanted, namespaces)
        ensured.append(seconds_ns)
        creates.append(seconds_objects)

    # Nothing changed: the reconcile (which must write nothing), the plain list and for_backend alone, in turn.
    noops, lists, builds, noop_requests, listed = [], [], [], "", 0
    for _ in range(args.repeat):
        again, seconds, noop_requests = timed_reconcile(backend, stand)
        if again.writes != 0 or again.unchanged != total:
            raise SystemExit(f"!! a reconcile with nothing changed wrote: {again.summary()} (updated "
                             f"{again.updated[:5]}, created {again.created[:5]}, deleted {again.deleted[:5]})")
        noops.append(seconds)
        seconds, listed = baseline_list(base_stand, wanted)
        lists.append(seconds)
        started = time.perf_counter()
        for_backend(backend)
        builds.append(time.perf_counter() - started)
    if listed != total:
        raise SystemExit(f"the baseline's list found {listed} objects for {total} created")
    queries = query_count(lambda: timed_reconcile(backend, stand))
    gets = 0.0
    if namespaces:
        started = time.perf_counter()
        for namespace, labels in namespaces.items():
            base_stand.kube.ensure_namespace(namespace, labels)  # present now: one GET each
        gets = time.perf_counter() - started

    changes, change_requests, changed, what = [], "", None, ""
    for index in range(args.repeat):
        what = change_quota(world, PROJECT_GPUS + 1 if index % 2 == 0 else PROJECT_GPUS)
        changed, seconds, change_requests = timed_reconcile(backend, stand)
        if changed.created or changed.deleted or not changed.updated:
            raise SystemExit(f"one quota change made the reconcile do {changed.summary()}")
        changes.append(seconds)
    if args.repeat % 2:
        change_quota(world, PROJECT_GPUS)  # as it was, for the next part
        timed_reconcile(backend, stand)
    for old in (stand, base_stand):
        old.check()
        old.close()

    first, noop, change, build = (statistics.median(v) for v in (firsts, noops, changes, builds))
    base_ns, base_objects, base_list = (statistics.median(v) for v in (ensured, creates, lists))
    base_writes = statistics.median([a + b for a, b in zip(ensured, creates, strict=True)])
    runs = f"median of {args.repeat}"
    print(f"first run (empty cluster, {total:,} created; {runs}, a fresh stand-in each): {first:.2f} s, "
          f"{total / first:,.0f} objects/s ({first_requests} requests)")
    if namespaces:
        print(f"baseline: {len(namespaces)} ensure_namespace + {total:,} plain create_object ({runs}, a fresh "
              f"stand-in each): {base_writes:.2f} s, {total / base_writes:,.0f} objects/s (namespaces "
              f"{base_ns:.2f} s, objects {base_objects:.2f} s: {total / base_objects:,.0f} objects/s)")
    else:
        print(f"baseline: {total:,} plain create_object ({runs}, a fresh stand-in each): {base_writes:.2f} s, "
              f"{total / base_writes:,.0f} objects/s")
    print(f"ratio first run / baseline: {first / base_writes:.2f}x the baseline's time")
    print(f"no-op run (nothing changed, 0 writes; {runs}): {ms(noop)} ({noop_requests} requests, {queries} SQL "
          f"queries); for_backend alone (rows to wanted objects; {runs}): {ms(build)}")
    print(f"baseline: one plain paged list_objects of the {len([1 for _, o in wanted if o])} kind(s), "
          f"{listed:,} objects ({runs}): {ms(base_list)}"
          + (f"; for information, {len(namespaces)} ensure_namespace of existing namespaces (one GET each): "
             f"{ms(gets)}" if namespaces else ""))
    print(f"ratio no-op run / plain list: {noop / base_list:.1f}x")
    print(f"one-change run ({what}'s GPU quota; updated {', '.join(changed.updated)}; {runs}): {ms(change)} "
          f"({change_requests} requests)")


# ---- 3: engine reason lag ------------------------------------------------------------------------------------

def kai_condition(reason: str, message: str, **queue) -> dict:
    """What KAI writes on a PodGroup it holds back (tests/schedulers/test_engine_jobs.py's `kai_condition`)."""
    return {"status": {"schedulingConditions": [{
        "type": "UnschedulableOnNodePool", "nodePool": "default", "reason": reason, "message": message,
        "transitionID": "1", "lastTransitionTime": "2026-11-25T10:00:00Z",
        "reasons": [{"reason": reason, "message": message, "details": {"queueDetails": {
            "name": queue.get("name", ""), "queueDeservedResources": {"gpu": queue.get("deserved", 0)},
            "queueAllocatedResources": {"gpu": queue.get("allocated", 0)},
            "queueResourceLimits": {"gpu": queue.get("limit", -1)},
            "podGroupRequestedResources": {"gpu": queue.get("requested", 0)}}}}]}]}}


def fill_cluster(stand: Stand, pool: str, nodes: int = 4) -> None:
    from tests.kube_objects import make_node, make_pod

    names = [f"dgx-{i:03d}" for i in range(nodes)]
    stand.server.add_nodes(make_node(name, gpus=8, product=PLATFORMS["h100"], labels={"runwhere.ai/pool": pool})
                           for name in names)
    stand.server.add_pods([pod for name in names for pod in (
        make_pod(f"toolkit-{name}", name, namespace="gpu-operator", cpu="10m", memory="64Mi",
                 labels={"app": "nvidia-container-toolkit-daemonset"}),
        make_pod(f"dcgm-{name}", name, namespace="gpu-operator", cpu="10m", memory="64Mi",
                 labels={"app": "nvidia-dcgm-exporter"}))])


class RawWatcher:
    """The baseline: a plain PodGroup watch through the real client, noting when each one first carries a
    schedulingCondition."""

    def __init__(self, kube, version: str):
        from pools.cluster.kinds import KAI_PODGROUP
        from pools.fleet.managed_jobs import selector

        self.seen: dict[str, float] = {}
        self.error: BaseException | None = None
        self._events = kube.watch_objects(KAI_PODGROUP, version, label_selector=selector(), timeout_seconds=3600)
        self._thread = threading.Thread(target=self._run, name="raw-podgroup-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._events:
                name = (event.object.get("metadata") or {}).get("name")
                if name and name not in self.seen and (event.object.get("status") or {}).get("schedulingConditions"):
                    self.seen[name] = time.perf_counter()
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def join(self) -> None:
        self._thread.join(timeout=10)


def stop_child(process: subprocess.Popen) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def bench_reason_lag(args, world: dict, scratch: Path, cleanup: contextlib.ExitStack) -> None:
    from rest_framework.test import APIClient

    from pools.cluster.kinds import KAI_PODGROUP
    from pools.fleet.sync import BackendSync
    from pools.models import Backend, ManagedJob
    from pools.schedulers import kai
    from scheduling.models import Status, Workload
    from scheduling.run.cycle import run_cycle
    from scheduling.run.dispatch import dispatch

    pool = world["pools"][0]
    project = next(iter(world["documents"]))
    department = world["documents"][project]["department"]
    print(f"\n3. Engine reason lag: {args.workloads} workloads on KAI (project {project}, pool {pool}), an OverLimit "
          "PodGroup condition to the workload's reasons, `manage.py sync engines` following in a child process")
    stand = Stand(scratch, "lag", cleanup)
    fill_cluster(stand, pool)
    Backend.objects.filter(name=BACKEND).update(scheduler=Backend.Scheduler.KAI, kubeconfig_path=stand.kubeconfig)
    backend = Backend.objects.get(name=BACKEND)
    BackendSync(backend, stand.kube).run(seconds=0)  # nodes and memberships; the backend is online

    client = APIClient()
    client.force_authenticate(world["researcher"])
    ids = []
    for index in range(args.workloads):
        response = client.post("/api/workloads/", {
            "name": f"resnet-{index:03d}", "project": project, "pools": [pool],
            "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"],
            "resources": {"gpu": 1, "cpu": "4", "memory": "16Gi"}}, format="json")
        if response.status_code != 201:
            raise SystemExit(f"submission {index} answered {response.status_code}: {response.content[:300]!r}")
        ids.append(response.json()["id"])
    cycle = run_cycle()
    if {a["id"] for a in cycle.admitted} != set(ids):
        raise SystemExit(f"the cycle handed {len(cycle.admitted)} of {len(ids)} workloads to KAI")
    for workload_id in ids:
        outcome = dispatch(workload_id, clusters=lambda _backend: stand.kube)
        if outcome != "created":
            raise SystemExit(f"dispatch of {workload_id} answered {outcome!r}")
    workloads = list(Workload.objects.filter(pk__in=ids).order_by("name"))
    if len(stand.server.objects(KAI_PODGROUP)) != len(ids):
        raise SystemExit(f"{len(stand.server.objects(KAI_PODGROUP))} PodGroups for {len(ids)} dispatched workloads")

    log = scratch / "sync.log"
    watches = stand.server.open_watches
    with open(log, "wb") as out:
        sync = subprocess.Popen([sys.executable, "manage.py", "sync", BACKEND], cwd=BASE_DIR,
                                env={**os.environ, **CHILD_ENV}, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    cleanup.callback(stop_child, sync)

    def alive() -> None:
        if sync.poll() is not None:
            raise SystemExit(f"the sync exited with {sync.returncode}; its log ends:\n"
                             + "\n".join(log.read_text(errors="replace").splitlines()[-30:]))

    wait_for("the sync's four watches", lambda: stand.server.open_watches >= watches + 4, 60, alive=alive)
    names = [w.job_name for w in workloads]
    wait_for("the sync to store every Job", lambda: ManagedJob.objects.filter(name__in=names).count() == len(names),
             60, alive=alive)
    raw = RawWatcher(stand.kube, stand.server.resource_version)
    wait_for("the baseline's watch", lambda: stand.server.open_watches >= watches + 5, 20, alive=alive)
    time.sleep(0.5)  # let the sync settle (its last batch committed)

    queue = kai.queue_name(pool, department, project)
    lags, deliveries = [], []
    for index, workload in enumerate(workloads):
        message = f"Workload requested 1 GPUs, but {queue} is allocated {8 + index} GPUs of its 8 GPU limit"
        change = kai_condition("OverLimit", message, name=queue, deserved=PROJECT_GPUS, allocated=8 + index, limit=8,
                               requested=1)
        started = time.perf_counter()
        stand.server.modify_object(KAI_PODGROUP, workload.job_name, change, namespace=workload.namespace)
        deadline = started + 30
        while True:
            reasons = Workload.objects.filter(pk=workload.pk).values_list("reasons", flat=True).first() or []
            if any((r.get("details") or {}).get("reason") == "OverLimit" for r in reasons):
                break
            if time.perf_counter() > deadline:
                alive()
                row = ManagedJob.objects.filter(name=workload.job_name).values("engine").first()
                raise SystemExit(f"workload {workload.pk} has no OverLimit reason 30 s after its PodGroup changed; "
                                 f"its ManagedJob: {row}")
            time.sleep(0.005)
        lags.append(time.perf_counter() - started)
        seen = raw.seen.get(workload.job_name)
        if seen is None:
            raise SystemExit(f"the baseline's watch did not see PodGroup {workload.job_name} ({raw.error!r})")
        deliveries.append(seen - started)
        time.sleep(0.1)
    status = set(Workload.objects.filter(pk__in=ids).values_list("status", flat=True))
    stop_child(sync)
    stand.server.end_watches()
    raw.join()
    stand.check()
    if status != {Status.SCHEDULING}:
        print(f"!! the workloads ended in {sorted(status)}, not SCHEDULING only")
    median, base = statistics.median(lags), statistics.median(deliveries)
    print(f"{'from the PodGroup change to':<52}{'median':>10}{'p95':>10}{'max':>10}")
    print(f"{'the reason in the row (sync + follow.observe)':<52}{ms(median):>10}{ms(percentile(lags, 0.95)):>10}"
          f"{ms(max(lags)):>10}")
    print(f"{'baseline: a raw watch_objects client has the event':<52}{ms(base):>10}"
          f"{ms(percentile(deliveries, 0.95)):>10}{ms(max(deliveries)):>10}")
    print(f"engine reason lag: median {ms(median)}, 95th percentile {ms(percentile(lags, 0.95))}; "
          f"ratio to the raw watch's delivery {median / base:.0f}x (the sync's batch window is 200 ms)")


# ---- 4: a refused object ---------------------------------------------------------------------------------------

REFUSAL = ('Queue.scheduling.run.ai "{name}" is invalid: metadata.labels: Invalid value: "x": must be no more than 63 '
           "characters")


def bench_refusal(args, scratch: Path, cleanup: contextlib.ExitStack) -> None:
    from pools.cluster import ClusterError
    from pools.cluster.kinds import KAI_QUEUE
    from pools.models import Backend
    from pools.schedulers.desired import for_backend
    from pools.schedulers.reconcile import run

    Backend.objects.filter(name=BACKEND).update(scheduler=Backend.Scheduler.KAI)
    backend = Backend.objects.get(name=BACKEND)
    wanted = for_backend(backend)
    queues = dict(wanted)[KAI_QUEUE]
    total = sum(len(objects) for _, objects in wanted)
    collection = f"/apis/{KAI_QUEUE.group}/{KAI_QUEUE.version}/{KAI_QUEUE.plural}"
    print(f"\n4. KAI reconcile with one refused object: {len(queues):,} Queues ({total:,} objects), the API server "
          "refusing the first Queue created (HTTP 422, a label too long); `reconcile.run`, which records it")
    runs, bases, repairs, lists = [], [], [], []
    first = repair = None
    written = requests = repair_requests = ""
    for index in range(args.repeat):
        stand = Stand(scratch, f"refusal-{index}", cleanup)
        stand.server.fail_next(1, status=422, path_prefix=collection, method="POST", message=REFUSAL)
        mark = len(stand.server.requests)
        started = time.perf_counter()
        first = run(backend, stand.kube)
        runs.append(time.perf_counter() - started)
        requests = stand.requests_since(mark)
        if first is None or len(first.refused) != 1 or len(first.created) != total - 1:
            raise SystemExit(f"the run with one refusal did {first and first.summary()} for {total} objects")
        if len(Backend.objects.get(pk=backend.pk).engine_refused) != 1:
            raise SystemExit("the refusal was not recorded on the backend")
        written = f"{len(first.created):,} created, {len(first.refused)} refused"
        mark = len(stand.server.requests)
        started = time.perf_counter()
        repair = run(backend, stand.kube)
        repairs.append(time.perf_counter() - started)
        repair_requests = stand.requests_since(mark)
        if repair is None or len(repair.created) != 1 or repair.refused or Backend.objects.get(
                pk=backend.pk).engine_refused:
            raise SystemExit(f"the next run did {repair and repair.summary()}; it should create the refused one")
        stand.check()
        stand.close()

        base = Stand(scratch, f"refusal-baseline-{index}", cleanup)
        base.server.fail_next(1, status=422, path_prefix=collection, method="POST", message=REFUSAL)
        started = time.perf_counter()
        refused = 0
        for kind, objects in wanted:
            for (namespace, _), obj in objects.items():
                try:
                    base.kube.create_object(kind, obj, namespace=namespace or None)
                except ClusterError:
                    refused += 1
        bases.append(time.perf_counter() - started)
        seconds, _ = baseline_list(base, wanted)
        lists.append(seconds)
        if refused != 1:
            raise SystemExit(f"the baseline's creates were refused {refused} times")
        base.check()
        base.close()
    took, base, again, listed = (statistics.median(v) for v in (runs, bases, repairs, lists))
    runs_ = f"median of {args.repeat}, a fresh stand-in each"
    print(f"run with one refusal ({runs_}): {took:.2f} s, {written} ({requests} requests), "
          f"{(total - 1) / took:,.0f} objects written/s; the refusal recorded on the backend")
    print(f"baseline: {total:,} plain create_object, one refused and caught ({runs_}): {base:.2f} s, "
          f"{(total - 1) / base:,.0f} objects/s")
    print(f"ratio run with one refusal / baseline: {took / base:.2f}x the baseline's time")
    print(f"next run (creates the refused one, clears the record; {runs_}): {ms(again)} ({repair_requests} "
          f"requests); baseline, one plain paged list of the same objects: {ms(listed)}; ratio {again / listed:.1f}x")


# ---- main ----------------------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=8, help="pools on the engine backend (2 platforms each)")
    parser.add_argument("--departments", type=int, default=10)
    parser.add_argument("--projects-per", type=int, default=10, help="projects per department")
    parser.add_argument("--repeat", type=int, default=3, help="no-op and one-change runs, and baseline lists (median)")
    parser.add_argument("--workloads", type=int, default=30, help="PodGroup changes timed in 3")
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    parser.add_argument("--parts", default="1,2,3,4", help="which parts to run (4 with --departments 20 "
                                                           "--projects-per 24: 4,000 KAI Queues)")
    args = parser.parse_args()
    if min(args.pools, args.departments, args.projects_per, args.repeat, args.workloads) < 1:
        parser.error("the counts must be at least 1")
    parts = {part.strip() for part in args.parts.split(",")}

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SIGTERM cleans up as Ctrl-C does
    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    started = time.perf_counter()
    version = bench.create_database()
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    with contextlib.ExitStack() as cleanup:  # undone at the end, the last first, each even when one before fails
        if not args.keep:
            cleanup.callback(drop_database)
        scratch = Path(tempfile.mkdtemp(prefix="osmo-bench-engines-"))
        cleanup.callback(shutil.rmtree, scratch, ignore_errors=True)
        setup_django()
        from pools.models import Backend

        world = build_world(args)
        if "1" in parts:
            bench_reconcile(Backend.Scheduler.KAI, "KAI", 1, args, world, scratch, cleanup)
        if "2" in parts and args.pools * len(PLATFORMS) > MAX_KUEUE_FLAVORS:
            print(f"\n2. Kueue reconcile: skipped, {args.pools} pools x {len(PLATFORMS)} platforms make more "
                  f"ResourceFlavors than a ClusterQueue's resource group holds ({MAX_KUEUE_FLAVORS})")
        elif "2" in parts:
            bench_reconcile(Backend.Scheduler.KUEUE, "Kueue", 2, args, world, scratch, cleanup)
        if "3" in parts:
            bench_reason_lag(args, world, scratch, cleanup)
        if "4" in parts:
            bench_refusal(args, scratch, cleanup)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
