"""The one write path for configuration documents. The CLI, the API and the admin call these
functions; each call is one transaction that either applies a whole document and records its
revisions, or changes nothing."""

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from pools.config import history, kinds
from pools.config.checks import Catalog, check_pools, check_topology_labels, referenced_names
from pools.config.documents import (
    PlatformDoc,
    PoolDoc,
    pod_template_documents,
    pool_documents,
    validation_documents,
)
from pools.config.effective import effective_pool
from pools.config.history import ConfigNotFound
from pools.config.impact import MOVES_NODES, impact_since, placement
from pools.config.kinds import Kind, WriteResult, get, register, run_after_write
from pools.engine import ConfigError
from pools.inventory.impact import Impact
from pools.models import (
    Backend,
    ConfigKind,
    ConfigRevision,
    Node,
    Platform,
    PodTemplate,
    Pool,
    ResourceValidation,
    rows,
)
from pools.models.bulk import assign, bulk_update_changed

Action = ConfigRevision.Action
_NULLABLE_TEXT = {"default_platform", "default_exec_timeout", "default_queue_timeout", "max_exec_timeout",
                  "max_queue_timeout"}
_POOL_COLUMNS = [key for key in PoolDoc.model_fields if key not in ("name", "backend", "platforms")]
_PLATFORM_COLUMNS = list(PlatformDoc.model_fields)


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
    return {name: document for name, (_pool, document) in pools_with_documents(names).items()}


def pools_with_documents(names=None) -> dict[str, tuple[Pool, dict]]:
    """Each pool's row (with its backend) and document, by name in name order: one query (the platforms with
    their pool and backend) when each named pool has a platform, a second for the pools without one (or, with
    `names`, for names no platform's pool has: a pool with no platform, or no such pool)."""
    pools: dict[str, Pool] = {}
    platforms: dict[int, list[Platform]] = defaultdict(list)
    for platform, pool, backend in _platforms_with_pools(names):
        pool = pools.setdefault(pool.name, pool)
        pool.backend = backend
        platform.pool = pool
        platforms[pool.id].append(platform)
    if names is None:
        pools.update((pool.name, pool) for pool in Pool.objects.select_related("backend").filter(platforms=None))
    elif set(names) - set(pools):
        pools.update((pool.name, pool) for pool in Pool.objects.select_related("backend").filter(
            name__in=set(names) - set(pools)))
    return {name: (pool, pool_to_document(pool, platforms[pool.id])) for name, pool in sorted(pools.items())}


def _platforms_with_pools(names) -> list[tuple[Platform, Pool, Backend]]:
    """Platforms with their pool and its backend, by pool name, position and name: one query, written out (a
    submission reads it every time, and the ORM's compiling of it cost twice what PostgreSQL took to answer)."""
    if names is not None and not names:
        return []
    columns = (rows.Columns(Platform, "l"), rows.Columns(Pool, "p"), rows.Columns(Backend, "b"))
    table = connection.ops.quote_name
    sql = (f"SELECT {', '.join(part.sql for part in columns)} FROM {table(Platform._meta.db_table)} l "
           f"JOIN {table(Pool._meta.db_table)} p ON p.id = l.pool_id "
           f"JOIN {table(Backend._meta.db_table)} b ON b.id = p.backend_id")
    params = list(names or ())
    if names is not None:
        sql += f" WHERE p.name IN ({', '.join(['%s'] * len(params))})"
    return rows.read(sql + " ORDER BY p.name, l.position, l.name", params, *columns)


def templates_and_validations(pools) -> tuple[dict[str, dict], dict[str, list]]:
    """The pod templates and resource validations the pool documents name, in one query (a submission reads
    them every time)."""
    template_names, validation_names = set(), set()
    for pool in pools:
        templates, validations = referenced_names(pool)
        template_names |= templates
        validation_names |= validations
    # Written out, as the platforms are: the ORM's UNION cost more to compile than to run.
    table = connection.ops.quote_name
    sql, params = [], []
    for kind, model, column, wanted in (("t", PodTemplate, "body", template_names),
                                        ("v", ResourceValidation, "rules", validation_names)):
        if wanted:
            sql.append(f"SELECT '{kind}', name, {column} FROM {table(model._meta.db_table)} "
                       f"WHERE name IN ({', '.join(['%s'] * len(wanted))})")
            params += sorted(wanted)
    json_field = PodTemplate._meta.get_field("body")
    found_rows = []
    if sql:
        with connection.cursor() as cursor:
            cursor.execute(" UNION ALL ".join(sql), params)
            found_rows = [(kind, name, json_field.from_db_value(body, None, connection))
                          for kind, name, body in cursor.fetchall()]
    found: dict[str, dict] = {"t": {}, "v": {}}
    for kind, name, body in found_rows:
        found[kind][name] = body
    return found["t"], found["v"]


def export(kind: str, name: str | None = None) -> dict[str, Any]:
    """A document that `import_document(kind, ...)` accepts back unchanged."""
    return get(kind).export(name)


def _export_pools(name: str | None) -> dict[str, Any]:
    documents = pool_documents_from_db(None if name is None else [name])
    _found(ConfigKind.POOL, name, documents)
    return {"pools": documents}


def _export_named(model, column: str, kind: str):
    def export_named(name: str | None) -> dict[str, Any]:
        documents = dict(_filter(model.objects, None if name is None else [name]).values_list("name", column))
        _found(kind, name, documents)
        return documents

    return export_named


def _found(kind: str, name: str | None, documents: dict) -> None:
    if name is not None and name not in documents:
        raise ConfigNotFound(f"There is no {kind} named {name!r}", field="name")


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
    handler = get(kind)
    documents = handler.documents(data, name)
    with transaction.atomic():
        before = placement() if kind in MOVES_NODES else None
        result = handler.write(documents, author, description)
        run_after_write(kind, result)
        if kind == ConfigKind.POOL:
            # After the write hooks, which place the nodes by the new configuration (pools.fleet.sync).
            result.warnings += _check_topology_labels(result.created + result.updated)
        if before is not None:
            result.impact = impact_since(before) if result.changed else Impact()
        return result


class _DryRun(Exception):
    def __init__(self, result: WriteResult):
        self.result = result


def _rolled_back(write: Callable[[], WriteResult]) -> WriteResult:
    try:
        with transaction.atomic():
            raise _DryRun(write())
    except _DryRun as done:
        done.result.revisions = []  # rolled back: no revision was written
        return done.result


def validate(kind: str, data: Any, *, name: str | None = None, description: str = "validation") -> WriteResult:
    """Run the whole write path and roll it back: the admin's forms refuse exactly what an import
    would refuse, and a dry run reports what the import would do (its impact on the fleet included)."""
    return _rolled_back(lambda: import_document(kind, data, name=name, description=description))


def preview_rollback(kind: str, number: int, *, before: bool = False) -> WriteResult:
    """What `rollback` would do, its impact on the fleet included, written and rolled back."""
    return _rolled_back(lambda: rollback(kind, number, before=before, description="preview"))


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


def _check_topology_labels(names: list[str]) -> list[str]:
    """The topology keys of the pools just written, against the labels of their nodes; a refusal rolls the write
    back. A pool without nodes yet is accepted with a warning."""
    warnings = []
    pools = Pool.objects.filter(name__in=names, backend__scheduler=Backend.Scheduler.KAI).only("id", "name",
                                                                                              "topology_keys")
    for pool in pools:
        if not pool.topology_keys:
            continue
        nodes = Node.objects.filter(memberships__pool=pool)
        warning = check_topology_labels(pool.name, pool.topology_keys, nodes.count(),
                                        lambda label, nodes=nodes: nodes.filter(labels__has_key=label).exists())
        if warning:
            warnings.append(warning)
    return warnings


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
    return kinds.deletion_blockers(kind, name)


def delete(kind: str, name: str, *, author=None, description: str = "") -> WriteResult:
    handler = get(kind)
    with transaction.atomic():
        document = handler.one_document(handler.export(name), name)
        blockers = kinds.deletion_blockers(kind, name)
        if blockers:
            raise ConfigError(f"{kind} {name!r} cannot be deleted: {'; '.join(blockers)}. "
                              "Remove those references first." if handler.blockers_are_references else
                              f"{kind} {name!r} cannot be deleted: {'; '.join(blockers)}.", field="name")
        before = placement() if kind in MOVES_NODES else None
        handler.model.objects.filter(name=name).delete()
        revisions = history.record(kind, [(name, Action.DELETE, document)], author, description)
        result = WriteResult(kind, deleted=[name], revisions=revisions)
        run_after_write(kind, result)
        if before is not None:
            result.impact = impact_since(before)
    return result


def rollback(kind: str, number: int, *, before: bool = False, author=None, description: str = "") -> WriteResult:
    """Make the object look as it did at revision `number` or, with `before`, as it did just before it: before
    its creation it did not exist, so it is deleted. The change is itself a new revision, recorded as a
    `rollback` (or a `delete`)."""
    revision = history.get_revision(kind, number)
    handler = get(kind)
    if before:
        description = description or f"Rollback to before revision {number}"
        revision = history.previous_revision(revision) or ConfigRevision(kind=kind, name=revision.name,
                                                                          action=Action.DELETE)
    description = description or f"Rollback to revision {number}"
    if revision.action == Action.DELETE:
        if not handler.model.objects.filter(name=revision.name).exists():
            return WriteResult(kind, unchanged=[revision.name])
        return delete(kind, revision.name, author=author, description=description)
    with history.recorded_as(kind, Action.ROLLBACK):
        return import_document(kind, handler.as_import(revision.name, revision.document), name=revision.name,
                               author=author, description=description)


def _default_pool_blockers(name: str) -> list[str]:
    return ["it is the default pool, which holds every node that no other pool claims"] \
        if name == Pool.DEFAULT_NAME else []


def _reference_blockers(kind: str):
    return lambda name: [f"it is used by {use}" for use in used_by(kind, name)]


def register_kinds() -> None:
    """The kinds this package owns (called from `PoolsConfig.ready()`)."""
    register(Kind(ConfigKind.POOL, Pool, pool_documents, _write_pools, _export_pools,
                  one_document=lambda exported, name: exported["pools"][name],
                  as_import=lambda name, document: {"pools": {name: document}},
                  deletion_blockers=_default_pool_blockers))
    for kind, model, column, documents in (
        (ConfigKind.POD_TEMPLATE, PodTemplate, "body", pod_template_documents),
        (ConfigKind.RESOURCE_VALIDATION, ResourceValidation, "rules", validation_documents),
    ):
        register(Kind(kind, model, documents, _write_named(model, column, kind), _export_named(model, column, kind),
                      deletion_blockers=_reference_blockers(kind), blockers_are_references=True))
