"""`describe pool` as a page: figures, platforms with their effective node selector, tolerations, node counts
and GPU figures, the configuration document, recent revisions and the usage chart.

The figures and the platform table are one live region (`#pool-live`, `live_context`), refreshed with the
nodes table; every figure links to the nodes table behind it."""

import json

from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from pools.config import writes
from pools.fleet import usage
from pools.inventory.status import READY
from pools.models import ConfigKind, Node, NodeMembership
from pools.models.visibility import access_for

from . import charts, csv, preferences, snapshots
from .formatting import cores, moment, number, size
from .history_pages import diff_url, visible_revisions
from .listing import Listing, Sort
from .quota_pages import enforcement
from .responses import wants_csv
from .tables import PLATFORMS, RowContext, status_css

RECENT_REVISIONS = 10
# The platform table's totals row: the pool's own figures, each node once (a node on two platforms is in both
# rows, so a sum of the rows would count it twice).
POOL_TOTALS = ("node_count", *usage.PLATFORM_GPU_FIGURES, *usage.FREE_FIGURES)
POOL_TOTALS_LABEL = "Pool (each node once)"
LIVE_REGION = "pool-live"
# The nodes table's status filter value for every node that is not Ready (Unknown included).
ATTENTION = "attention"


def platform_rows(pool, figures: list[dict]) -> tuple[list[dict], str]:
    """One row per platform (its figures from `usage.platform_figures`), and the reason when the effective
    configuration cannot be computed."""
    try:
        effective = writes.effective(pool.name)["platforms"]
    except (ValueError, KeyError) as exc:
        # The pool's page must still open when a template it names is gone: that is when people look.
        return [], getattr(exc, "message", str(exc))
    by_name = {row["name"]: row for row in figures}
    empty = {"node_count": 0, **dict.fromkeys((*usage.PLATFORM_GPU_FIGURES, *usage.FREE_FIGURES), 0)}
    return [{**empty, **by_name.get(name, {}), "name": name, "pool": pool.name,
             "default": name == pool.default_platform, "node_selector": platform.get("node_selector") or {},
             "tolerations": platform.get("tolerations") or [],
             "resource_validations": platform.get("resource_validations") or []}
            for name, platform in effective.items()], ""


def nodes_url(pool, **params) -> str:
    return f"{reverse('pages:nodes')}?{urlencode({'pool': pool.name, **params})}"


def figures(pool, detail: dict, not_ready: int) -> list[dict]:
    """The pool's figures as the page prints them, each with the nodes table behind it."""
    def figure(key, label, text, href, title=""):
        return {"key": key, "label": label, "text": text, "href": href, "title": title}

    return [
        figure("node_count", "Nodes", number(detail["node_count"]), nodes_url(pool)),
        figure("not_ready", "Not ready", number(not_ready), nodes_url(pool, status=ATTENTION),
               "Nodes that are not Ready, Unknown included"),
        figure("gpu_total", "GPU total", number(detail["gpu_total"]), nodes_url(pool, sort="-gpu_total"),
               "Capacity"),
        figure("gpu_used", "GPU used", number(detail["gpu_used"]), nodes_url(pool, sort="-gpu_used")),
        figure("gpu_free", "GPU free", number(detail["gpu_free"]), nodes_url(pool, status=READY, sort="-gpu_free"),
               "On Ready, uncordoned nodes: what new work can use now"),
        figure("gpu_free_not_ready", "GPU free, not ready", number(detail["gpu_free_not_ready"]),
               nodes_url(pool, status=ATTENTION, sort="-gpu_free"),
               "Free on nodes that are not Ready, Unknown or cordoned: not usable now"),
        figure("gpu_unhealthy", "GPU unhealthy", number(detail["gpu_unhealthy"]),
               nodes_url(pool, sort="-gpu_unhealthy"), "Capacity minus allocatable"),
        figure("cpu", "CPU cores requested",
               f"{number(round(detail['cpu_used']))} of {number(round(detail['cpu_total']))}",
               nodes_url(pool, sort="-cpu_used"), f"{cores(detail['cpu_used'])} of {cores(detail['cpu_total'])}"),
        figure("memory", "Memory requested", f"{size(detail['memory_used'])} of {size(detail['memory_total'])}",
               nodes_url(pool, sort="-memory_used")),
    ]


def live_context(request, pool, ctx: RowContext) -> dict:
    """The live region: figures, status and the platform table (whose CSV is this page's `?export=csv`, rows
    only: its totals row, the pool's own figures, is not in it)."""
    # Nodes are listed by the nodes table (scoped, paged); here only the figures.
    detail = usage.pool_detail(pool, nodes=Node.objects.none())
    rows, effective_error = platform_rows(pool, detail["platforms"])
    columns = preferences.chosen_columns(request, PLATFORMS)
    if wants_csv(request):
        return {"download": csv.response(PLATFORMS, columns, rows, ctx)}
    not_ready = NodeMembership.objects.filter(pool=pool).exclude(node__status=READY).count()
    status = detail["status"]
    return {
        "detail": detail,
        "figures": figures(pool, detail, not_ready),
        "status": status,
        "status_css": status_css(status),
        "platforms": Listing(PLATFORMS, path=request.path, query=QueryDict(), columns=columns, sort=Sort(None, False),
                             ctx=ctx, rows=rows, total=len(rows), live=False,
                             sums={key: detail[key] for key in POOL_TOTALS}, totals_label=POOL_TOTALS_LABEL,
                             empty_message=effective_error or "This pool has no platforms."),
        "effective_error": effective_error,
    }


def pool_context(request, pool) -> dict:
    """The whole page but the nodes table and the quotas."""
    now = timezone.now()
    ctx = RowContext(staff=access_for(request).is_staff, now=now)
    context = live_context(request, pool, ctx)
    if "download" in context:
        return context
    document = writes.export(ConfigKind.POOL, pool.name)["pools"][pool.name]
    revisions = visible_revisions(request).filter(kind=ConfigKind.POOL, name=pool.name).order_by("-number")
    points = snapshots.series([pool.name], now).get(pool.name, [])
    return {
        **context,
        "pool": pool,
        "engine": enforcement(pool, ctx.staff, now),
        "document": json.dumps(document, indent=2),
        "revisions": [(revision, diff_url(revision.kind, revision.number), moment(revision.created_at, now))
                      for revision in revisions[:RECENT_REVISIONS]],
        "history_url": reverse("pages:history") + "?" + urlencode({"type": "pool", "name": pool.name}),
        "chart": charts.gpu_chart(pool.name, points, now, snapshots.interval()),
    }
