"""Seed 000's five steps, per candidate pool, in order: access, resource check, templates, platform,
schedule. Each candidate gets a `Verdict`; a submission is refused only when every candidate refuses
it (`submission.submit` decides that). Reads the configuration; writes nothing."""

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple

from pools.config.documents import PoolDoc
from pools.config.effective import effective_platform
from pools.config.writes import pools_with_documents, templates_and_validations
from pools.engine import EngineError, NodeResources, evaluate_rules, parse_quantity, parse_timeout, render
from pools.engine.pod_rules import pod_errors
from pools.fleet.labels import gpu_type_key
from pools.models import Backend, Pool, Project, Quota
from pools.models.visibility import Access
from scheduling.decisions import admission as pure
from scheduling.specs import podenv
from scheduling.specs.jobs import USER_CONTAINER, require_any
from scheduling.specs.requests import WorkloadRequest
from scheduling.submit import reads

STEPS = ("access", "resources", "templates", "platform", "schedule")
PRODUCT_LABEL = "nvidia.com/gpu.product"


@dataclass
class Verdict:
    pool: str
    accepted: bool = False
    step: str = ""  # where it was refused
    code: str = ""
    message: str = ""
    platform: str = ""
    pod_template: dict | None = None
    per_replica: tuple[int, int, int, int] | None = None  # gpu, cpu millicores, memory, storage bytes
    exec_timeout: str = ""
    queue_timeout: str = ""
    variables: dict = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        body = {"pool": self.pool, "accepted": self.accepted, "platform": self.platform or None}
        if not self.accepted:
            body.update(step=self.step, code=self.code, message=self.message)
        if self.pod_template is not None:
            body["pod_template"] = self.pod_template
        return body


class Refusal(Exception):
    def __init__(self, step: str, code: str, message: str):
        super().__init__(message)
        self.step, self.code, self.message = step, code, message


class Shape(NamedTuple):
    """A node's allocatable, as the rules and the never-fits check read it."""

    name: str
    millicores: int
    gpu: int
    memory: int
    storage: int
    gpu_product: str = ""  # nvidia.com/gpu.product, named in the messages
    gpu_label: str = ""  # the gpuctl pool file's `<prefix>gpu-type` label


@dataclass
class Context:
    """What the steps read, loaded once per submission."""

    access: Access
    project: Project
    pools: dict[str, Pool]
    documents: dict[str, PoolDoc]
    templates: dict[str, dict]
    validations: dict[str, list]
    shapes: dict[str, dict[str, list["Shape"]]] = field(default_factory=dict)

    def nodes(self, pool: Pool, platform: str) -> list["Shape"]:
        """The platform's nodes, one per distinct allocatable shape (named by the first node of that shape):
        the rules and the never-fits check answer the same for two nodes of one shape, and a pool of 5,000
        nodes has a handful of shapes. One query per pool and submission."""
        if pool.name not in self.shapes:
            by_platform: dict[str, list[Shape]] = {}
            for platforms, millicores, gpu, memory, storage, product, name, label in reads.node_shapes(
                    pool.pk, gpu_type_key()):
                for platform_name in platforms:
                    by_platform.setdefault(platform_name, []).append(
                        Shape(name, millicores, gpu, memory, storage, product, label))
            self.shapes[pool.name] = by_platform
        return self.shapes[pool.name].get(platform, [])

    def typed_nodes(self, pool: Pool, platform: str, gpu_type: str) -> list["Shape"]:
        """`nodes`, only those of `gpu_type` when it names one (`pure.gpu_names`)."""
        shapes = self.nodes(pool, platform)
        wanted = gpu_type.lower()
        return [s for s in shapes if wanted in pure.gpu_names(s.gpu_product, s.gpu_label)] if wanted else shapes


def load_context(access: Access, project: Project, pool_names: list[str]) -> Context:
    found = pools_with_documents(pool_names)
    pools = {name: pool for name, (pool, _document) in found.items()}
    documents = {name: PoolDoc.model_validate(document) for name, (_pool, document) in found.items()}
    templates, validations = templates_and_validations(documents.values())
    return Context(access, project, pools, documents, templates, validations)


def run(context: Context, request: WorkloadRequest, pool_name: str) -> Verdict:
    verdict = Verdict(pool_name)
    try:
        pool = _access(context, pool_name)
        _gang_engine(pool, request)
        document = context.documents[pool_name]
        platform = _platform_name(pool, document, request)
        verdict.platform = platform
        effective = _effective(document, platform, context)
        variables = _variables(document, platform, request)
        verdict.variables = variables
        _resource_check(context, pool, document, platform, effective, variables, request, verdict)
        verdict.pod_template = _pod_template(document, platform, effective, variables, request, context)
        _require_gpu_type(context, pool, platform, request, verdict.pod_template)
        verdict.per_replica = _per_replica(verdict.pod_template, request)
        _schedule(context, pool, platform, request, verdict.per_replica)
    except Refusal as refusal:
        verdict.step, verdict.code, verdict.message = refusal.step, refusal.code, refusal.message
        return verdict
    verdict.accepted = True
    return verdict


# ---- 1. access ---------------------------------------------------------------------------------------

def _access(context: Context, pool_name: str) -> Pool:
    access = context.access
    pool = context.pools.get(pool_name)
    if pool is None or not access.may_use_pool(pool_name):
        # The same words for a pool that does not exist and one the user may not see: names are scoped.
        raise Refusal("access", "ACCESS", f"Pool {pool_name} does not exist or you may not use it "
                                          "(see /api/profile/ for the pools your roles grant).")
    if pool.enable_maintenance and not access.is_staff:
        raise Refusal("access", "MAINTENANCE", f"Pool {pool_name} is in maintenance: only admins may submit to it "
                                               "until it ends.")
    return pool


def _gang_engine(pool: Pool, request: WorkloadRequest) -> None:
    """Kueue gangs the pods of one Job (its batch/Job integration); the members of a group of differing shapes are
    several Jobs, which it would start apart (docs/architecture/decisions.md, "A group of differing shapes")."""
    if request.gang and pool.backend.scheduler == Backend.Scheduler.KUEUE:
        raise Refusal("engine", "GANG_ENGINE", (
            f"Pool {pool.name}'s backend queues with Kueue, which starts the pods of one Job together, not of "
            f"several: the tasks of group {request.group} differ in image or resource, so they run as "
            f"{len(request.gang)} Jobs and could start apart. Give its tasks one image and resource, or submit it "
            "to a pool whose backend uses the default scheduler or KAI."))


# ---- 2. resource check -------------------------------------------------------------------------------

def _platform_name(pool: Pool, document: PoolDoc, request: WorkloadRequest) -> str:
    names = list(document.platforms)
    name = request.platform or document.default_platform or (names[0] if len(names) == 1 else "")
    if name not in document.platforms:
        choices = ", ".join(names) or "none"
        what = f"Platform {name} is not" if name else "No platform was named and the pool has no default platform;"
        raise Refusal("platform", "PLATFORM", f"{what} one of pool {pool.name}'s platforms: {choices}.")
    return name


def _effective(document: PoolDoc, platform: str, context: Context) -> dict:
    try:
        return effective_platform(document, platform, context.templates, context.validations)
    except (KeyError, EngineError) as exc:
        raise Refusal("templates", "TEMPLATE", f"Platform {platform}'s configuration cannot be used: {exc}") from None


def _variables(document: PoolDoc, platform: str, request: WorkloadRequest) -> dict[str, Any]:
    resources = request.resources
    given = {key: value for key, value in resources.variables().items()
             if key.removeprefix("USER_").lower() in resources.model_fields_set}
    return {"USER_CONTAINER_NAME": USER_CONTAINER, **document.common_default_variables,
            **document.platforms[platform].default_variables, **given, **request.variables}


def _resource_check(context: Context, pool: Pool, document: PoolDoc, platform: str, effective: dict, variables: dict,
                    request: WorkloadRequest, verdict: Verdict) -> None:
    nodes = [NodeResources(node.name, cpu=f"{node.millicores}m", gpu=node.gpu, memory=node.memory,
                           storage=node.storage) for node in context.nodes(pool, platform)]
    report = evaluate_rules(effective["resource_validations"], variables, nodes)
    if not report.ok:
        raise Refusal("resources", "RULES", "; ".join(report.errors))
    verdict.exec_timeout = _timeout("exec_timeout", request.exec_timeout or document.default_exec_timeout,
                                    document.max_exec_timeout, pool.name)
    verdict.queue_timeout = _timeout("queue_timeout", request.queue_timeout or document.default_queue_timeout,
                                     document.max_queue_timeout, pool.name)
    keys = {key.key for key in document.topology_keys}
    for item in request.topology:
        if item.key not in keys:
            raise Refusal("resources", "TOPOLOGY", f"Topology key {item.key} is not one of pool {pool.name}'s "
                                                   f"topology keys ({', '.join(sorted(keys)) or 'none'}).")
        if pool.backend.scheduler != "kai":
            raise Refusal("resources", "TOPOLOGY", f"Pool {pool.name}'s backend does not run the KAI scheduler, "
                                                   "which topology requirements need.")


def _gpu_type_refusal(context: Context, pool: Pool, platform: str, request: WorkloadRequest) -> Refusal:
    types = sorted({pure.short_product(s.gpu_product) for s in context.nodes(pool, platform) if s.gpu_product}
                   | {s.gpu_label for s in context.nodes(pool, platform) if s.gpu_label})
    return Refusal("resources", "GPU_TYPE", f"No node of platform {pool.name}/{platform} has GPU type "
                                            f"{request.gpu_type} ({pure.GPU_TYPE_FIELD}); its nodes have: "
                                            f"{', '.join(types) or 'no GPU type'}.")


def _require_gpu_type(context: Context, pool: Pool, platform: str, request: WorkloadRequest,
                      template: dict) -> None:
    """A request naming a GPU type: the pod must go to a node of that type. The platform's nodes of the type are
    required by the label that says so (nvidia.com/gpu.product In [their products], or the pool file's gpu-type
    label), ANDed into every node selector term of the template; refused when the platform has none."""
    if not request.gpu_type:
        return
    shapes = context.typed_nodes(pool, platform, request.gpu_type)
    if not shapes:
        raise _gpu_type_refusal(context, pool, platform, request)
    wanted = request.gpu_type.lower()
    products = sorted({s.gpu_product for s in shapes if wanted in pure.gpu_names(s.gpu_product)})
    labels = sorted({s.gpu_label for s in shapes if s.gpu_label.lower() == wanted})
    require_any(template.setdefault("spec", {}), [
        *([{"key": PRODUCT_LABEL, "operator": "In", "values": products}] if products else []),
        *([{"key": gpu_type_key(), "operator": "In", "values": labels}] if labels else [])])


def _timeout(name: str, value: str | None, maximum: str | None, pool: str) -> str:
    if not value:
        return ""
    if maximum and parse_timeout(value) > parse_timeout(maximum):
        raise Refusal("resources", "TIMEOUT", f"{name} {value} is above pool {pool}'s maximum of {maximum}; "
                                              "ask for at most that (timeouts are refused, never capped).")
    return value


def timeout_seconds(value: str) -> int | None:
    return int(parse_timeout(value) / timedelta(seconds=1)) if value else None


# ---- 3. templates ------------------------------------------------------------------------------------

def _pod_template(document: PoolDoc, platform: str, effective: dict, variables: dict, request: WorkloadRequest,
                  context: Context) -> dict:
    try:
        template = render(effective["pod_template"], variables, "pod_template")
    except EngineError as exc:
        raise Refusal("templates", "TEMPLATE", f"The pod template does not render: {exc}") from None
    spec = template.setdefault("spec", {})
    user_name = str(variables.get("USER_CONTAINER_NAME") or USER_CONTAINER)
    containers = spec.setdefault("containers", [])
    user = next((c for c in containers if c.get("name") == user_name), None)
    if user is None:
        user = {"name": user_name}
        containers.insert(0, user)
    user["image"] = request.image
    if request.command:
        user["command"] = list(request.command)
    if request.args:
        user["args"] = list(request.args)
    if request.env or request.env_from_secret:
        env = {item.get("name"): item for item in user.get("env") or []}
        env.update({name: {"name": name, "value": value} for name, value in request.env.items()})
        env.update({item["name"]: item for item in podenv.secret_env(request.env_from_secret)})
        user["env"] = list(env.values())
    for container in [*(spec.get("initContainers") or []), *containers]:
        if not container.get("image"):
            origin = _template_of(container.get("name"), document, platform, variables, context)
            raise Refusal("templates", "TEMPLATE",
                          f"Container {container.get('name')} of pod template {origin} has no image and is not the "
                          f"user's container ({user_name}); remove it from the pool's templates or give it an image.")
    _host_access(spec, user, request, document, platform)
    podenv.void_gpus(spec)
    spec["restartPolicy"] = "Never"
    errors = pod_errors(template)
    if errors:
        shown = "; ".join(f"{path}: {message}" for path, message in errors[:3])
        raise Refusal("templates", "POD_SPEC", f"A real API server would refuse the pod: {shown}.")
    return template


def _template_of(container: str, document: PoolDoc, platform: str, variables: dict, context: Context) -> str:
    names = [*document.common_pod_template, *document.platforms[platform].override_pod_template]
    for name in names:
        for item in (context.templates.get(name, {}).get("spec") or {}).get("containers") or []:
            try:
                if render(item.get("name"), variables) == container:
                    return name
            except EngineError:
                continue
    return "(unknown)"


def _host_access(spec: dict, user: dict, request: WorkloadRequest, document: PoolDoc, platform: str) -> None:
    settings = document.platforms[platform]
    if request.host_network:
        spec["hostNetwork"] = True
    if spec.get("hostNetwork") and not settings.host_network_allowed:
        raise Refusal("templates", "HOST_NETWORK", f"Platform {platform} does not allow host networking.")
    if request.privileged:
        user.setdefault("securityContext", {})["privileged"] = True
    for container in spec.get("containers") or []:
        if (container.get("securityContext") or {}).get("privileged") and not settings.privileged_allowed:
            raise Refusal("templates", "PRIVILEGED", f"Platform {platform} does not allow privileged containers "
                                                     f"({container.get('name')}).")
    volumes = spec.setdefault("volumes", []) if request.mounts else spec.get("volumes") or []
    for index, mount in enumerate(request.mounts):
        source, _, target = mount.partition(":")
        volumes.append({"name": f"mount-{index}", "hostPath": {"path": source}})
        user.setdefault("volumeMounts", []).append({"name": f"mount-{index}", "mountPath": target or source})
    for volume in volumes:
        path = (volume.get("hostPath") or {}).get("path")
        if path and not any(path == allowed or path.startswith(allowed.rstrip("/") + "/")
                            for allowed in settings.allowed_mounts):
            raise Refusal("templates", "MOUNT", f"Platform {platform} does not allow mounting host path {path} "
                                                f"(allowed: {', '.join(settings.allowed_mounts) or 'none'}).")


def _per_replica(template: dict, request: WorkloadRequest) -> tuple[int, int, int, int]:
    """What one replica asks of a node: the sum of its containers' requests (the largest init container's
    when larger), as the kube-scheduler counts it; the request's own figures where the template has none."""
    spec = template.get("spec") or {}

    def total(containers) -> list[int]:
        sums = [0, 0, 0, 0]
        for container in containers or []:
            requests = (container.get("resources") or {}).get("requests") or {}
            for i, key in enumerate(("nvidia.com/gpu", "cpu", "memory", "ephemeral-storage")):
                if requests.get(key) not in (None, ""):
                    try:
                        amount = parse_quantity(requests[key]) * (1000 if key == "cpu" else 1)
                    except EngineError as exc:
                        raise Refusal("templates", "TEMPLATE", f"Container {container.get('name')}: "
                                                               f"{key}: {exc}") from None
                    sums[i] += int(amount.to_integral_value(rounding="ROUND_CEILING"))
        return sums

    main = total(spec.get("containers"))
    init = [total([c]) for c in spec.get("initContainers") or []]
    result = [max([main[i], *(x[i] for x in init)]) for i in range(4)]
    resources = request.resources
    fallback = (resources.gpu, resources.cpu, resources.memory, resources.storage)
    return tuple(result) if any(result) else fallback


# ---- 5. schedule -------------------------------------------------------------------------------------

def _schedule(context: Context, pool: Pool, platform: str, request: WorkloadRequest,
              per: tuple[int, int, int, int]) -> None:
    """Refuse what could never be admitted here: a replica larger than every node of the platform, or
    non-preemptible work above the deserved quota."""
    shapes = context.typed_nodes(pool, platform, request.gpu_type)
    if not shapes and request.gpu_type:
        raise _gpu_type_refusal(context, pool, platform, request)
    allocatable = [(node.gpu * 100, node.millicores, node.memory) for node in shapes]
    project = context.project
    # One query: the department's row and every row of its projects (their sum when the department has none).
    rows = reads.department_quotas(pool.pk, project.department_id)
    project_quota = _deserved(next((q for q in rows if q.project_id == project.pk), None))
    department_row = next((q for q in rows if q.department_id == project.department_id), None)
    if department_row is not None:
        department_quota = _deserved(department_row)
    else:
        department_quota = _department_sum([q for q in rows if q.project_id is not None])
    state = pure.Pool(pool.name, projects={project.name: project_quota},
                      departments={project.department.name: department_quota},
                      gpu_types={platform: pure.gpu_type(node.gpu_product for node in shapes)})
    workload = pure.Workload("new", project.name, project.department.name, (per[0] * 100, per[1], per[2]),
                             request.replicas, request.priority.preemptible, request.priority.rank, 0.0,
                             [(pool.name, platform)])
    reason = pure.never_fits(pure.Snapshot({pool.name: state}), workload, pool.name, platform, allocatable)
    if reason is not None:
        raise Refusal("schedule", reason.code.value, reason.message)


def _deserved(row: Quota | None) -> pure.Quota:
    if row is None:
        return pure.Quota()
    gpu = int((row.gpu_deserved or 0) * 100)
    return pure.Quota(deserved=(gpu, row.cpu_deserved, row.memory_deserved))


def _department_sum(rows: list[Quota]) -> pure.Quota:
    gpu = sum(int((r.gpu_deserved or 0) * 100) for r in rows)
    cpu = None if all(r.cpu_deserved is None for r in rows) else sum(r.cpu_deserved or 0 for r in rows)
    memory = None if all(r.memory_deserved is None for r in rows) else sum(r.memory_deserved or 0 for r in rows)
    return pure.Quota(deserved=(gpu, cpu, memory))
