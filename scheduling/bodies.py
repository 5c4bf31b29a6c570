"""A workload as every door shows it: the API's body, the CLI's `describe`, the pages and the CSV all
read these dicts. Names of pools the viewer may not use are left out (`Access.visible_pool_names`)."""

from decimal import Decimal
from typing import Any

from pools.models import ManagedJob
from pools.models.visibility import Access

from .models import Workload
from .positions import first_position, positions_of

COLUMNS = ("id", "name", "workflow", "project", "submitter", "source", "priority", "status", "pool", "platform",
           "pools", "replicas", "gpu", "cpu", "memory", "reason", "position", "submitted_at", "admitted_at")


HIDDEN_MESSAGE = "(about a pool you may not see)"
WAITING = ("PENDING", "SCHEDULING")  # statuses whose reasons say why the workload waits


def cores(millicores: int) -> float | int:
    value = Decimal(millicores) / 1000
    return int(value) if value == value.to_integral_value() else float(value)


def _visible(access: Access):
    names = access.visible_pool_names

    def keep(pool: str | None) -> bool:
        return pool is None or names is None or pool in names
    return keep


def first_reason(workload: Workload, keep=None) -> dict | None:
    for reason in workload.reasons or []:
        if keep is None or keep(reason.get("pool")):
            return reason
    return None


def row(workload: Workload, access: Access) -> dict[str, Any]:
    """One line of the lists (API list, page table, CSV)."""
    keep = _visible(access)
    pools = [p for p in workload.pools if keep(p)]
    reason = first_reason(workload, keep) if workload.status in WAITING else None
    positions = positions_of(workload.positions, workload.pools, keep)
    pool_name = workload.pool_label if workload.pool_label and keep(workload.pool_label) else None
    return {
        "id": str(workload.id),
        "name": workload.name,
        "workflow": workload.workflow,
        "project": workload.project_label,
        "submitter": workload.submitter_name,
        "source": workload.source,
        "priority": workload.priority,
        "status": workload.status,
        "pool": pool_name,
        "platform": workload.platform if pool_name else "",
        "pools": pools,
        "replicas": workload.replicas,
        "gpu": workload.gpu,
        "cpu": cores(workload.cpu),
        "memory": workload.memory,
        "storage": workload.storage,
        "reason": reason,
        "position": first_position(positions)[1],
        "positions": positions,
        "submitted_at": workload.submitted_at,
        "admitted_at": workload.admitted_at,
        "started_at": workload.started_at,
        "finished_at": workload.finished_at,
    }


def placed(pods: dict[str, dict]) -> dict[str, int]:
    """Where work runs or ran, from the pods (never from admission's plan): node -> pods bound there."""
    found: dict[str, int] = {}
    for pod in pods.values():
        if pod.get("node"):
            found[pod["node"]] = found.get(pod["node"], 0) + 1
    return dict(sorted(found.items()))


def current_runs(workloads) -> dict[str, ManagedJob]:
    """The current attempt's ManagedJob of each dispatched workload, by workload id, in one query."""
    keys = {(w.pool.backend_id, w.namespace, w.job_name): str(w.id) for w in workloads if w.job_name and w.pool_id}
    if not keys:
        return {}
    rows = ManagedJob.objects.filter(workload__in=set(keys.values()), name__in={k[2] for k in keys})
    return {keys[(row.backend_id, row.namespace, row.name)]: row for row in rows
            if (row.backend_id, row.namespace, row.name) in keys}


def _job(workload: Workload, run: ManagedJob | None) -> dict | None:
    """The current attempt's Job and its pods as the sync last saw them."""
    if not workload.job_name:
        return None
    pods = []
    for name, pod in sorted((run.pods if run else {}).items()):
        pods.append({"name": name, "node": pod.get("node") or None, "ip": pod.get("ip") or None,
                     "phase": "Deleted" if pod.get("deleted") else pod.get("phase"), "exit_code": pod.get("exit_code"),
                     "reason": pod.get("waiting") or pod.get("reason") or pod.get("disrupted") or None})
    return {"name": workload.job_name, "namespace": workload.namespace, "dispatched_at": workload.dispatched_at,
            "seen": run is not None, "finished": (run.job.get("finished") or None) if run else None,
            "gone": run.gone if run else False, "pods": pods}


def _request(workload: Workload, keep) -> dict:
    request = dict(workload.request or {})
    if request.get("pools"):
        request["pools"] = [pool for pool in request["pools"] if keep(pool)]
    return request


def detail(workload: Workload, access: Access, events=None) -> dict[str, Any]:
    keep = _visible(access)
    body = row(workload, access)
    run = current_runs([workload]).get(str(workload.id)) if body["pool"] else None
    body.update({
        "department": workload.department_label,
        "resources": {"gpu": workload.gpu, "cpu": cores(workload.cpu), "memory": workload.memory,
                      "storage": workload.storage},
        "preemptible": workload.preemptible,
        "exec_timeout": workload.exec_timeout or None,
        "queue_timeout": workload.queue_timeout or None,
        "exit_actions": workload.exit_actions,
        "topology": workload.topology,
        "variables": workload.variables,
        "request": _request(workload, keep),
        "reasons": [r for r in workload.reasons or [] if keep(r.get("pool"))] if workload.status in WAITING else [],
        "placement": placed(run.pods) if body["pool"] and run else {},
        "planned_nodes": workload.placement if body["pool"] else {},
        "pod_templates": {pool: value for pool, value in (workload.templates or {}).items() if keep(pool)},
        "attempt": workload.attempt,
        "exit_code": workload.exit_code,
        "stopping": workload.stop_status or None,
        "job": _job(workload, run) if body["pool"] else None,
        "attempts": [a for a in workload.attempts or [] if keep(a.get("pool") or None)],
        "events": [{"at": e.at, "status": e.status, "reason": e.reason,
                    "message": e.message if all(keep(p) for p in e.pools) else HIDDEN_MESSAGE}
                   for e in (events if events is not None else workload.events.all())],
    })
    return body
