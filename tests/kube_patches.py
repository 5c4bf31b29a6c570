"""The two patch formats the stand-in API server (tests/kube_standin.py) applies, as a kube-apiserver does.

- JSON merge patch (`application/merge-patch+json`, RFC 7386): maps merge, null removes a key, anything else
  (lists included) replaces.
- Strategic merge patch (`application/strategic-merge-patch+json`, built-in kinds only): as a merge patch, but a
  list whose field declares `patchStrategy:"merge"` in the Kubernetes API types merges its items by their
  `patchMergeKey` (a container by `name`), or as a set for a list of strings (`metadata.finalizers`), and the
  directives `$patch: replace`, `$patch: delete`, `$deleteFromPrimitiveList/<field>` and `$retainKeys` apply.
  Lists that declare no strategy (a Pod's `tolerations`, a Node's `spec.taints`) are replaced, as a real server
  replaces them. `$setElementOrder/<field>` is accepted and ignored (items keep their stored order, new ones go
  last).

The merge keys below are those of k8s.io/api's struct tags for the fields of the kinds the stand-in serves.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """A patch the server cannot apply (400 BadRequest)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge recursively, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merged(key: str | None, item: dict | None = None) -> dict[str, Any]:
    """A list field with patchStrategy merge: items merge by `key` (None: a list of strings, merged as a set)."""
    return {"$key": key, "$item": item or {}}


_METADATA = {"finalizers": _merged(None), "ownerReferences": _merged("uid")}
_CONTAINER = {"env": _merged("name"), "ports": _merged("containerPort"), "volumeMounts": _merged("mountPath"),
              "volumeDevices": _merged("devicePath")}
_POD_SPEC = {
    "containers": _merged("name", _CONTAINER),
    "initContainers": _merged("name", _CONTAINER),
    "ephemeralContainers": _merged("name", _CONTAINER),
    "volumes": _merged("name"),
    "imagePullSecrets": _merged("name"),
    "hostAliases": _merged("ip"),
    "schedulingGates": _merged("name"),
    "resourceClaims": _merged("name"),
    "topologySpreadConstraints": _merged("topologyKey"),
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "Node": {"metadata": _METADATA, "status": {"conditions": _merged("type"), "addresses": _merged("type")}},
    "Pod": {"metadata": _METADATA, "spec": _POD_SPEC,
            "status": {"conditions": _merged("type"), "podIPs": _merged("ip")}},
    "Job": {"metadata": _METADATA, "spec": {"template": {"metadata": _METADATA, "spec": _POD_SPEC}},
            "status": {"conditions": _merged("type")}},
    "Namespace": {"metadata": _METADATA},
}


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], kind: str) -> dict[str, Any]:
    """`target` (not modified) with the strategic merge `patch` applied, for an object of `kind`."""
    if kind not in SCHEMAS:
        raise PatchError(f"strategic merge patch is not supported for {kind or 'this kind'}")
    return _merge_map(copy.deepcopy(target), patch, SCHEMAS[kind])


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return _plain({key: value for key, value in patch.items() if key != "$patch"})
    if directive is not None and directive != "merge":
        raise PatchError(f"Unknown patch type: {directive}")
    result = dict(original)
    if "$retainKeys" in patch:
        retained = patch["$retainKeys"] or []
        result = {key: value for key, value in result.items() if key in retained}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise PatchError("invalid patch: $deleteFromPrimitiveList must hold a list")
            if isinstance(result.get(field), list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        node = schema.get(key) or {}
        current = result.get(key)
        if isinstance(value, dict):
            if value.get("$patch") == "delete":
                result.pop(key, None)
            else:
                result[key] = _merge_map(current if isinstance(current, dict) else {}, value, node)
        elif isinstance(value, list) and "$key" in node:
            result[key] = _merge_list(current if isinstance(current, list) else [], value, node)
        else:
            result[key] = _plain(value)
    return result


def _merge_list(original: list[Any], patch: list[Any], node: dict[str, Any]) -> list[Any]:
    key, item_schema = node["$key"], node["$item"]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_plain(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    if key is None:
        result = list(original)
        result.extend(item for item in patch if item not in result)
        return result
    result = list(original)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {key}")
        at = next((index for index, old in enumerate(result) if isinstance(old, dict) and old.get(key) == item[key]),
                  None)
        if item.get("$patch") == "delete":
            if at is not None:
                del result[at]
            continue
        if at is None:
            result.append(_merge_map({}, item, item_schema))
        else:
            result[at] = _merge_map(result[at], item, item_schema)
    return result


def _plain(value: Any) -> Any:
    """A value put in whole: nulls inside maps and directives are dropped, as the server drops them."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if item is not None and not key.startswith("$")}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
