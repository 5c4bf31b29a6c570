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

Times (issue 38 point 2): a pod of one of our Jobs is counted from what the cluster says of it (its ManagedJob row's
pod facts: the first container's start, else `status.startTime`, to the last container's finish, else the time the
sync saw it deleted), not from when we looked: its interval opens at its start and closes at its finish, and a pod
that started and ended between two observations gets its closed interval from those times. Observation fills the
gaps only: the pods we did not submit, and the ends the cluster gives no time for.

Attribution: a pod of one of our Jobs (its ManagedJob row names the workload) carries its workload's pool,
platform, project, department, submitter and priority, read through the workload's relations while they exist
(`scheduling.models.accounting_names`); any other pod counts for the project whose namespace it runs in
(Project.namespace is unique), else "unattributed", in its node's first pool."""

from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from pools.fleet.clusters import cluster_ids, owners
from pools.fleet.usage import stale_after
from pools.inventory.status import READY, UNKNOWN
from pools.models import Backend, ManagedJob, Node, NodeMembership, Pod, Pool, Project
from pools.models.bulk import copy_values
from scheduling.models import (
    CapacityInterval,
    EndReason,
    Status,
    UsageInterval,
    UsageWatermark,
    Workload,
    accounting_names,
)

UNATTRIBUTED = "unattributed"
POD_FIELDS = ("uid", "namespace", "name", "node_name", "gpu", "cpu", "memory", "pool", "preemptible")


def observe(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    summary = {"opened": 0, "closed": 0}
    owner = owners()
    for backend in Backend.objects.all():
        if owner.get(backend.pk, backend.pk) != backend.pk:
            continue  # its cluster's pods are the rows of the backend that owns them, observed with its Jobs
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
        times = cluster_times(backend, mark.observed_at if mark else None)
        closed = _close(open_now, live, pods, nodes, lost, last, now, times, seen)
        opening = [row for uid, row in live.items() if uid not in open_now]
        counted = _counted(backend, {row["uid"] for row in opening} | set(times))
        opened = _open(backend, opening, seen, now, times, counted)
        opened += _between(backend, times, counted | set(live), nodes, seen, now)
        UsageWatermark.objects.update_or_create(backend=backend, defaults={"observed_at": seen})
    return opened, closed


# ManagedJob rows changed this long before the last observation are read again (their batch may have committed
# after it): reading a pod twice is harmless, its uid already has its interval.
LOOKBACK = timedelta(minutes=10)


def _when(value: str | None) -> datetime | None:
    moment = parse_datetime(value) if value else None
    return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=UTC)


def cluster_times(backend: Backend, since: datetime | None) -> dict[str, dict]:
    """{pod uid: {"namespace", "name", "node", "start", "end"}} for the pods of our Jobs that the cluster gave a
    start for, from the ManagedJob rows changed since `since` (all of them at the first observation); `end` is the
    last container's finish, else when the sync saw the pod deleted, else None (still running)."""
    rows = ManagedJob.objects.filter(backend_id__in=cluster_ids(backend.pk))  # the Jobs of every backend sharing it
    if since is not None:
        rows = rows.filter(updated_at__gte=since - LOOKBACK)
    found = {}
    for namespace, job_pods in rows.values_list("namespace", "pods").iterator(chunk_size=1000):
        for name, facts in (job_pods or {}).items():
            start = _when(facts.get("started_at"))
            if not facts.get("uid") or start is None or not facts.get("node"):
                continue
            end = _when(facts.get("finished_at")) or (_when(facts.get("deleted_at")) if facts.get("deleted")
                                                       else None)
            found[facts["uid"]] = {"namespace": namespace, "name": name, "node": facts["node"], "start": start,
                                   "end": end}
    return found


def _counted(backend: Backend, uids: set[str]) -> set[str]:
    """The uids among `uids` that already have an interval (open or closed)."""
    if not uids:
        return set()
    return set(UsageInterval.objects.filter(backend=backend, pod_uid__in=list(uids))
               .values_list("pod_uid", flat=True).distinct())


def _close(open_now: dict, live: dict, pods: dict, nodes: dict, lost: set, last: datetime, now: datetime,
           times: dict, seen: datetime) -> int:
    ending = {uid: pk for uid, pk in open_now.items() if uid not in live}
    if not ending:
        return 0
    rows = UsageInterval.objects.filter(id__in=list(ending.values()))
    node_lost = [pk for uid, pk in ending.items()
                 if uid in pods and (pods[uid]["node_name"] in lost or pods[uid]["node_name"] not in nodes)]
    rows.filter(id__in=node_lost).update(end=last, end_reason=EndReason.NODE_LOST, truncated=True, changed_at=now)
    others = rows.exclude(id__in=node_lost)
    preempted = set(_preempted_ids(others))
    # Where the cluster says when the pod ended, that is its end (never before its start nor after the picture
    # that no longer lists it); else the last picture that listed it.
    ends = {uid: times[uid]["end"] for uid in ending if times.get(uid, {}).get("end")}
    # One UPDATE per distinct (end, reason): the pods the cluster gave no end for share the last picture's.
    groups: dict[tuple[datetime, str], list[int]] = {}
    for pk, uid, start in others.values_list("id", "pod_uid", "start"):
        end = max(start, min(ends[uid], seen)) if uid in ends else max(start, last)
        groups.setdefault((end, EndReason.PREEMPTED if pk in preempted else EndReason.GONE), []).append(pk)
    for (end, reason), pks in groups.items():
        UsageInterval.objects.filter(id__in=pks).update(end=end, end_reason=reason, changed_at=now)
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


def _between(backend: Backend, times: dict, counted: set[str], nodes: dict, seen: datetime, now: datetime) -> int:
    """Pods of ours that started and ended between two observations (no picture listed them): one closed interval
    each, from the cluster's times."""
    ended = [(uid, facts) for uid, facts in times.items() if uid not in counted and facts["end"] is not None]
    if not ended:
        return 0
    pods = [{"uid": uid, "namespace": facts["namespace"], "name": facts["name"], "node_name": facts["node"],
             "gpu": 0, "cpu": 0, "memory": 0, "pool": "", "preemptible": False} for uid, facts in ended]
    _requests(backend, pods)
    rows = []
    for pod, facts, (uid, times_of) in zip(pods, attribution(backend, pods), ended, strict=True):
        end = max(times_of["start"], min(times_of["end"], seen))
        rows.append(UsageInterval(
            backend=backend, pod_uid=uid, namespace=pod["namespace"], pod_name=pod["name"],
            node_name=pod["node_name"], gpu=pod["gpu"], cpu=pod["cpu"], memory=pod["memory"],
            start=min(times_of["start"], end), end=end, end_reason=EndReason.GONE, changed_at=now, **facts))
    created = UsageInterval.objects.bulk_create(rows, batch_size=1000)
    preempted = _preempted_ids(UsageInterval.objects.filter(id__in=[row.id for row in created]))
    UsageInterval.objects.filter(id__in=preempted).update(end_reason=EndReason.PREEMPTED)
    return len(created)


def _requests(backend: Backend, pods: list[dict]) -> None:
    """A pod no picture listed has no Pod row: its requests are its workload's, per replica (one query)."""
    jobs = {(ns, name): workload for ns, workload, job_pods in ManagedJob.objects.filter(
        backend_id__in=cluster_ids(backend.pk), namespace__in={pod["namespace"] for pod in pods}).values_list(
        "namespace", "workload", "pods") for name in (job_pods or {})}
    requests = {str(pk): (gpu, cpu, memory, priority) for pk, gpu, cpu, memory, priority in Workload.objects.filter(
        id__in=set(jobs.values())).values_list("id", "gpu", "cpu", "memory", "priority")}
    for pod in pods:
        gpu, cpu, memory, priority = requests.get(jobs.get((pod["namespace"], pod["name"]), ""), (0, 0, 0, ""))
        pod.update(gpu=gpu, cpu=cpu, memory=memory, preemptible=priority == "low")


def attribution(backend: Backend, pods: list[dict]) -> list[dict]:
    """The accounting facts of each pod: see the module's docstring. Three queries whatever the number of pods."""
    by_pod = {}
    namespaces = {pod["namespace"] for pod in pods}
    jobs = ManagedJob.objects.filter(backend_id__in=cluster_ids(backend.pk), namespace__in=namespaces).values_list(
        "namespace", "workload", "attempt", "pods")
    for namespace, workload, attempt, job_pods in jobs:
        for name in job_pods or {}:
            by_pod[(namespace, name)] = (workload, attempt)
    workloads = {str(row["id"]): row for row in Workload.objects.filter(
        id__in={workload for workload, _ in by_pod.values()}).annotate(**accounting_names()).values(
        "id", "charged_project", "charged_department", "charged_user", "priority", "charged_pool", "platform")}
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
            facts.append({"pool": workload["charged_pool"] or pod["pool"], "platform": workload["platform"],
                          "project": workload["charged_project"] or "",
                          "department": workload["charged_department"] or "",
                          "user": workload["charged_user"] or "", "workload": workload_id, "attempt": attempt,
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


def _open(backend: Backend, pods: list[dict], seen: datetime, now: datetime, times: dict, counted: set[str]) -> int:
    """An interval for each pod listed and not open: from its start as the cluster says it (its first interval),
    else from the picture that first lists it (a pod we did not submit, or one seen again after an outage)."""
    if not pods:
        return 0

    def start(pod: dict) -> datetime:
        told = times.get(pod["uid"], {}).get("start")
        return min(told, seen) if told is not None and pod["uid"] not in counted else seen

    # COPY on PostgreSQL: the first picture of a large cluster opens every pod's interval at once.
    return copy_values(UsageInterval, OPEN_FIELDS, (
        (backend.pk, pod["uid"], pod["namespace"], pod["name"], pod["node_name"], pod["gpu"], pod["cpu"],
         pod["memory"], start(pod), now, *facts.values())
        for pod, facts in zip(pods, attribution(backend, pods), strict=True)))


def observe_capacity(now: datetime) -> int:
    """Per pool, its GPUs on Ready nodes, as intervals that change when the figure does."""
    changed = 0
    with transaction.atomic():
        marks = dict(UsageWatermark.objects.values_list("backend_id", "observed_at"))
        owner = owners()
        gpus = dict(NodeMembership.objects.filter(node__status=READY).values("pool_id")
                    .annotate(gpus=Sum("node__gpu_total")).values_list("pool_id", "gpus"))
        opened = {row.pool: row for row in CapacityInterval.objects.select_for_update().filter(end__isnull=True)}
        for pool in Pool.objects.select_related("backend"):
            seen, current = pool.backend.last_sync_at, opened.get(pool.name)
            mark = marks.get(owner.get(pool.backend_id, pool.backend_id))  # observed with its cluster's owner
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

