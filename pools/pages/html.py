"""Table rows as HTML, built with `format_html`, which escapes every value it inserts (as autoescape
would). A template loop costs about 1 ms per 20 cells, so a 200-row page spent most of its time
there; this is the same markup at a small fraction of the cost. Nothing here marks user text safe."""

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from .tables import Cell, Column

_NONE = mark_safe('<span class="muted">—</span>')  # a constant, not data
_NEVER = mark_safe('<span class="muted">never</span>')


def _link_or_text(text: str, href: str, title: str = "") -> SafeString:
    if href and title:
        return format_html('<a href="{}" title="{}">{}</a>', href, title, text)
    if href:
        return format_html('<a href="{}">{}</a>', href, text)
    if title:
        return format_html('<span title="{}">{}</span>', title, text)
    return format_html("{}", text)


def content(column: Column, cell: Cell) -> SafeString:
    kind = column.kind
    if kind == "list":
        if not cell.items:
            return _NONE
        items = format_html_join("", "<li>{}</li>", ((_link_or_text(text, href),) for text, href in cell.items))
        if column.compact:
            # A count that opens on demand: a row stays one line however many labels its node has.
            count = len(cell.items)
            noun = column.compact if count == 1 else f"{column.compact}s"
            return format_html('<details class="cell-more"><summary>{} {}</summary><ul class="chips">{}</ul></details>',
                               count, noun, items)
        return format_html('<ul class="chips">{}</ul>', items)
    if kind == "status":
        inner = _link_or_text(cell.text, cell.href)
        if cell.title:
            return format_html('<span class="status {}" title="{}">{}</span>', cell.css, cell.title, inner)
        return format_html('<span class="status {}">{}</span>', cell.css, inner)
    if kind == "time":
        if not cell.iso:
            return _NEVER
        return format_html('<time datetime="{}" title="{}">{}</time>', cell.iso, cell.title, cell.text)
    return _link_or_text(cell.text, cell.href, cell.title)


def row(key: str, cells: list[tuple[Column, Cell]], actions: list[tuple[str, str]], with_actions: bool) -> SafeString:
    """`<tr>` with the first cell as the row header, `data-col` on every cell for tests and styles. On a phone
    (site.css) only the first cell and the `phone` columns show; "More" in the first cell opens the others
    ("wide-only", each under its `data-label`) below them: the same cells, not a copy."""
    narrow = any(column.phone for column, _ in cells)
    parts = []
    for index, (column, cell) in enumerate(cells):
        inner = content(column, cell)
        wide_only = narrow and index > 0 and not column.phone
        if index == 0 and narrow and any(not other.phone for other, _ in cells[1:]):
            inner = format_html('{}<details class="row-more"><summary>More</summary></details>', inner)
        classes = " ".join(name for name, wanted in (("num", column.numeric), ("wide-only", wide_only)) if wanted)
        parts.append(format_html('<{tag}{scope} data-col="{key}"{css}{label}>{content}</{tag}>',
                                 tag=mark_safe("th" if index == 0 else "td"),
                                 scope=mark_safe(' scope="row"' if index == 0 else ""), key=column.key,
                                 css=format_html(' class="{}"', classes) if classes else "",
                                 label=format_html(' data-label="{}"', column.label) if wide_only else "",
                                 content=inner))
    if with_actions:
        links = format_html_join(" · ", '<a href="{}">{}</a>', ((href, label) for label, href in actions))
        parts.append(format_html('<td class="actions">{}</td>', links))
    return format_html('<tr data-key="{}" data-testid="row">{}</tr>', key, mark_safe("".join(parts)))
