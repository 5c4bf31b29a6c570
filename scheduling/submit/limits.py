"""Submission limits: how much one request, one user and one project may ask for (issue 25).

Each limit is a setting with a default (docs/operations/limits.md); staff raise or lower one project's with the
project document's `limits` field (`{"replicas": 512}`), which then applies to submissions into that project.
A refusal is a 400 whose body names the limit (`limit`) and the field; the per-minute rate is a 429 with
`Retry-After`. The rate counts every submission attempt of a user (dry runs and refusals too: they cost the same
work) in a per-minute row of `SubmissionCount`, one upsert per attempt, shared by every web process."""

from django.conf import settings
from django.db import connection
from django.utils import timezone

from pools.engine import ConfigError
from pools.quotas.limits import LIMITS, Limit

# The time the rate limit reads; tests replace it instead of sleeping.
clock = timezone.now


# Not per project: checked before the body names one.
RATE_SETTING = "OSMO_SUBMISSIONS_PER_MINUTE"
BODY_SETTING = "OSMO_SUBMISSION_MAX_BYTES"


class LimitExceeded(ConfigError):
    def __init__(self, limit: Limit, value: int, allowed: int, field: str):
        super().__init__(f"{field}: {value} is over the limit of {allowed} {limit.what} ({limit.setting}; an admin "
                         f"can raise it for a project with its document's limits.{limit.name})", field=field)
        self.limit = limit.setting


class RateLimited(Exception):
    def __init__(self, allowed: int, retry_after: int):
        self.retry_after = retry_after
        self.limit = RATE_SETTING
        self.message = (f"Too many submissions: at most {allowed} a minute per user ({RATE_SETTING}); try again in "
                        f"{retry_after} seconds.")
        super().__init__(self.message)


def allowed(name: str, project=None) -> int:
    limit = LIMITS[name]
    override = (getattr(project, "limits", None) or {}).get(name)
    return override if override is not None else getattr(settings, limit.setting, limit.default)


def check(name: str, value: int, project, field: str) -> None:
    most = allowed(name, project)
    if value > most:
        raise LimitExceeded(LIMITS[name], value, most, field)


def check_request(request, project, field: str = "") -> None:
    """The limits of one request's own fields (a `WorkloadRequest`)."""
    prefix = f"{field}." if field else ""
    check("pools_per_request", len(request.pools or ()), project, f"{prefix}pools")
    check("replicas", request.replicas, project, f"{prefix}replicas")
    check("env_entries", len(request.env), project, f"{prefix}env")
    size = sum(len(part.encode()) for part in (*request.command, *request.args))
    check("command_bytes", size, project, f"{prefix}command")


def workflow_ceilings():
    """The task ceilings of a workflow file (settings only: checked before the file names its project)."""
    from scheduling.specs.formats import Ceilings

    return Ceilings(tasks=getattr(settings, "OSMO_MAX_WORKFLOW_TASKS", 1000),
                    tasks_per_group=getattr(settings, "OSMO_MAX_TASKS_PER_GROUP", 512),
                    file_bytes=getattr(settings, "OSMO_MAX_GROUP_FILE_BYTES", 256 * 1024))


def check_live(user, project, adding: int = 1, counts: dict | None = None) -> None:
    """Refuse `adding` more workloads when the user or the project already has its limit of live ones (one
    query for both counts; none when `counts` ({"user": n, "project": n}) were read with the project)."""
    from django.db.models import Count, Q

    from scheduling.models import ALIVE, Workload

    if counts is None:
        mine = Q(submitter=user) if user is not None else Q(pk__in=[])
        counts = Workload.objects.filter(mine | Q(project=project), status__in=ALIVE).aggregate(
            user=Count("pk", filter=mine), project=Count("pk", filter=Q(project=project)))
    for name, field in (("live_per_user", "user"), ("live_per_project", "project")):
        most = allowed(name, project)
        if (name == "live_per_project" or user is not None) and counts[field] + adding > most:
            raise LimitExceeded(LIMITS[name], counts[field] + adding, most,
                                "submitter" if field == "user" else "project")


def count_submission(user) -> None:
    """One more submission attempt of `user` this minute; raises RateLimited above the limit."""
    most = getattr(settings, RATE_SETTING, 60)
    if user is None or most <= 0:
        return
    from scheduling.models import SubmissionCount

    now = clock()
    minute = now.replace(second=0, microsecond=0)
    table = connection.ops.quote_name(SubmissionCount._meta.db_table)
    with connection.cursor() as cursor:
        # One statement: concurrent workers each see their own count (no read-then-write race).
        cursor.execute(f"INSERT INTO {table} (user_id, minute, count) VALUES (%s, %s, 1) ON CONFLICT (user_id, "
                       f"minute) DO UPDATE SET count = {table}.count + 1 RETURNING count",
                       [user.pk, connection.ops.adapt_datetimefield_value(minute)])
        count = cursor.fetchone()[0]
        if count == 1:  # the first of a minute clears the user's older rows
            SubmissionCount.objects.filter(user=user, minute__lt=minute).delete()
    if count > most:
        raise RateLimited(most, max(1, 60 - now.second))
