"""Moving dispatched workloads by what the cluster says: the sync stores our Jobs and their pods
(`pools.models.ManagedJob`) and, on commit, names the workloads whose Jobs moved (`managed_jobs_changed`);
`observe` reads those rows and applies `lifecycle.observe`'s answer. The sweep calls it for every dispatched
workload too, so a missed signal only delays a change."""

import logging
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.fleet.clusters import owners
from pools.inventory.status import READY
from pools.models import ManagedJob, Node
from scheduling.decisions import lifecycle
from scheduling.decisions.notifications import STARTED
from scheduling.models import Status, Workload, WorkloadEvent
from scheduling.run import attempts, notify

log = logging.getLogger("scheduling.run.follow")

FOLLOWED = (Status.SCHEDULING, Status.RUNNING)


def _current(workload: Workload) -> lifecycle.Current:
    actions = workload.exit_actions or (workload.pool.default_exit_actions if workload.pool else {}) or {}
    return lifecycle.Current(workload.status, workload.replicas, workload.attempt, actions,
                             settings.OSMO_MAX_RETRIES, timedelta(seconds=settings.OSMO_IMAGE_PULL_TIMEOUT),
                             planned=workload.placement or {},
                             create_failure_limit=timedelta(seconds=settings.OSMO_CREATE_FAILURE_TIMEOUT),
                             placement_grace=timedelta(seconds=settings.OSMO_PLACEMENT_GRACE), kind=workload.kind)


def _lost_nodes(workloads: list[Workload]) -> dict[tuple[int, str], str]:
    """The planned nodes admission could no longer place on (the snapshot's rule: Ready and not cordoned), by
    (backend, name): "deleted", "cordoned" or their status."""
    wanted = {(w.pool.backend_id, name) for w in workloads if w.status == Status.SCHEDULING for name in w.placement}
    if not wanted:
        return {}
    owner = owners()  # the nodes of backends sharing a cluster are the rows of the first (pools.fleet.clusters)
    found = {(backend, name): (status, cordoned) for backend, name, status, cordoned in Node.objects.filter(
        backend_id__in={owner.get(b, b) for b, _ in wanted}, name__in={n for _, n in wanted}).values_list(
        "backend_id", "name", "status", "unschedulable")}
    lost = {}
    for key in wanted:
        node = (owner.get(key[0], key[0]), key[1])
        if node not in found:
            lost[key] = "deleted"
        elif found[node][1]:
            lost[key] = "cordoned"
        elif found[node][0] != READY:
            lost[key] = found[node][0]
    return lost


def _reason(pool: str, text: str, engine: dict) -> dict:
    if engine.get("code") and text == lifecycle.engine_message(engine):
        # KAI's reason codes (OverLimit, NonPreemptibleOverQuota, QueueDoesNotExist, ...) or Kueue's (WaitingForQuota,
        # ExceedsMaxQuota, ...) with their own message and, for KAI, the queue's figures.
        return {"pool": pool, "code": "ENGINE", "message": text,
                "details": {"engine": engine.get("engine"), "reason": engine.get("code"),
                            "engine_message": engine.get("message", ""), **(engine.get("details") or {})}}
    if text.startswith(lifecycle.CREATE_FAILURE_PREFIX):
        return {"pool": pool, "code": "CREATE_FAILED", "message": text, "details": {}}
    return {"pool": pool, "code": "UNSCHEDULABLE" if "unschedulable" in text else "WAITING", "message": text,
            "details": {}}


def observe(workload_ids: Iterable | None = None, *, now=None) -> dict[str, int]:
    """Apply the cluster's facts to the dispatched workloads among `workload_ids` (None: all of them). Returns
    how many moved to each status."""
    now = now or timezone.now()
    moved: dict[str, int] = {}
    with transaction.atomic():
        rows = (Workload.objects.select_for_update(skip_locked=True, of=("self",)).select_related("pool")
                .filter(status__in=FOLLOWED, stop_status="").exclude(job_name=""))
        if workload_ids is not None:
            rows = rows.filter(pk__in=[str(pk) for pk in workload_ids])
        workloads = list(rows)
        if not workloads:
            return moved
        runs = {(row.backend_id, row.namespace, row.name): row for row in ManagedJob.objects.filter(
            workload__in=[str(w.pk) for w in workloads])}
        lost = _lost_nodes(workloads)
        events = []
        for workload in workloads:
            row = runs.get((workload.pool.backend_id, workload.namespace, workload.job_name))
            if row is None:
                continue  # dispatched, not seen by the sync yet
            backend = workload.pool.backend_id
            run = lifecycle.Run(row.job, row.pods, row.gone, row.engine,
                                lost={name: lost[(backend, name)] for name in workload.placement
                                      if (backend, name) in lost}, create_failure=row.create_failure)
            outcome = lifecycle.observe(_current(workload), run, now)
            if outcome is None:
                continue
            if outcome.status == Status.SCHEDULING:
                reasons = [_reason(workload.pool.name, text, outcome.engine) for text in outcome.waiting]
                if reasons != workload.reasons:
                    Workload.objects.filter(pk=workload.pk).update(reasons=reasons, updated_at=now)
                continue
            moved[outcome.status] = moved.get(outcome.status, 0) + 1
            if outcome.status == Status.RUNNING:
                Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING, started_at=now, reasons=[],
                                                               updated_at=now)
                events.append(WorkloadEvent(workload=workload, at=now, status=Status.RUNNING, reason="RUNNING",
                                            message=outcome.message, pools=[workload.pool.name]))
                notify.record(workload, STARTED, Status.RUNNING, outcome.message, now=now)
            elif outcome.stop:
                attempts.request_stop(workload, outcome.status, outcome.reason, outcome.message,
                                      exit_code=outcome.exit_code, now=now)
            else:
                attempts.finish(workload, outcome.status, outcome.reason, outcome.message,
                                exit_code=outcome.exit_code, now=now)
        WorkloadEvent.objects.bulk_create(events)
    return moved


def on_managed_jobs_changed(sender, backend_id=None, workloads=(), **kwargs) -> None:
    """The sync's signal (connected in `SchedulingConfig.ready`): runs in the sync's process, after its commit."""
    try:
        observe(workloads)
    except Exception:  # the sync must go on; the sweep applies what this missed
        log.exception("following workloads %s failed", sorted(workloads)[:5])
