"""Server-rendered pages: pool overview, nodes, describe pool, configuration history (docs/pages.md).

Tables are declared once in `tables.py`; the HTML table, the HTMX fragment and the CSV export all read
those declarations, and all of them take their rows from `visible_to(request)`.
"""
