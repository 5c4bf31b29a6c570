"""What changed between two versions of a document, in a line: `resources[0].gpu.deserved: 4 → 6; description:
"a" → "b"`. The audit log's summary of a configuration write (pure: no Django)."""

import json
from typing import Any

MISSING = object()
VALUE_LIMIT = 60


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if not path and value in ({}, [], None):
        return {}
    if isinstance(value, dict) and value:
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(_leaves(item, f"{path}.{key}" if path else str(key)))
        return found
    if isinstance(value, list) and value:
        found = {}
        for index, item in enumerate(value):
            found.update(_leaves(item, f"{path}[{index}]"))
        return found
    return {path: value}


def _shown(value: Any) -> str:
    if value is MISSING:
        return "(none)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT - 1] + "…"


def describe(before: Any, after: Any, limit: int = 6) -> str:
    """`path: old → new` for each changed leaf, the first `limit` of them; empty when nothing changed."""
    old, new = _leaves(before), _leaves(after)
    changed = [path for path in dict.fromkeys([*old, *new]) if old.get(path, MISSING) != new.get(path, MISSING)]
    parts = [f"{path or '(document)'}: {_shown(old.get(path, MISSING))} → {_shown(new.get(path, MISSING))}"
             for path in changed[:limit]]
    if len(changed) > limit:
        parts.append(f"and {len(changed) - limit} more")
    return "; ".join(parts)
