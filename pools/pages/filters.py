"""Filter forms of the tables. The nodes table filters with the FilterSet its API shares
(`pools.fleet.filters.NodeFilterSet`); the pools and revisions tables with the forms below. Choices come
only from what the viewer may see, so a pool they may not use is neither offered nor accepted (an unknown
value empties the table and says why, rather than silently showing everything)."""

from django import forms
from django.db.models import Q

from pools.fleet.filters import FilterForm, search_input
from pools.fleet.usage import POOL_STATUSES
from pools.models import ConfigKind


def _search(label: str, placeholder: str) -> forms.CharField:
    return forms.CharField(label=label, required=False, max_length=200, widget=search_input(placeholder))


class PoolFilterForm(FilterForm):
    q = _search("Search", "Pool name or description")
    status = forms.ChoiceField(label="Status", required=False,
                               choices=[("", "Any status"), *((s, s) for s in POOL_STATUSES)])

    def apply(self, pools):
        if not self.is_valid():
            return pools.none()
        text = self.cleaned_data["q"].strip()
        return pools.filter(Q(name__icontains=text) | Q(description__icontains=text)) if text else pools

    def keep(self, row) -> bool:
        status = self.cleaned_data.get("status") if self.is_valid() else ""
        return not status or row["status"] == status


class RevisionFilterForm(FilterForm):
    type = forms.ChoiceField(label="Type", required=False)
    name = _search("Name", "Object name")

    def __init__(self, data, *, kinds):
        super().__init__(data)
        self.fields["type"].choices = [("", "All types"), *((k.value.lower(), k.label) for k in kinds)]

    def apply(self, revisions):
        if not self.is_valid():
            return revisions.none()
        if self.cleaned_data["type"]:
            revisions = revisions.filter(kind=ConfigKind(self.cleaned_data["type"].upper()))
        if self.cleaned_data["name"]:
            revisions = revisions.filter(name__icontains=self.cleaned_data["name"].strip())
        return revisions
