"""Usage accounting (issue 27): what pods really held, as intervals (`UsageInterval`), each pool's GPU
capacity on Ready nodes over time (`CapacityInterval`), and their hourly rollups (`UsageHour` per pool x
platform x project x user; `ProjectPoolHour` per pool x project: deserved and starved time; `PoolHour`:
capacity), each also summed per UTC day (`grain`). Intervals are observed from the sync's Pod rows by
`scheduling.usage.observe`, rolled up by `scheduling.usage.rollup`; reports read the hourly or daily rows only.

An open interval (`end` NULL) counts up to its backend's `UsageWatermark.observed_at`, the last sync whose
picture it was in: usage is never counted past what was seen. Times are UTC; GPU figures are whole GPUs,
CPU millicores, memory bytes."""

from django.db import models
from django.db.models import Q

from pools.models import Backend


class EndReason(models.TextChoices):
    GONE = "gone"  # the sync no longer lists the pod: it finished or was deleted
    NODE_LOST = "node_lost"  # its node left the cluster or stopped reporting (Unknown)
    PREEMPTED = "preempted"  # its workload's attempt ended by preemption
    OUTAGE = "outage"  # the backend's sync went silent: closed at the last time it was seen


class UsageInterval(models.Model):
    backend = models.ForeignKey(Backend, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    pod_uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    pod_name = models.CharField(max_length=253)
    node_name = models.CharField(max_length=253, blank=True)
    pool = models.CharField(max_length=128)
    platform = models.CharField(max_length=128, blank=True)
    project = models.CharField(max_length=128)  # "unattributed" for a pod of a namespace of no project
    department = models.CharField(max_length=128, blank=True)
    user = models.CharField(max_length=150, blank=True)  # the submitter; "" for pods we did not submit
    workload = models.CharField(max_length=64, blank=True)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    priority = models.CharField(max_length=8, blank=True)
    preemptible = models.BooleanField(default=False)
    ours = models.BooleanField(default=False)
    gpu = models.IntegerField(default=0)
    cpu = models.BigIntegerField(default=0, help_text="Millicores.")
    memory = models.BigIntegerField(default=0, help_text="Bytes.")
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=16, choices=EndReason.choices, blank=True)
    # Closed at the last time the sync saw it rather than when it ended (an outage, or a pod gone between two
    # observations): the figure is a lower bound, never an invention.
    truncated = models.BooleanField(default=False)
    # Average GPU utilization over the interval, when measured (DCGM through Prometheus); NULL: not measured.
    gpu_util_percent = models.FloatField(null=True, blank=True)
    # When the row last changed (opened, closed, backfilled): the rollup recomputes the hours it touches.
    changed_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [
            models.Index(fields=["backend", "pod_uid"], condition=Q(end__isnull=True), name="usage_open_by_pod"),
            # Whether a pod already has an interval (observe: its first opens at the cluster's start time).
            models.Index(fields=["backend", "pod_uid"], name="usage_interval_by_pod"),
            models.Index(fields=["start"], name="usage_interval_start"),
            models.Index(fields=["end"], name="usage_interval_end"),
        ]
        constraints = [models.CheckConstraint(condition=Q(end__isnull=True) | Q(end__gte=models.F("start")),
                                              name="usage_interval_ends_after_start")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod_name} {self.start:%Y-%m-%d %H:%M}-{self.end or 'open'}"


class CapacityInterval(models.Model):
    """A pool's GPUs on Ready nodes, constant from `start` to `end` (open: up to the watermark)."""

    backend = models.ForeignKey(Backend, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    pool = models.CharField(max_length=128)
    gpus = models.IntegerField(default=0)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    truncated = models.BooleanField(default=False)
    changed_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["pool"], condition=Q(end__isnull=True), name="capacity_open_by_pool"),
                   models.Index(fields=["start"], name="capacity_interval_start")]

    def __str__(self) -> str:
        return f"{self.pool} {self.gpus} GPUs from {self.start:%Y-%m-%d %H:%M}"


class UsageWatermark(models.Model):
    """Per backend: the sync time of the last picture observed (open intervals count up to it)."""

    backend = models.OneToOneField(Backend, on_delete=models.CASCADE, related_name="+")
    observed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.backend_id} observed at {self.observed_at:%Y-%m-%d %H:%M:%S}"


class RollupState(models.Model):
    """The rollup's own watermark: hours from `through` on are recomputed on the next run."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    through = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"rollup through {self.through}"


class Grain(models.TextChoices):
    HOUR = "h"
    DAY = "d"  # the sum of a UTC day's hourly rows: long reports read 24 times fewer rows


class UsageHour(models.Model):
    grain = models.CharField(max_length=1, choices=Grain.choices, default=Grain.HOUR)
    hour = models.DateTimeField(help_text="The start of the hour (or of the day, for daily rows).")
    pool = models.CharField(max_length=128)
    platform = models.CharField(max_length=128, blank=True)
    project = models.CharField(max_length=128)
    department = models.CharField(max_length=128, blank=True)
    user = models.CharField(max_length=150, blank=True)
    # The workload's kind (issue 43: training, notebook, inference, compute); "" for pods we did not submit.
    work_kind = models.CharField(max_length=12, blank=True, default="")
    gpu_seconds = models.BigIntegerField(default=0)
    cpu_seconds = models.BigIntegerField(default=0, help_text="Millicore-seconds.")
    memory_byte_seconds = models.DecimalField(max_digits=30, decimal_places=0, default=0)
    borrowed_seconds = models.BigIntegerField(default=0, help_text="GPU-seconds above the project's deserved quota.")
    preempted_gpu_seconds = models.BigIntegerField(default=0, help_text="GPU-seconds of attempts later preempted.")
    # Utilization% x GPU-seconds of the GPU-seconds measured (DCGM through Prometheus), and those GPU-seconds: a
    # group's weighted average is the ratio of their sums; no measured seconds: "not measured".
    gpu_util_seconds = models.BigIntegerField(default=0)
    gpu_measured_seconds = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["grain", "hour", "pool", "platform", "project", "user", "work_kind"], name="usage_hour_unique")]
        indexes = [models.Index(fields=["grain", "hour"], name="usage_hour_by_hour")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}h {self.pool} {self.project} {self.user} {self.gpu_seconds} GPU-s"


class ProjectPoolHour(models.Model):
    """Per pool and project and hour: what it deserved, and how long it waited with work pending while its use
    there was under its deserved quota (fair share in hindsight)."""

    grain = models.CharField(max_length=1, choices=Grain.choices, default=Grain.HOUR)
    hour = models.DateTimeField()
    pool = models.CharField(max_length=128)
    project = models.CharField(max_length=128)
    department = models.CharField(max_length=128, blank=True)
    deserved_gpu_seconds = models.BigIntegerField(default=0)
    starved_seconds = models.IntegerField(default=0)
    pending_seconds = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["grain", "hour", "pool", "project"],
                                               name="project_pool_hour_unique")]
        indexes = [models.Index(fields=["grain", "hour"], name="project_pool_hour_by_hour")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}h {self.pool} {self.project} deserved {self.deserved_gpu_seconds} GPU-s"


class PoolHour(models.Model):
    grain = models.CharField(max_length=1, choices=Grain.choices, default=Grain.HOUR)
    hour = models.DateTimeField()
    pool = models.CharField(max_length=128)
    capacity_gpu_seconds = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["grain", "hour", "pool"], name="pool_hour_unique")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}h {self.pool} capacity {self.capacity_gpu_seconds} GPU-s"
