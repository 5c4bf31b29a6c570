"""The batch/v1 Job of one attempt of a workload (pure: no Django; issue 13, DESIGN.md section 3, "Dispatch and
lifecycle"). One Job per attempt, named `wl-<first 12 of the uuid>-<attempt>` so that a retried create finds
its own Job (409, then read back and accepted when `<prefix>workload` names this workload); the gang is
`parallelism` = `completions` = replicas with `completionMode: Indexed`; retries are ours (`backoffLimit: 0`);
the exec timeout is `activeDeadlineSeconds`; Job and pods carry our labels."""

import copy
from dataclasses import dataclass
from typing import Any

from pools.inventory.jobs import MANAGED_LABEL as MANAGED
from pools.inventory.jobs import MANAGED_VALUE


@dataclass(frozen=True, slots=True)
class Attempt:
    workload_id: str
    attempt: int
    project: str
    namespace: str
    pool: str
    platform: str
    priority: str
    replicas: int
    pod_template: dict[str, Any]  # the rendered template of the pool it was admitted to: {"spec": ...}
    exec_timeout_seconds: int | None = None


def job_name(workload_id: str, attempt: int) -> str:
    return f"wl-{workload_id.replace('-', '')[:12]}-{attempt}"


def labels(attempt: Attempt, prefix: str) -> dict[str, str]:
    return {f"{prefix}{MANAGED}": MANAGED_VALUE, f"{prefix}workload": attempt.workload_id,
            f"{prefix}project": attempt.project, f"{prefix}pool": attempt.pool,
            f"{prefix}platform": attempt.platform, f"{prefix}priority": attempt.priority,
            f"{prefix}attempt": str(attempt.attempt)}


def job_manifest(attempt: Attempt, *, prefix: str, ttl_seconds: int,
                 priority_classes: dict[str, str] | None = None) -> dict[str, Any]:
    ours = labels(attempt, prefix)
    template = copy.deepcopy(attempt.pod_template or {})
    spec = template.setdefault("spec", {})
    spec["restartPolicy"] = "Never"
    priority_class = (priority_classes or {}).get(attempt.priority)
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **ours}
    job_spec: dict[str, Any] = {
        "parallelism": attempt.replicas, "completions": attempt.replicas, "completionMode": "Indexed",
        "backoffLimit": 0, "ttlSecondsAfterFinished": ttl_seconds, "template": template,
    }
    if attempt.exec_timeout_seconds:
        job_spec["activeDeadlineSeconds"] = attempt.exec_timeout_seconds
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(attempt.workload_id, attempt.attempt), "namespace": attempt.namespace,
                         "labels": ours},
            "spec": job_spec}


def owned_by(job: dict[str, Any], workload_id: str, prefix: str) -> bool:
    """Whether a Job read back after a 409 is this workload's (and ours)."""
    found = (job.get("metadata") or {}).get("labels") or {}
    return found.get(f"{prefix}workload") == workload_id and found.get(f"{prefix}{MANAGED}") == MANAGED_VALUE
