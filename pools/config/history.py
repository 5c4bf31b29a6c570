"""Numbered revisions of configuration objects: writing them and comparing them."""

import difflib
import json
from collections.abc import Iterable
from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models import F, Max

from pools.engine import ConfigError, changes
from pools.models import ConfigKind, ConfigRevision, RevisionCounter, audit


class ConfigNotFound(ConfigError):
    pass


def author_fields(author) -> dict:
    """`author` is a user, a plain name (CLI runs as an OS user) or None."""
    if author is None:
        return {"author": None, "author_name": ""}
    if isinstance(author, str):
        return {"author": None, "author_name": author}
    return {"author": author, "author_name": author.get_username()}


# (kind, action): revisions of that kind recorded meanwhile take that action (a rollback's import is one).
_recorded_as: ContextVar[tuple[str, str] | None] = ContextVar("recorded_as", default=None)


@contextmanager
def recorded_as(kind: str, action: str):
    token = _recorded_as.set((kind, action))
    try:
        yield
    finally:
        _recorded_as.reset(token)


def record(kind: str, entries: Iterable[tuple[str, str, dict]], author, description: str) -> list[int]:
    """Write one revision per (name, action, document); must run inside the writer's transaction."""
    entries = list(entries)
    override = _recorded_as.get()
    if override is not None and override[0] == kind:
        entries = [(name, override[1], document) for name, _action, document in entries]
    if not entries:
        return []
    # The UPDATE takes the counter's row lock until commit, so concurrent writers queue here.
    if not RevisionCounter.objects.filter(kind=kind).update(last=F("last") + len(entries)):
        # The counter rows come from a data migration; a flushed test database lacks them.
        RevisionCounter.objects.bulk_create([RevisionCounter(kind=kind)], ignore_conflicts=True)
        RevisionCounter.objects.filter(kind=kind).update(last=F("last") + len(entries))
    last = RevisionCounter.objects.values_list("last", flat=True).get(kind=kind)
    first = last - len(entries) + 1
    who = author_fields(author)
    ConfigRevision.objects.bulk_create(
        ConfigRevision(kind=kind, name=name, number=first + index, action=action, document=document,
                       description=description, **who)
        for index, (name, action, document) in enumerate(entries)
    )
    previous = _previous_documents(kind, [name for name, action, _ in entries if action != "create"], first)
    audit.record_many([("config", f"{kind}/{name}", action, _summary(first + index, description, previous.get(name),
                                                                     document, action))
                       for index, (name, action, document) in enumerate(entries)], actor=author)
    return list(range(first, last + 1))


def _previous_documents(kind: str, names: list[str], before: int) -> dict[str, dict]:
    """Each name's document at its latest revision numbered below `before` (two queries for any number of names)."""
    if not names:
        return {}
    latest = (ConfigRevision.objects.filter(kind=kind, name__in=names, number__lt=before).values("name")
              .annotate(last=Max("number")).values_list("last", flat=True))
    return dict(ConfigRevision.objects.filter(kind=kind, number__in=list(latest)).values_list("name", "document"))


def _summary(number: int, description: str, before: dict | None, after: dict, action: str) -> str:
    """The audit row's change: the revision, its description, and what changed (before → after)."""
    text = f"revision {number}" + (f": {description}" if description else "")
    if before is not None and action != "delete":
        diff = changes.describe(before, after)
        if diff:
            text += f" ({diff})"
    return text


def revisions(kind: str | None = None, name: str | None = None):
    """Revisions newest first, optionally of one type and object."""
    queryset = ConfigRevision.objects.order_by("-created_at", "-number")
    if kind:
        queryset = queryset.filter(kind=kind)
    return queryset.filter(name=name) if name else queryset


def get_revision(kind: str, number: int) -> ConfigRevision:
    try:
        return ConfigRevision.objects.select_related("author").get(kind=kind, number=number)
    except ConfigRevision.DoesNotExist:
        raise ConfigNotFound(f"{kind} has no revision {number}", field="revision") from None


def previous_revision(revision: ConfigRevision) -> ConfigRevision | None:
    return (
        ConfigRevision.objects.filter(kind=revision.kind, name=revision.name, number__lt=revision.number)
        .order_by("-number")
        .first()
    )


def _lines(revision: ConfigRevision | None) -> list[str]:
    if revision is None or revision.action == ConfigRevision.Action.DELETE:
        return []
    return json.dumps(revision.document, indent=2).splitlines(keepends=True)


def _label(revision: ConfigRevision | None) -> str:
    if revision is None:
        return "(nothing)"
    suffix = " (deleted)" if revision.action == ConfigRevision.Action.DELETE else ""
    return f"{revision.kind} r{revision.number} {revision.name}{suffix}"


def diff_pair(kind: str, number: int, other: int | None = None) -> tuple[ConfigRevision | None, ConfigRevision]:
    """With one number: that revision against the same object's previous one."""
    newer = get_revision(kind, other if other is not None else number)
    older = get_revision(kind, number) if other is not None else previous_revision(newer)
    return older, newer


def unified_diff(kind: str, number: int, other: int | None = None) -> str:
    older, newer = diff_pair(kind, number, other)
    return "".join(difflib.unified_diff(_lines(older), _lines(newer), _label(older), _label(newer)))


def summary(revision: ConfigRevision) -> dict:
    return {
        "type": revision.kind, "revision": revision.number, "name": revision.name, "action": revision.action,
        "author": revision.author_name, "time": revision.created_at.isoformat(),
        "description": revision.description,
    }


KINDS = {kind.value: kind for kind in ConfigKind}
SLUGS = {kind.value.lower(): kind for kind in ConfigKind}


def parse_kind(text: str) -> ConfigKind:
    kind = KINDS.get(text.upper()) if text else None
    if kind is None:
        raise ConfigError(f"Unknown configuration type {text!r}; use one of {', '.join(KINDS)}", field="type")
    return kind
