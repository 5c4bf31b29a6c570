"""Stopping a dispatched attempt: delete its Job (propagationPolicy Background: batch/v1's default would orphan
the pods), then end the attempt as recorded (`attempts.request_stop`). PREEMPTING workloads from admission
stop the same way and end FAILED_PREEMPTED, rescheduled as a new attempt while retries remain. Like dispatch,
one worker at a time per row (locked, skipped by others). The delete is tried again on a transient answer
(pools.cluster.retries); when the tries run out, or the API server refuses it for good (a 403 that persists, say),
an event says so with the server's words and the row is left for the sweep, which tries again later; what was
retried before it worked is an event too."""

import contextlib
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from pools.cluster import Cluster, ClusterError, NotFound
from pools.cluster.retries import Retries
from pools.fleet.sync import shared_cluster_for
from pools.models import Backend, audit
from scheduling.models import Status, Workload, WorkloadEvent
from scheduling.run import attempts, log_archive, workload_objects
from scheduling.run.dispatch import retries_for


def stop(workload_id, *, clusters: Callable[[Backend], Cluster] = shared_cluster_for, now=None,
         retries: Retries | None = None) -> str:
    """"stopped", "refused" (the API server refused the delete for good: an event says why), or "skipped"
    (nothing to stop, or another worker holds the row). Raises ClusterError (transient, the tries ran out)."""
    outcome = _stop(workload_id, clusters, now, retries)
    if isinstance(outcome, ClusterError):
        raise outcome
    return outcome


def _note(workload: Workload, reason: str, message: str, now) -> None:
    """An event of the stop, once while it says the same (the sweep tries the stop again every few minutes)."""
    last = workload.events.order_by("-at", "-id").values_list("reason", "message").first()
    if last != (reason, message):
        WorkloadEvent.objects.create(workload=workload, at=now or timezone.now(), status=workload.status,
                                     reason=reason, message=message, pools=[workload.pool.name])


def _stop(workload_id, clusters: Callable[[Backend], Cluster], now, retries: Retries | None) -> str | ClusterError:
    with transaction.atomic():
        workload = (Workload.objects.select_for_update(skip_locked=True, of=("self",))
                    .select_related("pool__backend").filter(pk=workload_id).first())
        if workload is None or not (workload.stop_status or workload.status == Status.PREEMPTING):
            return "skipped"
        if workload.job_name and workload.pool is not None:
            # Its pods go with the Job: the ends of their logs are kept first (issue 26, "Evidence kept").
            log_archive.keep_before_stop(workload, clusters(workload.pool.backend), now)
            cluster = clusters(workload.pool.backend)
            retries = retries or retries_for(cluster)
            kind = workload_objects.kind_of(workload)  # None: a Job; else a Deployment or StatefulSet (issue 43)
            where = (f"{kind.kind if kind else 'Job'} {workload.namespace}/{workload.job_name} on backend "
                     f"{workload.pool.backend.name}")
            try:
                # NotFound: already gone (its TTL, by hand, or an earlier try of this stop). Its Service and
                # Ingress are owned by it and go with it.
                with contextlib.suppress(NotFound):
                    retries.call(lambda: cluster.delete_job(workload.namespace, workload.job_name,
                                                            propagation_policy="Background") if kind is None
                                 else cluster.delete_object(kind, workload.job_name, namespace=workload.namespace))
            except ClusterError as exc:
                transient = retries.transient(exc)
                _note(workload, "STOP_RETRYING" if transient else "STOP_REFUSED",
                      f"Deleting the {where} {'did not work yet' if transient else 'was refused'}: {exc.message}"
                      + (f" {retries.summary()}" if retries.retried else "") + " It is tried again later.", now)
                return exc if transient else "refused"
            if retries.retried:
                _note(workload, "STOP_RETRIED", f"Deleting the {where}: {retries.summary()}", now)
        summary = (f"{workload_objects.kind_of(workload).kind if workload_objects.kind_of(workload) else 'Job'} "
                   f"{workload.namespace}/{workload.job_name or '-'} deleted: "
                   f"{workload.stop_reason or 'PREEMPTED'}")
        if workload.stop_status:
            attempts.finish(workload, workload.stop_status, workload.stop_reason, workload.stop_message,
                            exit_code=workload.exit_code, now=now)
        else:
            attempts.finish(workload, attempts.RESCHEDULE, "PREEMPTED",
                            "Preempted to return borrowed capacity (reclaim).", now=now)
        audit.record("workload", f"workload/{workload.pk}", "stop", summary)
    return "stopped"
