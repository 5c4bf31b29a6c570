"""The workload pages: `/workloads/` (a live table with filters, totals and CSV), `/workloads/<id>/` (status,
reasons per pool with queue positions, events, pod templates), the cancel button (POST with the CSRF token;
the submitter and staff), and `/workloads/queue/?pool=P` or `?project=N`, the queue fragment the pool and
project pages load.

Scoping: rows come from `Workload.objects.visible_to` (staff: all; others: their projects' and their own)
and every cell from `bodies.row`, which leaves out the names of pools the viewer may not see.
"""

import json
from datetime import datetime

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Count, F, IntegerField, Q, Sum, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from django.http import Http404, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from pools.access.scoping import Rule, access_required
from pools.fleet.filters import FilterForm
from pools.models import Pool, Project
from pools.models.visibility import access_for
from pools.pages import csv, formatting, preferences
from pools.pages.listing import PER_PAGE_CHOICES, Listing, order_queryset, paginate, parse_sort
from pools.pages.responses import respond, wants_csv
from pools.pages.tables import Column, RowContext, Table
from scheduling.decisions.positions import first_position
from scheduling.listing import bodies
from scheduling.listing.filters import WorkloadFilterSet
from scheduling.models import ALIVE, RESERVING, Kind, Priority, Status, Workload
from scheduling.run import estimates, utilization
from scheduling.submit import submission

QUEUE_ROWS = 25


def _get(name: str):
    return lambda row, ctx: row[name]


def _detail_url(row, ctx) -> str:
    return reverse("workloads:detail", args=[row["id"]])


def _pool_url(name: str) -> str:
    return reverse("pages:pool", args=[name])


def _reason(row, ctx) -> str:
    reason = row["reason"]
    return f"{reason['code']}: {reason['message']}" if reason else ""


WORKLOADS = Table("workloads", "Workloads", key=lambda row: row["id"], default_sort="-submitted", columns=(
    Column("name", "Name", _get("name"), sort=("name",), href=_detail_url, phone=True),
    Column("project", "Project", _get("project"), sort=("project__name",),
           href=lambda row, ctx: reverse("pages:project", args=[row["project"]])),
    Column("user", "Submitter", _get("submitter"), sort=("submitter_name",)),
    Column("status", "Status", _get("status"), kind="status", sort=("status",), phone=True),
    Column("priority", "Priority", _get("priority"), sort=("priority_rank",),
           help="high and normal are guaranteed within deserved quota; low may borrow and be preempted"),
    Column("pool", "Pool", lambda row, ctx: row["pool"] or "", sort=("pool__name",),
           href=lambda row, ctx: _pool_url(row["pool"]) if row["pool"] else "", help="Where it was admitted"),
    Column("pools", "Candidate pools", _get("pools"), kind="list", item_href=_pool_url, help="Tried in this order"),
    Column("replicas", "Replicas", _get("replicas"), kind="number", sort=("replicas",)),
    Column("gpu", "GPUs", lambda row, ctx: row["gpu"] * row["replicas"], kind="number", sort=("gpu_total",),
           help="All replicas together", phone=True),
    Column("cpu", "CPU per replica", _get("cpu"), kind="cores", unit="cores", default=False),
    Column("memory", "Memory per replica", _get("memory"), kind="bytes", unit="bytes", default=False),
    Column("position", "Position", _get("position"), kind="number",
           help="In the queue of its first candidate pool, while pending"),
    Column("start", "Expected start", lambda row, ctx: bodies.expected_start(row),
           title=lambda row: row["estimate_basis"],
           help="An estimate, while pending: from the running work's exec timeouts and the pool's recent run times; "
                "hover for its basis"),
    Column("reason", "Why pending", _reason, help="The first candidate pool's reason; every pool's on the page",
           phone=True),  # a phone shows it in the row, under the key columns (site.css)
    Column("submitted", "Submitted", _get("submitted_at"), kind="time", sort=("submitted_at",)),
    Column("admitted", "Admitted", _get("admitted_at"), kind="time", sort=("admitted_at",), default=False),
    Column("source", "Source", _get("source"), sort=("source",), default=False),
    Column("kind", "Kind", _get("kind"), sort=("kind",), default=False),
    Column("workflow", "Workflow", _get("workflow"), sort=("workflow",), default=False),
    Column("id", "ID", _get("id"), default=False),
))


class WorkloadFilterForm(FilterForm):
    q = forms.CharField(label="Search", required=False, max_length=100,
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "Name, workflow or ID"}))
    pool = forms.ChoiceField(label="Pool", required=False)
    project = forms.ChoiceField(label="Project", required=False)
    status = forms.ChoiceField(label="Status", required=False,
                               choices=[("", "Any status"), ("alive", "Pending or running"), *Status.choices])
    user = forms.CharField(label="Submitter", required=False, max_length=150)
    priority = forms.ChoiceField(label="Priority", required=False, choices=[("", "Any priority"),
                                                                           *Priority.choices])
    kind = forms.ChoiceField(label="Kind", required=False, choices=[("", "Any kind"), *Kind.choices])

    def __init__(self, data, *, request):
        super().__init__(data)
        self.fields["pool"].choices = [("", "All pools"), *((name, name) for name in
                                       Pool.objects.visible_to(request).order_by("name")
                                       .values_list("name", flat=True))]
        self.fields["project"].choices = [("", "All projects"), *((name, name) for name in
                                          Project.objects.visible_to(request).order_by("name")
                                          .values_list("name", flat=True))]


def _scoped(request):
    return (Workload.objects.visible_to(request).select_related("project", "pool")
            .annotate(gpu_total=F("gpu") * F("replicas"),
                      priority_rank=Case(When(priority=Priority.HIGH, then=0), When(priority=Priority.NORMAL, then=1),
                                         default=2)))


def filtered(request, query):
    """The visible workloads matching the filter bar (the FilterSet the API uses), and the bound form."""
    form = WorkloadFilterForm(query, request=request)
    rows = _scoped(request)
    if not form.is_valid():
        return form, rows.none()
    data = QueryDict(mutable=True)
    for name, value in form.cleaned_data.items():
        if value:
            data.setlist(name, list(ALIVE) if value == "alive" else [value])  # `alive`: several statuses
    rows = WorkloadFilterSet(data, queryset=rows, request=request).qs
    return form, rows


def totals(rows) -> str:
    """Over every filtered row, not the page: "12 workloads: 5 pending (14 GPUs), 7 admitted or running
    (20 GPUs)"."""
    figures = rows.order_by().aggregate(
        count=Count("pk"),
        pending=Count("pk", filter=Q(status=Status.PENDING)),
        pending_gpu=Coalesce(Sum(F("gpu") * F("replicas"), filter=Q(status=Status.PENDING)), 0),
        holding=Count("pk", filter=Q(status__in=RESERVING)),
        holding_gpu=Coalesce(Sum(F("gpu") * F("replicas"), filter=Q(status__in=RESERVING)),
                             0))
    n = formatting.number
    return (f"{n(figures['count'])} workload{'' if figures['count'] == 1 else 's'}: "
            f"{n(figures['pending'])} pending ({n(figures['pending_gpu'])} GPUs), "
            f"{n(figures['holding'])} admitted or running ({n(figures['holding_gpu'])} GPUs)")


def _context(request) -> RowContext:
    access = access_for(request)
    return RowContext(access.visible_pool_names, access.is_staff, timezone.now())


def _rows(workloads, access, now, chunk: int = 2000):
    """`bodies.row` of each workload with its start estimate, the estimates' inputs read once per `chunk` rows."""
    batch = []
    for workload in workloads:
        batch.append(workload)
        if len(batch) >= chunk:
            yield from _batch(batch, access, now)
            batch = []
    yield from _batch(batch, access, now)


def _batch(workloads, access, now):
    forecasts = estimates.forecasts(workloads, now)
    return [bodies.row(w, access, forecasts.get(str(w.id))) for w in workloads]


@access_required()
def workload_list(request):
    form, rows = filtered(request, request.GET)
    access = access_for(request)
    ctx = _context(request)
    sort = parse_sort(WORKLOADS, request.GET.get("sort"))
    columns = preferences.chosen_columns(request, WORKLOADS)
    rows = order_queryset(rows.light(), sort, ("-submitted_at", "id"))
    if wants_csv(request):
        return csv.response(WORKLOADS, columns, _rows(rows.iterator(chunk_size=2000), access, ctx.now), ctx)
    page = paginate(rows, request.GET)
    listing = Listing(WORKLOADS, path=reverse("workloads:list"), query=request.GET, columns=columns, sort=sort,
                      ctx=ctx, rows=list(_rows(page.object_list, access, ctx.now)), total=page.paginator.count,
                      page=page, filtered=form.active, totals=totals(rows),
                      empty_message="No workload matches these filters." if form.active else
                      "No workloads yet: submit one with POST /api/workloads/, the OSMO workflow path or "
                      "./manage.py workload submit.")
    context = {"listing": listing, "form": form, "nav": "workloads", "per_page_choices": PER_PAGE_CHOICES}
    return respond(request, "workloads/list.html", context, {listing.dom_id: "pages/_table.html"})


def _visible_workload(request, pk) -> Workload:
    workload = _scoped(request).select_related("project__department").filter(pk=pk).first()
    if workload is None:
        raise Http404("No such workload, or it is not yours to see.")
    return workload


def may_cancel(access, workload: Workload) -> bool:
    return workload.alive and (access.is_staff or (access.user is not None and workload.submitter_id == access.user.pk))


# Work that holds capacity or may have pods: its cancel asks for a confirmation first.
DISPATCHED = (Status.ADMITTED, Status.SCHEDULING, Status.RUNNING, Status.PREEMPTING)


@access_required()
def workload_detail(request, pk):
    workload = _visible_workload(request, pk)
    access = access_for(request)
    body = bodies.detail(workload, access)
    positions = body["positions"]
    reasons = [{**reason, "position": positions.get(reason.get("pool"))} for reason in body["reasons"]]
    # Earlier attempts only: a finished workload's own (current) attempt is the Job section above them.
    attempts = [{**item, "finished_at": datetime.fromisoformat(item["finished_at"])} for item in body["attempts"]
                if item["attempt"] < body["attempt"]]
    context = {"workload": workload, "body": body, "reasons": reasons, "attempts": attempts, "nav": "workloads",
               "may_cancel": may_cancel(access, workload), "dispatched": workload.status in DISPATCHED,
               "utilization": utilization.body(workload),
               "templates": [(pool, json.dumps(value, indent=2)) for pool, value in body["pod_templates"].items()]}
    return respond(request, "workloads/detail.html", context, {"workload-live": "workloads/_live.html"})


@require_POST
@access_required(write=Rule.SIGNED_IN)
def workload_cancel(request, pk):
    workload = _visible_workload(request, pk)
    if workload.status in DISPATCHED and request.POST.get("confirm") != "yes":
        # The box is `required`, so a browser never sends this; a scripted POST is told what is missing.
        messages.error(request, f"Workload {workload.name} is {workload.status}: tick the confirmation to stop it "
                                "(its Job and pods are deleted). Nothing was canceled.")
        return HttpResponseRedirect(reverse("workloads:detail", args=[workload.pk]))
    try:
        canceled = submission.cancel(request, workload, str(request.POST.get("message", ""))[:500])
    except PermissionError as exc:
        raise PermissionDenied(str(exc)) from None
    workload.refresh_from_db(fields=["stop_status", "job_name", "namespace", "status"])
    if canceled and workload.stop_status:
        messages.success(request, f"Workload {workload.name}: cancel requested; its Job {workload.namespace}/"
                                  f"{workload.job_name} is being deleted, then it ends FAILED_CANCELED.")
    elif canceled:
        messages.success(request, f"Workload {workload.name} canceled.")
    else:
        messages.info(request, f"Workload {workload.name} had already ended ({workload.status}).")
    return HttpResponseRedirect(reverse("workloads:detail", args=[workload.pk]))


@access_required()
def queue(request):
    """A pool's or a project's queue: what is pending there in queue order, then what holds capacity."""
    access = access_for(request)
    pool_name, project_name = request.GET.get("pool", ""), request.GET.get("project", "")
    rows = _scoped(request).light()
    if pool_name:
        if not Pool.objects.visible_to(request).filter(name=pool_name).exists():
            raise Http404("No such pool")
        in_pool = WorkloadFilterSet({"pool": pool_name}, queryset=rows, request=request).qs
        pending = (in_pool.filter(status=Status.PENDING)
                   .annotate(position=Cast(KeyTextTransform(pool_name, "positions"), IntegerField()))
                   .order_by(F("position").asc(nulls_last=True), "submitted_at"))
        holding = rows.filter(pool__name=pool_name, status__in=RESERVING)
        link = f"{reverse('workloads:list')}?pool={pool_name}&status=alive"
    elif project_name:
        if not Project.objects.visible_to(request).filter(name=project_name).exists():
            raise Http404("No such project")
        in_project = rows.filter(project__name=project_name)
        pending = in_project.filter(status=Status.PENDING).order_by("submitted_at")
        holding = in_project.filter(status__in=RESERVING)
        link = f"{reverse('workloads:list')}?project={project_name}&status=alive"
    else:
        raise Http404("Name a pool or a project")
    shown_pending = []
    now = timezone.now()
    first = list(pending[:QUEUE_ROWS])
    forecasts = estimates.forecasts(first, now)
    for workload in first:
        forecast = forecasts.get(str(workload.id))
        row = bodies.row(workload, access, forecast)
        if pool_name:  # this pool's position, reason and estimate, not the first candidate's
            here = next((e for e in (forecast.pools if forecast else ()) if e.pool == pool_name), None)
            if here is not None:
                row["estimate_basis"] = here.basis
            row["position"] = row["positions"].get(pool_name)
            row["reason"] = next((r for r in workload.reasons or [] if r.get("pool") == pool_name), row["reason"])
        else:  # the same number as the workload's page and the API, with the pool it is in
            row["position_pool"] = first_position(row["positions"])[0]
        shown_pending.append(row)
    context = {"pending": shown_pending, "pending_count": pending.count(),
               "holding": [bodies.row(w, access) for w in holding.order_by("-admitted_at")[:QUEUE_ROWS]],
               "holding_count": holding.count(), "link": link, "pool": pool_name, "project": project_name,
               "now": now, "max_rows": QUEUE_ROWS}
    return render(request, "workloads/_queue.html", context)
