"""The `scheduling` app's models, one module per concern: `workloads` (workloads, their events, workflows,
admission state, submission counts) and `logs` (log archives of ended attempts)."""

from .logs import LogArchive
from .workloads import (
    ALIVE,
    FINISHED,
    HEAVY_FIELDS,
    RESERVING,
    AdmissionState,
    Priority,
    Source,
    Status,
    SubmissionCount,
    Workflow,
    Workload,
    WorkloadEvent,
    WorkloadQuerySet,
)

__all__ = [
    "ALIVE",
    "FINISHED",
    "HEAVY_FIELDS",
    "RESERVING",
    "AdmissionState",
    "LogArchive",
    "Priority",
    "Source",
    "Status",
    "SubmissionCount",
    "Workflow",
    "Workload",
    "WorkloadEvent",
    "WorkloadQuerySet",
]
