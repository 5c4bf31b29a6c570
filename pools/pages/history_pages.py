"""`/config/history/`: the revision list, a side-by-side diff of any two revisions, and rollback: each revision can be
undone ("Undo this change": the object returns to the state before it) or restored ("Restore this version": the
object returns to the state it made), each shown as a diff from now before it is confirmed.

Who sees what: staff see every revision; holders of an admin role that may read `/api/configs/history/`
see the revisions of the kinds (or objects) the config API lets them read, as the API shows them;
everyone else sees the revisions of the pools they may use (the same documents their pool pages show)
and nothing of templates, validations or roles. Rollback is for staff
only, from a confirmation page, by POST with the CSRF token.
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

from pools.access.scoping import Rule, access_required, readable_revisions
from pools.config import history, writes
from pools.engine import ConfigError
from pools.models import ConfigKind, ConfigRevision, Pool
from pools.models.visibility import access_for

from . import csv, diffs, preferences
from .filters import RevisionFilterForm
from .formatting import moment
from .listing import PER_PAGE_CHOICES, Listing, order_queryset, paginate, parse_sort
from .responses import respond, wants_csv
from .tables import REVISIONS, RowContext

DIFF_CONTEXT = 3


def reads_all_configuration(request) -> bool:
    return access_for(request).request_grant("GET", reverse("config-history")) is not None


def visible_revisions(request):
    revisions = ConfigRevision.objects.all()
    if access_for(request).is_staff:
        return revisions
    pools = Pool.objects.visible_to(request).filter(name=OuterRef("name"))
    own_pools = revisions.filter(Exists(pools), kind=ConfigKind.POOL)
    if reads_all_configuration(request):
        # ... of the kinds (or objects) the config API lets them read, as the API's history shows them.
        return readable_revisions(request, revisions) | own_pools
    return own_pools


def _kinds(request):
    return list(ConfigKind) if reads_all_configuration(request) else [ConfigKind.POOL]


def diff_url(kind: str, number: int, other: int | None = None) -> str:
    params = {"type": kind.lower(), "revision": number}
    if other is not None:
        params["other"] = other
    return f"{reverse('pages:diff')}?{urlencode(params)}"


def rollback_url(kind: str, number: int, *, before: bool = False) -> str:
    params = {"type": kind.lower(), "revision": number, **({"before": 1} if before else {})}
    return f"{reverse('pages:rollback')}?{urlencode(params)}"


UNDO, RESTORE = "Undo this change…", "Restore this version…"


def _row_actions(row, staff: bool) -> list[tuple[str, str]]:
    """Diff; for staff, undo the revision (back to the state before it) and restore it (back to the state it made)."""
    actions = [("Diff", diff_url(row["kind"], row["number"]))]
    if staff:
        actions += [(UNDO, rollback_url(row["kind"], row["number"], before=True)),
                    (RESTORE, rollback_url(row["kind"], row["number"]))]
    return actions


@access_required()
def history_list(request):
    form = RevisionFilterForm(request.GET, kinds=_kinds(request))
    sort = parse_sort(REVISIONS, request.GET.get("sort"))
    columns = preferences.chosen_columns(request, REVISIONS)
    staff = access_for(request).is_staff
    ctx = RowContext(staff=staff)
    selected = order_queryset(form.apply(visible_revisions(request)), sort, ("-created_at", "kind", "-number"))
    if wants_csv(request):
        rows = selected.values(*REVISIONS.fields(columns, export=True)).iterator(chunk_size=2000)
        return csv.response(REVISIONS, columns, rows, ctx)
    selected = selected.values(*REVISIONS.fields(columns))
    page = paginate(selected, request.GET)
    listing = Listing(REVISIONS, path=reverse("pages:history"), query=request.GET, columns=columns, sort=sort,
                      ctx=ctx, rows=page.object_list, total=page.paginator.count, page=page,
                      empty_message="No revision matches these filters." if form.active else "No revisions yet.",
                      filtered=form.active, actions=lambda row: _row_actions(row, staff))
    context = {"listing": listing, "form": form, "nav": "history", "kinds": _kinds(request),
               "per_page_choices": PER_PAGE_CHOICES, "chooser": preferences.chooser(REVISIONS, columns)}
    return respond(request, "pages/history.html", context, {listing.dom_id: "pages/_table.html"})


def _revision_param(request, name: str) -> int | None:
    value = request.GET.get(name) or request.POST.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise Http404(f"{name} must be a revision number") from None


def _kind_param(request) -> ConfigKind:
    try:
        return history.parse_kind(request.GET.get("type") or request.POST.get("type") or "")
    except ConfigError as exc:
        raise Http404(exc.message) from None


def _visible_or_404(request, *revisions):
    wanted = {revision.pk for revision in revisions if revision is not None}
    if visible_revisions(request).filter(pk__in=wanted).count() != len(wanted):
        raise Http404("No such revision")


@access_required()
def diff(request):
    kind = _kind_param(request)
    number, other = _revision_param(request, "revision"), _revision_param(request, "other")
    if number is None:
        raise Http404("Name a revision")
    try:
        older, newer = history.diff_pair(kind, number, other)
    except ConfigError as exc:
        raise Http404(exc.message) from None
    _visible_or_404(request, older, newer)
    params = request.GET.dict()
    full = params.pop("full", "") == "1"
    rows = diffs.side_by_side(diffs.document_lines(older), diffs.document_lines(newer),
                              None if full else DIFF_CONTEXT)
    context = {"older": older, "newer": newer, "rows": rows, "changed": diffs.changed(rows), "kind": kind,
               "full": full, "nav": "history", "kinds": _kinds(request), "form_revision": number,
               "form_other": other, "older_when": moment(older.created_at if older else None),
               "newer_when": moment(newer.created_at),
               "full_url": f"{request.path}?{urlencode({**params, 'full': '1'})}",
               "changes_url": f"{request.path}?{urlencode(params)}",
               "staff": access_for(request).is_staff,
               "rollback_older": rollback_url(kind, older.number) if older else "",
               "rollback_newer": rollback_url(kind, newer.number),
               "undo_newer": rollback_url(kind, newer.number, before=True)}
    return render(request, "pages/diff.html", context)


@access_required(write=Rule.ADMIN)
def rollback(request):
    if not access_for(request).is_staff:
        raise PermissionDenied("Only staff may roll configuration back.")
    kind = _kind_param(request)
    number = _revision_param(request, "revision")
    if number is None:
        raise Http404("Name a revision")
    try:
        target = history.get_revision(kind, number)
    except ConfigError as exc:
        raise Http404(exc.message) from None
    current = history.revisions(kind, target.name).first()
    # `before`: back to the state just before the target revision; before a creation the object did not exist.
    before = (request.GET.get("before") or request.POST.get("before")) == "1"
    goal = target
    if before:
        goal = history.previous_revision(target)
        goal = None if goal is None or goal.action == ConfigRevision.Action.DELETE else goal
    rows = diffs.side_by_side(diffs.document_lines(current), diffs.document_lines(goal), DIFF_CONTEXT)
    context = {"target": target, "current": current, "rows": rows, "changed": diffs.changed(rows), "nav": "history",
               "description": request.POST.get("description", ""), "error": "", "before": before, "goal": goal,
               "deletes": before and goal is None and current is not None
                          and current.action != ConfigRevision.Action.DELETE,
               # The other of the two: undo (the state before the revision) or restore (the state it made).
               "other_url": rollback_url(kind, number, before=not before)}
    if request.method != "POST":
        try:  # what it would do to the fleet, or why it would be refused, before anyone confirms
            context["preview"] = writes.preview_rollback(kind, number, before=before)
        except ConfigError as exc:
            context["error"] = exc.message
    if request.method == "POST":
        if request.POST.get("confirm") != "yes":
            context["error"] = "Tick the confirmation box first."
            return render(request, "pages/rollback.html", context, status=400)
        try:
            result = writes.rollback(kind, number, before=before, author=request.user,
                                      description=request.POST.get("description", "").strip())
        except ConfigError as exc:
            context["error"] = exc.message
            return render(request, "pages/rollback.html", context, status=400)
        messages.success(request, f"{result.summary()}. {result.impact_text()}".removesuffix(". "))
        return HttpResponseRedirect(f"{reverse('pages:history')}?"
                                    f"{urlencode({'type': kind.lower(), 'name': target.name})}")
    return render(request, "pages/rollback.html", context)
