"""A rendered pod template checked as a real API server checks the Pod made from it (pure: no Django).

Two layers. The shape: the Pod's published OpenAPI schema for Kubernetes 1.36 (the reference server's version),
strict (unknown fields refused), from `kubernetes-validate`'s bundled schemas: field names and types, required
fields. The schema cannot say what the server's Go validation adds, so these are written here from
k8s.io/kubernetes' ValidatePodSpec: container names are DNS labels, env names have no '=' (and are printable),
resource amounts are quantities in the server's syntax (no spaces) and not negative, extended resources
(`nvidia.com/gpu`) are whole numbers whose request equals their limit, a request is at most its limit.
Answers `(path, message)` pairs, the path dotted as the API server spells it (`spec.containers[0].env[1].name`)."""

import hashlib
import json
import re
import threading
from decimal import Decimal
from functools import cache
from typing import Any

from .kube_names import DNS_LABEL
from .quantity import parse_quantity, strict_syntax

KUBERNETES = "v1.36.0"
_STANDARD = {"cpu", "memory", "ephemeral-storage", "storage"}
_PRINTABLE = re.compile(r"[\x20-\x7e]+")
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@cache
def _validator():
    import importlib.resources

    import jsonschema
    from referencing import Registry, Resource

    base = importlib.resources.files("kubernetes_validate").joinpath(
        f"kubernetes-json-schema/{KUBERNETES}-local-strict")
    pod = json.loads(base.joinpath("pod-v1.json").read_text())
    definitions = json.loads(base.joinpath("_definitions.json").read_text())
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(pod) @ Registry())
    return jsonschema.validators.Draft202012Validator(pod, registry=registry)


def _dotted(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


# The schema check costs a submission more CPU than any of its queries, and its answer depends on the template
# alone: remembered per process by the digest of the template's repr (exact for the dicts, lists, strings,
# numbers, booleans and None a rendered template holds: 1, 1.0, True and "1" have different reprs). Bounded.
CACHED = 512
_known: dict[bytes, list[tuple[str, str]]] = {}
_lock = threading.Lock()


def pod_errors(template: dict[str, Any]) -> list[tuple[str, str]]:
    """What a real API server would refuse in a Pod of this template (its `metadata` and `spec`)."""
    key = hashlib.sha256(repr(template).encode()).digest()
    with _lock:
        known = _known.get(key)
    if known is not None:
        return list(known)
    errors = _pod_errors(template)
    with _lock:
        if len(_known) >= CACHED:
            _known.pop(next(iter(_known)))  # the oldest
        _known[key] = list(errors)
    return errors


def _pod_errors(template: dict[str, Any]) -> list[tuple[str, str]]:
    metadata = template.get("metadata") or {}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**metadata, "name": metadata.get("name") or "pod"} if isinstance(metadata, dict) else metadata,
           "spec": template.get("spec")}
    errors = [(_dotted(error.absolute_path), error.message.split("\n")[0][:300])
              for error in _validator().iter_errors(pod)]
    if errors:
        return sorted(errors)
    return _spec_errors(pod["spec"] or {})


def _spec_errors(spec: dict) -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    for group in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(group) or []):
            where = f"spec.{group}[{index}]"
            name = container.get("name") or ""
            if len(name) > 63 or not DNS_LABEL.fullmatch(name):
                errors.append((f"{where}.name", f"{name!r} is not a DNS label (lower-case letters, digits and '-', "
                                                "at most 63)"))
            for position, item in enumerate(container.get("env") or []):
                env_name = item.get("name") or ""
                if "=" in env_name or not _PRINTABLE.fullmatch(env_name):
                    errors.append((f"{where}.env[{position}].name",
                                   f"{env_name!r}: an environment variable name is printable ASCII without '='"))
            errors += _resource_errors(container.get("resources") or {}, f"{where}.resources")
    return errors


def quantity_error(value: Any) -> str | None:
    """Why `value` is no quantity the API server reads (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return f"{value!r} is not a quantity"
    if isinstance(value, str) and not strict_syntax(value):
        return f"{value!r} is not a quantity such as 8, \"500m\" or \"64Gi\" (no spaces)"
    try:
        amount = parse_quantity(value)
    except ValueError as exc:
        return str(exc)
    if amount < 0:
        return f"{value!r} must be greater than or equal to 0"
    return None


def _resource_errors(resources: dict, where: str) -> list[tuple[str, str]]:
    errors = []
    amounts: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for kind in ("requests", "limits"):
        for name, value in (resources.get(kind) or {}).items():
            problem = quantity_error(value)
            if problem:
                errors.append((f"{where}.{kind}.{name}", problem))
                continue
            amount = parse_quantity(value)
            if name not in _STANDARD and "/" in name and amount != amount.to_integral_value():
                errors.append((f"{where}.{kind}.{name}", f"{value!r}: {name} must be a whole number"))
                continue
            amounts[kind][name] = amount
    requests, limits = amounts["requests"], amounts["limits"]
    for name, amount in requests.items():
        if name in _STANDARD or "/" not in name:
            if name in limits and amount > limits[name]:
                errors.append((f"{where}.requests.{name}", f"must be less than or equal to {name} limit"))
        elif name not in limits:
            errors.append((f"{where}.limits", f"Limit must be set for non overcommitable resources ({name})"))
        elif amount != limits[name]:
            errors.append((f"{where}.requests.{name}", f"must be equal to {name} limit"))
    return errors
