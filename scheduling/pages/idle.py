"""`/workloads/idle/`: running workloads holding GPUs that stayed under OSMO_IDLE_GPU_PERCENT for
OSMO_IDLE_GPU_MINUTES (scheduling.run.utilization.idle), longest idle first, with CSV. Scoped like every workload
list (`Workload.objects.visible_to`: staff all, others their projects' and their own). Without
OSMO_PROMETHEUS_URL it says "not measured". (A page module: it moves to scheduling/pages/ with the rest.)"""

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from pools.access.scoping import access_required
from pools.models.visibility import access_for
from pools.pages import csv, preferences
from pools.pages.listing import PER_PAGE_CHOICES, Listing, order_queryset, paginate, parse_sort
from pools.pages.responses import respond, wants_csv
from pools.pages.tables import Column, RowContext, Table
from scheduling.listing import bodies
from scheduling.models import Workload
from scheduling.run import utilization


def _get(name: str):
    return lambda row, ctx: row[name]


def _percent(name: str):
    return lambda row, ctx: "" if row[name] is None else f"{row[name]:.1f}"


IDLE = Table("idle-workloads", "Idle GPUs", key=lambda row: row["id"], default_sort="idle", columns=(
    Column("name", "Name", _get("name"), sort=("name",), phone=True,
           href=lambda row, ctx: reverse("workloads:detail", args=[row["id"]])),
    Column("project", "Project", _get("project"), sort=("project__name",),
           href=lambda row, ctx: reverse("pages:project", args=[row["project"]])),
    Column("user", "Submitter", _get("submitter"), sort=("submitter_name",)),
    Column("pool", "Pool", lambda row, ctx: row["pool"] or "", sort=("pool__name",),
           href=lambda row, ctx: reverse("pages:pool", args=[row["pool"]]) if row["pool"] else ""),
    Column("gpus", "GPUs", _get("gpus"), kind="number", summable=True, phone=True, help="All replicas together"),
    Column("average", "Average GPU utilization", _percent("average_percent"), unit="%",
           sort=("utilization__average",), help="Over the last few minutes (OSMO_UTILIZATION_WINDOW_MINUTES)"),
    Column("peak", "Peak", _percent("peak_percent"), unit="%", sort=("utilization__peak",),
           help="The highest figure of any of its GPUs over the idle window"),
    Column("idle", "Idle since", _get("idle_since"), kind="time", sort=("utilization__idle_since",), phone=True,
           help="Every GPU under the threshold since then (at least)"),
    Column("measured", "Measured", _get("measured_at"), kind="time", default=False),
    Column("id", "ID", _get("id"), default=False),
))


@access_required()
def idle_list(request):
    access = access_for(request)
    now = timezone.now()
    ctx = RowContext(access.visible_pool_names, access.is_staff, now)
    sort = parse_sort(IDLE, request.GET.get("sort"))
    columns = preferences.chosen_columns(request, IDLE)
    rows = order_queryset(utilization.idle(Workload.objects.visible_to(request).light(), now), sort,
                          ("utilization__idle_since", "id"))
    if wants_csv(request):
        return csv.response(IDLE, columns, (bodies.idle_row(w, access, now) for w in rows.iterator(
            chunk_size=1000)), ctx)
    page = paginate(rows, request.GET)
    measured = bool(settings.OSMO_PROMETHEUS_URL)
    listing = Listing(IDLE, path=reverse("workloads:idle"), query=request.GET, columns=columns, sort=sort, ctx=ctx,
                      rows=[bodies.idle_row(w, access, now) for w in page.object_list],
                      total=page.paginator.count, page=page,
                      empty_message="No idle workload: every running workload's GPUs are busy." if measured else
                      "GPU utilization is not measured: set OSMO_PROMETHEUS_URL (README \"GPU utilization\").")
    context = {"listing": listing, "nav": "workloads", "per_page_choices": PER_PAGE_CHOICES, "measured": measured,
               "idle_percent": settings.OSMO_IDLE_GPU_PERCENT, "idle_minutes": settings.OSMO_IDLE_GPU_MINUTES}
    return respond(request, "workloads/idle.html", context, {listing.dom_id: "pages/_table.html"})
