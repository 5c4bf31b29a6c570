"""Stopping a dispatched attempt: delete its Job (propagationPolicy Background: batch/v1's default would orphan
the pods), then end the attempt as recorded (`attempts.request_stop`). PREEMPTING workloads from admission
stop the same way and end FAILED_PREEMPTED, rescheduled as a new attempt while retries remain. Like dispatch,
one worker at a time per row (locked, skipped by others); a cluster error leaves the row for the sweep."""

import contextlib
from collections.abc import Callable

from django.db import transaction

from pools.cluster import Cluster, NotFound
from pools.fleet.sync import shared_cluster_for
from pools.models import Backend, audit
from scheduling.models import Status, Workload
from scheduling.run import attempts


def stop(workload_id, *, clusters: Callable[[Backend], Cluster] = shared_cluster_for, now=None) -> str:
    """"stopped", or "skipped" (nothing to stop, or another worker holds the row). Raises ClusterError."""
    with transaction.atomic():
        workload = (Workload.objects.select_for_update(skip_locked=True, of=("self",))
                    .select_related("pool__backend").filter(pk=workload_id).first())
        if workload is None or not (workload.stop_status or workload.status == Status.PREEMPTING):
            return "skipped"
        if workload.job_name and workload.pool is not None:
            # NotFound: already gone (its TTL, by hand, or an earlier try of this stop).
            with contextlib.suppress(NotFound):
                clusters(workload.pool.backend).delete_job(workload.namespace, workload.job_name,
                                                           propagation_policy="Background")
        summary = (f"Job {workload.namespace}/{workload.job_name or '-'} deleted: "
                   f"{workload.stop_reason or 'PREEMPTED'}")
        if workload.stop_status:
            attempts.finish(workload, workload.stop_status, workload.stop_reason, workload.stop_message,
                            exit_code=workload.exit_code, now=now)
        else:
            attempts.finish(workload, attempts.RESCHEDULE, "PREEMPTED",
                            "Preempted to return borrowed capacity (reclaim).", now=now)
        audit.record("workload", f"workload/{workload.pk}", "stop", summary)
    return "stopped"
