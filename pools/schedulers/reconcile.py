"""Keeping an engine backend's objects (KAI Queues and Topologies, Kueue's queues and flavors) equal to our
configuration (DESIGN.md section 3, "Engines"). Wanted objects come from `desired`; the cluster's are those
labelled `<prefix>managed-by=osmo-pools`, so nobody else's object is ever changed or deleted. Creates go in the
kinds' order, parents first; deletes go afterwards in the reverse order, leaves first (KAI refuses to delete a
queue that has children). An object whose spec and labels already match is not written, so a second run writes
nothing. A 409 on create (made meanwhile) is answered by reading it back: patched when it is ours, left alone and
reported when it is not; a 404 on delete is moving on; a 410 on the list lists again. A kind the cluster does not
serve (its CRD is not installed) is skipped while we want none of it, and an error naming it otherwise."""

from dataclasses import dataclass, field

from django.conf import settings

from pools.cluster import Cluster, ClusterError, Conflict, Expired, NotFound, ObjectKind
from pools.cluster.kinds import KUEUE_LOCAL_QUEUE
from pools.engine import ConfigError, kube_names
from pools.models import Backend

from . import kai
from .desired import Wanted, for_backend


@dataclass
class Reconciled:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    refused: list[str] = field(default_factory=list)  # a name taken by an object that is not ours: left alone
    counts: dict[str, int] = field(default_factory=dict)  # kind -> our objects now in the cluster

    @property
    def writes(self) -> int:
        return len(self.created) + len(self.updated) + len(self.deleted)

    def summary(self) -> dict:
        return {"created": len(self.created), "updated": len(self.updated), "deleted": len(self.deleted),
                "unchanged": self.unchanged, "refused": self.refused, "objects": self.counts}


def _label(kind: ObjectKind, key: tuple[str, str]) -> str:
    namespace, name = key
    return f"{kind.kind}/{namespace}/{name}" if namespace else f"{kind.kind}/{name}"


def ours(obj: dict) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(f"{settings.OSMO_LABEL_PREFIX}{kai.MANAGED_LABEL}") == kai.MANAGED_VALUE


def selector() -> str:
    return f"{settings.OSMO_LABEL_PREFIX}{kai.MANAGED_LABEL}={kai.MANAGED_VALUE}"


def _listed(cluster: Cluster, kind: ObjectKind) -> dict[tuple[str, str], dict] | None:
    """Ours of `kind` in the cluster, or None when the cluster does not serve the kind."""
    from pools.cluster.reflector import list_all

    def page(**kwargs):
        return cluster.list_objects(kind, label_selector=selector(), **kwargs)

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


def _put(cluster: Cluster, kind: ObjectKind, key: tuple[str, str], obj: dict, existing: dict | None,
         result: Reconciled) -> None:
    namespace = key[0] or None
    if existing is None:
        try:
            cluster.create_object(kind, obj, namespace=namespace)
            result.created.append(_label(kind, key))
            return
        except Conflict:
            existing = cluster.get_object(kind, key[1], namespace=namespace)  # made since we listed, or not ours
            if not ours(existing):
                result.refused.append(_label(kind, key))
                return
            if _same(existing, obj):
                result.unchanged += 1
                return
    metadata = {field: obj["metadata"][field] for field in ("labels", "annotations") if field in obj["metadata"]}
    cluster.patch_object(kind, key[1], {"metadata": metadata,
                                        "spec": _merge_patch(existing.get("spec") or {}, obj["spec"])},
                         namespace=namespace)
    result.updated.append(_label(kind, key))


def apply(cluster: Cluster, wanted: Wanted) -> Reconciled:
    """Make our objects in the cluster equal `wanted`. Raises ClusterError on anything but the 409s, 404s and
    410s it expects; what was done before stays done, and the next run finishes the job."""
    result = Reconciled()
    present: dict[ObjectKind, dict] = {}
    for kind, objects in wanted:
        listed = _listed(cluster, kind)
        if listed is None:
            if objects:
                raise ClusterError(f"The cluster does not serve {kind.plural}.{kind.group}/{kind.version}: is the "
                                   "engine installed (its CRDs)?", status=404)
            continue
        present[kind] = listed
        for key, obj in objects.items():
            existing = listed.get(key)
            if existing is not None and _same(existing, obj):
                result.unchanged += 1
            else:
                _put(cluster, kind, key, obj, existing, result)
        if objects:
            result.counts[kind.kind] = len(objects)
    for kind, objects in reversed(wanted):
        listed = present.get(kind, {})
        extra = sorted((key for key in listed if key not in objects),
                       key=lambda key: (not (listed[key].get("spec") or {}).get("parentQueue"), key))
        for key in extra:
            try:
                cluster.delete_object(kind, key[1], namespace=key[0] or None)
            except NotFound:
                continue
            result.deleted.append(_label(kind, key))
    return result


def reconcile(backend: Backend, cluster: Cluster) -> Reconciled:
    """On a Kueue backend the projects' namespaces are made first (labelled as ours, as dispatch does), since a
    LocalQueue lives in one. A configuration Kueue cannot hold is an error kept on the backend, like a cluster's."""
    try:
        wanted = for_backend(backend)
    except ConfigError as exc:
        raise ClusterError(f"Kueue cannot hold this configuration: {exc.message}") from exc
    if backend.scheduler == Backend.Scheduler.KUEUE:
        prefix = settings.OSMO_LABEL_PREFIX
        local_queues = dict(wanted)[KUEUE_LOCAL_QUEUE]
        present = _listed(cluster, KUEUE_LOCAL_QUEUE) or {}  # a LocalQueue of ours stands in an existing namespace
        for (namespace, name), obj in sorted(local_queues.items()):
            if (namespace, name) in present:
                continue
            project = kube_names.full_value(obj["metadata"], f"{prefix}project")
            cluster.ensure_namespace(namespace, *kube_names.labelled(
                prefix, {kai.MANAGED_LABEL: kai.MANAGED_VALUE, "project": project}))
    return apply(cluster, wanted)


def run(backend: Backend, cluster: Cluster, now=None) -> Reconciled | None:
    """Reconcile and record the outcome on the backend row (the pages' "last reconcile"); None when it failed,
    the error then kept on the row until a run succeeds."""
    from django.utils import timezone

    now = now or timezone.now()
    try:
        result = reconcile(backend, cluster)
    except ClusterError as exc:
        Backend.objects.filter(pk=backend.pk).update(engine_error=exc.message[:2000])
        return None
    Backend.objects.filter(pk=backend.pk).update(engine_reconciled_at=now, engine_error="",
                                                 engine_objects={**result.summary(), "at": now.isoformat()})
    return result
