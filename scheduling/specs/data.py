"""A task's data and credentials, as OSMO's workflow files write them (pure: no Django): `inputs` (another task's
output, an object-store URL or a dataset, downloaded into `{{input:N}}` before the task starts), `outputs` (where
`{{output}}` is uploaded when the task ends) and `credentials` (the user's stored credentials, given to the task as
files or environment variables). Refusals are `ConfigError`s naming the place in the file
(`workflow.tasks[1].inputs[0].task`); `dependencies` checks a workflow's inputs together: an unknown task, a task of
the same group or a cycle is refused at submission.

Only `s3://` URLs are copied (any S3-compatible store: the pool's storage names its endpoint); OSMO's other schemes
(`gs://`, `swift://`, `tos://`, `azure://`) are refused by name rather than accepted and never copied.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pools.engine import ConfigError
from pools.engine.pod_rules import C_IDENTIFIER

MAX_INPUTS = 64
MAX_OUTPUTS = 16
MAX_REPLICA_INDEXES = 1000  # a gang's replicas at most (scheduling.specs.requests.MAX_REPLICAS)
MAX_CREDENTIALS = 16  # a task's; their payloads together fit in one Secret (MAX_PAYLOAD_BYTES)
MAX_URL = 1024
MAX_REGEX = 256
MAX_PATH = 1024
SCHEMES = ("s3",)
OTHER_SCHEMES = ("gs", "swift", "tos", "azure", "http", "https", "file")
# OSMO's credential names: a letter, then letters, digits, '-' and '_'.
CREDENTIAL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")
# A key of a Secret's data (kube-apiserver's IsConfigMapKey): what a credential's payload keys become.
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_DATASET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_TASK = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,126}[A-Za-z0-9]?$")


@dataclass(frozen=True)
class TaskInput:
    """One of `inputs`: exactly one of `task` (its output; `group` is that task's group, filled in by the
    workflow), `url` or `dataset`."""

    task: str = ""
    group: str = ""
    url: str = ""
    dataset: str = ""
    regex: str = ""


@dataclass(frozen=True)
class TaskOutput:
    """One of `outputs`: `url` or `dataset`, where `{{output}}` is uploaded when the task completes."""

    url: str = ""
    dataset: str = ""
    regex: str = ""
    # The replicas (completion indexes) that upload it: in an OSMO group, the tasks that name it (a lead's model,
    # not its workers'); () every replica.
    replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class CredentialUse:
    """One of `credentials`: the credential `name` mounted as files under `path`, or given as `env`
    ({ENV_NAME: the credential's key})."""

    name: str
    path: str = ""
    env: dict[str, str] = field(default_factory=dict)


def _text(value: Any, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string", field=where)
    if len(value) > limit:
        raise ConfigError(f"{where}: {len(value)} characters, over the limit of {limit}", field=where)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{where}: control characters are not allowed", field=where)
    return value


def check_url(value: Any, where: str) -> str:
    """An object-store URL `s3://bucket[/prefix]`, as OSMO writes them."""
    url = _text(value, where, MAX_URL)
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError(f"{where}: {url[:100]!r} is not a storage URL such as s3://bucket/path", field=where)
    if scheme not in SCHEMES:
        known = scheme in OTHER_SCHEMES
        raise ConfigError(f"{where}: {scheme}:// " + ("storage is not copied here" if known else "is not a storage "
                          "scheme") + "; use an s3:// URL (any S3-compatible store)", field=where)
    bucket, _, key = rest.partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise ConfigError(f"{where}: {bucket[:100]!r} is not a bucket name (3 to 63 lowercase letters, digits, '.' "
                          "and '-')", field=where)
    if ".." in key.split("/"):
        raise ConfigError(f"{where}: '..' is not allowed in the path", field=where)
    return url


def split_url(url: str) -> tuple[str, str]:
    """`s3://bucket/a/b` -> ("bucket", "a/b")."""
    bucket, _, key = url.partition("://")[2].partition("/")
    return bucket, key.strip("/")


def _regex(value: Any, where: str) -> str:
    if value is None:
        return ""
    text = _text(value, where, MAX_REGEX)
    try:
        re.compile(text)
    except re.error as exc:
        raise ConfigError(f"{where}: not a regular expression: {exc}", field=where) from None
    return text


def _dataset(value: Any, where: str) -> tuple[str, str]:
    """`dataset: {name: N, regex: R}` (or `dataset: N`): the dataset's name and filter."""
    regex = ""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"name", "regex"})
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown field; use name and regex", field=f"{where}.{unknown[0]}")
        regex = _regex(value.get("regex"), f"{where}.regex")
        value, where = value.get("name"), f"{where}.name"
    name = _text(value, where, 128)
    if ":" in name:
        raise ConfigError(f"{where}: dataset versions and tags ({name!r}) are not kept here: a dataset is one "
                          "folder of the pool's storage; name it without ':'", field=where)
    if not _DATASET.fullmatch(name):
        raise ConfigError(f"{where}: {name[:100]!r} is not a dataset name: letters, digits, '_', '.' and '-'",
                          field=where)
    return name, regex


def _entries(value: Any, where: str, limit: int) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list", field=where)
    if len(value) > limit:
        raise ConfigError(f"{where}: {len(value)} entries, over the limit of {limit}", field=where)
    return value


def _one_of(item: Any, where: str, keys: tuple[str, ...]) -> str:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping with one of {', '.join(keys)}", field=where)
    unknown = sorted(str(key) for key in set(item) - {*keys, "regex"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown field; use one of {', '.join(keys)} (and regex)",
                          field=f"{where}.{unknown[0]}")
    given = [key for key in keys if key in item]
    if len(given) != 1:
        raise ConfigError(f"{where}: give exactly one of {', '.join(keys)}", field=where)
    return given[0]


def _given(item: Any) -> Any:
    """A mapping without its empty fields (a stored request holds every field, the unused ones empty)."""
    return {k: v for k, v in item.items() if v != ""} if isinstance(item, dict) else item


def parse_inputs(value: Any, where: str = "inputs") -> list[TaskInput]:
    result = []
    for i, item in enumerate(_entries(value, where, MAX_INPUTS)):
        if isinstance(item, TaskInput):
            result.append(item)
            continue
        place = f"{where}[{i}]"
        item = _given(item)
        # `group`: a stored request's, the task's group as the workflow resolved it.
        kind = _one_of({k: v for k, v in item.items() if k != "group" or "task" not in item}
                       if isinstance(item, dict) else item, place, ("task", "url", "dataset"))
        regex = _regex(item.get("regex"), f"{place}.regex")
        if kind == "task":
            task = _text(item.get("task"), f"{place}.task", 128)
            if not _TASK.fullmatch(task):
                raise ConfigError(f"{place}.task: {task[:100]!r} is not a task name", field=f"{place}.task")
            group = item.get("group") or ""
            if not isinstance(group, str):
                raise ConfigError(f"{place}.group: expected a group name", field=f"{place}.group")
            result.append(TaskInput(task=task, group=group, regex=regex))
        elif kind == "url":
            result.append(TaskInput(url=check_url(item["url"], f"{place}.url"), regex=regex))
        else:
            name, own = _dataset(item["dataset"], f"{place}.dataset")
            result.append(TaskInput(dataset=name, regex=own or regex))
    return result


def parse_outputs(value: Any, where: str = "outputs") -> list[TaskOutput]:
    result = []
    for i, item in enumerate(_entries(value, where, MAX_OUTPUTS)):
        if isinstance(item, TaskOutput):
            result.append(item)
            continue
        place = f"{where}[{i}]"
        item = _given(item)
        replicas = _replicas(item.pop("replicas", None) if isinstance(item, dict) else None, f"{place}.replicas")
        kind = _one_of(item, place, ("url", "dataset"))
        regex = _regex(item.get("regex"), f"{place}.regex")
        if kind == "url":
            result.append(TaskOutput(url=check_url(item["url"], f"{place}.url"), regex=regex, replicas=replicas))
        else:
            name, own = _dataset(item["dataset"], f"{place}.dataset")
            result.append(TaskOutput(dataset=name, regex=own or regex, replicas=replicas))
    return result


def _replicas(value: Any, where: str) -> tuple[int, ...]:
    if value is None or value == []:
        return ()
    if not isinstance(value, list | tuple) or len(value) > MAX_REPLICA_INDEXES or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n < MAX_REPLICA_INDEXES for n in value):
        raise ConfigError(f"{where}: expected a list of replica indexes (0 to {MAX_REPLICA_INDEXES - 1})",
                          field=where)
    return tuple(sorted(set(value)))


def by_replica(outputs_of_tasks: list[list[TaskOutput]]) -> list[TaskOutput]:
    """A group's outputs from each of its tasks' (in replica order): one entry per output, naming the replicas
    that upload it, or none when every task does."""
    seen: dict[TaskOutput, list[int]] = {}
    for index, outputs in enumerate(outputs_of_tasks):
        for item in outputs:
            seen.setdefault(item, []).append(index)
    every = len(outputs_of_tasks)
    return [replace(item, replicas=() if len(indexes) == every else tuple(indexes))
            for item, indexes in seen.items()]


def check_credential_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not CREDENTIAL_NAME.fullmatch(name):
        raise ConfigError(f"{where}: {str(name)[:100]!r} is not a credential name: a letter, then up to 62 letters, "
                          "digits, '-' and '_'", field=where)
    return name


def _mount_path(value: str, where: str) -> str:
    path = _text(value, where, MAX_PATH)
    parts = path.split("/")
    if not path.startswith("/") or ".." in parts or ":" in path:
        raise ConfigError(f"{where}: {path[:100]!r} is not an absolute path without '..' and ':'", field=where)
    if path.rstrip("/") in ("", "/osmo") or path.startswith("/osmo/"):
        raise ConfigError(f"{where}: {path[:100]!r} is the product's own (/osmo holds the task's data); choose "
                          "another directory", field=where)
    return path.rstrip("/")


def parse_credentials(value: Any, where: str = "credentials") -> list[CredentialUse]:
    """`{name: /mount/path}` or `{name: {ENV_NAME: key}}`; a list of `CredentialUse`s passes as it is (and a stored
    request's list of their dicts is read back)."""
    if value is None:
        return []
    if isinstance(value, list):
        items = [item if isinstance(item, CredentialUse) else
                 CredentialUse(**{k: v for k, v in item.items() if k in ("name", "path", "env")})
                 if isinstance(item, dict) and "name" in item else None for item in value]
        if None in items:
            raise ConfigError(f"{where}: expected a mapping of credential names to a path or to {{ENV: key}}",
                              field=where)
        value = {item.name: item.path or item.env for item in items}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping of credential names to a path or to {{ENV: key}}", field=where)
    if len(value) > MAX_CREDENTIALS:
        raise ConfigError(f"{where}: {len(value)} credentials, over the limit of {MAX_CREDENTIALS}", field=where)
    result, paths, names = [], set(), set()
    for name, use in value.items():
        place = f"{where}.{str(name)[:64]}"
        check_credential_name(name, place)
        if isinstance(use, str):
            path = _mount_path(use, place)
            if path in paths:
                raise ConfigError(f"{place}: two credentials are mounted at {path}", field=place)
            paths.add(path)
            result.append(CredentialUse(name, path=path))
            continue
        if not isinstance(use, dict) or not use:
            raise ConfigError(f"{place}: expected a mount path or a mapping {{ENV_NAME: key}}", field=place)
        env = {}
        for env_name, key in use.items():
            spot = f"{place}.{str(env_name)[:64]}"
            if not isinstance(env_name, str) or not C_IDENTIFIER.fullmatch(env_name):
                raise ConfigError(f"{spot}: not an environment variable name", field=spot)
            if env_name in names:
                raise ConfigError(f"{spot}: {env_name} is set by two credentials", field=spot)
            if not isinstance(key, str) or not SECRET_KEY.fullmatch(key):
                raise ConfigError(f"{spot}: {str(key)[:100]!r} is not a key of a credential (letters, digits, "
                                  "'-', '_' and '.')", field=spot)
            names.add(env_name)
            env[env_name] = key
        result.append(CredentialUse(name, env=env))
    return result


# ---- a workflow's dependencies ----------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskDeps:
    """A task of a workflow with its inputs, for `dependencies`: `where` is its place in the file."""

    where: str
    task: str
    group: str
    inputs: list[TaskInput]


def dependencies(tasks: Iterable[TaskDeps]) -> dict[str, list[str]]:
    """Each group's upstream groups (those of the tasks its tasks take inputs from), in the order first named.
    Refused, naming the field: an input from a task the workflow does not have, from a task of its own group (a
    group runs as one gang: it cannot wait for itself), and a cycle."""
    tasks = list(tasks)
    group_of = {t.task: t.group for t in tasks}
    upstream: dict[str, list[str]] = {t.group: [] for t in tasks}
    first_place: dict[tuple[str, str], str] = {}
    for t in tasks:
        for i, item in enumerate(t.inputs):
            if not item.task:
                continue
            place = f"{t.where}.inputs[{i}].task"
            if item.task not in group_of:
                raise ConfigError(f"{place}: {item.task!r} is not a task of this workflow; its tasks: "
                                  f"{', '.join(sorted(group_of))}", field=place)
            group = group_of[item.task]
            if group == t.group:
                raise ConfigError(f"{place}: {item.task} is in the same group as {t.task} ({group}); a group's tasks "
                                  "run together, so one cannot wait for another's output (put it in its own group)",
                                  field=place)
            if group not in upstream[t.group]:
                upstream[t.group].append(group)
                first_place[(t.group, group)] = place
    cycle = _cycle(upstream)
    if cycle:
        place = first_place[(cycle[0], cycle[1])]
        shown = cycle if len(cycle) <= 12 else [*cycle[:10], f"... {len(cycle) - 11} more", cycle[-1]]
        raise ConfigError(f"{place}: the inputs form a cycle of groups ({' -> '.join(shown)}): each waits for the "
                          "next to complete, so none would ever start", field=place)
    return upstream


def _cycle(graph: dict[str, list[str]]) -> list[str]:
    """A cycle of `graph` (group -> the groups it waits for) as [a, b, ..., a], or []: an iterative depth-first walk
    (a chain of a thousand groups nests no calls)."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for start in graph:
        if start in state:
            continue
        path, stack = [start], [iter(graph.get(start, []))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph.get(nxt, [])))
    return []


def with_groups(inputs: list[TaskInput], group_of: dict[str, str]) -> list[TaskInput]:
    """The inputs with each task input's group filled in."""
    return [TaskInput(task=i.task, group=group_of.get(i.task, i.group), regex=i.regex) if i.task else i
            for i in inputs]


# ---- stored credentials (`osmo credential set`) --------------------------------------------------------------

MAX_PAYLOAD_KEYS = 64
MAX_PAYLOAD_BYTES = 60 * 1024  # MAX_CREDENTIALS of them fit in one Secret's 1 MiB
_TYPES = {"generic_credential": "GENERIC", "data_credential": "DATA", "registry_credential": "REGISTRY"}
_REQUIRED = {"DATA": ("access_key_id", "access_key"), "REGISTRY": ("auth",), "GENERIC": ()}
_OPTIONAL = {"DATA": ("endpoint", "region"), "REGISTRY": ("registry", "username")}


@dataclass(frozen=True)
class StoredCredential:
    """What `POST /api/credentials/{name}` asks to keep: its type, the payload and OSMO's `profile` (a DATA
    credential's endpoint, a REGISTRY credential's registry)."""

    cred_type: str
    payload: dict[str, str]
    profile: str = ""


def credential_body(body: Any) -> StoredCredential:
    """OSMO's CLI body: `{"generic_credential": {"credential": {k: v}}}`, `{"data_credential": {access_key_id,
    access_key, endpoint, region}}` or `{"registry_credential": {auth, registry, username}}`. Refusals name the field,
    never a value."""
    if not isinstance(body, dict) or len(body) != 1 or next(iter(body)) not in _TYPES:
        raise ConfigError("expected one of generic_credential, data_credential or registry_credential",
                          field="generic_credential")
    key = next(iter(body))
    kind, given = _TYPES[key], body[key]
    if kind == "GENERIC":
        if not isinstance(given, dict) or set(given) != {"credential"}:
            raise ConfigError(f"{key}: expected {{\"credential\": {{key: value, ...}}}}", field=f"{key}.credential")
        key, given = f"{key}.credential", given["credential"]
    if not isinstance(given, dict) or not given:
        raise ConfigError(f"{key}: expected a mapping of keys to values", field=key)
    if len(given) > MAX_PAYLOAD_KEYS:
        raise ConfigError(f"{key}: {len(given)} keys, over the limit of {MAX_PAYLOAD_KEYS}", field=key)
    payload, size = {}, 0
    for name, value in given.items():
        where = f"{key}.{str(name)[:64]}"
        if not isinstance(name, str) or not SECRET_KEY.fullmatch(name):
            raise ConfigError(f"{where}: not a key name (letters, digits, '-', '_' and '.')", field=where)
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: expected a non-empty string value", field=where)
        size += len(name) + len(value.encode())
        payload[name] = value
    if size > MAX_PAYLOAD_BYTES:
        raise ConfigError(f"{key}: {size:,} bytes, over the limit of {MAX_PAYLOAD_BYTES:,}", field=key)
    if kind != "GENERIC":
        missing = [k for k in _REQUIRED[kind] if k not in payload]
        if missing:
            raise ConfigError(f"{key}.{missing[0]}: field is required for a {kind} credential",
                              field=f"{key}.{missing[0]}")
        unknown = sorted(set(payload) - {*_REQUIRED[kind], *_OPTIONAL[kind]})
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}: unknown field; use {', '.join(_REQUIRED[kind] + _OPTIONAL[kind])}",
                              field=f"{key}.{unknown[0]}")
    profile = payload.get("endpoint", "") if kind == "DATA" else payload.get("registry", "") if kind == "REGISTRY" \
        else ""
    if kind == "DATA" and profile:
        check_url(profile, f"{key}.endpoint")
    return StoredCredential(kind, payload, profile)
