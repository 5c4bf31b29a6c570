"""A workload as every door shows it: the API's body, the CLI's `describe`, the pages and the CSV all
read these dicts. Names of pools the viewer may not use are left out (`Access.visible_pool_names`)."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from pools.models import ManagedJob, Project
from pools.models.visibility import Access
from scheduling.decisions.estimates import Forecast
from scheduling.decisions.lifecycle import status_word
from scheduling.decisions.positions import first_position, positions_of
from scheduling.models import Kind, Status, Workload
from scheduling.run import estimates, links
from scheduling.run.attempts import current_runs
from scheduling.run.logs import replicas
from scheduling.specs import podenv

COLUMNS = ("id", "name", "workflow", "project", "submitter", "source", "priority", "status", "pool", "platform",
           "pools", "replicas", "gpu", "cpu", "memory", "reason", "position", "submitted_at", "admitted_at")


HIDDEN_MESSAGE = "(about a pool you may not see)"
WAITING = ("PENDING", "WAITING", "SCHEDULING")  # statuses whose reasons say why the workload waits


def cores(millicores: int) -> float | int:
    value = Decimal(millicores) / 1000
    return int(value) if value == value.to_integral_value() else float(value)


def _visible(access: Access, workload: Workload | None = None):
    """Whether a pool name may be shown: a pool the caller may see, or, to its submitter, one their own request
    named (they typed it; its refusal is theirs to read). The caller's visible pools are read only when a name
    is not one of those (a fresh submission's answer names only its own candidates: no query)."""
    named: frozenset[str] = frozenset()
    if workload is not None and _submitted_by(access, workload):
        # A list's light row has no request: its candidate pools are the ones its reasons can name.
        pools = workload.pools if "request" in workload.get_deferred_fields() else \
            (workload.request or {}).get("pools") or workload.pools
        named = frozenset(str(p) for p in pools or [])

    def keep(pool: str | None) -> bool:
        if pool is None or pool in named:
            return True
        names = access.visible_pool_names
        return names is None or pool in names
    return keep


def _submitted_by(access: Access, workload: Workload) -> bool:
    return access.signed_in and workload.submitter_id is not None and workload.submitter_id == access.user.pk


def first_reason(workload: Workload, keep=None) -> dict | None:
    for reason in workload.reasons or []:
        if keep is None or keep(reason.get("pool")):
            return reason
    return None


def row(workload: Workload, access: Access, forecast: Forecast | None = None) -> dict[str, Any]:
    """One line of the lists (API list, page table, CSV). `forecast`: the workload's start estimate, from
    `run.estimates.forecasts` over the whole list (null and "" without one)."""
    keep = _visible(access, workload)
    pools = [p for p in workload.pools if keep(p)]
    reason = first_reason(workload, keep) if workload.status in WAITING else None
    positions = positions_of(workload.positions, workload.pools, keep)
    pool_name = workload.pool_label if workload.pool_label and keep(workload.pool_label) else None
    return {
        "id": str(workload.id),
        "name": workload.name,
        "kind": workload.kind,
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
        **{key: value for key, value in estimates.shown(forecast, keep).items() if key != "estimates"},
    }


def expected_start(row: dict) -> str:
    """A row's estimated start as lists show it, the lead of its basis: "about 40 min", "unknown" ("" when not
    pending)."""
    return row["estimate_basis"].split(":", 1)[0]


def placed(pods: dict[str, dict]) -> dict[str, int]:
    """Where work runs or ran, from the pods (never from admission's plan): node -> pods bound there."""
    found: dict[str, int] = {}
    for pod in pods.values():
        if pod.get("node"):
            found[pod["node"]] = found.get(pod["node"], 0) + 1
    return dict(sorted(found.items()))


def _job(workload: Workload, run: ManagedJob | None) -> dict | None:
    """The current attempt's Job and its pods as the sync last saw them."""
    if not workload.job_name:
        return None
    pods = []
    for name, pod in sorted((run.pods if run else {}).items()):
        pods.append({"name": name, "node": pod.get("node") or None, "ip": pod.get("ip") or None,
                     "phase": "Deleted" if pod.get("deleted") else pod.get("phase"), "exit_code": pod.get("exit_code"),
                     "reason": pod.get("waiting") or pod.get("reason") or pod.get("disrupted") or None})
    kind = "Job" if workload.kind == Kind.TRAINING else {"notebook": "StatefulSet"}.get(workload.kind, "Deployment")
    return {"name": workload.job_name, "kind": kind, "namespace": workload.namespace,
            "dispatched_at": workload.dispatched_at,
            "seen": run is not None, "finished": (run.job.get("finished") or None) if run else None,
            "gone": run.gone if run else False, "pods": pods}


def _counts(workload: Workload, run: ManagedJob | None) -> tuple[int, int]:
    ready = sum(1 for pod in (run.pods if run else {}).values()
                if pod.get("ready") and not pod.get("deleted") and not pod.get("deleting"))
    return ready, workload.replicas


def _ready(workload: Workload, run: ManagedJob | None) -> str | None:
    """"ready/desired" of a notebook, inference or compute (kubectl's READY); None for a training."""
    if workload.kind == Kind.TRAINING or not workload.job_name:
        return None
    return "{}/{}".format(*_counts(workload, run))


def replica_pods(workload: Workload, keep) -> list[dict]:
    """Where each replica of each attempt ran (node and pod IP, from the pods; issue 26 point 7) and whether its log
    is live or archived, for the attempts in pools the viewer may see."""
    pools = {item.get("attempt"): item.get("pool") or None for item in workload.attempts or []}
    if workload.pool_id and workload.pool:
        pools[workload.attempt] = workload.pool.name
    return [place.as_dict() for place in replicas(workload) if keep(pools.get(place.attempt))]


def shown_request(document: dict) -> dict:
    """A validated request as the API answers it: stored in base units, its CPU shown in cores (GPUs are
    whole numbers, memory and storage bytes already)."""
    request = dict(document or {})
    resources = request.get("resources")
    if isinstance(resources, dict) and isinstance(resources.get("cpu"), int):
        request["resources"] = {**resources, "cpu": cores(resources["cpu"])}
    return request


def _request(workload: Workload, keep) -> dict:
    request = shown_request(workload.request)
    if request.get("pools"):
        request["pools"] = [pool for pool in request["pools"] if keep(pool)]
    return request


def may_read_request(workload: Workload, access: Access) -> bool:
    """The request (command, args, env, variables) and its rendered templates: the submitter, members of its
    project other than `default` (which every user belongs to) and staff."""
    if access.is_staff or is_submitter(workload, access):
        return True
    if not access.signed_in or workload.project_id is None or workload.project_label == Project.DEFAULT_NAME:
        return False
    return Project.objects.visible_to(access.user).filter(pk=workload.project_id).exists()


def is_submitter(workload: Workload, access: Access) -> bool:
    return access.signed_in and workload.submitter_id is not None and workload.submitter_id == access.user.pk


def _shown_request(workload: Workload, access: Access, keep) -> dict[str, Any]:
    """The request's parts as this viewer may see them: nothing for those who may not read it; credential-looking
    env values masked for all but the submitter."""
    if not may_read_request(workload, access):
        return {"request_visible": False, "variables": {}, "request": {}, "pod_templates": {}}
    request = _request(workload, keep)
    variables = workload.variables
    templates = {pool: value for pool, value in (workload.templates or {}).items() if keep(pool)}
    if not is_submitter(workload, access):
        if "env" in request:
            request["env"] = podenv.mask_mapping(request["env"])
        variables = podenv.mask_mapping(variables)
        templates = {pool: {**value, "pod_template": podenv.mask_pod_template(value.get("pod_template"))}
                     if isinstance(value, dict) else value for pool, value in templates.items()}
    return {"request_visible": True, "variables": variables, "request": request, "pod_templates": templates}


def readable_request(workload: Workload, access: Access) -> dict[str, Any] | None:
    """The request as this viewer may read it (masked, pools they may not see left out), or None: what the
    workload page shows and what "Run again" fills the submit form with."""
    shown = _shown_request(workload, access, _visible(access, workload))
    return shown["request"] if shown["request_visible"] else None


def detail(workload: Workload, access: Access, events=None, now=None, fresh: bool = False) -> dict[str, Any]:
    """`fresh`: `workload` is the row a submission has just saved (answered as saved, with its `events`): no Job,
    pod or log archive can exist for it yet, so their two reads are skipped."""
    keep = _visible(access, workload)
    forecast = estimates.forecasts([workload], now).get(str(workload.id)) \
        if workload.status in (Status.PENDING, Status.WAITING) else None
    body = row(workload, access, forecast)
    body["estimates"] = estimates.shown(forecast, keep)["estimates"]
    shown = _shown_request(workload, access, keep)
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
        "request_visible": shown["request_visible"],
        "variables": shown["variables"],
        "request": shown["request"],
        "reasons": [r for r in workload.reasons or [] if keep(r.get("pool"))] if workload.status in WAITING else [],
        "placement": placed(run.pods) if body["pool"] and run else {},
        "planned_nodes": workload.placement if body["pool"] else {},
        "pod_templates": shown["pod_templates"],
        "attempt": workload.attempt,
        "exit_code": workload.exit_code,
        "stopping": workload.stop_status or None,
        "job": _job(workload, run) if body["pool"] else None,
        # Issue 43: a long-running kind's ready/desired replicas and status word, and (its submitter's and staff's
        # only) the address to open it at.
        "ready": _ready(workload, run) if body["pool"] else None,
        "status_word": status_word(workload.kind, workload.status, *(_counts(workload, run))),
        "link": None if fresh else links.link_for(access, workload),
        "attempts": [a for a in workload.attempts or [] if keep(a.get("pool") or None)],
        "replica_pods": [] if fresh else replica_pods(workload, keep),
        "events": [{"at": e.at, "status": e.status, "reason": e.reason,
                    "message": e.message if all(keep(p) for p in e.pools) else HIDDEN_MESSAGE}
                   for e in (events if events is not None else workload.events.all())],
    })
    return body


def idle_row(workload: Workload, access, now: datetime) -> dict:
    """One line of the idle list (page, CSV, API, CLI)."""
    figures = workload.utilization
    line = row(workload, access)
    return {"id": line["id"], "name": line["name"], "project": line["project"], "submitter": line["submitter"],
            "pool": line["pool"], "replicas": line["replicas"], "gpus": workload.gpu * workload.replicas,
            "average_percent": figures.average, "peak_percent": figures.peak, "idle_since": figures.idle_since,
            "idle_minutes": int((now - figures.idle_since).total_seconds() // 60), "measured_at": figures.measured_at}
