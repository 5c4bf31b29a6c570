"""The start estimates' inputs, read in bulk: for any number of pending workloads, three queries (their pools with
their free and total GPUs; the work holding GPUs there and the pools' queues; the pools' latest starters: their
waits and run times), then the
pure estimator (`scheduling.decisions.estimates`). Every page, API answer and CLI command that shows an estimate
reads it from `forecasts`, so all of them show one answer for one workload at one moment."""

from collections.abc import Iterable
from datetime import UTC, datetime

from django.db.models import F, Q, Sum
from django.db.models.expressions import Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from pools.engine.timeouts import parse_timeout
from pools.fleet.usage import backend_online
from pools.models import Pool
from scheduling.decisions import estimates as pure
from scheduling.models import RESERVING, Status, Workload

# Runs that ended on their own or at their exec timeout: how long work really runs. Cancels, preemptions and
# failures to start end a run early for reasons that say nothing about the next one's length.
RAN = (Status.COMPLETED, Status.FAILED, Status.FAILED_EXEC_TIMEOUT)
RECENT = 2 * pure.HISTORY  # latest starters read per pool: enough for HISTORY finished runs where most have ended


def _seconds(value: str) -> float | None:
    try:
        return parse_timeout(value).total_seconds() or None if value else None
    except ValueError:  # stored before today's rules
        return None


def _epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def forecasts(workloads: Iterable[Workload], now: datetime | None = None) -> dict[str, pure.Forecast]:
    """The forecast of each PENDING workload among `workloads`, by id; a WAITING one's is unknown, waiting for its
    upstream groups (others have none)."""
    now = now or timezone.now()
    workloads = list(workloads)
    upstream = {str(w.id): pure.after_upstream(w.reasons[0]["message"]) for w in workloads
                if w.status == Status.WAITING and w.reasons}
    return {**_forecasts(workloads, now), **upstream}


def _gang_needs(pending: list[Workload]) -> dict[str, int]:
    """The GPUs a member of a group of differing shapes waits for, by id: its gang's, as admission starts the
    members together (docs/architecture/decisions.md, "A group of differing shapes"). One query, only when a pending
    workload belongs to a workflow; a group with one pending row is no gang."""
    keys = {(w.workflow, w.group, w.submitter_id) for w in pending if w.workflow}
    if not keys:
        return {}
    totals: dict[tuple, list[int]] = {}
    for workflow, group, submitter, gpu, replicas in Workload.objects.filter(
            status=Status.PENDING, workflow__in={key[0] for key in keys}).values_list(
            "workflow", "group", "submitter_id", "gpu", "replicas"):
        if (workflow, group, submitter) in keys:
            found = totals.setdefault((workflow, group, submitter), [0, 0])
            found[0] += gpu * replicas
            found[1] += 1
    return {str(w.id): totals[key][0] for w in pending
            if (key := (w.workflow, w.group, w.submitter_id)) in totals and totals[key][1] > 1}


def _forecasts(workloads: list[Workload], now: datetime) -> dict[str, pure.Forecast]:
    pending = [w for w in workloads if w.status == Status.PENDING]
    needs = _gang_needs(pending)
    wanted = [_wanted(w, now, needs.get(str(w.id))) for w in pending]
    names = {pool for want in wanted for pool in want.pools if pool in want.positions}
    if not names:
        return pure.estimate({}, wanted, now.timestamp()) if wanted else {}
    ready = Q(memberships__node__status="Ready", memberships__node__unschedulable=False)
    pools = {pool.pk: pool for pool in Pool.objects.filter(name__in=names).select_related("backend").annotate(
        capacity=Sum("memberships__node__gpu_allocatable", filter=ready),
        free=Sum("memberships__node__gpu_free", filter=ready))}
    facts = {pool.name: pure.PoolFacts(pool.name, pool.capacity or 0, pool.free or 0, status=_status(pool, now))
             for pool in pools.values()}
    # The work holding GPUs in these pools and the pools' queues, in one read.
    for (pool_id, status, gpu, replicas, started_at, timeout, positions, workload_id, project, department) in (
            Workload.objects.filter(Q(status__in=RESERVING, pool_id__in=pools)
                                    | Q(status=Status.PENDING, positions__has_any_keys=sorted(names)))
            .values_list("pool_id", "status", "gpu", "replicas", "started_at", "exec_timeout", "positions", "id",
                         "project__name", "project__department__name")):
        if status == Status.PENDING:
            for name, position in (positions or {}).items():
                if name in facts and isinstance(position, int):
                    facts[name].queue.append(pure.Queued(str(workload_id), gpu * replicas, position,
                                                         _seconds(timeout)))
            continue
        pool = facts[pools[pool_id].name]
        if status == Status.ADMITTED:
            pool.free -= gpu * replicas  # reserved by admission, not on the nodes' figures until its pods bind
        pool.running.append(pure.Running(gpu * replicas, _epoch(started_at), _seconds(timeout), project or "",
                                         department or "", preempting=status == Status.PREEMPTING))
    # The pools' latest starters, newest first: their waits, and the run times of those that have finished.
    ranked = Window(RowNumber(), partition_by=F("pool_id"), order_by=F("started_at").desc())
    for pool_id, status, gpu, replicas, queued_at, started_at, finished_at, _ in (
            Workload.objects.filter(pool_id__in=pools, started_at__isnull=False, started_at__lte=now)
            .annotate(rank=ranked).filter(rank__lte=RECENT).order_by("pool_id", "rank")
            .values_list("pool_id", "status", "gpu", "replicas", "queued_at", "started_at", "finished_at", "rank")):
        pool = facts[pools[pool_id].name]
        if queued_at is not None and queued_at <= started_at:
            pool.waits.append((gpu * replicas, (started_at - queued_at).total_seconds()))
        if status in RAN and finished_at is not None:
            pool.history.append((gpu * replicas, (finished_at - started_at).total_seconds()))
    return pure.estimate(facts, wanted, now.timestamp())


def _status(pool: Pool, now: datetime) -> str:
    if pool.enable_maintenance:
        return "MAINTENANCE"
    return "ONLINE" if backend_online(pool.backend, now) else "OFFLINE"


def _wanted(workload: Workload, now: datetime, gpus: int | None = None) -> pure.Wanted:
    reasons = {r.get("pool"): (r.get("code", ""), r.get("details") or {}) for r in workload.reasons or []
               if isinstance(r, dict)}
    positions = {pool: n for pool, n in (workload.positions or {}).items() if isinstance(n, int)}
    since = workload.queued_at or workload.submitted_at
    gpus = workload.gpu * workload.replicas if gpus is None else gpus
    return pure.Wanted(str(workload.id), gpus, tuple(workload.pools or ()), positions,
                       reasons, waited=max(0.0, (now - since).total_seconds()) if since else 0.0)


def shown(forecast: pure.Forecast | None, keep=None) -> dict:
    """A forecast as the API answers it, for a viewer who may see the pools `keep` keeps: `estimated_start` (an
    aware datetime, or None: unknown), `estimate_basis` (words), and `estimates` per visible pool."""
    if forecast is None:
        return {"estimated_start": None, "estimate_basis": "", "estimates": []}
    visible = [e for e in forecast.pools if keep is None or keep(e.pool)]
    known = [e for e in visible if e.at is not None]
    best = min(known, key=lambda e: e.at) if known else (visible[0] if visible else None)
    return {"estimated_start": _moment(best.at) if best else None,
            "estimate_basis": best.basis if best else forecast.basis if not forecast.pools else
            "unknown: no candidate pool you may see",
            "estimates": [{"pool": e.pool, "position": e.position, "estimated_start": _moment(e.at),
                           "basis": e.basis} for e in visible]}


def _moment(at: float | None) -> datetime | None:
    return datetime.fromtimestamp(round(at), UTC) if at is not None else None

