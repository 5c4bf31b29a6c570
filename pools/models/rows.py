"""Model instances from rows of SQL written out, for the few hot reads (a submission's) where compiling the ORM's
query costs more CPU than running it. The values go through the same converters the ORM applies (the backend's,
then the field's: SQLite's booleans, dates and JSON text), so an instance is the one a queryset would give."""

from functools import cache

from django.db import connection


class Columns:
    """One model's concrete columns, read under a table alias, and how a row's slice of them becomes an instance."""

    def __init__(self, model, alias: str):
        self.model, self.alias = model, alias
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]
        self.pk_index = self.fields.index(model._meta.pk)

    @property
    def sql(self) -> str:
        return _select_list(self.model, self.alias, connection.vendor)

    def __len__(self) -> int:
        return len(self.fields)

    def build(self, values) -> object:
        converted = []
        for value, (expression, converters) in zip(values, _converters(self.model, connection.vendor), strict=True):
            if value is not None:
                for converter in converters:
                    value = converter(value, expression, connection)
            converted.append(value)
        return self.model.from_db(connection.alias, self.attnames, converted)


@cache
def _select_list(model, alias: str, vendor: str) -> str:
    return ", ".join(f"{alias}.{connection.ops.quote_name(field.column)}" for field in model._meta.concrete_fields)


@cache
def _converters(model, vendor: str) -> tuple[tuple, ...]:
    """Per concrete field: its column expression and the converters the ORM would apply to its values."""
    found = []
    for field in model._meta.concrete_fields:
        expression = field.get_col(model._meta.db_table)
        found.append((expression, tuple(connection.ops.get_db_converters(expression)
                                        + expression.get_db_converters(connection))))
    return tuple(found)


def read(sql: str, params, *columns: Columns, shared: bool = False) -> list[tuple]:
    """Runs `sql`, whose select list is the `columns`' in order, and gives each row as a tuple of instances.
    `shared`: the rows of a joined table (every `columns` but the first) that several rows name are one instance,
    built once (a batch of workloads of one pool: its pool, backend and project)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = []
    built: dict[tuple, object] = {}
    for row in rows:
        start, objects = 0, []
        for index, part in enumerate(columns):
            values = row[start:start + len(part)]
            if shared and index:
                key = (index, values[part.pk_index])  # pk None: an outer join's missing row, all None
                obj = built.get(key)
                if obj is None:
                    obj = built[key] = part.build(values)
                objects.append(obj)
            else:
                objects.append(part.build(values))
            start += len(part)
        found.append(tuple(objects))
    return found
