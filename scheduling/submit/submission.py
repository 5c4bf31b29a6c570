"""Submitting and cancelling workloads: every door (the API, OSMO's workflow endpoint, the gpuctl file,
the CLI) comes through here. A submission runs the pipeline for each candidate pool; it is refused
(nothing saved) only when every candidate refuses it, and the refusal lists each one's reason.
Accepted work is a PENDING row and an event; the admission cycle is asked to run once the row commits."""

import json
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.engine import ConfigError
from pools.models import Profile, Project, audit, inserts
from pools.models.quotas import default_project_name
from pools.models.visibility import Access, access_for
from scheduling.decisions import admission as pure
from scheduling.decisions import dependencies, hints
from scheduling.models import ALIVE, Source, Status, Workload, WorkloadEvent
from scheduling.run import attempts, task_data
from scheduling.run.outbox import request_cycle
from scheduling.specs import formats
from scheduling.specs.requests import WorkloadRequest
from scheduling.submit import credentials, limits, pipeline, reads, rollout, workflows

HIDDEN_POOL = "(a pool you may not see)"
HIDDEN_VERDICT = "One of the project's default pools, which you may not use."


def shown_verdicts(access: Access, request: WorkloadRequest, verdicts: list[pipeline.Verdict]
                   ) -> list[pipeline.Verdict]:
    """The verdicts as the caller may read them: a candidate that came from the project's (or department's)
    default list and whose pool the caller may not see is told as such, unnamed (as the lists hide it,
    `Access.visible_pool_names`). Pools the request named are the caller's words: shown. No query: the pipeline's
    access step refuses exactly the pools the caller may not see (`ACCESS`), and only those."""
    if access.is_staff:  # staff see every name, a missing pool's too
        return verdicts
    named = set(request.pools or [])
    return [pipeline.Verdict(HIDDEN_POOL, step="access", code="ACCESS", message=HIDDEN_VERDICT)
            if v.code == "ACCESS" and v.pool not in named else v for v in verdicts]


class SubmissionRefused(ConfigError):
    """No candidate pool can ever take the workload. `forbidden`: every refusal was about access."""

    def __init__(self, message: str, verdicts: list[pipeline.Verdict], field: str = "pools"):
        super().__init__(message, field=field)
        self.verdicts = verdicts
        self.forbidden = bool(verdicts) and all(v.step == "access" for v in verdicts)

    def as_dict(self) -> dict[str, Any]:
        return {"detail": self.message, "field": self.field, "candidates": [v.as_dict() for v in self.verdicts]}


@dataclass
class Submitted:
    request: WorkloadRequest
    project: Project
    verdicts: list[pipeline.Verdict]
    workload: Workload | None = None  # None for a dry run
    preview: dict[str, Any] = field(default_factory=dict)  # dry run: what admission would do now
    shown: list[pipeline.Verdict] = field(default_factory=list)  # the verdicts as the caller may read them

    @property
    def accepted(self) -> list[pipeline.Verdict]:
        return [v for v in self.verdicts if v.accepted]

    def stored(self) -> dict[str, Any]:
        """The columns `save` writes from the request: what `OSMO_WORKLOAD_MAX_STORED_BYTES` bounds."""
        return {"request": self.request.document(), "variables": self.accepted[0].variables,
                "templates": {v.pool: {"platform": v.platform, "pod_template": v.pod_template} for v in self.accepted}}


class TooLargeToStore(ConfigError):
    def __init__(self, message: str):
        super().__init__(message, field="request")
        self.extra = {"limit": "OSMO_WORKLOAD_MAX_STORED_BYTES"}


def check_stored_size(submitted: Submitted, prefix: str = "") -> None:
    """A stored request has a size limit, so that no one row is heavy to read (lists never read it at all)."""
    limit = settings.OSMO_WORKLOAD_MAX_STORED_BYTES
    size = sum(len(json.dumps(value, default=str)) for value in submitted.stored().values())
    if size > limit:
        raise TooLargeToStore(f"{prefix}request: the request, its variables and its rendered pod templates take "
                              f"{size:,} bytes, over the limit OSMO_WORKLOAD_MAX_STORED_BYTES = {limit:,} bytes")


def default_project(access: Access) -> str:
    return default_project_name(access)


def _project(access: Access, name: str | None) -> Project:
    name = name or default_project(access)
    project = reads.project(access, name)
    if project is None:
        raise ConfigError(f"Project {name} does not exist or you are not a member of it (GET /api/projects/ lists "
                          "yours).", field="project")
    return project


def default_pool(access: Access) -> str | None:
    """The pool the user chose for submissions that name none (`/api/profile/settings`, OSMO's profile pool)."""
    if not access.signed_in:
        return None
    return Profile.objects.filter(user=access.user).values_list("default_pool__name", flat=True).first()


def candidate_pools(request: WorkloadRequest, project: Project, chosen: str | None = None) -> list[str]:
    """The request's pools, else the user's default pool (`chosen`), else the project's default list, else its
    department's, else `default`."""
    return list(request.pools or ([chosen] if chosen else None) or project.default_node_pools
                or project.department.default_node_pools or ["default"])


def evaluate(access: Access, request: WorkloadRequest, source: str = Source.API, field: str = ""
             ) -> tuple[Project, list[pipeline.Verdict]]:
    """Each candidate pool's verdict; refusal hints in the syntax of the door `source`."""
    project = _project(access, request.project)
    limits.check_request(request, project, field)
    credentials.check_uses(access, request, field)
    pools = candidate_pools(request, project, None if request.pools else default_pool(access))
    context = pipeline.load_context(access, project, pools)
    verdicts = task_data.with_stores([pipeline.run(context, request, pool) for pool in pools], request)
    return project, [v if v.accepted else replace(v, message=hints.for_door(v.message, source)) for v in verdicts]


def refusal(access: Access, request: WorkloadRequest, verdicts: list[pipeline.Verdict], prefix: str = ""
            ) -> SubmissionRefused:
    verdicts = shown_verdicts(access, request, verdicts)
    lines = "; ".join(f"{v.pool}: {v.message}" for v in verdicts)
    # No candidate has a node of the GPU type asked for: the field to fix is that one, not the pools.
    field = "gpu_type" if verdicts and all(v.code == "GPU_TYPE" for v in verdicts) else "pools"
    return SubmissionRefused(f"{prefix}No candidate pool can take this workload. {lines}", verdicts, field)


def submit(actor, data: Any, *, source: str = Source.API, dry_run: bool = False, field: str = "") -> Submitted:
    """Validate `data` (a request body, or a WorkloadRequest) for `actor` (a request or a user) and queue it.
    Raises ConfigError (a 400 naming the field) or SubmissionRefused."""
    access = access_for(actor)
    request = data if isinstance(data, WorkloadRequest) else WorkloadRequest.parse(data, field)
    if request.gang:  # one member alone would wait for the others forever
        where = f"{field}.gang" if field else "gang"
        raise ConfigError(f"{where}: the members of a task group are made by the OSMO door from a workflow file "
                          "whose tasks differ in image or resource; submit the file (POST /api/pool/{pool}/workflow)",
                          field=where)
    for index, item in enumerate(request.inputs):
        if item.task and not item.group:  # the group is resolved from an OSMO workflow file's tasks
            where = f"{field}.inputs[{index}].task" if field else f"inputs[{index}].task"
            raise ConfigError(f"{where}: another task's output is an input of an OSMO workflow's task only; submit "
                              "the workflow file (POST /api/pool/{pool}/workflow)", field=where)
    project, verdicts = evaluate(access, request, source, field)
    running = rollout.existing(access, project, request)  # an inference of that name: rolled, not added
    if running is None:
        limits.check_live(access.user if access.signed_in else None, project,
                          counts={"user": project.live_user, "project": project.live_project})
    if not any(v.accepted for v in verdicts):
        raise refusal(access, request, verdicts)
    result = Submitted(request, project, verdicts, shown=shown_verdicts(access, request, verdicts))
    check_stored_size(result)
    if dry_run:
        result.preview = preview(result)
        return result
    result.workload = save(access, result, source) if running is None else rollout.roll(access, result, running,
                                                                                         source)
    return result


def evaluate_workflow(access: Access, workflow: "formats.Workflow", source: str = Source.OSMO) -> list[Submitted]:
    """Each task group of an OSMO workflow through the pipeline; refused whole (SubmissionRefused, ConfigError)
    when any group is, as OSMO does. The workflow path and the submit form's pasted workflow both come here."""
    evaluated = []
    for index, group in enumerate(workflow.groups):
        project, verdicts = evaluate(access, group.request, source, f"workflow.groups[{index}]")
        if index == 0:
            limits.check("tasks_per_workflow", len(workflow.groups), project, "workflow.tasks")
            limits.check_live(access.user if access.signed_in else None, project, len(workflow.groups))
        if not any(v.accepted for v in verdicts):
            raise refusal(access, group.request, verdicts, prefix=f"Group {group.group}: ")
        evaluated.append(Submitted(group.request, project, verdicts,
                                   shown=shown_verdicts(access, group.request, verdicts)))
        check_stored_size(evaluated[-1], prefix=f"Group {group.group}: ")
    return evaluated


def save_workflow(access: Access, workflow: "formats.Workflow", evaluated: list[Submitted],
                  source: str = Source.OSMO, templated_spec: str = "") -> str:
    """Saves every group of an evaluated workflow under the caller's next `<name>-<n>`, with the file it runs
    (and, when it was templated, the file as written), in one transaction."""
    with transaction.atomic():
        name = workflows.allocate(access, workflow.name, workflow.rendered, templated_spec)
        for item in evaluated:
            item.workload = save(access, item, source, workflow=name)
    return name


def save(access: Access, submitted: Submitted, source: str, workflow: str = "") -> Workload:
    request, accepted = submitted.request, submitted.accepted
    first = accepted[0]
    gpu, cpu, memory, storage = first.per_replica
    now = timezone.now()
    user = access.user if access.signed_in else None
    status, reasons = Status.PENDING, [{"pool": v.pool, "code": "SUBMITTED", "message": "Waiting for the next "
                                        "admission cycle.", "details": {}} for v in accepted]
    if request.after:  # OSMO's WAITING: not queued until the groups it takes inputs from complete
        status, reasons = Status.WAITING, [dependencies.waiting_reason(request.after)]
    workload = Workload(
        name=request.name, workflow=workflow or request.workflow, group=request.group, project=submitted.project,
        submitter=user, submitter_name=user.get_username() if user else "", source=source, kind=request.kind.value,
        priority=request.priority.value, pools=[v.pool for v in accepted],
        replicas=request.replicas, gpu=gpu, cpu=cpu, memory=memory, storage=storage,
        exec_timeout=first.exec_timeout, queue_timeout=first.queue_timeout, exit_actions=request.exit_actions,
        topology=[t.model_dump() for t in request.topology], **submitted.stored(),
        reasons=reasons, status=status, submitted_at=now)
    refused = [v for v in submitted.verdicts if not v.accepted]
    with transaction.atomic():
        if not workflow and request.workflow:
            workflows.join(access, request.workflow)
        message = f"Submitted by {workload.submitter_name or 'an anonymous caller'} via {source}; candidate pools: " \
                  f"{', '.join(workload.pools)}."
        if refused:
            message += " Refused by " + "; ".join(f"{v.pool} ({v.message})" for v in refused)
        if status == Status.WAITING:
            message += f" {reasons[0]['message']}"
        event = WorkloadEvent(workload=workload, at=now, status=status, reason="SUBMITTED", message=message,
                              pools=[v.pool for v in submitted.verdicts])
        inserts.insert_rows(workload, event)  # one round trip
        workload.first_events = [event]  # the answer shows them without reading them back
        audit.record("workload", f"workload/{workload.pk}", "submit",
                     f"{workload.name} in project {submitted.project.name} via {source}; candidate pools: "
                     f"{', '.join(workload.pools)}", actor=user)
        transaction.on_commit(request_cycle, robust=True)
    return workload


def preview(submitted: Submitted) -> dict[str, Any]:
    """What a cycle run now would do with this workload alone, on top of what is already admitted."""
    from scheduling.run import snapshot

    loaded = snapshot.load()
    gpu, cpu, memory, _storage = submitted.accepted[0].per_replica
    request = submitted.request
    workload = pure.Workload("dry-run", submitted.project.name, submitted.project.department.name,
                             (gpu * 100, cpu, memory), request.replicas, request.priority.preemptible,
                             request.priority.rank, timezone.now().timestamp(),
                             [(v.pool, v.platform) for v in submitted.accepted], request.gpu_type)
    snapshot.add_fair_shares(loaded, [workload])
    decision = pure.decide(loaded.snapshot, [workload])
    admitted = decision.admitted.get("dry-run")
    if admitted is not None:
        return {"would_admit": True, "pool": admitted.pool, "platform": admitted.platform,
                "placement": admitted.placement, "reasons": []}
    return {"would_admit": False, "reasons": [r.as_dict() for r in decision.reasons.get("dry-run", [])],
            "would_preempt": sorted(decision.preempt)}


def cancel(actor, workload: Workload, message: str = "", *, operator: str = "") -> bool:
    """Cancel a live workload: its submitter or staff (`actor`), or an operator at the CLI (`operator`, their
    name). Work not yet dispatched ends FAILED_CANCELED at once; a dispatched one once its Job is deleted (the stop
    message, `scheduling.run.stopping`). Returns False when it had already finished or is already stopping."""
    if operator:
        who = f"{operator} (operator)"
    else:
        access = access_for(actor)
        if not (access.is_staff or (workload.submitter_id is not None and access.signed_in
                                    and workload.submitter_id == access.user.pk)):
            raise PermissionError("Only the workload's submitter or an admin may cancel it.")
        who = access.user.get_username()
    now = timezone.now()
    with transaction.atomic():
        # Locked: a dispatch in flight finishes first, so a Job it created is seen here and deleted.
        locked = Workload.objects.select_for_update(of=("self",)).select_related("pool").filter(
            pk=workload.pk, status__in=ALIVE).first()
        if locked is None or locked.stop_status:
            return False
        attempts.request_stop(locked, Status.FAILED_CANCELED, "CANCELED",
                              f"Canceled by {who}" + (f": {message}" if message else "."), now=now)
        audit.record("workload", f"workload/{locked.pk}", "cancel", f"{locked.name} ({locked.status})"
                     + (f": {message}" if message else ""), actor=operator or None)
    workload.refresh_from_db()
    return True
