"""The one write path for configuration documents. The CLI, the API and the admin call these
functions; each call is one transaction that either applies a whole document and records its
revisions, or changes nothing."""

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from . import history
from .access import roles as access_roles
from .access.documents import role_documents
from .bulk import assign, bulk_update_changed
from .checks import Catalog, check_pools, referenced_names
from .documents import (
    ConfigError,
    PlatformDoc,
    PoolDoc,
    pod_template_documents,
    pool_documents,
    validation_documents,
)
from .effective import effective_pool
from .history import ConfigNotFound
from .models import Backend, ConfigKind, ConfigRevision, Platform, PodTemplate, Pool, ResourceValidation, Role

Action = ConfigRevision.Action
_NULLABLE_TEXT = {"default_platform", "default_exec_timeout", "default_queue_timeout", "max_exec_timeout",
                  "max_queue_timeout"}
_POOL_COLUMNS = [key for key in PoolDoc.model_fields if key not in ("name", "backend", "platforms")]
_PLATFORM_COLUMNS = list(PlatformDoc.model_fields)


@dataclass
class WriteResult:
    kind: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    revisions: list[int] = field(default_factory=list)
    backends_created: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{label} {', '.join(names)}" for label, names in (
            ("created", self.created), ("updated", self.updated), ("deleted", self.deleted),
            ("unchanged", self.unchanged)) if names]
        text = f"{self.kind}: " + "; ".join(parts)
        if self.revisions:
            first, last = self.revisions[0], self.revisions[-1]
            text += f" (revision {first})" if first == last else f" (revisions {first}-{last})"
        if self.backends_created:
            text += (f". Registered backend {', '.join(self.backends_created)} (not connected yet: "
                     "set its kubeconfig in the admin)")
        return text

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- documents from rows ---------------------------------------------------------------------------

def pool_to_document(pool: Pool, platforms: list[Platform]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key in PoolDoc.model_fields:
        if key == "backend":
            document[key] = pool.backend.name
        elif key == "platforms":
            document[key] = {p.name: {c: getattr(p, c) for c in _PLATFORM_COLUMNS} for p in platforms}
        elif key in _NULLABLE_TEXT:
            document[key] = getattr(pool, key) or None
        else:
            document[key] = getattr(pool, key)
    return document


def _platforms_by_pool(pool_ids) -> dict[int, list[Platform]]:
    grouped: dict[int, list[Platform]] = defaultdict(list)
    for platform in Platform.objects.filter(pool_id__in=pool_ids).order_by("position", "name"):
        grouped[platform.pool_id].append(platform)
    return grouped


def pool_documents_from_db(names=None) -> dict[str, dict]:
    pools = Pool.objects.select_related("backend")
    if names is not None:
        pools = pools.filter(name__in=names)
    pools = list(pools)
    platforms = _platforms_by_pool([pool.id for pool in pools])
    return {pool.name: pool_to_document(pool, platforms[pool.id]) for pool in pools}


def export(kind: str, name: str | None = None) -> dict[str, Any]:
    """A document that `import_document(kind, ...)` accepts back unchanged."""
    names = None if name is None else [name]
    if kind == ConfigKind.ROLE:
        return access_roles.export_roles(name)
    if kind == ConfigKind.POOL:
        documents = pool_documents_from_db(names)
    elif kind == ConfigKind.POD_TEMPLATE:
        documents = dict(_filter(PodTemplate.objects, names).values_list("name", "body"))
    else:
        documents = dict(_filter(ResourceValidation.objects, names).values_list("name", "rules"))
    if name is not None and name not in documents:
        raise ConfigNotFound(f"There is no {kind} named {name!r}", field="name")
    return {"pools": documents} if kind == ConfigKind.POOL else documents


def _filter(queryset, names):
    return queryset.order_by("name") if names is None else queryset.filter(name__in=names)


def catalog_for(pools: dict[str, PoolDoc]) -> Catalog:
    template_names, validation_names = set(), set()
    for pool in pools.values():
        templates, validations = referenced_names(pool)
        template_names |= templates
        validation_names |= validations
    return Catalog(
        templates=dict(PodTemplate.objects.filter(name__in=template_names).values_list("name", "body")),
        validations=dict(ResourceValidation.objects.filter(name__in=validation_names).values_list("name", "rules")),
        backends=dict(Backend.objects.filter(name__in={p.backend for p in pools.values()})
                      .values_list("name", "scheduler")),
    )


def effective(pool_name: str) -> dict[str, Any]:
    document = export(ConfigKind.POOL, pool_name)["pools"][pool_name]
    pool = PoolDoc.model_validate(document)
    catalog = catalog_for({pool_name: pool})
    return effective_pool(pool, catalog.templates, catalog.validations)


# ---- writes ----------------------------------------------------------------------------------------

def import_document(
    kind: str, data: Any, *, name: str | None = None, author=None, description: str = ""
) -> WriteResult:
    if kind == ConfigKind.POOL:
        documents = pool_documents(data, name)
        writer = _write_pools
    elif kind == ConfigKind.POD_TEMPLATE:
        documents = pod_template_documents(data, name)
        writer = _write_named(PodTemplate, "body", kind)
    elif kind == ConfigKind.ROLE:
        documents = role_documents(data, name)
        writer = access_roles.write_roles
    else:
        documents = validation_documents(data, name)
        writer = _write_named(ResourceValidation, "rules", kind)
    with transaction.atomic():
        result = writer(documents, author, description)
        _placement_changed(kind, result)
        return result


def _placement_changed(kind: str, result: WriteResult) -> None:
    """Pools and templates decide which nodes belong where: recompute memberships in the same
    transaction, so no reader sees the new configuration with the old placement."""
    if kind in (ConfigKind.POOL, ConfigKind.POD_TEMPLATE) and (result.created or result.updated or result.deleted):
        from .sync import refresh_memberships

        refresh_memberships()


class _DryRun(Exception):
    pass


def validate(kind: str, data: Any, *, name: str | None = None) -> None:
    """Run the whole write path and roll it back: the admin's forms refuse exactly what an import
    would refuse."""
    try:
        with transaction.atomic():
            import_document(kind, data, name=name, description="validation")
            raise _DryRun
    except _DryRun:
        pass


def _write_pools(docs: dict[str, PoolDoc], author, description: str) -> WriteResult:
    result = WriteResult(ConfigKind.POOL)
    catalog = catalog_for(docs)
    check_pools(docs, catalog)
    backends = _ensure_backends({doc.backend for doc in docs.values()}, result)
    existing = {p.name: p for p in Pool.objects.select_for_update(of=("self",)).select_related("backend")
                .filter(name__in=docs)}
    platforms = _platforms_by_pool([pool.id for pool in existing.values()])
    new_docs = {name: doc.to_document() for name, doc in docs.items()}
    now = timezone.now()
    created, updated, changes = [], [], []
    for name, document in new_docs.items():
        pool = existing.get(name)
        if pool is not None and pool_to_document(pool, platforms[pool.id]) == document:
            result.unchanged.append(name)
            continue
        values = {key: "" if document[key] is None and key in _NULLABLE_TEXT else document[key]
                  for key in _POOL_COLUMNS}
        values["backend_id"] = backends[document["backend"]].id
        if pool is None:
            pool = Pool(name=name, updated_at=now, **values)
            created.append(pool)
        else:
            changes.append((pool, assign(pool, values)))
            pool.updated_at = now
            updated.append(pool)
    Pool.objects.bulk_create(created)
    bulk_update_changed(Pool, changes, always=["updated_at"])
    _write_platforms(created + updated, new_docs, platforms)
    result.created = [pool.name for pool in created]
    result.updated = [pool.name for pool in updated]
    entries = [(p.name, Action.CREATE, new_docs[p.name]) for p in created]
    entries += [(p.name, Action.UPDATE, new_docs[p.name]) for p in updated]
    result.revisions = history.record(ConfigKind.POOL, entries, author, description)
    return result


def _ensure_backends(names: set[str], result: WriteResult) -> dict[str, Backend]:
    backends = {b.name: b for b in Backend.objects.filter(name__in=names)}
    missing = sorted(names - backends.keys())
    if missing:
        # OSMO documents name backends freely; register them so the pool is stored, unconnected.
        for backend in Backend.objects.bulk_create(Backend(name=name) for name in missing):
            backends[backend.name] = backend
        result.backends_created = missing
    return backends


def _write_platforms(pools: list[Pool], documents: dict[str, dict], existing: dict[int, list[Platform]]) -> None:
    to_create, changes, to_delete = [], [], []
    for pool in pools:
        current = {platform.name: platform for platform in existing.get(pool.id, [])}
        wanted = documents[pool.name]["platforms"]
        to_delete += [platform.id for name, platform in current.items() if name not in wanted]
        for position, (name, body) in enumerate(wanted.items()):
            values = {"position": position, **{key: body[key] for key in _PLATFORM_COLUMNS}}
            if name in current:
                changes.append((current[name], assign(current[name], values)))
            else:
                to_create.append(Platform(pool=pool, name=name, **values))
    if to_delete:
        Platform.objects.filter(id__in=to_delete).delete()
    Platform.objects.bulk_create(to_create)
    bulk_update_changed(Platform, changes)


def _write_named(model, column: str, kind: str):
    def write(documents: dict[str, Any], author, description: str) -> WriteResult:
        result = WriteResult(kind)
        existing = {obj.name: obj for obj in model.objects.select_for_update().filter(name__in=documents)}
        changed = []
        for name, body in documents.items():
            obj = existing.get(name)
            if obj is not None and getattr(obj, column) == body:
                result.unchanged.append(name)
                continue
            (result.updated if obj else result.created).append(name)
            obj = obj or model(name=name)
            setattr(obj, column, body)
            obj.updated_at = timezone.now()
            changed.append(obj)
        model.objects.bulk_create([obj for obj in changed if obj.pk is None])
        model.objects.bulk_update([obj for obj in changed if obj.pk is not None], [column, "updated_at"])
        _recheck_pools(kind, {obj.name for obj in changed})
        entries = [(obj.name, Action.CREATE if obj.name in result.created else Action.UPDATE, documents[obj.name])
                   for obj in changed]
        result.revisions = history.record(kind, entries, author, description)
        return result

    return write


def _users(kind: str, names: set[str]) -> dict[str, list[tuple[str, str | None, str]]]:
    """For each of `names` (templates or validations): the (pool, platform or None, field) using it."""
    pool_field, platform_field = (
        ("common_pod_template", "override_pod_template") if kind == ConfigKind.POD_TEMPLATE
        else ("common_resource_validations", "resource_validations")
    )
    users: dict[str, list[tuple[str, str | None, str]]] = defaultdict(list)
    for pool_name, refs in Pool.objects.values_list("name", pool_field):
        for ref in set(refs) & names:
            users[ref].append((pool_name, None, pool_field))
    for pool_name, platform_name, refs in Platform.objects.values_list("pool__name", "name", platform_field):
        for ref in set(refs) & names:
            users[ref].append((pool_name, platform_name, platform_field))
    return users


def _describe_use(pool: str, platform: str | None, column: str) -> str:
    return f"pool {pool} platform {platform} ({column})" if platform else f"pool {pool} ({column})"


def _recheck_pools(kind: str, names: set[str]) -> None:
    """A changed template or rule set must still work in every pool that uses it."""
    pool_names = {use[0] for uses in _users(kind, names).values() for use in uses} if names else set()
    if not pool_names:
        return
    docs = {name: PoolDoc.model_validate(doc) for name, doc in pool_documents_from_db(pool_names).items()}
    try:
        check_pools(docs, catalog_for(docs))
    except ConfigError as exc:
        raise ConfigError(f"{kind} {', '.join(sorted(names))} refused: it would break a pool that uses it. "
                          f"{exc.message}", field=exc.field) from None


def used_by(kind: str, name: str) -> list[str]:
    """The pools and platforms that reference a template or validation, described for people."""
    return [_describe_use(*use) for use in _users(kind, {name}).get(name, [])]


def deletion_blockers(kind: str, name: str) -> list[str]:
    """Why `name` cannot be deleted now; empty when it can."""
    if kind == ConfigKind.POOL:
        return ["it is the default pool, which holds every node that no other pool claims"] \
            if name == Pool.DEFAULT_NAME else []
    if kind == ConfigKind.ROLE:
        return access_roles.role_deletion_blockers(name)
    return [f"it is used by {use}" for use in used_by(kind, name)]


def delete(kind: str, name: str, *, author=None, description: str = "") -> WriteResult:
    with transaction.atomic():
        document = export(kind, name)
        document = document["pools"][name] if kind == ConfigKind.POOL else \
            document if kind == ConfigKind.ROLE else document[name]
        blockers = deletion_blockers(kind, name)
        if blockers:
            raise ConfigError(f"{kind} {name!r} cannot be deleted: {'; '.join(blockers)}. "
                              "Remove those references first." if kind not in (ConfigKind.POOL, ConfigKind.ROLE) else
                              f"{kind} {name!r} cannot be deleted: {blockers[0]}.", field="name")
        _model(kind).objects.filter(name=name).delete()
        revisions = history.record(kind, [(name, Action.DELETE, document)], author, description)
        result = WriteResult(kind, deleted=[name], revisions=revisions)
        _placement_changed(kind, result)
    return result


def rollback(kind: str, number: int, *, author=None, description: str = "") -> WriteResult:
    """Make the object look as it did at revision `number`; the change is itself a new revision."""
    revision = history.get_revision(kind, number)
    description = description or f"Rollback to revision {number}"
    if revision.action == Action.DELETE:
        if not _exists(kind, revision.name):
            return WriteResult(kind, unchanged=[revision.name])
        return delete(kind, revision.name, author=author, description=description)
    document = revision.document
    if kind == ConfigKind.POOL:
        document = {"pools": {revision.name: document}}
    return import_document(kind, document, name=revision.name, author=author, description=description)


def _model(kind: str):
    return {ConfigKind.POOL: Pool, ConfigKind.POD_TEMPLATE: PodTemplate, ConfigKind.ROLE: Role}.get(
        kind, ResourceValidation)


def _exists(kind: str, name: str) -> bool:
    return _model(kind).objects.filter(name=name).exists()
