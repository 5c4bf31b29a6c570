"""`GET /api/usage/?group_by=&period=&month=&from=&to=&pool=&project=`: the usage page's table as JSON, the
same numbers (`reports.report`), scoped the same way. A bad parameter answers 400 naming it."""

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule

from . import reports
from .params import GROUPS, PERIOD_CHOICES, ParamError, parse

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


def body(result: reports.Report) -> dict:
    params = result.params
    return {
        "group_by": params.group_by,
        "from": reports.moment_text(params.start),
        "to": reports.moment_text(params.end),
        "pool": params.pool or None,
        "project": params.project or None,
        "capacity_hours": result.capacity_hours,
        "gpu_util_percent": None,  # not measured (point 5 adds DCGM utilization)
        "rows": [reports.public(row) for row in sorted(result.rows, key=lambda row: (-row["gpu_hours"], row["group"]))],
        "totals": reports.public(result.totals),
    }


class UsageView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(parameters=PARAMETERS, responses=OpenApiTypes.OBJECT, operation_id="usage_report")
    def get(self, request):
        try:
            params = parse(request.query_params, timezone.now(), max_days=settings.OSMO_USAGE_MAX_DAYS)
        except ParamError as exc:
            return Response({"detail": str(exc), "field": exc.field}, status=status.HTTP_400_BAD_REQUEST)
        return Response(body(reports.report(params, reports.scope_for(request))))
