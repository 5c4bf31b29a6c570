"""Reading and writing notification choices: a user's own (their profile page, /api/profile/notifications/,
`manage.py notifications set`) and staff's default per project (/api/notifications/projects/NAME/, `manage.py
notifications project`). One function per write, called by every door, so that a check cannot be skipped by one
of them; each write leaves an audit row."""

from django.conf import settings
from django.db import transaction

from pools.engine import ConfigError
from pools.models import Project, audit
from scheduling.decisions import notifications as decide
from scheduling.models import Notification, NotificationPreference

FIELDS = ("transitions", "pending_minutes", "webhook_url", "email")
RECENT = 20


def _checked(data) -> dict:
    if not isinstance(data, dict):
        raise ConfigError("expected a JSON object with transitions, pending_minutes, webhook_url and email",
                          field="body")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ConfigError(f"unknown field {unknown[0]}; the fields are {', '.join(FIELDS)}", field=unknown[0])
    values = {}
    try:
        if "transitions" in data:
            values["transitions"] = decide.check_transitions(data["transitions"])
        if "pending_minutes" in data:
            values["pending_minutes"] = decide.check_pending_minutes(data["pending_minutes"])
        if "webhook_url" in data:
            values["webhook_url"] = decide.check_webhook_url(data["webhook_url"] or "",
                                                             settings.OSMO_NOTIFY_ALLOWED_HOSTS)
    except decide.Refused as exc:
        raise ConfigError(exc.message, field=exc.field) from None
    if "email" in data:
        if not isinstance(data["email"], bool):
            raise ConfigError("email must be true or false", field="email")
        values["email"] = data["email"]
    return values


def describe(row: NotificationPreference | None) -> dict:
    if row is None:
        return {"transitions": [], "pending_minutes": 60, "webhook_url": "", "email": False, "updated_at": None,
                "updated_by": ""}
    return {"transitions": row.transitions, "pending_minutes": row.pending_minutes, "webhook_url": row.webhook_url,
            "email": row.email, "updated_at": row.updated_at.isoformat(), "updated_by": row.updated_by}


def _save(owner: dict, data, actor, what: str) -> NotificationPreference:
    values = _checked(data)
    with transaction.atomic():
        row = NotificationPreference.objects.select_for_update().filter(**owner).first()
        row = row or NotificationPreference(**owner)
        for key, value in values.items():
            setattr(row, key, value)
        if row.email and "user" in owner and not owner["user"].email:
            raise ConfigError("your account has no mail address: ask an administrator to set one, or use a webhook",
                              field="email")
        row.updated_by = actor.get_username() if hasattr(actor, "get_username") else str(actor or "")
        row.save()
        audit.record("notification", f"notifications/{what}", "update",
                     f"{', '.join(row.transitions) or 'nothing'}; webhook {'set' if row.webhook_url else 'none'}; "
                     f"mail {'on' if row.email else 'off'}; pending after {row.pending_minutes} min", actor=actor)
    return row


def save_own(user, data, actor=None) -> NotificationPreference:
    return _save({"user": user}, data, actor or user, user.get_username())


def save_project(project: Project, data, actor) -> NotificationPreference:
    return _save({"project": project}, data, actor, f"project/{project.name}")


def forget(owner: dict, what: str, actor) -> bool:
    """Delete a choice: a user then gets their project's default, a project's members nothing."""
    with transaction.atomic():
        deleted, _ = NotificationPreference.objects.filter(**owner).delete()
        if deleted:
            audit.record("notification", f"notifications/{what}", "delete", actor=actor)
    return bool(deleted)


def own(user) -> dict:
    """What GET /api/profile/notifications/ answers: the user's choice (or null), the project defaults that apply
    to their workloads when they have none (the projects they may see), and their recent notifications."""
    row = NotificationPreference.objects.filter(user=user).first()
    defaults = NotificationPreference.objects.filter(project__in=Project.objects.visible_to(user)).select_related(
        "project").order_by("project__name")
    recent = Notification.objects.filter(user=user).select_related("workload").order_by("-created_at")[:RECENT]
    return {
        "own": describe(row) if row else None,
        "mail_address": user.email,
        "transitions": list(decide.TRANSITIONS),
        # A project's webhook URL is the team's secret: members see that one is set, not the URL.
        "project_defaults": [{"project": d.project.name, "transitions": d.transitions,
                              "pending_minutes": d.pending_minutes, "webhook": bool(d.webhook_url),
                              "email": d.email} for d in defaults],
        "recent": [{"id": str(n.pk), "workload": str(n.workload_id), "name": n.workload.name,
                    "transition": n.transition, "attempt": n.attempt, "channel": n.channel,
                    "created_at": n.created_at.isoformat(), "sent_at": n.sent_at.isoformat() if n.sent_at else None,
                    "tries": n.tries, "gave_up": n.gave_up_at is not None, "last_error": n.last_error}
                   for n in recent],
    }


def project_by_name(name: str) -> Project:
    project = Project.objects.filter(name=name).first() if isinstance(name, str) else None
    if project is None:
        from pools.config.history import ConfigNotFound

        raise ConfigNotFound(f"There is no project {name!r}", field="project")
    return project
