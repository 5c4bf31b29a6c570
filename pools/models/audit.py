"""The audit log: one append-only row for every action that changes something or proves who someone is.

`record()` writes a row inside the caller's transaction, so no change exists without its row and a refused or
rolled-back write leaves none. Who acted comes from the request being served (`acting_request`, set by
pools.access.audit.AuditMiddleware: its user or token, address and request id) or, outside a request, from the
process (`manage.py <command>`, a Celery worker), unless the caller names an actor.

Rows are chained: each carries the SHA-256 of its own content and of the previous row's hash. Writers take a
transaction-level advisory lock before reading the last hash (PostgreSQL), so the chain never forks and id order
is chain order. Rows cannot be changed or deleted through the ORM (save on an existing row, delete, a queryset's
update or delete raise); whatever edits them behind its back (raw SQL) breaks the chain, which `verify()` finds.
Only `prune()` deletes, for retention, and it leaves a row saying what it removed.
"""

from __future__ import annotations

import hashlib
import json
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

SUMMARY_LIMIT = 2000
KINDS = ("config", "role", "node", "engine", "workload", "token", "signin", "audit", "notification", "user",
         "credential")
ACTIONS = ("create", "update", "delete", "rollback", "grant", "revoke", "cordon", "uncordon", "label", "reconcile",
           "submit", "cancel", "stop", "success", "failure", "lockout", "prune", "activate", "deactivate", "member")
LOCK_KEY = 7_270_281  # pg_advisory_xact_lock key of the chain's writers
acting_request: ContextVar[Any] = ContextVar("acting_request", default=None)
acting_process: ContextVar[str] = ContextVar("acting_process", default="")
# A Celery task's id, set by osmo_site.celery: the request id of the rows a task writes (a request's own comes with
# Acting). The log lines' id lives in osmo_site.logs, which the models may not import.
acting_task: ContextVar[str] = ContextVar("acting_task", default="")


class AppendOnly(Exception):
    pass


class AuditQuerySet(models.QuerySet):
    def visible_to(self, access) -> AuditQuerySet:
        """Staff see every row; anyone else the rows of their own actions (`access`: pools.models.visibility's)."""
        if access.is_staff:
            return self
        if not access.signed_in:
            return self.none()
        return self.filter(actor=access.user.get_username(), actor_kind__in=[AuditEvent.Actor.USER,
                                                                             AuditEvent.Actor.TOKEN])

    def matching(self, *, user: str = "", kind: str = "", obj: str = "", action: str = "", since=None,
                 until=None) -> AuditQuerySet:
        """The filters of the page, the API and `manage.py audit list`: exact actor, kind and action, an object
        containing `obj`, and a period [since, until)."""
        rows = self
        if user:
            rows = rows.filter(actor=user)
        if kind:
            rows = rows.filter(kind=kind)
        if obj:
            rows = rows.filter(object__icontains=obj)
        if action:
            rows = rows.filter(action=action)
        if since is not None:
            rows = rows.filter(at__gte=since)
        if until is not None:
            rows = rows.filter(at__lt=until)
        return rows

    def update(self, **kwargs):
        raise AppendOnly("audit rows cannot be changed")

    def delete(self):
        raise AppendOnly("audit rows cannot be deleted (retention: manage.py audit prune)")


class AuditEvent(models.Model):
    class Actor(models.TextChoices):
        USER = "user"
        TOKEN = "token"
        SYSTEM = "system"
        ANONYMOUS = "anonymous"

    at = models.DateTimeField(db_index=True)
    actor_kind = models.CharField(max_length=10, choices=Actor.choices)
    actor = models.CharField(max_length=150, blank=True, db_index=True)  # user name, or the process
    token = models.CharField(max_length=128, blank=True)  # the API token's name, when one was used
    address = models.GenericIPAddressField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    kind = models.CharField(max_length=32, db_index=True)  # config, role, node, engine, workload, token, signin...
    object = models.CharField(max_length=400, blank=True)  # e.g. POOL/training, node/h100-001, workload/42
    action = models.CharField(max_length=32, db_index=True)  # create, update, delete, rollback, grant, cordon...
    summary = models.TextField(blank=True)
    previous_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["kind", "action", "at"], name="audit_kind_action_at"),
                   models.Index(fields=["object"], name="audit_object")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor or self.actor_kind} {self.action} {self.object}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnly("audit rows cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("audit rows cannot be deleted (retention: manage.py audit prune)")

    def content(self) -> list:
        return content_of(self.at, self.actor_kind, self.actor, self.token, self.address, self.request_id, self.kind,
                          self.object, self.action, self.summary)


def content_of(at, actor_kind, actor, token, address, request_id, kind, obj, action, summary) -> list:
    return [at.isoformat(), actor_kind, actor, token, address or "", request_id, kind, obj, action, summary]


def chain_hash(previous: str, content: list) -> str:
    data = json.dumps([previous, *content], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


GENESIS = "0" * 64


@dataclass(frozen=True)
class Actor:
    kind: str
    name: str
    token: str = ""
    address: str | None = None
    request_id: str = ""


def process_name() -> str:
    name = acting_process.get()
    if name:
        return name
    argv = sys.argv
    if argv and argv[0].endswith("manage.py") and len(argv) > 1:
        return f"manage.py {argv[1]}"
    if argv and "celery" in argv[0]:
        return "celery"
    return "system"


@dataclass(frozen=True)
class Acting:
    """What AuditMiddleware knows of the request being served: the request (its user and token are read when a
    row is written, after authentication) and the client's address."""

    request: Any
    address: str | None
    request_id: str = ""  # osmo_site.logs.RequestIdMiddleware's, as the access line says it


def current_actor() -> Actor:
    """Who is acting now: the request's user or token, or the process."""
    acting = acting_request.get()
    if acting is None:
        return Actor(AuditEvent.Actor.SYSTEM, process_name(), request_id=acting_task.get()[:64])
    rid = acting.request_id[:64]
    user = getattr(acting.request, "user", None)
    if user is None or not user.is_authenticated:
        return Actor(AuditEvent.Actor.ANONYMOUS, "", address=acting.address, request_id=rid)
    token = getattr(acting.request, "auth", None)
    token_name = getattr(token, "name", "") if token is not None and hasattr(token, "digest") else ""
    kind = AuditEvent.Actor.TOKEN if token_name else AuditEvent.Actor.USER
    return Actor(kind, user.get_username(), token_name, acting.address, rid)


def record(kind: str, obj: str, action: str, summary: str = "", *, actor: Any = None) -> AuditEvent:
    """One audit row, in the caller's transaction (opened here when there is none). `actor`: a user, a name (a
    CLI's OS user or a process), or None for whoever is acting now (current_actor)."""
    return record_many([(kind, obj, action, summary)], actor=actor)[0]


def _who(actor: Any) -> Actor:
    who = current_actor()
    if isinstance(actor, str) and actor:
        return Actor(who.kind if who.kind != AuditEvent.Actor.ANONYMOUS else AuditEvent.Actor.SYSTEM, actor,
                     who.token, who.address, who.request_id)
    if getattr(actor, "is_authenticated", False):
        kind = AuditEvent.Actor.TOKEN if who.kind == AuditEvent.Actor.TOKEN else AuditEvent.Actor.USER
        return Actor(kind, actor.get_username(), who.token, who.address, who.request_id)
    return who


def _lock_and_read_head() -> str | None:
    """Take the chain's lock (PostgreSQL), then read the last row's hash. With psycopg's client-side binding
    (Django's default) both statements go in one round trip: two statements of one simple query, each with its
    own snapshot, so the read sees every row committed before the lock was granted."""
    if connection.vendor == "postgresql":
        import psycopg

        with connection.cursor() as cursor:
            if isinstance(cursor.cursor, psycopg.ClientCursor):
                table = connection.ops.quote_name(AuditEvent._meta.db_table)
                cursor.execute(f"SELECT pg_advisory_xact_lock(%s); SELECT hash FROM {table} ORDER BY id DESC LIMIT 1",
                               [LOCK_KEY])
                cursor.nextset()
                row = cursor.fetchone()
                return row[0] if row else None
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
    return AuditEvent.objects.order_by("-id").values_list("hash", flat=True).first()


def _one_round_trip() -> bool:
    """PostgreSQL with psycopg's client-side binding (Django's default): several statements in one query."""
    if connection.vendor != "postgresql":
        return False
    import psycopg

    with connection.cursor() as cursor:
        return isinstance(cursor.cursor, psycopg.ClientCursor)


def _insert_chained(who: Actor, now, kind: str, obj: str, action: str, summary: str) -> AuditEvent:
    """One row, chained in the database: the lock, the read of the last hash and the insert with its hash (the
    same `chain_hash`, computed by PostgreSQL's sha256) in one round trip, so that the chain's lock is held only
    for that and the commit, not while Python builds the insert (submissions wait on each other for it)."""
    summary = summary if len(summary) <= SUMMARY_LIMIT else summary[:SUMMARY_LIMIT - 1] + "…"
    event = AuditEvent(at=now, actor_kind=who.kind, actor=who.name[:150], token=who.token[:128], address=who.address,
                       request_id=who.request_id, kind=kind, object=obj[:400], action=action, summary=summary)
    # chain_hash's JSON of [previous, *content] is '["<previous>",' and then the content's JSON without its '['.
    content = json.dumps(event.content(), ensure_ascii=False, separators=(",", ":"))[1:]
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    columns = ("at", "actor_kind", "actor", "token", "address", "request_id", "kind", "object", "action", "summary")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_advisory_xact_lock(%s); "
            f"WITH head AS (SELECT COALESCE((SELECT hash FROM {table} ORDER BY id DESC LIMIT 1), %s) AS previous) "
            f"INSERT INTO {table} ({', '.join(columns)}, previous_hash, hash) "
            f"SELECT {', '.join(['%s'] * len(columns))}, previous, "
            f"encode(sha256(convert_to('[\"' || previous || '\",' || %s, 'UTF8')), 'hex') FROM head "
            f"RETURNING id, previous_hash, hash",
            [LOCK_KEY, GENESIS, now, event.actor_kind, event.actor, event.token, event.address, event.request_id,
             kind, event.object, action, summary, content])
        cursor.nextset()
        event.pk, event.previous_hash, event.hash = cursor.fetchone()
    event._state.adding, event._state.db = False, connection.alias
    return event


def record_many(entries: list[tuple[str, str, str, str]], *, actor: Any = None) -> list[AuditEvent]:
    """Rows for (kind, object, action, summary) entries by one actor, chained in order, in one write."""
    if not entries:
        return []
    who, now = _who(actor), timezone.now()
    # No savepoint inside the caller's transaction (two round trips less per row): a failure here fails the
    # caller's transaction too, and the advisory lock is held until that transaction ends either way.
    with transaction.atomic(savepoint=False):
        if len(entries) == 1 and _one_round_trip():
            return [_insert_chained(who, now, *entries[0])]
        previous = _lock_and_read_head() or GENESIS
        events = []
        for kind, obj, action, summary in entries:
            summary = summary if len(summary) <= SUMMARY_LIMIT else summary[:SUMMARY_LIMIT - 1] + "…"
            event = AuditEvent(at=now, actor_kind=who.kind, actor=who.name[:150], token=who.token[:128],
                               address=who.address, request_id=who.request_id, kind=kind, object=obj[:400],
                               action=action, summary=summary, previous_hash=previous)
            event.hash = previous = chain_hash(previous, event.content())
            events.append(event)
        AuditEvent.objects.bulk_create(events)
    return events


@dataclass(frozen=True)
class Break:
    id: int
    reason: str


def verify(batch: int = 20_000) -> tuple[int, Break | None]:
    """(rows checked, the first broken link or None): each row's hash must be that of its content and of the
    previous row's hash, and each row must name the previous row's hash. The first row left by retention is
    trusted to name its predecessor."""
    checked, previous, last_id = 0, None, 0
    fields = ("id", "at", "actor_kind", "actor", "token", "address", "request_id", "kind", "object", "action",
              "summary", "previous_hash", "hash")
    while True:
        rows = list(AuditEvent.objects.filter(id__gt=last_id).order_by("id").values_list(*fields)[:batch])
        if not rows:
            return checked, None
        for row in rows:
            pk, *content, previous_hash, stored = row
            if previous is not None and previous_hash != previous:
                return checked, Break(pk, "names a previous hash that is not the previous row's (a row before it "
                                          "was changed, removed or inserted)")
            if chain_hash(previous_hash, content_of(*content)) != stored:
                return checked, Break(pk, "its content does not match its hash (the row was changed)")
            previous, checked = stored, checked + 1
        last_id = rows[-1][0]


def prune(now=None, days: int | None = None) -> int:
    """Deletes rows older than OSMO_AUDIT_DAYS (retention) and records that it did, in one transaction."""
    days = settings.OSMO_AUDIT_DAYS if days is None else days
    cutoff = (now or timezone.now()) - timezone.timedelta(days=days)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        old = models.QuerySet(AuditEvent).filter(at__lt=cutoff)
        last = old.order_by("-id").values_list("id", "hash").first()
        if last is None:
            return 0
        count = old.count()
        old._raw_delete(old.db)
        record("audit", "audit", "prune", f"{count} rows older than {days} days removed (the last, #{last[0]}, "
                                          f"had hash {last[1]})")
    return count
