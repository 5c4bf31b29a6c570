"""GPU utilization as the sampler last read it (scheduling.run.utilization): one row per workload that ran with
GPUs while OSMO_PROMETHEUS_URL was set, rewritten each round, kept after the workload ends (its last figures);
and one row saying how the last round went, for /metrics and the pages."""

from django.db import models

from .workloads import Workload


class WorkloadUtilization(models.Model):
    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, primary_key=True, related_name="utilization")
    measured_at = models.DateTimeField()
    # The average over the workload's measured pods of their GPUs' average over the last `window_minutes`.
    average = models.FloatField(null=True, blank=True, help_text="Percent.")
    window_minutes = models.PositiveIntegerField(default=10)
    # {pod name: its GPUs' average (percent)} for the pods that had figures.
    pods = models.JSONField(default=dict, blank=True)
    # The highest figure of any of its GPUs over the last OSMO_IDLE_GPU_MINUTES (None: a pod had none).
    peak = models.FloatField(null=True, blank=True, help_text="Percent.")
    # Since when every figure stayed under OSMO_IDLE_GPU_PERCENT (scheduling.decisions.idle), or None.
    idle_since = models.DateTimeField(null=True, blank=True, db_index=True)
    # A notebook's idle rule (scheduling.run.idle_notebooks): since when every figure stayed under the rule's own
    # percent, kept by the sweep (the sampler's round leaves it alone).
    rule_idle_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-measured_at"]

    def __str__(self) -> str:
        return f"{self.workload_id} {self.average}% at {self.measured_at:%Y-%m-%d %H:%M}"


class UtilizationState(models.Model):
    """One row: the sampler's last round (osmo_gpu_utilization_* on /metrics)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    failures = models.PositiveIntegerField(default=0, help_text="Rounds failed in a row.")

    def __str__(self) -> str:
        return f"utilization (last success {self.last_success_at})"
