"""The `scheduling` app's models, one module per concern: `workloads` (workloads, their events, workflows,
admission state, submission counts), `notifications` (what users are told, and the rows that tell them), `logs`
(log archives of ended attempts), `utilization` (GPU utilization from DCGM) and `usage` (usage intervals and
their hourly rollups)."""

from .logs import FollowLease, LogArchive
from .notifications import Channel, Notification, NotificationPreference, Transition
from .usage import (
    CapacityInterval,
    EndReason,
    Grain,
    PoolHour,
    ProjectPoolHour,
    RollupState,
    UsageHour,
    UsageInterval,
    UsageWatermark,
)
from .utilization import UtilizationState, WorkloadUtilization
from .workloads import (
    ALIVE,
    FINISHED,
    HEAVY_FIELDS,
    RESERVING,
    AdmissionState,
    Kind,
    Priority,
    Source,
    Status,
    SubmissionCount,
    Workflow,
    Workload,
    WorkloadEvent,
    WorkloadQuerySet,
    accounting_names,
)

__all__ = [
    "ALIVE",
    "FINISHED",
    "HEAVY_FIELDS",
    "RESERVING",
    "AdmissionState",
    "CapacityInterval",
    "Channel",
    "EndReason",
    "FollowLease",
    "Grain",
    "Kind",
    "LogArchive",
    "Notification",
    "NotificationPreference",
    "PoolHour",
    "Priority",
    "ProjectPoolHour",
    "RollupState",
    "Source",
    "Status",
    "SubmissionCount",
    "Transition",
    "UsageHour",
    "UsageInterval",
    "UsageWatermark",
    "UtilizationState",
    "Workflow",
    "Workload",
    "WorkloadEvent",
    "WorkloadQuerySet",
    "WorkloadUtilization",
    "accounting_names",
]
