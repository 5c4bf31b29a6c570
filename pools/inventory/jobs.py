"""What the cluster says about the Jobs we manage and their pods (pure: no Django). The sync stores these facts
per Job (`pools.models.ManagedJob`); `scheduling.decisions.lifecycle` reads them to move each workload. Only what a
workload's status needs is kept: counts and the finishing condition of the Job, and per pod its node, phase,
exit code and why it waits or failed."""

from collections.abc import Mapping
from typing import Any

MANAGED_LABEL, MANAGED_VALUE = "managed-by", "osmo-pools"  # <prefix>managed-by=osmo-pools on our Jobs and pods
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def workload_of(obj: Mapping[str, Any], prefix: str) -> str:
    """The `<prefix>workload` label of a Job or pod ("" when it is not one of ours)."""
    return str(_mapping(_mapping(obj.get("metadata")).get("labels")).get(f"{prefix}workload") or "")


def job_facts(job: Mapping[str, Any]) -> dict[str, Any]:
    status = _mapping(job.get("status"))
    finished, reason, message = "", "", ""
    for condition in status.get("conditions") or []:
        condition = _mapping(condition)
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            finished = str(condition["type"])
            reason, message = str(condition.get("reason") or ""), str(condition.get("message") or "")
    return {"active": int(status.get("active") or 0), "ready": int(status.get("ready") or 0),
            "succeeded": int(status.get("succeeded") or 0), "failed": int(status.get("failed") or 0),
            "finished": finished, "reason": reason, "message": message}


def pod_run_facts(pod: Mapping[str, Any], *, seen_at: str, before: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A pod's facts. `image_pull_since` is when we first saw it failing to pull its image (kept from `before`
    while it still fails), since the kubelet's waiting state carries no time; `unschedulable_since` (only while
    PodScheduled is False for reason Unschedulable) is when the kube-scheduler last found no node for it; `ready`
    is kubectl's: Running with its Ready condition True (every container ready)."""
    metadata, spec, status = (_mapping(pod.get(key)) for key in ("metadata", "spec", "status"))
    facts: dict[str, Any] = {"node": str(spec.get("nodeName") or ""), "ip": str(status.get("podIP") or ""),
                             "phase": str(status.get("phase") or "Pending"),
                             "reason": str(status.get("reason") or ""), "message": str(status.get("message") or ""),
                             "ready": False, "exit_code": None, "waiting": "", "waiting_message": "",
                             "unschedulable": "",
                             "disrupted": "", "image_pull_since": None,
                             "index": str(_mapping(metadata.get("annotations")).get(
                                 "batch.kubernetes.io/job-completion-index") or "")}
    for condition in status.get("conditions") or []:
        condition = _mapping(condition)
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            facts["unschedulable"] = str(condition.get("message") or condition.get("reason") or "")
            if condition.get("reason") == "Unschedulable":
                # Since when the kube-scheduler finds no node: the condition's time, else when we first saw it.
                facts["unschedulable_since"] = (str(condition.get("lastTransitionTime") or "")
                                                or (before or {}).get("unschedulable_since") or seen_at)
        if condition.get("type") == "Ready":
            facts["ready"] = facts["phase"] == "Running" and condition.get("status") == "True"
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            facts["disrupted"] = str(condition.get("reason") or "DisruptionTarget")
    for container in status.get("containerStatuses") or []:
        state = _mapping(_mapping(container).get("state"))
        terminated, waiting = _mapping(state.get("terminated")), _mapping(state.get("waiting"))
        if terminated and terminated.get("exitCode") is not None:
            code = int(terminated["exitCode"])
            # The first non-zero code tells why the attempt failed; 0 only when every container ended well.
            if facts["exit_code"] in (None, 0):
                facts["exit_code"] = code
        if waiting and not facts["waiting"]:
            facts["waiting"] = str(waiting.get("reason") or "")
            facts["waiting_message"] = str(waiting.get("message") or "")
    facts.update(run_times(metadata, status))
    if facts["waiting"] in IMAGE_PULL_REASONS:
        facts["image_pull_since"] = (before or {}).get("image_pull_since") or seen_at
    if metadata.get("deletionTimestamp"):
        facts["deleting"] = True
    return facts


def run_times(metadata: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, str]:
    """When the pod held its node, as the cluster says: `started_at`, its first container's start (else the
    kubelet's `status.startTime`), and `finished_at`, once every container has terminated (or the pod's phase is
    final), the last container's finish; "" where the cluster gives no time. `uid` names the pod across renames
    of nothing: usage keeps one interval per uid."""
    starts, finishes, running = [], [], False
    for container in status.get("containerStatuses") or []:
        state = _mapping(_mapping(container).get("state"))
        if state.get("running"):
            running = True
        for part in (_mapping(state.get("running")), _mapping(state.get("terminated"))):
            if part.get("startedAt"):
                starts.append(str(part["startedAt"]))
        if _mapping(state.get("terminated")).get("finishedAt"):
            finishes.append(str(state["terminated"]["finishedAt"]))
        elif not state.get("terminated"):
            running = True
    final = str(status.get("phase") or "") in ("Succeeded", "Failed")
    return {"uid": str(metadata.get("uid") or ""),
            "started_at": min(starts) if starts else str(status.get("startTime") or ""),
            "finished_at": max(finishes) if finishes and (final or not running) else ""}


def job_name_of(pod: Mapping[str, Any]) -> str:
    """The object of ours a pod belongs to: its Job (the Job controller's labels, else its owner), or the
    StatefulSet or Deployment of a long-running workload (issue 43): a StatefulSet owns its pods; a Deployment's
    pods are owned by its ReplicaSet `<deployment>-<pod-template-hash>`."""
    labels = _mapping(_mapping(pod.get("metadata")).get("labels"))
    for key in JOB_NAME_LABELS:
        if labels.get(key):
            return str(labels[key])
    for owner in _mapping(pod.get("metadata")).get("ownerReferences") or []:
        owner = _mapping(owner)
        name = str(owner.get("name") or "")
        if owner.get("kind") in ("Job", "StatefulSet") and name:
            return name
        suffix = f"-{labels.get('pod-template-hash') or ''}"
        if owner.get("kind") == "ReplicaSet" and len(suffix) > 1 and name.endswith(suffix):
            return name[:-len(suffix)]
    return ""


def controller_of(pod: Mapping[str, Any]) -> str:
    """"Deployment" or "StatefulSet" for a pod of a long-running workload's (issue 43), "" for a Job's."""
    for owner in _mapping(pod.get("metadata")).get("ownerReferences") or []:
        kind = _mapping(owner).get("kind")
        if kind in ("ReplicaSet", "StatefulSet"):
            return "Deployment" if kind == "ReplicaSet" else "StatefulSet"
    return ""


def _number(value: Any) -> Any:
    return value if isinstance(value, (int, float, str)) else None


# KAI's units (CPU millicores, memory MB) to the API's (CPU cores, memory bytes); GPUs are GPUs in both.
_FROM_KAI = {"cpu": lambda v: v / 1000, "memory": lambda v: round(v * 1_000_000)}


def _from_kai(resource: str, value: Any) -> Any:
    number = _number(value)
    if not isinstance(number, int | float) or isinstance(number, bool) or number < 0 or resource not in _FROM_KAI:
        return number  # -1: none, in every unit
    converted = _FROM_KAI[resource](number)
    return int(converted) if converted == int(converted) else round(converted, 3)


def _figures(details: Mapping[str, Any]) -> dict[str, Any]:
    """KAI's queue figures (queueDetails) in the API's units: GPUs, CPU cores, memory bytes (KAI gives
    millicores and MB)."""
    queue = _mapping(_mapping(details).get("queueDetails"))
    figures: dict[str, Any] = {}
    if queue.get("name"):
        figures["queue"] = str(queue["name"])
    for key, value in queue.items():
        if key.endswith("Resources") or key.endswith("Limits"):
            figures[key] = {str(k): _from_kai(str(k), v) for k, v in _mapping(value).items()}
    return figures


def podgroup_facts(podgroup: Mapping[str, Any]) -> dict[str, Any]:
    """Why KAI Scheduler leaves a PodGroup unscheduled, from its `status.schedulingConditions` (the latest
    transition); {} once it is scheduled or before KAI looked at it."""
    conditions = [_mapping(c) for c in _mapping(podgroup.get("status")).get("schedulingConditions") or []]
    if not conditions:
        return {}
    latest = max(conditions, key=lambda c: (str(c.get("lastTransitionTime") or ""),
                                            int(c["transitionID"]) if str(c.get("transitionID") or "").isdigit()
                                            else 0))
    reasons = [_mapping(r) for r in latest.get("reasons") or []]
    first = reasons[0] if reasons else {}
    message = str(latest.get("message") or first.get("message") or "")
    code = str(first.get("reason") or latest.get("reason") or latest.get("type") or "Unschedulable")
    return {"engine": "kai", "code": code, "message": message, "node_pool": str(latest.get("nodePool") or ""),
            "details": _figures(first.get("details") or {}),
            "reasons": [str(r.get("reason")) for r in reasons if r.get("reason")]}


def kueue_workload_facts(workload: Mapping[str, Any]) -> dict[str, Any]:
    """Why Kueue has not admitted a Workload: its `QuotaReserved=False` reason and message ({} once reserved)."""
    for condition in _mapping(workload.get("status")).get("conditions") or []:
        condition = _mapping(condition)
        if condition.get("type") == "QuotaReserved":
            if condition.get("status") == "True":
                return {}
            return {"engine": "kueue", "code": str(condition.get("reason") or "Pending"),
                    "message": str(condition.get("message") or ""), "details": {}, "reasons": []}
    return {}


def engine_job_of(obj: Mapping[str, Any], engine: str) -> str:
    """The Job an engine object stands for: our PodGroups (engine "kai") are named as their Job, Kueue's
    Workloads are owned by theirs."""
    metadata = _mapping(obj.get("metadata"))
    if engine == "kueue":
        for owner in metadata.get("ownerReferences") or []:
            owner = _mapping(owner)
            if owner.get("kind") == "Job" and owner.get("name"):
                return str(owner["name"])
        return ""
    return str(metadata.get("name") or "")


def engine_facts(obj: Mapping[str, Any], engine: str) -> dict[str, Any]:
    if engine == "kueue":
        return kueue_workload_facts(obj)
    return podgroup_facts(obj)


# core/v1 Events the sync follows: the Job controller's refusals to create pods (a missing PriorityClass, a quota,
# an admission webhook). Events carry no labels, so the Job they name must be one we hold.
CREATE_FAILURE_SELECTOR = "involvedObject.kind=Job,reason=FailedCreate"


MESSAGE_MAX = 2000


def create_failure_job(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the Job a FailedCreate Event is about, or None for any other Event."""
    involved = _mapping(event.get("involvedObject"))
    if involved.get("kind") != "Job" or event.get("reason") != "FailedCreate" or not involved.get("name"):
        return None
    namespace = involved.get("namespace") or _mapping(event.get("metadata")).get("namespace") or ""
    return str(namespace), str(involved["name"])


COMBINED_PREFIX = "(combined from similar events): "  # client-go's EventCorrelator, when it aggregates


def create_failure_facts(event: Mapping[str, Any], *, seen_at: str, before: Mapping[str, Any] | None = None
                         ) -> dict[str, Any]:
    """The API server's message and since when it has been refusing (the Event's first time, else `seen_at`;
    kept from `before`, an earlier Event about the same Job, when that one is older)."""
    metadata = _mapping(event.get("metadata"))
    first = str(event.get("firstTimestamp") or event.get("eventTime") or metadata.get("creationTimestamp") or seen_at)
    last = str(event.get("lastTimestamp") or event.get("eventTime") or first)
    since = min(first, str((before or {}).get("since") or first))
    # Anyone allowed to write Events in the namespace can write this one: its message is kept short. The event
    # recorder prefixes what it merged from similar Events ("(combined from similar events): "): not the server's.
    message = str(event.get("message") or "FailedCreate").removeprefix(COMBINED_PREFIX) or "FailedCreate"
    return {"message": message[:MESSAGE_MAX], "since": since, "at": last}
