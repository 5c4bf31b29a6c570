"""Log archives: the last OSMO_LOG_ARCHIVE_BYTES of each replica's log of an ended attempt, kept in the database so
that logs stay readable after the Job's TTL, a deleted Job or a lost node (issue 26, "Evidence kept").

The row is the durable fact, written when the attempt ends (`scheduling.run.attempts.finish`, in its transaction);
a Celery task fills it from the cluster on commit (`scheduling.run.log_archive`), and the lifecycle sweep sends it
again for rows left PENDING. Filling is idempotent: only PENDING rows are read, each under its row lock."""

from django.conf import settings
from django.db import models

from pools.models import Backend

from .workloads import Workload


class LogArchive(models.Model):
    class State(models.TextChoices):
        PENDING = "PENDING"  # the attempt ended; its log is not read yet
        KEPT = "KEPT"  # `data` holds the end of the log
        MISSING = "MISSING"  # the pod was gone before its log could be read (`message` says why)

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="log_archives")
    attempt = models.PositiveIntegerField()
    replica = models.PositiveIntegerField(help_text="The pod's completion index in its Job.")
    # Where the replica ran, from the sync's pod facts: kept with the log, after the Job and its rows go.
    backend = models.ForeignKey(Backend, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    container = models.CharField(max_length=253)
    node = models.CharField(max_length=253, blank=True)
    pod_ip = models.CharField(max_length=64, blank=True)
    phase = models.CharField(max_length=32, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    # The log's last bytes, each line prefixed with its RFC 3339 time as the kubelet writes it (timestamps=true).
    data = models.BinaryField(default=b"", blank=True)
    truncated = models.BooleanField(default=False, help_text="Earlier lines did not fit OSMO_LOG_ARCHIVE_BYTES.")
    message = models.TextField(blank=True)
    created_at = models.DateTimeField()
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workload", "attempt", "replica"]
        constraints = [models.UniqueConstraint(fields=["workload", "attempt", "replica"],
                                               name="log_archive_one_per_replica")]
        indexes = [models.Index(fields=["state", "created_at"])]

    def __str__(self) -> str:
        return f"{self.workload_id} attempt {self.attempt} replica {self.replica} ({self.state})"


class FollowLease(models.Model):
    """One log follow open somewhere on the site, so that every web process counts a user's follows alike
    (OSMO_LOG_FOLLOWS_PER_USER; `scheduling.run.follow_limits`). Deleted when the follow ends; one whose process
    died holding it no longer counts once `expires_at` (the end of its window) has passed."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.user_id} until {self.expires_at:%Y-%m-%d %H:%M:%S}"
