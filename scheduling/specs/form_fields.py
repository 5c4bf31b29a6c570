"""The submit form's fields as a request body, and a stored request as the form's fields (pure: no Django).

The form is one more door onto `scheduling.submit.submission`: these functions only change the shape (words typed in a
box into a list, `NAME=value` lines into a mapping); every rule (names, quantities, limits, pools) stays in the
pipeline, which names the request's field (`resources.gpu`, `env.NAME`). `FIELD_OF` maps that name back to the
form's field, so that the refusal is shown beside the box it is about."""

import shlex
from typing import Any

from pools.engine import ConfigError

# The request's fields the form has a box for; a request with any other field set is run again as a body.
COVERED = {"name", "kind", "port", "project", "pools", "platform", "image", "command", "args", "env", "replicas",
           "resources", "priority", "exec_timeout", "queue_timeout"}
# Fields whose defaults say nothing (a stored request has them all): not a reason to leave the boxes.
EMPTY = {"workflow": "", "group": "", "env_from_secret": {}, "exit_actions": {}, "topology": [], "variables": {},
         "privileged": False, "host_network": False, "mounts": [], "gpu_type": "", "inputs": [], "outputs": [],
         "credentials": [], "tasks": [], "files": [], "gang": [], "member": 0}
RESOURCES = ("gpu", "cpu", "memory", "storage")
UNITS = (("Ti", 1024 ** 4), ("Gi", 1024 ** 3), ("Mi", 1024 ** 2), ("Ki", 1024))


def words(text: str, field: str) -> list[str]:
    """`python train.py --lr "1e-3"` as a list, split as a shell would (quotes keep spaces)."""
    try:
        return shlex.split(text or "")
    except ValueError as exc:
        raise ConfigError(f"{field}: {exc} (quote a word with spaces, close every quote)", field=field) from None


def env_lines(text: str) -> dict[str, str]:
    """`NAME=value` lines as a mapping; blank lines and `#` comments are skipped."""
    env: dict[str, str] = {}
    for number, line in enumerate((text or "").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, equals, value = line.partition("=")
        name = name.strip()
        if not equals or not name:
            raise ConfigError(f"env: line {number}: expected NAME=value", field="env")
        if name in env:
            raise ConfigError(f"env: line {number}: {name} is set twice", field=f"env.{name}")
        env[name] = value
    return env


def body(fields: dict[str, Any]) -> dict[str, Any]:
    """A `POST /api/workloads/` body from the form's cleaned fields (blank boxes are left out: the pipeline's
    defaults apply, as for an API body without them)."""
    data: dict[str, Any] = {"name": fields.get("name") or "", "image": fields.get("image") or ""}
    if fields.get("kind") and fields["kind"] != "training":
        data["kind"] = fields["kind"]
    if fields.get("port") is not None:
        data["port"] = fields["port"]
    if fields.get("project"):
        data["project"] = fields["project"]
    pools = [pool for pool in fields.get("pools") or [] if pool]
    if pools:
        data["pools"] = pools
    for key in ("platform", "exec_timeout", "queue_timeout"):
        if fields.get(key):
            data[key] = fields[key].strip()
    for key in ("command", "args"):
        if (fields.get(key) or "").strip():
            data[key] = words(fields[key], key)
    if (fields.get("env") or "").strip():
        data["env"] = env_lines(fields["env"])
    if fields.get("replicas") is not None:
        data["replicas"] = fields["replicas"]
    resources = {key: fields[key].strip() for key in RESOURCES if (fields.get(key) or "").strip()}
    if resources:
        data["resources"] = resources
    if fields.get("priority"):
        data["priority"] = fields["priority"]
    return data


def quantity(value: int) -> str:
    """Bytes as the largest binary unit that divides them (`17179869184` -> `16Gi`)."""
    for unit, size in UNITS:
        if value and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def covered(request: dict[str, Any]) -> bool:
    """Whether the form's boxes hold the whole request (else Run again shows it as a request body)."""
    return all(key in COVERED or request.get(key) in (None, EMPTY.get(key)) for key in request)


def fields_of(request: dict[str, Any]) -> dict[str, Any]:
    """A stored request (as `bodies` shows it: CPU in cores, memory and storage in bytes) as the form's initial
    values."""
    resources = request.get("resources") or {}
    initial: dict[str, Any] = {
        "name": request.get("name") or "", "kind": request.get("kind") or "training", "port": request.get("port"),
        "project": request.get("project") or "",
        "platform": request.get("platform") or "", "image": request.get("image") or "",
        "command": shlex.join(request.get("command") or []), "args": shlex.join(request.get("args") or []),
        "env": "\n".join(f"{name}={value}" for name, value in (request.get("env") or {}).items()),
        "replicas": request.get("replicas") or 1, "priority": request.get("priority") or "normal",
        "exec_timeout": request.get("exec_timeout") or "", "queue_timeout": request.get("queue_timeout") or "",
        "pools": list(request.get("pools") or []),
    }
    if resources.get("gpu") is not None:
        initial["gpu"] = str(resources["gpu"])
    if resources.get("cpu") is not None:
        initial["cpu"] = str(resources["cpu"])
    for key in ("memory", "storage"):
        if resources.get(key):  # 0 storage is the default: left blank, so the platform's default applies
            initial[key] = quantity(int(resources[key]))
    return initial


def rerun_document(request: dict[str, Any]) -> dict[str, Any]:
    """A stored request as a body to submit again: a new workload, not a member of the old one's workflow."""
    document = {key: value for key, value in request.items() if key not in ("workflow", "group")
                and value not in (None, EMPTY.get(key, object()))}
    resources = document.get("resources")
    if isinstance(resources, dict) and not resources.get("storage"):
        # Stored requests hold every amount; 0 storage is the default, and naming it would override the platform's.
        document["resources"] = {k: v for k, v in resources.items() if k != "storage"}
    return document


# The form's box for each field the pipeline names (the part before the first dot, or the whole name).
FIELD_OF = {"name": "name", "kind": "kind", "port": "port",
            "project": "project", "pools": "pools", "platform": "platform", "image": "image",
            "command": "command", "args": "args", "env": "env", "replicas": "replicas", "priority": "priority",
            "exec_timeout": "exec_timeout", "queue_timeout": "queue_timeout", "resources.gpu": "gpu",
            "resources.cpu": "cpu", "resources.memory": "memory", "resources.storage": "storage",
            "variables.USER_GPU": "gpu", "variables.USER_CPU": "cpu", "variables.USER_MEMORY": "memory",
            "variables.USER_STORAGE": "storage"}


def form_field(field: str | None) -> str | None:
    """The form's box for a refusal's `field` (None: about the whole form)."""
    if not field:
        return None
    return FIELD_OF.get(field) or FIELD_OF.get(field.split(".", 1)[0])
