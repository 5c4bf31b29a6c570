"""What exists: backends (clusters), pools, platforms, pod templates, resource validations, and the
numbered revisions of every configuration change.

References from pools and platforms to templates and validations are ordered lists of names, as in
OSMO's documents; `pools.config.writes` keeps them pointing at objects that exist.
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from pools.engine import ConfigError
from pools.inventory.status import check_node_condition_rules

from .names import name_field
from .visibility import access_for


class PoolQuerySet(models.QuerySet):
    def visible_to(self, user) -> "PoolQuerySet":
        """The pools `user` may use (a user, or a request whose user is taken). Lazy: it adds a
        WHERE clause; the user's roles are read once per request."""
        return access_for(user).filter_pools(self)


class Backend(models.Model):
    class Kind(models.TextChoices):
        KUBERNETES = "kubernetes", "Kubernetes cluster"
        SIMULATED = "simulated", "Simulated cluster (demo)"

    class Scheduler(models.TextChoices):
        DEFAULT = "default", "Kubernetes default scheduler"
        KAI = "kai", "KAI Scheduler"
        KUEUE = "kueue", "Kueue"

    name = name_field(unique=True)
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
    jobs_resource_version = models.CharField(max_length=64, blank=True, editable=False)
    engine_resource_version = models.CharField(max_length=64, blank=True, editable=False)  # PodGroups, Workloads
    events_resource_version = models.CharField(max_length=64, blank=True, editable=False)  # FailedCreate Events
    last_sync_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The last complete list: the sync lists again OSMO_RELIST_SECONDS after it, whatever the watches say.
    listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    sync_error = models.TextField(blank=True, editable=False)
    sync_failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    # A lease, not a lock held by a connection: it expires by itself if its worker dies.
    sync_lease_owner = models.CharField(max_length=128, blank=True, editable=False)
    sync_lease_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The engine's objects we manage (KAI Queues and Topologies, Kueue's queues): the last reconcile, what it
    # found ({kind: count}, with what it changed) and its failure, if any (pools.schedulers.reconcile).
    engine_reconciled_at = models.DateTimeField(null=True, blank=True, editable=False)
    engine_objects = models.JSONField(default=dict, blank=True, editable=False)
    engine_error = models.TextField(blank=True, editable=False)
    # The objects the API server refused in the last reconcile, each with its words ([{kind, namespace, name,
    # action, message, since, at}]); a run that writes them clears them.
    engine_refused = models.JSONField(default=list, blank=True, editable=False)
    # The uid of the cluster's kube-system namespace, read at `backend add`: one cluster is registered once.
    cluster_uid = models.CharField(max_length=64, blank=True, editable=False)
    # The backend this one deliberately shares its cluster with (`backend add --same-cluster-as`).
    same_cluster_as = models.CharField(max_length=128, blank=True, editable=False)
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
        self.clean_engine()

    def cluster_partners(self) -> list["Backend"]:
        """The other backends on this one's cluster, oldest first: the same kube-system uid, or split with it on
        purpose (`same_cluster_as`, either way round, and the backends split with those)."""
        others = list(Backend.objects.exclude(pk=self.pk).order_by("created_at", "pk"))
        members: list[Backend] = []
        names, uids, targets = {self.name}, {self.cluster_uid} - {""}, {self.same_cluster_as} - {""}
        grew = True
        while grew:
            grew = False
            for other in others:
                if other in members or other.name == self.name:
                    continue
                if (other.cluster_uid and other.cluster_uid in uids) or other.same_cluster_as in names \
                        or other.name in targets:
                    members.append(other)
                    names.add(other.name)
                    uids |= {other.cluster_uid} - {""}
                    targets |= {other.same_cluster_as} - {""}
                    grew = True
        return [other for other in others if other in members]

    def clean_engine(self) -> None:
        """One backend per engine and cluster. Kueue's Cohorts, ClusterQueues and LocalQueues are one per department
        and project, cluster-wide, so a second Kueue backend would find every one of them taken by the first
        (refused on each reconcile). KAI's Queue names are per pool and would not collide, but the cluster has one
        kai-scheduler, which divides the whole cluster among the top-level Queues of both trees: each backend's
        quotas would then be shares of GPUs the other backend also counts as its own. So a second backend of an
        engine kind on a cluster is refused as it is configured, naming the first (a default-scheduler backend, or
        one of the other engine, may share the cluster)."""
        if self.scheduler not in (self.Scheduler.KUEUE, self.Scheduler.KAI):
            return
        first = next((other for other in self.cluster_partners() if other.scheduler == self.scheduler), None)
        if first is None:
            return
        if self.scheduler == self.Scheduler.KUEUE:
            why = ("a second Kueue backend would write the same Cohorts, ClusterQueues and LocalQueues (one per "
                   "department and project, cluster-wide) and find them taken")
        else:
            why = ("the cluster's one kai-scheduler would divide all its GPUs between the Queues of both backends, "
                   "so neither backend's quotas would hold")
        engine = "KAI" if self.scheduler == self.Scheduler.KAI else "Kueue"
        raise ValidationError({"scheduler": (
            f"Backend {first.name} already runs {engine} on this cluster; {why}. Put this backend's pools on "
            f"backend {first.name}, or choose another scheduler for this one.")})


class Pool(models.Model):
    DEFAULT_NAME = "default"

    name = name_field(unique=True)
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
    placement = models.CharField(max_length=8, default="binpack", choices=[("binpack", "Bin-pack"),
                                                                           ("spread", "Spread")],
                                 help_text="Where admission places replicas: the fullest nodes that fit, or the "
                                           "emptiest.")
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
    name = name_field()
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


class PodTemplate(models.Model):
    name = name_field(unique=True)
    body = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ResourceValidation(models.Model):
    name = name_field(unique=True)
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
    DEPARTMENT = "DEPARTMENT", "Department"
    PROJECT = "PROJECT", "Project"


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
        ROLLBACK = "rollback"  # the object restored as it was at an earlier revision

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
