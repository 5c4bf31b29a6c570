"""`GET /api/usage/?group_by=&period=&month=&from=&to=&pool=&project=`: the usage page's table as JSON, the
same numbers (`reports.report`), scoped the same way. A bad parameter answers 400 naming it."""

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from scheduling.usage import reports
from scheduling.usage.params import GROUPS, PERIOD_CHOICES, ParamError, parse

PARAMETERS = [
    OpenApiParameter("group_by", OpenApiTypes.STR, enum=list(GROUPS), description="Default: project."),
    OpenApiParameter("period", OpenApiTypes.STR, enum=list(PERIOD_CHOICES), description="Default: 24h, or range "
                     "when from/to are given, month when month is."),
    OpenApiParameter("month", OpenApiTypes.STR, description="YYYY-MM, with period=month."),
    OpenApiParameter("from", OpenApiTypes.STR, description="A date or ISO time (UTC when no zone)."),
    OpenApiParameter("to", OpenApiTypes.STR, description="A date (its end) or ISO time; default now."),
    OpenApiParameter("pool", OpenApiTypes.STR),
    OpenApiParameter("project", OpenApiTypes.STR),
]


def _hours(help_text: str = "", **kwargs) -> serializers.FloatField:
    """A figure as the answer holds it: a JSON number (two decimals), not a decimal string."""
    return serializers.FloatField(allow_null=kwargs.pop("allow_null", False), help_text=help_text, **kwargs)


class UsageRowSerializer(serializers.Serializer):
    """One group's figures (the documented shape; the view answers these keys)."""

    group = serializers.CharField(help_text="The department, project, user, pool or pool/platform.")
    gpu_hours = _hours("GPUs held by pods, bound to finished.")
    capacity_share_percent = _hours("GPU-hours over the capacity-hours of the pools in view.", allow_null=True)
    deserved_hours = _hours("Deserved GPUs times hours (department, project and pool groupings).", allow_null=True)
    used_of_deserved_percent = _hours(allow_null=True)
    borrowed_hours = _hours("GPU-hours above deserved, low-priority work first.")
    preempted_hours = _hours("GPU-hours of attempts that were preempted.")
    starved_hours = _hours("Hours with work pending while under the deserved quota.", allow_null=True)
    pending_hours = _hours("Hours with work pending.", allow_null=True)
    cpu_core_hours = _hours()
    memory_gib_hours = _hours()
    gpu_util_percent = serializers.FloatField(
        allow_null=True,
        help_text="Average GPU utilization weighted by GPU-seconds over those measured; null: not measured.")


# The answer's keys as the view writes them; `from` is a Python keyword, hence the class built by name.
UsageReportSerializer = type("UsageReportSerializer", (serializers.Serializer,), {
    "group_by": serializers.ChoiceField(choices=GROUPS),
    "from": serializers.DateTimeField(help_text="Start of the period (UTC)."),
    "to": serializers.DateTimeField(),
    "pool": serializers.CharField(allow_null=True),
    "project": serializers.CharField(allow_null=True),
    "capacity_hours": _hours("Capacity GPU-hours of the pools in view."),
    "gpu_util_percent": serializers.FloatField(allow_null=True, help_text="The totals' GPU util; null: not measured."),
    "gpu_util_source": serializers.ChoiceField(
        choices=["prometheus", "simulated", ""], help_text="Where GPU utilization comes from: a Prometheus scraping "
        "DCGM, the demo's simulated figures, or \"\" (none set: not measured)."),
    "rows": UsageRowSerializer(many=True),
    "totals": UsageRowSerializer(),
})


class UsageView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(parameters=PARAMETERS, responses=UsageReportSerializer, operation_id="usage_report")
    def get(self, request):
        try:
            params = parse(request.query_params, timezone.now(), max_days=settings.OSMO_USAGE_MAX_DAYS)
        except ParamError as exc:
            return Response({"detail": str(exc), "field": exc.field}, status=status.HTTP_400_BAD_REQUEST)
        return Response(reports.body(reports.report(params, reports.scope_for(request))))
