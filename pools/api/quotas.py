"""`/api/projects/`, `/api/departments/`, `/api/quotas/`: departments, projects and the quota table as rows.

Every signed-in user may read them; the rows are theirs: the projects they belong to
(`Project.objects.visible_to`), the departments of those projects, and the quota rows of those projects in
the pools they may use (fair shares computed over everyone). Staff see everything, department rows
included. A pool, project or department the caller may not see answers as one that does not exist.
Units: GPUs as numbers (to hundredths), CPU in cores (decimal), memory in bytes; a limit of -1 is none.
Lists answer every row unless `limit` / `offset` ask for a page (`pools.api.pagination`). Viewsets, routed
by `pools.api.urls`.
"""

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.access.scoping import Rule
from pools.access.serializers import named
from pools.engine import ConfigError
from pools.models import Department, Pool, Project
from pools.models.visibility import access_for
from pools.quotas import listing, onboarding
from pools.quotas.documents import WEIGHTS

from .pagination import OptionalLimitOffsetPagination

PROJECT_NAME = named("name", "project")
DEPARTMENT_NAME = named("name", "department")


@extend_schema_field(OpenApiTypes.NUMBER)
class NumberField(serializers.Field):
    """A figure as a JSON number: whole values as integers (8), others as decimals (0.5)."""

    def to_representation(self, value):
        if isinstance(value, Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        return value


def _figures_serializer(name: str, unit: str, field_class) -> type[serializers.Serializer]:
    def figure(text: str):
        return field_class(help_text=f"{text} ({unit}).")

    fields = {
        "deserved": figure("Guaranteed quota; for a department without a row, the sum of its projects'"),
        "limit": figure("At most this much, borrowing included; -1: no limit"),
        "over_quota_weight": serializers.ChoiceField(
            choices=list(WEIGHTS), help_text="Share of idle capacity above deserved: None (never above deserved), "
                                             "Lowest (may borrow, no over-quota share), Low, Medium, High."),
        "allocated": figure("Requested by the unit's running pods in this pool"),
        "allocated_non_preemptible": figure("The part of allocated that cannot be preempted: every pod but those of "
                                            "our low-priority workloads; what admission holds against deserved"),
        "fair_share": figure("What the unit gets now: deserved (up to its demand) plus its share of idle capacity"),
        "over_quota": figure("Allocated above deserved (borrowed), low-priority work first; 0 within it. "
                             "allocated - over_quota is guaranteed"),
        "pending": figure("Requested by the unit's waiting workloads (those whose first candidate pool this is); "
                          "fair share divides the capacity by allocated + pending"),
        "starved": serializers.BooleanField(help_text="Work waits here while allocated is under deserved."),
    }
    return type(name, (serializers.Serializer,), {**fields, "__doc__": f"Quota figures of one resource, in {unit}."})


GpuFiguresSerializer = _figures_serializer("GpuFiguresSerializer", "GPUs", NumberField)
CpuFiguresSerializer = _figures_serializer("CpuFiguresSerializer", "CPU cores, decimal: 0.5 is 500m", NumberField)
MemoryFiguresSerializer = _figures_serializer("MemoryFiguresSerializer", "bytes", serializers.IntegerField)


class QuotaRowSerializer(serializers.Serializer):
    pool = serializers.CharField()
    department = serializers.CharField()
    project = serializers.CharField(allow_null=True, help_text="null: the department's own row (staff only).")
    gpu = GpuFiguresSerializer()
    cpu = CpuFiguresSerializer()
    memory = MemoryFiguresSerializer()
    shared_usage = serializers.BooleanField(
        help_text="Some pods carry no pool label and sit on a node of several pools: they count in each.")


class MembersSerializer(serializers.Serializer):
    users = serializers.ListField(child=serializers.CharField())
    roles = serializers.ListField(child=serializers.CharField(),
                                  help_text="Holders are members; others than staff see only roles they hold.")


class ProjectSerializer(serializers.Serializer):
    name = serializers.CharField()
    department = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    namespace = serializers.CharField(help_text="The Kubernetes namespace of the project's work.")
    default_node_pools = serializers.ListField(child=serializers.CharField(), help_text="Pools tried in order.")
    pool = serializers.CharField(allow_null=True,
                                 help_text="The OSMO pool whose resources.gpu this project stands for, if any.")
    members = MembersSerializer()


class ProjectDetailSerializer(ProjectSerializer):
    quotas = QuotaRowSerializer(many=True, help_text="The project's rows of the quota table, pool by pool.")


class MemberAddBody(serializers.Serializer):
    user = serializers.CharField(max_length=onboarding.WHO_MAX_LENGTH,
                                 help_text="A user name or an e-mail address; the account is created if none has it.")


class MemberAddedSerializer(serializers.Serializer):
    project = serializers.CharField()
    user = serializers.CharField(help_text="The account's user name.")
    created = serializers.BooleanField(help_text="A new account was created.")
    added = serializers.BooleanField(help_text="False: already a member by name (nothing changed).")
    pools = serializers.ListField(child=serializers.CharField(), help_text="Where the project has a quota.")
    password = serializers.CharField(allow_null=True, help_text="A new account's password, answered this once.")
    summary = serializers.CharField()


class DepartmentSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    default_node_pools = serializers.ListField(child=serializers.CharField(), help_text="Pools tried in order.")
    projects = serializers.ListField(child=serializers.CharField(), help_text="Its projects the caller may see.")


class _ScopedViewSet(viewsets.GenericViewSet):
    """Reads for every signed-in user, rows scoped by `visible_to`; lists whole unless limit/offset ask for a
    page, as the inventory's."""

    read_access = Rule.SIGNED_IN
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    pagination_class = OptionalLimitOffsetPagination

    def viewer(self) -> listing.Viewer:
        if not hasattr(self, "_viewer"):
            self._viewer = listing.viewer_of(self.request)
        return self._viewer

    def answer(self, items, row, serializer: type[serializers.Serializer]) -> Response:
        """`row(item)` of every item, or of those on the requested page."""
        page = self.paginate_queryset(items)
        data = serializer([row(item) for item in (items if page is None else page)], many=True).data
        return Response(data) if page is None else self.get_paginated_response(data)


class ProjectViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, _ScopedViewSet):
    """The projects the caller belongs to (all of them for staff). A project outside them answers 404."""

    serializer_class = ProjectSerializer

    def get_queryset(self):
        return listing.projects(Project.objects.visible_to(self.request))

    def list(self, request, *args, **kwargs):
        viewer = self.viewer()
        return self.answer(self.get_queryset(), lambda project: listing.project_row(project, viewer),
                           ProjectSerializer)

    @extend_schema(responses=ProjectDetailSerializer, parameters=[PROJECT_NAME])
    def retrieve(self, request, *args, **kwargs):
        project, viewer = self.get_object(), self.viewer()
        pools = list(Pool.objects.visible_to(request).order_by("name"))
        row = {**listing.project_row(project, viewer), "quotas": listing.quota_rows(pools, [project])}
        return Response(ProjectDetailSerializer(row).data)

    @extend_schema(request=MemberAddBody, responses={201: MemberAddedSerializer, 200: MemberAddedSerializer},
                   parameters=[PROJECT_NAME])
    @action(detail=True, methods=["post"], url_path="members")
    def members(self, request, name=None):
        """Onboard a person in one step (staff, or a role allowing this path): their account (created if none has
        that user name or e-mail address), their membership by name, and with it the project's pools."""
        data = request.data if isinstance(request.data, dict) else {}
        who = data.get("user")
        if not isinstance(who, str):
            raise ConfigError("user: give a user name or an e-mail address", field="user")
        done = onboarding.onboard(name, who, author=request.user, door="API")
        return Response(done.as_dict(), status=201 if done.added or done.created else 200)


class DepartmentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, _ScopedViewSet):
    """The departments of the caller's projects (all of them for staff), each with the projects the caller
    may see. A department outside them answers 404."""

    serializer_class = DepartmentSerializer

    def get_queryset(self):
        return listing.departments(Department.objects.visible_to(self.request),
                                   Project.objects.visible_to(self.request))

    def list(self, request, *args, **kwargs):
        viewer = self.viewer()
        return self.answer(self.get_queryset(), lambda department: listing.department_row(department, viewer),
                           DepartmentSerializer)

    @extend_schema(parameters=[DEPARTMENT_NAME])
    def retrieve(self, request, *args, **kwargs):
        return Response(DepartmentSerializer(listing.department_row(self.get_object(), self.viewer())).data)


class QuotaViewSet(_ScopedViewSet):
    """The quota table, one row per (department or project, pool). Staff see every row, department rows
    included; others the rows of their projects in the pools they may use. A filter naming a pool, project
    or department the caller may not see answers as one that does not exist: no rows."""

    serializer_class = QuotaRowSerializer

    @extend_schema(parameters=[OpenApiParameter("pool", description="Only this pool's rows."),
                               OpenApiParameter("project", description="Only this project's rows."),
                               OpenApiParameter("department", description="Only this department's rows "
                                                                          "(its own row and its projects').")],
                   responses=QuotaRowSerializer(many=True))
    def list(self, request):
        params = request.query_params
        pools = Pool.objects.visible_to(request).order_by("name")
        if params.get("pool"):
            pools = pools.filter(name=params["pool"])
        projects = None if access_for(request).is_staff else Project.objects.visible_to(request)
        if params.get("project"):
            projects = (Project.objects.all() if projects is None else projects).filter(name=params["project"])
        rows = listing.quota_rows(list(pools), None if projects is None else list(projects),
                                  department=params.get("department") or None)
        return self.answer(rows, lambda row: row, QuotaRowSerializer)

