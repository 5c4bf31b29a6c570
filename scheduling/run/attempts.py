"""Ending an attempt, on a row the caller holds locked: the final status (or a new PENDING attempt for
RESCHEDULE), the attempt kept in `attempts`, one event per status change. When pods may still run, the Job is
deleted first: `request_stop` records what the attempt will end as and sends the stop message
(`scheduling.run.stopping` deletes the Job and then calls `finish`)."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduling.models import Status, Workload, WorkloadEvent
from scheduling.run.outbox import request_cycle, stop_on_commit

RESCHEDULE = "RESCHEDULE"


def _event(workload: Workload, status: str, reason: str, message: str, now) -> WorkloadEvent:
    pools = [workload.pool.name] if workload.pool_id and workload.pool else []
    return WorkloadEvent(workload=workload, at=now, status=status, reason=reason, message=message, pools=pools)


def finish(workload: Workload, status: str, reason: str, message: str, *, exit_code: int | None = None,
           now=None) -> list[WorkloadEvent]:
    """End the current attempt as `status` (RESCHEDULE: queue attempt N+1, or fail when the retries are spent)."""
    now = now or timezone.now()
    events = []
    if status == RESCHEDULE and workload.attempt > settings.OSMO_MAX_RETRIES:
        status, message = Status.FAILED, f"{message} All {settings.OSMO_MAX_RETRIES} retries are spent."
    ended = status
    if status == RESCHEDULE:
        ended = Status.FAILED_PREEMPTED if reason == "PREEMPTED" else Status.FAILED
    record = {"attempt": workload.attempt, "job": workload.job_name, "namespace": workload.namespace,
              "pool": workload.pool.name if workload.pool_id and workload.pool else "",
              "status": ended, "exit_code": exit_code,
              "started_at": workload.started_at.isoformat() if workload.started_at else None,
              "finished_at": now.isoformat(), "message": message}
    workload.attempts = [*workload.attempts, record]
    workload.exit_code = exit_code
    workload.stop_status = workload.stop_reason = workload.stop_message = ""
    fields = ["attempts", "exit_code", "stop_status", "stop_reason", "stop_message", "status", "updated_at"]
    if status == RESCHEDULE:
        events.append(_event(workload, record["status"], reason, message, now))
        workload.attempt += 1
        workload.status = Status.PENDING
        events.append(_event(workload, Status.PENDING, "RESCHEDULED", f"Attempt {workload.attempt} queued.", now))
        workload.pool = None
        workload.placement, workload.reasons, workload.positions = {}, [], {}
        workload.job_name = workload.namespace = workload.platform = ""
        workload.dispatched_at = workload.admitted_at = workload.started_at = None
        workload.queued_at = now
        fields += ["attempt", "pool", "placement", "reasons", "positions", "job_name", "namespace", "platform",
                   "dispatched_at", "admitted_at", "started_at", "queued_at"]
    else:
        workload.status = status
        workload.finished_at = now
        workload.reasons, workload.positions = [], {}
        fields += ["finished_at", "reasons", "positions"]
        events.append(_event(workload, status, reason, message, now))
    workload.updated_at = now
    workload.save(update_fields=fields)
    WorkloadEvent.objects.bulk_create(events)
    transaction.on_commit(request_cycle, robust=True)  # the freed capacity, or the new attempt, is in the cycle
    return events


def request_stop(workload: Workload, status: str, reason: str, message: str, *, exit_code: int | None = None,
                 now=None) -> None:
    """Delete the Job, then end the attempt as `status`; without a Job, end it now."""
    if not workload.job_name:
        finish(workload, status, reason, message, exit_code=exit_code, now=now)
        return
    now = now or timezone.now()
    workload.stop_status, workload.stop_reason, workload.stop_message = status, reason, message
    workload.exit_code = exit_code
    workload.updated_at = now
    workload.save(update_fields=["stop_status", "stop_reason", "stop_message", "exit_code", "updated_at"])
    WorkloadEvent.objects.create(workload=workload, at=now, status=workload.status, reason="STOPPING",
                                 message=f"{message} Deleting Job {workload.namespace}/{workload.job_name}.",
                                 pools=[workload.pool.name] if workload.pool_id else [])
    stop_on_commit([workload.pk])
