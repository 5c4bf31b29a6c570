"""Bulk writes that touch only what changed, and inserts at COPY speed."""

import gc
import json
from collections import defaultdict
from contextlib import contextmanager
from typing import Any

from django.db import connection, models


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


def copy_or_bulk_create(model, objects: list, batch_size: int = 2000) -> None:
    """Insert new rows; on PostgreSQL through COPY, which is several times faster than INSERT for tens of
    thousands of rows. The rows get no primary keys back; callers that need them re-read."""
    if not objects:
        return
    if connection.vendor != "postgresql" or len(objects) < 500:
        model.objects.bulk_create(objects, batch_size=batch_size)
        return
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    json_fields = {field.attname for field in fields if isinstance(field, models.JSONField)}
    with connection.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for obj in objects:
            copy.write_row([
                json.dumps(getattr(obj, field.attname)) if field.attname in json_fields
                else field.get_db_prep_save(getattr(obj, field.attname), connection)
                for field in fields
            ])


@contextmanager
def gc_paused():
    """A full list decodes hundreds of thousands of acyclic dicts; the cycle collector's passes over them
    cost a third of the sync. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
