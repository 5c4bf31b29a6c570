"""Waiting groups released or skipped, at the start of each admission cycle (in its transaction, so a released
group is in the same cycle's queue): a WAITING workload whose upstream groups have all COMPLETED becomes PENDING
(its queue timeout counts from then); one whose upstream failed or was canceled ends FAILED_UPSTREAM. A group's
end asks for a cycle (`scheduling.run.attempts.finish`), so its downstream moves at once; chains settle in one
call. Two queries when nothing waits: the WAITING rows (none) and nothing else."""

from django.db import connection
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from scheduling.decisions import dependencies as pure
from scheduling.models import Status, Workload, WorkloadEvent
from scheduling.run import attempts

MAX_ROUNDS = 100  # a chain longer than this settles over the next cycles


def release(now=None) -> dict[str, int]:
    """Release or skip what waits; returns the counts {"released": n, "skipped": m}."""
    now = now or timezone.now()
    counts = {"released": 0, "skipped": 0}
    for _ in range(MAX_ROUNDS):
        rows = Workload.objects.filter(status=Status.WAITING).select_related("pool")
        if connection.vendor == "postgresql":
            rows = rows.select_for_update(skip_locked=True, of=("self",))  # a cancel holding one: next cycle
        waiting = list(rows)
        if not waiting:
            break
        keys = {(w.workflow, w.submitter_id) for w in waiting}
        statuses: dict[tuple, dict[str, str]] = {}
        for workflow, submitter, group, status, member in Workload.objects.filter(
                workflow__in={k[0] for k in keys}).annotate(member=KeyTextTransform("member", "request")).values_list(
                "workflow", "submitter_id", "group", "status", "member"):
            if (workflow, submitter) in keys and member in (None, "0"):  # a gang's status is its lead member's
                statuses.setdefault((workflow, submitter), {})[group] = status
        moved = 0
        for workload in waiting:
            after = _after(workload)
            verdict = pure.decide(after, statuses.get((workload.workflow, workload.submitter_id), {}))
            if verdict.action == "release":
                workload.status, workload.queued_at, workload.updated_at = Status.PENDING, now, now
                workload.reasons = [{"pool": pool, "code": "SUBMITTED", "message": "Waiting for the next admission "
                                     "cycle.", "details": {}} for pool in workload.pools]
                workload.save(update_fields=["status", "queued_at", "reasons", "updated_at"])
                WorkloadEvent.objects.create(workload=workload, at=now, status=Status.PENDING,
                                             reason="UPSTREAM_COMPLETED", message=verdict.message)
                counts["released"] += 1
                moved += 1
            elif verdict.action == "skip":
                attempts.finish(workload, Status.FAILED_UPSTREAM, "UPSTREAM_FAILED", verdict.message, now=now)
                counts["skipped"] += 1
                moved += 1
        if not moved:
            break
    return counts


def _after(workload: Workload) -> list[str]:
    """The groups a stored request waits for (`WorkloadRequest.after`, from its task inputs)."""
    groups = [item.get("group") for item in (workload.request or {}).get("inputs") or []
              if isinstance(item, dict) and item.get("task") and item.get("group")]
    return list(dict.fromkeys(groups))
