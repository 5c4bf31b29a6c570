"""`/audit/`: the audit log (pools.models.audit) as a live, filterable, sortable table with totals and CSV.
Staff see every row; anyone else sees the rows of their own actions (their profile page links here)."""

import datetime as dt

from django import forms
from django.urls import reverse
from django.utils import timezone

from pools.access.scoping import access_required
from pools.fleet.filters import FilterForm, search_input
from pools.models import AuditEvent
from pools.models.audit import ACTIONS, KINDS
from pools.models.visibility import access_for

from . import csv, preferences
from .listing import PER_PAGE_CHOICES, Listing, order_queryset, paginate, parse_sort
from .responses import respond, wants_csv
from .tables import AUDIT, RowContext


class AuditFilterForm(FilterForm):
    user = forms.CharField(label="Who", required=False, max_length=150, widget=search_input("User name (exact)"))
    kind = forms.ChoiceField(label="Kind", required=False, choices=[("", "Any kind"), *((k, k) for k in KINDS)])
    object = forms.CharField(label="Object", required=False, max_length=200,
                             widget=search_input("node/NAME, POOL/NAME, workload/ID"))
    action = forms.ChoiceField(label="Action", required=False,
                               choices=[("", "Any action"), *((a, a) for a in ACTIONS)])
    since = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label="To (inclusive)", required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, data, *, staff: bool):
        super().__init__(data)
        if not staff:
            del self.fields["user"]  # one's own rows only

    def apply(self, rows):
        if not self.is_valid():
            return rows.none()
        data = self.cleaned_data

        def day(value, extra=0):
            if value is None:
                return None
            return dt.datetime.combine(value + dt.timedelta(days=extra), dt.time(), tzinfo=dt.UTC)

        return rows.matching(user=(data.get("user") or "").strip(), kind=data["kind"],
                             obj=data["object"].strip(), action=data["action"], since=day(data["since"]),
                             until=day(data["until"], 1))


@access_required()
def audit_list(request):
    access = access_for(request)
    form = AuditFilterForm(request.GET, staff=access.is_staff)
    sort = parse_sort(AUDIT, request.GET.get("sort"))
    columns = preferences.chosen_columns(request, AUDIT)
    ctx = RowContext(staff=access.is_staff, now=timezone.now())
    selected = order_queryset(form.apply(AuditEvent.objects.visible_to(access)), sort, ("-id",))
    if wants_csv(request):
        rows = selected.values("id", *AUDIT.fields(columns, export=True)).iterator(chunk_size=2000)
        return csv.response(AUDIT, columns, rows, ctx)
    page = paginate(selected.values("id", *AUDIT.fields(columns)), request.GET)
    listing = Listing(AUDIT, path=reverse("pages:audit"), query=request.GET, columns=columns, sort=sort, ctx=ctx,
                      rows=page.object_list, total=page.paginator.count, page=page, filtered=form.active,
                      empty_message="No action matches these filters." if form.active else "No actions yet.")
    context = {"listing": listing, "form": form, "nav": "audit", "staff": access.is_staff,
               "per_page_choices": PER_PAGE_CHOICES, "chooser": preferences.chooser(AUDIT, columns)}
    return respond(request, "pages/audit.html", context, {listing.dom_id: "pages/_table.html"})
