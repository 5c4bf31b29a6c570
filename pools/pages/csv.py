"""CSV downloads of the tables: the filtered rows and the chosen columns, in the order shown.

Streamed in batches, so memory stays flat however many rows: by the writer below from
`QuerySet.values().iterator()` (SQLite, and rows computed in Python), or, for the nodes table on PostgreSQL,
from one `COPY ... TO STDOUT` whose SQL formats every cell exactly as the writer would (see the second half
of this module). UTF-8 without a byte-order mark, RFC 4180 quoting and CRLF line ends, a header row of the
column labels (with the unit where figures are raw: bytes, cores).

Spreadsheet formula injection: a text cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage
return gets a leading apostrophe (OWASP's advice), so Excel, LibreOffice and Sheets show it as text.
Figures (GPU counts, cores, bytes) are written as plain numbers and never prefixed: they come from
integers and decimals we format ourselves, so a negative figure is a number, not a formula, and a
spreadsheet must still be able to add it up.
"""

import csv
import io
import json
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connections, transaction
from django.db.models import F, Func, QuerySet, TextField, Value
from django.db.models.functions import Cast, Coalesce, NullIf
from django.http import StreamingHttpResponse
from django.utils import timezone

from pools.models.inventory import last_contact_sql
from pools.models.visibility import redact_sql

from .formatting import NOT_MEASURED
from .tables import Column, RowContext, Table

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
BATCH_ROWS = 1000


def neutralise(text: str) -> str:
    return f"'{text}" if text.startswith(FORMULA_PREFIXES) else text


def csv_value(column: Column, value):
    return converter(column)(value)


def _text(value) -> str:
    return "" if value is None else neutralise(str(value))


def _figure(value):
    return "" if value is None else value  # int or Decimal: csv writes str(value), never with a prefix


def _measured(value):
    return NOT_MEASURED if value is None else value


def _time(value) -> str:
    return "" if value is None else value.isoformat()


def _bool(value) -> str:
    return "" if value is None else ("true" if value else "false")


def _list(value) -> str:
    return "" if value is None else neutralise(", ".join(map(str, value)))


def converter(column: Column) -> Callable:
    """The one function that turns a column's value into its CSV cell, chosen once per export rather
    than once per cell (a 150,000-row export calls it millions of times)."""
    if column.kind == "measured":
        return _measured
    if column.numeric:
        return _figure
    return {"time": _time, "bool": _bool, "list": _list}.get(column.kind, _text)


def lines(columns: list[Column], rows: Iterable[Mapping], ctx: RowContext) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([column.csv_header for column in columns])
    cells = [(column.value, converter(column)) for column in columns]
    pending = 0
    for row in rows:
        writer.writerow([convert(value(row, ctx)) for value, convert in cells])
        pending += 1
        if pending == BATCH_ROWS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
            pending = 0
    yield buffer.getvalue()


def filename(table: Table, now: datetime | None = None) -> str:
    now = timezone.localtime(now or timezone.now())
    return f"{table.name}-{now:%Y%m%d-%H%M%S}.csv"


def response(table: Table, columns: list[Column], rows: Iterable[Mapping], ctx: RowContext) -> StreamingHttpResponse:
    return _streaming(table, (chunk.encode() for chunk in lines(columns, rows, ctx)), ctx)


def _streaming(table: Table, chunks: Iterator[bytes], ctx: RowContext) -> StreamingHttpResponse:
    stream = StreamingHttpResponse(chunks, content_type="text/csv; charset=utf-8")
    stream["Content-Disposition"] = f'attachment; filename="{filename(table, ctx.now)}"'
    stream["Cache-Control"] = "no-store"
    stream["X-Content-Type-Options"] = "nosniff"
    return stream


# ---- PostgreSQL: the same bytes, formatted by the database ------------------------------------------------
#
# On PostgreSQL a table read from a queryset is exported by one `COPY (<the queryset's own SELECT, its cells
# formatted in SQL>) TO STDOUT WITH (FORMAT csv)`, streamed message by message, rather than by decoding every
# JSON column and formatting every cell in Python. The bytes are the reference writer's above
# (tests/pages/test_csv_fast_path.py holds them equal; benchmarks/pages.py checks them at 150,000 rows). The
# writer above stays the path on SQLite, for rows that are not a queryset (pools, platforms) and for any
# column without an SQL form here.
#
# - Rows: the queryset's WHERE and ORDER BY as they are; a DISTINCT query (the pool and platform filters) is
#   read as `pk IN (<the query>)` under the same ORDER BY, whose tie-breakers end with pk.
# - Cells: `_NODE_CELLS`, one per column, each the SQL twin of `Column.value` plus `converter`: neutralised
#   text; integers; cores as `str(Decimal(millicores) / 1000)` prints them (`trim_scale`); times as
#   `datetime.isoformat()` prints a UTC time; lists of up to LIST_ITEMS strings (pools, platforms, reasons)
#   or string-valued taints joined with ", " in their JSON order and filtered to the viewer's pools as
#   `RowContext` filters them; labels from `label_text`, which the writes keep formatted (Node.label_text).
# - Anything else in a JSON list (a longer list, a number, null, an object where a taint should be) is not
#   guessed at: the cell arrives as a marker followed by the column's JSON, and Python formats that one cell
#   with the reference converter and writes its row again (`_Repair`). Every expression is parallel-safe,
#   so PostgreSQL's workers format the rows before they are merged in order.
# - Quoting: PostgreSQL's CSV quoting is Python's minimal quoting (fields holding `,` `"` CR or LF) but for
#   three things, put right here: Python writes an empty field bare (so empty cells are sent as NULL, or, in
#   a one-column export, where Python writes `""`, as ''), ends rows with CRLF rather than LF, and does not
#   quote a lone `\.`.
# - JIT is switched off for the statement: its cost estimate would start LLVM compilation, which takes longer
#   than the export itself.

FAST_PATH = True  # tests turn it off to compare with the reference writer
COPY_CHUNK_BYTES = 64 * 1024
LIST_ITEMS = 4
_DANGEROUS = "('=', '+', '-', '@', E'\\t', E'\\r')"  # FORMULA_PREFIXES, as SQL


def _neutralised(sql: str) -> str:
    """neutralise() of a column (read up to three times: cheap for a column, not for an expression)."""
    return f"CASE WHEN left({sql}, 1) IN {_DANGEROUS} THEN '''' || {sql} ELSE {sql} END"


def _neutralised_once(sql: str) -> str:
    """neutralise() of an expression, evaluated once."""
    return f"regexp_replace({sql}, '^([-=+@\\t\\r])', '''\\1')"


class SqlCell(Func):
    """One CSV cell as SQL: `template` with `$column` standing for the column of `field`, compiled by Django so
    that a related field (`backend__name`) is joined as `values()` joins it. `may_be_empty`: whether the cell
    can be '' (which Python writes bare and PostgreSQL as `""`)."""

    output_field = TextField()

    def __init__(self, template: str, field, params: tuple = (), *, may_be_empty: bool = False):
        super().__init__(F(field) if isinstance(field, str) else field)
        self.template_sql = template
        self.params = params
        self.may_be_empty = may_be_empty

    def as_sql(self, compiler, connection, **extra_context):
        column, column_params = compiler.compile(self.get_source_expressions()[0])
        if column_params:  # never for a plain column
            raise ValueError("a CSV cell reads a plain column")  # or an expression of plain columns
        return self.template_sql.replace("$column", column), list(self.params)


CellSql = Callable[[RowContext, str], SqlCell]  # (ctx, marker) -> the cell


def _sql_text(field: str) -> CellSql:
    return lambda ctx, marker: SqlCell(_neutralised("$column"), field, may_be_empty=True)


def _sql_integer(field: str) -> CellSql:
    return lambda ctx, marker: SqlCell("$column", field)  # COPY prints it as str() does


def _sql_cores(field: str) -> CellSql:
    return lambda ctx, marker: SqlCell("trim_scale($column * 0.001)", field)  # millicores; exact at scale 3


def _sql_iso_time(field) -> CellSql:
    utc = "($column AT TIME ZONE 'UTC')"
    return lambda ctx, marker: SqlCell(
        f"to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN date_trunc('second', $column) = $column "
        f"THEN '' ELSE to_char({utc}, '.US') END || '+00:00'", field)


def _sql_not(field: str) -> CellSql:
    return lambda ctx, marker: SqlCell("CASE WHEN $column THEN 'false' ELSE 'true' END", field)


def _sql_list(field: str, marker: str, *, item: Callable[[int], str], exact: Callable[[int], str],
              keep: Callable[[int], str] | None = None, params: tuple = ()) -> SqlCell:
    """neutralise(", ".join(item(i) for each element i if keep(i))) for a JSON list of at most LIST_ITEMS
    elements that are all `exact` (of a shape that item() formats as Python does); else the marker and the
    JSON, for Python to format."""
    def kept(index: int) -> str:
        return f"CASE WHEN {keep(index)} THEN {item(index)} END" if keep else item(index)

    branches = []
    for length in range(1, LIST_ITEMS + 1):
        joined = kept(0) if length == 1 else f"concat_ws(', ', {', '.join(kept(i) for i in range(length))})"
        branches.append(f"WHEN {length} THEN CASE WHEN {' AND '.join(exact(i) for i in range(length))} "
                        f"THEN {_neutralised_once(joined)} ELSE {_marked(marker)} END")
    template = (f"CASE jsonb_typeof($column) WHEN 'array' THEN CASE jsonb_array_length($column) WHEN 0 THEN NULL "
                f"{' '.join(branches)} ELSE {_marked(marker)} END ELSE {_marked(marker)} END")
    return SqlCell(template, field, params * template.count("%s"), may_be_empty=True)


def _marked(marker: str) -> str:
    return f"chr(1) || '{marker[1:-1]}' || chr(1) || $column::text"


def _sql_names(field: str, visible: str | None = None) -> CellSql:
    """A JSON list of names; `visible` ("pools" or "platforms") says which names they are, to be redacted
    as `RowContext` redacts them (`pools.models.visibility.redact`)."""
    def cell(ctx: RowContext, marker: str) -> SqlCell:
        def item(i):
            return f"($column ->> {i})"

        def exact(i):
            return f"jsonb_typeof($column -> {i}) = 'string'"

        if not visible or ctx.visible_pools is None:
            return _sql_list(field, marker, item=item, exact=exact)

        def keep(i):  # the redaction rule itself, in SQL
            return redact_sql(item(i), platforms=visible == "platforms")
        return _sql_list(field, marker, item=item, exact=exact, keep=keep, params=(sorted(ctx.visible_pools),))
    return cell


def _sql_taints(field: str) -> CellSql:
    """`tables._taint` of taints whose key and effect are strings (or missing) and whose value is a string,
    null or missing: key=value:effect, or key:effect without a value."""
    def item(i):
        key, value, effect = (f"($column #>> '{{{i},{name}}}')" for name in ("key", "value", "effect"))
        return f"COALESCE({key}, '') || CASE WHEN {value} <> '' THEN '=' || {value} ELSE '' END || ':' || " \
               f"COALESCE({effect}, '')"

    def exact(i):
        key, value, effect = (f"jsonb_typeof($column #> '{{{i},{name}}}')" for name in ("key", "value", "effect"))
        return (f"jsonb_typeof($column -> {i}) = 'object' AND COALESCE({key}, 'string') = 'string' AND "
                f"COALESCE({effect}, 'string') = 'string' AND COALESCE({value}, 'null') IN ('string', 'null')")

    return lambda ctx, marker: _sql_list(field, marker, item=item, exact=exact)


# The nodes table (tables.NODES), column by column.
_NODE_CELLS: dict[str, CellSql] = {
    "node": _sql_text("name"),
    "status": _sql_text("status"),
    "pools": _sql_names("pool_names", visible="pools"),
    "platforms": _sql_names("platform_names", visible="platforms"),
    "gpu_product": _sql_text("gpu_product"),
    "gpu_total": _sql_integer("gpu_total"),
    "gpu_used": _sql_integer("gpu_used"),
    "gpu_free": _sql_integer("gpu_free"),
    "gpu_unhealthy": _sql_integer("gpu_unhealthy"),
    "cpu_used": _sql_cores("cpu_requested"),
    "cpu_total": _sql_cores("cpu_allocatable"),
    "memory_used": _sql_integer("memory_requested"),
    "memory_total": _sql_integer("memory_allocatable"),
    "storage": _sql_integer("storage_allocatable"),
    "taints": _sql_taints("taints"),
    "last_seen": _sql_iso_time(last_contact_sql()),
    "labels": _sql_text("label_text"),
    "reasons": _sql_names("reasons"),
    "backend": _sql_text("backend__name"),
    "sharing": _sql_text("sharing"),
    "schedulable": _sql_not("unschedulable"),
    "last_change": _sql_iso_time("last_seen"),
}
SQL_CELLS: dict[str, dict[str, CellSql]] = {"nodes": _NODE_CELLS}


@dataclass(frozen=True)
class CopyExport:
    statement: str  # the COPY, its parameters bound
    columns: list[Column]
    ctx: RowContext
    marker: str  # starts a cell that Python must format

    @property
    def single(self) -> bool:
        return len(self.columns) == 1


def copy_export(table: Table, columns: list[Column], queryset: QuerySet, ctx: RowContext) -> CopyExport | None:
    """The `COPY ... TO STDOUT` that writes the rows of `queryset` as the reference writer would; None when
    the export must take the Python path."""
    cells = SQL_CELLS.get(table.name)
    connection = connections[queryset.db]
    query = queryset.query
    if (not FAST_PATH or cells is None or any(column.key not in cells for column in columns)
            or connection.vendor != "postgresql" or not settings.USE_TZ or connection.timezone_name != "UTC"
            or query.distinct_fields or query.is_sliced or query.combinator or query.extra or query.extra_order_by
            or (query.distinct and query.annotations)):
        return None
    if query.distinct:
        rows = queryset.model._base_manager.filter(pk__in=queryset.order_by().values("pk"))
        if query.order_by:
            rows = rows.order_by(*query.order_by)
        elif not query.default_ordering:
            rows = rows.order_by()
    else:
        rows = queryset
    marker = f"\x01{secrets.token_hex(8)}\x01"
    empty = Value("", output_field=TextField())
    selected = {}
    for index, column in enumerate(columns):
        cell = cells[column.key](ctx, marker)
        if len(columns) == 1:  # Python writes a lone empty field as ""
            cell = Coalesce(Cast(cell, TextField()), empty)
        elif cell.may_be_empty:  # elsewhere bare, as PostgreSQL writes NULL
            cell = NullIf(cell, empty)
        selected[f"csv_{index}"] = cell
    try:
        sql, params = rows.values(**selected).query.sql_with_params()
    except EmptyResultSet:  # `none()`, as a filter outside the viewer's pools gives: the header alone
        return None
    statement = connection.ops.compose_sql(f"COPY ({sql}) TO STDOUT WITH (FORMAT csv)", list(params))
    return CopyExport(statement, list(columns), ctx, marker)


def copy_chunks(using: str, export: CopyExport) -> Iterator[bytes]:
    """The rows of the export, about COPY_CHUNK_BYTES at a time. Runs as the response is consumed, after the
    view has returned, on the request's connection, in a transaction of its own (a savepoint inside an atomic
    block). Left early (the client went away), psycopg cancels the COPY, the transaction rolls back and the
    connection is clean for the next request."""
    connection = connections[using]
    repair = _Repair(export)
    with transaction.atomic(using=using), connection.wrap_database_errors, connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        with cursor.copy(export.statement) as copy:
            rows: list = []
            size = 0
            for row in copy:  # one message per row, ending with LF
                rows.append(row)
                size += len(row)
                if size >= COPY_CHUNK_BYTES:
                    yield repair.chunk(rows)
                    rows, size = [], 0
            if rows:
                yield repair.chunk(rows)


class _Repair:
    """PostgreSQL's CSV rows as Python's csv module writes them, with the cells PostgreSQL left to Python."""

    def __init__(self, export: CopyExport):
        self.single = export.single
        self.marker = export.marker
        self.marker_bytes = export.marker.encode()
        self.ctx = export.ctx
        self.cells = [(column.value, converter(column), column.export_fields) for column in export.columns]

    def chunk(self, rows: list) -> bytes:
        data = b"".join(rows)
        if self.marker_bytes in data:
            return b"".join(self.row(bytes(row)) for row in rows)
        if self.single and b'"\\."' in data:
            return b"".join(self.row(bytes(row)) for row in rows)
        if data.count(b"\n") == len(rows):  # no line break inside a quoted cell: every LF ends a row
            return data.replace(b"\n", b"\r\n")
        return b"".join(bytes(row[:-1]) + b"\r\n" for row in rows)

    def row(self, row: bytes) -> bytes:
        if self.marker_bytes not in row:
            if self.single and row == b'"\\."\n':  # PostgreSQL quotes a lone \. (its end-of-data mark)
                return b"\\.\r\n"
            return row[:-1] + b"\r\n"
        texts = next(csv.reader(io.StringIO(row.decode())))
        cells = []
        for (value, convert, fields), text in zip(self.cells, texts, strict=True):
            if text.startswith(self.marker):
                text = convert(value({fields[0]: json.loads(text[len(self.marker):])}, self.ctx))
            cells.append(text)
        buffer = io.StringIO()
        csv.writer(buffer).writerow(cells)
        return buffer.getvalue().encode()


def header(columns: list[Column]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow([column.csv_header for column in columns])
    return buffer.getvalue()


def queryset_response(table: Table, columns: list[Column], queryset: QuerySet,
                      ctx: RowContext) -> StreamingHttpResponse:
    """The CSV of `queryset` (filtered, scoped and ordered as shown): by COPY on PostgreSQL, else by the
    reference writer over `values().iterator()`."""
    export = copy_export(table, columns, queryset, ctx)
    if export is None:
        rows = queryset.values(*table.fields(columns, export=True)).iterator(chunk_size=2000)
        return response(table, columns, rows, ctx)
    return _streaming(table, _copy_download(queryset.db, export), ctx)


def _copy_download(using: str, export: CopyExport) -> Iterator[bytes]:
    # A generator, so that closing the response (the client went away) closes the COPY at once.
    yield header(export.columns).encode()
    yield from copy_chunks(using, export)
