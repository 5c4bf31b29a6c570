"""The nodes' one FilterSet: the nodes page and `/api/resources/` filter with it, so a query string means
the same on both. Choices come only from what the viewer may see: a pool they may not use is neither
offered nor accepted, and a value outside the choices matches no node (the page says why; the API
answers an empty list, as for a pool that does not exist)."""

from functools import cached_property

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, Q

from pools.fleet.usage import ATTENTION, filter_nodes
from pools.inventory import status as node_status
from pools.models import Node, NodeMembership
from pools.models.visibility import access_for

NOT_READY = "Not ready"
NODE_STATUSES = (
    node_status.READY,
    NOT_READY,
    *(f"{NOT_READY} ({reason})" for _, reason in node_status.STANDARD_CONDITIONS),
    *(f"{NOT_READY} ({reason})" for reason in (node_status.MISSING_TOOLKIT, node_status.MISSING_DCGM,
                                               node_status.UNDRAINED)),
    node_status.CORDONED,
    node_status.UNKNOWN,
)
SEARCH_MAX = 200


class VisiblePools:
    """The viewer's pools and their platforms, read once (one query) per request: the same names the rows'
    redaction keeps (`Access.visible_platforms`)."""

    def __init__(self, request):
        self.access = access_for(request)

    @cached_property
    def platforms(self) -> dict[str, list[str]]:
        return self.access.visible_platforms

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.platforms)


def search_input(placeholder: str) -> forms.TextInput:
    return forms.TextInput(attrs={"type": "search", "placeholder": placeholder, "autocomplete": "off"})


class FilterForm(forms.Form):
    """The form of every filter bar."""

    def __init__(self, data=None, *args, **kwargs):
        # Stable ids ("filter-pool") for labels, and for browser tests to find the controls.
        kwargs.setdefault("auto_id", "filter-%s")
        super().__init__(data, *args, **kwargs)
        for field in self.fields.values():
            # Help texts describe the API's query parameters; the filter bar has labels and placeholders
            # (and a help text would point aria-describedby at an element the bar does not render).
            field.help_text = ""

    @property
    def active(self) -> bool:
        return self.is_bound and any(self.data.get(name) for name in self.fields)


class PlatformField(django_filters.fields.ChoiceField):
    def valid_value(self, value) -> bool:
        # The menu offers pool/platform; a bare platform name means that platform in any visible pool.
        if super().valid_value(value):
            return True
        return "/" not in value and any(super(PlatformField, self).valid_value(f"{pool}/{value}")
                                        for pool, _ in self.choices if pool)


class StatusField(django_filters.fields.ChoiceField):
    def valid_value(self, value) -> bool:
        # Custom conditions (a backend's `unhealthy_when`) are reasons too, though the menu cannot know them.
        return super().valid_value(value) or (value.startswith(f"{NOT_READY} (") and value.endswith(")"))


class PlatformFilter(django_filters.ChoiceFilter):
    field_class = PlatformField


class StatusFilter(django_filters.ChoiceFilter):
    field_class = StatusField


class NodeFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(label="Search", method="search", max_length=SEARCH_MAX,
                                  widget=search_input("Name, GPU type, status, label (key=value), pool…"),
                                  help_text="Part of the name, GPU type, status, backend, a label (key=value), "
                                            "or the name of a visible pool or platform.")
    pool = django_filters.ChoiceFilter(label="Pool", method="in_pool", empty_label="All pools",
                                       help_text="A pool the caller may use.")
    platform = PlatformFilter(label="Platform", method="on_platform", empty_label="All platforms",
                              help_text="pool/platform, or a platform name (in any visible pool).")
    status = StatusFilter(label="Status", method="with_status", empty_label="Any status",
                          choices=[(ATTENTION, "Needs attention"), *((status, status) for status in NODE_STATUSES)],
                          help_text="A status, or its first words: 'Not ready' matches every 'Not ready (…)'; "
                                    f"'{ATTENTION}' matches every node that is not Ready, Unknown included.")
    # Any text is accepted (it only narrows the viewer's own nodes), so live refreshes and the API need
    # not read the menu's choices; the full page fills the menu.
    gpu = django_filters.CharFilter(label="GPU type", field_name="gpu_product", max_length=128, widget=forms.Select,
                                    help_text="The GPU product exactly, such as NVIDIA-A100-SXM4-80GB.")

    class Meta:
        model = Node
        fields = ("q", "pool", "platform", "status", "gpu")
        form = FilterForm

    def __init__(self, data=None, queryset=None, *, request=None, prefix=None,
                 visible: VisiblePools | None = None, gpu_types=()):
        super().__init__(data, queryset, request=request, prefix=prefix)
        self.visible = visible or VisiblePools(request)
        fields = self.form.fields
        # Callables: the viewer's pools are read only when a pool or platform is given or the menu is shown.
        fields["pool"].choices = self._pool_choices
        fields["platform"].choices = self._platform_choices
        current = self.data.get("gpu") or ""
        menu = [*gpu_types, *([current] if current and current not in gpu_types else [])]
        fields["gpu"].widget.choices = [("", "Any GPU type"), *((name, name) for name in menu)]

    def _pool_choices(self):
        return [(name, name) for name in self.visible.platforms]

    def _platform_choices(self):
        # Each entry names its pool too ("training / h100"): h100 in two pools is two different platforms.
        return [(pool, [(f"{pool}/{name}", f"{pool} / {name}") for name in names])
                for pool, names in self.visible.platforms.items() if names]

    def filter_queryset(self, queryset):
        if not self.form.is_valid():
            return queryset.none()
        return super().filter_queryset(queryset)

    def in_pool(self, nodes, name, value: str):
        return filter_nodes(nodes, pool=value, access=self.visible.access)

    def on_platform(self, nodes, name, value: str):
        return filter_nodes(nodes, platform=value, access=self.visible.access)

    def with_status(self, nodes, name, value: str):
        return filter_nodes(nodes, status=value)

    def search(self, nodes, name, value: str):
        text = value.strip()
        if not text:
            return nodes
        # Pools and platforms match through memberships in visible pools only, so a search cannot
        # reveal that a node also sits in a pool the viewer may not see.
        visible = self.visible
        pools = [pool for pool in visible.names if text.casefold() in pool.casefold()]
        platforms = {f'"{platform}"' for names in visible.platforms.values() for platform in names
                     if text.casefold() in platform.casefold()}
        membership = Q(pool__name__in=pools)
        if platforms:
            named = Q()
            for platform in platforms:
                named |= Q(platforms__icontains=platform)
            membership |= named & Q(pool__name__in=visible.names)
        in_visible_pool = Exists(NodeMembership.objects.filter(membership, node=OuterRef("pk")))
        return nodes.filter(Q(name__icontains=text) | Q(gpu_product__icontains=text) | Q(status__icontains=text)
                            | Q(backend__name__icontains=text) | Q(label_text__icontains=text) | Q(in_visible_pool))


def gpu_types(nodes) -> list[str]:
    return list(nodes.exclude(gpu_product="").order_by("gpu_product").values_list("gpu_product", flat=True)
                .distinct())
