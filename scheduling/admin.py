"""Workloads in the admin: read-only (they change through submission, admission and cancel), with their
events, reasons and pod templates, for an operator looking into one."""

from django.contrib import admin

from pools.admin.base import pre
from scheduling.models import Workload, WorkloadEvent
from scheduling.specs import podenv


class EventInline(admin.TabularInline):
    model = WorkloadEvent
    fields = readonly_fields = ("at", "status", "reason", "message")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ("name", "short_id", "project_shown", "submitter_name", "priority", "status", "pool_shown",
                    "platform", "replicas", "gpu", "submitted_at")
    list_filter = ("status", "priority", "source", "pool", "project")
    search_fields = ("name", "workflow", "submitter_name", "id")
    list_select_related = ("project", "pool")
    inlines = [EventInline]
    fields = ("id", "name", "workflow", "group", "project_shown", "submitter_name", "source", "priority", "status",
              "pools", "pool_shown", "platform", "replicas", "gpu", "cpu", "memory", "storage", "exec_timeout",
              "queue_timeout", "submitted_at", "admitted_at", "started_at", "finished_at", "reasons_shown",
              "positions", "placement", "request_shown", "templates_shown")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        # The change list shows none of the request, variables or templates: one large row must not slow it.
        queryset = super().get_queryset(request)
        match = request.resolver_match
        return queryset.light() if match is not None and match.url_name.endswith("_changelist") else queryset

    # A deleted project or pool still shows by name (the history keeps it).
    @admin.display(description="Project", ordering="project__name")
    def project_shown(self, obj):
        return obj.project_label

    @admin.display(description="Pool", ordering="pool__name")
    def pool_shown(self, obj):
        return obj.pool_label

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="Reasons")
    def reasons_shown(self, obj):
        return pre(obj.reasons)

    # Credential-looking env values are the submitter's alone (scheduling.specs.podenv), admins included.
    @admin.display(description="Request")
    def request_shown(self, obj):
        request = dict(obj.request or {})
        if isinstance(request.get("env"), dict):
            request["env"] = podenv.mask_mapping(request["env"])
        return pre(request)

    @admin.display(description="Pod templates")
    def templates_shown(self, obj):
        return pre({pool: {**value, "pod_template": podenv.mask_pod_template(value.get("pod_template"))}
                    if isinstance(value, dict) else value for pool, value in (obj.templates or {}).items()})
