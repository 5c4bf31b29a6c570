"""Bulk writes that touch only what changed."""

from collections import defaultdict
from typing import Any


def assign(obj, values: dict[str, Any]) -> tuple[str, ...]:
    """Set `values` on `obj`; return the names of the fields that actually changed."""
    changed = tuple(key for key, value in values.items() if getattr(obj, key) != value)
    for key in changed:
        setattr(obj, key, values[key])
    return changed


def bulk_update_changed(model, changes: list[tuple[Any, tuple[str, ...]]], always: tuple[str, ...] = ()) -> int:
    """One UPDATE per distinct set of changed fields: Django builds a CASE per field and row, so
    rewriting unchanged columns costs seconds at a few thousand rows. Returns the rows written."""
    groups: dict[tuple[str, ...], list] = defaultdict(list)
    for obj, fields in changes:
        if fields or always:
            groups[fields].append(obj)
    for fields, objects in groups.items():
        model.objects.bulk_update(objects, [*fields, *always], batch_size=1000)
    return sum(len(objects) for objects in groups.values())
