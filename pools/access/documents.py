"""Role documents in OSMO's shapes (pure, no Django).

Seed 002 prints a role as `{"name", "description", "actions": [ACTION...]}`; OSMO's full shape is
`{"name", "description", "policies": [{"actions": [...]}], "immutable", "sync_mode", "external_roles"}`.
Both import; export writes the seed's short shape when the role has one policy and leaves out the
fields that hold their defaults, so a role imported as printed exports back unchanged.
"""

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictStr, ValidationError, field_validator

from pools.config.documents import _Document, _explain
from pools.engine import ConfigError, check_name
from pools.engine.policies import METHODS, POOL_PATH, glob_problem, normalize_path

SYNC_MODES = ("import", "force", "ignore")
ROLE_FIELDS = ("description", "policies", "immutable", "sync_mode", "external_roles")
MAX_NAME = 128
DEFAULTS = {"immutable": False, "sync_mode": "import", "external_roles": None}


class ActionDoc(_Document):
    base: Literal["http"] = "http"
    path: StrictStr
    method: StrictStr

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.strip().removeprefix("!").strip().removeprefix("http:"):
            raise ValueError("path is empty; write a glob such as /api/pool/team* (prefix ! to deny)")
        if problem := glob_problem(normalize_path(value)[1]):
            raise ValueError(f"path {value!r} is not a glob the rules can use: {problem}")
        return value

    @field_validator("method")
    @classmethod
    def _method(cls, value: str) -> str:
        if value.upper() not in (*METHODS, "*"):
            raise ValueError(f"method {value!r} is not one of {', '.join(METHODS)} or *")
        return value


class PolicyDoc(_Document):
    actions: list[ActionDoc] = Field(default_factory=list)


class RoleDoc(_Document):
    name: StrictStr | None = None
    description: StrictStr = ""
    actions: list[ActionDoc] | None = None
    policies: list[PolicyDoc] | None = None
    immutable: StrictBool = False
    sync_mode: Literal["import", "force", "ignore"] = "import"
    # None: the IdP group with the role's own name maps to it (seed 001 matches groups to role names).
    external_roles: list[StrictStr] | None = None

    def stored(self) -> dict[str, Any]:
        policies = [{"actions": self.actions}] if self.actions is not None else [
            {"actions": policy.actions} for policy in self.policies or []]
        return {
            "description": self.description,
            "policies": [{"actions": [a.model_dump() for a in p["actions"]]} for p in policies if p["actions"]],
            "immutable": self.immutable,
            "sync_mode": self.sync_mode,
            "external_roles": self.external_roles,
        }


def check_access_name(name: Any, what: str = "Role") -> str:
    check_name(name, what)
    if len(name) > MAX_NAME:
        raise ConfigError(f"{what} name is {len(name)} characters long; at most {MAX_NAME}", field="name")
    return name


def role_to_document(name: str, stored: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {"name": name, "description": stored["description"]}
    policies = stored["policies"]
    if len(policies) <= 1:
        document["actions"] = policies[0]["actions"] if policies else []
    else:
        document["policies"] = policies
    for key, default in DEFAULTS.items():
        if stored[key] != default:
            document[key] = stored[key]
    return document


def _is_single_role(data: dict, name: str | None) -> bool:
    if isinstance(data.get("name"), str):
        return True
    return name is not None and bool(data) and set(data) <= set(RoleDoc.model_fields)


def _as_map(data: Any, name: str | None) -> dict[str, Any]:
    if isinstance(data, dict) and set(data) == {"roles"}:
        data = data["roles"]
    if isinstance(data, list):
        if not all(isinstance(item, dict) and isinstance(item.get("name"), str) for item in data):
            raise ConfigError("A list of roles must hold role objects that each carry a name", field="roles")
        return {item["name"]: item for item in data}
    if isinstance(data, dict) and _is_single_role(data, name):
        return {data.get("name") or name: data}
    if isinstance(data, dict) and data:
        return data
    raise ConfigError('A role document must be a JSON object: one role with "name" (as seed 002 prints it), '
                      '{"roles": {NAME: ROLE}}, {NAME: ROLE} or a list of roles')


def role_documents(data: Any, name: str | None = None) -> dict[str, dict[str, Any]]:
    """Every role in the document, as the values stored on the Role row (see ROLE_FIELDS)."""
    roles = _as_map(data, name)
    if name is not None:
        check_access_name(name)
        if set(roles) != {name}:
            raise ConfigError(f"The command names role {name!r} but the document holds "
                              f"{', '.join(map(repr, roles))}", field="name")
    result = {}
    for role_name, body in roles.items():
        check_access_name(role_name)
        if not isinstance(body, dict):
            raise ConfigError(f"Role {role_name!r} refused: its value must be a JSON object", field=role_name)
        if body.get("name") not in (None, role_name):
            raise ConfigError(f"Role {role_name!r} refused: its name field says {body['name']!r}",
                              field=f"{role_name}.name")
        if body.get("actions") is not None and body.get("policies") is not None:
            raise ConfigError(f"Role {role_name!r} refused: give either actions (one policy) or policies, not both",
                              field=f"{role_name}.policies")
        try:
            doc = RoleDoc.model_validate(body)
        except ValidationError as exc:
            raise _explain(exc, f"Role {role_name!r}", role_name) from None
        result[role_name] = doc.stored()
    return result


def pool_role_document(role_name: str) -> dict[str, Any]:
    """`config set ROLE osmo-<pool> pool`: submit to the pools the name rule grants, and read one's profile."""
    team = role_name.removeprefix("osmo-")
    return {
        "name": role_name,
        "description": f"Use the pools whose names begin with {team} (generated)",
        "actions": [
            {"base": "http", "path": f"/api/pool/{team}*", "method": "post"},
            {"base": "http", "path": "/api/profile/*", "method": "*"},
        ],
    }


# ---- the admin's pool picker ---------------------------------------------------------------------------

def pool_action(pool: str) -> dict[str, str]:
    """The action that grants exactly one pool: POST on its path, without a glob (no other pool matches)."""
    return {"base": "http", "path": POOL_PATH + pool, "method": "post"}


def split_pool_actions(policies: list[dict], pools: Iterable[str]) -> tuple[list[str], list[dict]]:
    """(the pools among `pools` that `policies` grant through `pool_action`s, the policies without those
    actions). Other actions, globs and denies included, stay as written."""
    exact = {pool_action(pool)["path"]: pool for pool in pools}
    picked, rest = [], []
    for policy in policies:
        kept = []
        for action in policy.get("actions", []):
            pool = exact.get(action.get("path")) if str(action.get("method", "")).lower() == "post" else None
            if pool is not None and action.get("base", "http") == "http":
                picked.append(pool)
            else:
                kept.append(action)
        if kept:
            rest.append({**policy, "actions": kept})
    return list(dict.fromkeys(picked)), rest


def with_pool_actions(policies: list[dict], pools: Iterable[str]) -> list[dict]:
    """`policies` (without pool actions) and one `pool_action` per pool, added to the first policy so that a
    role with one policy keeps seed 002's short shape."""
    actions = [pool_action(pool) for pool in pools]
    if not actions:
        return policies
    if not policies:
        return [{"actions": actions}]
    return [{**policies[0], "actions": [*policies[0]["actions"], *actions]}, *policies[1:]]
