"""The `scheduling` app's models, one module per concern: `workloads` (workloads, their events, workflows,
admission state, submission counts), `notifications` (what users are told, and the rows that tell them), `logs`
(log archives of ended attempts) and `utilization` (GPU utilization from DCGM)."""

from .logs import LogArchive
from .notifications import Channel, Notification, NotificationPreference, Transition
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
    "Channel",
    "LogArchive",
    "Notification",
    "NotificationPreference",
    "Priority",
    "Source",
    "Status",
    "SubmissionCount",
    "Transition",
    "UtilizationState",
    "Workflow",
    "Workload",
    "WorkloadEvent",
    "WorkloadQuerySet",
    "WorkloadUtilization",
]
