"""Dispatch of an ADMITTED workload: create the Job of its attempt on its pool's backend, exactly once (issue 13,
DESIGN.md section 3, "Dispatch and lifecycle"). Called by the `dispatch_workload` task (sent when an admission
commits), by the sweep for rows whose message was lost, and by `manage.py schedule`.

The project's namespace is created when missing, labelled as ours. Exactly once: the row is locked (skipped
when another worker holds it) for the whole create, and the Job's name is fixed by the workload and attempt. A
worker that dies after the API server accepted the Job leaves the row ADMITTED (its transaction rolls back);
the next try gets 409 AlreadyExists, reads the Job back and accepts it when its labels name this workload. A
Job of that name that is not ours fails the workload (FAILED_BACKEND_ERROR, saying whose it is not), as does a
Job the API server refuses (4xx). Any other cluster error propagates with the row untouched, for the caller to
retry later."""

from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.cluster import Cluster, ClusterError, Conflict
from pools.engine import parse_timeout
from pools.fleet.sync import shared_cluster_for
from pools.models import Backend

from . import attempts
from .jobs import MANAGED, MANAGED_VALUE, Attempt, job_manifest, owned_by
from .models import Status, Workload, WorkloadEvent


def _seconds(timeout: str) -> int | None:
    return int(parse_timeout(timeout).total_seconds()) if timeout else None


def attempt_of(workload: Workload) -> Attempt:
    template = (workload.templates.get(workload.pool.name) or {}).get("pod_template") or {}
    return Attempt(str(workload.id), workload.attempt, workload.project.name, workload.project.namespace,
                   workload.pool.name, workload.platform, workload.priority, workload.replicas, template,
                   _seconds(workload.exec_timeout))


def dispatch(workload_id, *, clusters: Callable[[Backend], Cluster] = shared_cluster_for,
             now: datetime | None = None) -> str:
    """"created", "found" (an earlier try created it), "failed" (a Job of that name is not ours) or
    "skipped" (not ADMITTED, or another worker is dispatching it)."""
    now = now or timezone.now()
    prefix = settings.OSMO_LABEL_PREFIX
    with transaction.atomic():
        workload = (Workload.objects.select_for_update(skip_locked=True, of=("self",))
                    .select_related("pool__backend", "project").filter(pk=workload_id, status=Status.ADMITTED)
                    .first())
        if workload is None or workload.pool is None:
            return "skipped"
        attempt = attempt_of(workload)
        manifest = job_manifest(attempt, prefix=prefix, ttl_seconds=settings.OSMO_JOB_TTL_SECONDS,
                                priority_classes=settings.OSMO_PRIORITY_CLASSES)
        name, namespace, backend = manifest["metadata"]["name"], attempt.namespace, workload.pool.backend
        cluster = clusters(backend)
        try:
            cluster.ensure_namespace(namespace, {f"{prefix}{MANAGED}": MANAGED_VALUE,
                                                 f"{prefix}project": attempt.project})
            cluster.create_job(namespace, manifest)
            outcome, message = "created", f"Job {namespace}/{name} created on backend {backend.name}."
        except Conflict:
            existing = cluster.get_job(namespace, name)
            if not owned_by(existing, attempt.workload_id, prefix):
                attempts.finish(workload, Status.FAILED_BACKEND_ERROR, "JOB_NOT_OURS",
                                f"A Job {namespace}/{name} exists on backend {backend.name} and is not this "
                                f"workload's (its {prefix}workload label is "
                                f"{(existing['metadata'].get('labels') or {}).get(prefix + 'workload')!r}).", now=now)
                return "failed"
            outcome, message = "found", (f"Job {namespace}/{name} found on backend {backend.name}, created by an "
                                         "earlier try.")
        except ClusterError as exc:
            if exc.status is None or exc.status >= 500 or exc.status in (408, 429):
                raise  # worth another try: the row stays ADMITTED
            attempts.finish(workload, Status.FAILED_BACKEND_ERROR, "JOB_REFUSED",
                            f"Backend {backend.name} refused the Job {namespace}/{name}: {exc.message}", now=now)
            return "failed"
        Workload.objects.filter(pk=workload.pk).update(status=Status.SCHEDULING, job_name=name, namespace=namespace,
                                                       dispatched_at=now, updated_at=now)
        WorkloadEvent.objects.create(workload=workload, at=now, status=Status.SCHEDULING, reason="DISPATCHED",
                                     message=message, pools=[attempt.pool])
    return outcome
