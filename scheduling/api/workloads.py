"""`/api/workloads/`: submit (`POST`, `?dry_run=1` saves nothing), list (filters of `WorkloadFilterSet`,
optional limit/offset), read one (status, reasons per pool, queue positions, pod templates, events), and
cancel (`POST /api/workloads/{id}/cancel/`, the submitter or staff). Researchers see their projects'
workloads and their own; staff see all. A workload one may not see answers 404."""

from django.conf import settings
from django.http import Http404
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from pools.access.scoping import Rule
from pools.api.pagination import OptionalLimitOffsetPagination
from pools.engine import ConfigError
from pools.models.visibility import access_for
from scheduling.api import schema
from scheduling.listing import bodies
from scheduling.listing.filters import WorkloadFilterSet
from scheduling.models import Workload
from scheduling.run import estimates, utilization
from scheduling.submit import limits, submission

DRY_RUN = OpenApiParameter("dry_run", OpenApiTypes.BOOL, description="Run the whole pipeline and answer, per "
                           "candidate pool, the verdict and the pod template that would be dispatched; save nothing.")


def is_true(value) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")


def admit_attempt(request) -> Response | None:
    """The checks before a submission's body is read: its size, then the user's rate (a 429 with Retry-After)."""
    most = getattr(settings, limits.BODY_SETTING, 262144)
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > most:
        return Response({"detail": f"request body: {length} bytes is over the limit of {most} bytes for a submission "
                                   f"({limits.BODY_SETTING})", "field": "request body", "limit": limits.BODY_SETTING},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    user = request.user if request.user.is_authenticated else None
    try:
        limits.count_submission(user)
    except limits.RateLimited as exc:
        return Response({"detail": exc.message, "field": None, "limit": exc.limit},
                        status=status.HTTP_429_TOO_MANY_REQUESTS, headers={"Retry-After": str(exc.retry_after)})
    return None


def refused_response(exc: submission.SubmissionRefused) -> Response:
    code = status.HTTP_403_FORBIDDEN if exc.forbidden else status.HTTP_400_BAD_REQUEST
    return Response(exc.as_dict(), status=code)


def detail(workload: Workload, request, **options) -> dict:
    """One workload as the API answers it: `bodies.detail` and its GPU utilization."""
    body = bodies.detail(workload, access_for(request), **options)
    body["utilization"] = utilization.body(workload)
    return body


def submitted_body(result: submission.Submitted, request) -> dict:
    if result.workload is None:
        return {"dry_run": True, "project": result.project.name,
                "request": bodies.shown_request(result.request.document()),
                "candidates": [v.as_dict() for v in result.shown], "admission": result.preview}
    # The row as saved, with the project (and department) the pipeline read: nothing to read back.
    workload = result.workload
    body = detail(workload, request, events=workload.first_events, fresh=True)
    refused = [v.as_dict() for v in result.shown if not v.accepted]
    if refused:
        body["refused_candidates"] = refused
    return body


class WorkloadViewSet(viewsets.ViewSet):
    read_access = Rule.SIGNED_IN
    write_access = Rule.SIGNED_IN  # submitting needs a pool the pipeline lets through; cancelling, ownership
    lookup_value_regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"  # a UUID
    pagination_class = OptionalLimitOffsetPagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = WorkloadFilterSet

    def queryset(self):
        return Workload.objects.visible_to(self.request).select_related("project__department", "pool")

    def get_queryset(self):  # drf-spectacular reads the filters' model from it, with no real request
        return Workload.objects.none() if getattr(self, "swagger_fake_view", False) else self.queryset()

    def get_object(self, pk) -> Workload:
        workload = self.queryset().filter(pk=pk).first()
        if workload is None:
            raise Http404("No such workload, or it is not yours to see.")
        return workload

    @extend_schema(parameters=[OpenApiParameter("pool", str), OpenApiParameter("project", str),
                               OpenApiParameter("status", str, many=True), OpenApiParameter("user", str),
                               OpenApiParameter("priority", str), OpenApiParameter("source", str),
                               OpenApiParameter("workflow", str),
                               OpenApiParameter("limit", int, description="Page size; without limit and offset "
                                                                          "the whole list is answered."),
                               OpenApiParameter("offset", int)],
                   operation_id="workloads_list", responses=schema.WorkloadRow)
    def list(self, request):
        filterset = WorkloadFilterSet(request.query_params, queryset=self.queryset().light(), request=request)
        if not filterset.is_valid():  # an unknown status, priority or source is a mistake, not "every row"
            name, errors = next(iter(filterset.errors.items()))
            raise ConfigError(f"{name}: {' '.join(errors)}", field=name)
        queryset = filterset.qs
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queryset, request, view=self)
        access = access_for(request)
        rows = list(page if page is not None else queryset)
        forecasts = estimates.forecasts(rows)  # one set of queries for the whole page
        body = [bodies.row(w, access, forecasts.get(str(w.id))) for w in rows]
        return paginator.get_paginated_response(body) if page is not None else Response(body)

    @extend_schema(responses=schema.WorkloadDetail)
    def retrieve(self, request, pk=None):
        return Response(detail(self.get_object(pk), request))

    @extend_schema(operation_id="workloads_idle", responses=schema.IdleList)
    @action(detail=False, methods=["get"])
    def idle(self, request):
        """Running workloads you may see whose every GPU stayed under OSMO_IDLE_GPU_PERCENT for
        OSMO_IDLE_GPU_MINUTES, longest idle first (none when OSMO_PROMETHEUS_URL is not set)."""
        now = timezone.now()
        access = access_for(request)
        rows = [bodies.idle_row(w, access, now) for w in utilization.idle(self.queryset().light(), now)
                [:utilization.MAX_IDLE_ROWS]]
        return Response({**utilization.settings_body(), "workloads": rows})

    @extend_schema(request=schema.WorkloadSubmit, responses={201: schema.WorkloadDetail, 200: schema.DryRun},
                   parameters=[DRY_RUN])
    def create(self, request):
        refused = admit_attempt(request)
        if refused is not None:
            return refused
        dry_run = is_true(request.query_params.get("dry_run", ""))
        try:
            result = submission.submit(request, request.data, dry_run=dry_run)
        except submission.SubmissionRefused as exc:
            return refused_response(exc)
        code = status.HTTP_200_OK if dry_run else status.HTTP_201_CREATED
        return Response(submitted_body(result, request), status=code)

    @extend_schema(request=schema.CancelRequest, responses=schema.WorkloadDetail)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        workload = self.get_object(pk)
        try:
            changed = submission.cancel(request, workload, str(request.data.get("message", ""))[:500]
                                        if isinstance(request.data, dict) else "")
        except PermissionError as exc:
            raise PermissionDenied(str(exc)) from None
        body = detail(self.get_object(pk), request)
        body["canceled"] = changed
        return Response(body)
