"""Stopping idle notebooks (issue 43, docs/admin/idle-notebooks.md): per pool or project, an admin's rule
(OSMO_NOTEBOOK_IDLE_RULES) stops a running notebook whose GPUs stayed under N % for M minutes, and one older than
its maximum lifetime. Run by the periodic sweep (`scheduling.run.sweeps`) on its clock.

The owner is told first: at 80 % of the limit, an event and a notification ("idle", once per idle stretch or
lifetime). The stop is FAILED_IDLE with the reason (IDLE or MAX_LIFETIME) and the figures, an audit row, and the
failure notification as for any other. The figures are the sampler's (`scheduling.run.utilization`): the peak of
every GPU over its last OSMO_IDLE_GPU_MINUTES, so a stretch under the rule's percent is seen once that window has
passed. Without figures (no OSMO_PROMETHEUS_URL, a pod unmeasured, a stale round) nothing is stopped for being
idle: the notebook's page says so, once. The lifetime needs no figures."""

import json
from functools import lru_cache

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.models import audit
from scheduling.decisions import idle as decide
from scheduling.decisions.notifications import IDLE
from scheduling.models import Kind, Status, Workload, WorkloadEvent, WorkloadUtilization
from scheduling.run import attempts, notify
from scheduling.run.utilization import stale_seconds

NOT_MEASURED = "IDLE_NOT_MEASURED"
WARNINGS = {"IDLE": "IDLE_WARNING", "LIFETIME": "LIFETIME_WARNING"}
STOP_REASONS = {"IDLE": "IDLE", "LIFETIME": "MAX_LIFETIME"}


@lru_cache(maxsize=4)
def _parsed(text: str) -> dict[str, decide.NotebookRule]:
    return decide.parse_rules(json.loads(text))


def rules() -> dict[str, decide.NotebookRule]:
    return _parsed(json.dumps(settings.OSMO_NOTEBOOK_IDLE_RULES, sort_keys=True))


def _under_since(workload: Workload, rule: decide.NotebookRule, now) -> tuple[bool, object]:
    """(measured, since when its GPUs stayed under the rule's percent or None), keeping the stretch's start."""
    row = WorkloadUtilization.objects.filter(workload=workload).first()
    if not settings.OSMO_PROMETHEUS_URL or row is None or row.peak is None or \
            not decide.is_fresh(row.measured_at, now, stale_seconds()):
        return False, None
    since = decide.idle_since(row.rule_idle_since, peak=row.peak, started_at=workload.started_at, now=now,
                              percent=rule.under_percent, minutes=settings.OSMO_IDLE_GPU_MINUTES)
    if since != row.rule_idle_since:
        WorkloadUtilization.objects.filter(pk=row.pk).update(rule_idle_since=since)
    return True, since


def _event(workload: Workload, now, reason: str, message: str) -> None:
    WorkloadEvent.objects.create(workload=workload, at=now, status=workload.status, reason=reason, message=message,
                                 pools=[workload.pool.name] if workload.pool_id else [])


def sweep(now=None) -> dict[str, int]:
    """One pass over the running notebooks under a rule: counts of "stopped", "warned", "not_measured"."""
    now = now or timezone.now()
    found = rules()
    counts: dict[str, int] = {}
    if not found:
        return counts
    notebooks = (Workload.objects.filter(kind=Kind.NOTEBOOK, status=Status.RUNNING, stop_status="")
                 .exclude(started_at=None).select_related("pool", "project"))
    for workload in notebooks.iterator(chunk_size=500):
        rule = decide.rule_for(found, workload.project_label, workload.pool_label)
        if rule is None:
            continue
        with transaction.atomic():
            locked = (Workload.objects.select_for_update(skip_locked=True, of=("self",))
                      .select_related("pool", "project").filter(pk=workload.pk, status=Status.RUNNING,
                                                                 stop_status="").first())
            if locked is None:
                continue
            outcome = _apply(locked, rule, now)
        if outcome:
            counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def _apply(workload: Workload, rule: decide.NotebookRule, now) -> str:
    measured, under = _under_since(workload, rule, now)
    events = workload.events.filter(at__gte=workload.started_at)
    outcome = ""
    if not measured and not events.filter(reason=NOT_MEASURED).exists():
        _event(workload, now, NOT_MEASURED, f"The idle rule of its {_scope(workload)} (stop under "
               f"{rule.under_percent:g} % for {rule.minutes} min) cannot tell: its GPUs' utilization is not "
               "measured (OSMO_PROMETHEUS_URL unset, or no fresh figures). It is not stopped for being idle.")
        outcome = "not_measured"
    verdict = decide.notebook_verdict(
        rule, started_at=workload.started_at, now=now, under_since=under,
        warned_idle=under is not None and events.filter(reason=WARNINGS["IDLE"], at__gte=under).exists(),
        warned_lifetime=events.filter(reason=WARNINGS["LIFETIME"]).exists())
    if verdict.action == "warn":
        _event(workload, now, WARNINGS[verdict.code], verdict.message)
        notify.record(workload, IDLE, Status.RUNNING, verdict.message, now=now)
        return "warned"
    if verdict.action == "stop":
        message = f"Stopped by the idle rule of its {_scope(workload)}: {verdict.message}"
        attempts.request_stop(workload, Status.FAILED_IDLE, STOP_REASONS[verdict.code], message, now=now)
        audit.record("workload", f"workload/{workload.pk}", "idle-stop", f"{workload.name}: {message}")
        return "stopped"
    return outcome


def _scope(workload: Workload) -> str:
    if f"project/{workload.project_label}" in rules():
        return f"project {workload.project_label}"
    return f"pool {workload.pool_label}"
