"""Roles as versioned configuration: the ROLE kind of the write path (`register_role_kind`, called
from `PoolsConfig.ready()`), export, and the generated roles of `config set ROLE NAME pool|admin`."""

from typing import Any

from django.utils import timezone

from pools.access.documents import ROLE_FIELDS, pool_role_document, role_documents, role_to_document
from pools.config import history
from pools.config.history import ConfigNotFound
from pools.config.kinds import Kind, WriteResult, register
from pools.engine import ConfigError
from pools.models import ConfigKind, ConfigRevision, Pool, Role

GENERATORS = ("pool", "admin")


def _stored(role: Role) -> dict[str, Any]:
    return {key: getattr(role, key) for key in ROLE_FIELDS}


def export_roles(name: str | None = None) -> dict[str, Any]:
    """One role exports in seed 002's shape; all roles as `{"roles": {NAME: ROLE}}`."""
    roles = Role.objects.order_by("name") if name is None else Role.objects.filter(name=name)
    documents = {role.name: role_to_document(role.name, _stored(role)) for role in roles}
    if name is None:
        return {"roles": documents}
    if name not in documents:
        raise ConfigNotFound(f"There is no ROLE named {name!r}", field="name")
    return documents[name]


def write_roles(documents: dict[str, dict[str, Any]], author, description: str):
    result = WriteResult(ConfigKind.ROLE)
    existing = {role.name: role for role in Role.objects.select_for_update().filter(name__in=documents)}
    changed = []
    for name, values in documents.items():
        role = existing.get(name)
        if role is not None and _stored(role) == values:
            result.unchanged.append(name)
            continue
        if role is not None and role.immutable:
            raise ConfigError(f"Role {name!r} is immutable: documents can neither change nor delete it",
                              field=f"{name}.immutable")
        (result.updated if role else result.created).append(name)
        role = role or Role(name=name)
        for key, value in values.items():
            setattr(role, key, value)
        role.updated_at = timezone.now()
        changed.append(role)
    Role.objects.bulk_create([role for role in changed if role.pk is None])
    Role.objects.bulk_update([role for role in changed if role.pk is not None], [*ROLE_FIELDS, "updated_at"])
    entries = [(role.name, ConfigRevision.Action.CREATE if role.name in result.created else
                ConfigRevision.Action.UPDATE, role_to_document(role.name, documents[role.name])) for role in changed]
    result.revisions = history.record(ConfigKind.ROLE, entries, author, description)
    return result


def role_deletion_blockers(name: str) -> list[str]:
    return ["it is immutable"] if Role.objects.filter(name=name, immutable=True).exists() else []


def generated_role(name: str, template: str) -> dict[str, Any]:
    """The document `config set ROLE NAME pool|admin` writes."""
    if template == "admin":
        return {"name": name, "description": "Every API and every pool (generated admin role)",
                "actions": [{"base": "http", "path": "*", "method": "*"}]}
    if template != "pool":
        raise ConfigError(f"Unknown role template {template!r}; use one of {', '.join(GENERATORS)}",
                          field="template")
    if not name.startswith("osmo-") or name == "osmo-":
        raise ConfigError(f"A pool role is named osmo-<pool> (seed 001's rule); {name!r} is not", field="name")
    prefix = name.removeprefix("osmo-")
    if not Pool.objects.filter(name__startswith=prefix).exists():
        raise ConfigError(f"No pool name begins with {prefix!r}: create the pool first, then its role",
                          field="name")
    return pool_role_document(name)


def register_role_kind() -> None:
    register(Kind(ConfigKind.ROLE, Role, role_documents, write_roles, export_roles,
                  one_document=lambda exported, name: exported, deletion_blockers=role_deletion_blockers))
