"""Keeping the end of each replica's log when an attempt ends (issue 26, "Evidence kept"). `plan` writes one
PENDING `LogArchive` row per replica in the transaction that ends the attempt (the durable fact) and sends
`archive_logs` on commit; `archive` fills PENDING rows from the cluster, each under its row lock, so a message sent
twice, or by the sweep, reads nothing twice. A stop reads the logs before it deletes the Job (`keep_before_stop`),
since its pods go with it."""

from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.cluster import Cluster, ClusterError, LogQuery, NotFound
from pools.fleet.sync import shared_cluster_for
from pools.models import Backend, ManagedJob
from scheduling.decisions import log_lines
from scheduling.models import LogArchive, Workload
from scheduling.run.logs import replicas, user_container
from scheduling.run.outbox import send

TASK = "scheduling.tasks.archive_logs"
# Lines asked of the kubelet for the last OSMO_LOG_ARCHIVE_BYTES (there is no "last N bytes"): enough for lines of
# 16 bytes on average, never fewer than this.
LEAST_LINES = 1000


def plan(workload: Workload, now=None) -> int:
    """PENDING rows for the current attempt's replicas, as the sync last saw their pods; how many were new."""
    if not workload.job_name or workload.pool_id is None:
        return 0
    run = ManagedJob.objects.filter(backend_id=workload.pool.backend_id, namespace=workload.namespace,
                                    name=workload.job_name).first()
    if run is None:
        return 0
    now = now or timezone.now()
    container = user_container(workload)
    rows = [LogArchive(workload=workload, attempt=place.attempt, replica=place.replica, backend_id=place.backend_id,
                       namespace=place.namespace, pod=place.pod, container=container, node=place.node,
                       pod_ip=place.ip, phase=place.phase, exit_code=place.exit_code, created_at=now)
            for place in replicas(workload, runs=[run]) if place.attempt == workload.attempt and place.pod]
    made = LogArchive.objects.bulk_create(rows, ignore_conflicts=True)
    if made and settings.OSMO_ADMISSION_ON_COMMIT:
        workload_id = str(workload.pk)
        transaction.on_commit(lambda: send(TASK, workload_id), robust=True)
    return len(made)


def _fill(row: LogArchive, cluster: Cluster | None, now) -> None:
    most = settings.OSMO_LOG_ARCHIVE_BYTES
    lines = max(LEAST_LINES, most // 16)
    row.archived_at = now
    if cluster is None:
        row.state, row.message = LogArchive.State.MISSING, "its backend was deleted"
        return
    try:
        data = cluster.read_pod_log(row.namespace, row.pod, LogQuery(container=row.container, tail_lines=lines,
                                                                     timestamps=True))
    except NotFound:
        row.state, row.message = LogArchive.State.MISSING, "the pod was deleted before its log was read"
        return
    except ClusterError as exc:
        if exc.status != 400:
            raise  # the task retries; the row stays PENDING for the sweep
        row.state, row.message = LogArchive.State.MISSING, exc.message.split(": HTTP 400 ", 1)[-1]
        return
    kept, cut = log_lines.keep_end(data, most)
    row.data, row.truncated = kept, cut or data.count(b"\n") >= lines
    row.state, row.message = LogArchive.State.KEPT, ""


def archive(workload_id, *, clusters: Callable[[Backend], Cluster] = shared_cluster_for, now=None) -> dict:
    """Fill the workload's PENDING rows; how many ended KEPT and MISSING. Raises ClusterError (rows stay PENDING)."""
    now = now or timezone.now()
    done: dict[str, int] = {}
    with transaction.atomic():
        rows = list(LogArchive.objects.select_for_update(skip_locked=True, of=("self",)).select_related("backend")
                    .filter(workload_id=workload_id, state=LogArchive.State.PENDING))
        for row in rows:
            _fill(row, clusters(row.backend) if row.backend is not None else None, now)
            row.save(update_fields=["data", "truncated", "state", "message", "archived_at"])
            done[row.state] = done.get(row.state, 0) + 1
    return done


def keep_before_stop(workload: Workload, cluster: Cluster, now=None) -> None:
    """A stop deletes the Job and its pods with it: read their logs first (best effort: a row the cluster did not
    answer for stays PENDING, and the task finds its pod gone)."""
    plan(workload, now)
    now = now or timezone.now()
    for row in LogArchive.objects.select_for_update(skip_locked=True).filter(
            workload=workload, attempt=workload.attempt, state=LogArchive.State.PENDING):
        try:
            _fill(row, cluster, now)
        except ClusterError:
            continue
        row.save(update_fields=["data", "truncated", "state", "message", "archived_at"])


def resend_pending(now=None, *, older_than: int = 60) -> int:
    """The sweep's part: archive messages again for rows left PENDING (a lost message, a dead worker)."""
    now = now or timezone.now()
    late = now - timedelta(seconds=older_than)
    ids = sorted({str(pk) for pk in LogArchive.objects.filter(state=LogArchive.State.PENDING, created_at__lt=late)
                  .values_list("workload_id", flat=True)[:1000]})
    for workload_id in ids:
        send(TASK, workload_id)
    return len(ids)
