"""The workloads' one FilterSet: `/workloads/`, its CSV and `/api/workloads/` filter with it, so a query
string means the same everywhere. Rows are scoped before filtering (`Workload.objects.visible_to`)."""

import django_filters
from django.db import connection
from django.db.models import Q

from pools.models.visibility import access_for
from scheduling.models import Kind, Priority, Source, Status, Workload


class WorkloadFilterSet(django_filters.FilterSet):
    pool = django_filters.CharFilter(method="filter_pool", help_text="Admitted to, or a candidate of, this pool.")
    project = django_filters.CharFilter(method="filter_project")
    status = django_filters.MultipleChoiceFilter(choices=Status.choices)
    user = django_filters.CharFilter(field_name="submitter_name", help_text="The submitter's user name.")
    priority = django_filters.ChoiceFilter(choices=Priority.choices)
    source = django_filters.ChoiceFilter(choices=Source.choices)
    kind = django_filters.ChoiceFilter(choices=Kind.choices, help_text="training, notebook, inference or compute.")
    workflow = django_filters.CharFilter(field_name="workflow")
    q = django_filters.CharFilter(method="filter_search", help_text="Name, workflow or id starts with.")

    class Meta:
        model = Workload
        fields = ["pool", "project", "status", "user", "priority", "source", "kind", "workflow"]

    def filter_project(self, queryset, name, value):
        return queryset.filter(Q(project__name=value) | Q(project__isnull=True, project_name=value))

    def filter_pool(self, queryset, name, value):
        # A pool the caller may not see matches nothing, as a pool that does not exist does.
        visible = access_for(self.request).visible_pool_names if self.request is not None else None
        if visible is not None and value not in visible:
            return queryset.none()
        # JSON containment on PostgreSQL; on SQLite the candidate list is matched as text.
        if connection.vendor == "postgresql":
            return queryset.filter(Q(pool__name=value) | Q(pool_name=value) | Q(pools__contains=[value]))
        return queryset.filter(Q(pool__name=value) | Q(pool_name=value) | Q(pools__icontains=f'"{value}"'))

    def filter_search(self, queryset, name, value):
        value = value.strip()[:100]
        if not value:
            return queryset
        return queryset.filter(Q(name__istartswith=value) | Q(workflow__istartswith=value)
                               | Q(id__startswith=value) if _uuid_prefix(value) else
                               Q(name__istartswith=value) | Q(workflow__istartswith=value))


def _uuid_prefix(value: str) -> bool:
    return all(c in "0123456789abcdef-" for c in value.lower()) and len(value) >= 4
