"""Benchmark: cluster sync (issue 3): a full list of a large cluster, and watch events to committed rows.

Usage, from the project root (about 3 minutes on 2 cores with the defaults):

    .venv/bin/python benchmarks/sync_cluster.py [--nodes 5000] [--pods-per-node 30] [--repeat 3]
        [--events 1000] [--rate 20] [--seconds 10] [--profile] [--profile-watch] [--gc-off] [--in-process]

The cluster is the stand-in API server of the tests (tests/kube_standin.py, real HTTP), run in a child
process as a real API server would be, so that it does not share this process's GIL (--in-process runs it
in a thread here instead). The sync is the real thing: `BackendSync(backend, KubeCluster).run(...)` with
the `kubernetes` client over HTTP, into PostgreSQL; nothing in pools/ is edited, only wrapped at run time
to time its parts.

Database: DATABASE_URL if set (it must be PostgreSQL; only the backend bench-sync, its rows and the bench-*
pools and templates are written, and removed afterwards, though importing the pools recomputes every
backend's node memberships as any pool import does); otherwise postgres://postgres@127.0.0.1:5432/
osmo_bench_sync, dropped and recreated at start and dropped at the end (its own name, so that it never
clobbers a concurrent run of import_pools.py, which uses osmo_bench). DEBUG is off, as in the worker, so
Django's debug cursor is not in the figures; --debug turns it on.

Measured (time.perf_counter; wall times):
  1. Full sync: 5,000 nodes (H100, A100, GB200 and L40S GPU nodes, CPU nodes; some tainted, cordoned,
     under disk pressure or with an unhealthy GPU) and 150,000 pods (30 per node: GPU Operator and other
     daemonset pods, GPU jobs, CPU pods with and without init containers, Succeeded/Failed pods, a few
     unbound Pending ones), with four bench pools (pool selectors, and platform selectors from pod
     templates) so that memberships are computed. `run(seconds=0)` into empty tables, --repeat times
     (median; fewer if --budget would be passed). The median run is broken down by wrapping the sync's
     own functions at run time (list_all or fold_pages, the client's json.loads, _replace_pods and copy_values
     (or, in older code, _reconcile_pods and _write_pods), node_facts, Recompute.nodes, the Pod/Node querysets
     it evaluates, usage_from_pods, memberships, bulk_update_changed and update_rows), by
     timing every SQL statement and the commit (connection.execute_wrapper), and by timing the cyclic
     GC's pauses (gc.callbacks).
     Baseline, same run, same tables emptied: the same list pages fetched with urllib.request (pages of
     500 with continue), json.loads, the same Node, Pod and NodeMembership rows (values read from the
     database after the first sync and looked up per listed object) and ONE `COPY ... FROM STDIN` per
     table via psycopg, in one transaction. Then one re-sync on top of the baseline's rows: a relist where
     nothing changed (as after a 410), which must write nothing; that also proves the baseline wrote
     exactly the sync's rows.
  2. Watch: `run(seconds=...)` in a thread with its own connection, following the node and pod watches
     (ended early by moving its clock and ending the streams). (a) --events label changes on distinct
     nodes, made back to back in the stand-in: the time from the first change until all those rows are
     committed (the main thread polls the database every 20 ms; the end of the COMMIT, timed in the sync
     thread, is printed too), and where apply() spent its time;
     (b) one label change every 1/--rate s for --seconds s, each value the time.time() of its change: per
     event, the latency from the change to the poll that first sees its row committed (median, 95th).

--profile adds one cProfile'd full sync (not in the figures); --profile-watch profiles the following
thread (which slows it, so the watch figures are then pessimistic); --gc-off disables the cyclic GC
during the timed full syncs and baselines, to show what the GC costs each of them.
"""

import argparse
import gc
import io
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import quote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
BENCH_DB = "osmo_bench_sync"
PG_SERVER_URL = "postgresql://postgres@127.0.0.1:5432"
BACKEND = "bench-sync"
POOL_LABEL = "runwhere.ai/pool"  # settings.OSMO_LABEL_PREFIX + "pool", the default prefix
BURST_KEY = "bench.osmo.example/burst"
STAMP_KEY = "bench.osmo.example/stamp"
PAGE = 500
SEED = 3

# (share of nodes, product, GPUs per node, GPU memory MiB, family, template name); None: a CPU node.
NODE_KINDS = [
    (0.40, "NVIDIA-H100-80GB-HBM3", 8, 81559, "hopper", "bench-h100"),
    (0.25, "NVIDIA-A100-SXM4-80GB", 8, 81920, "ampere", "bench-a100"),
    (0.10, "NVIDIA-GB200", 4, 189471, "blackwell", "bench-gb200"),
    (0.15, "NVIDIA-L40S", 4, 46068, "ada-lovelace", "bench-l40s"),
    (0.10, None, 0, 0, "", "bench-cpu"),
]
TEAMS = ["team-llm", "team-vision", "team-speech", "team-robotics", "team-research", "team-infra"]


# ---- the cluster: objects and the stand-in (child process) ------------------------------------------------

def cluster_objects(nodes: int, pods_per_node: int, seed: int = SEED):
    """Yields ("node", obj) for every node, then ("pods", [objs]) per node; deterministic for a seed."""
    from tests.kube_objects import make_node

    rng = random.Random(seed)
    cumulative, total = [], 0.0
    for kind in NODE_KINDS:
        total += kind[0]
        cumulative.append(total)
    plan = []
    for index in range(nodes):
        draw = rng.random() * total
        kind = next(k for k, edge in zip(NODE_KINDS, cumulative, strict=True) if draw <= edge)
        product, gpus, memory_mib, family = kind[1], kind[2], kind[3], kind[4]
        short = (product or "cpu").split("-")[1].lower() if product else "cpu"
        name = f"{short}-{index:05d}"
        labels, taints, conditions = {}, [], {}
        pool_draw = rng.random()
        if gpus and pool_draw < 0.45:
            labels[POOL_LABEL] = "bench-training"
        elif gpus and pool_draw < 0.65:
            labels[POOL_LABEL] = "bench-inference"
        if gpus and rng.random() < 0.3:
            taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        if rng.random() < 0.005:
            conditions = {"DiskPressure": "True"}
        unschedulable = rng.random() < 0.01
        unhealthy = 1 if gpus and rng.random() < 0.02 else 0
        node = make_node(name, gpus=gpus, product=product or "", gpu_memory_mib=memory_mib, family=family,
                         labels=labels, taints=taints, conditions=conditions, unschedulable=unschedulable,
                         unhealthy_gpus=unhealthy, cpu="128" if gpus else "64", memory="2Ti" if gpus else "512Gi")
        plan.append((name, gpus, labels.get(POOL_LABEL, "")))
        yield "node", node

    for index, (name, gpus, pool) in enumerate(plan):
        yield "pods", node_pods(name, gpus, pool, pods_per_node, rng, index)


def node_pods(name: str, gpus: int, pool: str, count: int, rng: random.Random, index: int) -> list[dict]:
    """About a real GPU node's pods: daemonsets, GPU jobs, finished jobs, CPU pods; `count` in all."""
    from tests.kube_objects import make_container, make_pod

    pods: list[dict] = []

    def add(suffix, node=name, namespace="default", **kwargs):
        pods.append(make_pod(f"{name}-{suffix}-{len(pods)}", node, namespace=namespace, **kwargs))

    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet"}
    add("cilium", namespace="kube-system", cpu="100m", memory="256Mi", labels={"k8s-app": "cilium"},
        owner={**owner, "name": "cilium", "uid": "ds-cilium"}, image="quay.io/cilium/cilium:v1.15.6")
    add("node-exporter", namespace="monitoring", cpu="50m", memory="64Mi",
        labels={"app.kubernetes.io/name": "node-exporter"},
        owner={**owner, "name": "node-exporter", "uid": "ds-node-exporter"},
        image="quay.io/prometheus/node-exporter:v1.8.1")
    if gpus:
        if rng.random() > 0.01:  # 1% of GPU nodes lack the toolkit: "Missing NVIDIA Container Toolkit"
            add("toolkit", namespace="gpu-operator", cpu="10m", memory="64Mi",
                labels={"app": "nvidia-container-toolkit-daemonset"},
                owner={**owner, "name": "nvidia-container-toolkit-daemonset", "uid": "ds-toolkit"},
                image="nvcr.io/nvidia/k8s/container-toolkit:v1.15.0-ubuntu20.04")
        add("dcgm", namespace="gpu-operator", cpu="10m", memory="64Mi", labels={"app": "nvidia-dcgm-exporter"},
            owner={**owner, "name": "nvidia-dcgm-exporter", "uid": "ds-dcgm"},
            image="nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04")
        # GPU workloads: one whole-node job, or several smaller ones leaving some GPUs free.
        if rng.random() < 0.35:
            sizes = [gpus]
        else:
            sizes, free = [], gpus
            while free > 0 and rng.random() < 0.85:
                size = min(free, rng.choice((1, 1, 2, 4)))
                sizes.append(size)
                free -= size
        for size in sizes:
            team = rng.choice(TEAMS)
            labels = {"app.kubernetes.io/part-of": "workflow", "team": team}
            if pool:
                labels[POOL_LABEL] = pool
            add("train" if size >= 4 else "job", namespace=team, gpus=size, cpu=str(12 * size),
                memory=f"{64 * size}Gi", labels=labels, phase="Pending" if rng.random() < 0.03 else "Running",
                priority_class="high" if size == gpus else None)
        for _ in range(5):  # finished GPU jobs are still listed, but do not count on the node
            team = rng.choice(TEAMS)
            add("done", namespace=team, gpus=rng.choice((1, 2, 8)), cpu="8", memory="32Gi",
                phase="Succeeded" if rng.random() < 0.8 else "Failed", labels={"team": team})
    else:
        for _ in range(5):
            team = rng.choice(TEAMS)
            add("etl-done", namespace=team, cpu="4", memory="16Gi",
                phase="Succeeded" if rng.random() < 0.8 else "Failed", labels={"team": team})
    while len(pods) < count:
        team = rng.choice(TEAMS)
        if len(pods) == count - 1 and index % 5 == 0:
            add("waiting", node=None, namespace=team, gpus=8, cpu="96", memory="1Ti")  # unbound: Pending
        elif rng.random() < 0.2:
            add("loader", namespace=team, cpu="2", memory="8Gi", labels={"team": team}, init_containers=[
                make_container("fetch", cpu="500m", memory="512Mi", image="busybox:1.36")])
        else:
            add("svc", namespace=team, cpu=rng.choice(("250m", "500m", "1", "2")),
                memory=rng.choice(("512Mi", "1Gi", "4Gi")), labels={"team": team})
    return pods[:count]


class StandinControl:
    """What the benchmark asks of the stand-in; lives wherever the stand-in runs."""

    def __init__(self):
        from tests.kube_standin import KubeStandin

        self.server = KubeStandin()

    def populate(self, nodes: int, pods_per_node: int) -> dict:
        from pools.inventory.pods import TERMINAL_PHASES  # pure Python, no Django

        started = time.perf_counter()
        node_batch, pod_batch = [], []
        expected = 0
        total = 0
        for kind, value in cluster_objects(nodes, pods_per_node):
            if kind == "node":
                node_batch.append(value)
                continue
            for pod in value:
                total += 1
                if pod["spec"].get("nodeName") and pod["status"]["phase"] not in TERMINAL_PHASES:
                    expected += 1
            pod_batch.extend(value)
            if len(pod_batch) >= 10_000:
                self.server.add_pods(pod_batch)
                pod_batch = []
        self.server.add_nodes(node_batch)
        self.server.add_pods(pod_batch)
        return {"nodes": len(node_batch), "pods": total, "counted_pods": expected,
                "seconds": time.perf_counter() - started, "resource_version": self.server.resource_version}

    def url(self) -> str:
        return self.server.url

    def kubeconfig(self, path: str) -> str:
        return self.server.kubeconfig(path)

    def node_names(self) -> list[str]:
        return self.server.node_names()

    def wait_for_watches(self, count: int, timeout: float) -> None:
        self.server.wait_for_watches(count, timeout=timeout)

    def end_watches(self) -> None:
        self.server.end_watches()

    def label_burst(self, names: list[str], key: str) -> tuple[float, float]:
        """Changes one label on each node, back to back; every value is the time.time() of its change."""
        first = time.time()
        for name in names:
            self.server.modify_node(name, {"metadata": {"labels": {key: f"{time.time():.6f}"}}})
        return first, time.time()

    def label_series(self, names: list[str], key: str, rate: float) -> tuple[float, float]:
        """One label change every 1/rate seconds, each node once, stamped with its time.time()."""
        start = time.monotonic()
        first = time.time()
        for index, name in enumerate(names):
            delay = start + index / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.server.modify_node(name, {"metadata": {"labels": {key: f"{time.time():.6f}"}}})
        return first, time.time()

    def server_errors(self) -> list[str]:
        return list(self.server.server_errors)

    def close(self) -> None:
        self.server.close()


def _standin_process(conn, base_dir: str) -> None:
    sys.path.insert(0, base_dir)
    control = None
    try:
        control = StandinControl()
        while True:
            method, args = conn.recv()
            if method == "exit":
                break
            try:
                result = ("ok", getattr(control, method)(*args))
            except Exception:  # handed to the benchmark, which raises it
                result = ("error", traceback.format_exc())
            conn.send(result)
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        if control is not None:
            control.close()


class RemoteStandin:
    """The stand-in in a child process: calls go through a pipe, one at a time."""

    def __init__(self):
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(target=_standin_process, args=(child, str(BASE_DIR)), name="kube-standin",
                                       daemon=True)
        self.process.start()
        child.close()
        self._pending = None

    def start(self, method: str, *args):
        if self._pending:
            raise RuntimeError(f"{self._pending} still running")
        self._pending = method
        self._conn.send((method, args))

    def result(self):
        status, value = self._conn.recv()
        self._pending = None
        if status == "error":
            raise RuntimeError(f"stand-in failed:\n{value}")
        return value

    def call(self, method: str, *args):
        self.start(method, *args)
        return self.result()

    def close(self) -> None:
        try:
            if self._pending:
                self.result()
            self._conn.send(("exit", ()))
        except (OSError, EOFError, RuntimeError):
            pass
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)


class LocalStandin:
    """The same calls, the stand-in in a thread of this process (--in-process)."""

    def __init__(self):
        self.control = StandinControl()
        self._thread = None
        self._outcome = None

    def start(self, method: str, *args):
        def work():
            try:
                self._outcome = ("ok", getattr(self.control, method)(*args))
            except Exception:
                self._outcome = ("error", traceback.format_exc())

        self._outcome = None
        self._thread = threading.Thread(target=work, name=f"standin-{method}", daemon=True)
        self._thread.start()

    def result(self):
        self._thread.join()
        status, value = self._outcome
        if status == "error":
            raise RuntimeError(f"stand-in failed:\n{value}")
        return value

    def call(self, method: str, *args):
        return getattr(self.control, method)(*args)

    def close(self) -> None:
        self.control.close()


# ---- database (before Django is set up) ----------------------------------------------------------------

def _pg_admin_connect():
    import psycopg

    return psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3)


def choose_database() -> tuple[str, str, bool]:
    """(url, label, created by us)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        parsed = urlparse(url)
        if not parsed.scheme.startswith("postgres"):
            raise SystemExit(f"DATABASE_URL must be PostgreSQL for this benchmark, not {parsed.scheme}")
        where = f"{parsed.hostname}:{parsed.port or 5432}{parsed.path}"
        return url, f"PostgreSQL at {where} (from DATABASE_URL; only {BACKEND} and bench-* rows are touched)", False
    with _pg_admin_connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{BENCH_DB}"')
        version = admin.execute("SHOW server_version").fetchone()[0]
    return (f"{PG_SERVER_URL}/{BENCH_DB}",
            f"PostgreSQL {version} at 127.0.0.1:5432/{BENCH_DB} (created for this run)", True)


def drop_database() -> None:
    from django.db import connections

    connections.close_all()
    with _pg_admin_connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')


# ---- configuration: pod templates and pools whose selectors place the nodes --------------------------------

def import_pools() -> None:
    from pools.config import writes
    from pools.models import ConfigKind

    templates = {template: {"spec": {"nodeSelector": {"nvidia.com/gpu.product": product}}}
                 for _share, product, _g, _m, _f, template in NODE_KINDS if product}
    templates["bench-cpu"] = {"spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "cpu-only"}}}
    writes.import_document(ConfigKind.POD_TEMPLATE, templates, author=None, description="sync benchmark")

    def gpu_platforms(*names):
        return {name: {"override_pod_template": ["gpu_toleration", f"bench-{name}"]} for name in names}

    common = {"backend": BACKEND, "common_pod_template": ["default_ctrl", "default_user"],
              "common_default_variables": {"USER_CPU": 8, "USER_GPU": 1, "USER_MEMORY": "64Gi",
                                           "USER_STORAGE": "100Gi"}}
    pools = {
        "bench-training": {**common, "node_selector": {POOL_LABEL: "bench-training"},
                           "platforms": gpu_platforms("h100", "a100", "gb200")},
        "bench-inference": {**common, "node_selector": {POOL_LABEL: "bench-inference"},
                            "platforms": gpu_platforms("l40s", "h100")},
        # No pool selector: its platforms take every node they match, alongside a selecting pool if any.
        "bench-shared": {**common, "platforms": gpu_platforms("a100", "l40s")},
        "bench-cpu": {**common, "common_default_variables": {**common["common_default_variables"], "USER_GPU": 0},
                      "platforms": {"cpu": {"override_pod_template": ["bench-cpu"]}}},
    }
    writes.import_document(ConfigKind.POOL, {"pools": pools}, author=None, description="sync benchmark")


def remove_bench_config() -> None:
    from django.db import transaction

    from pools.models import Backend, ConfigKind, ConfigRevision, PodTemplate, Pool

    with transaction.atomic():
        Pool.objects.filter(name__startswith="bench-").delete()
        PodTemplate.objects.filter(name__startswith="bench-").delete()
        ConfigRevision.objects.filter(kind__in=[ConfigKind.POOL, ConfigKind.POD_TEMPLATE],
                                      name__startswith="bench-").delete()
        Backend.objects.filter(name=BACKEND).delete()


# ---- measuring --------------------------------------------------------------------------------------------

class Timers:
    """Accumulated seconds and call counts by name."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.batches: list[tuple[float, int, float]] = []  # (ended at, events, seconds) per apply()

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds
        self.calls[name] += 1

    @contextmanager
    def time(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)


def sql_class(sql: str) -> str:
    """ "INSERT pools_pod", "SELECT pools_node", ...: the verb and the first quoted table after it."""
    text = sql.lstrip()
    verb = text.split(None, 1)[0].upper() if text else "?"
    marker = {"INSERT": ' INTO "', "DELETE": ' FROM "', "SELECT": ' FROM "', "UPDATE": 'UPDATE "'}.get(verb)
    position = text.find(marker) if marker else -1
    if position == -1:
        return verb
    return f"{verb} {text[position + len(marker):].split(chr(34), 1)[0]}"


GC_OFF = False  # --gc-off: the cyclic collector is disabled during the timed syncs and baselines


@contextmanager
def gc_setting():
    if not GC_OFF:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


@contextmanager
def instrumented(timers: Timers):
    """Wraps the sync's own functions, only for the duration: nothing in pools/ is edited."""
    from django.db import connection
    from django.db.models.query import QuerySet

    import pools.cluster.kube as kube
    import pools.fleet.sync as sync

    saved = []

    def patch(owner, name, replacement):
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def timed(owner, name, label):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timers.add(label, time.perf_counter() - start)

        patch(owner, name, wrapper)

    original_list_all = sync.list_all

    def list_all(list_page, **kwargs):
        kind = getattr(list_page, "__name__", "list").removeprefix("list_")
        with timers.time(f"list {kind}"):
            return original_list_all(list_page, **kwargs)

    patch(sync, "list_all", list_all)
    if hasattr(sync, "fold_pages"):  # the full list folded page by page (parsing included)
        original_fold = sync.fold_pages

        def fold_pages(list_page, *args, **kwargs):
            kind = getattr(list_page, "__name__", "list").removeprefix("list_")
            with timers.time(f"list {kind}"):
                return original_fold(list_page, *args, **kwargs)

        patch(sync, "fold_pages", fold_pages)

    class TimedJson:
        @staticmethod
        def loads(data, *args, **kwargs):
            start = time.perf_counter()
            try:
                return json.loads(data, *args, **kwargs)
            finally:
                timers.add("json.loads", time.perf_counter() - start)

        def __getattr__(self, name):
            return getattr(json, name)

    patch(kube, "json", TimedJson())
    if hasattr(sync.BackendSync, "_replace_pods"):
        timers.add("paged", 0.0)  # a marker for the breakdown
        timed(sync.BackendSync, "_replace_pods", "reconcile pods")
        timed(sync, "copy_values", "write pods")
        timed(sync.BackendSync, "_reconcile_node_facts", "reconcile nodes")
    else:
        timed(sync.BackendSync, "_reconcile_pods", "reconcile pods")
        timed(sync.BackendSync, "_write_pods", "write pods")
        timed(sync.BackendSync, "_reconcile_nodes", "reconcile nodes")
    timed(sync, "node_facts", "node_facts")
    inside_recompute = []
    original_nodes = sync.Recompute.nodes

    def recompute_nodes(self, *args, **kwargs):
        inside_recompute.append(1)
        start = time.perf_counter()
        try:
            return original_nodes(self, *args, **kwargs)
        finally:
            timers.add("Recompute.nodes", time.perf_counter() - start)
            inside_recompute.pop()

    patch(sync.Recompute, "nodes", recompute_nodes)
    original_fetch_all = QuerySet._fetch_all

    def fetch_all(self):
        if self._result_cache is not None or self.model not in (sync.Pod, sync.Node):
            return original_fetch_all(self)
        label = f"fetch {self.model.__name__} rows" + (" in Recompute.nodes" if inside_recompute else "")
        start = time.perf_counter()
        try:
            return original_fetch_all(self)
        finally:
            timers.add(label, time.perf_counter() - start)

    patch(QuerySet, "_fetch_all", fetch_all)
    timed(sync, "usage_from_pods", "usage_from_pods")
    timed(sync.Recompute, "_write_memberships", "memberships")
    timed(sync, "bulk_update_changed", "bulk_update_changed")
    if hasattr(sync, "update_rows"):
        timed(sync, "update_rows", "update_rows")
    if hasattr(sync, "update_rows_json"):
        timed(sync, "update_rows_json", "update_rows_json")
    original_apply = sync.BackendSync.apply

    def apply(self, node_events, pod_events, *more):
        start = time.perf_counter()
        try:
            return original_apply(self, node_events, pod_events, *more)
        finally:
            seconds = time.perf_counter() - start
            timers.add("apply", seconds)
            timers.batches.append((time.time(), len(node_events) + len(pod_events), seconds))

    patch(sync.BackendSync, "apply", apply)

    def execute(execute_, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute_(sql, params, many, context)
        finally:
            timers.add(f"SQL {sql_class(sql)}", time.perf_counter() - start)

    # Pauses of the cyclic garbage collector, wherever they fall (they overlap the other items).
    gc_started: list[float] = []

    def on_gc(phase, info):
        if phase == "start":
            gc_started.append(time.perf_counter())
        elif gc_started:
            timers.add(f"GC gen{info['generation']}", time.perf_counter() - gc_started.pop())

    gc.callbacks.append(on_gc)
    connection.ensure_connection()
    original_commit = connection.commit

    def commit():
        with timers.time("SQL COMMIT"):
            return original_commit()

    connection.commit = commit
    try:
        with connection.execute_wrapper(execute):
            yield
    finally:
        gc.callbacks.remove(on_gc)
        del connection.commit
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def backend_row():
    from pools.models import Backend

    return Backend.objects.get(name=BACKEND)


def clear_rows(scratch: bool) -> None:
    """Empties the backend's Node, Pod and NodeMembership rows and forgets its resourceVersions."""
    from django.db import connection, transaction

    from pools.models import Backend, Node, NodeMembership, Pod

    backend = backend_row()
    with transaction.atomic():
        if scratch:  # only this benchmark's backend has rows here
            tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in (NodeMembership, Pod, Node))
            with connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {tables}")
        else:
            NodeMembership.objects.filter(node__backend=backend).delete()
            Pod.objects.filter(backend=backend).delete()
            Node.objects.filter(backend=backend).delete()
        Backend.objects.filter(pk=backend.pk).update(nodes_resource_version="", pods_resource_version="")
    if scratch:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")
    gc.collect()


def timed_sync(profile: bool = False) -> tuple[float, Timers, object]:
    from pools.fleet.sync import BackendSync, cluster_for

    backend = backend_row()
    cluster = cluster_for(backend)
    timers = Timers()
    try:
        with gc_setting(), instrumented(timers):
            profiler = None
            if profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            start = time.perf_counter()
            stats = BackendSync(backend, cluster).run(seconds=0)
            seconds = time.perf_counter() - start
            if profiler is not None:
                profiler.disable()
                import pstats

                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
                print("\ncProfile of one full sync (sorted by cumtime, top 40):")
                print("\n".join(out.getvalue().splitlines()[:75]))
    finally:
        cluster.close()
    return seconds, timers, stats


def check_rows(expect: dict, label: str) -> dict:
    from pools.models import Node, NodeMembership, Pod

    backend = backend_row()
    counts = {"nodes": Node.objects.filter(backend=backend).count(),
              "pods": Pod.objects.filter(backend=backend).count(),
              "memberships": NodeMembership.objects.filter(node__backend=backend).count()}
    if counts["nodes"] != expect["nodes"] or counts["pods"] != expect["counted_pods"]:
        raise SystemExit(f"{label}: stored {counts}, expected {expect['nodes']} nodes and "
                         f"{expect['counted_pods']} pods")
    if not counts["memberships"]:
        raise SystemExit(f"{label}: no NodeMembership rows")
    return counts


# ---- baseline: urllib + json.loads + one COPY per table ------------------------------------------------------

NODE_JSON = ("labels", "taints", "conditions", "components", "reasons", "pool_names", "platform_names")


class Snapshot:
    """The rows the sync wrote, read back once: the values the baseline writes."""

    def __init__(self):
        from pools.fleet.sync import POD_COLUMNS
        from pools.models import Node, NodeMembership, Pod

        backend = backend_row()
        self.backend_id = backend.pk
        self.node_columns = [f.column for f in Node._meta.concrete_fields if f.column not in ("id",)]
        attnames = [f.attname for f in Node._meta.concrete_fields if f.column not in ("id",)]
        json_at = {i for i, name in enumerate(attnames) if name in NODE_JSON}
        self.node_json = sorted(json_at)
        self.nodes = {row[attnames.index("name")]: row for row in
                      Node.objects.filter(backend=backend).values_list(*attnames)}
        self.pod_columns = ["backend_id", "uid", *POD_COLUMNS]
        self.pods = {row[1]: row for row in Pod.objects.filter(backend=backend).values_list(
            "backend_id", "uid", *POD_COLUMNS)}
        self.memberships: dict[str, list[tuple[int, list]]] = defaultdict(list)
        for node_name, pool_id, platforms in NodeMembership.objects.filter(node__backend=backend).values_list(
                "node__name", "pool_id", "platforms"):
            self.memberships[node_name].append((pool_id, platforms))


def fetch_all(url: str, path: str, timers: Timers, kind: str) -> list[dict]:
    items: list[dict] = []
    token = None
    while True:
        query = f"?limit={PAGE}" + (f"&continue={quote(token)}" if token else "")
        request = urllib.request.Request(f"{url}{path}{query}", headers={"Accept": "application/json"})
        with timers.time(f"{kind}: HTTP"), urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        with timers.time(f"{kind}: json.loads"):
            page = json.loads(body)
        items.extend(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return items


def baseline(url: str, snapshot: Snapshot) -> tuple[float, Timers]:
    timers = Timers()
    gc_started: list[float] = []

    def on_gc(phase, info):
        if phase == "start":
            gc_started.append(time.perf_counter())
        elif gc_started:
            timers.add(f"GC gen{info['generation']}", time.perf_counter() - gc_started.pop())

    gc.callbacks.append(on_gc)
    try:
        with gc_setting():
            return _baseline(url, snapshot, timers)
    finally:
        gc.callbacks.remove(on_gc)


def _baseline(url: str, snapshot: Snapshot, timers: Timers) -> tuple[float, Timers]:
    from django.db import connection, transaction

    from pools.models import Node, NodeMembership, Pod

    start = time.perf_counter()
    nodes = fetch_all(url, "/api/v1/nodes", timers, "nodes")
    pods = fetch_all(url, "/api/v1/pods", timers, "pods")
    with timers.time("build rows"):
        node_rows = []
        json_at = snapshot.node_json
        for item in nodes:
            row = list(snapshot.nodes[item["metadata"]["name"]])
            for index in json_at:
                row[index] = json.dumps(row[index])
            node_rows.append(row)
        pod_rows = [row for item in pods if (row := snapshot.pods.get(item["metadata"]["uid"])) is not None]
    quote_name = connection.ops.quote_name

    def copy(cursor, model, columns, rows):
        sql = f"COPY {quote_name(model._meta.db_table)} ({', '.join(map(quote_name, columns))}) FROM STDIN"
        with timers.time(f"  COPY {model._meta.db_table}"), cursor.copy(sql) as copier:
            for row in rows:
                copier.write_row(row)

    written = timers.time("DB write (COPY x3, one transaction)")
    with written, transaction.atomic(), connection.cursor() as wrapper:
        cursor = wrapper.cursor  # the psycopg cursor under Django's wrapper
        copy(cursor, Pod, snapshot.pod_columns, pod_rows)
        copy(cursor, Node, snapshot.node_columns, node_rows)
        cursor.execute(f"SELECT name, id FROM {quote_name(Node._meta.db_table)} WHERE backend_id = %s",
                       [snapshot.backend_id])
        ids = dict(cursor.fetchall())
        copy(cursor, NodeMembership, ["node_id", "pool_id", "platforms"],
             ((ids[name], pool_id, json.dumps(platforms))
              for name, entries in snapshot.memberships.items() for pool_id, platforms in entries))
        commit_started = time.perf_counter()
    timers.add("  COMMIT", time.perf_counter() - commit_started)
    return time.perf_counter() - start, timers


# ---- part 2: watch events to committed rows --------------------------------------------------------------

class ControlledClock:
    """time.monotonic, plus an offset the benchmark moves to end a run(seconds=...) early."""

    def __init__(self):
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def watch_benchmark(standin, args, names: list[str]) -> dict:
    from django.db import connection, connections
    from django.utils import timezone

    from pools.fleet.sync import BackendSync, cluster_for
    from pools.models import Node

    backend = backend_row()
    clock = ControlledClock()
    outcome: dict = {}

    timers = Timers()

    def follow():
        profiler = None
        try:
            thread_backend = backend_row()
            cluster = cluster_for(thread_backend)
            try:
                with instrumented(timers):
                    if args.profile_watch:
                        import cProfile

                        profiler = cProfile.Profile()
                        profiler.enable()
                    outcome["stats"] = BackendSync(thread_backend, cluster, clock=clock).run(seconds=600)
            finally:
                if profiler is not None:
                    profiler.disable()
                    outcome["profile"] = profiler
                cluster.close()
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc
            traceback.print_exc()
        finally:
            connections.close_all()  # this thread's connections only

    thread = threading.Thread(target=follow, name="bench-sync-follow", daemon=True)
    thread.start()
    standin.call("wait_for_watches", 2, 60.0)
    table = connection.ops.quote_name(Node._meta.db_table)
    rng = random.Random(SEED + 1)
    chosen = rng.sample(names, min(len(names), args.events + int(args.rate * args.seconds)))
    burst_names, series_names = chosen[:args.events], chosen[args.events:]

    def poll_until(key: str, wanted: int, since, interval: float, limit: float = 60.0):
        """{name: (value, seen at)} for rows committed with `key` since `since`, polled every `interval`."""
        seen: dict[str, tuple[float, float]] = {}
        query = (f"SELECT name, labels ->> %s FROM {table} WHERE backend_id = %s AND updated_at >= %s "
                 f"AND labels ? %s AND name <> ALL(%s::text[])")
        polls, poll_seconds = 0, 0.0
        deadline = time.monotonic() + limit
        with connection.cursor() as cursor:
            while len(seen) < wanted and time.monotonic() < deadline:
                started = time.perf_counter()
                cursor.execute(query, [key, backend.pk, since, key, list(seen)])
                rows = cursor.fetchall()
                now = time.time()
                poll_seconds += time.perf_counter() - started
                polls += 1
                for name, value in rows:
                    seen[name] = (float(value), now)
                if not rows:
                    time.sleep(interval)
        return seen, polls, poll_seconds

    results: dict = {}
    # (a) a burst of label changes on distinct nodes
    since = timezone.now()
    before = dict(timers.seconds)
    batches_before = len(timers.batches)
    standin.start("label_burst", burst_names, BURST_KEY)
    # Every 20 ms: the poller shares this process's GIL with the sync thread, so polling much more often
    # slows the very apply() being timed (every 5 ms cost it about 0.1-0.2 s here).
    seen, polls, poll_seconds = poll_until(BURST_KEY, len(burst_names), since, 0.02)
    first, last = standin.result()
    done_at = max(at for _value, at in seen.values()) if seen else float("nan")
    time.sleep(0.5)  # let a batch that is still being applied end before the figures are taken
    # apply() returns right after its COMMIT: the last burst batch to end before the poller saw every row
    # is the commit that completed the burst, timed inside the sync thread.
    commits = [end for end, _events, _seconds in timers.batches[batches_before:] if end <= done_at]
    results["burst"] = {"events": len(burst_names), "committed": len(seen), "seconds": done_at - first,
                        "commit_seconds": (max(commits) - first) if commits else float("nan"),
                        "changes_took": last - first, "polls": polls,
                        "poll_ms": 1000 * poll_seconds / max(polls, 1),
                        "latencies": sorted(at - value for value, at in seen.values()),
                        "timers": {k: v - before.get(k, 0.0) for k, v in dict(timers.seconds).items()},
                        "batches": [(end - first, events, seconds)
                                    for end, events, seconds in timers.batches[batches_before:]]}
    time.sleep(0.5)
    # (b) a steady trickle, one stamped change at a time
    since = timezone.now()
    standin.start("label_series", series_names, STAMP_KEY, args.rate)
    seen, polls, poll_seconds = poll_until(STAMP_KEY, len(series_names), since, 0.01, limit=args.seconds + 30)
    first, last = standin.result()
    results["series"] = {"events": len(series_names), "committed": len(seen), "changes_took": last - first,
                         "polls": polls, "poll_ms": 1000 * poll_seconds / max(polls, 1),
                         "latencies": sorted(at - value for value, at in seen.values())}
    # End the run: its deadline passes at once, and the open streams end so the followers notice.
    clock.offset = 1e6
    standin.call("end_watches")
    thread.join(timeout=60)
    if thread.is_alive():
        raise SystemExit("the following sync did not stop within 60 s")
    if "error" in outcome:
        raise SystemExit(f"the following sync failed: {outcome['error']!r}")
    results["stats"] = outcome["stats"]
    results["timers"] = timers
    results["profile"] = outcome.get("profile")
    return results


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# ---- report ------------------------------------------------------------------------------------------------

def median_of(runs: list[Timers], name: str) -> float:
    return statistics.median(t.seconds.get(name, 0.0) for t in runs)


def sync_breakdown(runs: list[Timers], total: float) -> list[tuple[str, float]]:
    m = {name: median_of(runs, name) for name in {n for t in runs for n in t.seconds}}
    sql = {name: value for name, value in m.items() if name.startswith("SQL ")}
    pod_write_sql = sum(v for k, v in sql.items() if k in ("SQL INSERT pools_pod", "SQL DELETE pools_pod",
                                                           "SQL UPDATE pools_pod"))
    recompute = m.get("Recompute.nodes", 0.0)
    usage = m.get("fetch Pod rows in Recompute.nodes", 0.0) + m.get("usage_from_pods", 0.0)
    memberships = m.get("memberships", 0.0)
    node_sql = sum(v for k, v in sql.items() if k in ("SQL INSERT pools_node", "SQL UPDATE pools_node"))
    # Paged: pod_facts and node_facts run inside the list, page by page; the Pod rows are written by copy_values.
    paged = "paged" in runs[0].seconds
    parse_in_reconcile = 0.0 if paged else m.get("node_facts", 0.0)
    rows = [
        ("list nodes: HTTP + json.loads" + (" + node_facts, page by page" if paged else " (list_all)"),
         m.get("list nodes", 0.0)),
        ("list pods: HTTP + json.loads" + (" + pod_facts, page by page" if paged else " (list_all)"),
         m.get("list pods", 0.0)),
        ("  of which json.loads, both lists", m.get("json.loads", 0.0)),
        ("pods: read stored rows + diff" if paged else "pods: parse (pod_facts) + read stored rows + diff",
         m.get("reconcile pods", 0.0) - m.get("write pods", 0.0)),
        ("  of which the stored Pod rows read (fetch)", m.get("fetch Pod rows", 0.0)),
        ("pods: write (copy_values: COPY from the facts)" if paged
         else "pods: write (_write_pods: build Pod objects + INSERT)", m.get("write pods", 0.0)),
        ("  of which SQL INSERT/UPDATE/DELETE pools_pod", pod_write_sql),
        ("nodes: parse (node_facts)" + (", inside the list above" if paged else ""), m.get("node_facts", 0.0)),
        ("nodes: Recompute.nodes (all nodes)", recompute),
        ("  pods read back from the DB (fetch) + usage_from_pods", usage),
        ("  NodeMembership delete + insert", memberships),
        ("  status/figures/membership + Node objects + SQL", recompute - usage - memberships),
        ("  of which SQL INSERT/UPDATE pools_node", node_sql),
        ("  of which bulk_update_changed / update_rows(_json) (changed rows only)",
         m.get("bulk_update_changed", 0.0) + m.get("update_rows", 0.0) + m.get("update_rows_json", 0.0)),
        ("nodes: the rest of _reconcile_nodes (stored names, last_seen UPDATE)",
         m.get("reconcile nodes", 0.0) - recompute - parse_in_reconcile),
        ("COMMIT", m.get("SQL COMMIT", 0.0)),
    ]
    accounted = (m.get("list nodes", 0.0) + m.get("list pods", 0.0) + m.get("reconcile pods", 0.0)
                 + m.get("reconcile nodes", 0.0) + m.get("SQL COMMIT", 0.0))
    rows.append(("other (lease, backend refresh, versions, outcome)", total - accounted))
    gc_total = sum(v for k, v in m.items() if k.startswith("GC "))
    rows.append((f"(cyclic GC pauses, inside the items above: gen2 {m.get('GC gen2', 0.0):.2f} s)", gc_total))
    return rows


def print_sql(runs: list[Timers]) -> None:
    names = sorted({n for t in runs for n in t.seconds if n.startswith("SQL ")},
                   key=lambda n: -median_of(runs, n))
    print("  SQL by statement (seconds, statements):")
    for name in names:
        calls = statistics.median(t.calls.get(name, 0) for t in runs)
        print(f"    {name.removeprefix('SQL '):<40} {median_of(runs, name):7.3f} s  {calls:5.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3, help="full syncs and baselines (median); default 3")
    parser.add_argument("--events", type=int, default=1000, help="node changes in the burst; default 1000")
    parser.add_argument("--rate", type=float, default=20.0, help="stamped changes per second; default 20")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the stamped changes go on")
    parser.add_argument("--budget", type=float, default=240.0,
                        help="seconds the full-sync repeats may take in all; fewer repeats beyond it")
    parser.add_argument("--profile", action="store_true", help="also cProfile one more full sync")
    parser.add_argument("--profile-watch", action="store_true",
                        help="cProfile the following sync thread (slows it: the watch figures are then pessimistic)")
    parser.add_argument("--gc-off", action="store_true",
                        help="disable Python's cyclic GC during the timed full syncs and baselines (what GC costs)")
    parser.add_argument("--in-process", action="store_true", help="run the stand-in in a thread of this process")
    parser.add_argument("--debug", action="store_true", help="DEBUG=1 (Django's debug cursor on)")
    args = parser.parse_args()
    if args.nodes < 1 or args.pods_per_node < 4 or args.repeat < 1 or args.events < 1 or args.rate <= 0:
        parser.error("--nodes, --repeat, --events and --rate must be positive and --pods-per-node at least 4")
    if args.events + args.rate * args.seconds > args.nodes:
        parser.error("--events plus --rate x --seconds must not exceed --nodes (one change per node)")

    global GC_OFF
    GC_OFF = args.gc_off
    sys.path.insert(0, str(BASE_DIR))
    os.chdir(BASE_DIR)
    began = time.perf_counter()
    # The stand-in builds the cluster while this process prepares the database.
    standin = LocalStandin() if args.in_process else RemoteStandin()
    standin.start("populate", args.nodes, args.pods_per_node)
    scratch = False
    stack = ExitStack()
    try:
        url, label, scratch = choose_database()
        os.environ["DATABASE_URL"] = url
        os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
        if args.debug:
            os.environ["DEBUG"] = "1"
        else:
            os.environ["DEBUG"] = "0"
            os.environ.setdefault("SECRET_KEY", "sync-benchmark-only-not-a-secret")
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        print(f"database: {label}")
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        from pools.config.defaults import init_defaults
        from pools.models import Node

        call_command("migrate", verbosity=0)
        init_defaults()
        if not scratch:
            remove_bench_config()
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="sync-bench-"))
        populated = standin.result()
        kubeconfig = standin.call("kubeconfig", str(Path(workdir) / "kubeconfig"))
        call_command("backend", "add", BACKEND, "--kubeconfig", kubeconfig, stdout=io.StringIO())
        import_pools()
        standin_url = standin.call("url")
        print(f"django {django.get_version()}, python {sys.version.split()[0]}, DEBUG={settings.DEBUG}, "
              f"{'GC OFF during the full syncs and baselines, ' if GC_OFF else ''}"
              f"{os.cpu_count()} CPUs; stand-in {'in this process' if args.in_process else 'in a child process'} "
              f"at {standin_url}")
        print(f"cluster: {populated['nodes']} nodes, {populated['pods']} pods "
              f"({populated['counted_pods']} bound and unfinished, the rest Succeeded/Failed or unbound), "
              f"built in {populated['seconds']:.1f} s; pools bench-training, bench-inference, bench-shared, "
              f"bench-cpu + default")

        # ---- 1. full sync vs baseline ----
        sync_seconds, sync_timers, baseline_seconds, baseline_timers = [], [], [], []
        snapshot = None
        stats = None
        part1_started = time.perf_counter()
        for attempt in range(args.repeat):
            clear_rows(scratch)
            seconds, timers, stats = timed_sync()
            counts = check_rows(populated, f"sync {attempt + 1}")
            sync_seconds.append(seconds)
            sync_timers.append(timers)
            if snapshot is None:
                snapshot = Snapshot()
            clear_rows(scratch)
            seconds, timers = baseline(standin_url, snapshot)
            check_rows(populated, f"baseline {attempt + 1}")
            baseline_seconds.append(seconds)
            baseline_timers.append(timers)
            print(f"  run {attempt + 1}: sync {sync_seconds[-1]:.2f} s, baseline {seconds:.2f} s")
            spent = time.perf_counter() - part1_started
            if attempt + 1 < args.repeat and spent / (attempt + 1) * (attempt + 2) > args.budget:
                print(f"  (stopping after {attempt + 1} run(s): another would pass the {args.budget:.0f} s budget)")
                break
        # Re-sync over the baseline's rows: a relist where nothing changed must write nothing.
        resync_seconds, resync_timers, resync_stats = timed_sync()
        check_rows(populated, "re-sync")
        if resync_stats.nodes_written or resync_stats.pods_written or resync_stats.pods_deleted:
            print(f"WARNING: the re-sync over the baseline's rows wrote {resync_stats.as_dict()}: the baseline's "
                  "rows differ from the sync's, or the sync rewrites unchanged rows")
        if args.profile:
            clear_rows(scratch)
            timed_sync(profile=True)
            check_rows(populated, "profiled sync")

        sync_median = statistics.median(sync_seconds)
        base_median = statistics.median(baseline_seconds)
        print(f"\n1. Full sync of {populated['nodes']} nodes and {populated['pods']} pods into empty tables "
              f"({len(sync_seconds)} run(s); {counts['nodes']} Node, {counts['pods']} Pod, "
              f"{counts['memberships']} NodeMembership rows; {stats.relists} list, "
              f"{stats.nodes_written} nodes and {stats.pods_written} pods written)")
        print(f"  sync runs: {', '.join(f'{s:.2f}' for s in sync_seconds)} s; "
              f"baseline runs: {', '.join(f'{s:.2f}' for s in baseline_seconds)} s")
        middle = sorted(range(len(sync_seconds)), key=sync_seconds.__getitem__)[(len(sync_seconds) - 1) // 2]
        print(f"  breakdown of the median run (run {middle + 1}, {sync_seconds[middle]:.2f} s):")
        for name, value in sync_breakdown([sync_timers[middle]], sync_seconds[middle]):
            print(f"    {name:<68} {value:7.2f} s")
        print_sql([sync_timers[middle]])
        base_middle = sorted(range(len(baseline_seconds)),
                             key=baseline_seconds.__getitem__)[(len(baseline_seconds) - 1) // 2]
        base_timers = baseline_timers[base_middle]
        print(f"  baseline, median run (run {base_middle + 1}, {baseline_seconds[base_middle]:.2f} s): urllib.request "
              "pages of 500, json.loads, rows from the stored values, one COPY per table:")
        for name in ("nodes: HTTP", "nodes: json.loads", "pods: HTTP", "pods: json.loads", "build rows",
                     "DB write (COPY x3, one transaction)", "  COPY pools_pod", "  COPY pools_node",
                     "  COPY pools_nodemembership", "  COMMIT"):
            print(f"    {name:<68} {base_timers.seconds.get(name, 0.0):7.2f} s")
        gc_base = statistics.median(sum(v for k, v in t.seconds.items() if k.startswith("GC "))
                                    for t in baseline_timers)
        gc_base_run = sum(v for k, v in base_timers.seconds.items() if k.startswith("GC "))
        print(f"    {'(cyclic GC pauses, inside the items above)':<68} {gc_base_run:7.2f} s")
        print(f"  re-sync with nothing changed (a relist after 410): {resync_seconds:.2f} s, "
              f"{resync_stats.nodes_written} nodes and {resync_stats.pods_written} pods written")
        print("  breakdown of the re-sync:")
        for name, value in sync_breakdown([resync_timers], resync_seconds):
            print(f"    {name:<68} {value:7.2f} s")

        # ---- 2. watch events ----
        names = list(Node.objects.filter(backend=backend_row()).values_list("name", flat=True))
        watch = watch_benchmark(standin, args, names)
        burst, series = watch["burst"], watch["series"]
        print(f"\n2. Watch: {burst['events']} node label changes back to back (they took "
              f"{burst['changes_took']:.2f} s in the stand-in): all {burst['committed']} rows seen committed "
              f"{burst['seconds']:.2f} s after the first change (the COMMIT that completed them ended at "
              f"{burst['commit_seconds']:.2f} s); per event median "
              f"{percentile(burst['latencies'], 0.5):.2f} s, 95th {percentile(burst['latencies'], 0.95):.2f} s")
        print("  burst batches (apply() ended at s after the first change, events, apply seconds): "
              + ", ".join(f"({end:.2f}, {events}, {seconds:.2f})" for end, events, seconds in burst["batches"]))
        bt = burst["timers"]
        items = [("apply() in all", "apply"), ("  Recompute.nodes", "Recompute.nodes"),
                 ("    their pods read back", "fetch Pod rows in Recompute.nodes"),
                 ("    their Node rows read", "fetch Node rows in Recompute.nodes"),
                 ("    bulk_update_changed (UPDATE ... CASE per field)", "bulk_update_changed"),
                 ("    update_rows (UPDATE ... FROM unnest)", "update_rows"),
                 ("    update_rows_json (UPDATE ... FROM jsonb_to_recordset)", "update_rows_json"),
                 ("  node_facts", "node_facts"), ("  COMMIT", "SQL COMMIT")]
        print("  where the burst's apply() time went: " + "; ".join(
            f"{label.strip()} {bt.get(key, 0.0):.2f} s" for label, key in items))
        print("  burst SQL: " + "; ".join(
            f"{name.removeprefix('SQL ')} {value:.3f} s" for name, value in
            sorted(((n, v) for n, v in bt.items() if n.startswith("SQL ") and v > 0.0005), key=lambda x: -x[1])))
        gc_burst = sum(v for n, v in bt.items() if n.startswith("GC "))
        print(f"  cyclic GC pauses during the burst (whole process): {gc_burst:.2f} s")
        print(f"  {series['events']} stamped changes at {args.rate:g}/s for {series['changes_took']:.1f} s: "
              f"{series['committed']} committed; latency median {percentile(series['latencies'], 0.5) * 1000:.0f} ms, "
              f"95th {percentile(series['latencies'], 0.95) * 1000:.0f} ms, "
              f"max {max(series['latencies'], default=float('nan')) * 1000:.0f} ms "
              f"(poll every 10 ms, a poll took {series['poll_ms']:.1f} ms)")
        wstats = watch["stats"]
        print(f"  following sync: {wstats.events} events in {wstats.batches} batches, {wstats.relists} lists, "
              f"{wstats.nodes_written} node rows written, errors {len(wstats.errors)}")
        if watch["profile"] is not None:
            import pstats

            out = io.StringIO()
            pstats.Stats(watch["profile"], stream=out).sort_stats("cumulative").print_stats(35)
            print("\ncProfile of the following sync thread (burst and trickle; sorted by cumtime, top 35):")
            print("\n".join(out.getvalue().splitlines()[:70]))
        errors = standin.call("server_errors")
        if errors:
            print(f"WARNING: the stand-in logged {len(errors)} errors; first:\n{errors[0]}")

        # ---- 3. table ----
        ratio = sync_median / base_median if base_median else float("inf")
        gc_sync = statistics.median(sum(v for k, v in t.seconds.items() if k.startswith("GC ")) for t in sync_timers)
        rows = [
            ("full sync, 5k nodes/150k pods (median)", f"{sync_median:.2f} s", ""),
            ("baseline: urllib+json.loads+COPY (median)", f"{base_median:.2f} s", ""),
            ("ratio sync / baseline", f"{ratio:.2f}x", "<= 2x"),
            ("GC pauses inside sync / baseline (median)", f"{gc_sync:.1f}/{gc_base:.1f} s", ""),
            ("re-sync, nothing changed", f"{resync_seconds:.2f} s", ""),
            (f"{burst['events']} MODIFIED events -> all committed", f"{burst['seconds']:.2f} s", "<= 1 s"),
            ("event -> committed row, median", f"{percentile(series['latencies'], 0.5):.3f} s", "<= 2 s"),
            ("event -> committed row, 95th percentile", f"{percentile(series['latencies'], 0.95):.3f} s", ""),
        ]
        if populated["nodes"] != 5000 or populated["pods"] != 150_000:
            rows[0] = (f"full sync, {populated['nodes']} nodes/{populated['pods']} pods (median)", rows[0][1], "")
        print("\nsummary")
        print(f"  {'measure':<44} {'figure':>10}  target")
        for name, figure, target in rows:
            print(f"  {name:<44} {figure:>10}  {target}")
        print(f"(whole benchmark: {time.perf_counter() - began:.0f} s)")
    finally:
        standin.close()
        stack.close()
        try:
            if scratch:
                drop_database()
            elif "django" in sys.modules and os.environ.get("DATABASE_URL"):
                remove_bench_config()
        except Exception as exc:  # report, but do not hide the original error
            print(f"cleanup failed: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
