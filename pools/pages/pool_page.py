"""`describe pool` as a page: figures, platforms with their effective node selector, tolerations and
node counts, the configuration document, recent revisions and the usage chart."""

import json

from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from pools import configs, usage
from pools.models import ConfigKind, Node

from . import charts, csv, preferences, snapshots
from .history_pages import visible_revisions
from .responses import wants_csv
from .tables import PLATFORMS, RowContext

RECENT_REVISIONS = 10


def platform_rows(pool, counts: dict[str, int]) -> tuple[list[dict], str]:
    """One row per platform, and the reason when the effective configuration cannot be computed."""
    try:
        effective = configs.effective(pool.name)["platforms"]
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
    ctx = RowContext(staff=request.user.is_staff, now=now)
    columns = preferences.chosen_columns(request, PLATFORMS)
    if wants_csv(request):
        return {"download": csv.response(PLATFORMS, columns, rows, ctx)}
    document = configs.export(ConfigKind.POOL, pool.name)["pools"][pool.name]
    revisions = visible_revisions(request).filter(kind=ConfigKind.POOL, name=pool.name).order_by("-number")
    points = snapshots.series([pool.name], now).get(pool.name, [])
    return {
        "pool": pool,
        "detail": detail,
        "status": usage.pool_status(pool, now),
        "platforms": [(row, [(column, column.cell(row, ctx)) for column in columns]) for row in rows],
        "platform_columns": columns,
        "effective_error": effective_error,
        "document": json.dumps(document, indent=2),
        "revisions": list(revisions[:RECENT_REVISIONS]),
        "history_url": reverse("pages:history") + "?" + urlencode({"type": "pool", "name": pool.name}),
        "chart": charts.gpu_chart(pool.name, points, now, snapshots.interval()),
        "platforms_csv": reverse("pages:pool", args=[pool.name]) + "?export=csv",
    }
