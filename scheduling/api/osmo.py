"""OSMO's workflow endpoints, in OSMO's paths and shapes (reference/scheduling.md section 1):

- `POST /api/pool/{pool}/workflow?priority=HIGH|NORMAL|LOW&dry_run=true` with `{"file": YAML,
  "set_variables": ["K=V"]}`: each task group becomes one gang workload, all under one workflow ID
  (`<name>-<n>`, numbered per submitter: `scheduling.submit.workflows`), in one transaction: every group is accepted
  or nothing is saved. Answers
  `{"name", "overview", "logs", "spec", "dashboard_url", "warnings"}`. Authorized by the role policy of
  seed 002 (`POST /api/pool/<glob>`), as OSMO does: the path is the grant.
- `GET /api/workflow` (users, statuses, pools, priority, limit, offset, order), `GET /api/workflow/{name}` (each
  group with its `tasks`: one per replica, named as in the file), `/events` and `/spec` (text, as OSMO's CLI
  prints them), `POST /api/workflow/{name}/cancel`.

Times on these paths are OSMO's (`scheduling.api.osmo_time`: UTC, no zone), which OSMO's CLI parses.
"""

from urllib.parse import quote

from django.db.models import Count, Max, Min
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from pools.engine import ConfigError
from pools.models.visibility import access_for
from scheduling.api import schema
from scheduling.api.osmo_time import osmo_time
from scheduling.api.workloads import admit_attempt, is_true, refused_response
from scheduling.listing import bodies
from scheduling.models import ALIVE, Status, Workload
from scheduling.models import Workflow as WorkflowRecord
from scheduling.run import links, logs
from scheduling.specs.formats import workflow_requests
from scheduling.specs.requests import priority_of
from scheduling.submit import limits, submission, workflows

# A workflow's status from its groups' (OSMO's workflow statuses: alive ones first).
_FAILED = [s for s in Status if s.startswith("FAILED")]


def workflow_status(statuses: set[str]) -> str:
    if statuses & {Status.RUNNING, Status.SCHEDULING, Status.ADMITTED, Status.PREEMPTING}:
        return "RUNNING" if Status.RUNNING in statuses else "PENDING"
    if Status.PENDING in statuses:
        return "PENDING"
    if Status.WAITING in statuses:  # OSMO's: started, nothing running, a group waits for its upstream
        return "WAITING"
    failed = [s for s in _FAILED if s in statuses]
    if failed:
        return failed[0]
    return "COMPLETED"


def _urls(request, name: str, user: str = "") -> dict[str, str]:
    """Links to one owner's workflow (IDs are numbered per submitter)."""
    base = request.build_absolute_uri("/")
    owner = f"user={quote(user)}" if user else ""
    listing = f"{base}workloads/?workflow={quote(name)}" + (f"&{owner}" if owner else "")
    return {"overview": listing, "logs": f"{base}api/workflow/{quote(name)}/logs" + (f"?{owner}" if owner else ""),
            "dashboard_url": listing}


class SubmitWorkflowView(APIView):
    read_access = Rule.POOL
    write_access = Rule.POOL  # may use the pool (or a role whose policy allows POST on this path)
    pool_kwarg = "pool"

    @extend_schema(request=schema.TemplateSpec, responses=schema.SubmitResponse, parameters=[
        OpenApiParameter("priority", str, enum=["HIGH", "NORMAL", "LOW"]),
        OpenApiParameter("project", str, description="Else the file's workflow.project, else your default project."),
        OpenApiParameter("dry_run", bool), OpenApiParameter("validation_only", bool)])
    def post(self, request, pool):
        refused = admit_attempt(request)
        if refused is not None:
            return refused
        body = request.data if isinstance(request.data, dict) else {}
        text = body.get("file")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("file: the workflow spec (YAML text) is required", field="file")
        variables = []
        for key in ("set_variables", "set_string_variables"):  # OSMO's CLI: --set and --set-string
            given = body.get(key) or []
            if not isinstance(given, list) or not all(isinstance(v, str) for v in given):
                raise ConfigError(f"{key}: expected a list of \"KEY=VALUE\" strings", field=key)
            variables += given
        templated = body.get("uploaded_templated_spec") or ""
        if not isinstance(templated, str):
            raise ConfigError("uploaded_templated_spec: expected the workflow file as written (text)",
                              field="uploaded_templated_spec")
        priority = priority_of(request.query_params.get("priority", "NORMAL"))
        dry_run = is_true(request.query_params.get("dry_run", "")) or \
            is_true(request.query_params.get("validation_only", ""))
        project = request.query_params.get("project") or None
        workflow = workflow_requests(text, pool=pool, priority=priority.value, set_variables=variables,
                                     project=project, ceilings=limits.workflow_ceilings(), dry_run=dry_run)
        access = access_for(request)
        try:
            evaluated = submission.evaluate_workflow(access, workflow)
        except submission.SubmissionRefused as exc:
            return refused_response(exc)
        warnings = list(workflow.warnings)
        if priority.preemptible:
            warnings.append("LOW priority workflows may be preempted to return borrowed capacity.")
        # `spec` is the file as it runs (variables filled in), as OSMO answers it: its CLI reads a templated
        # file's dry run back as YAML and submits that; `plan` is what each group would do.
        plan = {"workflow": workflow.name, "groups": [
            {"name": s.request.name, "replicas": s.request.replicas, "pools": [v.pool for v in s.accepted],
             "candidates": [v.as_dict() for v in s.shown]} for s in evaluated]}
        if dry_run:
            return Response({"name": workflow.name, **_urls(request, workflow.name), "spec": workflow.rendered,
                             "plan": plan, "warnings": warnings, "dry_run": True})
        name = submission.save_workflow(access, workflow, evaluated, templated_spec=templated)
        return Response({"name": name, **_urls(request, name, access.user.get_username()),
                         "spec": workflow.rendered, "plan": plan, "warnings": warnings},
                        status=status.HTTP_200_OK)


USER = OpenApiParameter("user", str, description="The submitter, when workflows of several users you may see carry "
                                                "this ID.")


def _whole(text: str) -> bool:
    """ASCII digits only: superscripts and fullwidth digits are digits to str.isdigit, and int() refuses the first."""
    return text.isascii() and text.isdigit()


def _workflows(request):
    return Workload.objects.visible_to(request).exclude(workflow="")


def stopping_status(rows: list[Workload]) -> str | None:
    """What a workflow ends as while a stop (a cancel, a timeout) is deleting its Jobs: every live group is
    stopping. `status` keeps OSMO's word (RUNNING, PENDING) for OSMO's clients; this field says it is stopping."""
    alive = [w for w in rows if w.status in ALIVE]
    if not alive or not all(w.stop_status for w in alive):
        return None
    return sorted({w.stop_status for w in alive})[0]


def _owned(request, rows: list[Workload]) -> list[Workload]:
    """The rows of one owner's workflow (`?user=` chooses among several users' workflows of one ID)."""
    return workflows.owned_rows(rows, access_for(request), request.query_params.get("user") or None)


def _summary(request, name: str, rows: list[Workload]) -> dict:
    first = bodies.row(min(rows, key=lambda w: w.submitted_at), access_for(request))
    return {"name": name, "workflow_id": name, "user": first["submitter"], "submitted_by": first["submitter"],
            "submit_time": osmo_time(first["submitted_at"]),
            "status": workflow_status({w.status for w in rows}), "stopping": stopping_status(rows),
            "priority": first["priority"].upper(),
            "pool": first["pool"] or (first["pools"][0] if first["pools"] else None),
            "labels": {}, **_urls(request, name, first["submitter"])}


class WorkflowListView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(operation_id="workflow_list", responses=schema.WorkflowList, parameters=[
        OpenApiParameter("users", str, many=True), OpenApiParameter("statuses", str, many=True),
        OpenApiParameter("pools", str, many=True), OpenApiParameter("all_pools", bool),
        OpenApiParameter("priority", str, enum=["HIGH", "NORMAL", "LOW"]), OpenApiParameter("limit", int),
        OpenApiParameter("offset", int), OpenApiParameter("order", str, enum=["ASC", "DESC"])])
    def get(self, request):
        params = request.query_params
        statuses = set(params.getlist("statuses"))
        unknown = sorted(statuses - {*Status, "COMPLETED", "FAILED"})
        if unknown:
            raise ConfigError(f"statuses: {unknown[0]!r} is not a workflow status; use one of "
                              f"{', '.join(sorted({*Status}))}", field="statuses")
        if params.get("order", "DESC").upper() not in ("ASC", "DESC"):
            raise ConfigError(f"order: {params['order']!r} is not an order; use ASC or DESC", field="order")
        for name in ("limit", "offset"):
            if params.get(name, "") != "" and not _whole(str(params[name])):
                raise ConfigError(f"{name}: {params[name]!r} is not a whole number", field=name)
        rows = _workflows(request)
        users = params.getlist("users")
        if users:
            rows = rows.filter(submitter_name__in=users)
        pools = params.getlist("pools")
        if pools and not is_true(params.get("all_pools", "")):
            rows = rows.filter(pools__0__in=pools)
        if params.get("priority"):
            rows = rows.filter(priority=priority_of(params["priority"]).value)
        # A workflow is an ID of one submitter: two users' workflows of one name are two entries.
        names = (rows.values("workflow", "submitter_id").annotate(first=Min("submitted_at"), last=Max("submitted_at"),
                                                                  groups=Count("id"))
                 .order_by("-first" if params.get("order", "DESC").upper() == "DESC" else "first", "workflow",
                           "submitter_id"))
        limit = min(int(params.get("limit", 1000) or 1000), 1000) if _whole(str(params.get("limit", "1"))) else 1000
        offset = int(params.get("offset", 0)) if _whole(str(params.get("offset", "0"))) else 0
        total = len(names)  # read once: the page is then a slice of it, and no OFFSET past the database's integers
        page = [(row["workflow"], row["submitter_id"]) for row in names[offset:offset + limit]]
        by_name: dict[tuple, list[Workload]] = {}
        for workload in rows.filter(workflow__in={name for name, _ in page}).select_related("pool").light():
            by_name.setdefault((workload.workflow, workload.submitter_id), []).append(workload)
        result = [_summary(request, key[0], by_name[key]) for key in page if key in by_name]
        if statuses:
            result = [item for item in result if item["status"] in statuses]
        return Response({"workflows": result, "more_entries": total > offset + limit})


def _rows(request, name: str) -> list[Workload]:
    """One owner's workloads of workflow `name` (404 when the caller sees none), oldest group first."""
    rows = _owned(request, list(_workflows(request).filter(workflow=name).select_related("pool", "project")))
    if not rows:
        raise NotFound(f"Workflow {name} does not exist or is not yours to see.")
    return sorted(rows, key=lambda w: w.submitted_at)


def _record(rows: list[Workload]) -> WorkflowRecord | None:
    first = rows[0]
    return WorkflowRecord.objects.filter(submitter_id=first.submitter_id, name=first.workflow).first()


def task_names(record: WorkflowRecord | None) -> dict[str, list[str]]:
    """Each group's task names, in order, from the file the workflow runs (its replicas, one task each)."""
    if record is None or not record.spec:
        return {}
    try:
        return workflow_requests(record.spec, pool="default").tasks
    except ConfigError:  # stored before a rule it now breaks: the tasks are then named by their group
        return {}


def own_tasks(workload: Workload, names: list[str]) -> list[str]:
    """The tasks a row runs, by replica: its request's (a group's, or one member's of a group of differing shapes),
    else the file's names of its group (`names`), else named by the group."""
    own = (workload.request or {}).get("tasks") or []
    if len(own) == workload.replicas:
        return list(own)
    if len(names) == workload.replicas:
        return names
    return [workload.group or workload.name if workload.replicas == 1 else f"{workload.group or workload.name}-{i}"
            for i in range(workload.replicas)]


def _member(workload: Workload) -> int:
    return int((workload.request or {}).get("member") or 0)


def place_of(rows: list[Workload], tasks: dict[str, list[str]], task: str) -> tuple[Workload, int | None] | None:
    """The row running `task` and its replica; for a group's name, the group's (its lead member's) row and None."""
    groups: dict[str, Workload] = {}
    for workload in sorted(rows, key=_member):
        groups.setdefault(workload.group or workload.name, workload)
    for workload in rows:
        own = own_tasks(workload, tasks.get(workload.group or workload.name, []))
        if task in own and task not in groups:
            return workload, own.index(task)
    return (groups[task], None) if task in groups else None


def task_choices(rows: list[Workload], tasks: dict[str, list[str]]) -> str:
    return ", ".join(sorted({*(w.group or w.name for w in rows), *(n for names in tasks.values() for n in names)}))


def _tasks(workload: Workload, shown: dict, names: list[str]) -> list[dict]:
    """OSMO's tasks of one group (or one member of it): one per replica, with its status and times (a gang runs as
    one)."""
    names = own_tasks(workload, names)
    nodes = {pod["replica"]: pod.get("node") for pod in shown["replica_pods"] if pod.get("attempt") == workload.attempt}
    return [{"name": name, "retry_id": max(workload.attempt - 1, 0), "status": shown["status"],
             "start_time": osmo_time(shown["started_at"]), "end_time": osmo_time(shown["finished_at"]),
             "node_name": nodes.get(index), "exit_code": shown["exit_code"], "workload": shown["id"], "replica": index}
            for index, name in enumerate(names)]


class WorkflowView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(responses=schema.WorkflowDetail, parameters=[USER, OpenApiParameter("verbose", bool)])
    def get(self, request, name):
        rows = _rows(request, name)
        body = _summary(request, name, rows)
        access = access_for(request)
        names = task_names(_record(rows))
        groups: dict[str, dict] = {}  # a group of differing shapes: its members in one, the lead's first
        for workload in sorted(rows, key=_member):
            shown = bodies.detail(workload, access, events=())
            group = workload.group or workload.name
            tasks = _tasks(workload, shown, names.get(group, []))
            if group in groups:
                groups[group]["replicas"] += shown["replicas"]
                groups[group]["tasks"] += tasks
                continue
            groups[group] = {"name": group, "workload": shown["id"], "status": shown["status"],
                             "stopping": shown["stopping"], "replicas": shown["replicas"],
                             "start_time": osmo_time(shown["started_at"]), "end_time": osmo_time(shown["finished_at"]),
                             "pool": shown["pool"], "reasons": shown["reasons"], "tasks": tasks}
        order = {w.group or w.name: i for i, w in reversed(list(enumerate(rows)))}
        body["groups"] = sorted(groups.values(), key=lambda g: order[g["name"]])
        return Response(body)


def _text(lines: list[str]) -> HttpResponse:
    response = HttpResponse("".join(f"{line}\n" for line in lines), content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    return response


class WorkflowEventsView(APIView):
    """`GET /api/workflow/{name}/events` (`osmo workflow events`): each group's events as text lines, oldest
    first, `time [group] STATUS REASON: message`; `task_name` (a task or a group) keeps one group. A message
    naming a pool the caller may not see is replaced, as on the workload's page."""

    read_access = Rule.SIGNED_IN

    def perform_content_negotiation(self, request, force=False):
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(operation_id="workflow_events", responses=OpenApiTypes.STR, parameters=[
        USER, OpenApiParameter("task_name", str, description="A task or group: only its group's events.")])
    def get(self, request, name):
        rows = _rows(request, name)
        chosen = _group_of(rows, task_names(_record(rows)), request.query_params.get("task_name", ""))
        access = access_for(request)
        events = []
        for workload in rows if chosen is None else [w for w in rows if (w.group == chosen.group and chosen.group)
                                                    or w.pk == chosen.pk]:
            group = workload.group or workload.name
            for event in bodies.detail(workload, access)["events"]:
                events.append((event["at"], f"{osmo_time(event['at'])} [{group}] {event['status']} "
                                            f"{event['reason']}: {event['message']}"))
        return _text([line for _, line in sorted(events, key=lambda item: item[0])])


def _group_of(rows: list[Workload], tasks: dict[str, list[str]], task: str,
              field: str = "task_name") -> Workload | None:
    """The row a task name (or a group name) is in; None for no name; a 400 naming `field` for another."""
    if not task:
        return None
    found = place_of(rows, tasks, task)
    if found is None:
        raise ConfigError(f"{field}: {task!r} is not a task of this workflow; its tasks: {task_choices(rows, tasks)}",
                          field=field)
    return found[0]


class WorkflowSpecView(APIView):
    """`GET /api/workflow/{name}/spec` (`osmo workflow spec`): the file the workflow runs, as YAML text;
    `use_template=true`: the file as written, when it was templated. Who may read it is who may read the
    workflow's request (its submitter, its project's members, staff); others who see it get 403."""

    read_access = Rule.SIGNED_IN

    def perform_content_negotiation(self, request, force=False):
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(operation_id="workflow_spec", responses=OpenApiTypes.STR, parameters=[
        USER, OpenApiParameter("use_template", bool)])
    def get(self, request, name):
        rows = _rows(request, name)
        if not bodies.may_read_request(rows[0], access_for(request)):
            raise PermissionDenied("Only its submitter, the members of its project (other than default) and admins "
                                   "may read its spec.")
        record = _record(rows)
        text = record.spec if record is not None else ""
        if is_true(request.query_params.get("use_template", "")) and record is not None and record.templated_spec:
            text = record.templated_spec
        if not text:
            raise NotFound(f"Workflow {name} was not submitted as a workflow file: it has no spec to show.")
        return _text(text.rstrip("\n").split("\n"))


class CancelWorkflowView(APIView):
    read_access = Rule.SIGNED_IN
    write_access = Rule.SIGNED_IN

    @extend_schema(request=None, responses=schema.CancelAnswer,
                   parameters=[OpenApiParameter("message", str), OpenApiParameter("force", bool), USER])
    def post(self, request, name):
        every = _owned(request, list(_workflows(request).filter(workflow=name)))
        if not every:
            raise NotFound(f"Workflow {name} does not exist or is not yours to see.")
        rows = [w for w in every if w.status in ALIVE]
        message = str(request.query_params.get("message", ""))[:500]
        try:
            for workload in rows:
                submission.cancel(request, workload, message)
        except PermissionError as exc:
            raise PermissionDenied(str(exc)) from None
        return Response({"name": name, "message": f"Cancel job for workflow {name} is submitted!"})


def _task_place(rows: list[Workload], task: str) -> tuple[Workload, int]:
    """The row and replica index of task `task` (a 400 naming `task` for a name the workflow does not have)."""
    names = task_names(_record(rows))
    found = place_of(rows, names, task)
    if found is None:
        raise ConfigError(f"task: {task!r} is not a task of this workflow; its tasks: {task_choices(rows, names)}",
                          field="task")
    return found[0], found[1] or 0


def _ports(text: str) -> list[int]:
    ports = [part.strip() for part in str(text).split(",") if part.strip()]
    if not ports or len(ports) > 64 or not all(_whole(p) and 0 < int(p) < 65536 for p in ports):
        raise ConfigError("task_ports: one port or a comma-separated list of ports, each 1-65535", field="task_ports")
    return [int(p) for p in ports]


class PortForwardView(APIView):
    """`POST /api/workflow/{name}/portforward/{task}?task_ports=P` (`osmo workflow port-forward`): this site has no
    port-forward router of OSMO's, so it answers what it can instead of a tunnel: a 409 whose message gives the
    task's link (a notebook's or an inference's Ingress, docs/admin/links.md) when it has one, and the
    `kubectl port-forward` line to the task's pod for each port asked. Only the workflow's submitter and staff are
    answered (as for a link); the task must be running."""

    read_access = Rule.SIGNED_IN
    write_access = Rule.SIGNED_IN

    @extend_schema(request=None, responses={409: schema.PortForwardAnswer}, parameters=[
        OpenApiParameter("task_ports", str), OpenApiParameter("use_udp", bool), USER])
    def post(self, request, name, task):
        rows = _rows(request, name)
        try:
            ports = _ports(",".join(request.query_params.getlist("task_ports")))  # OSMO's CLI repeats it
            workload, replica = _task_place(rows, task)
        except ConfigError as exc:
            return Response({"detail": exc.message, "field": exc.field}, status=status.HTTP_400_BAD_REQUEST)
        access = access_for(request)
        if not links.may_see(access, workload):
            raise PermissionDenied("Only the workflow's submitter and admins may reach its tasks' ports.")
        place = next((p for p in logs.replicas(workload) if p.attempt == workload.attempt and p.replica == replica
                      and p.live and p.pod), None)
        if workload.status not in ALIVE or place is None:
            return Response({"detail": f"Task {task} of workflow {name} has no running pod to forward to "
                             f"(status {workload.status})."}, status=status.HTTP_409_CONFLICT)
        lines = [f"kubectl port-forward -n {place.namespace} pod/{place.pod} {port}:{port}" for port in ports]
        link = links.link_for(access, workload)
        udp = "kubectl forwards TCP only; " if is_true(request.query_params.get("use_udp", "")) else ""
        opened = f"open {link['url']} (the task's address) or run: " if link and link["url"] else "run: "
        return Response({"detail": "This site has no port-forward router of OSMO's; " + udp + opened
                         + " ; ".join(lines), "port_forward": lines, "url": link["url"] if link else ""},
                        status=status.HTTP_409_CONFLICT)
