"""The body of a workload submission, validated and normalized (pure: no Django).

All three doors (the native API, an OSMO workflow's task groups, a gpuctl job file) end in a
`WorkloadRequest`, so a field rule is written once. Amounts are normalized to whole base units: CPU in
millicores, memory and storage in bytes, GPUs as whole devices. Refusals are `ConfigError`s naming the
field, as everywhere else.
"""

import re
from decimal import Decimal
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from pools.engine import ConfigError, EngineError, check_exit_actions, parse_quantity, parse_timeout
from pools.engine.pod_rules import C_IDENTIFIER, quantity_error
from scheduling.specs import data, podenv

# A Kubernetes label value (the workload's name becomes one on its Job and pods).
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
# A workflow ID (`<name>-<n>`) or task group: the same characters, up to the column's 128.
_WORKFLOW = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,126}[A-Za-z0-9])?$")
MAX_REPLICAS = 1000
# Files written into the pods (one ConfigMap, which Kubernetes caps at 1 MiB with its keys): a ceiling under it;
# the OSMO door's own limit (OSMO_MAX_GROUP_FILE_BYTES) is lower.
MAX_FILE_BYTES = 768 * 1024
MAX_FILES = 256


def _index(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) < 5


def name_problem(value: str) -> str:
    """Why `value` is not a valid workload or workflow name ("" if it is)."""
    if _NAME.fullmatch(value):
        return ""
    return (f"{value[:100]!r} is not a valid name: 1 to 63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit")

Scalar = StrictStr | StrictInt | StrictFloat | StrictBool


class Priority(StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def preemptible(self) -> bool:
        return self is Priority.LOW

    @property
    def rank(self) -> int:
        """Higher is served first."""
        return {"high": 2, "normal": 1, "low": 0}[self.value]


class Kind(StrEnum):
    """What a workload is (issue 43): a batch `training` (an Indexed Job that completes), an interactive `notebook`
    (one long-running pod with an HTTP port), an `inference` service (N replicas behind a Service, rolled to a new
    image when the same name is submitted again) or a long-running `compute` (replicas, no port)."""
    TRAINING = "training"
    NOTEBOOK = "notebook"
    INFERENCE = "inference"
    COMPUTE = "compute"

    @property
    def long_running(self) -> bool:
        return self is not Kind.TRAINING


# The port a kind listens on when the request names none (Jupyter's; the common inference servers').
DEFAULT_PORTS = {Kind.NOTEBOOK: 8888, Kind.INFERENCE: 8000}


def priority_of(value: Any, field: str = "priority") -> Priority:
    """OSMO's HIGH|NORMAL|LOW in any case; gpuctl's `medium` is our normal."""
    text = str(value).strip().lower() if isinstance(value, str) else ""
    text = {"medium": "normal"}.get(text, text)
    try:
        return Priority(text)
    except ValueError:
        raise ConfigError(f"{field}: {value!r} is not a priority; use high, normal or low", field=field) from None


def _amount(value: Any, field: str, *, whole: bool = False, scale: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ConfigError(f"{field}: expected a quantity such as 8, \"500m\" or \"64Gi\", got {value!r}", field=field)
    try:
        number = parse_quantity(value) * scale
    except EngineError as exc:
        raise ConfigError(f"{field}: {exc}", field=field) from None
    if number < 0:
        raise ConfigError(f"{field}: {value!r} is negative", field=field)
    if whole and number != number.to_integral_value():
        raise ConfigError(f"{field}: {value!r} is not a whole number (GPUs are whole devices)", field=field)
    return int(number.to_integral_value(rounding="ROUND_CEILING"))


class Resources(BaseModel):
    """One replica's requests, in base units."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: int = 0
    cpu: int = 1000
    memory: int = 1024 ** 3
    storage: int = 0

    @classmethod
    def parse(cls, data: Any, field: str = "resources") -> "Resources":
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ConfigError(f"{field}: expected an object such as {{\"gpu\": 1, \"cpu\": \"8\"}}", field=field)
        unknown = sorted(set(data) - {"gpu", "cpu", "memory", "storage"})
        if unknown:
            raise ConfigError(f"{field}.{unknown[0]}: unknown resource; use gpu, cpu, memory and storage",
                              field=f"{field}.{unknown[0]}")
        values: dict[str, int] = {}
        if data.get("gpu") is not None:
            values["gpu"] = _amount(data["gpu"], f"{field}.gpu", whole=True)
        if data.get("cpu") is not None:
            values["cpu"] = _amount(data["cpu"], f"{field}.cpu", scale=1000)
        for key in ("memory", "storage"):
            if data.get(key) is not None:
                values[key] = _amount(data[key], f"{field}.{key}")
        return cls(**values)

    def variables(self) -> dict[str, Any]:
        """`USER_*` variables as the OSMO templates use them (quantities Kubernetes accepts)."""
        cpu = self.cpu // 1000 if self.cpu % 1000 == 0 else f"{self.cpu}m"
        return {"USER_GPU": self.gpu, "USER_CPU": cpu, "USER_MEMORY": str(self.memory),
                "USER_STORAGE": str(self.storage)}


class TopologyRequirement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    key: StrictStr
    requirement: StrictStr = Field("required", alias="requirementType")
    group: StrictStr = "default"

    @field_validator("requirement")
    @classmethod
    def _requirement(cls, value: str) -> str:
        if value not in ("required", "preferred"):
            raise ValueError(f"{value!r} is not a requirement; use required or preferred")
        return value


class WorkloadRequest(BaseModel):
    """`POST /api/workloads/`. Missing `project` and `pools` are filled in by the submission pipeline."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: StrictStr
    kind: Kind = Kind.TRAINING
    # The HTTP port of a notebook or inference (its Service's and link's); default DEFAULT_PORTS[kind].
    port: StrictInt | None = None
    project: StrictStr | None = None
    pools: list[StrictStr] | None = None
    platform: StrictStr | None = None
    image: StrictStr
    command: list[StrictStr] = Field(default_factory=list)
    args: list[StrictStr] = Field(default_factory=list)
    env: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    # {NAME: "secret/key"}: read from a Secret of the project's namespace, so the value is never stored here.
    env_from_secret: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    replicas: StrictInt = 1
    resources: Resources = Field(default_factory=Resources)
    priority: Priority = Priority.NORMAL
    exec_timeout: StrictStr | None = None
    queue_timeout: StrictStr | None = None
    exit_actions: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    topology: list[TopologyRequirement] = Field(default_factory=list)
    variables: dict[StrictStr, Scalar] = Field(default_factory=dict)
    privileged: StrictBool = False
    host_network: StrictBool = False
    mounts: list[StrictStr] = Field(default_factory=list)
    # Only nodes of this GPU type: their nvidia.com/gpu.product or its model word ("H100"), or the gpuctl pool
    # file's `<prefix>gpu-type` label; any case.
    gpu_type: StrictStr = ""
    workflow: StrictStr = ""  # the OSMO workflow this task group belongs to, if any
    group: StrictStr = ""
    # OSMO's task data and credentials (scheduling.specs.data): what is downloaded before the task starts (another
    # task's output, a URL, a dataset), uploaded when it ends, and the user's credentials it is given.
    inputs: list[data.TaskInput] = Field(default_factory=list)
    outputs: list[data.TaskOutput] = Field(default_factory=list)
    credentials: list[data.CredentialUse] = Field(default_factory=list)
    # An OSMO group's task names in the order of its replicas (completion indexes): what `{{host:TASK}}` resolves.
    tasks: list[StrictStr] = Field(default_factory=list)
    # Files written into the replicas: [{"path": absolute path, "contents": text}] in every one, and with "task":
    # an index, copied by an OSMO group's launcher into that replica only (`scheduling.specs.osmo_groups`).
    files: list[dict[StrictStr, StrictStr]] = Field(default_factory=list)
    # An OSMO group whose tasks differ in pod shape (image, resource, ...) runs as one workload per shape, its
    # "members", admitted together (docs/architecture/decisions.md, "A group of differing shapes"): `gang` names
    # the tasks of every member in member order (the lead's member first), `member` is this one's place in it.
    gang: list[list[StrictStr]] = Field(default_factory=list)
    member: StrictInt = 0

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("workflow", "group")
    @classmethod
    def _workflow(cls, value: str) -> str:
        if value and not _WORKFLOW.fullmatch(value):
            raise ValueError(f"{value[:100]!r} is not a valid name: up to 128 letters, digits, '-', '_' or '.', "
                             "starting and ending with a letter or digit")
        return value

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs(cls, value: Any) -> Any:
        return data.parse_inputs(value)

    @field_validator("outputs", mode="before")
    @classmethod
    def _outputs(cls, value: Any) -> Any:
        return data.parse_outputs(value)

    @field_validator("credentials", mode="before")
    @classmethod
    def _credentials(cls, value: Any) -> Any:
        return data.parse_credentials(value)

    @property
    def after(self) -> list[str]:
        """The groups of its workflow this one waits for: those of the tasks it takes inputs from."""
        return list(dict.fromkeys(i.group for i in self.inputs if i.task and i.group))

    @field_validator("gpu_type")
    @classmethod
    def _gpu_type(cls, value: str) -> str:
        if value and not _NAME.fullmatch(value):
            raise ValueError(f"{value[:100]!r} is not a GPU type: a label value such as H100 or "
                             "NVIDIA-H100-80GB-HBM3 (up to 63 letters, digits, '-', '_' or '.')")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not value.strip() or any(c.isspace() for c in value):
            raise ValueError("an image reference such as nvcr.io/nvidia/pytorch:24.05-py3 is required")
        return value

    @field_validator("pools")
    @classmethod
    def _pools(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("names a pool twice")
        return value or None

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not C_IDENTIFIER.fullmatch(name):
                raise ConfigError(f"env.{name}: {name!r} is not an environment variable name: letters, digits and '_', "
                                  "not starting with a digit", field=f"env.{name}"[:200])
        podenv.check_env_names(value, "env")  # GPUs only through the quota
        return value

    @field_validator("variables")
    @classmethod
    def _variables(cls, value: dict[str, Any]) -> dict[str, Any]:
        """The variables that fill the templates' resource amounts are checked as those fields are: whole GPUs,
        quantities in the API server's syntax."""
        for name in ("USER_GPU", "USER_CPU", "USER_MEMORY", "USER_STORAGE"):
            if name not in value:
                continue
            problem = quantity_error(value[name])
            if problem is None and name == "USER_GPU" and parse_quantity(value[name]) % 1:
                problem = f"{value[name]!r} is not a whole number (GPUs are whole devices)"
            if problem:
                raise ConfigError(f"variables.{name}: {problem}", field=f"variables.{name}")
        return value

    @field_validator("replicas")
    @classmethod
    def _replicas(cls, value: int) -> int:
        if not 1 <= value <= MAX_REPLICAS:
            raise ValueError(f"must be between 1 and {MAX_REPLICAS}")
        return value

    @field_validator("resources", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> Any:
        return value if isinstance(value, Resources) else Resources.parse(value)

    @field_validator("priority", mode="before")
    @classmethod
    def _priority(cls, value: Any) -> Any:
        return value if isinstance(value, Priority) else priority_of(value)

    @field_validator("exec_timeout", "queue_timeout")
    @classmethod
    def _timeout(cls, value: str | None) -> str | None:
        if value:
            try:
                parse_timeout(value)
            except EngineError as exc:
                raise ValueError(str(exc)) from None
        return value or None

    _exit_actions = field_validator("exit_actions")(check_exit_actions)

    @model_validator(mode="after")
    def _secrets(self) -> "WorkloadRequest":
        podenv.check_env_from_secret(self.env_from_secret, self.env)
        return self

    @field_validator("files")
    @classmethod
    def _files(cls, value: list[dict[str, str]]) -> list[dict[str, str]]:
        if len(value) > MAX_FILES:
            raise ValueError(f"{len(value)} files are more than {MAX_FILES}")
        paths = set()
        for index, item in enumerate(value):
            path = item.get("path", "")
            if set(item) - {"task"} != {"path", "contents"} or not path.startswith("/") or ".." in path.split("/") \
                    or "\0" in path or len(path) > 4096 or not _index(item.get("task", "0")):
                raise ConfigError(f"files[{index}]: expected {{\"path\": an absolute path, \"contents\": text}}",
                                  field=f"files[{index}]")
            if (path, item.get("task")) in paths or (path, None) in paths:
                raise ConfigError(f"files[{index}].path: {path} is written twice", field=f"files[{index}].path")
            paths.add((path, item.get("task")))
        size = sum(len(item["contents"].encode()) for item in value)
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{size:,} bytes of files are over {MAX_FILE_BYTES:,}")
        return value

    @model_validator(mode="after")
    def _tasks(self) -> "WorkloadRequest":
        if self.tasks and len(self.tasks) != self.replicas:
            raise ConfigError(f"tasks: {len(self.tasks)} task names for {self.replicas} replicas; name one task "
                              "per replica", field="tasks")
        for index, task in enumerate(self.tasks):
            if name_problem(task):
                raise ConfigError(f"tasks[{index}]: {name_problem(task)}", field=f"tasks[{index}]")
            if task in self.tasks[:index]:
                raise ConfigError(f"tasks[{index}]: two tasks are named {task}", field=f"tasks[{index}]")
        if self.gang or self.member:
            if not 0 <= self.member < len(self.gang) or self.gang[self.member] != self.tasks:
                raise ConfigError("gang: this member's tasks must be gang[member]", field="gang")
            names = [task for tasks in self.gang for task in tasks]
            if len(set(names)) != len(names) or any(not tasks for tasks in self.gang):
                raise ConfigError("gang: each member names its own tasks, at least one", field="gang")
        return self

    @model_validator(mode="after")
    def _kind(self) -> "WorkloadRequest":
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ConfigError("port: must be between 1 and 65535", field="port")
        if self.kind in (Kind.TRAINING, Kind.COMPUTE) and self.port is not None:
            raise ConfigError(f"port: a {self.kind.value} workload has no port; only notebook and inference do",
                              field="port")
        if self.kind == Kind.NOTEBOOK and self.replicas != 1:
            raise ConfigError("replicas: a notebook is one pod; ask for replicas 1", field="replicas")
        if self.kind.long_running and (self.exit_actions or self.exec_timeout):
            field = "exit_actions" if self.exit_actions else "exec_timeout"
            raise ConfigError(f"{field}: a {self.kind.value} runs until stopped; exit actions and an exec timeout "
                              "are for training", field=field)
        if self.kind.long_running and self.workflow:
            raise ConfigError(f"kind: a {self.kind.value} is not a workflow task; only training is", field="kind")
        return self

    @property
    def service_port(self) -> int | None:
        """The port its Service and link use (None: no Service)."""
        return self.port or DEFAULT_PORTS.get(self.kind)

    @model_validator(mode="after")
    def _topology_keys(self) -> "WorkloadRequest":
        keys = [item.key for item in self.topology]
        if len(set(keys)) != len(keys):
            raise ValueError("topology names a key twice")
        return self

    @classmethod
    def parse(cls, data: Any, field: str = "") -> "WorkloadRequest":
        if not isinstance(data, dict):
            raise ConfigError("expected a JSON object describing the workload", field=field)
        try:
            return cls.model_validate(data)
        except ConfigError as exc:
            raise ConfigError(exc.message, field=f"{field}.{exc.field}" if field else exc.field) from None
        except ValidationError as exc:
            raise explain(exc, field) from None

    def document(self) -> dict[str, Any]:
        """The request as stored and shown (amounts in base units)."""
        return self.model_dump(mode="json", by_alias=False)


def explain(exc: ValidationError, prefix: str = "") -> ConfigError:
    error = exc.errors()[0]
    location = ".".join(str(part) for part in error["loc"] if not str(part).startswith("function-"))
    field = ".".join(part for part in (prefix, location) if part)
    if error["type"] == "extra_forbidden":
        text = "unknown field; remove it or fix its spelling"
    elif error["type"] == "missing":
        text = "field is required"
    else:
        text = error["msg"].removeprefix("Value error, ")
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigError):
            return ConfigError(cause.message, field=cause.field or field)
    return ConfigError(f"{field}: {text}" if field else text, field=field)
