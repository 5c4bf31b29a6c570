"""Keeping an engine backend's objects (KAI Queues and Topologies, Kueue's queues and flavors) equal to our
configuration (docs/admin/engines.md). Wanted objects come from `desired`, labelled with the backend that
owns them; the cluster's are those carrying that label (`ownership`), so nobody else's object, and no other
backend's, is ever changed or deleted. Creates go in the kinds' order, parents first; deletes go afterwards in the
reverse order, leaves first (KAI refuses to delete a queue that has children). An object whose spec and labels
already match is not written, so a second run writes nothing.

Object by object: a transient answer is tried again (pools.cluster.retries); an object the API server refuses
(any other HTTP answer but those below, or a transient one once the tries ran out) is recorded with the server's
words and every other object is still written, so one project's refused Queue never holds back the others, nor
the deletion of what a removed project, department or pool left. Only a cluster that cannot be reached (no HTTP
answer), a list that fails, or a configuration the engine cannot hold ends a run. A change to a field the CRDs
declare immutable (`immutable`) deletes the object and creates it again. A 409 on create (made meanwhile) is
answered by reading it back: patched when it is ours, refused when it is not; a 404 on delete is moving on; a 410
on a list lists again. A kind the cluster does not serve (its CRD is not installed) is skipped while we want none
of it, and refused otherwise."""

import contextlib
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from pools.cluster import Cluster, ClusterError, Conflict, Expired, NotFound, ObjectKind
from pools.cluster.kinds import KUEUE_LOCAL_QUEUE
from pools.cluster.retries import Retries
from pools.engine import ConfigError, kube_names
from pools.models import Backend, audit

from . import immutable, ownership
from .desired import Wanted, for_backend, idle_reason

MAX_RECORDS = 200  # refusals kept on the backend row; the count covers them all


@dataclass(frozen=True)
class Refusal:
    kind: str
    namespace: str
    name: str
    action: str  # create, update, recreate, delete, or list (a kind the cluster does not serve)
    message: str

    @property
    def label(self) -> str:
        return "/".join(filter(None, (self.kind, self.namespace, self.name)))


@dataclass
class Reconciled:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    recreated: list[str] = field(default_factory=list)  # an immutable field changed: deleted and created again
    deleted: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)  # ours from before the backend label, now labelled as this one's
    unchanged: int = 0
    refused: list[Refusal] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # kind -> our objects wanted in the cluster
    idle: str = ""  # why the backend has nothing to write (desired.idle_reason), shown on its pages

    @property
    def writes(self) -> int:
        return len(self.created) + len(self.updated) + 2 * len(self.recreated) + len(self.deleted)

    def summary(self) -> dict:
        return {"created": len(self.created), "updated": len(self.updated), "recreated": len(self.recreated),
                "deleted": len(self.deleted), "adopted": len(self.adopted), "unchanged": self.unchanged,
                "refused": len(self.refused), "objects": self.counts, **({"idle": self.idle} if self.idle else {})}


def _label(kind: ObjectKind, key: tuple[str, str]) -> str:
    namespace, name = key
    return f"{kind.kind}/{namespace}/{name}" if namespace else f"{kind.kind}/{name}"


def ours(obj: dict) -> bool:
    """Written by one of our backends (whichever)."""
    return ownership.owner_of(obj, settings.OSMO_LABEL_PREFIX) is not None


def selector(backend: str) -> str:
    return ownership.owned_by(settings.OSMO_LABEL_PREFIX, backend)


def _listed(cluster: Cluster, kind: ObjectKind, label_selector: str) -> dict[tuple[str, str], dict] | None:
    """The objects of `kind` the selector picks, or None when the cluster does not serve the kind."""
    from pools.cluster.reflector import list_all

    def page(**kwargs):
        return cluster.list_objects(kind, label_selector=label_selector, **kwargs)

    try:
        try:
            items = list_all(page).items
        except Expired:  # compacted before the first page answered: once more, from scratch
            items = list_all(page).items
    except NotFound:
        return None
    return {(item["metadata"].get("namespace", ""), item["metadata"]["name"]): item for item in items}


def _same(existing: dict, wanted: dict) -> bool:
    metadata = existing.get("metadata") or {}
    return existing.get("spec") == wanted.get("spec") and all(
        (metadata.get(field) or {}).get(key) == value
        for field in ("labels", "annotations") for key, value in (wanted["metadata"].get(field) or {}).items())


def _merge_patch(old: dict, new: dict) -> dict:
    """The JSON merge patch from `old` to `new`: a key `new` no longer has is nulled, or the patch would keep it."""
    patch = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        patch[key] = _merge_patch(before, value) if isinstance(value, dict) and isinstance(before, dict) else value
    return patch


class _Run:
    """One reconcile's writes, each one on its own: a refusal is noted and the run goes on."""

    def __init__(self, cluster: Cluster, backend: str):
        self.cluster, self.result = cluster, Reconciled()
        self.prefix, self.owner = settings.OSMO_LABEL_PREFIX, ownership.label_value(backend)

    def attempt(self, kind: ObjectKind, key: tuple[str, str], action: str, write) -> None:
        """A transient answer is tried again (pools.cluster.retries); its tries run out: recorded as refused, with
        what was retried."""
        retries = Retries(unreachable_at=lambda: getattr(self.cluster, "unreachable_at", None))
        try:
            retries.call(write)
        except ClusterError as exc:
            if exc.status is None:  # no answer at all: the cluster is gone, and so would every other write be
                raise
            self.refuse(kind, key, action, exc.message + (f" {retries.summary()}" if retries.retried else ""))

    def refuse(self, kind: ObjectKind, key: tuple[str, str], action: str, message: str) -> None:
        self.result.refused.append(Refusal(kind.kind, key[0], key[1], action, message))

    def put(self, kind: ObjectKind, key: tuple[str, str], obj: dict, existing: dict | None) -> None:
        namespace = key[0] or None
        if existing is None:
            try:
                self.cluster.create_object(kind, obj, namespace=namespace)
                self.result.created.append(_label(kind, key))
                return
            except Conflict:
                existing = self.cluster.get_object(kind, key[1], namespace=namespace)  # made since we listed
                owner = ownership.owner_of(existing, self.prefix)
                if owner not in (self.owner, ""):
                    whose = f"backend {owner}" if owner else "someone else (not labelled as ours)"
                    self.refuse(kind, key, "create", f"the name is taken by an object of {whose}; left alone")
                    return
                if owner == "":
                    self.result.adopted.append(_label(kind, key))
                if _same(existing, obj):
                    self.result.unchanged += 1
                    return
        field_ = immutable.changed(kind.group, kind.kind, existing.get("spec") or {}, obj.get("spec") or {})
        if field_ is not None:
            self.recreate(kind, key, obj, field_)
            return
        metadata = {field: obj["metadata"][field] for field in ("labels", "annotations") if field in obj["metadata"]}
        self.cluster.patch_object(kind, key[1], {"metadata": metadata,
                                                 "spec": _merge_patch(existing.get("spec") or {}, obj["spec"])},
                                  namespace=namespace)
        self.result.updated.append(_label(kind, key))

    def recreate(self, kind: ObjectKind, key: tuple[str, str], obj: dict, field_: str) -> None:
        namespace = key[0] or None
        with contextlib.suppress(NotFound):
            self.cluster.delete_object(kind, key[1], namespace=namespace)
        try:
            self.cluster.create_object(kind, obj, namespace=namespace)
        except ClusterError as exc:
            if exc.status is None:
                raise
            self.refuse(kind, key, "recreate", f"deleted to change {field_} (immutable), then not created again: "
                                               f"{exc.message}")
            return
        self.result.recreated.append(_label(kind, key))

    def delete(self, kind: ObjectKind, key: tuple[str, str]) -> None:
        try:
            self.cluster.delete_object(kind, key[1], namespace=key[0] or None)
        except NotFound:
            return
        self.result.deleted.append(_label(kind, key))


def apply(cluster: Cluster, wanted: Wanted, backend: str) -> Reconciled:
    """Make `backend`'s objects in the cluster equal `wanted` (as `desired.for_backend` makes it, labelled as the
    backend's), object by object. Raises ClusterError when a list fails or the cluster does not answer; what was
    done before stays done, and the next run finishes the job."""
    run = _Run(cluster, backend)
    result, mine = run.result, selector(backend)
    present: dict[ObjectKind, dict] = {}
    for kind, objects in wanted:
        listed = _listed(cluster, kind, mine)
        if listed is None:
            if objects:
                run.refuse(kind, ("", ""), "list", f"The cluster does not serve {kind.plural}.{kind.group}/"
                                                   f"{kind.version}: is the engine installed (its CRDs)?")
            continue
        present[kind] = listed
        if objects:  # ours from before the backend label, by the names we want (never by other names: whose?)
            unowned = _listed(cluster, kind, ownership.unowned(run.prefix)) or {}
            for key in unowned.keys() & objects.keys() - listed.keys():
                listed[key] = unowned[key]
                result.adopted.append(_label(kind, key))
        for key, obj in objects.items():
            existing = listed.get(key)
            if existing is not None and _same(existing, obj):
                result.unchanged += 1
            else:
                run.attempt(kind, key, "create" if existing is None else "update",
                            lambda kind=kind, key=key, obj=obj, existing=existing: run.put(kind, key, obj, existing))
        if objects:
            result.counts[kind.kind] = len(objects)
    for kind, objects in reversed(wanted):
        listed = present.get(kind, {})
        extra = sorted((key for key in listed if key not in objects),
                       key=lambda key: (not (listed[key].get("spec") or {}).get("parentQueue"), key))
        for key in extra:
            run.attempt(kind, key, "delete", lambda kind=kind, key=key: run.delete(kind, key))
    return result


def _namespaces(backend: Backend, cluster: Cluster, wanted: Wanted, result: Reconciled) -> None:
    """On a Kueue backend the projects' namespaces are made first (labelled as ours, as dispatch does), since a
    LocalQueue lives in one; a namespace refused is recorded, and so will its LocalQueue be."""
    prefix = settings.OSMO_LABEL_PREFIX
    local_queues = dict(wanted)[KUEUE_LOCAL_QUEUE]
    present = _listed(cluster, KUEUE_LOCAL_QUEUE, selector(backend.name)) or {}  # it stands in an existing namespace
    for (namespace, name), obj in sorted(local_queues.items()):
        if (namespace, name) in present:
            continue
        project = kube_names.full_value(obj["metadata"], f"{prefix}project")
        labels, annotations = kube_names.labelled(prefix, {"project": project})
        try:
            cluster.ensure_namespace(namespace, {**ownership.owner_labels(prefix, backend.name), **labels},
                                     annotations)
        except ClusterError as exc:
            if exc.status is None:
                raise
            result.refused.append(Refusal("Namespace", "", namespace, "create", exc.message))


def reconcile(backend: Backend, cluster: Cluster) -> Reconciled:
    """A configuration Kueue cannot hold is an error kept on the backend, like a cluster's."""
    try:
        wanted = for_backend(backend)
    except ConfigError as exc:
        raise ClusterError(f"Kueue cannot hold this configuration: {exc.message}") from exc
    early = Reconciled()
    idle = idle_reason(backend)
    if backend.scheduler == Backend.Scheduler.KUEUE and not idle:
        _namespaces(backend, cluster, wanted, early)
    result = apply(cluster, wanted, backend.name)
    result.refused[:0] = early.refused
    result.idle = idle
    return result


def records(result: Reconciled, previous: list[dict], at: str) -> list[dict]:
    """The refusals to keep on the backend row: `since` carried over while the same object stays refused."""
    since = {(r.get("kind"), r.get("namespace"), r.get("name")): r.get("since") for r in previous or []}
    return [{"kind": r.kind, "namespace": r.namespace, "name": r.name, "action": r.action,
             "message": r.message[:2000], "since": since.get((r.kind, r.namespace, r.name)) or at, "at": at}
            for r in result.refused[:MAX_RECORDS]]


def run(backend: Backend, cluster: Cluster, now=None) -> Reconciled | None:
    """Reconcile and record the outcome on the backend row (the pages' "last reconcile" and the refused objects,
    which a run that writes them clears); None when it failed, the error then kept on the row (with the refusals
    of the last run that finished) until a run succeeds."""
    from django.utils import timezone

    now = now or timezone.now()
    try:
        result = reconcile(backend, cluster)
    except ClusterError as exc:
        Backend.objects.filter(pk=backend.pk).update(engine_error=exc.message[:2000])
        return None
    previous = Backend.objects.values_list("engine_refused", flat=True).get(pk=backend.pk)
    with transaction.atomic():
        Backend.objects.filter(pk=backend.pk).update(
            engine_reconciled_at=now, engine_error="", engine_objects={**result.summary(), "at": now.isoformat()},
            engine_refused=records(result, previous, now.isoformat()))
        if result.writes or result.adopted:  # a run that changed nothing in the cluster leaves no row
            figures = result.summary()
            audit.record("engine", f"backend/{backend.name}", "reconcile", ", ".join(
                f"{name} {figures[name]}" for name in ("created", "updated", "recreated", "deleted", "adopted",
                                                       "refused") if figures[name]))
    return result

