"""Submitting an inference again under the same name (issue 43): the live workload of that name, the caller's own
in that project, takes the new request in place and its Deployment rolls to it (`scheduling.run.workload_objects
.roll`), rather than a second service starting beside it.

In place, so that the quota it holds is the same all the while: the row keeps its pool, its plan and its
admission, and counts replicas x request before, during and after the roll (the Deployment never surges,
`scheduling.specs.deployments`). What may change: the image, command, args, env and the like, and the replicas
downwards (the quota freed is free at the next admission cycle). What may not: more replicas or a larger request
per replica, which need an admission of their own (a 400 naming `replicas` or `resources`: stop it and submit
again), nor a pool the new request no longer allows."""

from django.db import transaction
from django.utils import timezone

from pools.engine import ConfigError
from pools.models import audit
from scheduling.models import ALIVE, Kind, Status, Workload, WorkloadEvent
from scheduling.run.outbox import dispatch_on_commit


def existing(access, project, request) -> Workload | None:
    """The caller's live inference of that name in the project, if any."""
    if request.kind != Kind.INFERENCE or not access.signed_in:
        return None
    return (Workload.objects.filter(kind=Kind.INFERENCE, name=request.name, project=project, submitter=access.user,
                                    status__in=ALIVE).order_by("-submitted_at").first())


def roll(access, submitted, found: Workload, source: str) -> Workload:
    request = submitted.request
    now = timezone.now()
    with transaction.atomic():
        workload = Workload.objects.select_for_update(of=("self",)).select_related("pool").get(pk=found.pk)
        if workload.status not in ALIVE:
            raise ConfigError(f"name: the inference {workload.name} ended while this was submitted; submit again",
                              field="name")
        verdicts = {v.pool: v for v in submitted.accepted}
        pool = workload.pool.name if workload.pool_id else None
        verdict = verdicts.get(pool) if pool else submitted.accepted[0]
        if verdict is None:
            raise ConfigError(f"pools: the running inference {workload.name} is in pool {pool}, which this request "
                              "does not allow; name it in pools, or stop the inference and submit again",
                              field="pools")
        if request.replicas > workload.replicas:
            raise ConfigError(f"replicas: the inference {workload.name} runs {workload.replicas} replica(s); a "
                              "resubmission rolls it to a new version and may scale it down, not up (more replicas "
                              "need an admission: stop it and submit again)", field="replicas")
        if tuple(verdict.per_replica) != (workload.gpu, workload.cpu, workload.memory, workload.storage):
            raise ConfigError(f"resources: the inference {workload.name} holds its quota for its current request per "
                              "replica; a resubmission keeps it (a different one needs an admission: stop it and "
                              "submit again)", field="resources")
        stored = submitted.stored()
        replicas_before = workload.replicas
        dispatched = workload.status in (Status.SCHEDULING, Status.RUNNING)
        status = Status.ADMITTED if dispatched else workload.status
        Workload.objects.filter(pk=workload.pk).update(
            request=stored["request"], variables=stored["variables"],
            templates={**workload.templates, **stored["templates"]}, replicas=request.replicas, status=status,
            updated_at=now)
        image = request.image
        message = (f"Submitted again via {source}: rolling to image {image}"
                   + (f", {replicas_before} -> {request.replicas} replicas" if request.replicas != replicas_before
                      else "") + ".")
        WorkloadEvent.objects.create(workload=workload, at=now, status=status, reason="RESUBMITTED", message=message,
                                     pools=[pool] if pool else [])
        audit.record("workload", f"workload/{workload.pk}", "resubmit", f"{workload.name}: {message}",
                     actor=access.user)
        if dispatched:
            dispatch_on_commit([workload.pk])
    workload.refresh_from_db()
    workload.first_events = list(workload.events.order_by("at", "id"))
    return workload
