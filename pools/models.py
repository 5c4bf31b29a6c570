"""What exists: backends (clusters), pools, platforms, pod templates, resource validations, and the
numbered revisions of every configuration change.

References from pools and platforms to templates and validations are ordered lists of names, as in
OSMO's documents; `pools.configs` keeps them pointing at objects that exist.
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from .access.querysets import NodeQuerySet, PoolQuerySet
from .documents import NAME_PATTERN, ConfigError, check_node_condition_rules
from .inventory.nodes import label_text

name_validator = RegexValidator(
    NAME_PATTERN,
    message="Names start with a letter, end with a letter or digit, and use only letters, digits, _ . -",
)


def _name_field(**kwargs) -> models.CharField:
    return models.CharField(max_length=128, validators=[name_validator], **kwargs)


class Backend(models.Model):
    class Kind(models.TextChoices):
        KUBERNETES = "kubernetes", "Kubernetes cluster"
        SIMULATED = "simulated", "Simulated cluster (demo)"

    class Scheduler(models.TextChoices):
        DEFAULT = "default", "Kubernetes default scheduler"
        KAI = "kai", "KAI Scheduler"
        KUEUE = "kueue", "Kueue"

    name = _name_field(unique=True)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.KUBERNETES)
    kubeconfig_path = models.CharField(max_length=1024, blank=True)
    kube_context = models.CharField(max_length=253, blank=True)
    in_cluster = models.BooleanField(default=False, help_text="Use the service account of the pod we run in.")
    scheduler = models.CharField(max_length=16, choices=Scheduler.choices, default=Scheduler.DEFAULT)
    node_condition_rules = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"ignore": [condition types], "unhealthy_when": {TYPE: STATUS}}',
    )
    toolkit_on_host = models.BooleanField(
        default=False,
        help_text="The NVIDIA Container Toolkit is installed on the hosts, so no toolkit pod is expected on GPU nodes.",
    )
    # Sync state: where the watches stand, the last good sync, and the current failure, if any.
    nodes_resource_version = models.CharField(max_length=64, blank=True, editable=False)
    pods_resource_version = models.CharField(max_length=64, blank=True, editable=False)
    last_sync_at = models.DateTimeField(null=True, blank=True, editable=False)
    sync_error = models.TextField(blank=True, editable=False)
    sync_failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    # A lease, not a lock held by a connection: it expires by itself if its worker dies.
    sync_lease_owner = models.CharField(max_length=128, blank=True, editable=False)
    sync_lease_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~(models.Q(in_cluster=True) & ~models.Q(kubeconfig_path="")),
                name="backend_in_cluster_or_kubeconfig",
                violation_error_message="Choose either in-cluster configuration or a kubeconfig path, not both.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            check_node_condition_rules(self.node_condition_rules)
        except ConfigError as exc:
            raise ValidationError({"node_condition_rules": exc.message}) from None
        if self.pk and self.scheduler != self.Scheduler.KAI:
            users = [pool.name for pool in self.pools.only("name", "topology_keys") if pool.topology_keys]
            if users:
                raise ValidationError({"scheduler": f"Pools {', '.join(users)} use topology_keys, which need the "
                                                    "KAI scheduler; remove their topology_keys first."})


class Pool(models.Model):
    DEFAULT_NAME = "default"

    name = _name_field(unique=True)
    description = models.TextField(blank=True)
    backend = models.ForeignKey(Backend, on_delete=models.PROTECT, related_name="pools")
    default_platform = models.CharField(max_length=128, blank=True)
    enable_maintenance = models.BooleanField(default=False)
    common_default_variables = models.JSONField(default=dict, blank=True)
    common_resource_validations = models.JSONField(default=list, blank=True)
    common_pod_template = models.JSONField(default=list, blank=True)
    default_exec_timeout = models.CharField(max_length=64, blank=True)
    default_queue_timeout = models.CharField(max_length=64, blank=True)
    max_exec_timeout = models.CharField(max_length=64, blank=True)
    max_queue_timeout = models.CharField(max_length=64, blank=True)
    default_exit_actions = models.JSONField(default=dict, blank=True)
    action_permissions = models.JSONField(default=dict, blank=True)
    resources = models.JSONField(default=dict, blank=True)
    topology_keys = models.JSONField(default=list, blank=True)
    node_selector = models.JSONField(
        default=dict, blank=True, help_text="Label selector for pool membership (gpuctl / Run:ai style)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = PoolQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_default(self) -> bool:
        return self.name == self.DEFAULT_NAME


class Platform(models.Model):
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="platforms")
    name = _name_field()
    position = models.PositiveIntegerField(default=0, editable=False)
    description = models.TextField(blank=True)
    host_network_allowed = models.BooleanField(default=False)
    privileged_allowed = models.BooleanField(default=False)
    default_variables = models.JSONField(default=dict, blank=True)
    resource_validations = models.JSONField(default=list, blank=True)
    override_pod_template = models.JSONField(default=list, blank=True)
    allowed_mounts = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["pool", "position", "name"]
        constraints = [models.UniqueConstraint(fields=["pool", "name"], name="platform_unique_in_pool")]

    def __str__(self) -> str:
        return f"{self.pool.name}/{self.name}"


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

    class Meta:
        constraints = [models.UniqueConstraint(fields=["backend", "uid"], name="pod_unique_in_backend")]
        indexes = [models.Index(fields=["backend", "node_name"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


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


class PodTemplate(models.Model):
    name = _name_field(unique=True)
    body = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ResourceValidation(models.Model):
    name = _name_field(unique=True)
    rules = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ConfigKind(models.TextChoices):
    POOL = "POOL", "Pool"
    POD_TEMPLATE = "POD_TEMPLATE", "Pod template"
    RESOURCE_VALIDATION = "RESOURCE_VALIDATION", "Resource validation"
    ROLE = "ROLE", "Role"


class RevisionCounter(models.Model):
    """Last revision number handed out per kind; its row is locked while a revision is written so
    numbers stay gap-free and unique under concurrent writers."""

    kind = models.CharField(max_length=32, choices=ConfigKind.choices, primary_key=True)
    last = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.kind}: {self.last}"


class ConfigRevision(models.Model):
    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"

    kind = models.CharField(max_length=32, choices=ConfigKind.choices)
    name = models.CharField(max_length=128)
    number = models.PositiveIntegerField()
    action = models.CharField(max_length=8, choices=Action.choices)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    author_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    description = models.TextField(blank=True)
    # The object's whole document after the change (before it, for a delete).
    document = models.JSONField()

    class Meta:
        ordering = ["kind", "-number"]
        constraints = [models.UniqueConstraint(fields=["kind", "number"], name="revision_number_unique_per_kind")]
        indexes = [models.Index(fields=["kind", "name", "-number"])]

    def __str__(self) -> str:
        return f"{self.kind} r{self.number} {self.name} ({self.action})"


# Access control lives in its own package; importing it here registers its models in this app.
from .access.models import AccessToken, Role, RoleAssignment  # noqa: E402, F401


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


class TablePreference(models.Model):
    """The columns a user chose for one table of the pages, in the order shown."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="table_preferences")
    table = models.CharField(max_length=64)
    columns = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "table"], name="table_preference_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.table}"
