"""The log doors on the web (issue 26): `GET /api/workloads/{id}/logs` and OSMO's `GET /api/workflow/{name}/logs`.
One replica's log as text (streamed when followed), or as JSON (`format=json`); who may read it is who may read the
workload's request (`bodies.may_read_request`): others who may see the workload get 403, the rest 404, as for an
unknown workload. Headers say where the text came from (`X-Log-Source: live|archive`), which pod, container and node,
and where to resume (`X-Log-Resume`, or the followed stream's last line `### osmo: ... since=TOKEN`)."""

import re
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from pools.engine import ConfigError
from pools.models.visibility import access_for

from . import bodies, schema, workflows
from .decisions import log_lines
from .models import Workload
from .run import logs

CONTAINER = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
TRUE, FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
MOST_PARAM_CHARS = 128  # no parameter of ours is longer; a longer one is refused before it is parsed
REFUSED = "Only its submitter, the members of its project (other than default) and admins may read its logs."

PARAMETERS = [
    OpenApiParameter("replica", int, description="The replica (its Job completion index), from 0; default 0."),
    OpenApiParameter("attempt", int, description="The attempt, from 1; default the current one."),
    OpenApiParameter("container", str, description="Default: the user container."),
    OpenApiParameter("tail", int, description="Only the last N lines."),
    OpenApiParameter("follow", OpenApiTypes.BOOL, description="Stream new lines as they are written, for "
                     "OSMO_LOG_FOLLOW_SECONDS at most; the last line then names the `since` to resume from."),
    OpenApiParameter("previous", OpenApiTypes.BOOL, description="The container's previous run (live pods only)."),
    OpenApiParameter("since", str, description="A resume token (`X-Log-Resume`, or the follow's last line): "
                     "only the lines after it."),
    OpenApiParameter("format", str, enum=["text", "json"]),
    OpenApiParameter("download", OpenApiTypes.BOOL, description="As an attachment (`<name>-a<attempt>-r<replica>"
                     ".log`)."),
]


@dataclass(frozen=True)
class LogParams:
    replica: int = 0
    attempt: int | None = None
    container: str = ""
    tail: int | None = None
    follow: bool = False
    previous: bool = False
    since: str = ""
    json: bool = False
    download: bool = False


def _number(query, name: str, low: int, high: int) -> int | None:
    text = query.get(name, "")
    if text == "":
        return None
    if not text.isdigit() or not low <= int(text) <= high:
        raise ConfigError(f"{name}: a whole number from {low} to {high}", field=name)
    return int(text)


def _flag(query, name: str) -> bool:
    text = query.get(name, "").lower()
    if text not in TRUE + FALSE:
        raise ConfigError(f"{name}: 1 or 0 (true or false)", field=name)
    return text in TRUE


def log_params(query) -> LogParams:
    """The query's log parameters, each checked (a 400 naming the field, never a 500)."""
    for key, value in query.items():
        if len(value) > MOST_PARAM_CHARS:
            raise ConfigError(f"{key}: at most {MOST_PARAM_CHARS} characters", field=key)
    container = query.get("container", "")
    if container and not CONTAINER.match(container):
        raise ConfigError("container: a container name (lowercase letters, digits and '-', at most 63)",
                          field="container")
    since = query.get("since", "")
    try:
        log_lines.parse(since)
    except log_lines.BadToken as exc:
        raise ConfigError(str(exc), field="since") from None
    shape = query.get("format", "text")
    if shape not in ("text", "json"):
        raise ConfigError("format: text or json", field="format")
    return LogParams(replica=_number(query, "replica", 0, 100_000) or 0, attempt=_number(query, "attempt", 1, 10_000),
                     container=container, tail=_number(query, "tail", 0, settings.OSMO_LOG_TAIL_MAX),
                     follow=_flag(query, "follow"), previous=_flag(query, "previous"), since=since,
                     json=shape == "json", download=_flag(query, "download"))


def readable(request, workload: Workload | None) -> Workload:
    """The workload, when this user may read its logs; else the answer for an unknown one (404) or a 403."""
    if workload is None:
        raise NotFound("No such workload, or it is not yours to see.")
    if not bodies.may_read_request(workload, access_for(request)):
        raise PermissionDenied(REFUSED)
    return workload


def _headers(response, source: logs.Source, params: LogParams) -> None:
    for key, value in source.headers().items():
        response[key] = value
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    if params.download:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", source.workload.name)
        response["Content-Disposition"] = (f'attachment; filename="{name}-a{source.replica.attempt}-'
                                           f'r{source.replica.replica}.log"')


def log_response(workload: Workload, params: LogParams):
    """The answer of every web door: text, a followed stream, or JSON."""
    try:
        source = logs.choose(workload, attempt=params.attempt, replica=params.replica, container=params.container)
        if params.follow and not params.json and not params.previous:
            body = logs.follow(source, tail=params.tail, since=params.since)
            response = StreamingHttpResponse(body, content_type="text/plain; charset=utf-8")
            response["X-Accel-Buffering"] = "no"  # a proxy must pass each line on as it comes
            _headers(response, source, params)
            return response
        found = logs.read(source, tail=params.tail, previous=params.previous, since=params.since)
    except logs.LogUnavailable as exc:
        return Response({"detail": exc.message, "field": exc.field}, status=exc.status)
    if params.json:
        place = found.source.replica
        response = Response({"workload": str(workload.pk), "source": found.source.kind, **place.as_dict(),
                             "container": found.source.container, "truncated": found.truncated,
                             "resume": found.position.token, "text": found.text.decode("utf-8", "replace")})
    else:
        response = HttpResponse(found.text, content_type="text/plain; charset=utf-8")
    response["X-Log-Resume"] = found.position.token
    response["X-Log-Truncated"] = "1" if found.truncated else "0"
    _headers(response, found.source, params)
    return response


class LogView(APIView):
    """Answers text as well as JSON, whatever the client accepts (curl's `*/*`, a browser's download)."""

    read_access = Rule.SIGNED_IN

    def perform_content_negotiation(self, request, force=False):
        return super().perform_content_negotiation(request, force=True)


class WorkloadLogsView(LogView):
    @extend_schema(operation_id="workloads_logs", parameters=PARAMETERS,
                   responses=schema.LogAnswer)
    def get(self, request, pk):
        params = log_params(request.query_params)
        workload = readable(request, Workload.objects.visible_to(request).select_related("pool").filter(pk=pk)
                            .first())
        return log_response(workload, params)


class WorkflowLogsView(LogView):
    """OSMO's `osmo workflow logs`: one task (group) of one owner's workflow; `task` may be left out when the
    workflow has one."""

    @extend_schema(operation_id="workflow_logs", parameters=[
        OpenApiParameter("task", str, description="The task group's name (default: the only one)."),
        OpenApiParameter("user", str, description="The submitter, when several users' workflows carry this ID."),
        *PARAMETERS], responses=schema.LogAnswer)
    def get(self, request, name):
        params = log_params(request.query_params)
        rows = list(Workload.objects.visible_to(request).exclude(workflow="").filter(workflow=name)
                    .select_related("pool"))
        rows = workflows.owned_rows(rows, access_for(request), request.query_params.get("user") or None)
        if not rows:
            raise NotFound(f"Workflow {name} does not exist or is not yours to see.")
        task = request.query_params.get("task", "")
        groups = {(w.group or w.name): w for w in rows}
        if not task and len(groups) == 1:
            task = next(iter(groups))
        if task not in groups:
            raise ConfigError(f"task: one of {', '.join(sorted(groups))}", field="task")
        return log_response(readable(request, groups[task]), params)
