"""The sync's half of following our Jobs: ManagedJob rows kept equal to what the Job watch and the pod watch say
about the Jobs we created (labelled `<prefix>managed-by=osmo-pools`) and their pods. After each write, on
commit, `managed_jobs_changed` names the workloads whose rows moved; `scheduling` listens and moves them (pools
never imports scheduling)."""

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from pools.cluster import Cluster, ListPage, ObjectKind
from pools.cluster.kinds import KAI_PODGROUP, KUEUE_WORKLOAD
from pools.engine import kube_names
from pools.inventory.jobs import (
    CREATE_FAILURE_SELECTOR,
    MANAGED_LABEL,
    MANAGED_VALUE,
    controller_of,
    create_failure_facts,
    create_failure_job,
    engine_facts,
    engine_job_of,
    job_facts,
    job_name_of,
    pod_run_facts,
    workload_of,
)
from pools.models import Backend, ManagedJob

# Sent on commit with `backend_id` and `workloads` (a set of workload ids, as the Jobs' labels give them).
managed_jobs_changed = Signal()


def selector() -> str:
    return f"{settings.OSMO_LABEL_PREFIX}{MANAGED_LABEL}={MANAGED_VALUE}"


def list_create_failures(cluster: Cluster, **kwargs) -> ListPage:
    return cluster.list_events(CREATE_FAILURE_SELECTOR, **kwargs)


def watch_create_failures(cluster: Cluster, resource_version: str, **kwargs):
    return cluster.watch_events(CREATE_FAILURE_SELECTOR, resource_version, **kwargs)


# What an engine backend says about our Jobs: KAI on the PodGroups we create (labelled ours), Kueue on the
# Workloads it creates for our Jobs (not labelled by us: all are read, those of Jobs we hold are kept).
ENGINE_KINDS: dict[str, ObjectKind] = {"kai": KAI_PODGROUP, "kueue": KUEUE_WORKLOAD}


def engine_of(backend: Backend) -> str:
    return backend.scheduler if backend.scheduler in ENGINE_KINDS else ""


def list_engine(cluster: Cluster, engine: str, **kwargs) -> ListPage:
    return cluster.list_objects(ENGINE_KINDS[engine], label_selector=selector() if engine == "kai" else "", **kwargs)


def watch_engine(cluster: Cluster, engine: str, resource_version: str, **kwargs):
    return cluster.watch_objects(ENGINE_KINDS[engine], resource_version,
                                 label_selector=selector() if engine == "kai" else "", **kwargs)


def ours(obj: dict[str, Any], prefix: str, backend: str | None = None) -> bool:
    """Labelled as one of our Jobs (or its pod): managed by us, for a workload, and (given `backend`, a backend's
    name) not written by another backend sharing the cluster (`backend add --same-cluster-as`). Jobs written
    before the backend label carry none: they stay the sync's that sees them, as they always were."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(f"{prefix}{MANAGED_LABEL}") != MANAGED_VALUE or not labels.get(f"{prefix}workload"):
        return False
    owner = labels.get(f"{prefix}backend")
    return backend is None or not owner or owner == kube_names.label_value(backend)


def _attempt(obj: dict[str, Any], prefix: str) -> int:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(f"{prefix}attempt")
    return int(value) if str(value or "").isascii() and str(value or "").isdigit() else 0


class JobBook:
    """The ManagedJob rows one batch touches, loaded once and written once."""

    def __init__(self, backend: Backend, keys: Iterable[tuple[str, str]]):
        self.backend = backend
        self.prefix = settings.OSMO_LABEL_PREFIX
        self.now = timezone.now()
        self.seen_at = self.now.isoformat()
        wanted = set(keys)
        self.rows: dict[tuple[str, str], ManagedJob] = {}
        if wanted:
            namespaces = {ns for ns, _ in wanted}
            names = {name for _, name in wanted}
            for row in ManagedJob.objects.filter(backend=backend, namespace__in=namespaces, name__in=names):
                if (row.namespace, row.name) in wanted:
                    self.rows[(row.namespace, row.name)] = row
        self.changed: set[tuple[str, str]] = set()

    def _row(self, namespace: str, name: str, obj: dict[str, Any]) -> ManagedJob:
        row = self.rows.get((namespace, name))
        if row is None:
            row = self.rows[(namespace, name)] = ManagedJob(
                backend=self.backend, namespace=namespace, name=name, workload=workload_of(obj, self.prefix),
                attempt=_attempt(obj, self.prefix), updated_at=self.now)
        return row

    def job(self, kind: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        if not ours(obj, self.prefix, self.backend.name):
            return
        row = self._row(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""), obj)
        facts = job_facts(obj)
        gone = kind == "DELETED"
        if row.job != facts or row.gone != gone:
            row.job, row.gone = facts, gone
            self.changed.add((row.namespace, row.name))

    def pod(self, kind: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        job = job_name_of(obj)
        if not job or not ours(obj, self.prefix, self.backend.name):
            return
        row = self._row(str(metadata.get("namespace") or ""), job, obj)
        controller = controller_of(obj)
        if controller and not row.job:  # a Deployment's or StatefulSet's (issue 43): no Job will ever list it
            row.job = {"controller": controller}
            self.changed.add((row.namespace, row.name))
        name = str(metadata.get("name") or "")
        before = row.pods.get(name)
        facts = pod_run_facts(obj, seen_at=self.seen_at, before=before)
        if kind == "DELETED":
            facts["deleted"] = True
            facts["deleted_at"] = (before or {}).get("deleted_at") or self.seen_at
        if before != facts:
            row.pods = {**row.pods, name: facts}
            self.changed.add((row.namespace, row.name))

    def engine(self, kind: str, obj: dict[str, Any], engine: str) -> None:
        job = engine_job_of(obj, engine)
        if not job:
            return
        key = (str((obj.get("metadata") or {}).get("namespace") or ""), job)
        row = self.rows.get(key)
        if row is None:
            if not ours(obj, self.prefix, self.backend.name):
                return  # a Kueue Workload of a Job that is not ours (or not seen yet: the Job's event makes the row)
            row = self._row(key[0], job, obj)
        facts = {} if kind == "DELETED" else engine_facts(obj, engine)
        if row.engine != facts:
            row.engine = facts
            self.changed.add(key)

    def create_failure(self, kind: str, obj: dict[str, Any]) -> None:
        """A FailedCreate Event about a Job we hold (its expiry, DELETED, changes nothing: pods say more)."""
        key = create_failure_job(obj)
        row = self.rows.get(key) if key else None
        if row is None or kind == "DELETED":
            return
        facts = create_failure_facts(obj, seen_at=self.seen_at, before=row.create_failure)
        if row.create_failure != facts:
            row.create_failure = facts
            self.changed.add(key)

    def engine_unless_listed(self, listed: set[tuple[str, str]]) -> None:
        """After a full list of the engine's objects: what it no longer says is cleared."""
        for row in ManagedJob.objects.filter(backend=self.backend).exclude(engine={}):
            key = (row.namespace, row.name)
            if key not in listed:
                row = self.rows.setdefault(key, row)
                row.engine = {}
                self.changed.add(key)

    def gone_unless_listed(self, listed: set[tuple[str, str]]) -> None:
        """After a full list of Jobs: those we hold that it did not name are gone."""
        for row in ManagedJob.objects.filter(backend=self.backend, gone=False).exclude(job__has_key="controller"):
            key = (row.namespace, row.name)
            if key not in listed:
                row = self.rows.setdefault(key, row)
                row.gone = True
                self.changed.add(key)

    def pods_unless_listed(self, listed: set[tuple[str, str, str]]) -> None:
        """After a full list of pods: pods we hold that it did not name are deleted."""
        for row in ManagedJob.objects.filter(backend=self.backend):
            key = (row.namespace, row.name)
            row = self.rows.setdefault(key, row)
            gone = {"deleted": True, "deleted_at": self.seen_at}
            pods = {name: ({**facts, **gone} if (row.namespace, row.name, name) not in listed
                           and not facts.get("deleted") else facts) for name, facts in row.pods.items()}
            if pods != row.pods:
                row.pods = pods
                self.changed.add(key)

    def save(self) -> set[str]:
        """Writes the changed rows; on commit, tells the listeners. Returns the workloads whose rows moved."""
        new, update = [], []
        for key in self.changed:
            row = self.rows[key]
            row.updated_at = self.now
            (update if row.pk else new).append(row)
        ManagedJob.objects.bulk_create(new, batch_size=1000)
        ManagedJob.objects.bulk_update(update, ["job", "pods", "engine", "create_failure", "gone", "updated_at"],
                                       batch_size=1000)
        workloads = {self.rows[key].workload for key in self.changed}
        if workloads:
            backend_id = self.backend.pk
            transaction.on_commit(lambda: managed_jobs_changed.send_robust(
                sender=JobBook, backend_id=backend_id, workloads=workloads))
        return workloads


def keys_of(job_objects: Iterable[dict], pod_objects: Iterable[dict], engine_objects: Iterable[dict] = (),
            engine: str = "", event_objects: Iterable[dict] = ()) -> set[tuple[str, str]]:
    keys = {key for key in map(create_failure_job, event_objects) if key}
    for obj in engine_objects:
        job = engine_job_of(obj, engine)
        if job:
            keys.add((str((obj.get("metadata") or {}).get("namespace") or ""), job))
    for obj in job_objects:
        metadata = obj.get("metadata") or {}
        keys.add((str(metadata.get("namespace") or ""), str(metadata.get("name") or "")))
    for obj in pod_objects:
        job = job_name_of(obj)
        if job:
            keys.add((str((obj.get("metadata") or {}).get("namespace") or ""), job))
    return keys


def apply_events(backend: Backend, job_events: list, pod_events: list, engine_events: list = (),
                 engine: str = "", event_events: list = ()) -> set[str]:
    """One batch of watch events (WatchEvent), in the caller's transaction. `event_events`: FailedCreate Events."""
    prefix = settings.OSMO_LABEL_PREFIX
    pods = [e for e in pod_events if ours(e.object, prefix, backend.name)]
    if not job_events and not pods and not engine_events and not event_events:
        return set()
    book = JobBook(backend, keys_of([e.object for e in job_events], [e.object for e in pods],
                                    [e.object for e in engine_events], engine, [e.object for e in event_events]))
    for event in job_events:
        book.job(event.type, event.object)
    for event in pods:
        book.pod(event.type, event.object)
    for event in engine_events:
        book.engine(event.type, event.object, engine)
    for event in event_events:
        book.create_failure(event.type, event.object)
    return book.save()


def reconcile(backend: Backend, jobs: list[dict] | None, pods: list[dict] | None,
              engine_objects: list[dict] | None = None, engine: str = "", events: list[dict] | None = None
              ) -> set[str]:
    """After a full list of Jobs, pods, the engine's objects and/or FailedCreate Events (None: not listed this
    time), in the caller's transaction."""
    prefix = settings.OSMO_LABEL_PREFIX
    mine = [p for p in pods or [] if ours(p, prefix, backend.name)]
    book = JobBook(backend, keys_of(jobs or [], mine, engine_objects or [], engine, events or []))
    if jobs is not None:
        for obj in jobs:
            book.job("ADDED", obj)
        book.gone_unless_listed(keys_of(jobs, []))
    if pods is not None:
        for obj in mine:
            book.pod("ADDED", obj)
        book.pods_unless_listed({(str(p["metadata"].get("namespace") or ""), job_name_of(p),
                                  str(p["metadata"].get("name") or "")) for p in mine})
    if engine_objects is not None:
        for obj in engine_objects:
            book.engine("ADDED", obj, engine)
        book.engine_unless_listed(keys_of([], [], engine_objects, engine))
    for obj in events or []:
        book.create_failure("ADDED", obj)
    return book.save()
