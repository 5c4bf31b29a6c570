"""The members of a group of differing shapes kept together, at the start of each admission cycle (in its
transaction, like `scheduling.run.dependencies`): one member's end or new attempt is followed by the others
(`scheduling.decisions.gangs`). A member's end asks for a cycle (`scheduling.run.attempts.finish`), so the others
follow at once; one query when no gang has a live member."""

from django.db import connection
from django.utils import timezone

from scheduling.decisions import gangs as pure
from scheduling.models import ALIVE, Workload
from scheduling.run import attempts

FIELDS = ("id", "workflow", "group", "submitter_id", "project_id", "status", "attempt", "stop_status", "request")


def settle(now=None) -> int:
    """Stop what must follow another member; returns how many were stopped."""
    live = Workload.objects.filter(status__in=ALIVE, stop_status="").exclude(workflow="").filter(
        request__gang__1__isnull=False)
    keys = set(live.values_list("workflow", "group", "submitter_id", "project_id"))
    if not keys:
        return 0
    now = now or timezone.now()
    gangs: dict[tuple, list[pure.Member]] = {}
    for row in Workload.objects.filter(workflow__in={k[0] for k in keys}).values(*FIELDS):
        key = (row["workflow"], row["group"], row["submitter_id"], row["project_id"])
        request = row["request"] or {}
        if key not in keys or len(request.get("gang") or []) < 2:
            continue
        gangs.setdefault(key, []).append(pure.Member(
            str(row["id"]), int(request.get("member", 0)), tuple(request.get("tasks") or ()), row["status"],
            row["attempt"], row["status"] in ALIVE, bool(row["stop_status"])))
    stops = [stop for key, members in gangs.items() for stop in pure.settle(key[1], members)]
    done = 0
    for stop in stops:
        rows = Workload.objects.select_related("pool").filter(pk=stop.id, status__in=ALIVE, stop_status="")
        if connection.vendor == "postgresql":
            rows = rows.select_for_update(skip_locked=True, of=("self",))  # held elsewhere: the next cycle
        workload = rows.first()
        if workload is None:
            continue
        attempts.request_stop(workload, stop.status, stop.reason, stop.message, now=now)
        done += 1
    return done
