"""One table as one request sees it: chosen columns, sort, page, and the links that change them.
Filters, sort and page live in the query string, so every state of a table has a URL to share.

Query parameters: `sort` (a column key, `-` first for descending), `page`, `per_page`, `cols` (column
keys separated by commas, overriding the user's saved choice), `export=csv`.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Count, F, QuerySet, Sum
from django.http import QueryDict
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString

from . import formatting, html
from .formatting import number
from .tables import Cell, Column, RowContext, Table

PER_PAGE_CHOICES = (25, 50, 100, 200)
DEFAULT_PER_PAGE = 50
# Not carried into links: a new sort or filter starts again at page 1, and links never download.
_TRANSIENT = ("page", "export")


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    cells: list[tuple[Column, Cell]]
    actions: list[tuple[str, str]]  # (label, href) links shown after the cells; not part of the CSV
    html: SafeString  # the whole <tr>, escaped by pools.pages.html


@dataclass(frozen=True, slots=True)
class Header:
    column: Column
    link: str  # empty: not sortable
    aria_sort: str  # ascending | descending | none
    next_direction: str
    wide_only: bool = False  # hidden on a phone (pools.pages.html.row)


@dataclass(frozen=True, slots=True)
class Sort:
    column: Column | None
    descending: bool

    @property
    def param(self) -> str:
        return "" if self.column is None else f"{'-' if self.descending else ''}{self.column.key}"


def parse_sort(table: Table, text: str | None) -> Sort:
    text = (text or table.default_sort or "").strip()
    descending = text.startswith("-")
    column = table.by_key.get(text.lstrip("-"))
    if column is None or not column.sortable:
        if text == table.default_sort:
            return Sort(None, False)
        return parse_sort(table, table.default_sort)
    return Sort(column, descending)


def order_queryset(queryset: QuerySet, sort: Sort, tie_breakers: Sequence[str]) -> QuerySet:
    """Nulls sort last either way, and the tie-breakers keep pages stable while figures change."""
    if sort.column is None:
        return queryset.order_by(*tie_breakers)
    direction = "desc" if sort.descending else "asc"
    ordering = [getattr(F(name) if isinstance(name, str) else name, direction)(nulls_last=True)
                for name in sort.column.sort]
    return queryset.order_by(*ordering, *tie_breakers)


def order_rows(rows: Iterable[Mapping], sort: Sort, ctx: RowContext) -> list[Mapping]:
    rows = list(rows)
    if sort.column is None:
        return rows
    column = sort.column
    present = [row for row in rows if column.value(row, ctx) is not None]
    missing = [row for row in rows if column.value(row, ctx) is None]
    present.sort(key=lambda row: _sort_key(column.value(row, ctx)), reverse=sort.descending)
    return present + missing


def _sort_key(value):
    return value.casefold() if isinstance(value, str) else value


def page_number(query: QueryDict) -> int:
    try:
        return max(1, int(query.get("page", "1")))
    except ValueError:
        return 1


def per_page(query: QueryDict) -> int:
    try:
        value = int(query.get("per_page", DEFAULT_PER_PAGE))
    except ValueError:
        return DEFAULT_PER_PAGE
    return value if value in PER_PAGE_CHOICES else DEFAULT_PER_PAGE


class Listing:
    """What `templates/pages/_table.html` renders. `path` is where the table lives (its links and its
    live refresh go there); `query` holds the filters, sort and columns of this view of it."""

    def __init__(self, table: Table, *, path: str, query: QueryDict, columns: list[Column], sort: Sort,
                 ctx: RowContext, rows: Iterable[Mapping], total: int, page=None, empty_message: str = "",
                 filtered: bool = False, live: bool = True, totals: str = "", sums: Mapping[str, Any] | None = None,
                 totals_label: str = "", actions: Callable[[Mapping], list[tuple[str, str]]] | None = None):
        self.table = table
        self.path = path
        # Empty filters ("q=&pool=", as a GET form sends them) are left out of every link.
        self.query = QueryDict(mutable=True)
        for name, values in query.lists():
            kept = [value for value in values if value and (name, value) != ("per_page", str(DEFAULT_PER_PAGE))]
            if kept and name not in _TRANSIENT:
                self.query.setlist(name, kept)
        self.columns = columns
        self.sort = sort
        self.ctx = ctx
        self.total = total
        self.page = page
        self.empty_message = empty_message
        self.filtered = filtered
        self.totals = totals  # a line of sums over every filtered row (not the page), beside the count
        self.sums = sums  # {column key: total over every filtered row}: the totals row (`database_sums`)
        # The totals row's first cell when its figures are not a plain sum of the rows ("Pool (each node once)").
        self.totals_label = totals_label
        self.live = live
        self.has_actions = actions is not None
        self._source, self._actions = rows, actions

    @cached_property
    def rows(self) -> list[Row]:
        # Formatted when the table is rendered, not for a response that leaves it out (the charts of `/`).
        return [self._row(row, self._actions) for row in self._source]

    def _row(self, row: Mapping, actions) -> Row:
        key = self.table.key(row)
        cells = [(column, column.cell(row, self.ctx)) for column in self.columns]
        links = actions(row) if actions else []
        return Row(key, cells, links, html.row(key, cells, links, self.has_actions))

    @property
    def dom_id(self) -> str:
        return f"{self.table.name}-table"

    def link(self, **changes) -> str:
        query = self.query.copy()
        for name, value in changes.items():
            query.pop(name, None)
            if value not in (None, ""):
                query[name] = str(value)
        encoded = query.urlencode()
        return f"{self.path}?{encoded}" if encoded else self.path

    @property
    def url(self) -> str:
        """This view of the table, without page: what the live refresh re-fetches."""
        return self.link(page=self.page.number if self.page and self.page.number > 1 else None)

    @property
    def csv_url(self) -> str:
        return self.link(export="csv")

    @property
    def headers(self) -> list[Header]:
        headers = []
        narrow = any(column.phone for column in self.columns)
        for index, column in enumerate(self.columns):
            wide_only = narrow and index > 0 and not column.phone
            if not column.sortable:
                headers.append(Header(column, "", "none", "", wide_only))
                continue
            current = self.sort.column is column
            # A figure's first click shows the largest first; text starts at A.
            descending = (not self.sort.descending) if current else column.numeric
            aria = ("descending" if self.sort.descending else "ascending") if current else "none"
            headers.append(Header(column, self.link(sort=f"{'-' if descending else ''}{column.key}"), aria,
                                  "descending" if descending else "ascending", wide_only))
        return headers

    @property
    def pages(self) -> dict | None:
        page = self.page
        if page is None or page.paginator.num_pages <= 1:
            return None
        return {
            "first": self.link(page=1) if page.number > 1 else "",
            "previous": self.link(page=page.previous_page_number()) if page.has_previous() else "",
            "next": self.link(page=page.next_page_number()) if page.has_next() else "",
            "last": self.link(page=page.paginator.num_pages) if page.number < page.paginator.num_pages else "",
            "number": page.number,
            "count": page.paginator.num_pages,
            "start": page.start_index(),
            "end": page.end_index(),
        }

    @property
    def summary(self) -> str:
        """For example "1\u201350 of 5,000 rows (filtered)"."""
        text = f"{number(self.total)} {'row' if self.total == 1 else 'rows'}"
        pages = self.pages
        if pages:
            text = f"{number(pages['start'])}\u2013{number(pages['end'])} of {text}"
        return f"{text} (filtered)" if self.filtered else text

    @cached_property
    def totals_row(self) -> SafeString:
        """`<tr>` of the sums over every filtered row (not only this page) under the summable columns, blank
        under the others; empty without sums."""
        if self.sums is None:
            return SafeString("")
        label = self.totals_label or ("Total" if self.total == 1 else f"Total of {number(self.total)}")
        return self.sums_row(self.sums, label)

    def sums_row(self, sums: Mapping[str, Any], label: str) -> SafeString:
        """A totals `<tr>` of `sums` ({column key: figure}) under this listing's columns, `label` in the first
        cell, blank elsewhere; empty when no shown column has a sum. The quota tables, whose rows are
        rendered per pool section, call it once per section."""
        if not any(column.key in sums for column in self.columns):
            return SafeString("")
        cells = []
        for index, header in enumerate(self.headers):
            column, wide = header.column, " wide-only" if header.wide_only else ""  # a phone shows the key cells
            if column.key in sums:
                value = sums[column.key]
                text = {"cores": lambda v: formatting.cores(v, places=1),  # as the cells above it
                        "bytes": formatting.size, "measured": formatting.measured}.get(column.kind, number)(value)
                cell = format_html('<td data-col="{}" class="num{}">{}</td>', column.key, wide, text)
            elif index == 0:
                cell = format_html('<th scope="row" data-col="{}">{}</th>', column.key, label)
            else:
                cell = format_html('<td data-col="{}"{}></td>', column.key,
                                   SafeString(' class="wide-only"') if wide else "")
            cells.append(cell)
        if self.has_actions:
            cells.append(SafeString("<td></td>"))
        return format_html('<tr class="totals" data-testid="{}-totals-row">{}</tr>', self.table.name,
                           SafeString("".join(cells)))

    @property
    def hidden_state(self) -> list[tuple[str, str]]:
        """Sort and columns, carried into the filter form (which sits outside the fragment, and has its own
        page-size menu) by inputs inside the fragment, so they follow every sort click."""
        return [(name, self.query[name]) for name in ("sort", "cols") if self.query.get(name)]


def paginate(queryset: QuerySet, query: QueryDict, count: int | None = None):
    """`count`: the number of rows when already known (`database_sums` counts them), saving a query."""
    paginator = Paginator(queryset, per_page(query))
    if count is not None:
        paginator.__dict__["count"] = count  # Paginator.count is a cached_property
    return paginator.get_page(page_number(query))


def database_sums(queryset: QuerySet, columns: Iterable[Column]) -> tuple[int, dict[str, Any]]:
    """The number of rows of `queryset` and the sums of its summable `columns` (as the columns show their
    values: cores from millicores), over every row, in one aggregate."""
    summed = [column for column in columns if column.summable]
    figures = queryset.order_by().aggregate(
        _count=Count("pk"), **{column.key: Sum(column.fields[0]) for column in summed})
    return figures.pop("_count"), {column.key: column.value({column.fields[0]: figures[column.key] or 0}, None)
                                   for column in summed}
