"""Ordered merging of pod-template documents.

Unlike OSMO, which appends every list and breaks on string lists that
happen to contain "name", only known Kubernetes keyed lists are merged;
every other list is replaced by the later document.
"""

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import EngineError
from .paths import join_path

NAMED_LIST_KEYS = frozenset(
    {"containers", "initContainers", "ephemeralContainers", "volumes", "volumeMounts", "env", "ports"}
)
TOLERATION_KEY = "tolerations"
_SCALARS = (str, int, float, bool, type(None))


def merge(base: Any, override: Any) -> Any:
    return _merge(base, override, None)


def merge_all(documents: Iterable[Mapping]) -> dict:
    result: dict = {}
    for index, document in enumerate(documents):
        if not isinstance(document, Mapping):
            raise EngineError(
                f"pod template must be an object, got {type(document).__name__}",
                join_path("", index),
            )
        result = _merge(result, document, None)
    return result


def _merge(base: Any, override: Any, key: Any) -> Any:
    if isinstance(override, Mapping):
        return _merge_dicts(base if isinstance(base, Mapping) else {}, override)
    if isinstance(base, list) and isinstance(override, list):
        if key in NAMED_LIST_KEYS and _all_named(base) and _all_named(override):
            return _merge_named(base, override)
        if key == TOLERATION_KEY and all(isinstance(t, Mapping) for t in base + override):
            return _merge_tolerations(base + override)
    return copy.deepcopy(override)


def _merge_dicts(base: Mapping, override: Mapping) -> dict:
    result: dict = {}
    for k, v in base.items():
        if k not in override:
            result[k] = copy.deepcopy(v)
        elif override[k] is not None:
            result[k] = _merge(v, override[k], k)
    for k, v in override.items():
        if k not in base and v is not None:
            result[k] = _merge(None, v, k)
    return result


def _all_named(items: list) -> bool:
    return all(isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items)


def _merge_named(base: list, override: list) -> list:
    result = [copy.deepcopy(item) for item in base]
    positions: dict[str, int] = {}
    for index, item in enumerate(result):
        positions.setdefault(item["name"], index)
    for item in override:
        position = positions.get(item["name"])
        if position is None:
            positions[item["name"]] = len(result)
            result.append(_merge(None, item, None))
        else:
            result[position] = _merge(result[position], item, None)
    return result


def _toleration_identity(toleration: Mapping) -> tuple:
    fields = (
        toleration.get("key"),
        toleration.get("operator") or "Equal",
        toleration.get("value"),
        toleration.get("effect"),
    )
    # Identity must be hashable even if a template put odd values here.
    return tuple(f if isinstance(f, _SCALARS) else repr(f) for f in fields)


def _merge_tolerations(items: list) -> list:
    result: list = []
    positions: dict[tuple, int] = {}
    for item in items:
        identity = _toleration_identity(item)
        if identity in positions:
            result[positions[identity]] = copy.deepcopy(item)
        else:
            positions[identity] = len(result)
            result.append(copy.deepcopy(item))
    return result
