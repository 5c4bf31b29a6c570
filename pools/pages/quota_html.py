"""Rows of the quota tables as HTML (escaped by `format_html`, like pools/pages/html.py): departments with
their projects nested under them, and for staff each deserved, limit and weight cell a small form that
writes that one figure (POST to `pages:quota-edit`; htmx swaps the answer, the same form, in place).

Without JavaScript the forms still post (each carries the CSRF token) and the page comes back with a message.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from pools.quotas.documents import WEIGHTS
from pools.quotas.edits import Cell as EditCell

from . import html
from .tables import Column, RowContext

# Column key suffix -> document field of the cells staff may edit.
EDITABLE = {"deserved": "deserved", "limit": "limit", "weight": "over_quota_weight"}
_NO_LIMIT = mark_safe('<span class="muted">none</span>')  # a constant, not data
_SHARED = mark_safe('<span class="badge" title="Some of its pods have no pool label and run on nodes of several '
                    'pools: they count in each of those pools">counted in several pools</span>')
_STARVED = mark_safe('<span class="badge badge-starved" title="Work of it waits in this pool while its allocated GPUs '
                     'are under its deserved quota">starved</span>')
_BINARY = (("Ti", 1024 ** 4), ("Gi", 1024 ** 3), ("Mi", 1024 ** 2), ("Ki", 1024))


@dataclass(frozen=True)
class Editing:
    """What a staff viewer's cells need to become forms."""

    url: str
    csrf_token: str
    pool_projects: frozenset[str]  # projects that mirror an OSMO pool's resources.gpu

    def target(self, row: Mapping, resource: str, suffix: str) -> EditCell | None:
        if row["project"] is None:
            return EditCell("department", row["department"], row["pool"], resource, EDITABLE[suffix])
        if row["project"] in self.pool_projects and (resource != "gpu" or row["project"] != row["pool"]):
            return None  # a pool's own project: only its GPUs, in its pool (the pool's resources.gpu)
        return EditCell("project", row["project"], row["pool"], resource, EDITABLE[suffix])


def pool_url(name: str) -> str:
    return reverse("pages:pool", args=[name])


def input_text(resource: str, value) -> str:
    """A figure as its cell's input shows it, in what the edit accepts back: GPUs, cores, memory as a
    binary quantity when it is a whole one ("512Gi"), else bytes; a limit of -1 as nothing (no limit)."""
    if value is None or value == -1:
        return ""
    if resource == "memory":
        for suffix, size in _BINARY:
            if value and value % size == 0:
                return f"{value // size}{suffix}"
        return str(value)
    number = Decimal(str(value))
    return format(number.quantize(Decimal(1)) if number == number.to_integral_value() else number.normalize(), "f")


def edit_form(cell: EditCell, value: str, editing: Editing, *, error: str = "") -> SafeString:
    """One cell's form. `value` is the input's text (what is stored, or what was typed when refused)."""
    dom_id = f"qe-{cell.key.replace(':', '-')}"
    if cell.field == "over_quota_weight":
        options = format_html_join("", '<option value="{}"{}>{}</option>',
                                   ((name, mark_safe(" selected") if name == value else "", name) for name in WEIGHTS))
        control = format_html('<select name="value" id="{}" aria-label="{}"{}>{}</select>', dom_id, cell.label,
                              _invalid(dom_id, error), options)
    else:
        placeholder = ' placeholder="none"' if cell.field == "limit" else ""
        control = format_html('<input type="text" name="value" id="{}" value="{}" aria-label="{}" size="7" '
                              'inputmode="decimal" autocomplete="off"{}{}>', dom_id, value, cell.label,
                              mark_safe(placeholder), _invalid(dom_id, error))
    message = format_html('<small class="field-error" role="alert" id="{}-error">{}</small>', dom_id, error) \
        if error else ""
    return format_html(
        '<form class="quota-cell" method="post" action="{url}" hx-post="{url}" hx-swap="outerHTML" '
        'hx-trigger="submit, change" hx-sync="this:drop">'
        '<input type="hidden" name="csrfmiddlewaretoken" value="{csrf}"><input type="hidden" name="cell" value="{key}">'
        '{control}<button type="submit" class="quota-save">Save</button>{message}</form>',
        url=editing.url, csrf=editing.csrf_token, key=cell.key, control=control, message=message)


def _invalid(dom_id: str, error: str) -> SafeString:
    return format_html(' aria-invalid="true" aria-describedby="{}-error"', dom_id) if error else mark_safe("")


def content(column: Column, row: Mapping, ctx: RowContext, editing: Editing | None, project_url) -> SafeString:
    key = column.key
    if key == "unit":
        if row["project"] is None:
            return format_html('<strong class="quota-unit">{}</strong>', row["department"])
        shared = _SHARED if row["shared_usage"] else ""
        starved = _STARVED if row.get("starved") else ""
        return format_html('<span class="quota-nest" aria-hidden="true">↳</span> <a href="{}">{}</a> {}{}',
                           project_url(row["project"]), row["project"], shared, starved)
    if key == "pool":
        return format_html('<a href="{}">{}</a>', pool_url(row["pool"]), row["pool"])
    if key == "project" and row["project"] is not None:
        return format_html('<a href="{}">{}</a>', project_url(row["project"]), row["project"])
    resource, _, suffix = key.partition("_")
    if suffix in EDITABLE and editing is not None:
        target = editing.target(row, resource, suffix)
        if target is not None:
            value = row[key] if suffix == "weight" else input_text(resource, row[key])
            return edit_form(target, value, editing)
    if suffix == "limit" and row[key] == -1:
        return _NO_LIMIT
    if key == "shared_usage":
        return _SHARED if row[key] else mark_safe("")
    if key == "starved":
        return _STARVED if row[key] else mark_safe("")
    return html.content(column, column.cell(row, ctx))


def row(key: str, row_: Mapping, columns: list[Column], ctx: RowContext, editing: Editing | None,
        project_url) -> SafeString:
    parts = []
    for index, column in enumerate(columns):
        tag = mark_safe("th" if index == 0 else "td")
        scope = mark_safe(' scope="row"' if index == 0 else "")
        css = mark_safe(' class="num"' if column.numeric else "")
        parts.append(format_html('<{tag}{scope} data-col="{key}"{css}>{content}</{tag}>', tag=tag, scope=scope,
                                 key=column.key, css=css,
                                 content=content(column, row_, ctx, editing, project_url)))
    level = "department" if row_["project"] is None else "project"
    return format_html('<tr data-key="{}" data-testid="row" data-level="{}" class="quota-{}">{}</tr>', key, level,
                       level, mark_safe("".join(parts)))


def status_line(text: str) -> SafeString:
    """The page's status line, replaced out of band by a saved cell's answer."""
    return format_html('<p id="quota-status" class="quota-status" role="status" hx-swap-oob="true">{}</p>', text)
