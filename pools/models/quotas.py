"""Who is guaranteed what: departments contain projects; a quota is one (department or project, pool)
row with, per resource, what it deserves, its limit and its over-quota weight (Run:ai's model,
docs/concepts.md). No row means deserved 0, no limit, weight Medium.

Units: GPUs as decimals (two places), CPU in millicores, memory in bytes. A limit of -1 is no limit.
An over-quota weight of None (null) means the unit may never go above what it deserves. A null deserved
means the document set no quota for that resource (a project: 0; a department: its projects' sum).
"""

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef, Q

from .config import Pool
from .names import name_field
from .preferences import Profile
from .visibility import access_for

RESOURCES = ("gpu", "cpu", "memory")
MEDIUM = 2


class DepartmentQuerySet(models.QuerySet):
    def visible_to(self, user) -> "DepartmentQuerySet":
        """Staff see every department; others the departments of the projects they belong to."""
        if access_for(user).is_staff:
            return self
        return self.filter(Exists(Project.objects.visible_to(user).filter(department=OuterRef("pk"))))


def may_see_project(access, name: str, *, member: bool, own_pool: str | None) -> bool:
    """`ProjectQuerySet.visible_to`'s rule for one project whose row is at hand: `member` (named as a member, or
    holding a member role) and `own_pool` (the pool whose own project it is) read with it."""
    if access.is_staff:
        return True
    if not access.signed_in:
        return False
    return (member or (own_pool is not None and access.may_use_pool(own_pool))
            or (settings.OSMO_DEFAULT_PROJECT_OPEN and name == Project.DEFAULT_NAME))


def default_project_name(access, *, chosen: bool = True) -> str:
    """The project a submission that names none goes to: the one the user chose (their profile; `chosen` False:
    the caller read it and there is none), else the only project they are a member of by name or role (when
    there is exactly one), else `default`."""
    if not access.signed_in:
        return Project.DEFAULT_NAME
    if chosen:
        name = Profile.objects.filter(user=access.user, default_project__isnull=False).values_list(
            "default_project__name", flat=True).first()
        if name:
            return name
    named = access.member_projects
    return named[0] if len(named) == 1 else Project.DEFAULT_NAME


class ProjectQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ProjectQuerySet":
        """The projects `user` belongs to (all of them for staff): named as a member, holding a member role,
        the `default` project (open unless OSMO_DEFAULT_PROJECT_OPEN is off), or the own project of a
        pool the user may use. `may_see_project` is the same rule for one row."""
        access = access_for(user)
        if access.is_staff:
            return self
        if not access.signed_in:
            return self.none()
        condition = Q(name__in=access.member_projects) | Q(pool__in=Pool.objects.visible_to(user))
        if settings.OSMO_DEFAULT_PROJECT_OPEN:
            condition |= Q(name=Project.DEFAULT_NAME)
        return self.filter(condition)


class Department(models.Model):
    DEFAULT_NAME = "default"
    POOLS_NAME = "pools"  # holds the project of each OSMO pool that carries `resources.gpu`

    name = name_field(unique=True)
    description = models.TextField(blank=True)
    default_node_pools = models.JSONField(default=list, blank=True, help_text="Pool names, tried in order.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DepartmentQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    DEFAULT_NAME = "default"

    name = name_field(unique=True)
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="projects")
    description = models.TextField(blank=True)
    namespace = models.CharField(max_length=63, unique=True, help_text="Kubernetes namespace; proj-<name> by default.")
    default_node_pools = models.JSONField(default=list, blank=True, help_text="Pool names, tried in order.")
    # The project of an OSMO pool (its `resources.gpu`): members are everyone who may use that pool.
    pool = models.OneToOneField(Pool, null=True, blank=True, on_delete=models.SET_NULL, related_name="own_project")
    # Submission limits of this project that differ from the settings' ({name: number}; scheduling.submit.limits).
    limits = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ProjectMember(models.Model):
    """A user (by user name, so a document may name someone who has not signed in yet) or a role whose
    holders are members."""

    class Kind(models.TextChoices):
        USER = "user"
        ROLE = "role"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="members")
    kind = models.CharField(max_length=4, choices=Kind.choices)
    name = models.CharField(max_length=150)

    class Meta:
        ordering = ["project", "kind", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "kind", "name"], name="project_member_unique")]
        indexes = [models.Index(fields=["kind", "name"])]

    def __str__(self) -> str:
        return f"{self.project_id} {self.kind} {self.name}"


def _weight_field() -> models.SmallIntegerField:
    return models.SmallIntegerField(null=True, blank=True, default=MEDIUM,
                                    help_text="None: never above deserved; Lowest 0, Low 1, Medium 2, High 3.")


class Quota(models.Model):
    department = models.ForeignKey(Department, null=True, blank=True, on_delete=models.CASCADE, related_name="quotas")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="quotas")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="quotas")
    gpu_deserved = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True, default=0)
    gpu_limit = models.DecimalField(max_digits=12, decimal_places=2, default=-1)
    gpu_weight = _weight_field()
    cpu_deserved = models.BigIntegerField(null=True, blank=True, default=0, help_text="Millicores.")
    cpu_limit = models.BigIntegerField(default=-1, help_text="Millicores; -1 is no limit.")
    cpu_weight = _weight_field()
    memory_deserved = models.BigIntegerField(null=True, blank=True, default=0, help_text="Bytes.")
    memory_limit = models.BigIntegerField(default=-1, help_text="Bytes; -1 is no limit.")
    memory_weight = _weight_field()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool", "department", "project"]
        constraints = [
            models.CheckConstraint(condition=Q(department__isnull=True, project__isnull=False)
                                   | Q(department__isnull=False, project__isnull=True),
                                   name="quota_of_department_or_project"),
            models.UniqueConstraint(fields=["department", "pool"], name="quota_unique_department_pool"),
            models.UniqueConstraint(fields=["project", "pool"], name="quota_unique_project_pool"),
            *[models.CheckConstraint(condition=Q(**{f"{r}_deserved__gte": 0}), name=f"quota_{r}_deserved_not_negative")
              for r in RESOURCES],
            *[models.CheckConstraint(condition=Q(**{f"{r}_limit__gte": -1}), name=f"quota_{r}_limit_valid")
              for r in RESOURCES],
        ]

    def __str__(self) -> str:
        return f"{self.project or self.department} in {self.pool}"
