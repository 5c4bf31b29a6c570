"""Bulk writes that touch only what changed, and inserts at COPY speed."""

import datetime
import gc
import itertools
import json
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from decimal import Decimal
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


def update_rows(model, rows: list[dict[str, Any]], fields: list[str]) -> int:
    """Set `fields` (attribute names: `pool_id`, not `pool`) of the rows whose primary keys the dicts give
    under the pk's attribute name, each row its own values. On PostgreSQL one `UPDATE ... FROM unnest(<one array
    per column>)`: Django's bulk_update builds a CASE per field and row in Python, seconds at ten thousand
    rows. Returns the rows written."""
    if not rows:
        return 0
    pk = model._meta.pk
    by_name = {field.attname: field for field in model._meta.concrete_fields}
    if connection.vendor != "postgresql":
        objects = [model(**{pk.attname: row[pk.attname], **{name: row[name] for name in fields}}) for row in rows]
        return model.objects.bulk_update(objects, fields, batch_size=1000)
    columns, arrays, casts = [], [], []
    for name in [pk.attname, *fields]:
        field = by_name[name]
        is_json = isinstance(field, models.JSONField)
        values = [row[name] for row in rows]
        arrays.append([json.dumps(value) for value in values] if is_json
                      else [field.get_db_prep_save(value, connection) for value in values])
        casts.append(f"%s::{'text' if is_json else field.db_type(connection)}[]")  # a foreign key: its target's
        columns.append(connection.ops.quote_name(field.column))
    table = connection.ops.quote_name(model._meta.db_table)
    assignments = ", ".join(
        f"{column} = v.{column}::jsonb" if isinstance(by_name[name], models.JSONField) else f"{column} = v.{column}"
        for name, column in zip(fields, columns[1:], strict=True))
    sql = (f"UPDATE {table} AS t SET {assignments} FROM unnest({', '.join(casts)}) AS v({', '.join(columns)}) "
           f"WHERE t.{columns[0]} = v.{columns[0]}")
    with connection.cursor() as cursor:
        cursor.execute(sql, arrays)
        return cursor.rowcount


def update_rows_json(model, rows: list[dict[str, Any]], fields: list[str], same: dict[str, Any] | None = None) -> int:
    """As update_rows, but on PostgreSQL the rows travel as one JSON document read by `jsonb_to_recordset`:
    psycopg quotes each element of a text array with a regular expression, and for JSON values full of quotes (a
    node's labels and conditions) that quoting cost more than the UPDATE itself; one string is escaped once, by
    libpq. `same`: attribute name -> one value for every row (sent once, not per row). Returns the rows
    written."""
    if not rows:
        return 0
    same = same or {}
    if connection.vendor != "postgresql":
        return update_rows(model, [{**row, **same} for row in rows], [*fields, *same])
    pk = model._meta.pk
    by_name = {field.attname: field for field in model._meta.concrete_fields}
    given = [by_name[name] for name in [pk.attname, *fields]]

    def plain(field, value):
        if isinstance(field, models.JSONField) or field.get_internal_type() in _PLAIN_TYPES:
            return value
        if isinstance(value, str) and isinstance(field, models.UUIDField):
            return value  # PostgreSQL reads it as the column's uuid (and refuses one that is not)
        value = field.get_db_prep_save(value, connection)
        if isinstance(value, (datetime.date, datetime.time)):  # datetimes too
            return value.isoformat()
        if isinstance(value, (Decimal, uuid.UUID)):
            return str(value)
        return value

    document = json.dumps([{field.column: plain(field, row[field.attname]) for field in given} for row in rows])
    quote = connection.ops.quote_name
    definitions = ", ".join(
        f"{quote(field.column)} {'jsonb' if isinstance(field, models.JSONField) else field.db_type(connection)}"
        for field in given)
    assignments = [f"{quote(field.column)} = v.{quote(field.column)}" for field in given[1:]]
    constants = []
    for name, value in same.items():
        field = by_name[name]
        if isinstance(field, models.JSONField):
            assignments.append(f"{quote(field.column)} = %s::jsonb")
            constants.append(json.dumps(value))
        else:
            assignments.append(f"{quote(field.column)} = %s")
            constants.append(field.get_db_prep_save(value, connection))
    key = quote(pk.column)
    sql = (f"UPDATE {quote(model._meta.db_table)} AS t SET {', '.join(assignments)} "
           f"FROM jsonb_to_recordset(%s::jsonb) AS v({definitions}) WHERE t.{key} = v.{key}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*constants, document])
        return cursor.rowcount


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


# Types whose Python values psycopg writes as they are (get_db_prep_save is the identity for them).
_PLAIN_TYPES = frozenset({"CharField", "TextField", "IntegerField", "BigIntegerField", "SmallIntegerField",
                          "PositiveIntegerField", "BooleanField", "ForeignKey"})


def copy_values(model, fields: Sequence[str], rows: Iterable[Sequence[Any]], batch_size: int = 2000) -> int:
    """Insert rows given as tuples of `fields` (attribute names; the other columns take their defaults) without a
    model instance per row, which costs more memory and time than the row itself: on PostgreSQL one COPY fed
    from `rows` as they come, elsewhere (SQLite) one INSERT run over each batch of rows (`executemany`). Either
    way each value is prepared as Django would save it. Returns the rows inserted."""
    by_name = {field.attname: field for field in model._meta.concrete_fields if not field.primary_key}
    given = [by_name[name] for name in fields]
    rest = [field for name, field in by_name.items() if name not in fields]

    def prep(field):
        if isinstance(field, models.JSONField):
            return json.dumps
        if field.get_internal_type() in _PLAIN_TYPES and (postgres or not field.is_relation):
            return None  # SQLite: a foreign key to a UUID key is saved as its hex, not as the UUID
        return lambda value: field.get_db_prep_save(value, connection)

    postgres = connection.vendor == "postgresql"
    preps = [(index, function) for index, field in enumerate(given) if (function := prep(field)) is not None]
    defaults = [prep(field)(field.get_default()) if prep(field) else field.get_default() for field in rest]

    def prepared(row):
        if preps or defaults:
            row = list(row)
            for index, function in preps:
                row[index] = function(row[index])
            row.extend(defaults)
        return row

    columns = ", ".join(connection.ops.quote_name(field.column) for field in [*given, *rest])
    table = connection.ops.quote_name(model._meta.db_table)
    count = 0
    if not postgres:
        # What bulk_create sends, less its per-row and per-value work (a model instance, pre_save, the compiler's
        # placeholders), which was most of the time of the demo's week of usage history on SQLite.
        sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * (len(given) + len(rest)))})"
        rows = iter(rows)
        with connection.cursor() as cursor:
            while batch := [prepared(row) for row in itertools.islice(rows, batch_size)]:
                cursor.executemany(sql, batch)
                count += len(batch)
        return count
    with connection.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(prepared(row))
            count += 1
    return count


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
