"""Configuration documents in OSMO's JSON shapes: parsing, shape detection and field rules.

Pure Python (no Django): the admin, the API and the CLI all turn their input into these documents,
so a field rule is written once. Cross-object rules (references, backends) live in `pools.checks`.
"""

import re
from typing import Annotated, Any, Literal

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
)

from pools.engine import (
    ConfigError,
    EngineError,
    check_exit_actions,
    check_name,
    check_syntax,
    parse_quantity,
    parse_timeout,
    validate_rule_shape,
)

# Variables that name a resource amount must be Kubernetes quantities.
QUANTITY_VARIABLES = ("USER_CPU", "USER_GPU", "USER_MEMORY", "USER_STORAGE")
_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
POD_TEMPLATE_KEYS = ("apiVersion", "kind", "metadata", "spec")


Scalar = StrictStr | StrictInt | StrictFloat | StrictBool
Variables = dict[StrictStr, Scalar]
NameList = list[StrictStr]


def _check_variables(value: dict[str, Any]) -> dict[str, Any]:
    for key, item in value.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"variable name {key!r} is not an identifier")
        if key in QUANTITY_VARIABLES and not (isinstance(item, str) and "{{" in item):
            try:
                parse_quantity(item)
            except EngineError as exc:
                raise ValueError(f"{key}: {exc.message}") from None
    return value


def _check_names(value: list[str]) -> list[str]:
    for item in value:
        check_name(item, "referenced")
    if len(set(value)) != len(value):
        raise ValueError("lists the same name twice")
    return value


def _check_timeout(value: str | None) -> str | None:
    if value in (None, ""):
        return None
    try:
        parse_timeout(value)
    except EngineError as exc:
        raise ValueError(exc.message) from None
    return value


def _check_selector(value: dict[str, str]) -> dict[str, str]:
    for key, item in value.items():
        if not _LABEL_KEY_RE.fullmatch(key):
            raise ValueError(f"{key!r} is not a valid Kubernetes label key")
        if not _LABEL_VALUE_RE.fullmatch(item):
            raise ValueError(f"{item!r} (for {key}) is not a valid Kubernetes label value")
    return value


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TopologyKey(_Document):
    key: StrictStr
    label: StrictStr

    @field_validator("label")
    @classmethod
    def _label_is_label_key(cls, value: str) -> str:
        if not _LABEL_KEY_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a valid Kubernetes label key")
        return value


class PlatformDoc(_Document):
    description: StrictStr = ""
    host_network_allowed: StrictBool = False
    privileged_allowed: StrictBool = False
    default_variables: Variables = Field(default_factory=dict)
    resource_validations: NameList = Field(default_factory=list)
    override_pod_template: NameList = Field(default_factory=list)
    allowed_mounts: list[StrictStr] = Field(default_factory=list)

    _variables = field_validator("default_variables")(_check_variables)
    _names = field_validator("resource_validations", "override_pod_template")(_check_names)


Timeout = Annotated[StrictStr | None, Field(default=None)]


class PoolDoc(_Document):
    name: StrictStr | None = None
    description: StrictStr = ""
    backend: StrictStr
    default_platform: StrictStr | None = None
    enable_maintenance: StrictBool = False
    common_default_variables: Variables = Field(default_factory=dict)
    common_resource_validations: NameList = Field(default_factory=list)
    common_pod_template: NameList = Field(default_factory=list)
    default_exec_timeout: Timeout
    default_queue_timeout: Timeout
    max_exec_timeout: Timeout
    max_queue_timeout: Timeout
    default_exit_actions: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    action_permissions: dict[StrictStr, Any] = Field(default_factory=dict)
    resources: dict[StrictStr, Any] = Field(default_factory=dict)
    topology_keys: list[TopologyKey] = Field(default_factory=list)
    node_selector: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    # Where admission puts a gang's replicas: the fullest nodes that fit (binpack) or the emptiest (spread).
    placement: Literal["binpack", "spread"] = "binpack"
    platforms: dict[StrictStr, PlatformDoc] = Field(default_factory=dict)

    _variables = field_validator("common_default_variables")(_check_variables)
    _names = field_validator("common_resource_validations", "common_pod_template")(_check_names)
    _timeouts = field_validator(
        "default_exec_timeout", "default_queue_timeout", "max_exec_timeout", "max_queue_timeout"
    )(_check_timeout)
    _selector = field_validator("node_selector")(_check_selector)

    @field_validator("default_platform")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None

    _exit_actions = field_validator("default_exit_actions")(check_exit_actions)

    @field_validator("platforms")
    @classmethod
    def _platform_names(cls, value: dict[str, PlatformDoc]) -> dict[str, PlatformDoc]:
        for name in value:
            check_name(name, "platform")
        return value

    @field_validator("topology_keys")
    @classmethod
    def _unique_topology_keys(cls, value: list[TopologyKey]) -> list[TopologyKey]:
        for attr in ("key", "label"):
            seen = [getattr(item, attr) for item in value]
            duplicates = sorted({item for item in seen if seen.count(item) > 1})
            if duplicates:
                raise ValueError(f"topology {attr}s must be unique; repeated: {', '.join(duplicates)}")
        return value

    def to_document(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


_UNION_TAGS = {"str", "int", "float", "bool"}


def _location(loc: tuple) -> str:
    """Pydantic's error location as a dotted path, without its union and validator tags."""
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item not in _UNION_TAGS and not item.startswith("function-"):
            parts.append(("." if parts else "") + item)
    return "".join(parts)


def _explain(exc: ValidationError, what: str, prefix: str) -> ConfigError:
    messages, fields = [], []
    for error in exc.errors()[:5]:
        field = _location(error["loc"])
        text = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            text = "unknown field (OSMO would silently drop it; remove it or fix its spelling)"
        elif error["type"] == "missing":
            text = "field is required"
        messages.append(f"{field}: {text}" if field else text)
        fields.append(field)
    extra = len(exc.errors()) - len(messages)
    tail = f" (and {extra} more)" if extra > 0 else ""
    field = f"{prefix}.{fields[0]}" if fields and fields[0] else prefix
    return ConfigError(f"{what} refused: " + "; ".join(dict.fromkeys(messages)) + tail, field=field)


def _is_single_pool(data: dict, name: str | None) -> bool:
    if isinstance(data.get("name"), str):
        return True
    return name is not None and "backend" in data and not isinstance(data["backend"], dict)


def pool_documents(data: Any, name: str | None = None) -> dict[str, PoolDoc]:
    """Accept `{"pools": {NAME: POOL}}`, `{NAME: POOL}` or one pool object carrying `name`."""
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            'A pool document must be a JSON object: {"pools": {NAME: POOL}}, {NAME: POOL}, '
            'or one pool object with "name"'
        )
    if set(data) == {"pools"} and isinstance(data["pools"], dict):
        data = data["pools"]
    elif _is_single_pool(data, name):
        pool_name = data.get("name") or name
        data = {pool_name: data}
    if name is not None:
        check_name(name, "Pool")
        if set(data) != {name}:
            raise ConfigError(
                f"The command names pool {name!r} but the document holds {', '.join(map(repr, data))}",
                field="name",
            )
    pools: dict[str, PoolDoc] = {}
    for pool_name, body in data.items():
        check_name(pool_name, "Pool")
        if not isinstance(body, dict):
            raise ConfigError(f"Pool {pool_name!r} refused: its value must be a JSON object", field=pool_name)
        if body.get("name") not in (None, pool_name):
            raise ConfigError(
                f"Pool {pool_name!r} refused: its name field says {body['name']!r}", field=f"{pool_name}.name"
            )
        try:
            doc = PoolDoc.model_validate(body)
        except ValidationError as exc:
            raise _explain(exc, f"Pool {pool_name!r}", pool_name) from None
        _check_pool_fields(pool_name, doc)
        pools[pool_name] = doc.model_copy(update={"name": pool_name})
    return pools


def _check_pool_fields(name: str, pool: PoolDoc) -> None:
    """Rules between fields of one pool (kept out of pydantic so the error can name its field)."""
    if pool.default_platform and pool.default_platform not in pool.platforms:
        known = ", ".join(pool.platforms) or "none"
        raise ConfigError(
            f"Pool {name!r} refused: default_platform {pool.default_platform!r} is not one of the pool's "
            f"platforms ({known})",
            field=f"{name}.default_platform",
        )
    for kind in ("exec", "queue"):
        default, maximum = getattr(pool, f"default_{kind}_timeout"), getattr(pool, f"max_{kind}_timeout")
        if default and maximum and parse_timeout(default) > parse_timeout(maximum):
            raise ConfigError(
                f"Pool {name!r} refused: default_{kind}_timeout {default} is above max_{kind}_timeout {maximum}",
                field=f"{name}.default_{kind}_timeout",
            )


def _named_map(data: Any, name: str | None, what: str, shape: str) -> dict[str, Any]:
    if name is not None:
        check_name(name, what)
        if isinstance(data, dict) and set(data) == {name}:
            return data
        return {name: data}
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"A {what} document must be a JSON object of the shape {shape}")
    return data


def pod_template_documents(data: Any, name: str | None = None) -> dict[str, dict]:
    templates = _named_map(data, name, "pod template", '{NAME: {"spec": {...}}}')
    for template_name, body in templates.items():
        check_name(template_name, "Pod template")
        what = f"Pod template {template_name!r} refused"
        if not isinstance(body, dict):
            raise ConfigError(f"{what}: a template must be a JSON object such as {{\"spec\": {{...}}}}",
                              field=template_name)
        unknown = [key for key in body if key not in POD_TEMPLATE_KEYS]
        if unknown:
            raise ConfigError(
                f"{what}: unknown field {', '.join(map(repr, unknown))}; "
                f"a template holds {', '.join(POD_TEMPLATE_KEYS)}",
                field=f"{template_name}.{unknown[0]}",
            )
        for key in ("metadata", "spec"):
            if key in body and not isinstance(body[key], dict):
                raise ConfigError(f"{what}: {key} must be a JSON object", field=f"{template_name}.{key}")
        try:
            check_syntax(body)
        except EngineError as exc:
            raise ConfigError(f"{what}: {exc}", field=f"{template_name}.{exc.path}") from None
    return templates


def validation_documents(data: Any, name: str | None = None) -> dict[str, list[dict]]:
    validations = _named_map(data, name, "resource validation", "{NAME: [RULE, ...]}")
    result = {}
    for validation_name, rules in validations.items():
        check_name(validation_name, "Resource validation")
        what = f"Resource validation {validation_name!r} refused"
        if not isinstance(rules, list):
            raise ConfigError(f"{what}: expected a list of rules", field=validation_name)
        try:
            result[validation_name] = [
                validate_rule_shape(rule, path=f"[{index}]").to_dict() for index, rule in enumerate(rules)
            ]
        except EngineError as exc:
            raise ConfigError(f"{what}: {exc}", field=f"{validation_name}{exc.path}") from None
    return result
