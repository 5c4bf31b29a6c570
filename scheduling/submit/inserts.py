"""New rows of several tables written in one round trip: a submission's workload and its first event."""

from django.db import connection
from django.db.models import sql


def insert_rows(*objects) -> None:
    """INSERT each new model instance, in order, as `save(force_insert=True)` would (defaults, auto_now, the
    returned columns set on the instance; no signals, none being connected for these models): in one round trip
    when the connection's cursors bind parameters on the client (psycopg's default under Django), which lets one
    query hold several statements; else one statement at a time."""
    statements = []
    for obj in objects:
        meta = obj._meta
        fields = [f for f in meta.local_concrete_fields if not f.generated
                  and (obj._is_pk_set() or f is not meta.auto_field)]
        query = sql.InsertQuery(type(obj))
        query.insert_values(fields, [obj])
        compiler = query.get_compiler(connection=connection)
        compiler.returning_fields = meta.db_returning_fields
        [(statement, params)] = compiler.as_sql()
        statements.append((obj, statement, params, compiler.returning_fields))
    with connection.cursor() as cursor:
        if _several_statements(cursor):
            cursor.execute("; ".join(s for _, s, _, _ in statements), [p for _, _, ps, _ in statements for p in ps])
            for index, (obj, _, _, returning) in enumerate(statements):
                if index:
                    cursor.nextset()
                _returned(obj, returning, cursor)
        else:
            for obj, statement, params, returning in statements:
                cursor.execute(statement, params)
                _returned(obj, returning, cursor)


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
