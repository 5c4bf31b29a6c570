"""The `scheduling` app's models, one module per concern: `workloads` (workloads, their events, workflows,
admission state, submission counts), `utilization` (GPU utilization from DCGM)."""

from .utilization import UtilizationState, WorkloadUtilization
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
    "Priority",
    "Source",
    "Status",
    "SubmissionCount",
    "UtilizationState",
    "Workflow",
    "Workload",
    "WorkloadEvent",
    "WorkloadQuerySet",
    "WorkloadUtilization",
]
