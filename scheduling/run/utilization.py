"""GPU utilization, Django side: the source the settings name, the beat round that samples running workloads,
what the pages, the API and the CLI show, the idle list, and `gpu_utilization` for the usage rows.

A round (`sample`, beat every OSMO_UTILIZATION_INTERVAL s while OSMO_PROMETHEUS_URL is set) makes two queries,
whatever the number of workloads: every running workload's pods' average over the last
OSMO_UTILIZATION_WINDOW_MINUTES, and their peak over the last OSMO_IDLE_GPU_MINUTES. Pods are the current
attempt's, from the sync's ManagedJob rows (`attempts.current_runs`), matched to the exporter's series by
(namespace, pod name). A round that fails writes nothing but the state row (logged, and on /metrics): the figures
it would have replaced go stale and are then shown as "not measured", never as an error.
"""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from scheduling.decisions.idle import idle_since, is_fresh
from scheduling.models import Status, UtilizationState, Workload, WorkloadUtilization
from scheduling.run.attempts import current_runs
from scheduling.usage.source import source
from scheduling.usage.utilization import NotMeasured, PodKey, Source
from scheduling.usage.utilization import gpu_utilization as _gpu_utilization

log = logging.getLogger(__name__)
NOT_MEASURED = "not measured"
MAX_IDLE_ROWS = 1000  # the API's and the CLI's list; the page pages
STALE_ROUNDS = 3  # figures older than this many rounds are not shown


def stale_seconds() -> float:
    return STALE_ROUNDS * settings.OSMO_UTILIZATION_INTERVAL


def gpu_utilization(pod_keys, start: datetime, end: datetime) -> dict[PodKey, float] | None:
    """For the usage rows: the average GPU utilization (percent) of each pod of `pod_keys` ((namespace, pod name)
    pairs) over [start, end], for the pods that have figures. None when nothing is measured (no
    OSMO_PROMETHEUS_URL, or Prometheus could not answer: logged): show "not measured". One query for all the pods;
    combine pods into a row with `scheduling.usage.utilization.weighted` (by GPU-seconds)."""
    figures = source()
    if figures is None:
        return None
    try:
        return _gpu_utilization(figures, pod_keys, start, end)
    except NotMeasured as exc:
        log.warning("GPU utilization not measured for %s to %s: %s", start, end, exc.message)
        return None


def running_pods(workloads) -> dict[str, list[PodKey]]:
    """Each workload's current attempt's running pods, by workload id (one query for all)."""
    runs = current_runs(workloads)
    found: dict[str, list[PodKey]] = {}
    for workload in workloads:
        run = runs.get(str(workload.id))
        if run is None:
            continue
        pods = [(workload.namespace, name) for name, facts in sorted(run.pods.items())
                if not facts.get("deleted") and facts.get("phase") == "Running"]
        if pods:
            found[str(workload.id)] = pods
    return found


@dataclass
class Round:
    workloads: int = 0
    pods: int = 0
    measured: int = 0
    idle: int = 0
    error: str = ""
    skipped: str = ""
    ids: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"workloads": self.workloads, "pods": self.pods, "measured": self.measured, "idle": self.idle,
                "error": self.error, "skipped": self.skipped}


def _record(now, error: str = "") -> None:
    state, _ = UtilizationState.objects.get_or_create(pk=1)
    state.last_attempt_at = now
    if error:
        state.last_error, state.failures = error, state.failures + 1
    else:
        state.last_success_at, state.last_error, state.failures = now, "", 0
    state.save()


def sample(now: datetime | None = None, figures: Source | None = None) -> Round:
    """One round: read and store every running workload's figures."""
    now = now or timezone.now()
    figures = figures or source()
    done = Round()
    if figures is None:
        done.skipped = "OSMO_PROMETHEUS_URL is not set"
        return done
    # Only what matching and the idle decision read: a running workload's JSON fields would cost more than the round.
    workloads = list(Workload.objects.filter(status=Status.RUNNING, gpu__gt=0).exclude(job_name="")
                     .select_related("pool").only("id", "namespace", "job_name", "started_at", "pool__backend"))
    pods = running_pods(workloads)
    done.workloads, done.pods = len(pods), sum(len(p) for p in pods.values())
    if not pods:
        _record(now)
        return done
    keys = [key for keys in pods.values() for key in keys]
    window, idle_minutes = settings.OSMO_UTILIZATION_WINDOW_MINUTES, settings.OSMO_IDLE_GPU_MINUTES
    try:
        averages = figures.averages(keys, window * 60, now)
        peaks = figures.peaks(keys, idle_minutes * 60, now)
    except NotMeasured as exc:
        log.warning("GPU utilization round failed (%s): %s", exc.reason, exc.message)
        done.error = f"{exc.reason}: {exc.message}"
        _record(now, done.error)
        return done
    previous = dict(WorkloadUtilization.objects.filter(workload__in=list(pods)).values_list("workload", "idle_since"))
    rows = []
    for workload in workloads:
        keys = pods.get(str(workload.id))
        if not keys:
            continue
        shown = {pod: round(averages[(ns, pod)], 1) for ns, pod in keys if (ns, pod) in averages}
        peak = max(peaks[key] for key in keys) if all(key in peaks for key in keys) else None
        since = idle_since(previous.get(workload.id), peak=peak, started_at=workload.started_at, now=now,
                           percent=settings.OSMO_IDLE_GPU_PERCENT, minutes=idle_minutes)
        done.measured += bool(shown)
        done.idle += since is not None
        rows.append(WorkloadUtilization(workload=workload, measured_at=now, window_minutes=window, pods=shown,
                                        average=round(sum(shown.values()) / len(shown), 1) if shown else None,
                                        peak=peak, idle_since=since))
    WorkloadUtilization.objects.bulk_create(rows, update_conflicts=True, unique_fields=["workload"], update_fields=[
        "measured_at", "window_minutes", "pods", "average", "peak", "idle_since"])
    _record(now)
    return done


def body(workload: Workload, now: datetime | None = None) -> dict:
    """A workload's figures as the API and its page show them."""
    now = now or timezone.now()
    if not settings.OSMO_PROMETHEUS_URL:
        return {"measured": False, "note": f"{NOT_MEASURED}: OSMO_PROMETHEUS_URL is not set"}
    row = WorkloadUtilization.objects.filter(workload=workload).first()
    if row is None or row.average is None:
        return {"measured": False, "note": f"{NOT_MEASURED}: no figures for its pods yet"}
    fresh = is_fresh(row.measured_at, now, stale_seconds())
    if not fresh and workload.status == Status.RUNNING:
        return {"measured": False, "note": f"{NOT_MEASURED} since {row.measured_at:%Y-%m-%d %H:%M:%S}",
                "measured_at": row.measured_at}
    return {"measured": True, "note": "" if fresh else "its last figures, from before it ended",
            "average_percent": row.average, "window_minutes": row.window_minutes, "measured_at": row.measured_at,
            "pods": [{"name": name, "average_percent": value} for name, value in sorted(row.pods.items())],
            "peak_percent": row.peak, "idle_since": row.idle_since,
            "idle": bool(row.idle_since) and fresh and workload.status == Status.RUNNING}


def idle(queryset: QuerySet, now: datetime | None = None) -> QuerySet:
    """Of `queryset` (already scoped by `visible_to`), the running workloads holding GPUs that the last fresh round
    found idle, longest idle first."""
    now = now or timezone.now()
    if not settings.OSMO_PROMETHEUS_URL:
        return queryset.none()  # figures kept from when it was set are not shown as current
    return (queryset.filter(status=Status.RUNNING, gpu__gt=0, utilization__idle_since__isnull=False,
                            utilization__measured_at__gte=now - timedelta(seconds=stale_seconds()))
            .select_related("utilization", "project", "pool").order_by("utilization__idle_since", "id"))


def settings_body() -> dict:
    return {"measured": bool(settings.OSMO_PROMETHEUS_URL), "idle_percent": settings.OSMO_IDLE_GPU_PERCENT,
            "idle_minutes": settings.OSMO_IDLE_GPU_MINUTES}
