"""Usage intervals from what the cluster really ran (issue 27 point 1), observed from the sync's Pod rows
(bound, non-terminal pods; `pools.fleet.sync`) each time beat runs `scheduling.tasks.usage_rollup`.

Per backend, against `UsageWatermark.observed_at` (the sync time of the last picture observed):
- A new sync picture (`Backend.last_sync_at` later than the watermark) opens an interval for each pod not yet
  open, starting at that sync's time, and closes the open intervals of pods no longer listed at the watermark,
  the last time they were seen (`gone`, or `preempted` when their attempt ended by preemption). Pods on a
  node that left or went Unknown are closed at the watermark too (`node_lost`, truncated) and not reopened
  until their node is back. Still-open intervals are not written: they count up to the watermark.
- A backend whose sync went silent (older than OSMO_BACKEND_STALE_SECONDS) has every open interval closed at
  the watermark, marked `truncated` and `outage`: an outage never invents use (nothing is counted past the
  last picture) nor drops it (what was seen stays counted); a pod still there after the outage gets a new
  interval from the first picture that lists it again.
The same for each pool's GPUs on Ready nodes (`CapacityInterval`).

Attribution: a pod of one of our Jobs (its ManagedJob row names the workload) carries its workload's pool,
platform, project, department, submitter and priority; any other pod counts for the project whose namespace
it runs in (Project.namespace is unique), else "unattributed", in its node's first pool."""

from datetime import datetime

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from pools.fleet.usage import stale_after
from pools.inventory.status import READY, UNKNOWN
from pools.models import Backend, ManagedJob, Node, NodeMembership, Pod, Pool, Project
from pools.models.bulk import copy_values
from scheduling.models import CapacityInterval, EndReason, Status, UsageInterval, UsageWatermark, Workload

UNATTRIBUTED = "unattributed"
POD_FIELDS = ("uid", "namespace", "name", "node_name", "gpu", "cpu", "memory", "pool", "preemptible")


def observe(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    summary = {"opened": 0, "closed": 0}
    for backend in Backend.objects.all():
        opened, closed = observe_backend(backend, now)
        summary["opened"] += opened
        summary["closed"] += closed
    summary["capacity"] = observe_capacity(now)
    return summary


def _watermark(backend: Backend) -> UsageWatermark | None:
    return UsageWatermark.objects.select_for_update().filter(backend=backend).first()


def observe_backend(backend: Backend, now: datetime) -> tuple[int, int]:
    with transaction.atomic():
        mark = _watermark(backend)
        seen = backend.last_sync_at
        if seen is None:
            return 0, 0
        open_rows = UsageInterval.objects.filter(backend=backend, end__isnull=True)
        if now - seen > stale_after():  # the sync went silent: close what is open where it was last seen
            if mark is None:
                return 0, 0
            closed = open_rows.update(end=mark.observed_at, end_reason=EndReason.OUTAGE, truncated=True,
                                      changed_at=now)
            return 0, closed
        if mark is not None and seen <= mark.observed_at:
            return 0, 0  # no new picture since the last observation
        last = mark.observed_at if mark else seen
        nodes = dict(Node.objects.filter(backend=backend).values_list("name", "status"))
        lost = {name for name, status in nodes.items() if status == UNKNOWN}
        pods = {row["uid"]: row for row in Pod.objects.filter(backend=backend).exclude(node_name="")
                .values(*POD_FIELDS)}
        live = {uid: row for uid, row in pods.items() if row["node_name"] in nodes and row["node_name"] not in lost}
        open_now = dict(open_rows.values_list("pod_uid", "id"))
        closed = _close(open_now, live, pods, nodes, lost, last, now)
        opened = _open(backend, [row for uid, row in live.items() if uid not in open_now], seen, now)
        UsageWatermark.objects.update_or_create(backend=backend, defaults={"observed_at": seen})
    return opened, closed


def _close(open_now: dict, live: dict, pods: dict, nodes: dict, lost: set, last: datetime, now: datetime) -> int:
    ending = {uid: pk for uid, pk in open_now.items() if uid not in live}
    if not ending:
        return 0
    rows = UsageInterval.objects.filter(id__in=list(ending.values()))
    node_lost = [pk for uid, pk in ending.items()
                 if uid in pods and (pods[uid]["node_name"] in lost or pods[uid]["node_name"] not in nodes)]
    rows.filter(id__in=node_lost).update(end=last, end_reason=EndReason.NODE_LOST, truncated=True, changed_at=now)
    others = rows.exclude(id__in=node_lost)
    preempted = _preempted_ids(others)
    others.filter(id__in=preempted).update(end=last, end_reason=EndReason.PREEMPTED, changed_at=now)
    others.exclude(id__in=preempted).update(end=last, end_reason=EndReason.GONE, changed_at=now)
    return len(ending)


def _preempted_ids(rows) -> list[int]:
    """Intervals whose workload's attempt ended FAILED_PREEMPTED, or which is being preempted now."""
    ours = list(rows.exclude(workload="").values_list("id", "workload", "attempt"))
    if not ours:
        return []
    workloads = {str(pk): (status, attempts) for pk, status, attempts in
                 Workload.objects.filter(id__in={workload for _, workload, _ in ours})
                 .values_list("id", "status", "attempts")}
    found = []
    for pk, workload, attempt in ours:
        status, attempts = workloads.get(workload, ("", []))
        ended = {record.get("attempt"): record.get("status") for record in attempts}
        if ended.get(attempt) == Status.FAILED_PREEMPTED or status in (Status.PREEMPTING, Status.FAILED_PREEMPTED):
            found.append(pk)
    return found


def attribution(backend: Backend, pods: list[dict]) -> list[dict]:
    """The accounting facts of each pod: see the module's docstring. Three queries whatever the number of pods."""
    by_pod = {}
    namespaces = {pod["namespace"] for pod in pods}
    jobs = ManagedJob.objects.filter(backend=backend, namespace__in=namespaces).values_list(
        "namespace", "workload", "attempt", "pods")
    for namespace, workload, attempt, job_pods in jobs:
        for name in job_pods or {}:
            by_pod[(namespace, name)] = (workload, attempt)
    workloads = {str(row["id"]): row for row in Workload.objects.filter(
        id__in={workload for workload, _ in by_pod.values()}).values(
        "id", "project_name", "department_name", "submitter_name", "priority", "pool_name", "platform")}
    projects = {namespace: (name, department) for namespace, name, department in Project.objects.filter(
        namespace__in=namespaces).values_list("namespace", "name", "department__name")}
    node_pools = dict(Node.objects.filter(backend=backend, name__in={pod["node_name"] for pod in pods})
                      .values_list("name", "pool_names"))
    node_platforms = dict(Node.objects.filter(backend=backend, name__in={pod["node_name"] for pod in pods})
                          .values_list("name", "platform_names"))
    facts = []
    for pod in pods:
        workload_id, attempt = by_pod.get((pod["namespace"], pod["name"]), ("", None))
        workload = workloads.get(workload_id)
        if workload:
            facts.append({"pool": workload["pool_name"] or pod["pool"], "platform": workload["platform"],
                          "project": workload["project_name"], "department": workload["department_name"],
                          "user": workload["submitter_name"], "workload": workload_id, "attempt": attempt,
                          "priority": workload["priority"], "preemptible": pod["preemptible"], "ours": True})
            continue
        project, department = projects.get(pod["namespace"], (UNATTRIBUTED, ""))
        pools = node_pools.get(pod["node_name"]) or ["default"]
        platforms = [name for name in node_platforms.get(pod["node_name"]) or [] if name.startswith(f"{pools[0]}/")]
        facts.append({"pool": pools[0], "platform": platforms[0].split("/", 1)[1] if platforms else "",
                      "project": project, "department": department, "user": "", "workload": "", "attempt": None,
                      "priority": "", "preemptible": False, "ours": False})
    return facts


OPEN_FIELDS = ("backend_id", "pod_uid", "namespace", "pod_name", "node_name", "gpu", "cpu", "memory", "start",
               "changed_at", "pool", "platform", "project", "department", "user", "workload", "attempt", "priority",
               "preemptible", "ours")


def _open(backend: Backend, pods: list[dict], seen: datetime, now: datetime) -> int:
    if not pods:
        return 0
    # COPY on PostgreSQL: the first picture of a large cluster opens every pod's interval at once.
    return copy_values(UsageInterval, OPEN_FIELDS, (
        (backend.pk, pod["uid"], pod["namespace"], pod["name"], pod["node_name"], pod["gpu"], pod["cpu"],
         pod["memory"], seen, now, *facts.values())
        for pod, facts in zip(pods, attribution(backend, pods), strict=True)))


def observe_capacity(now: datetime) -> int:
    """Per pool, its GPUs on Ready nodes, as intervals that change when the figure does."""
    changed = 0
    with transaction.atomic():
        marks = dict(UsageWatermark.objects.values_list("backend_id", "observed_at"))
        gpus = dict(NodeMembership.objects.filter(node__status=READY).values("pool_id")
                    .annotate(gpus=Sum("node__gpu_total")).values_list("pool_id", "gpus"))
        opened = {row.pool: row for row in CapacityInterval.objects.select_for_update().filter(end__isnull=True)}
        for pool in Pool.objects.select_related("backend"):
            seen, current = pool.backend.last_sync_at, opened.get(pool.name)
            mark = marks.get(pool.backend_id)
            if seen is None or mark is None:
                continue
            if now - seen > stale_after():
                if current is not None:
                    CapacityInterval.objects.filter(pk=current.pk).update(end=mark, truncated=True, changed_at=now)
                    changed += 1
                continue
            figure = gpus.get(pool.pk) or 0
            if current is not None and current.gpus == figure:
                continue
            if current is not None:
                CapacityInterval.objects.filter(pk=current.pk).update(end=max(mark, current.start), changed_at=now)
            CapacityInterval.objects.create(backend=pool.backend, pool=pool.name, gpus=figure, start=mark,
                                            changed_at=now)
            changed += 1
    return changed

