"""Celery tasks: beat starts `sync_backends`, which queues one `sync_backend` per connected backend."""

import logging
import multiprocessing

from celery import shared_task
from celery.signals import beat_init, worker_init, worker_shutting_down
from django.conf import settings
from django.db import OperationalError

from pools.cluster import ClusterError
from pools.cluster.connect import is_connected
from pools.fleet import node_history, snapshots
from pools.fleet.sync import BackendSync, SyncBusy, cluster_for, mark_stale_backends, share_stopping, stop_rounds
from pools.models import Backend
from pools.models.dbwrites import is_locked

logger = logging.getLogger(__name__)


@worker_init.connect
def share_the_stop(**_kwargs) -> None:
    """Before a worker starts its pool: the stop flag its prefork children will share (forked, they inherit it)."""
    share_stopping(multiprocessing.get_context("fork").Event())


@worker_shutting_down.connect
def end_sync_rounds(**_kwargs) -> None:
    """A warm shutdown waits for the tasks running: a sync round ends within a second (ASKED_SECONDS) and releases
    its lease, in this process (solo, threads) and in the prefork children, which see the shared flag set."""
    stop_rounds()


@beat_init.connect
def sync_at_beat_start(**_kwargs) -> None:
    """Beat's first sync round at its start (OSMO_SYNC_AT_START), not one OSMO_SYNC_INTERVAL later: after a deploy,
    a restart or `make demo`, each backend is watched again at once. A round still running from before finds the
    lease taken and returns; a broker that cannot take the message is said, as beat says its own sends that fail."""
    if not settings.OSMO_SYNC_AT_START:
        return
    try:
        sync_backends.delay()
    except Exception as exc:  # beat starts anyway; its schedule sends the next round
        logger.error("The sync round at beat's start was not sent: %r", exc)


@shared_task(time_limit=60, soft_time_limit=50)
def sync_backends() -> list[int]:
    mark_stale_backends()
    node_history.prune()
    queued = [backend.pk for backend in Backend.objects.all() if is_connected(backend)]
    for pk in queued:
        sync_backend.delay(pk)
    return queued


@shared_task(time_limit=settings.OSMO_SYNC_INTERVAL + 120, soft_time_limit=settings.OSMO_SYNC_INTERVAL + 90)
def sync_backend(backend_id: int, seconds: float | None = None) -> dict:
    """Watch one backend for a little less than the beat interval (idempotent: a second copy finds the
    lease taken and returns)."""
    backend = Backend.objects.filter(pk=backend_id).first()
    if backend is None:
        return {"outcome": "gone"}
    seconds = max(1.0, settings.OSMO_SYNC_INTERVAL - 5.0) if seconds is None else seconds
    try:
        stats = BackendSync(backend, cluster_for(backend)).run(seconds=seconds)
    except SyncBusy:
        return {"outcome": "busy"}
    except ClusterError as exc:
        return {"outcome": "failed", "error": exc.message}
    except OperationalError as exc:
        if not is_locked(exc):
            raise
        # Already tried again a few times; the next beat round resumes from the last stored resourceVersion.
        return {"outcome": "failed", "error": str(exc)}
    # A watch still failing at the round's end (the API server down) is a failed round, as the backend shows.
    return {"outcome": "failed" if stats.errors else "ok", **stats.as_dict()}


@shared_task(time_limit=120, soft_time_limit=100)
def record_usage_snapshots() -> int:
    """One usage snapshot per pool for the pages' 24-hour charts (idempotent within half an interval)."""
    return snapshots.record()


@shared_task(time_limit=300, soft_time_limit=270, ignore_result=True)
def reconcile_engines() -> dict:
    """Keep every engine backend's objects (KAI Queues and Topologies, Kueue's queues) equal to our configuration;
    sent once a pool, template, department or project write commits, and run by beat to repair drift. Backends
    without an engine are reconciled too while they still hold objects of ours (so switching engines cleans up)."""
    from pools.fleet.sync import shared_cluster_for
    from pools.schedulers.reconcile import run

    outcome = {}
    for backend in Backend.objects.all():
        if backend.scheduler == Backend.Scheduler.DEFAULT and not (backend.engine_objects or {}).get("objects"):
            continue
        if not is_connected(backend):
            continue
        try:
            cluster = shared_cluster_for(backend)
        except ClusterError as exc:  # a kubeconfig gone, say: kept on the backend like any reconcile failure
            Backend.objects.filter(pk=backend.pk).update(engine_error=exc.message[:2000])
            outcome[backend.name] = {"error": exc.message}
            continue
        result = run(backend, cluster)
        outcome[backend.name] = result.summary() if result else {"error": Backend.objects.values_list(
            "engine_error", flat=True).get(pk=backend.pk)}
    return outcome


@shared_task(time_limit=600, soft_time_limit=570, ignore_result=True)
def prune_audit_log() -> int:
    """Removes audit rows older than OSMO_AUDIT_DAYS; the removal is itself a row."""
    from pools.models.audit import prune

    return prune()
