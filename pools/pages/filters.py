"""Filter forms of the tables. Choices come only from what the viewer may see, so a pool they may not
use is neither offered nor accepted (an unknown value empties the table and says why, rather than
silently showing everything)."""

from django import forms
from django.db.models import Exists, OuterRef, Q

from pools.fleet.usage import POOL_STATUSES, filter_nodes
from pools.inventory import status as node_status
from pools.models import ConfigKind, NodeMembership
from pools.models.visibility import access_for

NOT_READY = "Not ready"
NODE_STATUSES = (
    node_status.READY,
    NOT_READY,
    *(f"{NOT_READY} ({reason})" for _, reason in node_status.STANDARD_CONDITIONS),
    *(f"{NOT_READY} ({reason})" for reason in (node_status.SCHEDULING_DISABLED, node_status.MISSING_TOOLKIT,
                                               node_status.MISSING_DCGM, node_status.UNDRAINED)),
    node_status.UNKNOWN,
)


class VisiblePools:
    """The viewer's pools and their platforms, read once (one query) per request: the names the rows'
    redaction keeps (`Access.visible_platforms`)."""

    def __init__(self, request):
        self.platforms: dict[str, list[str]] = access_for(request).visible_platforms

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.platforms)


def _search(label: str, placeholder: str) -> forms.CharField:
    return forms.CharField(label=label, required=False, max_length=200,
                           widget=forms.TextInput(attrs={"type": "search", "placeholder": placeholder,
                                                         "autocomplete": "off"}))


class FilterForm(forms.Form):
    def __init__(self, data):
        # Stable ids ("filter-pool") for labels, and for browser tests to find the controls.
        super().__init__(data, auto_id="filter-%s")

    @property
    def active(self) -> bool:
        return self.is_bound and any(self.data.get(name) for name in self.fields)


class NodeFilterForm(FilterForm):
    q = _search("Search", "Name, GPU type, status, label (key=value), pool…")
    pool = forms.ChoiceField(label="Pool", required=False)
    platform = forms.ChoiceField(label="Platform", required=False)
    status = forms.ChoiceField(label="Status", required=False,
                               choices=[("", "Any status"), *((s, s) for s in NODE_STATUSES)])
    # Any text is accepted (it only narrows the viewer's own nodes), so live refreshes and downloads need
    # not read the menu's choices; the full page fills the menu.
    gpu = forms.CharField(label="GPU type", required=False, max_length=128, widget=forms.Select)

    def __init__(self, data, *, visible: VisiblePools, gpu_types: list[str]):
        super().__init__(data)
        self.visible = visible
        self.fields["pool"].choices = [("", "All pools"), *((name, name) for name in visible.platforms)]
        self.fields["platform"].choices = [("", "All platforms"), *(
            (pool, [(f"{pool}/{name}", name) for name in names]) for pool, names in visible.platforms.items() if names
        )]
        current = data.get("gpu") if data else ""
        menu = [*gpu_types, *([current] if current and current not in gpu_types else [])]
        self.fields["gpu"].widget.choices = [("", "Any GPU type"), *((name, name) for name in menu)]

    def apply(self, nodes):
        if not self.is_valid():
            return nodes.none()
        data = self.cleaned_data
        nodes = filter_nodes(nodes, pool=data["pool"] or None, platform=data["platform"] or None,
                             status=data["status"] or None)
        if data["gpu"]:
            nodes = nodes.filter(gpu_product=data["gpu"])
        if data["q"]:
            nodes = nodes.filter(self._text(data["q"].strip()))
        return nodes

    def _text(self, text: str) -> Q:
        # Pools and platforms match through memberships in visible pools only, so a search cannot
        # reveal that a node also sits in a pool the viewer may not see.
        pools = [name for name in self.visible.names if text.casefold() in name.casefold()]
        platforms = [f'"{name}"' for names in self.visible.platforms.values() for name in names
                     if text.casefold() in name.casefold()]
        membership = Q(pool__name__in=pools)
        if platforms:
            named = Q()
            for platform in set(platforms):
                named |= Q(platforms__icontains=platform)
            membership |= named & Q(pool__name__in=self.visible.names)
        in_visible_pool = Exists(NodeMembership.objects.filter(membership, node=OuterRef("pk")))
        return (Q(name__icontains=text) | Q(gpu_product__icontains=text) | Q(status__icontains=text)
                | Q(backend__name__icontains=text) | Q(label_text__icontains=text) | Q(in_visible_pool))


def gpu_types(nodes) -> list[str]:
    return list(nodes.exclude(gpu_product="").order_by("gpu_product").values_list("gpu_product", flat=True)
                .distinct())


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
