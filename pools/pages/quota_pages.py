"""`/quotas/`, `/projects/`, `/projects/<name>/`, the quota section of a pool's page, and the one-cell quota
edit that staff make on them.

Scoping: pools come from `Pool.objects.visible_to`, projects from `Project.objects.visible_to`. Staff see
every department (its own row, then its projects); everyone else sees only the rows of their own projects,
with the same fair shares staff see (they are always computed over every project of a pool).
"""

from dataclasses import dataclass, field
from decimal import Decimal

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Exists, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import Http404, HttpResponse, HttpResponseRedirect, QueryDict
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from pools.access.scoping import Rule, access_required
from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.engine.kube_names import dns_label
from pools.models import Backend, ConfigKind, Department, NodeMembership, Pod, Pool, Project, ProjectMember, Quota
from pools.models.visibility import access_for
from pools.quotas import edits, onboarding
from pools.quotas.fairshare import Resource
from pools.quotas.figures import RESOURCES, PoolTable, gpu_guarantees, quota_tables
from pools.quotas.projects import default_pools, memberships

from . import csv, formatting, preferences, quota_html
from .filters import FilterForm
from .listing import PER_PAGE_CHOICES, Listing, Sort, order_queryset, paginate, parse_sort
from .responses import respond, wants_csv
from .tables import MEMBERS, PROJECTS, QUOTA_IDENTITY, QUOTA_SHARED, QUOTAS, Column, RowContext

POOLS_PER_PAGE = (5, 10, 25, 50, 100)
DEFAULT_POOLS_PER_PAGE = 10
QUOTAS_CHANGED = "quotas-changed"  # the event a saved cell sends; quota regions refresh on it
# What a quota table's totals row sums, per resource. Limits and weights are left blank: a sum of limits means
# nothing when some are "none".
SUMMED_FIGURES = ("deserved", "allocated", "pending", "fair_share", "over_quota")
POOL_TOTAL = "Pool total"


def row_context(request) -> RowContext:
    staff = access_for(request).is_staff
    visible = None if staff else frozenset(Pool.objects.visible_to(request).values_list("name", flat=True))
    return RowContext(visible, staff, timezone.now())


# ---- rows ------------------------------------------------------------------------------------------------

def _figure(resource: Resource, value):
    """Figures as the tables format them: GPUs and cores as Decimals, memory in bytes; -1 (no limit) kept."""
    if value is None or value == -1 or resource == Resource.MEMORY:
        return value
    number = Decimal(str(value))
    return number.quantize(Decimal(1)) if number == number.to_integral_value() else number.normalize()


def flat_rows(table: PoolTable) -> list[dict]:
    rows = []
    for unit in table.rows:
        row = {"pool": unit.pool, "department": unit.department, "project": unit.project,
               "shared_usage": unit.shared_usage}
        for resource in RESOURCES:
            figures = unit.figures[resource]
            for key in ("deserved", "limit", "allocated", "pending", "fair_share", "over_quota"):
                row[f"{resource.value}_{key}"] = _figure(resource, figures[key])
            row[f"{resource.value}_weight"] = figures["over_quota_weight"]
        row["starved"] = unit.figures[Resource.GPU]["starved"]
        rows.append(row)
    return rows


def quota_sums(rows: list[dict], columns: list[Column], *, leave_out: tuple[str, ...] = ()) -> dict:
    """The totals row of quota rows: for each shown column of SUMMED_FIGURES, the sum over the department
    rows (a department's row already holds its projects: its allocated is theirs, its fair share is what its
    projects share, its deserved its own quota or else theirs), plus every project row shown without its
    department's row (a member's rows, a search that matched a project and not its department): nothing shown
    is counted twice, nothing shown is left out, and nothing the viewer does not see is summed. The columns of
    the figures in `leave_out` ("allocated", "over_quota") are left blank."""
    departments = {(row["pool"], row["department"]) for row in rows if row["project"] is None}
    counted = [row for row in rows if row["project"] is None or (row["pool"], row["department"]) not in departments]
    sums = {}
    for column in columns:
        resource, _, figure = column.key.partition("_")
        if figure in SUMMED_FIGURES and figure not in leave_out:
            sums[column.key] = _figure(Resource(resource), sum((row[column.key] or 0 for row in counted), 0))
    return sums


def _amount(resource: Resource, value) -> str:
    if resource == Resource.GPU:
        return f"{formatting.number(_figure(resource, value))} GPU{'' if value == 1 else 's'}"
    if resource == Resource.CPU:
        return f"{formatting.cores(_figure(resource, value))} cores"
    return formatting.size(value)


@dataclass(frozen=True)
class Enforcement:
    """Who enforces a pool's quotas: our admission, or the engine of its backend (docs/admin/engines.md).
    `state` (the last reconcile of the engine's objects, or its failure) is filled for staff only."""

    text: str
    state: str = ""
    when: dict | None = None  # formatting.moment of the last good reconcile
    failing: bool = False


def enforcement(pool: Pool, staff: bool, now=None) -> Enforcement:
    """`pool.backend` should be selected with the pool."""
    backend = pool.backend
    if backend.scheduler == Backend.Scheduler.KAI:
        prefix = dns_label(pool.name)  # the pool's part of its queue names, as KAI has it
        text = f"Enforced by KAI Scheduler (Queues {prefix}.<department> and {prefix}.<department>.<project>)"
    elif backend.scheduler == Backend.Scheduler.KUEUE:
        text = "Enforced by Kueue (ClusterQueues <project> in Cohorts <department>)"
    else:
        return Enforcement("Enforced by our admission")
    if not staff:
        return Enforcement(text)
    if backend.engine_error:
        return Enforcement(text, f"last reconcile of its objects failed: {backend.engine_error}", failing=True)
    if backend.engine_reconciled_at is None:
        return Enforcement(text, "its objects are not reconciled yet")
    return Enforcement(text, "objects reconciled", formatting.moment(backend.engine_reconciled_at, now))


@dataclass
class Section:
    """One pool's quota table with its pool-wide figures."""

    pool: str
    capacity: str
    over_subscribed: list[str]  # "6 GPUs", per resource over-subscribed
    guaranteed: Decimal
    borrowed: Decimal
    rows: list[dict]
    html: list[SafeString] = field(default_factory=list)
    totals: SafeString = field(default_factory=SafeString)  # its totals row (`quota_sums`), "Pool total"
    engine: Enforcement | None = None


def section(table: PoolTable, rows: list[dict], guarantees: dict) -> Section:
    within, borrowed = guarantees.get(table.pool, (Decimal(0), Decimal(0)))
    return Section(
        pool=table.pool,
        capacity=", ".join(_amount(r, table.capacity[r]) for r in RESOURCES),
        over_subscribed=[_amount(r, table.over_subscribed_by[r]) + ("" if r == Resource.GPU else f" of {r.value}")
                         for r in RESOURCES if table.over_subscribed_by[r]],
        guaranteed=within, borrowed=borrowed, rows=rows)


def editing(request) -> quota_html.Editing | None:
    if not access_for(request).is_staff:
        return None
    pool_projects = frozenset(Project.objects.filter(pool__isnull=False).values_list("name", flat=True))
    return quota_html.Editing(reverse("pages:quota-edit"), get_token(request), pool_projects)


def _project_url(name: str) -> str:
    return reverse("pages:project", args=[name])


def render_rows(rows: list[dict], columns: list[Column], ctx: RowContext, edit) -> list[SafeString]:
    project_url = _cached(_project_url)
    return [quota_html.row(QUOTAS.key(row), row, columns, ctx, edit, project_url) for row in rows]


def _cached(function):
    cache = {}

    def cached(name):
        if name not in cache:
            cache[name] = function(name)
        return cache[name]
    return cached


# ---- /quotas/ --------------------------------------------------------------------------------------------

class QuotaFilterForm(FilterForm):
    q = forms.CharField(label="Search", required=False, max_length=200, widget=forms.TextInput(
        attrs={"type": "search", "placeholder": "Department or project", "autocomplete": "off"}))
    # The refusal does not repeat the value: "no such pool" and "not yours" read the same.
    pool = forms.ChoiceField(label="Pool", required=False, error_messages={
        "invalid_choice": "No pool of that name among the pools you may use."})
    department = forms.ChoiceField(label="Department", required=False, error_messages={
        "invalid_choice": "No department of that name among yours."})
    per_page = forms.TypedChoiceField(label="Pools per page", required=False, coerce=int,
                                      choices=[(n, n) for n in POOLS_PER_PAGE], empty_value=DEFAULT_POOLS_PER_PAGE)

    def __init__(self, data, *, pools: list[str], departments: list[str]):
        if "per_page" not in data:  # so that the menu shows the default rather than its first choice
            data = data.copy()
            data["per_page"] = str(DEFAULT_POOLS_PER_PAGE)
        super().__init__(data)
        self.fields["pool"].choices = [("", "All pools"), *((name, name) for name in pools)]
        self.fields["department"].choices = [("", "All departments"), *((name, name) for name in departments)]

    @property
    def active(self) -> bool:
        return self.is_bound and any(self.data.get(name) for name in ("q", "pool", "department"))

    @property
    def filters_rows(self) -> bool:
        return self.is_valid() and bool(self.cleaned_data["q"].strip() or self.cleaned_data["department"])

    def keep(self, row: dict) -> bool:
        department, text = self.cleaned_data["department"], self.cleaned_data["q"].strip().casefold()
        if department and row["department"] != department:
            return False
        return not text or text in row["department"].casefold() or text in (row["project"] or "").casefold()


@dataclass
class QuotaPage:
    listing: Listing  # headers, links and the CSV link; its rows are the sections'
    sections: list[Section]
    page: object | None
    empty_message: str
    total_rows: int

    @property
    def summary(self) -> str:
        pools = len(self.sections) if self.page is None else self.page.paginator.count
        text = f"{formatting.number(pools)} pool{'' if pools == 1 else 's'}"
        if self.page is not None and self.page.paginator.num_pages > 1:
            text += f", page {self.page.number} of {self.page.paginator.num_pages}"
        return f"{text}, {formatting.number(self.total_rows)} row{'' if self.total_rows == 1 else 's'} shown"

    @property
    def pages(self) -> dict | None:
        page = self.page
        if page is None or page.paginator.num_pages <= 1:
            return None
        link = self.listing.link
        return {"first": link(page=1) if page.number > 1 else "",
                "previous": link(page=page.previous_page_number()) if page.has_previous() else "",
                "next": link(page=page.next_page_number()) if page.has_next() else "",
                "last": link(page=page.paginator.num_pages) if page.number < page.paginator.num_pages else "",
                "number": page.number, "count": page.paginator.num_pages}


def _visible_projects(request) -> list[Project] | None:
    """None for staff (every row, department rows included); else the user's projects."""
    if access_for(request).is_staff:
        return None
    return list(Project.objects.visible_to(request))


def csv_columns(columns: list[Column]) -> list[Column]:
    """The identity of each row first (the page's sections and nesting say it; a file must), then the rest
    of the chosen columns in their order, then whether its usage was counted in several pools."""
    return [QUOTAS.by_key[key] for key in QUOTA_IDENTITY] + [
        column for column in columns if column.key not in ("unit", QUOTA_SHARED, *QUOTA_IDENTITY)
    ] + [QUOTAS.by_key[QUOTA_SHARED]]


def quota_page(request, query: QueryDict, path: str, *, pools=None):
    """(form, QuotaPage, None) for `query`, or (form, None, the CSV response)."""
    visible = list(Pool.objects.visible_to(request).select_related("backend").order_by("name")) if pools is None \
        else pools
    departments = list(Department.objects.visible_to(request).order_by("name").values_list("name", flat=True))
    form = QuotaFilterForm(query, pools=[pool.name for pool in visible], departments=departments)
    columns = preferences.chosen_columns(request, QUOTAS)
    staff = access_for(request).is_staff
    ctx = RowContext(None if staff else frozenset(pool.name for pool in visible), staff, timezone.now())
    if not form.is_valid():
        visible, per_page = [], DEFAULT_POOLS_PER_PAGE
    else:
        per_page = form.cleaned_data["per_page"] or DEFAULT_POOLS_PER_PAGE
        if form.cleaned_data["pool"]:
            visible = [pool for pool in visible if pool.name == form.cleaned_data["pool"]]
    projects = _visible_projects(request)
    restricted = projects is not None or form.filters_rows
    download = wants_csv(request)
    page = None
    if not restricted and not download:
        # Every pool gets a section: compute only the page's.
        page = Paginator(visible, per_page).get_page(query.get("page"))
        visible = list(page.object_list)
    tables = quota_tables(visible, projects=projects) if visible else []
    kept = [(table, [row for row in flat_rows(table) if not form.filters_rows or form.keep(row)]) for table in tables]
    if restricted:
        # Only the pools where some of the rows shown are, then a page of those.
        kept = [(table, rows) for table, rows in kept if rows]
    if download:
        return form, None, csv.response(QUOTAS, csv_columns(columns), [row for _, rows in kept for row in rows], ctx)
    if restricted:
        page = Paginator(kept, per_page).get_page(query.get("page"))
        kept = list(page.object_list)
    guarantees = gpu_guarantees([table.pool for table, _ in kept])
    sections = [section(table, rows, guarantees) for table, rows in kept]
    listing = Listing(QUOTAS, path=path, query=query, columns=columns, sort=Sort(None, False), ctx=ctx, rows=[],
                      total=sum(len(item.rows) for item in sections), filtered=form.active, live=True)
    edit = editing(request)
    by_name = {pool.name: pool for pool in visible}
    for item in sections:
        item.html = render_rows(item.rows, columns, ctx, edit)
        item.totals = listing.sums_row(quota_sums(item.rows, columns), POOL_TOTAL)
        item.engine = enforcement(by_name[item.pool], staff, ctx.now)
    if form.active and not sections:
        empty = "No quota matches these filters."
    elif projects is not None:
        empty = "None of your projects has a quota or running work in the pools you may use."
    else:
        empty = "You may not use any pool yet."
    return form, QuotaPage(listing, sections, page, empty, listing.total), None


@access_required()
def quotas(request):
    form, quota, download = quota_page(request, request.GET, reverse("pages:quotas"))
    if download:
        return download
    context = {"quota": quota, "listing": quota.listing, "form": form, "nav": "quotas",
               "chooser": preferences.chooser(QUOTAS, quota.listing.columns)}
    return respond(request, "pages/quotas.html", context, {quota.listing.dom_id: "pages/_quotas.html"})


def pool_quotas(request, pool: Pool) -> QuotaPage:
    """The quota section of a pool's page: the same region as `/quotas/?pool=<name>`, which refreshes it."""
    query = QueryDict(mutable=True)
    query["pool"] = pool.name
    _form, quota, _ = quota_page(request, query, reverse("pages:quotas"), pools=[pool])
    return quota


# ---- the one-cell edit -----------------------------------------------------------------------------------

@access_required(write=Rule.ADMIN)
@require_POST
def quota_edit(request):
    """Writes one figure (POST `cell`=kind:name:pool:resource:field, `value`). htmx gets the cell's form back
    (422 with the refusal in it), with a status line out of band and the `quotas-changed` event; a plain
    form post is sent back where it came from with a message."""
    if not access_for(request).is_staff:
        raise PermissionDenied("Only staff may change quotas.")
    try:
        cell = edits.Cell.parse(request.POST.get("cell", ""))
    except ConfigError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")
    text = request.POST.get("value", "")
    edit = quota_html.Editing(reverse("pages:quota-edit"), get_token(request), frozenset())
    try:
        result = edits.set_figure(cell, text, author=request.user)
    except ConfigNotFound as exc:
        raise Http404(exc.message) from None
    except ConfigError as exc:
        if not request.htmx:
            messages.error(request, exc.message)
            return HttpResponseRedirect(_back(request))
        return HttpResponse(quota_html.edit_form(cell, text, edit, error=exc.message), status=422)
    if result.revisions:
        written = cell.pool if result.kind == ConfigKind.POOL else cell.name
        status = f"{cell.label}: saved, revision {result.revisions[0]} of {result.kind.lower()} {written}."
    else:
        status = f"{cell.label}: unchanged."
    if not request.htmx:
        messages.success(request, status)
        return HttpResponseRedirect(_back(request))
    shown = _stored_text(cell, text)
    response = HttpResponse(quota_html.edit_form(cell, shown, edit) + quota_html.status_line(status))
    return trigger_client_event(response, QUOTAS_CHANGED, {"cell": cell.key}) if result.revisions else response


def _stored_text(cell: edits.Cell, typed: str) -> str:
    """The cell's value as stored, read back (the write may normalise what was typed)."""
    if cell.field == "over_quota_weight":
        return next(name for name in edits.WEIGHTS if name.lower() == typed.strip().lower())
    owner = {f"{cell.kind}__name": cell.name}
    quota = Quota.objects.filter(pool__name=cell.pool, **owner).first()
    value = getattr(quota, f"{cell.resource}_{cell.field}", None) if quota else None
    if value is None:
        return typed.strip()
    if cell.resource == "cpu" and value != -1:
        value = Decimal(value) / 1000
    return quota_html.input_text(cell.resource, value)


def _back(request) -> str:
    target = request.META.get("HTTP_REFERER", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return reverse("pages:quotas")


# ---- /projects/ ------------------------------------------------------------------------------------------

class ProjectFilterForm(FilterForm):
    q = forms.CharField(label="Search", required=False, max_length=200, widget=forms.TextInput(
        attrs={"type": "search", "placeholder": "Project, department, namespace", "autocomplete": "off"}))
    department = forms.ChoiceField(label="Department", required=False, error_messages={
        "invalid_choice": "No department of that name among yours."})

    def __init__(self, data, *, departments: list[str]):
        super().__init__(data)
        self.fields["department"].choices = [("", "All departments"), *((name, name) for name in departments)]

    def apply(self, projects):
        if not self.is_valid():
            return projects.none()
        if self.cleaned_data["department"]:
            projects = projects.filter(department__name=self.cleaned_data["department"])
        text = self.cleaned_data["q"].strip()
        if text:
            projects = projects.filter(Q(name__icontains=text) | Q(department__name__icontains=text)
                                       | Q(namespace__icontains=text) | Q(description__icontains=text))
        return projects


def project_rows(request):
    """The user's projects with GPUs deserved over the pools the user may see and the number of users and
    roles named as members (GPUs allocated: `with_allocated`)."""
    deserved = (Quota.objects.filter(project=OuterRef("pk"), pool__in=Pool.objects.visible_to(request))
                .values("project").annotate(total=Sum("gpu_deserved")).values("total"))
    members = ProjectMember.objects.filter(project=OuterRef("pk")).values("project").annotate(
        total=Count("pk")).values("total")
    return Project.objects.visible_to(request).annotate(
        gpu_deserved=Coalesce(Subquery(deserved), Value(Decimal(0))),
        member_count=Coalesce(Subquery(members), Value(0)))


def with_allocated(rows, namespaces):
    """`rows` with `gpu_allocated`: the GPUs requested by each project's running pods (each pod once), summed
    in one grouped query over `namespaces` (a list, or a subquery of them)."""
    allocated = dict(Pod.objects.filter(namespace__in=namespaces, component="").values("namespace")
                     .annotate(total=Sum("gpu")).order_by().values_list("namespace", "total"))
    for row in rows:
        row["gpu_allocated"] = allocated.get(row["namespace"]) or 0
        yield row


def project_sums(selected, columns) -> dict:
    """The totals row of the projects table, over every filtered project (not the page): GPUs deserved, and
    GPUs requested by the running pods of their namespaces (each pod once). Members are not summed: one user
    may be in several projects."""
    sums = {}
    if PROJECTS.by_key["gpu_deserved"] in columns:
        deserved = sum(selected.order_by().values_list("gpu_deserved", flat=True), Decimal(0))
        sums["gpu_deserved"] = PROJECTS.by_key["gpu_deserved"].value({"gpu_deserved": deserved}, None)
    if PROJECTS.by_key["gpu_allocated"] in columns:
        sums["gpu_allocated"] = (Pod.objects.filter(namespace__in=selected.order_by().values("namespace"), component="")
                                 .aggregate(total=Sum("gpu"))["total"] or 0)
    return sums


@access_required()
def projects(request):
    departments = list(Department.objects.visible_to(request).order_by("name").values_list("name", flat=True))
    form = ProjectFilterForm(request.GET, departments=departments)
    ctx = row_context(request)
    columns = preferences.chosen_columns(request, PROJECTS)
    sort = parse_sort(PROJECTS, request.GET.get("sort"))
    selected = order_queryset(form.apply(project_rows(request)), sort, ("name",))
    allocated = PROJECTS.by_key["gpu_allocated"] in columns
    if wants_csv(request):
        rows = selected.values(*PROJECTS.fields(columns, export=True)).iterator(chunk_size=2000)
        if allocated:
            rows = with_allocated(rows, selected.order_by().values("namespace"))
        return csv.response(PROJECTS, columns, rows, ctx)
    page = paginate(selected.values(*PROJECTS.fields(columns)), request.GET)
    if allocated:
        shown = list(page.object_list)
        page.object_list = list(with_allocated(shown, [row["namespace"] for row in shown]))
    empty = "No project matches these filters." if form.active else "You belong to no project yet."
    listing = Listing(PROJECTS, path=reverse("pages:projects"), query=request.GET, columns=columns, sort=sort,
                      ctx=ctx, rows=page.object_list, total=page.paginator.count, page=page, empty_message=empty,
                      filtered=form.active, sums=project_sums(selected, columns))
    context = {"listing": listing, "form": form, "nav": "projects", "per_page_choices": PER_PAGE_CHOICES,
               "chooser": preferences.chooser(PROJECTS, columns)}
    return respond(request, "pages/projects.html", context, {listing.dom_id: "pages/_table.html"})


# ---- /projects/<name>/ -----------------------------------------------------------------------------------

def project_pools(request, project: Project):
    """The user's pools where the project has a quota or running pods (labelled with the pool, or unlabelled
    on one of its nodes): those `quota_tables(..., projects=[project])` has a row for, so that a project's page
    computes the fair shares of a few pools rather than of every pool."""
    pods = Pod.objects.filter(namespace=project.namespace, component="")
    hosting = pods.filter(pool="", backend_id=OuterRef("node__backend_id"), node_name=OuterRef("node__name"))
    return Pool.objects.visible_to(request).filter(
        Q(Exists(Quota.objects.filter(project=project, pool=OuterRef("pk"))))
        | Q(name__in=pods.exclude(pool="").values("pool"))
        | Q(Exists(NodeMembership.objects.filter(Exists(hosting), pool=OuterRef("pk"))))).order_by("name")


class AddMemberForm(forms.Form):
    user = forms.CharField(label="User name or e-mail", max_length=onboarding.WHO_MAX_LENGTH,
                           help_text="The account is created if nobody has it; the person then may use the "
                                     "project's pools.")


@access_required(write=Rule.ADMIN)
def project_detail(request, name: str):
    """The project's page; staff POST `user` to onboard a person (pools.quotas.onboarding) and see the result here,
    the new account's password once."""
    project = get_object_or_404(Project.objects.visible_to(request).select_related("department", "pool"), name=name)
    onboarded, add_form, status = None, AddMemberForm(), 200
    if request.method == "POST":
        add_form = AddMemberForm(request.POST)
        if add_form.is_valid():
            try:
                onboarded = onboarding.onboard(project.name, add_form.cleaned_data["user"], author=request.user,
                                               door="project page")
                add_form = AddMemberForm()
            except ConfigError as exc:
                add_form.add_error("user", exc.message)
        if onboarded is None:
            status = 400
    ctx = row_context(request)
    members = [{"kind": m.kind, "name": m.name, "how": m.how} for m in memberships(project)]
    if wants_csv(request) and request.GET.get("table") == "members":
        return csv.response(MEMBERS, list(MEMBERS.columns), members, ctx)
    pools = list(project_pools(request, project))
    rows = [row for table in quota_tables(pools, projects=[project]) for row in flat_rows(table)]
    chosen = preferences.chosen_columns(request, QUOTAS)
    columns = [QUOTAS.by_key["pool"]] + [c for c in chosen if c.key not in ("unit", *QUOTA_IDENTITY)]
    if wants_csv(request):
        return csv.response(QUOTAS, csv_columns(chosen), rows, ctx)
    quota_listing = Listing(QUOTAS, path=request.path, query=QueryDict(), columns=columns, sort=Sort(None, False),
                            ctx=ctx, rows=[], total=len(rows), live=False)
    # One row per pool, the project's own (no department rows here), so the sum over its pools counts nothing
    # twice, except a pod without a pool label on a node of several pools, which each of those pools counts:
    # then allocated and over quota are left blank (its rows say "counted in several pools").
    shared = any(row["shared_usage"] for row in rows)
    quota_totals = quota_listing.sums_row(
        quota_sums(rows, columns, leave_out=("allocated", "over_quota") if shared else ()),
        "Total" if len(rows) == 1 else f"Total of {len(rows)} pools")
    member_listing = Listing(MEMBERS, path=request.path, query=QueryDict("table=members"),
                             columns=list(MEMBERS.columns), sort=Sort(None, False), ctx=ctx, rows=members,
                             total=len(members), live=False, empty_message="Nobody is named as a member.")
    defaults = default_pools(project)
    shown_defaults = ctx.pools(defaults.pools)
    context = {
        "project": project, "nav": "projects", "quota_listing": quota_listing,
        "quota_rows": render_rows(rows, columns, ctx, editing(request)), "quota_totals": quota_totals,
        "quota_totals_partial": shared,
        "members": member_listing, "defaults": defaults, "default_pool_names": shown_defaults,
        "hidden_defaults": len(defaults.pools) - len(shown_defaults),
        "add_form": add_form if access_for(request).is_staff and project.pool_id is None else None,
        "onboarded": onboarded,
    }
    response = respond(request, "pages/project.html", context, {"project-quotas": "pages/_project_quotas.html"})
    response.status_code = status
    return response
