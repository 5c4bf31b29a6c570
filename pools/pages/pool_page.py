"""`describe pool` as a page: figures, platforms with their effective node selector, tolerations and
node counts, the configuration document, recent revisions and the usage chart."""

import json

from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from pools.config import writes
from pools.fleet import usage
from pools.models import ConfigKind, Node
from pools.models.visibility import access_for

from . import charts, csv, preferences, snapshots
from .formatting import moment
from .history_pages import diff_url, visible_revisions
from .listing import Listing, Sort
from .quota_pages import enforcement
from .responses import wants_csv
from .tables import PLATFORMS, POOLS, RowContext, status_css

RECENT_REVISIONS = 10
FIGURES = ("node_count", "gpu_total", "gpu_used", "gpu_free", "gpu_unhealthy", "cpu_used", "cpu_total", "memory_used",
           "memory_total")


def platform_rows(pool, counts: dict[str, int]) -> tuple[list[dict], str]:
    """One row per platform, and the reason when the effective configuration cannot be computed."""
    try:
        effective = writes.effective(pool.name)["platforms"]
    except (ValueError, KeyError) as exc:
        # The pool's page must still open when a template it names is gone: that is when people look.
        return [], getattr(exc, "message", str(exc))
    return [{"name": name, "default": name == pool.default_platform, "node_count": counts.get(name, 0),
             "node_selector": platform.get("node_selector") or {}, "tolerations": platform.get("tolerations") or [],
             "resource_validations": platform.get("resource_validations") or []}
            for name, platform in effective.items()], ""


def pool_context(request, pool) -> dict:
    # Nodes are listed by the nodes table (scoped, paged); here only the figures and platform counts.
    detail = usage.pool_detail(pool, nodes=Node.objects.none())
    rows, effective_error = platform_rows(pool, {p["name"]: p["node_count"] for p in detail["platforms"]})
    now = timezone.now()
    ctx = RowContext(staff=access_for(request).is_staff, now=now)
    columns = preferences.chosen_columns(request, PLATFORMS)
    if wants_csv(request):
        return {"download": csv.response(PLATFORMS, columns, rows, ctx)}
    document = writes.export(ConfigKind.POOL, pool.name)["pools"][pool.name]
    revisions = visible_revisions(request).filter(kind=ConfigKind.POOL, name=pool.name).order_by("-number")
    points = snapshots.series([pool.name], now).get(pool.name, [])
    status = usage.pool_status(pool, now)
    return {
        "pool": pool,
        "detail": detail,
        "figures": [(column, column.cell(detail, ctx)) for column in POOLS.columns if column.key in FIGURES],
        "status": status,
        "status_css": status_css(status),
        "engine": enforcement(pool, ctx.staff, now),
        "platforms": Listing(PLATFORMS, path=request.path, query=QueryDict(), columns=columns, sort=Sort(None, False),
                             ctx=ctx, rows=rows, total=len(rows), live=False,
                             empty_message=effective_error or "This pool has no platforms."),
        "effective_error": effective_error,
        "document": json.dumps(document, indent=2),
        "revisions": [(revision, diff_url(revision.kind, revision.number), moment(revision.created_at, now))
                      for revision in revisions[:RECENT_REVISIONS]],
        "history_url": reverse("pages:history") + "?" + urlencode({"type": "pool", "name": pool.name}),
        "chart": charts.gpu_chart(pool.name, points, now, snapshots.interval()),
    }
