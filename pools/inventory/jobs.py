"""What the cluster says about the Jobs we manage and their pods (pure: no Django). The sync stores these facts
per Job (`pools.models.ManagedJob`); `scheduling.lifecycle` reads them to move each workload. Only what a
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
    while it still fails), since the kubelet's waiting state carries no time."""
    metadata, spec, status = (_mapping(pod.get(key)) for key in ("metadata", "spec", "status"))
    facts: dict[str, Any] = {"node": str(spec.get("nodeName") or ""), "phase": str(status.get("phase") or "Pending"),
                             "reason": str(status.get("reason") or ""), "message": str(status.get("message") or ""),
                             "exit_code": None, "waiting": "", "waiting_message": "", "unschedulable": "",
                             "disrupted": "", "image_pull_since": None,
                             "index": str(_mapping(metadata.get("annotations")).get(
                                 "batch.kubernetes.io/job-completion-index") or "")}
    for condition in status.get("conditions") or []:
        condition = _mapping(condition)
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            facts["unschedulable"] = str(condition.get("message") or condition.get("reason") or "")
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
    if facts["waiting"] in IMAGE_PULL_REASONS:
        facts["image_pull_since"] = (before or {}).get("image_pull_since") or seen_at
    if metadata.get("deletionTimestamp"):
        facts["deleting"] = True
    return facts


def job_name_of(pod: Mapping[str, Any]) -> str:
    labels = _mapping(_mapping(pod.get("metadata")).get("labels"))
    for key in JOB_NAME_LABELS:
        if labels.get(key):
            return str(labels[key])
    for owner in _mapping(pod.get("metadata")).get("ownerReferences") or []:
        owner = _mapping(owner)
        if owner.get("kind") == "Job" and owner.get("name"):
            return str(owner["name"])
    return ""
