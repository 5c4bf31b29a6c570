"""The log doors on the web (issue 26): `GET /api/workloads/{id}/logs` and OSMO's `GET /api/workflow/{name}/logs`.
One replica's log as text (streamed when followed), or as JSON (`format=json`); who may read it is who may read the
workload's request (`bodies.may_read_request`): others who may see the workload get 403, the rest 404, as for an
unknown workload. Headers say where the text came from (`X-Log-Source: live|archive`), which pod, container and node,
and where to resume (`X-Log-Resume`, or the followed stream's last line `### osmo: ... since=TOKEN`)."""

import re
from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from pools.engine import ConfigError
from pools.models import AccessToken
from pools.models.visibility import access_cache, access_for
from scheduling.api import schema
from scheduling.api.osmo import place_of, task_choices, task_names
from scheduling.listing import bodies
from scheduling.listing.log_params import REFUSED, LogParams, log_params
from scheduling.models import Workflow, Workload
from scheduling.run import follow_limits, logs
from scheduling.submit import workflows

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


def still_allowed(request, workload: Workload) -> Callable[[], bool]:
    """Whether the request's credential may still read the workload's log, asked again during a follow: its token
    still there and unexpired (or its session not ended), its account active, the workload still readable to it
    (roles read afresh)."""
    user_pk = request.user.pk
    token = request.auth if isinstance(request.auth, AccessToken) else None
    session = getattr(request, "session", None) if token is None else None
    session_key = getattr(session, "session_key", None)

    def allowed() -> bool:
        user = get_user_model().objects.filter(pk=user_pk, is_active=True).first()
        if user is None:
            return False
        if token is not None:
            fresh = AccessToken.objects.filter(pk=token.pk, digest=token.digest).first()
            if fresh is None or fresh.expired:
                return False
            user._osmo_token = fresh
        elif session_key and not type(session)().exists(session_key):
            return False
        with access_cache():  # this credential's roles as they are now
            row = Workload.objects.visible_to(user).filter(pk=workload.pk).first()
            return row is not None and bodies.may_read_request(row, access_for(user))

    return allowed


def log_response(workload: Workload, params: LogParams, request=None):
    """The answer of every web door: text, a followed stream (re-checking `request`'s credential while it runs),
    or JSON."""
    try:
        source = logs.choose(workload, attempt=params.attempt, replica=params.replica, container=params.container)
        if params.follow and not params.json and not params.previous:
            allowed = still_allowed(request, workload) if request is not None else None
            give_back = follow_limits.take(request.user) if request is not None else lambda: None
            try:
                body = logs.follow(source, tail=params.tail, since=params.since, allowed=allowed)
            except BaseException:
                give_back()
                raise
            response = StreamingHttpResponse(follow_limits.Held(body, give_back),
                                             content_type="text/plain; charset=utf-8")
            response["X-Accel-Buffering"] = "no"  # a proxy must pass each line on as it comes
            _headers(response, source, params)
            return response
        found = logs.read(source, tail=params.tail, previous=params.previous, since=params.since)
    except logs.LogUnavailable as exc:
        return Response({"detail": exc.message, "field": exc.field}, status=exc.status)
    except follow_limits.TooManyFollows as exc:
        return Response({"detail": exc.message, "field": "follow", "limit": exc.limit}, status=429,
                        headers={"Retry-After": str(exc.retry_after)})
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
        return log_response(workload, params, request)


def osmo_query(query):
    """OSMO's CLI's log parameters in ours: `last_n_lines` is `tail`, `retry_id` (from 0) is `attempt` (from 1),
    `task_name` is `task`."""
    query = query.copy()
    for theirs, ours in (("last_n_lines", "tail"), ("task_name", "task")):
        if theirs in query and ours not in query:
            query[ours] = query[theirs]
        query.pop(theirs, None)
    if "retry_id" in query:
        retry = query.pop("retry_id")[-1]
        if "attempt" not in query:
            if not (retry.isascii() and retry.isdigit()):
                raise ConfigError("retry_id: a whole number from 0", field="retry_id")
            query["attempt"] = str(int(retry) + 1)
    return query


class WorkflowLogsView(LogView):
    """OSMO's `osmo workflow logs`: one task of one owner's workflow (a task is a replica of its group: `task`
    names a task or a group, and may be left out when the workflow has one group); OSMO's `task_name`,
    `last_n_lines` and `retry_id` are read as `task`, `tail` and `attempt`."""

    @extend_schema(operation_id="workflow_logs", parameters=[
        OpenApiParameter("task", str, description="A task, or a task group (default: the only one)."),
        OpenApiParameter("user", str, description="The submitter, when several users' workflows carry this ID."),
        *PARAMETERS], responses=schema.LogAnswer)
    def get(self, request, name):
        return workflow_log(request, name)


class WorkflowErrorLogsView(LogView):
    """OSMO's `osmo workflow logs --error`: the same log as `/logs`, of the task's latest attempt unless
    `retry_id` names another (OSMO keeps a separate error stream; here a task's log is one stream)."""

    @extend_schema(operation_id="workflow_error_logs", parameters=[
        OpenApiParameter("task", str, description="A task, or a task group (default: the only one)."),
        OpenApiParameter("user", str), *PARAMETERS], responses=schema.LogAnswer)
    def get(self, request, name):
        return workflow_log(request, name)


def workflow_log(request, name: str):
    query = osmo_query(request.query_params)
    rows = list(Workload.objects.visible_to(request).exclude(workflow="").filter(workflow=name)
                .select_related("pool"))
    rows = workflows.owned_rows(rows, access_for(request), request.query_params.get("user") or None)
    if not rows:
        raise NotFound(f"Workflow {name} does not exist or is not yours to see.")
    task = query.get("task", "")
    tasks = task_names(Workflow.objects.filter(submitter_id=rows[0].submitter_id, name=name).first())
    if not task and len({w.group or w.name for w in rows}) == 1:
        task = rows[0].group or rows[0].name
    found = place_of(rows, tasks, task)
    if found is None:
        raise ConfigError(f"task: one of {task_choices(rows, tasks)}", field="task")
    workload, replica = found
    if replica is not None:
        query["replica"] = str(replica)
    return log_response(readable(request, workload), log_params(query), request)
