"""Workloads: what a researcher asked to run, where it may run, and what became of it.

A workload is one gang (all replicas or none). Its status follows OSMO's names; this half sets
PENDING, ADMITTED and PREEMPTING, dispatch sets the rest. Every status change is also a WorkloadEvent.
Amounts are per replica, in base units: CPU millicores, memory and storage bytes, whole GPUs.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from pools.models import Pool, Project
from pools.models.visibility import access_for


class Status(models.TextChoices):
    PENDING = "PENDING"
    WAITING = "WAITING"  # an OSMO workflow's group waiting for the groups it takes inputs from to complete
    ADMITTED = "ADMITTED"
    PREEMPTING = "PREEMPTING"
    SCHEDULING = "SCHEDULING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_IMAGE_PULL = "FAILED_IMAGE_PULL"
    FAILED_EVICTED = "FAILED_EVICTED"
    FAILED_EXEC_TIMEOUT = "FAILED_EXEC_TIMEOUT"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"
    FAILED_PREEMPTED = "FAILED_PREEMPTED"
    FAILED_IDLE = "FAILED_IDLE"  # a notebook stopped by its pool's or project's idle rule (issue 43)
    FAILED_UPSTREAM = "FAILED_UPSTREAM"  # never ran: a group it waited for failed or was canceled


# Holding quota and capacity: counted by admission until the workload's pods are seen on nodes.
RESERVING = (Status.ADMITTED, Status.PREEMPTING, Status.SCHEDULING, Status.RUNNING)
ALIVE = (Status.PENDING, Status.WAITING, *RESERVING)
FINISHED = tuple(s for s in Status if s not in ALIVE)


class Source(models.TextChoices):
    """The door a workload came through: the native API, `workload submit`, OSMO's workflow endpoint, a gpuctl
    job file (`create -f`), or the site's pages."""
    API = "api"
    CLI = "cli"
    OSMO = "osmo"
    GPUCTL = "gpuctl"
    WEB = "web"


class Kind(models.TextChoices):
    """What the workload is (scheduling.specs.requests.Kind): which objects dispatch writes for it."""
    TRAINING = "training"
    NOTEBOOK = "notebook"
    INFERENCE = "inference"
    COMPUTE = "compute"


class Priority(models.TextChoices):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


# What a workload holds that no list shows: a large request (up to OSMO_WORKLOAD_MAX_STORED_BYTES) must not slow
# every list, fragment and export that reads its row.
HEAVY_FIELDS = ("request", "variables", "templates")


def accounting_names(path: str = "") -> dict[str, Coalesce]:
    """The names a workload is charged to (usage, pending and starved time, reports), as expressions over the
    workload at `path` ("" on Workload, "workload__" on a row that points to one): its project, department,
    submitter and pool through the live relations while they exist, the names kept at deletion
    (`scheduling.submit.references`) once they are gone."""
    return {
        "charged_project": Coalesce(F(f"{path}project__name"), F(f"{path}project_name")),
        "charged_department": Coalesce(F(f"{path}project__department__name"), F(f"{path}department_name")),
        "charged_user": Coalesce(F(f"{path}submitter__username"), F(f"{path}submitter_name")),
        "charged_pool": Coalesce(F(f"{path}pool__name"), F(f"{path}pool_name")),
    }


class WorkloadQuerySet(models.QuerySet):
    def light(self) -> "WorkloadQuerySet":
        """Without the request, variables and rendered templates: for lists (`bodies.row` reads none of them)."""
        return self.defer(*HEAVY_FIELDS)

    def visible_to(self, user) -> "WorkloadQuerySet":
        """Staff see every workload; others those of their projects and their own."""
        access = access_for(user)
        if access.is_staff:
            return self
        if not access.signed_in:
            return self.none()
        return self.filter(Q(project__in=Project.objects.visible_to(user)) | Q(submitter=access.user))


class Workload(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=63)
    # An OSMO workflow submits one workload per task group, all under the workflow's name.
    workflow = models.CharField(max_length=128, blank=True, db_index=True)
    group = models.CharField(max_length=128, blank=True)
    # A project or pool that only finished workloads name may be deleted (scheduling.submit.references refuses it while
    # live ones do): the key becomes NULL and the name stays in *_name (scheduling.submit.references.keep_names).
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="workloads")
    project_name = models.CharField(max_length=128, blank=True, help_text="Kept once the project is deleted.")
    department_name = models.CharField(max_length=128, blank=True, help_text="Kept once the project is deleted.")
    submitter = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="workloads")
    submitter_name = models.CharField(max_length=150, blank=True)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.API)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.TRAINING, db_index=True)
    request = models.JSONField(help_text="The validated request, amounts in base units.")
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    pools = models.JSONField(default=list, help_text="Candidate pools, tried in this order.")
    replicas = models.PositiveIntegerField(default=1)
    gpu = models.PositiveIntegerField(default=0)
    cpu = models.BigIntegerField(default=0, help_text="Millicores per replica.")
    memory = models.BigIntegerField(default=0, help_text="Bytes per replica.")
    storage = models.BigIntegerField(default=0, help_text="Bytes per replica.")
    variables = models.JSONField(default=dict, blank=True)
    exec_timeout = models.CharField(max_length=64, blank=True)
    queue_timeout = models.CharField(max_length=64, blank=True)
    exit_actions = models.JSONField(default=dict, blank=True)
    topology = models.JSONField(default=list, blank=True)
    # Per candidate pool: {"platform", "pod_template"}, rendered at submission.
    templates = models.JSONField(default=dict)
    pool = models.ForeignKey(Pool, null=True, blank=True, on_delete=models.SET_NULL, related_name="workloads")
    pool_name = models.CharField(max_length=128, blank=True, help_text="Kept once the pool is deleted.")
    platform = models.CharField(max_length=128, blank=True)
    # Admitted: {node name: replicas} reserved on the admitted pool's backend until the pods are bound.
    placement = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.PENDING)
    # One entry per candidate pool while pending: {"pool", "code", "message", "details"}.
    reasons = models.JSONField(default=list, blank=True)
    # {pool: 1-based position in that pool's queue}, while pending.
    positions = models.JSONField(default=dict, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    # The Job of the current attempt, once dispatched (scheduling.run.dispatch).
    job_name = models.CharField(max_length=63, blank=True)
    namespace = models.CharField(max_length=63, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # A stop asked for (cancel, timeout, a failure that leaves pods running): once the Job is deleted, the attempt
    # ends as `stop_status` ("RESCHEDULE": a new attempt), with this reason, message and exit code.
    stop_status = models.CharField(max_length=24, blank=True)
    stop_reason = models.CharField(max_length=32, blank=True)
    stop_message = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True, help_text="The last attempt's user exit code.")
    # Ended attempts, oldest first: {"attempt", "job", "namespace", "pool", "status", "exit_code", "started_at",
    # "finished_at", "message"}.
    attempts = models.JSONField(default=list, blank=True)
    # When the current attempt started waiting (its queue timeout counts from here); submitted_at for the first.
    queued_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(db_index=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = WorkloadQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at", "id"]
        indexes = [models.Index(fields=["status", "submitted_at"]), models.Index(fields=["project", "status"]),
                   models.Index(fields=["pool", "status"])]
        constraints = [
            models.CheckConstraint(condition=Q(replicas__gte=1), name="workload_replicas_positive"),
            # Only history may lose its project: a live workload's project is what admission charges.
            models.CheckConstraint(condition=Q(project__isnull=False) | Q(status__in=FINISHED),
                                   name="workload_live_has_project"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.short_id})"

    @property
    def short_id(self) -> str:
        return str(self.id)[:8]

    @property
    def project_label(self) -> str:
        return self.project.name if self.project_id else self.project_name

    @property
    def department_label(self) -> str:
        return self.project.department.name if self.project_id else self.department_name

    @property
    def pool_label(self) -> str:
        return self.pool.name if self.pool_id else self.pool_name

    @property
    def preemptible(self) -> bool:
        return self.priority == Priority.LOW

    @property
    def alive(self) -> bool:
        return self.status in ALIVE


class WorkloadEvent(models.Model):
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    status = models.CharField(max_length=24, choices=Status.choices)
    reason = models.CharField(max_length=32, blank=True)
    message = models.TextField(blank=True)
    # The pools the message names: it is shown only to those who may see all of them.
    pools = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["workload", "at", "id"]
        indexes = [models.Index(fields=["workload", "at"])]

    def __str__(self) -> str:
        return f"{self.workload_id} {self.status} {self.at:%Y-%m-%d %H:%M:%S}"


class Workflow(models.Model):
    """One workflow ID of one submitter: workflows belong to whoever submitted them, so each user numbers their
    own (`<name>-<n>`), two users' IDs never merge, and another user's workflow is, to a caller, an unknown name.
    The constraint makes allocation atomic: a concurrent submission of the same name retries with the next number."""

    name = models.CharField(max_length=128)
    base = models.CharField(max_length=128, blank=True, help_text="The workflow file's name, before -<n>.")
    number = models.PositiveIntegerField(null=True, blank=True)
    submitter = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="workflows")
    submitter_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    spec = models.TextField(blank=True, help_text="The workflow file as run, its variables filled in (OSMO's "
                                                  "`workflow spec`); empty for workloads that joined an ID.")
    templated_spec = models.TextField(blank=True, help_text="The file as written, before its variables were "
                                                            "filled in (`workflow spec --template`).")

    class Meta:
        ordering = ["submitter_name", "name"]
        constraints = [models.UniqueConstraint(fields=["submitter", "name"], name="workflow_unique_per_submitter")]
        indexes = [models.Index(fields=["submitter", "base", "number"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.submitter_name})"


class AdmissionState(models.Model):
    """One row: its lock serializes admission cycles across workers (SELECT ... FOR UPDATE), and it
    remembers when the last cycle ran and what it did."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_cycle_at = models.DateTimeField(null=True, blank=True)
    last_cycle = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"admission (last {self.last_cycle_at})"


class SubmissionCount(models.Model):
    """Submission attempts of one user in one minute (`scheduling.submit.limits.count_submission`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    minute = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "minute"], name="submission_count_user_minute")]

    def __str__(self) -> str:
        return f"{self.count} submissions at {self.minute:%H:%M}"
