"""The two foreign doors, as native requests (pure: no Django): an OSMO workflow (version 2 spec) becomes one
`WorkloadRequest` per task group, a gpuctl job file (`kind: training`) becomes one. Refusals name the place
in the file (`workflow.groups[1].tasks[0].credentials`); unlike OSMO and gpuctl, an unknown key is refused
rather than dropped, so a typo cannot silently change what runs.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2

from pools.engine import ConfigError, read_yaml
from pools.engine.sandbox import BudgetExceeded, render_text, template_line
from scheduling.specs import data, osmo_groups, osmo_tokens
from scheduling.specs.requests import WorkloadRequest, name_problem, priority_of

_WORKFLOW_KEYS = {"name", "labels", "pool", "project", "groups", "tasks", "resources", "timeout", "backend"}
_GROUP_KEYS = {"name", "barrier", "ignoreNonleadStatus", "tasks"}
_TASK_KEYS = {"name", "image", "command", "args", "lead", "environment", "env_from_secret", "exitActions", "privileged",
              "hostNetwork", "volumeMounts", "resource", "kpis", "downloadType", "cacheSize", "files",
              "inputs", "outputs", "credentials"}
# Task fields OSMO runs and we do not: checkpoints, a task's own resources or backend.
_NOT_RUN = {"checkpoint": "checkpointing", "resources": "a task's own resources", "backend": "a task's backend"}
# What to do instead of an OSMO feature we do not run (docs/api/compatibility.md, "Workflow fields").
_INSTEAD = {
    "checkpoint": "save checkpoints under {{output}} from your command and copy them out in it; the task's "
                  "periodic upload by OSMO does not run here",
    "resources": "write the amounts under workflow.resources and name them with the task's resource: field",
    "backend": "choose the pool (the URL's) whose backend should run it; a pool's backend is its configuration's",
}
_RESOURCE_KEYS = {"cpu", "gpu", "memory", "storage", "platform", "topology", "nodesExcluded"}
_TOPOLOGY_KEYS = {"key", "group", "requirementType"}
# A group's tasks share one pod spec's data steps and Secret (scheduling.specs.task_data): these must agree.
_SAME_DATA = ("inputs", "credentials")  # outputs may differ: each replica uploads its own task's


@dataclass(frozen=True)
class GroupRequest:
    group: str
    request: WorkloadRequest


@dataclass(frozen=True)
class Workflow:
    name: str
    groups: list[GroupRequest]
    warnings: list[str] = field(default_factory=list)
    rendered: str = ""  # the file with its variables filled in: what a dry run shows and `spec` prints
    tasks: dict[str, list[str]] = field(default_factory=dict)  # each group's task names by replica (lead first)


def _yaml(text: str, what: str) -> Any:
    # Depth, numbers, NUL and lone surrogates checked as for JSON (pools.engine.jsonread).
    return read_yaml(text, what)


def _mapping(value: Any, where: str, allowed: set[str], hint: str = "") -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping", field=where)
    for key in value:
        if key not in allowed:
            name = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"{name}: unknown field{hint}; use one of {', '.join(sorted(allowed))}", field=name)
    return value


def _list(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list", field=where)
    return value


def _strings(value: Any, where: str) -> list[str]:
    """A command or args: a list of strings (numbers are written as they read), or one string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    items = _list(value, where)
    if not all(isinstance(item, str | int | float) and not isinstance(item, bool) for item in items):
        raise ConfigError(f"{where}: expected a list of strings", field=where)
    return [str(item) for item in items]


# ---- OSMO ----------------------------------------------------------------------------------------------

def _variables(pairs: Iterable[str]) -> dict[str, str]:
    result = {}
    for index, pair in enumerate(pairs):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"set_variables[{index}]: {pair!r} is not KEY=VALUE", field=f"set_variables[{index}]")
        result[key.strip()] = value
    return result


class TemplateRefused(ConfigError):
    """A workflow file that does not render: the 400 names `file`, the line and, for a budget, the limit."""

    def __init__(self, message: str, line: int | None, limit: str | None = None):
        where = f"line {line}: " if line else ""
        super().__init__(f"file: {where}{message}", field="file")
        self.extra = {"line": line, **({"limit": limit} if limit else {})}


@dataclass(frozen=True)
class Ceilings:
    """How many tasks one workflow file may hold, in all and in one group (OSMO_MAX_WORKFLOW_TASKS,
    OSMO_MAX_TASKS_PER_GROUP): counted once the YAML is read, before any group is read or checked."""

    tasks: int = 1000
    tasks_per_group: int = 512
    file_bytes: int = 256 * 1024  # a group's `files`, every task's together (OSMO_MAX_GROUP_FILE_BYTES)


class CeilingExceeded(ConfigError):
    def __init__(self, message: str, field: str, limit: str):
        super().__init__(message, field=field)
        self.extra = {"limit": limit}


def _count_tasks(spec: dict, ceilings: Ceilings) -> None:
    groups = spec.get("groups") if isinstance(spec.get("groups"), list) else []
    single = spec.get("tasks") if isinstance(spec.get("tasks"), list) else []
    total = len(single)
    for index, group in enumerate(groups):
        tasks = group.get("tasks") if isinstance(group, dict) and isinstance(group.get("tasks"), list) else []
        if len(tasks) > ceilings.tasks_per_group:
            raise CeilingExceeded(f"workflow.groups[{index}].tasks: {len(tasks)} tasks are over the limit of "
                                  f"{ceilings.tasks_per_group} tasks in one group (OSMO_MAX_TASKS_PER_GROUP)",
                                  f"workflow.groups[{index}].tasks", "OSMO_MAX_TASKS_PER_GROUP")
        total += len(tasks)
    if total > ceilings.tasks:
        raise CeilingExceeded(f"workflow.tasks: {total} tasks are over the limit of {ceilings.tasks} tasks in one "
                              "workflow, every group's together (OSMO_MAX_WORKFLOW_TASKS)", "workflow.tasks",
                              "OSMO_MAX_WORKFLOW_TASKS")


def _render(text: str, variables: Mapping[str, Any]) -> str:
    """OSMO workflow files are Jinja templates: `{{ name }}` placeholders filled before the YAML is read, in the
    budgeted sandbox (`pools.engine.sandbox`: output, value size, integers, work and time checked as it runs)."""
    try:
        return render_text(text, variables)
    except BudgetExceeded as exc:
        raise TemplateRefused(str(exc), template_line(exc), exc.limit) from None
    except jinja2.UndefinedError as exc:
        raise TemplateRefused(f"{exc.message}; give it with set_variables (\"KEY=VALUE\") or under default-values "
                              "in the file", template_line(exc)) from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateRefused(f"template error: {exc.message}", exc.lineno) from None
    except RecursionError as exc:
        raise TemplateRefused("template error: calls nest too deeply (a macro that calls itself?)",
                              template_line(exc)) from None
    except Exception as exc:  # the file is user input: `{{ 1/0 }}`, a bad type, a sandbox refusal, ...
        raise TemplateRefused(f"template error: {type(exc).__name__}: {exc}", template_line(exc)) from None


def _defaults(text: str) -> dict[str, Any]:
    """The file's own `default-values:` mapping, read before rendering (placeholders inside other keys make
    the text unparseable as YAML until rendered, so only that block is read)."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("default-values:"):
            inside = True
            lines.append(line)
            continue
        if inside:
            if line and not line[0].isspace() and not line.startswith("#"):
                break
            lines.append(line)
    if not lines:
        return {}
    block = _yaml("\n".join(lines), "default-values")
    values = (block or {}).get("default-values") or {}
    if not isinstance(values, dict):
        raise ConfigError("default-values: expected a mapping of names to values", field="default-values")
    return values


def workflow_requests(text: str, *, pool: str, priority: str = "NORMAL", set_variables: Iterable[str] = (),
                      project: str | None = None, ceilings: Ceilings = Ceilings(), dry_run: bool = False) -> Workflow:
    """An OSMO workflow file as one gang request per task group, each with `pools=[pool]` (OSMO takes the
    pool from the URL too) and the project `project` (`?project=`), else the file's `workflow.project`, else none
    (the submission fills in the caller's default project)."""
    chosen = priority_of(priority)
    set_variables = list(set_variables)
    osmo_tokens.check_not_set([pair.partition("=")[0] for pair in set_variables], "set_variables")
    given = _variables(set_variables)
    variables = {**_defaults(text), **given}
    protected, tokens = osmo_tokens.protect(text)  # OSMO's special tokens pass through the render as written
    rendered = _render(protected, {**variables, **tokens})
    document = _yaml(rendered, "file")
    if not isinstance(document, dict) or "workflow" not in document:
        raise ConfigError("file: expected a workflow spec: {version: 2, workflow: {name, tasks or groups, ...}}",
                          field="file")
    _mapping(document, "", {"version", "workflow", "default-values"})
    if document.get("version", 2) != 2:
        raise ConfigError(f"version: {document['version']!r}: only version 2 specs are supported", field="version")
    spec = _mapping(document["workflow"], "workflow", _WORKFLOW_KEYS)
    _count_tasks(spec, ceilings)
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError("workflow.name: field is required", field="workflow.name")
    if name_problem(name):
        raise ConfigError(f"workflow.name: {name_problem(name)}", field="workflow.name")
    warnings = []
    named = spec.get("project")
    if named is not None and not isinstance(named, str):
        raise ConfigError("workflow.project: expected a project name", field="workflow.project")
    if project and named and named != project:
        warnings.append(f"workflow.project {named} is replaced by ?project={project}.")
    project = project or named or None
    if spec.get("pool") not in (None, pool):
        warnings.append(f"workflow.pool {spec['pool']} is replaced by the pool of the URL, {pool}.")
    if spec.get("backend"):
        warnings.append("workflow.backend is ignored: a pool's backend is chosen by its configuration.")
    if spec.get("labels"):
        warnings.append("workflow.labels are not copied to pods yet.")
    resources = spec.get("resources") or {"default": {}}
    _mapping(resources, "workflow.resources", set(resources) if isinstance(resources, dict) else set())
    timeout = _mapping(spec.get("timeout") or {}, "workflow.timeout", {"exec_timeout", "queue_timeout"})
    groups = [(f"workflow.groups[{i}]", _mapping(g, f"workflow.groups[{i}]", _GROUP_KEYS))
              for i, g in enumerate(_list(spec.get("groups"), "workflow.groups"))]
    for i, task in enumerate(_list(spec.get("tasks"), "workflow.tasks")):
        where = f"workflow.tasks[{i}]"
        task = _task_mapping(task, where)
        groups.append((where, {"name": f"{task.get('name')}-group", "tasks": [task], "_single": True}))
    if not groups:
        raise ConfigError("workflow: no tasks or groups to run", field="workflow.tasks")
    members = []
    for where, group in groups:
        members.append([GroupRequest(str(group.get("name")), request) for request in _group_requests(
            name, group, where, resources, timeout, pool, chosen.value, variables, project, ceilings, dry_run)])
    # by replica, the lead first (the members' tasks in member order)
    tasks = {parts[0].group: [task for part in parts for task in part.request.tasks] for parts in members}
    names = [parts[0].group for parts in members]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ConfigError(f"workflow: two groups are named {duplicate}", field="workflow.groups")
    if dry_run and "localpath:" in rendered:
        warnings.append("files given by localpath are read as empty here: OSMO's CLI sends their contents when it "
                        "submits.")
    return Workflow(name, _with_dependencies(members, groups, tasks), warnings, rendered, tasks)


def _with_dependencies(members: list[list[GroupRequest]], groups: list[tuple[str, dict]],
                       tasks: dict[str, list[str]]) -> list[GroupRequest]:
    """Each group's task inputs with the group of the task they name (an unknown task, one of the same group or a
    cycle refused, naming the place: `scheduling.specs.data.dependencies`)."""
    deps = []
    for (where, group), parts in zip(groups, members, strict=True):
        request = parts[0]  # the members of a group share their inputs
        single = where.startswith("workflow.tasks[")
        for i, task in enumerate(group.get("tasks") or []):
            deps.append(data.TaskDeps(where if single else f"{where}.tasks[{i}]", str(task.get("name")),
                                      request.group, request.request.inputs))
    data.dependencies(deps)
    group_of = {task: group for group, names in tasks.items() for task in names}
    return [GroupRequest(g.group, g.request.model_copy(update={"inputs": data.with_groups(g.request.inputs, group_of)}))
            if any(i.task for i in g.request.inputs) else g for parts in members for g in parts]


def _task_mapping(task: Any, where: str) -> dict:
    if isinstance(task, dict):
        for key in task:
            if key in _NOT_RUN:
                instead = _INSTEAD.get(key, "remove it")
                raise ConfigError(f"{where}.{key}: {_NOT_RUN[key]} ({key}) is not something we run; {instead}",
                                  field=f"{where}.{key}")
    return _mapping(task, where, _TASK_KEYS)


def _group_requests(workflow: str, group: dict, where: str, resources: dict, timeout: dict, pool: str,
                    priority: str, variables: Mapping[str, Any], project: str | None = None,
                    ceilings: Ceilings = Ceilings(), dry_run: bool = False) -> list[WorkloadRequest]:
    """The group's request: one, or one per pod shape when its tasks differ in image, resource and the like
    (`osmo_groups.members`), each naming the whole `gang`, so that admission starts them together."""
    single = group.pop("_single", False)
    if not group.get("name"):
        raise ConfigError(f"{where}.name: field is required", field=f"{where}.name")
    tasks = _list(group.get("tasks"), f"{where}.tasks")
    if not tasks:
        raise ConfigError(f"{where}.tasks: a group needs at least one task", field=f"{where}.tasks")
    task_where = (lambda i: where) if single else (lambda i: f"{where}.tasks[{i}]")
    tasks = [_task_mapping(t, task_where(i)) for i, t in enumerate(tasks)]
    names = [str(t.get("name")) for t in tasks]
    tasks = [osmo_tokens.resolve(t, task_where(i), names) for i, t in enumerate(tasks)]
    for i, task in enumerate(tasks):
        for key in ("name", "image"):
            if not task.get(key):
                raise ConfigError(f"{task_where(i)}.{key}: field is required", field=f"{task_where(i)}.{key}")
        problem = name_problem(str(task["name"])) or ("another task of the group has this name"
                                                     if str(task["name"]) in names[:i] else "")
        if problem:
            raise ConfigError(f"{task_where(i)}.name: {problem}", field=f"{task_where(i)}.name")
    for i, task in enumerate(tasks[1:], 1):
        for key in _SAME_DATA:
            if task.get(key) != tasks[0].get(key):
                raise ConfigError(f"{task_where(i)}.{key}: differs from task {tasks[0]['name']}'s; the tasks of a "
                                  f"group share their pods' data steps and credentials, so they must share {key} (put "
                                  "a task with other data in its own group)", field=f"{task_where(i)}.{key}")
    if sum(1 for task in tasks if task.get("lead")) > 1:
        raise ConfigError(f"{where}.tasks: more than one lead task", field=f"{where}.tasks")
    parts = osmo_groups.members(tasks)
    if len(parts) > osmo_groups.MAX_SHAPES:
        raise ConfigError(f"{where}.tasks: its tasks have {len(parts)} different pod shapes (image, resource and the "
                          f"like); a group runs at most {osmo_groups.MAX_SHAPES}, one Job each: give tasks one image "
                          "and resource, or put them in groups of their own", field=f"{where}.tasks")
    gang = [[names[i] for i in part] for part in parts] if len(parts) > 1 else []
    planned = [osmo_groups.plan([tasks[i] for i in part], (lambda j, part=part: task_where(part[j])), group, where,
                                dry_run=dry_run, lead=index == 0) for index, part in enumerate(parts)]
    size = sum(len(item["contents"].encode()) for plan in planned for item in plan.files)
    if size > ceilings.file_bytes:
        raise CeilingExceeded(f"{where}.tasks: the files of this group take {size:,} bytes, over the limit of "
                              f"{ceilings.file_bytes:,} (OSMO_MAX_GROUP_FILE_BYTES)", f"{where}.tasks",
                              "OSMO_MAX_GROUP_FILE_BYTES")
    return [_member_request(workflow, group, where, (lambda j, part=part, plan=plan: task_where(part[plan.order[j]])),
                            plan, resources, timeout, pool, priority, variables, project, gang, index)
            for index, (part, plan) in enumerate(zip(parts, planned, strict=True))]


def _member_request(workflow: str, group: dict, where: str, task_where, planned: osmo_groups.Group, resources: dict,
                    timeout: dict, pool: str, priority: str, variables: Mapping[str, Any], project: str | None,
                    gang: list[list[str]], member: int) -> WorkloadRequest:
    """The request of the tasks of one pod shape (`planned`; `task_where(i)`: its i-th task's place in the file)."""
    first = planned.tasks[0]
    resource_name = first.get("resource", "default")
    if resource_name not in resources:
        raise ConfigError(f"{task_where(0)}.resource: {resource_name!r} is not one of workflow.resources "
                          f"({', '.join(resources)})", field=f"{task_where(0)}.resource")
    resource_where = f"workflow.resources.{resource_name}"
    spec = _mapping(resources[resource_name] or {}, resource_where, _RESOURCE_KEYS)
    if spec.get("nodesExcluded"):
        raise ConfigError(f"{resource_where}.nodesExcluded: excluding nodes is not supported; use a platform",
                          field=f"{resource_where}.nodesExcluded")
    topology = []
    for i, item in enumerate(_list(spec.get("topology"), f"{resource_where}.topology")):
        item = _mapping(item, f"{resource_where}.topology[{i}]", _TOPOLOGY_KEYS)
        topology.append({"key": item.get("key"), "requirement": item.get("requirementType", "required"),
                         "group": item.get("group", "default")})
    from_secret = first.get("env_from_secret") or {}
    if not isinstance(from_secret, dict):
        raise ConfigError(f"{task_where(0)}.env_from_secret: expected a mapping of names to \"secret/key\"",
                          field=f"{task_where(0)}.env_from_secret")
    body = {
        "inputs": data.parse_inputs(first.get("inputs"), f"{task_where(0)}.inputs"),
        "outputs": data.by_replica([data.parse_outputs(task.get("outputs"), f"{task_where(i)}.outputs")
                                    for i, task in enumerate(planned.tasks)]),
        "credentials": data.parse_credentials(first.get("credentials"), f"{task_where(0)}.credentials"),
        "name": group["name"], "workflow": workflow, "group": group["name"], "pools": [pool], "project": project,
        "platform": spec.get("platform"), "image": first["image"],
        "command": planned.command, "args": planned.args, "env": planned.env, "replicas": len(planned.tasks),
        "files": planned.files,
        "env_from_secret": {str(k): str(v) for k, v in from_secret.items()},
        "resources": {key: spec[key] for key in ("gpu", "cpu", "memory", "storage") if spec.get(key) is not None},
        "priority": priority, "exec_timeout": timeout.get("exec_timeout"),
        "queue_timeout": timeout.get("queue_timeout"), "exit_actions": first.get("exitActions") or {},
        "topology": topology, "privileged": bool(first.get("privileged", False)),
        "host_network": bool(first.get("hostNetwork", False)),
        "mounts": _strings(first.get("volumeMounts"), f"{task_where(0)}.volumeMounts"),
        "variables": {str(k): str(v) for k, v in variables.items()},
        "tasks": [str(t["name"]) for t in planned.tasks], "gang": gang, "member": member,
    }
    prefix = task_where(0)
    try:
        return WorkloadRequest.parse(body)
    except ConfigError as exc:
        place = {"name": f"{where}.name", "env": f"{prefix}.environment", "project": "workflow.project",
                 "env_from_secret": f"{prefix}.env_from_secret",
                 "resources": resource_where, "topology": f"{resource_where}.topology",
                 "exec_timeout": "workflow.timeout", "queue_timeout": "workflow.timeout"}
        root = exc.field.split(".", 1)[0] if exc.field else ""
        field_name = place.get(root, prefix) + (exc.field[len(root):] if root in place else f".{exc.field}")
        raise ConfigError(f"{field_name}: {exc.message.split(': ', 1)[-1]}", field=field_name) from None


# ---- gpuctl --------------------------------------------------------------------------------------------

_GPUCTL_KEYS = {"kind", "version", "job", "environment", "resources", "storage", "service"}
# gpuctl's workload kinds (docs/researcher/kinds.md); `service` holds a long-running kind's
# `replicas` and (notebook, inference) `port`.
GPUCTL_KINDS = ("training", "notebook", "inference", "compute")
_SERVICE_KEYS = {"port", "replicas"}
_JOB_KEYS = {"name", "priority", "description", "project"}
_ENV_KEYS = {"image", "imagePullSecret", "command", "args", "env"}
_GPUCTL_RESOURCE_KEYS = {"pool", "gpu", "gpuType", "gpu-type", "cpu", "memory", "gpuShare"}
_DROPPED = " (gpuctl would silently drop it)"


def gpuctl_request(text: str, project: str | None = None) -> WorkloadRequest:
    """A gpuctl job file (`kind: training`, `notebook`, `inference` or `compute`; issue 43; a long-running kind's
    `service: {port, replicas}`) as a request; `job.project` its project (`project`, the command line's
    `--project`, wins; neither: the submitter's default project), `resources.pool` is its one candidate pool (none:
    the project's default pools), `gpuType` (or `gpu-type`, as gpuctl's docs write it) becomes the request's `gpu_type`
    (a node requirement) and variable GPU_TYPE."""
    document = _yaml(text, "job file")
    if not isinstance(document, dict):
        raise ConfigError("job file: expected a mapping with kind, job, environment and resources", field="kind")
    kind = document.get("kind")
    if kind not in GPUCTL_KINDS:
        raise ConfigError(f"kind: {kind!r} is not a workload we run; use kind: training (a batch job), notebook, "
                          "inference or compute", field="kind")
    _mapping(document, "", _GPUCTL_KEYS, _DROPPED)
    service = _mapping(document.get("service") or {}, "service", _SERVICE_KEYS, _DROPPED)
    job = _mapping(document.get("job") or {}, "job", _JOB_KEYS, _DROPPED)
    environment = _mapping(document.get("environment") or {}, "environment", _ENV_KEYS, _DROPPED)
    resources = _mapping(document.get("resources") or {}, "resources", _GPUCTL_RESOURCE_KEYS, _DROPPED)
    if resources.get("gpuShare"):
        raise ConfigError("resources.gpuShare: sharing a GPU is not supported; ask for whole GPUs",
                          field="resources.gpuShare")
    env = {}
    for i, item in enumerate(_list(environment.get("env"), "environment.env")):
        item = _mapping(item, f"environment.env[{i}]", {"name", "value"})
        if not item.get("name"):
            raise ConfigError(f"environment.env[{i}].name: field is required", field=f"environment.env[{i}].name")
        env[str(item["name"])] = "" if item.get("value") is None else str(item["value"])
    mounts = []
    storage = _mapping(document.get("storage") or {}, "storage", {"workdirs"}, _DROPPED)
    for i, item in enumerate(_list(storage.get("workdirs"), "storage.workdirs")):
        item = _mapping(item, f"storage.workdirs[{i}]", {"path"}, _DROPPED)
        mounts.append(str(item.get("path", "")))
    gpu_type = resources.get("gpuType", resources.get("gpu-type"))
    body = {
        "name": job.get("name"), "image": environment.get("image"),
        **({"project": project or job.get("project")} if project or job.get("project") is not None else {}),
        "command": _strings(environment.get("command"), "environment.command"),
        "args": _strings(environment.get("args"), "environment.args"), "env": env,
        "pools": [resources["pool"]] if resources.get("pool") else None,
        "resources": {key: resources[key] for key in ("gpu", "cpu", "memory") if resources.get(key) is not None},
        "priority": priority_of(job.get("priority", "medium"), "job.priority").value,
        "variables": {"GPU_TYPE": str(gpu_type)} if gpu_type else {}, "mounts": mounts,
        **({"gpu_type": str(gpu_type)} if gpu_type else {}),
        **({"kind": kind} if kind != "training" else {}),
        **({key: service[key] for key in ("port", "replicas") if service.get(key) is not None}),
    }
    if not body["name"]:
        raise ConfigError("job.name: field is required", field="job.name")
    try:
        return WorkloadRequest.parse(body)
    except ConfigError as exc:
        place = {"name": "job.name", "project": "job.project", "image": "environment.image", "env": "environment.env",
                 "command": "environment.command", "args": "environment.args", "pools": "resources.pool",
                 "mounts": "storage.workdirs", "port": "service.port", "replicas": "service.replicas",
                 "gpu_type": "resources.gpuType" if "gpuType" in resources else "resources.gpu-type"}
        root = exc.field.split(".", 1)[0] if exc.field else ""
        field_name = place.get(root, root) + exc.field[len(root):] if root else ""
        raise ConfigError(f"{field_name}: {exc.message.split(': ', 1)[-1]}" if field_name else exc.message,
                          field=field_name) from None
