"""Telling users about their workloads (issue 26 point 5; the choices: `NotificationPreference`).

`record` runs inside the transaction that records a transition (`attempts.finish`, `follow.observe`, the pending
sweep) and writes one Notification row per chosen channel; the unique constraint makes a transition told once, a
second record of it adds nothing. Once the transaction commits a `send_notification` message goes; the sweep
(beat, OSMO_NOTIFY_INTERVAL) re-drives any row left unsent, so a lost message or a dead worker only delays it.

`deliver` claims the row first (locked, SKIP LOCKED, claim committed), then sends with a short timeout, then marks
it sent only if its claim still holds. A claim older than OSMO_NOTIFY_CLAIM_SECONDS (more than the send task's
hard time limit: its sender is dead) may be taken over. The edge that no database can close: a sender that dies
after the receiver accepted the POST, before its commit of `sent_at`, leaves a row that is sent again. Every try of
a notification carries the same key (`Idempotency-Key` header, `osmo.id` in the body, the mail's Message-ID), so a
receiver that keeps keys drops the repeat; Slack and Teams do not, and may show it twice."""

import dataclasses
import http.client
import json
import logging
import socket
import ssl
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from scheduling.decisions import notifications as decide
from scheduling.models import Channel, Notification, NotificationPreference, Status, Workload
from scheduling.run.outbox import send

log = logging.getLogger("scheduling.notify")
TASK = "scheduling.tasks.send_notification"
RESPONSE_MAX_BYTES = 4096  # what is read of a webhook's answer (only for the error message)


def preference_for(user_id: int | None, project_id: int | None) -> NotificationPreference | None:
    """The user's own choice, else their project's default (staff's), else None (nothing is told)."""
    if user_id is None:
        return None
    rows = {(row.user_id is not None): row for row in NotificationPreference.objects.filter(
        Q(user_id=user_id) | Q(project_id=project_id) if project_id else Q(user_id=user_id))}
    return rows.get(True) or rows.get(False)


def _change(workload: Workload, transition: str, status: str, message: str, now, pool=None) -> decide.Change:
    if pool is None:
        pool = workload.pool.name if workload.pool_id and workload.pool else (workload.pool_name or "")
    return decide.Change(transition, str(workload.pk), workload.name, workload.attempt, status,
                         workload.project_label or "", pool, message, now.isoformat())


def record(workload: Workload, transition: str | None, status: str, message: str, *, attempt: int | None = None,
           pool: str | None = None, now=None) -> list[Notification]:
    """The rows telling `workload`'s submitter of `transition` (None: nobody is told), on commit sent."""
    if transition is None or workload.submitter_id is None:
        return []
    preference = preference_for(workload.submitter_id, workload.project_id)
    if preference is None or transition not in preference.transitions:
        return []
    now = now or timezone.now()
    change = _change(workload, transition, status, message, now, pool)
    if attempt is not None:
        change = dataclasses.replace(change, attempt=attempt)
    targets = []
    if preference.webhook_url:
        targets.append((Channel.WEBHOOK, preference.webhook_url))
    if preference.email:
        address = workload.submitter.email if workload.submitter else ""
        if address:
            targets.append((Channel.EMAIL, address))
    rows = []
    for channel, target in targets:
        pk = uuid.uuid4()
        text = decide.text(change)
        rows.append(Notification(id=pk, workload_id=workload.pk, user_id=workload.submitter_id,
                                 attempt=change.attempt, transition=transition, channel=channel, target=target,
                                 subject=decide.subject(change), text=text,
                                 payload=decide.webhook_body(str(pk), change, text), created_at=now, due_at=now))
    Notification.objects.bulk_create(rows, ignore_conflicts=True)
    send_on_commit([row.pk for row in rows])
    return rows


def send_on_commit(ids) -> None:
    """A message per row once the transaction commits (off with OSMO_NOTIFY_ON_COMMIT: the sweep sends)."""
    ids = [str(pk) for pk in ids]
    if ids and settings.OSMO_NOTIFY_ON_COMMIT:
        transaction.on_commit(lambda: [send(TASK, pk) for pk in ids], robust=True)


# ---- sending ---------------------------------------------------------------------------------------------------

class SendError(Exception):
    pass


def claim(pk, now) -> tuple[Notification, uuid.UUID] | None:
    """The row and our claim, committed; None when it is sent, given up, or claimed by a live sender."""
    stale = now - timedelta(seconds=settings.OSMO_NOTIFY_CLAIM_SECONDS)
    with transaction.atomic():
        row = (Notification.objects.select_for_update(skip_locked=True)
               .filter(pk=pk, sent_at__isnull=True, gave_up_at__isnull=True)
               .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=stale)).first())
        if row is None:
            return None
        token = uuid.uuid4()
        Notification.objects.filter(pk=pk).update(claimed_at=now, claim=token, tries=F("tries") + 1)
    row.tries += 1
    return row, token


def deliver(pk, *, now=None, clock=timezone.now) -> str:
    """"sent", "skipped" (sent, given up, or another sender has it), "retry" (failed; due again later) or
    "gave_up" (failed OSMO_NOTIFY_MAX_TRIES times)."""
    claimed = claim(pk, now or clock())
    if claimed is None:
        return "skipped"
    row, token = claimed
    try:
        if row.channel == Channel.WEBHOOK:
            post_webhook(row.target, row.payload, str(row.pk))
        else:
            send_mail(row)
    except SendError as exc:
        failed = clock()
        ours = Notification.objects.filter(pk=row.pk, claim=token)
        if row.tries >= settings.OSMO_NOTIFY_MAX_TRIES:
            ours.update(gave_up_at=failed, claim=None, last_error=str(exc)[:2000])
            log.warning("notification %s gave up after %s tries: %s", row.pk, row.tries, exc)
            return "gave_up"
        ours.update(claimed_at=None, claim=None, last_error=str(exc)[:2000], due_at=failed + backoff(row.tries))
        return "retry"
    # Only while our claim holds: a sender that took a stale claim over marks it itself.
    Notification.objects.filter(pk=row.pk, claim=token).update(sent_at=clock(), claim=None, last_error="")
    return "sent"


def backoff(tries: int) -> timedelta:
    """OSMO_NOTIFY_BACKOFF_SECONDS (30) doubling per try, at most an hour."""
    return timedelta(seconds=min(settings.OSMO_NOTIFY_BACKOFF_SECONDS * 2 ** max(tries - 1, 0), 3600))


def resolve(url: str, *, getaddrinfo=socket.getaddrinfo) -> list[str]:
    """Every address the URL's host has now, each checked (all of them, not only the first: a name may answer a
    public and a private address), unless the operator allows the host by name (OSMO_NOTIFY_ALLOWED_HOSTS). The
    send connects to these addresses, never resolving again: a name that answers differently the second time
    (DNS rebinding) reaches nothing unchecked. The user's error names no address; the server log does."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        infos = getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM,
                            proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise SendError(f"cannot resolve {host}: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise SendError(f"cannot resolve {host}: no address")
    allowed = settings.OSMO_NOTIFY_ALLOWED_HOSTS
    refused = [] if decide.host_allowed(host, allowed) else decide.refused_addresses(addresses, allowed)
    if refused:
        log.warning("webhook host %s resolves to %s, not public (not in OSMO_NOTIFY_ALLOWED_HOSTS)", host,
                    ", ".join(refused))
        raise SendError(f"{host} resolves to a private address (not in OSMO_NOTIFY_ALLOWED_HOSTS)")
    return addresses


def _connection(url: str, addresses: list[str]) -> http.client.HTTPConnection:
    """A connection to `url`'s host (its name in the Host header and in TLS: the certificate is checked against
    it) made to one of `addresses`, tried in order. http.client follows no redirect."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    timeout = settings.OSMO_NOTIFY_TIMEOUT
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname, port, timeout=timeout,
                                                 context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)

    def connect(_where, timeout, source_address=None):
        failed = None
        for address in addresses:
            try:
                return socket.create_connection((address, port), timeout, source_address)
            except OSError as exc:
                failed = exc
        raise failed

    connection._create_connection = connect  # http.client's own seam for the socket; TLS wraps what it returns
    return connection


def post_webhook(url: str, payload: dict, key: str, *, getaddrinfo=socket.getaddrinfo) -> None:
    try:
        decide.check_webhook_url(url, settings.OSMO_NOTIFY_ALLOWED_HOSTS)
    except decide.Refused as exc:
        raise SendError(exc.message) from None
    shown = url.split("?")[0]
    parts = urlsplit(url)
    connection = _connection(url, resolve(url, getaddrinfo=getaddrinfo))
    try:
        connection.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                           body=json.dumps(payload).encode(), headers={
                               "Content-Type": "application/json", "Idempotency-Key": key,
                               "User-Agent": "osmo-notify/1"})
        response = connection.getresponse()
        response.read(RESPONSE_MAX_BYTES)
    except (OSError, http.client.HTTPException, ValueError) as exc:  # refused, timed out, reset, a bad answer
        raise SendError(f"{shown}: {exc}") from None
    finally:
        connection.close()
    if 300 <= response.status < 400:
        # A redirect could lead a webhook past the address check: refused like an error, never followed.
        raise SendError(f"{shown} answered {response.status} (a redirect, not followed)")
    if not 200 <= response.status < 300:
        raise SendError(f"{shown} answered {response.status}")


def send_mail(row: Notification) -> None:
    message = EmailMessage(row.subject, row.text, settings.DEFAULT_FROM_EMAIL, [row.target],
                           headers={"Message-ID": f"<{row.pk}@osmo.notify>", "X-OSMO-Notification": str(row.pk)})
    try:
        message.send(fail_silently=False)
    except Exception as exc:  # smtplib's errors, a refused or timed-out connection, a bad address
        raise SendError(f"mail to {row.target}: {exc}") from None


# ---- the sweep -------------------------------------------------------------------------------------------------

def pending_too_long(now) -> int:
    """Record "stuck pending" for each chosen user's workloads waiting longer than their N minutes (once per
    attempt). Bounded by the preferences that choose it, not by the queue's length."""
    made = 0
    since = Coalesce("queued_at", "submitted_at")
    waiting = Workload.objects.filter(status=Status.PENDING).annotate(since=since)
    # Filtered here, not in SQL: JSON containment is PostgreSQL's (the demo runs on SQLite); rows are few.
    for preference in NotificationPreference.objects.all():
        if decide.PENDING not in preference.transitions:
            continue
        rows = waiting.filter(since__lt=now - timedelta(minutes=preference.pending_minutes))
        if preference.user_id:
            rows = rows.filter(submitter_id=preference.user_id)
        else:
            rows = rows.filter(project_id=preference.project_id).exclude(
                submitter__notification_preference__isnull=False)
        told = Notification.objects.filter(workload=OuterRef("pk"), user_id=OuterRef("submitter_id"),
                                           attempt=OuterRef("attempt"), transition=decide.PENDING)
        for workload in rows.filter(~Exists(told)).select_related("project", "submitter", "pool").defer(
                "request", "variables", "templates")[:1000]:
            minutes = int((now - workload.since).total_seconds() // 60)
            first = (workload.reasons or [{}])[0].get("message", "")
            with transaction.atomic():
                made += len(record(workload, decide.PENDING, Status.PENDING,
                                   f"Pending for {minutes} min. {first}".strip(), now=now))
    return made


def sweep(now=None, *, act: bool = False) -> dict:
    """Stuck-pending rows, then every unsent row that is due and unclaimed (or claimed by a dead sender):
    `act` sends them here (`manage.py notifications sweep`, the tests), else a message each."""
    now = now or timezone.now()
    result = {"pending": pending_too_long(now), "sent": 0, "queued": 0, "retry": 0, "gave_up": 0, "skipped": 0}
    stale = now - timedelta(seconds=settings.OSMO_NOTIFY_CLAIM_SECONDS)
    due = list(Notification.objects.filter(sent_at__isnull=True, gave_up_at__isnull=True, due_at__lte=now).filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=stale)).values_list("pk", flat=True)[:1000])
    if not act and due:
        # Not due again before a sender could have claimed it: a worker that is down for an hour gets one message
        # per row per OSMO_NOTIFY_CLAIM_SECONDS, not one per sweep.
        Notification.objects.filter(pk__in=due).update(
            due_at=now + timedelta(seconds=settings.OSMO_NOTIFY_CLAIM_SECONDS))
    for pk in due:
        if act:
            outcome = deliver(pk, now=now)
            result[outcome] += 1
        else:
            send(TASK, str(pk))
            result["queued"] += 1
    return result
