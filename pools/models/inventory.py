"""The cluster as last seen: nodes, which pools they belong to, the pods bound to them, what changed on each
node, the sync's log, and the periodic usage snapshots that the charts draw."""

from django.db import models
from django.db.models import Exists, F, OuterRef
from django.db.models.functions import Coalesce, Greatest

from pools.inventory.nodes import label_text

from .config import Backend, Pool
from .visibility import access_for


class NodeQuerySet(models.QuerySet):
    def visible_to(self, user) -> "NodeQuerySet":
        """Nodes with a membership in a pool `user` may use; staff also see nodes in no pool."""
        access = access_for(user)
        if access.is_staff:
            return self
        pools = access.filter_pools(Pool.objects.all())
        return self.filter(Exists(NodeMembership.objects.filter(node=OuterRef("pk"), pool__in=pools)))


def last_contact_sql() -> Greatest:
    """`usage.last_contact` in SQL, so that tables sort by it and CSV exports write it: read at display time
    rather than written to every node every round, which would cost the sync."""
    sync = F("backend__last_sync_at")
    return Greatest(Coalesce("last_seen", sync), Coalesce(sync, "last_seen"))


class NodeRows(NodeQuerySet):
    """Writes that keep `Node.label_text` in step with `Node.labels`."""

    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        for node in objs:
            node.label_text = label_text(node.labels)
        return super().bulk_create(objs, *args, **kwargs)

    def update(self, **kwargs):
        if isinstance(kwargs.get("labels"), dict):
            kwargs.setdefault("label_text", label_text(kwargs["labels"]))
        return super().update(**kwargs)


class Node(models.Model):
    """A cluster node as last seen, with its usage computed the way `kubectl describe node` does.
    CPU is in millicores, memory and storage in bytes."""

    class Sharing(models.TextChoices):
        RESERVED = "RESERVED"
        SHARED = "SHARED"
        UNUSED = "UNUSED"

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict)
    # `labels` as shown and exported (inventory.nodes.label_text), kept in step by save(), bulk_create(),
    # update(labels=...) and the sync, so that exports need no per-row sort.
    label_text = models.TextField(default="", blank=True, editable=False)
    taints = models.JSONField(default=list)
    unschedulable = models.BooleanField(default=False)
    conditions = models.JSONField(default=list)
    components = models.JSONField(default=dict)
    cpu_capacity = models.BigIntegerField(default=0)
    cpu_allocatable = models.BigIntegerField(default=0)
    cpu_requested = models.BigIntegerField(default=0)
    memory_capacity = models.BigIntegerField(default=0)
    memory_allocatable = models.BigIntegerField(default=0)
    memory_requested = models.BigIntegerField(default=0)
    storage_capacity = models.BigIntegerField(default=0)
    storage_allocatable = models.BigIntegerField(default=0)
    pods_capacity = models.IntegerField(default=0)
    pods_allocatable = models.IntegerField(default=0)
    gpu_product = models.CharField(max_length=128, blank=True)
    gpu_count = models.IntegerField(default=0)
    gpu_memory_mib = models.IntegerField(default=0)
    gpu_family = models.CharField(max_length=64, blank=True)
    gpu_total = models.IntegerField(default=0)
    gpu_allocatable = models.IntegerField(default=0)
    gpu_used = models.IntegerField(default=0)
    gpu_free = models.IntegerField(default=0)
    gpu_unhealthy = models.IntegerField(default=0)
    status = models.CharField(max_length=64, default="Unknown")
    reasons = models.JSONField(default=list)
    # Denormalised from NodeMembership for display and CSV; filtering and sums use NodeMembership.
    pool_names = models.JSONField(default=list)
    platform_names = models.JSONField(default=list)
    sharing = models.CharField(max_length=8, choices=Sharing.choices, default=Sharing.UNUSED)
    last_seen = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)

    objects = NodeRows.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["backend", "name"], name="node_unique_in_backend")]
        indexes = [models.Index(fields=["status"]), models.Index(fields=["gpu_product"])]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs):
        self.label_text = label_text(self.labels)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "labels" in update_fields:
            kwargs["update_fields"] = {*update_fields, "label_text"}
        super().save(*args, **kwargs)

    @property
    def ready(self) -> bool:
        return self.status == "Ready"


class NodeMembership(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="memberships")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="memberships")
    platforms = models.JSONField(default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "pool"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.node.name} in {self.pool.name}"


class Pod(models.Model):
    """The few facts of a bound, non-terminal pod that node usage and status need."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="pods")
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    node_name = models.CharField(max_length=253)
    phase = models.CharField(max_length=16)
    gpu = models.IntegerField(default=0)
    cpu = models.BigIntegerField(default=0)
    memory = models.BigIntegerField(default=0)
    component = models.CharField(max_length=16, blank=True)
    pool = models.CharField(max_length=128, blank=True)
    # A pod of one of our low-priority workloads (our managed-by and priority labels): its use may be borrowed
    # and reclaimed. Every other pod, ours or not, counts as non-preemptible.
    preemptible = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["backend", "uid"], name="pod_unique_in_backend")]
        indexes = [models.Index(fields=["backend", "node_name"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class NodeEvent(models.Model):
    """A change of a node the sync (or a cordon, or a configuration write) recorded: it appeared or left, its
    status, cordon or pools changed (`pools.inventory.node_events`). Keyed by the node's name, not its row, so
    that a node that leaves and comes back keeps its history; kept `OSMO_NODE_EVENTS_KEEP_DAYS`."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="node_events")
    node = models.CharField(max_length=253)
    at = models.DateTimeField()
    kind = models.CharField(max_length=16)
    details = models.JSONField(default=dict)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["backend", "node", "-at"], name="node_event_by_node"),
                   models.Index(fields=["at"], name="node_event_by_time")]

    def __str__(self) -> str:
        return f"{self.node} {self.at:%Y-%m-%d %H:%M:%S} {self.kind}"


class SyncLog(models.Model):
    """Errors and notable events of a backend's sync, shown on the backend's admin page."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="sync_logs")
    at = models.DateTimeField(auto_now_add=True)
    level = models.CharField(max_length=8, default="error")
    message = models.TextField()

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.backend.name} {self.at:%Y-%m-%d %H:%M:%S} {self.message[:60]}"


class UsageSnapshot(models.Model):
    """A pool's figures at one moment, stored by the periodic `record_usage_snapshots` task so the pages
    can chart the last 24 hours (the live figures are summed from nodes; history needs a row)."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="usage_snapshots")
    at = models.DateTimeField()
    node_count = models.IntegerField(default=0)
    gpu_total = models.IntegerField(default=0)
    gpu_used = models.IntegerField(default=0)
    gpu_free = models.IntegerField(default=0)
    gpu_unhealthy = models.IntegerField(default=0)
    cpu_total = models.BigIntegerField(default=0, help_text="Millicores.")
    cpu_used = models.BigIntegerField(default=0, help_text="Millicores.")
    memory_total = models.BigIntegerField(default=0, help_text="Bytes.")
    memory_used = models.BigIntegerField(default=0, help_text="Bytes.")

    class Meta:
        ordering = ["pool", "at"]
        indexes = [models.Index(fields=["pool", "at"]), models.Index(fields=["at"])]

    def __str__(self) -> str:
        return f"{self.pool_id} {self.at:%Y-%m-%d %H:%M} {self.gpu_used}/{self.gpu_total}"


class ManagedJob(models.Model):
    """One Job we created (labelled `<prefix>managed-by`), as the sync last saw it with its pods: the facts
    `scheduling.decisions.lifecycle` moves a workload by (`pools.inventory.jobs`). `workload` is the Job's label value:
    pools knows no workloads. A row may come from a pod before its Job's own event; `gone` once the Job is
    deleted from the cluster."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="managed_jobs")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    workload = models.CharField(max_length=64, db_index=True)
    attempt = models.PositiveIntegerField(default=0)
    job = models.JSONField(default=dict, blank=True)  # job_facts; {} until the Job's own event
    pods = models.JSONField(default=dict, blank=True)  # pod name -> pod_run_facts (kept after the pod goes)
    engine = models.JSONField(default=dict, blank=True)  # engine_facts: why KAI or Kueue holds it back, or {}
    # The Job controller's last FailedCreate Event: {"message", "since" (its first time), "at" (its last)}, or {}.
    create_failure = models.JSONField(default=dict, blank=True)
    gone = models.BooleanField(default=False)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["backend", "namespace", "name"], name="managed_job_unique")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
