"""New rows of several tables written in one round trip: a submission's workload and its first event; the rows a
batch of dispatches made SCHEDULING and their events."""

from functools import cache

from django.db import connection


def insert_rows(*objects, then: tuple[str, list] | list[tuple[str, list]] | None = None) -> None:
    """INSERT each new model instance, in order, as `save(force_insert=True)` would (defaults, auto_now, the
    returned columns set on the instance; no signals, none being connected for these models), then run `then`
    (SQL and its parameters, a statement returning no rows; or a list of them): in one round trip when the
    connection's cursors bind parameters on the client (psycopg's default under Django), which lets one query hold
    several statements; else one statement at a time."""
    statements = []
    for obj in objects:
        sql, fields, returning = _statement(type(obj), obj._is_pk_set(), connection.vendor)
        params = [field.get_db_prep_save(field.pre_save(obj, True), connection=connection) for field in fields]
        statements.append((obj, sql, params, returning))
    for sql, params in [then] if isinstance(then, tuple) else then or ():
        statements.append((None, sql, params, []))
    with connection.cursor() as cursor:
        if _several_statements(cursor):
            cursor.execute("; ".join(s for _, s, _, _ in statements), [p for _, _, ps, _ in statements for p in ps])
            for index, (obj, _, _, returning) in enumerate(statements):
                if index:
                    cursor.nextset()
                if obj is not None:
                    _returned(obj, returning, cursor)
        else:
            for obj, statement, params, returning in statements:
                cursor.execute(statement, params)
                if obj is not None:
                    _returned(obj, returning, cursor)


@cache
def _statement(model, pk_set: bool, vendor: str) -> tuple[str, list, list]:
    """The INSERT of a model's row (SQL, the fields it binds in order, the fields it returns), built once per
    process: the values change, the statement does not. It is what the ORM's insert compiler writes for
    `save(force_insert=True)` of such a row; building it per row cost more CPU than running it."""
    meta = model._meta
    fields = [f for f in meta.local_concrete_fields if not f.generated and (pk_set or f is not meta.auto_field)]
    assert not any(hasattr(f, "get_placeholder") for f in fields), "a field with its own placeholder"
    quote = connection.ops.quote_name
    sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))})")
    returning = list(meta.db_returning_fields) if connection.features.can_return_columns_from_insert else []
    if returning:
        returning_sql, _ = connection.ops.return_insert_columns(returning)
        sql += f" {returning_sql}"
    return sql, fields, returning


def _several_statements(cursor) -> bool:
    if connection.vendor != "postgresql":
        return False
    import psycopg

    return isinstance(cursor.cursor, psycopg.ClientCursor)


def _returned(obj, returning, cursor) -> None:
    if returning and connection.features.can_return_columns_from_insert:
        for value, field in zip(cursor.fetchone(), returning, strict=True):
            setattr(obj, field.attname, value)
    obj._state.adding = False
    obj._state.db = connection.alias
