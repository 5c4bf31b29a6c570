"""Keeps a backend's Node, Pod and NodeMembership rows equal to what its cluster reports.

One `BackendSync` per backend and run: it takes the backend's lease (so at most one sync runs per
backend, and a dead worker's lease simply expires), lists when it has no resourceVersion to resume
from, then follows one watch on nodes and one on pods until its deadline, applying events in batches.
It lists again when the watches cannot be trusted (BackendSync.must_list_again: the cluster's
resourceVersions went backwards, or OSMO_RELIST_SECONDS passed); a watch that failed and resumed lost
nothing, so only one still failing at the run's end makes it a failed sync.
Rows are written in bulk and only when a shown value changed; a failed or partial list deletes nothing.
"""

import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from pools.cluster import Cluster, ClusterError, Expired, ListPage, NotFound, Unavailable, WatchEvent
from pools.cluster.connect import connect
from pools.cluster.reflector import Backoff, Follower, fold_pages, list_all
from pools.fleet import managed_jobs, node_history
from pools.fleet.clusters import cluster_ids, owner_id
from pools.fleet.placement import pool_selectors
from pools.inventory import node_events
from pools.inventory.membership import Membership, compile_selectors, node_membership
from pools.inventory.nodes import NodeFacts, NodeResources, deploy_disabled, gpu_present, label_text, node_facts
from pools.inventory.pods import PodFacts, counts_on_node, pod_facts
from pools.inventory.status import (
    NO_USAGE,
    UNKNOWN,
    NodeUsage,
    StatusOptions,
    component_states,
    gpu_figures,
    node_status,
    usage_from_pods,
)
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pod, Pool, SyncLog
from pools.models.bulk import (
    assign,
    bulk_update_changed,
    copy_or_bulk_create,
    copy_values,
    gc_paused,
    update_rows,
    update_rows_json,
)
from pools.models.dbwrites import is_locked, retry_locked

log = logging.getLogger("pools.fleet.sync")

LEASE_SECONDS = 90
BATCH_WAIT = 0.2  # seconds a batch may wait for more events: bounds event-to-row latency
MAX_BATCH = 5000
# SQLite has one writer at a time: smaller batches let the site and the CLI write between them (about 0.3 s each).
MAX_BATCH_SQLITE = 500
SYNC_LOG_KEEP = 200
# A long run stops its watches this often to check that they can still be trusted (see BackendSync.must_list_again).
CHECK_SECONDS = 60.0
# A running sync looks this often (in seconds) whether it was asked for a full list (`sync NAME --once` beside it,
# or the backend marked stale): both clear the backend's listed_at.
ASKED_SECONDS = 1.0
# Set when this process is shutting down (a Celery worker's warm shutdown, pools.tasks): a round running here ends
# within ASKED_SECONDS and releases its lease, instead of holding the shutdown up for the rest of its round or, if
# killed meanwhile, leaving the lease to expire.
STOPPING = threading.Event()
# The same, across processes: a prefork worker's rounds run in its children, and only the parent hears the SIGTERM.
# The parent makes it before it forks them (pools.tasks, at worker_init); a shared semaphore, so the children see
# the parent set it.
_SHARED_STOPPING: Any = None


def share_stopping(event: Any) -> None:
    """Use `event` (a multiprocessing Event made before the pool forks) as the stop flag this process's children
    see too."""
    global _SHARED_STOPPING
    _SHARED_STOPPING = event


def stop_rounds() -> None:
    """Ask every sync round of this process, and of the children it forked, to end and release its lease."""
    STOPPING.set()
    if _SHARED_STOPPING is not None:
        _SHARED_STOPPING.set()


def stopping() -> bool:
    return STOPPING.is_set() or (_SHARED_STOPPING is not None and _SHARED_STOPPING.is_set())

POD_COLUMNS = ("namespace", "name", "node_name", "phase", "gpu", "cpu", "memory", "component", "pool",
               "preemptible")


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
                    component=row["component"], pool=row["pool"], preemptible=row["preemptible"])


def _pod_values(facts: PodFacts) -> dict[str, Any]:
    return {"namespace": facts.namespace, "name": facts.name, "node_name": facts.node_name, "phase": facts.phase,
            "gpu": facts.gpu, "cpu": facts.cpu_m, "memory": facts.memory, "component": facts.component,
            "pool": facts.pool, "preemptible": facts.preemptible}


@dataclass
class ListedPods:
    """A full list of pods, kept compact: the facts of those that count on a node (the Pod rows, about 200 bytes
    each) and the objects of our Jobs' pods (managed_jobs reads those whole); every other object is dropped with
    its page."""

    facts: dict[str, PodFacts] = field(default_factory=dict)
    ours: list[dict] = field(default_factory=list)


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
    # Transient errors (a broken stream, a 5xx, a refused connection) the watches backed off from: they fail the
    # round only if the watch had not recovered by its end, when they are in `errors` too.
    transient: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items()}


class Recompute:
    """Recomputes stored node rows (usage, status, membership) from facts, writing only what changed."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.options = StatusOptions(toolkit_on_host=backend.toolkit_on_host,
                                     condition_rules=backend.node_condition_rules or {})
        # The pools of every backend sharing the cluster: its nodes are one set of rows (pools.fleet.clusters).
        self.selectors = compile_selectors(pool_selectors(cluster_ids(backend.pk)))
        self.pool_ids = dict(Pool.objects.values_list("name", "id"))

    def nodes(self, names: Iterable[str], facts: dict[str, NodeFacts], *, deleted: Iterable[str] = (),
              now=None, usage: dict | None = None) -> tuple[int, int]:
        """Recompute `names`, taking their facts from `facts` or else from their stored rows, and their usage
        from `usage` or else from their stored pods; delete `deleted`. Returns (rows written, rows deleted)."""
        now = now or timezone.now()
        names = set(names) | set(facts)
        deleted = set(deleted)
        removed = 0
        events: list[tuple[str, str, dict]] = []
        if deleted:
            gone = list(Node.objects.filter(backend=self.backend, name__in=deleted).values_list("name", flat=True))
            Node.objects.filter(backend=self.backend, name__in=gone).delete()
            removed = len(gone)
            events += [(name, node_events.REMOVED, {}) for name in gone]
        names -= deleted
        if not names:
            node_history.record(self.backend, events, now)
            return 0, removed
        rows = {row.name: row for row in Node.objects.filter(backend=self.backend, name__in=names)}
        if usage is None:
            usage = self._stored_usage(names)
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
                events += [(name, kind, details) for kind, details in node_events.node_changes(None, values)]
                continue
            before = node_events.watched(row)
            changed = assign(row, values)
            if changed:
                changes.append((row, changed))
                events += [(name, kind, details)
                           for kind, details in node_events.node_changes(before, node_events.watched(row))]
        copy_or_bulk_create(Node, new)
        node_history.record(self.backend, events, now)
        written = len(new) + self._update_changed(changes, now)
        changed_membership = {row.name for row, fields in changes if {"pool_names", "platform_names"} & set(fields)}
        changed_membership |= {node.name for node in new}
        if changed_membership:
            self._write_memberships(changed_membership, memberships)
        return written, removed

    def _stored_usage(self, names: set[str]) -> dict[str, NodeUsage]:
        """usage_from_pods over the stored pods of `names`. On PostgreSQL summed by the database, one row per node:
        a burst of 1,000 node events would otherwise read back some 25,000 pod rows."""
        pods = Pod.objects.filter(backend=self.backend, node_name__in=names)
        if connection.vendor != "postgresql":
            return usage_from_pods(_pod_from_row(row) for row in pods.values("uid", *POD_COLUMNS))
        # Imported here: django.contrib.postgres imports psycopg, which the admin (it imports this module) and a
        # process on SQLite need not load at start-up.
        from django.contrib.postgres.aggregates import ArrayAgg

        # Every stored pod counts on its node (bound, not terminal: the writers keep only those), so all are summed.
        sums = (pods.order_by().values("node_name")
                .annotate(gpu_used=Sum("gpu"), cpu=Sum("cpu"), memory=Sum("memory"), count=Count("id"),
                          components=ArrayAgg("component", distinct=True, filter=~Q(component=""), default=[]),
                          pools=ArrayAgg("pool", distinct=True, filter=~Q(pool=""), default=[])))
        # int(): PostgreSQL sums bigints as numeric.
        return {row["node_name"]: NodeUsage(int(row["gpu_used"]), int(row["cpu"]), int(row["memory"]), row["count"],
                                            frozenset(row["components"]), frozenset(row["pools"])) for row in sums}

    @staticmethod
    def _update_changed(changes: list[tuple[Node, tuple[str, ...]]], now) -> int:
        """Writes the changed fields of changed rows, with last_seen and updated_at. On PostgreSQL one
        `UPDATE ... FROM jsonb_to_recordset(...)` per distinct set of changed fields (one for a burst of label
        changes): Django's bulk_update builds a CASE per field and row, most of the time of a burst of 1,000 events."""
        if connection.vendor != "postgresql":
            written = bulk_update_changed(Node, changes)
            if changes:
                # One constant UPDATE: per-row CASE expressions for these would double the cost of a batch.
                Node.objects.filter(id__in=[row.id for row, _ in changes]).update(last_seen=now, updated_at=now)
            return written
        groups: dict[tuple[str, ...], list[Node]] = defaultdict(list)
        for row, fields in changes:
            groups[fields].append(row)
        for fields, rows in groups.items():
            update_rows_json(Node, [{"id": row.id, "last_seen": now, "updated_at": now,
                                     **{name: getattr(row, name) for name in fields}} for row in rows],
                             [*fields, "last_seen", "updated_at"])
        return len(changes)

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
                 lease_owner: str | None = None, now: Callable[[], datetime] = timezone.now):
        """`lease_owner`: the same for successive runs of one watcher, so a run whose lease could not be released
        (the database stayed locked) does not keep the next run out until the lease expires. `clock` times the
        run and `now` dates the full lists (OSMO_RELIST_SECONDS); tests move both."""
        self.backend = backend
        self.lease_owner = lease_owner
        self.cluster = cluster
        self.clock = clock
        self.now = now
        self.check_seconds = CHECK_SECONDS
        self.backoff: Callable[[], Backoff] = Backoff  # each watch's, between tries after a failure
        self._failing: dict[str, str] = {}  # kind: the transient error its watch has not recovered from yet
        self.stats = Stats()
        self.label = pool_label()
        self._recompute: Recompute | None = None
        # KAI's PodGroups or Kueue's Workloads too on an engine backend: why the engine holds our Jobs back.
        self.engine = managed_jobs.engine_of(backend)
        # And the Job controller's FailedCreate Events: why a Job of ours has no pods.
        # A backend sharing its cluster with one registered before it reads that one's nodes and pods (one row per
        # physical node, pools.fleet.clusters): it watches pods only for its own Jobs'.
        self.owns_nodes = owner_id(backend) == backend.pk
        self.kinds = tuple(kind for kind in ("nodes", "pods", "jobs", "events", "engine")
                           if (kind != "engine" or self.engine) and (kind != "nodes" or self.owns_nodes))

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
                                                 for kind in self.kinds) or self.must_list_again():
                self.list_everything()
            if seconds > 0:
                end = self.clock() + seconds
                while True:
                    self.follow(min(end, self.clock() + self.check_seconds))
                    if self.clock() >= end or stopping():
                        break
                    if self.must_list_again():
                        self.list_everything()
            # A watch that failed and then resumed lost nothing; one still failing at the end is this round's error.
            self.stats.errors.extend(self._failing.values())
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

    # ---- when to list again ----------------------------------------------------------------------------

    def list_everything(self) -> None:
        """full_sync, dated (the relist backstop counts from the start of the last complete list)."""
        started = self.now()
        self.full_sync()
        # Every kind answered in full: a watch that failed before this list has recovered, even one whose new stream
        # has not opened yet when the round ends.
        self._failing.clear()
        retry_locked(lambda: Backend.objects.filter(pk=self.backend.pk).update(listed_at=started),
                     what=f"backend {self.backend.name}: list time")
        self.backend.listed_at = started

    def must_list_again(self) -> bool:
        """Whether the watches can no longer be trusted to bring every change: at the start of each run and every
        `check_seconds` of a long one.

        A watch from a resourceVersion the server has not reached yet answers 200 and sends nothing: no 410, no
        error. That is what a cluster whose resourceVersions went backwards does (etcd restored from a backup, the
        cluster recreated behind the same address), so watches resumed from the stored versions would miss every
        later change, a deleted node staying and a new one never appearing, for as long as the sync runs. Hence a
        cheap list (one item) of each kind: resourceVersions are opaque strings, but every API server issues etcd's
        revision, an integer that only grows, and a consistent list answers the current one; when both are
        integers and the server's is lower than ours, it went back. A rewind the numbers cannot show (the new
        cluster already past our version), or anything else a watch missed, is caught by listing in full every
        OSMO_RELIST_SECONDS (the backstop client-go's informers have in their resync)."""
        # Read again: marking the backend stale (mark_stale_backends) clears it, for the run it finds still going.
        listed_at = self.backend.listed_at = Backend.objects.values_list("listed_at", flat=True).get(pk=self.backend.pk)
        if listed_at is None or self.now() - listed_at >= timedelta(seconds=settings.OSMO_RELIST_SECONDS):
            log.info("backend %s: last complete list %s; listing again (OSMO_RELIST_SECONDS=%s)", self.backend.name,
                     listed_at.isoformat(timespec="seconds") if listed_at else "never", settings.OSMO_RELIST_SECONDS)
            return True
        return self._went_back()

    def _went_back(self) -> bool:
        listers = {"nodes": self.cluster.list_nodes, "pods": self.cluster.list_pods, "jobs": self._list_jobs,
                   "engine": self._list_engine, "events": self._list_events}
        for kind in self.kinds:
            stored = getattr(self.backend, f"{kind}_resource_version")
            if not stored.isdigit():
                continue
            try:
                current = listers[kind](limit=1).resource_version
            except ClusterError as exc:
                # Cannot tell now: the watches meet the same error, and report it if it lasts.
                log.info("backend %s: could not read the current %s resourceVersion: %s", self.backend.name, kind,
                         exc.message)
                return False
            if current.isdigit() and int(current) < int(stored):
                log.warning("backend %s: the cluster's %s resourceVersion %s is below ours, %s (etcd restored from a "
                            "backup, or the cluster recreated?); listing again", self.backend.name, kind, current,
                            stored)
                return True
        return False

    # ---- full list ----------------------------------------------------------------------------------

    def full_sync(self) -> None:
        """List nodes and pods completely, then make the rows match. Nothing is deleted unless both
        lists completed."""
        with gc_paused():
            # Page by page, keeping only facts: the decoded pods of a large cluster are gigabytes.
            nodes, nodes_version = self._list_node_facts() if self.owns_nodes else ({}, None)
            pods, pods_version = self._list_pod_facts()
            jobs = list_all(self._list_jobs)
            events = list_all(self._list_events)
            engine = self._list_engine_or_skip() if self.engine else None
            self.stats.relists += 1
            usage = usage_from_pods(pods.facts.values())

            def write() -> None:
                with transaction.atomic():
                    if self.owns_nodes:
                        self._replace_pods(pods.facts)
                        self._reconcile_node_facts(nodes, usage=usage)
                    else:  # rows it wrote before it shared the cluster: the owner's are the cluster's
                        Pod.objects.filter(backend=self.backend).delete()
                        Node.objects.filter(backend=self.backend).delete()
                    managed_jobs.reconcile(self.backend, jobs.items, pods.ours,
                                           engine.items if engine else None, self.engine, events.items)
                    self._save_versions(nodes_version, pods_version, jobs.resource_version,
                                        engine.resource_version if engine else None, events.resource_version)

            retry_locked(write, what=f"backend {self.backend.name}: full sync", before_retry=self._counts_reset())

    def _list_node_facts(self) -> tuple[dict[str, NodeFacts], str]:
        """Every node's facts, {name: facts}, and the list's resourceVersion."""
        def add(facts: dict[str, NodeFacts], page: ListPage) -> None:
            for item in page.items:
                node = node_facts(item)
                facts[node.name] = node

        return fold_pages(self.cluster.list_nodes, dict, add)

    def _list_pod_facts(self) -> tuple["ListedPods", str]:
        """What a full list of pods leaves once each page is dropped, and the list's resourceVersion."""
        label, prefix = self.label, settings.OSMO_LABEL_PREFIX

        def add(listed: ListedPods, page: ListPage) -> None:
            for item in page.items:
                pod = pod_facts(item, pool_label=label)
                if counts_on_node(pod):
                    listed.facts[pod.uid] = pod
                if managed_jobs.ours(item, prefix, self.backend.name):
                    listed.ours.append(item)

        return fold_pages(self.cluster.list_pods, ListedPods, add)

    def _list_jobs(self, **kwargs) -> ListPage:
        return self.cluster.list_jobs(managed_jobs.selector(), **kwargs)

    def _watch_jobs(self, resource_version: str, **kwargs):
        return self.cluster.watch_jobs(managed_jobs.selector(), resource_version, **kwargs)

    def _list_events(self, **kwargs) -> ListPage:
        return managed_jobs.list_create_failures(self.cluster, **kwargs)

    def _watch_events(self, resource_version: str, **kwargs):
        return managed_jobs.watch_create_failures(self.cluster, resource_version, **kwargs)

    def _list_engine_or_skip(self) -> ListPage | None:
        """The engine's objects; a cluster without the engine's CRDs is an error to show, not a reason to stop
        following nodes, pods and Jobs."""
        try:
            return list_all(self._list_engine)
        except NotFound:
            kind = managed_jobs.ENGINE_KINDS[self.engine]
            self.stats.errors.append(f"backend {self.backend.name} is scheduled by {self.engine} but the cluster does "
                                     f"not serve {kind.plural}.{kind.group}: is the engine installed?")
            self.kinds = tuple(kind for kind in self.kinds if kind != "engine")
            return None

    def _list_engine(self, **kwargs) -> ListPage:
        return managed_jobs.list_engine(self.cluster, self.engine, **kwargs)

    def _watch_engine(self, resource_version: str, **kwargs):
        return managed_jobs.watch_engine(self.cluster, self.engine, resource_version, **kwargs)

    def _relist(self, kind: str) -> str:
        if kind == "nodes":
            listed, version = self._list_node_facts()
        elif kind == "pods":
            listed, version = self._list_pod_facts()
        else:
            page = list_all({"jobs": self._list_jobs, "engine": self._list_engine, "events": self._list_events}[kind])
            listed, version = page.items, page.resource_version
        self.stats.relists += 1

        def write() -> None:
            with transaction.atomic():
                if kind == "nodes":
                    self._reconcile_node_facts(listed)
                    self._save_versions(nodes=version)
                elif kind == "jobs":
                    managed_jobs.reconcile(self.backend, listed, None)
                    self._save_versions(jobs=version)
                elif kind == "engine":
                    managed_jobs.reconcile(self.backend, None, None, listed, self.engine)
                    self._save_versions(engine=version)
                elif kind == "events":
                    managed_jobs.reconcile(self.backend, None, None, events=listed)
                    self._save_versions(events=version)
                else:
                    if self.owns_nodes:
                        self._recompute_nodes(self._replace_pods(listed.facts), {})
                    managed_jobs.reconcile(self.backend, None, listed.ours)
                    self._save_versions(pods=version)

        retry_locked(write, what=f"backend {self.backend.name}: {kind} list", before_retry=self._counts_reset())
        return version

    def _reconcile_node_facts(self, facts: dict[str, NodeFacts], usage: dict | None = None) -> None:
        """A full list's nodes replace the stored ones."""
        stored = set(Node.objects.filter(backend=self.backend).values_list("name", flat=True))
        # Nodes whose facts did not change may still change status or usage: recompute every node.
        self._recompute_nodes(stored | set(facts), facts, deleted=stored - set(facts), usage=usage)
        Node.objects.filter(backend=self.backend).update(last_seen=timezone.now())

    def _replace_pods(self, wanted: dict[str, PodFacts]) -> set[str]:
        """A full list's pods (those that count on a node) replace the stored ones: the stored rows are streamed
        and compared one by one, new ones copied in, changed ones updated, unlisted ones deleted. `wanted` is
        left as it was (a retried write starts again from it). Returns the names of nodes whose pods changed."""
        touched: set[str] = set()
        seen: set[str] = set()
        gone: list[int] = []
        update: list[dict[str, Any]] = []
        node_at = 1 + POD_COLUMNS.index("node_name")
        rows = (Pod.objects.filter(backend=self.backend).values_list("id", "uid", *POD_COLUMNS)
                .iterator(chunk_size=5000))
        for row in rows:
            pod = wanted.get(row[1])
            if pod is None:
                gone.append(row[0])
                touched.add(row[node_at])
                continue
            seen.add(pod.uid)
            values = (pod.namespace, pod.name, pod.node_name, pod.phase, pod.gpu, pod.cpu_m, pod.memory,
                      pod.component, pod.pool, pod.preemptible)
            if row[2:] != values:
                update.append({"id": row[0], **dict(zip(POD_COLUMNS, values, strict=True))})
                touched |= {pod.node_name, row[node_at]}
        for start in range(0, len(gone), 5000):
            Pod.objects.filter(id__in=gone[start:start + 5000]).delete()
        created = 0
        backend_id = self.backend.pk

        def new_rows():
            nonlocal created
            for uid, pod in wanted.items():
                if uid not in seen:
                    created += 1
                    touched.add(pod.node_name)
                    yield (backend_id, uid, pod.namespace, pod.name, pod.node_name, pod.phase, pod.gpu, pod.cpu_m,
                           pod.memory, pod.component, pod.pool, pod.preemptible)

        copy_values(Pod, ("backend_id", "uid", *POD_COLUMNS), new_rows())
        update_rows(Pod, update, list(POD_COLUMNS))
        self.stats.pods_written += created + len(update)
        self.stats.pods_deleted += len(gone)
        touched.discard("")
        return touched

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
                       engine: str | None = None, events: str | None = None) -> None:
        values = {}
        for kind, version in (("nodes", nodes), ("pods", pods), ("jobs", jobs), ("engine", engine),
                              ("events", events)):
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
        stopped = threading.Event()  # set when asked for a full list: the watches still open end unread
        for kind in self.kinds:
            running[kind] = self._start(kind, getattr(self.backend, f"{kind}_resource_version"), deadline, events,
                                        stopped)
        next_look = time.monotonic() + ASKED_SECONDS
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
            event_events = [item for kind, item in batch if kind == "events"]
            if node_events or pod_events or job_events or engine_events or event_events:
                self.apply(node_events, pod_events, job_events, engine_events, event_events)
            for kind, item in batch:
                if kind.startswith("end:"):
                    ended = kind.removeprefix("end:")
                    follower, error = item
                    del running[ended]
                    if isinstance(error, Expired):
                        log.info("backend %s: %s watch expired; listing again", self.backend.name, ended)
                        version = self._relist(ended)
                        if self.clock() < deadline:
                            running[ended] = self._start(ended, version, deadline, events, stopped)
                    elif error is not None:
                        raise error
                    else:
                        self._save_versions(**{ended: follower.resource_version})
            if not self._lease.renew():
                raise ClusterError(f"backend {self.backend.name}: lost the sync lease")
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + ASKED_SECONDS
                if stopping():
                    stopped.set()
                    return
                if Backend.objects.filter(pk=self.backend.pk, listed_at__isnull=True).exists():
                    # The run lists in full before it follows again (must_list_again); what the watches
                    # delivered is applied, and their versions are saved with it.
                    log.info("backend %s: asked for a full list", self.backend.name)
                    stopped.set()
                    return

    def _start(self, kind: str, version: str, deadline: float, events: queue.Queue,
               stopped: threading.Event) -> Follower:
        watch = {"jobs": self._watch_jobs, "engine": self._watch_engine,
                 "events": self._watch_events}.get(kind) or getattr(self.cluster, f"watch_{kind}")
        follower = Follower(self._recording(watch, kind), version, timeout_seconds=60, clock=self.clock,
                            backoff=self.backoff(), log=log)

        def pump() -> None:
            error = None
            try:
                for event in follower.events(deadline):
                    if stopped.is_set():
                        return
                    events.put((kind, event))
            except BaseException as exc:  # handed to the main thread, which decides
                error = exc
            events.put((f"end:{kind}", (follower, error)))

        threading.Thread(target=pump, name=f"watch-{kind}-{self.backend.name}", daemon=True).start()
        return follower

    def _recording(self, watch, kind: str):
        errors, transient, failing = self.stats.errors, self.stats.transient, self._failing
        name = self.backend.name

        def recorded(version, **kwargs):
            try:
                for event in watch(version, **kwargs):
                    failing.pop(kind, None)  # the server answers again
                    yield event
            except Expired:
                raise
            except Unavailable as exc:  # the Follower backs off and resumes
                transient.append(exc.message)
                failing[kind] = exc.message
                log.warning("backend %s: %s", name, exc.message)
                raise
            except ClusterError as exc:
                errors.append(exc.message)
                log.warning("backend %s: %s", name, exc.message)
                raise
            failing.pop(kind, None)

        return recorded

    def apply(self, node_events: list[WatchEvent], pod_events: list[WatchEvent],
              job_events: list[WatchEvent] = (), engine_events: list[WatchEvent] = (),
              event_events: list[WatchEvent] = ()) -> None:
        """Apply one batch of watch events in one transaction. A batch that finds the database locked is
        tried again whole (its counts too); only a lock that outlasts every try ends the run, and the next
        run resumes from the last stored resourceVersion."""
        count = len(node_events) + len(pod_events) + len(job_events) + len(engine_events) + len(event_events)
        retry_locked(lambda: self._apply(node_events, pod_events, list(job_events), list(engine_events),
                                         list(event_events)),
                     before_retry=self._counts_reset(), what=f"backend {self.backend.name}: batch of {count} events")

    def _apply(self, node_events: list[WatchEvent], pod_events: list[WatchEvent],
               job_events: list[WatchEvent], engine_events: list[WatchEvent] = (),
               event_events: list[WatchEvent] = ()) -> None:
        self.stats.events += len(node_events) + len(pod_events) + len(job_events) + len(engine_events) + len(
            event_events)
        self.stats.batches += 1
        with transaction.atomic():
            touched: set[str] = set()
            if pod_events and self.owns_nodes:
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
            managed_jobs.apply_events(self.backend, job_events, pod_events, engine_events, self.engine, event_events)
            versions = {}
            for kind, kind_events in (("nodes", node_events), ("pods", pod_events), ("jobs", job_events),
                                      ("engine", engine_events), ("events", event_events)):
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
    resourceVersions and the last list makes the next good sync list again (a run still going too, at its next
    check), which restores every status."""
    now = now or timezone.now()
    limit = now - timedelta(seconds=settings.OSMO_BACKEND_STALE_SECONDS)
    stale = Backend.objects.filter(Q(last_sync_at__lt=limit) | Q(last_sync_at__isnull=True)).filter(nodes__isnull=False)
    names = []
    for backend in stale.distinct():
        since = backend.last_sync_at.isoformat(timespec="seconds") if backend.last_sync_at else "never"
        nodes = Node.objects.filter(backend=backend).exclude(status=UNKNOWN)
        before = list(nodes.values_list("name", "status"))
        marked = nodes.update(status=UNKNOWN, reasons=[f"Backend {backend.name} not synced since {since}"])
        node_history.record(backend, [(name, node_events.STATUS, {"before": status, "after": UNKNOWN})
                                      for name, status in before], now)
        if marked:
            Backend.objects.filter(pk=backend.pk).update(nodes_resource_version="", pods_resource_version="",
                                                            jobs_resource_version="", engine_resource_version="",
                                                            events_resource_version="", listed_at=None)
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
