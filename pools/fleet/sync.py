"""Keeps a backend's Node, Pod and NodeMembership rows equal to what its cluster reports.

One `BackendSync` per backend and run: it takes the backend's lease (so at most one sync runs per
backend, and a dead worker's lease simply expires), lists when it has no resourceVersion to resume
from, then follows one watch on nodes and one on pods until its deadline, applying events in batches.
Rows are written in bulk and only when a shown value changed; a failed or partial list deletes nothing.
"""

import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from pools.cluster import Cluster, ClusterError, Expired, ListPage, NotFound, WatchEvent
from pools.cluster.connect import connect
from pools.cluster.reflector import Follower, list_all
from pools.fleet import managed_jobs
from pools.fleet.placement import pool_selectors
from pools.inventory.membership import Membership, compile_selectors, node_membership
from pools.inventory.nodes import NodeFacts, NodeResources, deploy_disabled, gpu_present, label_text, node_facts
from pools.inventory.pods import PodFacts, counts_on_node, pod_facts
from pools.inventory.status import NO_USAGE, StatusOptions, component_states, gpu_figures, node_status, usage_from_pods
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pod, Pool, SyncLog
from pools.models.bulk import assign, bulk_update_changed, copy_or_bulk_create, gc_paused
from pools.models.dbwrites import is_locked, retry_locked

log = logging.getLogger("pools.fleet.sync")

LEASE_SECONDS = 90
BATCH_WAIT = 0.2  # seconds a batch may wait for more events: bounds event-to-row latency
MAX_BATCH = 5000
# SQLite has one writer at a time: smaller batches let the site and the CLI write between them (about 0.3 s each).
MAX_BATCH_SQLITE = 500
SYNC_LOG_KEEP = 200

POD_COLUMNS = ("namespace", "name", "node_name", "phase", "gpu", "cpu", "memory", "component", "pool")


class SyncBusy(Exception):
    """Another worker holds this backend's lease."""


def cluster_for(backend: Backend) -> Cluster:
    try:
        return connect(backend, state_dir=settings.OSMO_SIMULATED_STATE_DIR)
    except ClusterError as exc:
        record_failure(backend, exc.message)
        raise


_SHARED: dict[tuple, Cluster] = {}


def shared_cluster_for(backend: Backend) -> Cluster:
    """One client per backend and process, for the many short calls of dispatch and stop (a new client costs a
    kubeconfig read and a new connection, about half of a dispatch); a new one when the backend's connection
    settings change."""
    key = (backend.pk, backend.kind, backend.in_cluster, backend.kubeconfig_path, backend.kube_context,
           str(settings.OSMO_SIMULATED_STATE_DIR))
    cluster = _SHARED.get(key)
    if cluster is None:
        for old in [k for k in _SHARED if k[0] == backend.pk]:
            close = getattr(_SHARED.pop(old), "close", None)
            if close is not None:
                close()
        cluster = _SHARED[key] = cluster_for(backend)
    return cluster


def pool_label() -> str:
    return f"{settings.OSMO_LABEL_PREFIX}pool"


def facts_from_row(row: Node) -> NodeFacts:
    """The facts a stored row was computed from, so a worker that resumes a watch needs no re-list."""
    labels = row.labels
    return NodeFacts(
        name=row.name,
        uid=row.uid,
        labels=labels,
        taints=row.taints,
        unschedulable=row.unschedulable,
        conditions=row.conditions,
        capacity=NodeResources(row.cpu_capacity, row.memory_capacity, row.storage_capacity, row.gpu_total,
                               row.pods_capacity),
        allocatable=NodeResources(row.cpu_allocatable, row.memory_allocatable, row.storage_allocatable,
                                  row.gpu_allocatable, row.pods_allocatable),
        gpu_product=row.gpu_product,
        gpu_count=row.gpu_count,
        gpu_memory_mib=row.gpu_memory_mib,
        gpu_family=row.gpu_family,
        gpu_present=gpu_present(labels, row.gpu_total),
        deploy_disabled=deploy_disabled(labels),
    )


def node_values(facts: NodeFacts, usage, options: StatusOptions, membership: Membership) -> dict[str, Any]:
    status, reasons = node_status(facts, usage, options, node_pools=frozenset(membership.pools))
    gpus = gpu_figures(facts, usage)
    return {
        "uid": facts.uid,
        "labels": facts.labels,
        "label_text": label_text(facts.labels),
        "taints": facts.taints,
        "unschedulable": facts.unschedulable,
        "conditions": facts.conditions,
        "components": component_states(facts, usage, options),
        "cpu_capacity": facts.capacity.cpu_m,
        "cpu_allocatable": facts.allocatable.cpu_m,
        "cpu_requested": usage.cpu_requested_m,
        "memory_capacity": facts.capacity.memory,
        "memory_allocatable": facts.allocatable.memory,
        "memory_requested": usage.memory_requested,
        "storage_capacity": facts.capacity.ephemeral_storage,
        "storage_allocatable": facts.allocatable.ephemeral_storage,
        "pods_capacity": facts.capacity.pods,
        "pods_allocatable": facts.allocatable.pods,
        "gpu_product": facts.gpu_product,
        "gpu_count": facts.gpu_count,
        "gpu_memory_mib": facts.gpu_memory_mib,
        "gpu_family": facts.gpu_family,
        "gpu_total": gpus["total"],
        "gpu_allocatable": gpus["allocatable"],
        "gpu_used": gpus["used"],
        "gpu_free": gpus["free"],
        "gpu_unhealthy": gpus["unhealthy"],
        "status": status,
        "reasons": reasons,
        "pool_names": list(membership.pools),
        "platform_names": list(membership.platforms),
        "sharing": membership.sharing,
    }


def _pod_from_row(row: dict[str, Any]) -> PodFacts:
    return PodFacts(uid=row["uid"], namespace=row["namespace"], name=row["name"], node_name=row["node_name"],
                    phase=row["phase"], gpu=row["gpu"], cpu_m=row["cpu"], memory=row["memory"],
                    component=row["component"], pool=row["pool"])


def _pod_values(facts: PodFacts) -> dict[str, Any]:
    return {"namespace": facts.namespace, "name": facts.name, "node_name": facts.node_name, "phase": facts.phase,
            "gpu": facts.gpu, "cpu": facts.cpu_m, "memory": facts.memory, "component": facts.component,
            "pool": facts.pool}


@dataclass
class Stats:
    nodes_written: int = 0
    nodes_deleted: int = 0
    pods_written: int = 0
    pods_deleted: int = 0
    events: int = 0
    batches: int = 0
    relists: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items()}


class Recompute:
    """Recomputes stored node rows (usage, status, membership) from facts, writing only what changed."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.options = StatusOptions(toolkit_on_host=backend.toolkit_on_host,
                                     condition_rules=backend.node_condition_rules or {})
        self.selectors = compile_selectors(pool_selectors(backend.pk))
        self.pool_ids = dict(Pool.objects.values_list("name", "id"))

    def nodes(self, names: Iterable[str], facts: dict[str, NodeFacts], *, deleted: Iterable[str] = (),
              now=None, usage: dict | None = None) -> tuple[int, int]:
        """Recompute `names`, taking their facts from `facts` or else from their stored rows, and their usage
        from `usage` or else from their stored pods; delete `deleted`. Returns (rows written, rows deleted)."""
        now = now or timezone.now()
        names = set(names) | set(facts)
        deleted = set(deleted)
        removed = 0
        if deleted:
            removed, _ = Node.objects.filter(backend=self.backend, name__in=deleted).delete()
            removed = min(removed, len(deleted))
        names -= deleted
        if not names:
            return 0, removed
        rows = {row.name: row for row in Node.objects.filter(backend=self.backend, name__in=names)}
        if usage is None:
            pods = Pod.objects.filter(backend=self.backend, node_name__in=names).values("uid", *POD_COLUMNS)
            usage = usage_from_pods(_pod_from_row(row) for row in pods)
        new, changes, memberships = [], [], {}
        for name in names:
            row = rows.get(name)
            node_facts_ = facts.get(name) or (facts_from_row(row) if row else None)
            if node_facts_ is None:
                continue  # a pod names a node we have not seen yet; its own event will come
            membership = node_membership(node_facts_.labels, node_facts_.taints, self.selectors)
            values = node_values(node_facts_, usage.get(name, NO_USAGE), self.options, membership)
            memberships[name] = membership
            if row is None:
                new.append(Node(backend=self.backend, name=name, last_seen=now, updated_at=now, **values))
                continue
            changed = assign(row, values)
            if changed:
                changes.append((row, changed))
        copy_or_bulk_create(Node, new)
        written = len(new) + bulk_update_changed(Node, changes)
        if changes:
            # One constant UPDATE: per-row CASE expressions for these would double the cost of a burst.
            Node.objects.filter(id__in=[row.id for row, _ in changes]).update(last_seen=now, updated_at=now)
        changed_membership = {row.name for row, fields in changes if {"pool_names", "platform_names"} & set(fields)}
        changed_membership |= {node.name for node in new}
        if changed_membership:
            self._write_memberships(changed_membership, memberships)
        return written, removed

    def _write_memberships(self, names: set[str], memberships: dict[str, Membership]) -> None:
        ids = dict(Node.objects.filter(backend=self.backend, name__in=names).values_list("name", "id"))
        NodeMembership.objects.filter(node_id__in=ids.values()).delete()
        rows = []
        for name, node_id in ids.items():
            membership = memberships[name]
            for pool in membership.pools:
                if pool in self.pool_ids:
                    prefix = f"{pool}/"
                    platforms = [p.removeprefix(prefix) for p in membership.platforms if p.startswith(prefix)]
                    rows.append(NodeMembership(node_id=node_id, pool_id=self.pool_ids[pool], platforms=platforms))
        NodeMembership.objects.bulk_create(rows, batch_size=2000)


def new_lease_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """At most one sync per backend: a row-level lease that expires by itself if its holder dies."""

    def __init__(self, backend: Backend, seconds: int = LEASE_SECONDS, owner: str | None = None):
        self.backend = backend
        self.seconds = seconds
        self.owner = owner or new_lease_owner()

    def acquire(self) -> bool:
        def take() -> int:
            now = timezone.now()
            return Backend.objects.filter(pk=self.backend.pk).filter(
                Q(sync_lease_owner="") | Q(sync_lease_expires_at__lt=now) | Q(sync_lease_owner=self.owner)
            ).update(sync_lease_owner=self.owner, sync_lease_expires_at=now + timedelta(seconds=self.seconds))

        return retry_locked(take, what=f"backend {self.backend.name}: sync lease") == 1

    def renew(self) -> bool:
        return self.acquire()

    def release(self) -> None:
        try:
            retry_locked(lambda: Backend.objects.filter(pk=self.backend.pk, sync_lease_owner=self.owner).update(
                sync_lease_owner="", sync_lease_expires_at=None), what=f"backend {self.backend.name}: sync lease")
        except OperationalError as exc:
            if not is_locked(exc):
                raise
            log.warning("backend %s: could not release the sync lease (database is locked); it expires by "
                        "itself within %d s", self.backend.name, self.seconds)


class BackendSync:
    def __init__(self, backend: Backend, cluster: Cluster, *, clock: Callable[[], float] = time.monotonic,
                 lease_owner: str | None = None):
        """`lease_owner`: the same for successive runs of one watcher, so a run whose lease could not be released
        (the database stayed locked) does not keep the next run out until the lease expires."""
        self.backend = backend
        self.lease_owner = lease_owner
        self.cluster = cluster
        self.clock = clock
        self.stats = Stats()
        self.label = pool_label()
        self._recompute: Recompute | None = None
        self._listed_pods: list[PodFacts] = []
        # KAI's PodGroups or Kueue's Workloads too on an engine backend: why the engine holds our Jobs back.
        self.engine = managed_jobs.engine_of(backend)
        self.kinds = ("nodes", "pods", "jobs", "engine") if self.engine else ("nodes", "pods", "jobs")

    @property
    def recompute(self) -> Recompute:
        if self._recompute is None:
            self._recompute = Recompute(self.backend)
        return self._recompute

    # ---- entry point ------------------------------------------------------------------------------

    def run(self, *, seconds: float = 0.0, relist: bool = False) -> Stats:
        """Sync for `seconds` (0: one list and reconcile, then return). Raises SyncBusy when another
        worker holds the lease, ClusterError when the cluster could not be read."""
        lease = Lease(self.backend, owner=self.lease_owner)
        if not lease.acquire():
            raise SyncBusy(f"backend {self.backend.name}: another sync holds the lease")
        self._lease = lease
        try:
            self.backend.refresh_from_db()
            if relist or seconds <= 0 or not all(getattr(self.backend, f"{kind}_resource_version")
                                                 for kind in self.kinds):
                self.full_sync()
            if seconds > 0:
                self.follow(self.clock() + seconds)
            if self.stats.errors:
                self._failed(self.stats.errors[-1])
            else:
                self._succeeded()
            return self.stats
        except ClusterError as exc:
            self._failed(exc.message)
            raise
        finally:
            lease.release()

    # ---- full list ----------------------------------------------------------------------------------

    def full_sync(self) -> None:
        """List nodes and pods completely, then make the rows match. Nothing is deleted unless both
        lists completed."""
        with gc_paused():
            nodes = list_all(self.cluster.list_nodes)
            pods = list_all(self.cluster.list_pods)
            jobs = list_all(self._list_jobs)
            engine = self._list_engine_or_skip() if self.engine else None
            self.stats.relists += 1

            def write() -> None:
                with transaction.atomic():
                    self._reconcile_pods(pods.items)
                    self._reconcile_nodes(nodes.items, usage=usage_from_pods(self._listed_pods))
                    managed_jobs.reconcile(self.backend, jobs.items, pods.items,
                                           engine.items if engine else None, self.engine)
                    self._save_versions(nodes.resource_version, pods.resource_version, jobs.resource_version,
                                        engine.resource_version if engine else None)

            retry_locked(write, what=f"backend {self.backend.name}: full sync", before_retry=self._counts_reset())
            self._listed_pods = []

    def _list_jobs(self, **kwargs) -> ListPage:
        return self.cluster.list_jobs(managed_jobs.selector(), **kwargs)

    def _watch_jobs(self, resource_version: str, **kwargs):
        return self.cluster.watch_jobs(managed_jobs.selector(), resource_version, **kwargs)

    def _list_engine_or_skip(self) -> ListPage | None:
        """The engine's objects; a cluster without the engine's CRDs is an error to show, not a reason to stop
        following nodes, pods and Jobs."""
        try:
            return list_all(self._list_engine)
        except NotFound:
            kind = managed_jobs.ENGINE_KINDS[self.engine]
            self.stats.errors.append(f"backend {self.backend.name} is scheduled by {self.engine} but the cluster does "
                                     f"not serve {kind.plural}.{kind.group}: is the engine installed?")
            self.kinds = ("nodes", "pods", "jobs")
            return None

    def _list_engine(self, **kwargs) -> ListPage:
        return managed_jobs.list_engine(self.cluster, self.engine, **kwargs)

    def _watch_engine(self, resource_version: str, **kwargs):
        return managed_jobs.watch_engine(self.cluster, self.engine, resource_version, **kwargs)

    def _relist(self, kind: str) -> str:
        page = list_all({"nodes": self.cluster.list_nodes, "pods": self.cluster.list_pods,
                         "jobs": self._list_jobs, "engine": self._list_engine}[kind])
        self.stats.relists += 1

        def write() -> None:
            with transaction.atomic():
                if kind == "nodes":
                    self._reconcile_nodes(page.items)
                    self._save_versions(nodes=page.resource_version)
                elif kind == "jobs":
                    managed_jobs.reconcile(self.backend, page.items, None)
                    self._save_versions(jobs=page.resource_version)
                elif kind == "engine":
                    managed_jobs.reconcile(self.backend, None, None, page.items, self.engine)
                    self._save_versions(engine=page.resource_version)
                else:
                    touched = self._reconcile_pods(page.items)
                    self._recompute_nodes(touched, {})
                    managed_jobs.reconcile(self.backend, None, page.items)
                    self._save_versions(pods=page.resource_version)

        retry_locked(write, what=f"backend {self.backend.name}: {kind} list", before_retry=self._counts_reset())
        return page.resource_version

    def _reconcile_nodes(self, items: list[dict], usage: dict | None = None) -> None:
        facts = {}
        for item in items:
            node = node_facts(item)
            facts[node.name] = node
        stored = set(Node.objects.filter(backend=self.backend).values_list("name", flat=True))
        # Nodes whose facts did not change may still change status or usage: recompute every node.
        self._recompute_nodes(stored | set(facts), facts, deleted=stored - set(facts), usage=usage)
        Node.objects.filter(backend=self.backend).update(last_seen=timezone.now())

    def _reconcile_pods(self, items: list[dict]) -> set[str]:
        wanted = {}
        for item in items:
            pod = pod_facts(item, pool_label=self.label)
            if counts_on_node(pod):
                wanted[pod.uid] = pod
        self._listed_pods = list(wanted.values())
        stored = {row["uid"]: row for row in Pod.objects.filter(backend=self.backend).values("id", "uid",
                                                                                           *POD_COLUMNS)}
        return self._write_pods(wanted, set(stored) - set(wanted), stored)

    def _write_pods(self, upserts: dict[str, PodFacts], deletes: set[str], stored: dict[str, dict]) -> set[str]:
        """Returns the names of nodes whose pods changed."""
        touched: set[str] = set()
        for uid in deletes:
            if uid in stored:
                touched.add(stored[uid]["node_name"])
        create, update = [], []
        for uid, pod in upserts.items():
            values = _pod_values(pod)
            old = stored.get(uid)
            if old is None:
                create.append(Pod(backend=self.backend, uid=uid, **values))
                touched.add(pod.node_name)
            elif any(old[key] != value for key, value in values.items()):
                update.append(Pod(id=old["id"], backend=self.backend, uid=uid, **values))
                touched |= {pod.node_name, old["node_name"]}
        gone = [stored[uid]["id"] for uid in deletes if uid in stored]
        if gone:
            for start in range(0, len(gone), 5000):
                Pod.objects.filter(id__in=gone[start:start + 5000]).delete()
        copy_or_bulk_create(Pod, create)
        if update:
            Pod.objects.bulk_update(update, POD_COLUMNS, batch_size=1000)
        self.stats.pods_written += len(create) + len(update)
        self.stats.pods_deleted += len(gone)
        touched.discard("")
        return touched

    def _recompute_nodes(self, names, facts, deleted=(), usage=None) -> None:
        written, removed = self.recompute.nodes(names, facts, deleted=deleted, usage=usage)
        self.stats.nodes_written += written
        self.stats.nodes_deleted += removed

    def _save_versions(self, nodes: str | None = None, pods: str | None = None, jobs: str | None = None,
                       engine: str | None = None) -> None:
        values = {}
        for kind, version in (("nodes", nodes), ("pods", pods), ("jobs", jobs), ("engine", engine)):
            if version is not None:
                values[f"{kind}_resource_version"] = version
                setattr(self.backend, f"{kind}_resource_version", version)
        retry_locked(lambda: Backend.objects.filter(pk=self.backend.pk).update(**values),
                     what=f"backend {self.backend.name}: resourceVersion")

    # ---- watch ---------------------------------------------------------------------------------------

    def follow(self, deadline: float) -> None:
        """Follow both watches until `deadline`, applying events in batches as they arrive."""
        events: queue.Queue = queue.Queue()
        limit = MAX_BATCH_SQLITE if connection.vendor == "sqlite" else MAX_BATCH
        running = {}
        for kind in self.kinds:
            running[kind] = self._start(kind, getattr(self.backend, f"{kind}_resource_version"), deadline, events)
        while running:
            batch: list[tuple[str, Any]] = []
            try:
                batch.append(events.get(timeout=BATCH_WAIT))
                end = time.monotonic() + BATCH_WAIT
                while len(batch) < limit and time.monotonic() < end:
                    try:
                        batch.append(events.get(timeout=max(0.0, end - time.monotonic())))
                    except queue.Empty:
                        break
            except queue.Empty:
                pass
            node_events = [item for kind, item in batch if kind == "nodes"]
            pod_events = [item for kind, item in batch if kind == "pods"]
            job_events = [item for kind, item in batch if kind == "jobs"]
            engine_events = [item for kind, item in batch if kind == "engine"]
            if node_events or pod_events or job_events or engine_events:
                self.apply(node_events, pod_events, job_events, engine_events)
            for kind, item in batch:
                if kind.startswith("end:"):
                    ended = kind.removeprefix("end:")
                    follower, error = item
                    del running[ended]
                    if isinstance(error, Expired):
                        log.info("backend %s: %s watch expired; listing again", self.backend.name, ended)
                        version = self._relist(ended)
                        if self.clock() < deadline:
                            running[ended] = self._start(ended, version, deadline, events)
                    elif error is not None:
                        raise error
                    else:
                        self._save_versions(**{ended: follower.resource_version})
            if not self._lease.renew():
                raise ClusterError(f"backend {self.backend.name}: lost the sync lease")

    def _start(self, kind: str, version: str, deadline: float, events: queue.Queue) -> Follower:
        watch = {"jobs": self._watch_jobs, "engine": self._watch_engine}.get(kind) or getattr(self.cluster,
                                                                                              f"watch_{kind}")
        follower = Follower(self._recording(watch), version, timeout_seconds=60, clock=self.clock,
                            log=log)

        def pump() -> None:
            error = None
            try:
                for event in follower.events(deadline):
                    events.put((kind, event))
            except BaseException as exc:  # handed to the main thread, which decides
                error = exc
            events.put((f"end:{kind}", (follower, error)))

        threading.Thread(target=pump, name=f"watch-{kind}-{self.backend.name}", daemon=True).start()
        return follower

    def _recording(self, watch):
        errors = self.stats.errors
        name = self.backend.name

        def recorded(version, **kwargs):
            try:
                yield from watch(version, **kwargs)
            except Expired:
                raise
            except ClusterError as exc:
                errors.append(exc.message)
                log.warning("backend %s: %s", name, exc.message)
                raise

        return recorded

    def apply(self, node_events: list[WatchEvent], pod_events: list[WatchEvent],
              job_events: list[WatchEvent] = (), engine_events: list[WatchEvent] = ()) -> None:
        """Apply one batch of watch events in one transaction. A batch that finds the database locked is
        tried again whole (its counts too); only a lock that outlasts every try ends the run, and the next
        run resumes from the last stored resourceVersion."""
        count = len(node_events) + len(pod_events) + len(job_events) + len(engine_events)
        retry_locked(lambda: self._apply(node_events, pod_events, list(job_events), list(engine_events)),
                     before_retry=self._counts_reset(), what=f"backend {self.backend.name}: batch of {count} events")

    def _apply(self, node_events: list[WatchEvent], pod_events: list[WatchEvent],
               job_events: list[WatchEvent], engine_events: list[WatchEvent] = ()) -> None:
        self.stats.events += len(node_events) + len(pod_events) + len(job_events) + len(engine_events)
        self.stats.batches += 1
        with transaction.atomic():
            touched: set[str] = set()
            if pod_events:
                latest: dict[str, tuple[str, PodFacts]] = {}
                for event in pod_events:
                    pod = pod_facts(event.object, pool_label=self.label)
                    latest[pod.uid] = (event.type, pod)
                upserts = {uid: pod for uid, (kind, pod) in latest.items()
                           if kind != "DELETED" and counts_on_node(pod)}
                deletes = set(latest) - set(upserts)
                stored = {row["uid"]: row for row in Pod.objects.filter(backend=self.backend, uid__in=list(latest))
                          .values("id", "uid", *POD_COLUMNS)}
                touched = self._write_pods(upserts, deletes, stored)
            facts: dict[str, NodeFacts] = {}
            deleted: set[str] = set()
            for event in node_events:
                node = node_facts(event.object)
                if event.type == "DELETED":
                    deleted.add(node.name)
                    facts.pop(node.name, None)
                else:
                    deleted.discard(node.name)
                    facts[node.name] = node
            self._recompute_nodes(touched, facts, deleted)
            managed_jobs.apply_events(self.backend, job_events, pod_events, engine_events, self.engine)
            versions = {}
            for kind, kind_events in (("nodes", node_events), ("pods", pod_events), ("jobs", job_events),
                                      ("engine", engine_events)):
                if kind_events:
                    versions[kind] = kind_events[-1].resource_version
            self._save_versions(**versions)

    def _counts_reset(self) -> Callable[[], None]:
        """Puts the write counters back as they are now, for a write that is about to be tried again."""
        counts = {key: value for key, value in self.stats.as_dict().items() if isinstance(value, int)}

        def reset() -> None:
            for key, value in counts.items():
                setattr(self.stats, key, value)

        return reset

    # ---- outcome ---------------------------------------------------------------------------------------

    def _succeeded(self) -> None:
        now = timezone.now()
        retry_locked(lambda: Backend.objects.filter(pk=self.backend.pk).update(
            last_sync_at=now, sync_error="", sync_failing_since=None), what=f"backend {self.backend.name}: outcome")

    def _failed(self, message: str) -> None:
        record_failure(self.backend, message)


def record_failure(backend: Backend, message: str) -> None:
    now = timezone.now()
    log.error("backend %s: sync failed: %s", backend.name, message)

    def write() -> None:
        with transaction.atomic():
            Backend.objects.filter(pk=backend.pk).update(sync_error=message)
            Backend.objects.filter(pk=backend.pk, sync_failing_since__isnull=True).update(sync_failing_since=now)
            SyncLog.objects.create(backend=backend, message=message)
            stale = (SyncLog.objects.filter(backend=backend).order_by("-at", "-id")
                     .values_list("id", flat=True)[SYNC_LOG_KEEP:])
            SyncLog.objects.filter(id__in=list(stale)).delete()

    try:
        retry_locked(write, what=f"backend {backend.name}: sync failure")
    except OperationalError as exc:
        if not is_locked(exc):
            raise
        # Recording is best effort: the caller reports the failure itself, which must not be masked.
        log.warning("backend %s: the sync failure could not be recorded (database is locked)", backend.name)


def mark_stale_backends(now=None) -> list[str]:
    """Nodes of a backend without a good sync for longer than the limit show Unknown; forgetting the
    resourceVersions makes the next good sync list again, which restores every status."""
    now = now or timezone.now()
    limit = now - timedelta(seconds=settings.OSMO_BACKEND_STALE_SECONDS)
    stale = Backend.objects.filter(Q(last_sync_at__lt=limit) | Q(last_sync_at__isnull=True)).filter(nodes__isnull=False)
    names = []
    for backend in stale.distinct():
        since = backend.last_sync_at.isoformat(timespec="seconds") if backend.last_sync_at else "never"
        marked = Node.objects.filter(backend=backend).exclude(status="Unknown").update(
            status="Unknown", reasons=[f"Backend {backend.name} not synced since {since}"])
        if marked:
            Backend.objects.filter(pk=backend.pk).update(nodes_resource_version="", pods_resource_version="",
                                                            jobs_resource_version="", engine_resource_version="")
            names.append(backend.name)
    return names


def refresh_memberships() -> None:
    """Recompute every node's pools after a configuration change (in the caller's transaction)."""
    for backend in Backend.objects.filter(nodes__isnull=False).distinct():
        names = list(Node.objects.filter(backend=backend).values_list("name", flat=True))
        Recompute(backend).nodes(names, {})


def memberships_follow_configuration(kind: str, result) -> None:
    """Pools and templates decide which nodes belong where: recompute memberships in the write's own
    transaction, so no reader sees the new configuration with the old placement (a write hook of
    `pools.config.kinds`)."""
    if kind in (ConfigKind.POOL, ConfigKind.POD_TEMPLATE) and result.changed:
        refresh_memberships()
