"""The pages. Each URL serves the whole page, or for an HTMX request only the fragment its target names
(the live table by default), with `Vary: HX-Request, HX-Target`; `?export=csv` downloads the table.
Every row comes from `Pool.objects.visible_to(request)` / `Node.objects.visible_to(request)`."""

from django.contrib import messages
from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.http import Http404, HttpResponseRedirect, JsonResponse, QueryDict
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from pools.access.scoping import Rule, access_required
from pools.fleet import usage
from pools.fleet.filters import NodeFilterSet, VisiblePools, gpu_types
from pools.inventory.status import READY, UNKNOWN
from pools.models import Node, NodeMembership, Pool
from pools.models.visibility import access_for
from pools.quotas.figures import gpu_guarantees

from . import charts, csv, formatting, preferences, snapshots
from .filters import PoolFilterForm
from .listing import PER_PAGE_CHOICES, Listing, database_sums, order_queryset, order_rows, paginate, parse_sort
from .pool_page import LIVE_REGION, live_context, pool_context
from .quota_pages import pool_quotas
from .responses import fragment_target, is_fragment, respond, wants_csv
from .tables import NODES, POOLS, TABLES, RowContext

NODE_TIE_BREAKERS = ("name", "backend__name", "pk")
CHARTS_INLINE = 12
TABLE_PAGES = {"nodes": "pages:nodes", "pools": "pages:overview", "revisions": "pages:history",
               "quotas": "pages:quotas", "projects": "pages:projects", "audit": "pages:audit"}
GUARANTEE_COLUMNS = ("gpu_guaranteed", "gpu_borrowed")
FLEET_REGION = "fleet-summary"


def row_context(request, *, nodes: bool = False) -> RowContext:
    """`nodes`: for rows of nodes, whose pool and platform names are redacted to the viewer's pools
    (`Access.visible_pool_names`; read once per request, and already read for the filters)."""
    access = access_for(request)
    return RowContext(access.visible_pool_names if nodes else None, access.is_staff, timezone.now())


# ---- nodes -----------------------------------------------------------------------------------------------

def node_listing(request, query: QueryDict, visible: VisiblePools, *, with_gpu_types: bool = True):
    """(form, listing, None) for the nodes table of `query` (filters, sort, page), or (form, None, the CSV
    response) when the request asks for the download."""
    nodes = Node.objects.visible_to(request)
    filters = NodeFilterSet(query, nodes, request=request, visible=visible,
                            gpu_types=gpu_types(nodes) if with_gpu_types else ())
    form = filters.form
    ctx = row_context(request, nodes=True)
    columns = preferences.chosen_columns(request, NODES)
    sort = parse_sort(NODES, query.get("sort"))
    selected = order_queryset(filters.qs, sort, NODE_TIE_BREAKERS)
    if wants_csv(request):
        return form, None, csv.queryset_response(NODES, columns, selected, ctx)
    selected = selected.values(*NODES.fields(columns))
    count, sums = database_sums(filters.qs, columns)
    page = paginate(selected, query, count)
    given = {name for name in form.fields if query.get(name)}
    if given == {"pool"} and form.is_valid():
        empty = f"No node is in pool {query['pool']} yet."
    elif given:
        empty = "No node matches these filters."
    else:
        empty = "No nodes yet: they appear once a backend is connected and synced."
    listing = Listing(NODES, path=reverse("pages:nodes"), query=query, columns=columns, sort=sort, ctx=ctx,
                      rows=page.object_list, total=page.paginator.count, page=page, empty_message=empty,
                      filtered=form.active, sums=sums)
    return form, listing, None


@access_required()
def nodes(request):
    visible = VisiblePools(request)
    # A fragment or a download needs no GPU-type menu: one query less on every live refresh.
    full_page = not is_fragment(request) and not wants_csv(request)
    form, listing, download = node_listing(request, request.GET, visible, with_gpu_types=full_page)
    if download:
        return download
    context = {"listing": listing, "form": form, "per_page_choices": PER_PAGE_CHOICES,
               "chooser": preferences.chooser(NODES, listing.columns), "nav": "nodes"}
    return respond(request, "pages/nodes.html", context, {listing.dom_id: "pages/_table.html"})


# ---- pool overview ---------------------------------------------------------------------------------------

GPU_TYPES_SHOWN = 6


def fleet_summary(nodes) -> dict:
    """Whole-fleet figures summed over distinct nodes (adding up the pool rows would count a node shared by
    two pools twice), and the GPU types with their figures: one GROUP BY GPU type, a handful of rows."""
    groups = list(nodes.order_by().values("gpu_product").annotate(
        nodes=Count("pk"),
        ready=Count("pk", filter=Q(status=READY)),
        unknown=Count("pk", filter=Q(status=UNKNOWN)),
        # The pool rows' own column map, so a fleet figure means exactly what a pool figure means.
        **{name: Sum(column) for name, column in usage._SUMS.items()},
        # Named apart from Node.gpu_free, which they sum.
        **{f"sum_{name}": value for name, value in usage.free_sums("").items()},
    ))
    for group in groups:
        for name in usage.FREE_FIGURES:
            group[name] = group.pop(f"sum_{name}") or 0
    figures = {name: sum(group[name] or 0 for group in groups)
               for name in ("nodes", "ready", "unknown", *usage._SUMS, *usage.FREE_FIGURES)}
    # Everything not Ready, Unknown included: what the nodes table's `attention` status lists.
    figures["not_ready"] = figures["nodes"] - figures["ready"]
    figures["cpu_total"] = usage.cores(figures["cpu_total"])
    figures["cpu_used"] = usage.cores(figures["cpu_used"])
    figures["gpu_types"] = sorted((group for group in groups if group["gpu_product"]),
                                  key=lambda group: (-group["gpu_total"], group["gpu_product"]))[:GPU_TYPES_SHOWN]
    return figures


def fleet_cards(figures: dict) -> dict:
    """The summary figures as the cards print them (`<name>_text`, `<name>_percent`): whole numbers, the
    unit beside them ("20,022 of 41,590 cores requested")."""
    cards = dict(figures)
    for name in ("nodes", "ready", "not_ready", "unknown", "gpu_total", "gpu_used", "gpu_free", "gpu_free_not_ready",
                 "gpu_unhealthy"):
        cards[f"{name}_text"] = formatting.number(figures[name])
    for name in ("cpu_total", "cpu_used"):
        cards[f"{name}_text"] = formatting.number(round(figures[name]))
    for name in ("memory_total", "memory_used"):
        cards[f"{name}_text"] = formatting.size(figures[name])
    for kind in ("gpu", "cpu", "memory"):
        cards[f"{kind}_used_percent"] = formatting.percent(figures[f"{kind}_used"], figures[f"{kind}_total"])
    nodes = reverse("pages:nodes")
    cards["gpu_types"] = [
        {"product": row["gpu_product"], "short": row["gpu_product"].removeprefix("NVIDIA-"),
         "free_text": formatting.number(row["gpu_free"]), "total_text": formatting.number(row["gpu_total"]),
         "href": f"{nodes}?{urlencode({'gpu': row['gpu_product'], 'sort': '-gpu_free'})}"}
        for row in figures["gpu_types"]]
    return cards


def pool_sums(figures: dict, rows: list[dict]) -> dict:
    """The pool table's totals row: node figures from `fleet_summary` (each node once), quota figures
    (per pool, by definition) added up."""
    sums = {"node_count": figures["nodes"], **{name: figures[name] for name in (*usage._SUMS, *usage.FREE_FIGURES)}}
    for name in GUARANTEE_COLUMNS:
        sums[name] = sum(row.get(name, 0) for row in rows)
    return sums


def pool_charts(rows, now) -> list[charts.Chart]:
    points = snapshots.series([row["name"] for row in rows], now)
    return [charts.gpu_chart(row["name"], points.get(row["name"], []), now, snapshots.interval(), frame=charts.SPARK)
            for row in rows]


@access_required()
def overview(request):
    form = PoolFilterForm(request.GET)
    ctx = row_context(request)
    rows = [row for row in usage.pool_rows(form.apply(Pool.objects.visible_to(request))) if form.keep(row)]
    sort = parse_sort(POOLS, request.GET.get("sort"))
    columns = preferences.chosen_columns(request, POOLS)
    wanted = {column.key for column in columns} | {sort.column.key if sort.column else ""}
    target = fragment_target(request)
    if target not in ("pool-charts", FLEET_REGION) and wanted & set(GUARANTEE_COLUMNS):
        # Every visible pool in one query, whatever their number.
        guarantees = gpu_guarantees([row["name"] for row in rows])
        for row in rows:
            row["gpu_guaranteed"], row["gpu_borrowed"] = guarantees.get(row["name"], (0, 0))
    rows = order_rows(rows, sort, ctx)
    if wants_csv(request):
        return csv.response(POOLS, columns, rows, ctx)
    empty = "No pool matches these filters." if form.active else "You may not use any pool yet."
    visible_nodes = Node.objects.visible_to(request)
    fleet = fleet_summary(visible_nodes) if not is_fragment(request) or target == FLEET_REGION else None
    sums = None
    if target in (None, "pools-table"):
        if form.active:
            # Over the nodes of the listed pools, each once: a node shared by two pools is in both rows.
            figures = fleet_summary(visible_nodes.filter(Exists(NodeMembership.objects.filter(
                node=OuterRef("pk"), pool__name__in=[row["name"] for row in rows]))))
        else:
            figures = fleet or fleet_summary(visible_nodes)
        sums = pool_sums(figures, rows)
    listing = Listing(POOLS, path=reverse("pages:overview"), query=request.GET, columns=columns, sort=sort,
                      ctx=ctx, rows=rows, total=len(rows), empty_message=empty, filtered=form.active, sums=sums)
    context = {"listing": listing, "form": form, "nav": "overview",
               "chooser": preferences.chooser(POOLS, columns),
               "guarantee_note": bool(wanted & set(GUARANTEE_COLUMNS))}
    # Past a dozen pools the charts follow the page in their own request (or, without JavaScript,
    # behind a link), so the table of a large fleet is not held up by its charts.
    inline = len(rows) <= CHARTS_INLINE or request.GET.get("charts") == "all"
    if target == "pool-charts" or (not is_fragment(request) and inline):
        context["charts"] = pool_charts(rows, ctx.now)
    context["charts_url"] = listing.link(charts="all") + "#pool-charts"
    if fleet is not None:
        context["fleet"] = fleet_cards(fleet)
        context["pool_statuses"] = {status: sum(row["status"] == status for row in rows)
                                    for status in usage.POOL_STATUSES}
    return respond(request, "pages/overview.html", context,
                   {listing.dom_id: "pages/_table.html", "pool-charts": "pages/_charts.html",
                    FLEET_REGION: "pages/_fleet.html"})


# ---- describe pool ---------------------------------------------------------------------------------------

@access_required()
def pool_detail(request, name: str):
    """The page; for HTMX the nodes table, or the live figures and platforms (`pool-live`), each alone."""
    pool = get_object_or_404(Pool.objects.visible_to(request).select_related("backend"), name=name)
    target = fragment_target(request)
    if target == LIVE_REGION:
        context = {"pool": pool, "refresh": True, **live_context(request, pool, row_context(request))}
        return respond(request, "pages/pool.html", context, {LIVE_REGION: "pages/_pool_live.html"})
    context = {} if is_fragment(request) else pool_context(request, pool)
    if wants_csv(request):
        return context["download"]
    query = QueryDict(mutable=True)
    query["pool"] = pool.name
    _form, listing, _ = node_listing(request, query, VisiblePools(request), with_gpu_types=False)
    context.update(listing=listing, nav="overview")
    if not is_fragment(request):
        context["pool_quota"] = pool_quotas(request, pool)
    return respond(request, "pages/pool.html", context, {listing.dom_id: "pages/_table.html"})


# ---- column chooser --------------------------------------------------------------------------------------

@access_required(write=Rule.SIGNED_IN)
@require_POST
def choose_columns(request, table: str):
    table = TABLES.get(table)
    if table is None:
        raise Http404("No such table")
    if "reset" in request.POST:
        preferences.reset(request.user, table)
        messages.success(request, f"{table.title}: default columns restored.")
        return HttpResponseRedirect(_back(request, table))
    checked = request.POST.getlist("columns")
    move = request.POST.get("move", "")
    if not move:
        columns = preferences.save(request.user, table, checked)
        messages.success(request, f"{table.title}: showing {len(columns)} columns.")
        return HttpResponseRedirect(_back(request, table))
    # A move button: every column in the chooser's order (`order`), one moved, and the ticked ones saved in
    # that order; the chooser opens again on the page (the message's tag says which) for the next move.
    key, _, direction = move.partition(":")
    order = [name for name in request.POST.getlist("order") if name in table.by_key]
    if key not in order or direction not in ("up", "down"):
        return JsonResponse({"detail": "move must be a column of the form and up or down, as `node:up`",
                             "field": "move"}, status=400)
    order = preferences.moved(order, key, direction)
    columns = preferences.save(request.user, table, [name for name in order if name in set(checked)])
    messages.success(request, f"{table.title}: {table.by_key[key].label} moved {direction}; showing "
                              f"{len(columns)} columns.", extra_tags=f"chooser-{table.name}")
    return HttpResponseRedirect(_back(request, table))


def _back(request, table) -> str:
    """Where the chooser was opened, without `cols=` (which would hide the choice just saved)."""
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        return reverse(TABLE_PAGES.get(table.name, "pages:overview"))
    path, _, query = target.partition("?")
    params = QueryDict(query, mutable=True)
    params.pop("cols", None)
    return f"{path}?{params.urlencode()}" if params else path
