"""`/usage/` (issue 27 point 3): GPU-hours over a period grouped by department, project, user, pool or
platform, against capacity and deserved quota, with a stacked chart, the top consumers, fair share in
hindsight (starved hours) and a totals row; `?export=csv` downloads exactly the table (totals row last),
through the site's CSV writer (formula-escaped cells). Live: the region re-reads itself every 60 s.
Rows come from `reports.report` with the viewer's `Scope`."""

from datetime import timedelta
from functools import cache

from django import forms
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from pools.access.scoping import access_required
from pools.pages import csv
from pools.pages.listing import Listing, order_rows, parse_sort
from pools.pages.responses import respond, wants_csv
from pools.pages.tables import Column, RowContext, Table
from scheduling.usage import chart, reports, source
from scheduling.usage.params import GROUPS, PERIOD_CHOICES, ParamError, parse

GROUP_LABELS = {"department": "Department", "project": "Project", "user": "User", "pool": "Pool",
                "platform": "Pool/platform", "kind": "Kind"}
PERIOD_LABELS = {"24h": "Last 24 hours", "7d": "Last 7 days", "30d": "Last 30 days", "month": "A month",
                 "range": "From\u2013to"}
REGION = "usage-region"


def _get(name: str):
    return lambda row, ctx: row[name]


def _figure(key: str, label: str, help: str = "", unit: str = "", phone: bool = False) -> Column:
    return Column(key, label, _get(key), kind="number", sort=(key,), unit=unit, help=help, phone=phone)


@cache
def table(group_by: str) -> Table:
    return Table("usage", "Usage", key=lambda row: row["group"], default_sort="-gpu_hours", columns=(
        Column("group", GROUP_LABELS[group_by], lambda row, ctx: row["group"] or "(none)", sort=("group",),
               phone=True),
        _figure("gpu_hours", "GPU-hours", "GPUs held by pods, bound to finished", "GPU-hours", phone=True),
        _figure("capacity_share_percent", "Share of capacity", "GPU-hours over the capacity-hours (GPUs on Ready "
                "nodes) of the pools in view", "%"),
        _figure("deserved_hours", "Deserved", "Deserved GPUs (project quotas) times hours", "GPU-hours"),
        _figure("used_of_deserved_percent", "Used of deserved", "GPU-hours over deserved GPU-hours", "%"),
        _figure("borrowed_hours", "Borrowed", "GPU-hours above deserved, low-priority work first", "GPU-hours"),
        _figure("preempted_hours", "Preempted", "GPU-hours of attempts that were preempted", "GPU-hours"),
        _figure("pending_hours", "Pending", "Hours with work pending (waiting workloads, by their project)", "hours"),
        _figure("starved_hours", "Starved", "Hours with work pending while under the deserved quota", "hours"),
        _figure("cpu_core_hours", "CPU core-hours", unit="core-hours"),
        _figure("memory_gib_hours", "Memory GiB-hours", unit="GiB-hours"),
        Column("gpu_util_percent", "GPU util %", _get("gpu_util_percent"), kind="measured",
               sort=("gpu_util_percent",), unit="%", help="Average GPU utilization (DCGM) weighted by GPU-seconds, "
               "over the GPU-seconds that were measured"),
    ))


class UsageForm(forms.Form):
    period = forms.ChoiceField(choices=[(key, PERIOD_LABELS[key]) for key in PERIOD_CHOICES], required=False)
    month = forms.CharField(required=False, max_length=7, widget=forms.TextInput(attrs={"type": "month"}))
    start = forms.CharField(required=False, max_length=32, label="From",
                            widget=forms.TextInput(attrs={"type": "date"}))
    end = forms.CharField(required=False, max_length=32, label="To", widget=forms.TextInput(attrs={"type": "date"}))
    group_by = forms.ChoiceField(choices=[(key, GROUP_LABELS[key]) for key in GROUPS], required=False,
                                 label="Group by")
    pool = forms.CharField(required=False, max_length=64)
    project = forms.CharField(required=False, max_length=64)

    FIELD_NAMES = {"from": "start", "to": "end"}

    def __init__(self, data, now):
        super().__init__(data)
        self.now = now
        self.params = None

    def clean(self):
        data = super().clean()
        query = {key: data.get(self.FIELD_NAMES.get(key, key)) or "" for key in
                 ("period", "month", "from", "to", "group_by", "pool", "project")}
        try:
            self.params = parse(query, self.now, max_days=settings.OSMO_USAGE_MAX_DAYS)
        except ParamError as exc:
            self.add_error(self.FIELD_NAMES.get(exc.field, exc.field)
                           if exc.field != "period" or "period" in self.fields else None, exc.message)
        return data


def _query(request) -> dict:
    """The page's own field names (`start`/`end`, as HTML ids) or the API's (`from`/`to`)."""
    query = request.GET.copy()
    for api, own in UsageForm.FIELD_NAMES.items():
        if api in query and own not in query:
            query[own] = query[api]
    return query


def csv_rows(result: reports.Report) -> list[dict]:
    return [*result.rows, result.totals]


@access_required()
def usage_page(request):
    now = timezone.now()
    form = UsageForm(_query(request), now)
    context = {"form": form, "nav": "usage", "period_labels": PERIOD_LABELS}
    if not form.is_valid():
        response = respond(request, "usage/usage.html", {**context, "listing": None},
                           {REGION: "usage/_region.html"})
        response.status_code = 400
        return response
    params = form.params
    # The form shows the period and grouping as resolved (a month alone means period=month), so that changing
    # another field keeps them.
    form.data = form.data.copy()
    form.data["period"], form.data["group_by"] = params.period, params.group_by
    result = reports.report(params, reports.scope_for(request), chart=not wants_csv(request))
    usage_table = table(params.group_by)
    ctx = RowContext(None, request.user.is_staff, now)
    sort = parse_sort(usage_table, request.GET.get("sort"))
    columns = usage_table.default_columns
    rows = order_rows(result.rows, sort, ctx)
    if wants_csv(request):
        return csv.response(usage_table, columns, [*rows, result.totals], ctx)
    listing = Listing(usage_table, path=reverse("usage:page"), query=request.GET, columns=columns, sort=sort,
                      ctx=ctx, rows=rows, total=len(rows), live=False,
                      sums={key: value for key, value in result.totals.items() if key != "group"},
                      totals_label="Total",
                      empty_message="No usage in this period." if request.user.is_staff else
                      "No usage of your projects or yours in this period.")
    steps = result.chart.get("steps", [])
    daily = params.end - params.start > timedelta(days=2)
    labels = [step.strftime("%m-%d" if daily else "%H:00") for step in steps]
    svg = chart.stacked_bars(labels, result.chart.get("names", []), result.chart.get("values", []),
                             title=f"GPU-hours by {params.group_by}, per {'day' if daily else 'hour'}")
    # The chart's SVG is escaped in chart.stacked_bars.
    context.update({"listing": listing, "report": result, "chart": mark_safe(svg),
                    "util_source": source.kind(), "params": params,
                    "starved": [row for row in result.rows if row.get("starved_hours")]})
    return respond(request, "usage/usage.html", context, {REGION: "usage/_region.html",
                                                           listing.dom_id: "pages/_table.html"})
