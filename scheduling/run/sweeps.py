"""The periodic sweep (beat, every OSMO_LIFECYCLE_INTERVAL seconds; `manage.py schedule --once` runs it too):
re-drives the outbox (ADMITTED rows whose dispatch message was lost, stops not carried out), enforces the queue
and exec timeouts, reading each timeout again when it fires (OSMO's rule: a pool's changed default applies to
work already queued), and re-reads every dispatched workload's Job (`follow.observe`), so a lost signal only
delays a change; forgets the Jobs the cluster deleted a day ago; and sends again the log archives left PENDING."""

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from pools.cluster import Cluster, ClusterError
from pools.engine import parse_timeout
from pools.fleet.sync import shared_cluster_for
from pools.models import Backend, ManagedJob, Pool
from scheduling.models import Kind, LogArchive, Status, Workload
from scheduling.run import attempts, follow, idle_notebooks, log_archive
from scheduling.run.dispatch import dispatch
from scheduling.run.outbox import dispatch_on_commit, stop_on_commit
from scheduling.run.stopping import stop

QUEUED = (Status.PENDING, Status.ADMITTED, Status.SCHEDULING)


@dataclass
class SweepResult:
    dispatched: dict[str, int] = field(default_factory=dict)  # outcome -> count (or "queued")
    stopped: dict[str, int] = field(default_factory=dict)
    timed_out: list[str] = field(default_factory=list)
    followed: dict[str, int] = field(default_factory=dict)
    archived: dict[str, int] = field(default_factory=dict)  # log archives: state -> count (or "queued")
    idle_notebooks: dict[str, int] = field(default_factory=dict)  # stopped, warned, not_measured
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {**asdict(self), "timed_out": len(self.timed_out), "errors": self.errors[:5]}


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def sweep(now=None, *, act: bool = False,
          clusters: Callable[[Backend], Cluster] = shared_cluster_for) -> SweepResult:
    """`act`: dispatch and stop here, every ADMITTED row included, instead of sending messages for the late ones
    (the operator's `schedule --once`, which needs no worker)."""
    now = now or timezone.now()
    result = SweepResult()
    # Timeouts and the cluster's news first: the stops they ask for are carried out below, in this same sweep.
    result.timed_out = timeouts(now)
    result.idle_notebooks = idle_notebooks.sweep(now)  # issue 43: their stops are carried out below too
    result.followed = follow.observe(now=now)
    # What the cluster said about Jobs deleted (by their TTL) a day ago is no longer shown anywhere.
    ManagedJob.objects.filter(gone=True, updated_at__lt=now - timedelta(days=1)).delete()
    late = now - timedelta(seconds=settings.OSMO_DISPATCH_RETRY_SECONDS)
    admitted = Workload.objects.filter(status=Status.ADMITTED, stop_status="")
    stopping = Workload.objects.filter(Q(status=Status.PREEMPTING) | ~Q(stop_status=""), status__in=(
        Status.ADMITTED, Status.PREEMPTING, Status.SCHEDULING, Status.RUNNING))
    if not act:
        admitted, stopping = admitted.filter(admitted_at__lt=late), stopping.filter(updated_at__lt=late)
    for label, rows, run, send, counts in (("dispatch", admitted, dispatch, dispatch_on_commit, result.dispatched),
                                           ("stop", stopping, stop, stop_on_commit, result.stopped)):
        ids = list(rows.values_list("id", flat=True)[:5000])
        if not act:
            with transaction.atomic():
                send(ids)
            if ids:
                counts["queued"] = len(ids)
            continue
        for pk in ids:
            try:
                _count(counts, run(pk, clusters=clusters, now=now))
            except ClusterError as exc:
                _count(counts, "error")
                result.errors.append(f"{label} {pk}: {exc.message}")
    if not act:
        queued = log_archive.resend_pending(now)
        if queued:
            result.archived["queued"] = queued
        return result
    for pk in LogArchive.objects.filter(state=LogArchive.State.PENDING).values_list("workload_id", flat=True
                                                                                    ).distinct()[:1000]:
        try:
            for state, count in log_archive.archive(pk, clusters=clusters, now=now).items():
                result.archived[state] = result.archived.get(state, 0) + count
        except ClusterError as exc:
            result.errors.append(f"archive {pk}: {exc.message}")
    return result


def _seconds(value: str) -> float | None:
    try:
        return parse_timeout(value).total_seconds() if value else None
    except ValueError:  # stored before today's rules: no timeout rather than a failed sweep
        return None


def timeouts(now=None) -> list[str]:
    """Fail what waited or ran too long: the request's timeout, else its pool's default as it is now."""
    now = now or timezone.now()
    defaults = {name: (_seconds(queue), _seconds(exec_)) for name, queue, exec_ in
                Pool.objects.values_list("name", "default_queue_timeout", "default_exec_timeout")}
    due = []
    for pk, status, queue, exec_, pools, pool, queued_at, submitted_at, started_at, kind in (
            Workload.objects.filter(status__in=(*QUEUED, Status.RUNNING), stop_status="").values_list(
                "id", "status", "request__queue_timeout", "request__exec_timeout", "pools", "pool__name",
                "queued_at", "submitted_at", "started_at", "kind").iterator(chunk_size=5000)):
        where = pool or (pools[0] if pools else "")
        if status == Status.RUNNING and kind != Kind.TRAINING:
            continue  # a notebook, inference or compute runs until stopped (its lifetime: an idle rule's)
        if status == Status.RUNNING:
            limit, since, code = _seconds(exec_ or "") or defaults.get(where, (None, None))[1], started_at, "EXEC"
        else:
            limit, since, code = (_seconds(queue or "") or defaults.get(where, (None, None))[0],
                                  queued_at or submitted_at, "QUEUE")
        if limit and since and (now - since).total_seconds() > limit:
            due.append((pk, code, limit))
    timed_out = []
    for pk, code, limit in due:
        with transaction.atomic():
            workload = (Workload.objects.select_for_update(skip_locked=True, of=("self",)).select_related("pool")
                        .filter(pk=pk, stop_status="").first())
            if workload is None or workload.status not in ((Status.RUNNING,) if code == "EXEC" else QUEUED):
                continue
            status = Status.FAILED_EXEC_TIMEOUT if code == "EXEC" else Status.FAILED_QUEUE_TIMEOUT
            what = "ran" if code == "EXEC" else "waited"
            attempts.request_stop(workload, status, f"{code}_TIMEOUT",
                                  f"It {what} longer than its {code.lower()} timeout ({_span(limit)}).", now=now)
            timed_out.append(str(pk))
    return timed_out


def _span(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
