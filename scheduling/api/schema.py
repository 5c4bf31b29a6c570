"""The shapes of the workload API's bodies for the OpenAPI schema (pydantic models, as drf-spectacular reads
them). The bodies themselves are built by `scheduling.listing.bodies` and checked by `scheduling.specs.requests`."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pools.api.schema import PodTemplate
from scheduling.models import Source, Status

Quantity = str | int | float
StatusName = Literal[tuple(Status.values)]  # type: ignore[valid-type]
Code = Literal["QUOTA", "LIMIT", "NO_OVER_QUOTA", "CAPACITY", "GANG", "RECLAIMING", "MAINTENANCE", "OFFLINE", "ENGINE",
               "UNSCHEDULABLE", "WAITING", "SUBMITTED"]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResourcesIn(_Shape):
    """Per replica. CPU in cores or millicores ("8", "500m"), memory and storage as quantities ("64Gi")."""

    gpu: int = 0
    cpu: Quantity | None = None
    memory: Quantity | None = None
    storage: Quantity | None = None


class TopologyIn(_Shape):
    key: str = Field(description="One of the pool's topology_keys (KAI backends only).")
    requirement: Literal["required", "preferred"] = "required"
    group: str = "default"


class WorkloadSubmit(_Shape):
    """POST /api/workloads/. `project` defaults to your profile's default project, `pools` to the project's
    default list (then its department's, then `default`); tried in order."""

    name: str
    kind: Literal["training", "notebook", "inference", "compute"] = Field(
        "training", description="notebook: one pod, its port's link; inference: replicas behind a Service, "
                                "submitted again under its name it rolls to the new request (scale down only); "
                                "compute: long-running replicas without a port (docs/researcher/kinds.md).")
    port: int | None = Field(None, description="A notebook's or inference's HTTP port (default 8888, 8000).")
    project: str | None = None
    pools: list[str] | None = None
    platform: str | None = Field(None, description="Else each pool's default_platform.")
    image: str
    command: list[str] = []
    args: list[str] = []
    env: dict[str, str] = Field({}, description="NVIDIA_* and CUDA_VISIBLE_DEVICES are refused: GPUs come through "
                                                "resources.gpu.")
    env_from_secret: dict[str, str] = Field({}, description='NAME -> "secret/key": read from a Secret of the '
                                                            "project's namespace, never stored with the request.")
    replicas: int = Field(1, description="A gang: all replicas start or none.")
    resources: ResourcesIn = ResourcesIn()
    priority: Literal["high", "normal", "low"] = Field("normal", description="Only low is preemptible and may "
                                                                             "borrow above the project's quota.")
    exec_timeout: str | None = Field(None, description="e.g. 4h; refused above the pool's maximum.")
    queue_timeout: str | None = None
    exit_actions: dict[str, str] = Field({}, description='COMPLETE, FAIL or RESCHEDULE -> exit codes, e.g. '
                                                          '{"RESCHEDULE": "137,143"}.')
    topology: list[TopologyIn] = []
    variables: dict[str, str | int | float | bool] = {}
    privileged: bool = False
    host_network: bool = False
    mounts: list[str] = Field([], description="Host paths (SRC or SRC:DST) the platform's allowed_mounts allow.")
    gpu_type: str = Field("", description="Only nodes of this GPU type: nvidia.com/gpu.product or its model word "
                                          "(H100), or the gpuctl pool file's gpu-type label; 400 when no node of "
                                          "the candidate pools has it.")


class CancelRequest(_Shape):
    message: str = Field("", description="Recorded in the workload's events.")


Amount = int | float


class MostFree(BaseModel):
    node: str
    gpu: Amount = Field(description="GPUs free on the node.")
    cpu: Amount = Field(description="CPU cores free on the node.")
    memory: int = Field(description="Bytes of memory free on the node.")


class ReasonDetails(BaseModel):
    """The numbers behind a reason, each in the API's units: GPUs, CPU in cores, memory in bytes. Which keys
    are present depends on the code; ENGINE reasons add the engine's own (KAI's queue figures, converted to the
    same units)."""

    model_config = ConfigDict(extra="allow")

    unit: Literal["project", "department"] | None = Field(None, description="QUOTA, LIMIT, NO_OVER_QUOTA: whose "
                                                                            "quota.")
    name: str | None = Field(None, description="The project's or department's name.")
    resource: Literal["gpu", "cpu", "memory"] | None = Field(
        None, description="The resource over its quota: the unit of deserved, limit, in_use, in_use_guaranteed and "
                          "requested (GPUs, CPU cores or memory bytes).")
    deserved: Amount | None = Field(None, description="The deserved quota, in the resource's unit; null: not set.")
    limit: Amount | None = Field(None, description="The limit, in the resource's unit; -1: none.")
    in_use: Amount | None = Field(None, description="Everything in use or reserved, in the resource's unit.")
    in_use_guaranteed: Amount | None = Field(None, description="The non-preemptible part of in_use (what counts "
                                                               "against deserved), in the resource's unit.")
    requested: Amount | None = Field(None, description="What the workload asks for in all, in the resource's unit.")
    idle_gpus: Amount | None = Field(None, description="GPUs free in the pool, which low priority could borrow.")
    platform: str | None = None
    nodes: int | None = Field(None, description="Ready, schedulable nodes of the platform.")
    per_replica: list[Amount] | None = Field(None, description="One replica's request: [GPUs, CPU cores, memory "
                                                               "bytes].")
    replicas: int | None = None
    placed: int | None = Field(None, description="Replicas that fit now (GANG).")
    most_free: MostFree | None = Field(None, description="The platform's node with the most free GPUs.")
    preempting: list[str] | None = Field(None, description="RECLAIMING: the workloads being preempted.")
    never: bool | None = Field(None, description="At submission: it could never be admitted there.")


class Reason(_Shape):
    """Why a pending workload waits in one candidate pool, with the numbers."""

    pool: str
    code: Code
    message: str
    details: ReasonDetails


class WorkloadRow(_Shape):
    id: str
    name: str
    kind: Literal["training", "notebook", "inference", "compute"] = Field(
        description="training: an Indexed Job that completes; notebook: one long-running pod with an HTTP port; "
                    "inference: N replicas behind a Service; compute: long-running replicas, no port.")
    workflow: str
    project: str
    submitter: str
    source: Literal[tuple(Source.values)]  # type: ignore[valid-type]
    priority: Literal["high", "normal", "low"]
    status: StatusName
    pool: str | None = Field(description="Where it was admitted.")
    platform: str
    pools: list[str] = Field(description="Candidate pools, in order.")
    replicas: int
    gpu: int = Field(description="GPUs per replica.")
    cpu: float = Field(description="CPU cores per replica.")
    memory: int = Field(description="Bytes per replica.")
    storage: int = Field(description="Bytes of ephemeral storage per replica.")
    reason: Reason | None = Field(description="The first candidate's reason, while pending.")
    position: int | None = Field(description="Place in the first candidate pool's queue (1 is next).")
    positions: dict[str, int]
    submitted_at: datetime
    admitted_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    estimated_start: datetime | None = Field(
        description="While pending: an estimate of when it starts (the earliest of its visible candidate pools'), "
                    "null when there is no basis for one (or when not pending).")
    estimate_basis: str = Field(
        description='What the estimate rests on, in words ("about 2 h: 12 GPUs free up in pool p when 3 running '
                    'workloads reach their exec timeouts"), "unknown: ..." without a basis, "" when not pending.')


class Estimate(_Shape):
    pool: str
    position: int | None = Field(description="Place in this pool's queue (1 is next).")
    estimated_start: datetime | None = Field(description="An estimate; null: unknown.")
    basis: str


class Event(_Shape):
    at: datetime
    status: StatusName
    reason: str
    message: str


class CandidateTemplate(_Shape):
    platform: str
    pod_template: PodTemplate


class Resources(_Shape):
    gpu: int = Field(description="GPUs per replica.")
    cpu: float = Field(description="CPU cores per replica.")
    memory: int = Field(description="Bytes of memory per replica.")
    storage: int = Field(description="Bytes of ephemeral storage per replica.")


class JobPod(_Shape):
    name: str
    node: str | None = Field(description="The node the pod is bound to (its spec.nodeName), none until bound.")
    ip: str | None = Field(description="The pod's IP (status.podIP), once it has one.")
    phase: str = Field(description="Pending, Running, Succeeded, Failed, or Deleted once the pod is gone.")
    exit_code: int | None
    reason: str | None = Field(description="Why it waits or failed (ErrImagePull, Evicted, ...).")


class Job(_Shape):
    name: str
    kind: Literal["Job", "Deployment", "StatefulSet"] = Field(
        description="What dispatch wrote: a training's Job, a notebook's StatefulSet, an inference's or compute's "
                    "Deployment.")
    namespace: str
    dispatched_at: datetime | None
    seen: bool = Field(description="Whether the sync has seen the Job yet.")
    finished: str | None = Field(description="Complete or Failed, once the Job says so.")
    gone: bool = Field(description="The Job was deleted from the cluster.")
    pods: list[JobPod]


class Attempt(_Shape):
    attempt: int
    job: str
    namespace: str
    pool: str
    status: StatusName
    exit_code: int | None
    started_at: datetime | None
    finished_at: datetime
    message: str


class ReplicaPod(_Shape):
    attempt: int
    replica: int = Field(description="The pod's completion index in its Job, from 0.")
    pod: str
    node: str | None
    ip: str | None
    phase: str | None
    exit_code: int | None
    log: Literal["live", "archive"] | None = Field(description="Where its log is read from now (None: nowhere).")


class LogAnswer(ReplicaPod):
    """`format=json` of a log read (the default answer is the text itself, `text/plain`, with the same facts in
    X-Log-* headers)."""
    workload: str
    source: Literal["live", "archive"]
    container: str
    truncated: bool = Field(description="Earlier lines were not kept (archive) or not sent (OSMO_LOG_READ_BYTES).")
    resume: str = Field(description="The `since` token to read on from after the last line.")
    text: str


class PodUtilization(_Shape):
    name: str
    average_percent: float


class GpuUtilization(_Shape):
    """From the DCGM exporter through Prometheus (README "GPU utilization"); `measured` false says why in `note`."""

    measured: bool
    note: str = Field(description='Why not measured ("not measured: ..."), or a remark on the figures; "" if none.')
    average_percent: float | None = Field(None, description="The average of its pods' GPU utilization over the "
                                                            "last window_minutes, percent.")
    window_minutes: int | None = None
    measured_at: datetime | None = None
    pods: list[PodUtilization] | None = Field(None, description="Per replica (pod): its GPUs' average.")
    peak_percent: float | None = Field(None, description="The highest figure of any of its GPUs over the last "
                                                         "OSMO_IDLE_GPU_MINUTES.")
    idle_since: datetime | None = None
    idle: bool | None = Field(None, description="Every GPU under OSMO_IDLE_GPU_PERCENT for OSMO_IDLE_GPU_MINUTES.")


class IdleWorkload(_Shape):
    id: str
    name: str
    project: str
    submitter: str
    pool: str | None
    replicas: int
    gpus: int = Field(description="All replicas together.")
    average_percent: float | None
    peak_percent: float | None
    idle_since: datetime
    idle_minutes: int
    measured_at: datetime


class IdleList(_Shape):
    measured: bool = Field(description="False when OSMO_PROMETHEUS_URL is not set: nothing is measured.")
    idle_percent: int
    idle_minutes: int
    workloads: list[IdleWorkload]


class WorkloadLink(_Shape):
    url: str = Field(description="The Ingress address from the pool's or backend's link template (\"\": none).")
    port_forward: str = Field(description="The kubectl port-forward line to its Service.")


class WorkloadDetail(WorkloadRow):
    department: str
    ready: str | None = Field(description="A notebook's, inference's or compute's ready/desired replicas "
                                          "(kubectl's READY); null for a training.")
    status_word: str = Field(description="The status as pages show it: a running inference is AVAILABLE n/m.")
    link: WorkloadLink | None = Field(description="Where to open a running notebook or inference: only its "
                                                  "submitter and staff are shown it.")
    resources: Resources
    preemptible: bool
    exec_timeout: str | None
    queue_timeout: str | None
    exit_actions: dict[str, str]
    topology: list[TopologyIn]
    request_visible: bool = Field(description="Whether you may read the request and its pod templates: its "
                                              "submitter, members of its project (not `default`) and staff. If "
                                              "not, request, variables and pod_templates are empty.")
    variables: dict[str, str | int | float | bool]
    request: dict[str, Any] = Field(description="The validated request: resources per replica in GPUs, CPU cores "
                                                "and memory and storage bytes. Values of env names that look like "
                                                "credentials (*TOKEN*, *SECRET*, *PASSWORD*, *_KEY) are masked "
                                                "for all but the submitter.")
    reasons: list[Reason]
    estimates: list[Estimate] = Field(description="While pending: the start estimate in each candidate pool you may "
                                                  "see, in the pools' order.")
    placement: dict[str, int] = Field(description="Where the current attempt's pods are: node name -> pods bound "
                                                  "there, read from the pods ({} until one is bound).")
    planned_nodes: dict[str, int] = Field(description="Admission's plan: node name -> replicas reserved there, "
                                                      "the nodes the pods are required to go to.")
    pod_templates: dict[str, CandidateTemplate]
    attempt: int = Field(description="The current attempt, 1 and up; a RESCHEDULE exit action starts another.")
    exit_code: int | None = Field(description="The user container's exit code of the last ended attempt.")
    stopping: StatusName | Literal["RESCHEDULE"] | None = Field(
        description="A stop is under way (its Job being deleted); the attempt then ends as this.")
    job: Job | None = Field(description="The current attempt's Job and its pods, once dispatched.")
    attempts: list[Attempt] = Field(description="Ended attempts, oldest first.")
    replica_pods: list[ReplicaPod] = Field(description="Where each replica of each attempt ran, from its pods (kept "
                                                       "with its log archive once the pods are gone).")
    events: list[Event]
    utilization: GpuUtilization | None = Field(None, description="GPU utilization, from the DCGM exporter "
                                                                      "through Prometheus.")
    refused_candidates: list["Candidate"] | None = None
    canceled: bool | None = None


class Candidate(_Shape):
    pool: str
    accepted: bool
    platform: str | None
    step: Literal["access", "resources", "templates", "platform", "schedule"] | None = None
    code: str | None = None
    message: str | None = None
    pod_template: PodTemplate | None = None


class AdmissionPreview(_Shape):
    would_admit: bool
    pool: str | None = None
    platform: str | None = None
    placement: dict[str, int] | None = None
    reasons: list[Reason]
    would_preempt: list[str] | None = None


class DryRun(_Shape):
    dry_run: bool
    project: str
    request: dict[str, Any] = Field(description="The validated request: resources per replica in GPUs, CPU cores "
                                                "and memory and storage bytes.")
    candidates: list[Candidate]
    admission: AdmissionPreview


# ---- OSMO's workflow endpoints ----------------------------------------------------------------------

class TemplateSpec(_Shape):
    file: str = Field(description="The workflow spec (version 2), YAML text.")
    set_variables: list[str] = Field([], description="KEY=VALUE pairs for the spec's {{ placeholders }}.")
    set_string_variables: list[str] = []


class GroupSpec(_Shape):
    name: str
    replicas: int
    pools: list[str]
    candidates: list[Candidate]


class WorkflowSpecShape(_Shape):
    workflow: str
    groups: list[GroupSpec]


class SubmitResponse(_Shape):
    name: str = Field(description="The workflow ID (<name>-<n>).")
    overview: str
    logs: str
    spec: str = Field(description="The workflow file as it runs, its variables filled in (YAML text).")
    plan: WorkflowSpecShape = Field(description="Each group: its replicas, the pools it may run in, each "
                                                "candidate's verdict.")
    dashboard_url: str
    warnings: list[str]
    dry_run: bool | None = None


class WorkflowSummary(_Shape):
    name: str
    workflow_id: str
    user: str
    submit_time: datetime
    status: str
    stopping: str | None = Field(description="While a cancel (or a timeout) deletes its Jobs: the status it then "
                                             "ends with, such as FAILED_CANCELED; null otherwise. `status` keeps "
                                             "OSMO's word (RUNNING, PENDING) meanwhile.")
    priority: Literal["HIGH", "NORMAL", "LOW"]
    pool: str | None
    labels: dict[str, str]
    overview: str
    logs: str
    dashboard_url: str


class WorkflowList(_Shape):
    workflows: list[WorkflowSummary]
    more_entries: bool


class WorkflowGroup(_Shape):
    name: str
    workload: str
    status: StatusName
    stopping: str | None = Field(description="The status this group ends with once its Job is deleted, while it "
                                             "is stopping; null otherwise.")
    replicas: int
    start_time: datetime | None
    end_time: datetime | None
    pool: str | None
    reasons: list[Reason]


class WorkflowDetail(WorkflowSummary):
    groups: list[WorkflowGroup]


class CancelAnswer(_Shape):
    name: str
    message: str


class PortForwardAnswer(_Shape):
    """`osmo workflow port-forward`'s answer (409: no tunnel here): what to open or run instead."""
    detail: str = Field(description="The message OSMO's CLI prints.")
    port_forward: list[str] = Field(description="A kubectl port-forward line to the task's pod, per port asked.")
    url: str = Field(description="The task's link (its Ingress), or empty.")


WorkloadDetail.model_rebuild()
