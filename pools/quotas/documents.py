"""Department and project documents: parsing, Run:ai's aliases, and the rules of one document (pure: no
Django). Rules that need other objects (pools exist, a department's projects fit in it) are checked by
the write path in `pools.quotas.writes`.

A project: {"name", "department", "description", "namespace", "default_node_pools": [POOL, ...],
"members": {"users": [...], "roles": [...]}, "resources": [{"node_pool": POOL, "gpu": {"deserved",
"limit", "over_quota_weight"}, "cpu": {...}, "memory": {...}}], "limits": {NAME: N}} (submission limits,
pools.quotas.limits). A department has no department,
namespace or members. GPUs are numbers with at most two decimals; CPU is millicores (or a quantity
string such as "8" or "500m"); memory is bytes (or a quantity such as "512Gi"). A limit of -1 is none.
A resource left out has no quota row: a project then deserves 0 of it (limit none, weight Medium) and a
department deserves the sum of its projects'.
"""

from decimal import Decimal
from typing import Any

from pools.engine import ConfigError, QuantityError, check_name, kube_names, parse_quantity
from pools.quotas.limits import check_document as check_limits

RESOURCES = ("gpu", "cpu", "memory")
WEIGHTS: dict[str, int | None] = {"None": None, "Lowest": 0, "Low": 1, "Medium": 2, "High": 3}
WEIGHT_NAMES: dict[int | None, str] = {value: name for name, value in WEIGHTS.items()}
DEFAULT_WEIGHT = "Medium"
NO_LIMIT = -1
_MEMORY_UNITS = {"Mib": 1024 ** 2, "MiB": 1024 ** 2, "MB": 1000 ** 2, "GB": 1000 ** 3}
_RESOURCE_KEYS = {"deserved", "limit", "over_quota_weight", "overQuotaWeight", "units"}
_ENTRY_KEYS = {"node_pool", "nodePool", *RESOURCES, "priority"}
_DEPARTMENT_KEYS = {"name", "description", "default_node_pools", "defaultNodePools", "resources", "id"}
_PROJECT_KEYS = _DEPARTMENT_KEYS | {"department", "parentId", "namespace", "requestedNamespace", "members",
                                    "clusterId", "limits"}
# The columns' ranges (pools.models.quotas), checked here so that the answer says so in our words.
MAX_GPUS = Decimal("9999999999.99")
MAX_WHOLE = 2 ** 63 - 1


def default_namespace(project: str) -> str:
    return kube_names.namespace(project)


def weight_value(name: Any, field: str) -> int | None:
    if isinstance(name, str):
        for key, value in WEIGHTS.items():
            if key.lower() == name.lower():
                return value
    if name is None:
        return None
    raise ConfigError(f"{field}: {name!r} is not an over-quota weight; use one of {', '.join(WEIGHTS)}", field=field)


def weight_name(value: int | None) -> str:
    return WEIGHT_NAMES[value]


def gpu_amount(value: Any, field: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{field}: expected a number of GPUs, got {value!r}", field=field)
    try:
        number = parse_quantity(value)
    except QuantityError as exc:
        raise ConfigError(f"{field}: {exc}", field=field) from None
    if abs(number) > MAX_GPUS:
        raise ConfigError(f"{field}: {value} is out of range (at most {MAX_GPUS} GPUs)", field=field)
    if number != number.quantize(Decimal("0.01")):
        raise ConfigError(f"{field}: {value} has more than two decimals (GPUs are counted to hundredths)",
                          field=field)
    return number.quantize(Decimal("0.01"))


def whole_amount(value: Any, field: str, unit: str, scale: int = 1) -> int:
    """CPU (millicores: an integer, or a quantity of cores such as "8" or "500m") or memory (bytes)."""
    if isinstance(value, bool):
        raise ConfigError(f"{field}: expected {unit}, got {value!r}", field=field)
    try:
        number = Decimal(value) * scale if isinstance(value, int) else parse_quantity(value) * (
            1000 if unit == "millicores" else 1)
    except (QuantityError, ArithmeticError) as exc:
        raise ConfigError(f"{field}: {value!r} is not a quantity of {unit} ({exc})", field=field) from None
    if abs(number) > MAX_WHOLE:
        raise ConfigError(f"{field}: {value!r} is out of range (at most {MAX_WHOLE} {unit})", field=field)
    if number != number.to_integral_value():
        raise ConfigError(f"{field}: {value!r} is not a whole number of {unit}", field=field)
    return int(number)


def _number_out(value: Decimal | int) -> int | float:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _resource(resource: str, body: Any, field: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ConfigError(f"{field}: expected an object such as {{\"deserved\": 8, \"limit\": -1}}", field=field)
    unknown = sorted(str(key) for key in set(body) - _RESOURCE_KEYS)
    if unknown:
        raise ConfigError(f"{field}: unknown field {', '.join(map(repr, unknown))}; use deserved, limit and "
                          "over_quota_weight", field=f"{field}.{unknown[0]}")
    scale = 1
    if resource == "memory" and "units" in body:
        if body["units"] not in _MEMORY_UNITS:
            raise ConfigError(f"{field}.units: use one of {', '.join(_MEMORY_UNITS)}", field=f"{field}.units")
        scale = _MEMORY_UNITS[body["units"]]
    elif "units" in body:
        raise ConfigError(f"{field}.units: only memory takes units", field=f"{field}.units")
    amounts = {}
    for key, default in (("deserved", 0), ("limit", NO_LIMIT)):
        raw = body.get(key, default)
        where = f"{field}.{key}"
        if resource == "gpu":
            amount = gpu_amount(raw, where)
        else:
            amount = whole_amount(raw, where, "millicores" if resource == "cpu" else "bytes",
                                  scale if raw != NO_LIMIT else 1)
        if amount < 0 and not (key == "limit" and amount == NO_LIMIT):
            raise ConfigError(f"{where}: {raw} is negative" + (" (-1 means no limit)" if key == "limit" else ""),
                              field=where)
        amounts[key] = amount
    if amounts["limit"] != NO_LIMIT and amounts["deserved"] > amounts["limit"]:
        raise ConfigError(f"{field}: deserved {_number_out(amounts['deserved'])} is above its limit "
                          f"{_number_out(amounts['limit'])}", field=f"{field}.deserved")
    weight = body.get("over_quota_weight", body.get("overQuotaWeight", DEFAULT_WEIGHT))
    weight_value(weight, f"{field}.over_quota_weight")
    return {"deserved": amounts["deserved"], "limit": amounts["limit"],
            "over_quota_weight": weight_name(weight_value(weight, f"{field}.over_quota_weight"))}


def _pool_name(entry: dict, field: str) -> str:
    pool = entry.get("node_pool", entry.get("nodePool"))
    if isinstance(pool, dict):  # Run:ai: {"id": ..., "name": ...}
        pool = pool.get("name")
    if not isinstance(pool, str):
        raise ConfigError(f"{field}.node_pool: name the pool this quota is for", field=f"{field}.node_pool")
    return check_name(pool, "Pool")


def _resources(entries: Any, what: str, name: str) -> list[dict[str, Any]]:
    if not isinstance(entries, list):
        raise ConfigError(f"{what}: resources must be a list of per-pool quotas", field=f"{name}.resources")
    out, seen = [], set()
    for index, entry in enumerate(entries):
        field = f"{name}.resources[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{what}: {field} must be an object", field=field)
        unknown = sorted(str(key) for key in set(entry) - _ENTRY_KEYS)
        if unknown:
            raise ConfigError(f"{what}: {field}: unknown field {', '.join(map(repr, unknown))}",
                              field=f"{field}.{unknown[0]}")
        pool = _pool_name(entry, field)
        if pool in seen:
            raise ConfigError(f"{what}: pool {pool} appears twice in resources", field=f"{field}.node_pool")
        seen.add(pool)
        try:
            quota = {"node_pool": pool, **{r: _resource(r, entry[r], f"{field}.{r}") for r in RESOURCES if r in entry}}
        except ConfigError as exc:
            raise ConfigError(f"{what} refused: {exc.message}", field=exc.field) from None
        out.append(quota)
    return sorted(out, key=lambda quota: quota["node_pool"])


def _names(value: Any, field: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{what}: {field} must be a list of names", field=field)
    if len(set(value)) != len(value):
        raise ConfigError(f"{what}: {field} names a pool twice", field=field)
    return list(value)


MEMBER_MAX_LENGTH = 150  # a user name (Django's) or a role name: ProjectMember.name


def _members(value: Any, name: str, what: str) -> dict[str, list[str]]:
    if value is None:
        return {"users": [], "roles": []}
    if not isinstance(value, dict) or set(value) - {"users", "roles"}:
        raise ConfigError(f'{what}: members is {{"users": [...], "roles": [...]}}', field=f"{name}.members")
    members = {}
    for key in ("users", "roles"):
        items = value.get(key, [])
        if not isinstance(items, list) or not all(isinstance(item, str) and item.strip() for item in items):
            raise ConfigError(f"{what}: members.{key} must be a list of names", field=f"{name}.members.{key}")
        long = next((item for item in items if len(item) > MEMBER_MAX_LENGTH), None)
        if long is not None:
            raise ConfigError(f"{what}: members.{key}: {long[:40]!r}... is {len(long)} characters long; at most "
                              f"{MEMBER_MAX_LENGTH}", field=f"{name}.members.{key}")
        members[key] = sorted(set(items))
    return members


def _unit(kind: str, name: str, body: Any) -> dict[str, Any]:
    what = f"{kind.capitalize()} {name!r}"
    check_name(name, kind.capitalize())
    if not isinstance(body, dict):
        raise ConfigError(f"{what} refused: its value must be a JSON object", field=name)
    allowed = _PROJECT_KEYS if kind == "project" else _DEPARTMENT_KEYS
    unknown = sorted(str(key) for key in set(body) - allowed)  # a YAML key may be null or a number
    if unknown:
        raise ConfigError(f"{what} refused: unknown field {', '.join(map(repr, unknown))}",
                          field=f"{name}.{unknown[0]}")
    if body.get("name") not in (None, name):
        raise ConfigError(f"{what} refused: its name field says {body['name']!r}", field=f"{name}.name")
    description = body.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{what} refused: description must be text", field=f"{name}.description")
    pools = body.get("default_node_pools", body.get("defaultNodePools", []))
    document: dict[str, Any] = {"name": name}
    if kind == "project":
        department = body.get("department", body.get("parentId", "default"))
        if not isinstance(department, str):
            raise ConfigError(f"{what} refused: department must be a department's name",
                              field=f"{name}.department")
        document["department"] = check_name(department, "Department")
    document["description"] = description
    if kind == "project":
        namespace = body.get("namespace", body.get("requestedNamespace")) or default_namespace(name)
        if not isinstance(namespace, str) or not _is_dns_label(namespace):
            raise ConfigError(f"{what} refused: namespace {namespace!r} is not a Kubernetes namespace name "
                              "(lower-case letters, digits and '-', at most 63)", field=f"{name}.namespace")
        document["namespace"] = namespace
    document["default_node_pools"] = _names(pools, f"{name}.default_node_pools", what)
    if kind == "project":
        document["members"] = _members(body.get("members"), name, what)
        try:
            limits = check_limits(body.get("limits"))
        except ConfigError as exc:
            raise ConfigError(f"{what} refused: {exc.message}", field=f"{name}.{exc.field}") from None
        if limits:  # only when set, as the export shows it
            document["limits"] = limits
    document["resources"] = _resources(body.get("resources", []), what, name)
    return document


def _is_dns_label(text: str) -> bool:
    return 0 < len(text) <= 63 and text.isascii() and text[0].isalnum() and text[-1].isalnum() and all(
        c.islower() or c.isdigit() or c == "-" for c in text)


def _name_of(item: Any) -> str | None:
    """The item's "name" if it is text; any other value (an object, a list) is no name."""
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) else None


def _named(data: Any, name: str | None, plural: str) -> dict[str, Any]:
    if isinstance(data, list):
        data = {_name_of(item): item for item in data}
    if not isinstance(data, dict) or not data:
        raise ConfigError(f'A {plural[:-1]} document is one object with "name", {{"{plural}": {{NAME: ...}}}}, '
                          "{NAME: ...} or a list of objects")
    if set(data) == {plural} and isinstance(data[plural], dict | list):
        return _named(data[plural], name, plural)
    if isinstance(data.get("name"), str) or (name is not None and set(data) != {name}):
        data = {_name_of(data) or name: data}
    if name is not None and set(data) != {name}:
        raise ConfigError(f"The command names {name!r} but the document holds {', '.join(map(repr, data))}",
                          field="name")
    if None in data:
        raise ConfigError(f"Every {plural[:-1]} needs a name", field="name")
    return data


def department_documents(data: Any, name: str | None = None) -> dict[str, dict[str, Any]]:
    return {key: _unit("department", key, body) for key, body in _named(data, name, "departments").items()}


def project_documents(data: Any, name: str | None = None) -> dict[str, dict[str, Any]]:
    return {key: _unit("project", key, body) for key, body in _named(data, name, "projects").items()}


def as_json(document: dict[str, Any]) -> dict[str, Any]:
    """The document with GPU figures as JSON numbers (what export prints and revisions store)."""
    out = dict(document)
    out["resources"] = [
        {"node_pool": quota["node_pool"],
         **{r: {**quota[r], "deserved": _number_out(quota[r]["deserved"]), "limit": _number_out(quota[r]["limit"])}
            for r in RESOURCES if r in quota}}
        for quota in document["resources"]
    ]
    return out
