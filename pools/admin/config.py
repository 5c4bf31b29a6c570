"""Admin for configuration. Forms refuse exactly what an import would refuse: before saving, each
form runs the real write path in a rolled-back transaction (`writes.validate`), then saves through
`writes.import_document`, so every admin edit is a numbered revision too."""


import logging

from django import forms
from django.contrib import admin, messages
from django.db.models import Count
from django.forms.models import BaseInlineFormSet
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince

from pools.admin.base import ReadOnlyAdmin, VersionedAdmin, hold_unconfirmed, pre, validated
from pools.admin.forms import JSONDocumentField, NameListField
from pools.cluster import ClusterError
from pools.cluster.connect import is_connected
from pools.config import history, writes
from pools.config.writes import pool_to_document
from pools.engine import ConfigError
from pools.fleet.sync import shared_cluster_for
from pools.fleet.usage import backend_online
from pools.models import (
    Backend,
    ConfigKind,
    ConfigRevision,
    Node,
    Platform,
    PodTemplate,
    Pool,
    ResourceValidation,
    SyncLog,
)
from pools.schedulers import reconcile

log = logging.getLogger("pools.admin")

# ---- pools and platforms -----------------------------------------------------------------------------

class PoolForm(forms.ModelForm):
    common_default_variables = JSONDocumentField(required=False, initial=dict, empty=dict)
    common_resource_validations = NameListField(help_text="Validation names, in order.")
    common_pod_template = NameListField(help_text="Pod template names, merged in order (later wins).")
    default_exit_actions = JSONDocumentField(required=False, initial=dict, empty=dict)
    action_permissions = JSONDocumentField(required=False, initial=dict, empty=dict)
    resources = JSONDocumentField(required=False, initial=dict, empty=dict)
    topology_keys = JSONDocumentField(required=False, initial=list, empty=list,
                                      help_text='[{"key": "rack", "label": "topology.kubernetes.io/rack"}]; KAI only')
    node_selector = JSONDocumentField(required=False, initial=dict, empty=dict)

    class Meta:
        model = Pool
        fields = ["name", "description", "backend", "default_platform", "enable_maintenance",
                  "common_default_variables", "common_resource_validations", "common_pod_template",
                  "default_exec_timeout", "default_queue_timeout", "max_exec_timeout", "max_queue_timeout",
                  "default_exit_actions", "action_permissions", "resources", "topology_keys", "node_selector"]


class PlatformForm(forms.ModelForm):
    default_variables = JSONDocumentField(required=False, initial=dict, empty=dict)
    resource_validations = NameListField()
    override_pod_template = NameListField()
    allowed_mounts = NameListField()

    class Meta:
        model = Platform
        fields = ["name", "description", "override_pod_template", "resource_validations",
                                         "default_variables", "host_network_allowed", "privileged_allowed",
                                         "allowed_mounts"]


class PlatformFormSet(BaseInlineFormSet):
    """Checks the pool with its platforms as one document; a save that moves nodes waits for confirmation."""

    def clean(self):
        super().clean()
        pool = self.instance
        if any(form.errors for form in self.forms) or not pool.name or not pool.backend_id:
            return  # field errors are shown on the fields already
        platforms = [form.instance for form in self.forms
                     if form.cleaned_data and not form.cleaned_data.get("DELETE")]
        self.document = {"pools": {pool.name: pool_to_document(pool, platforms)}}
        hold_unconfirmed(self, validated(ConfigKind.POOL, self.document, pool.name))


class PlatformInline(admin.StackedInline):
    model = Platform
    form = PlatformForm
    formset = PlatformFormSet
    extra = 0
    fields = PlatformForm.Meta.fields


@admin.register(Pool)
class PoolAdmin(VersionedAdmin):
    config_kind = ConfigKind.POOL
    form = PoolForm
    inlines = [PlatformInline]
    list_display = ["name", "description", "backend", "default_platform", "platform_count", "enable_maintenance",
                    "updated_at"]
    list_filter = ["backend", "enable_maintenance"]
    search_fields = ["name", "description"]
    readonly_fields = ["effective_configuration", "revisions"]
    fieldsets = [
        (None, {"fields": ["name", "description", "backend", "default_platform", "enable_maintenance"]}),
        ("Templates, rules and variables", {"fields": ["common_pod_template", "common_resource_validations",
                                                       "common_default_variables"]}),
        ("Timeouts", {"fields": ["default_exec_timeout", "max_exec_timeout", "default_queue_timeout",
                                 "max_queue_timeout"]}),
        ("Placement and actions", {"fields": ["node_selector", "topology_keys", "default_exit_actions",
                                              "action_permissions", "resources"]}),
        ("Effective configuration (as saved)", {"fields": ["effective_configuration"], "classes": ["collapse"]}),
        ("History", {"fields": ["revisions"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("backend").annotate(n_platforms=Count("platforms"))

    @admin.display(description="Platforms", ordering="n_platforms")
    def platform_count(self, obj):
        return obj.n_platforms

    @admin.display(description="Per platform: merged pod template, variables, node selector, tolerations, rules")
    def effective_configuration(self, obj):
        if not obj or not obj.pk:
            return "-"
        try:
            return pre(writes.effective(obj.name))
        except (ConfigError, KeyError) as exc:
            return f"Cannot compute: {exc}"

    def save_model(self, request, obj, form, change):
        pass  # saved with its platforms, as one document, in save_related

    def save_related(self, request, form, formsets, change):
        formset = next(f for f in formsets if isinstance(f, PlatformFormSet))
        self._import(request, form.instance, formset.document)
        # The admin's change message reads what formset.save() would have recorded.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []


# ---- pod templates and validations -------------------------------------------------------------------

class PodTemplateForm(forms.ModelForm):
    body = JSONDocumentField(help_text='A pod fragment such as {"spec": {"nodeSelector": {...}}}; strings are '
                                       "Jinja2 templates over the pool's variables.")

    class Meta:
        model = PodTemplate
        fields = ["name", "body"]

    def clean(self):
        data = super().clean()
        name = data.get("name") or self.instance.name
        if name and "body" in data:
            # A template's node selector places nodes as it places pods: a change may move nodes too.
            hold_unconfirmed(self, validated(ConfigKind.POD_TEMPLATE, {name: data["body"]}, name))
        return data


class ResourceValidationForm(forms.ModelForm):
    rules = JSONDocumentField(help_text='[{"operator": "LE", "left_operand": "{{USER_CPU}}", '
                                        '"right_operand": "{{K8_CPU}}", "assert_message": "..."}]')

    class Meta:
        model = ResourceValidation
        fields = ["name", "rules"]

    def clean(self):
        data = super().clean()
        name = data.get("name") or self.instance.name
        if name and "rules" in data:
            validated(ConfigKind.RESOURCE_VALIDATION, {name: data["rules"]}, name)
        return data


class UsedByMixin:
    @admin.display(description="Used by")
    def used_by(self, obj):
        if not obj or not obj.pk:
            return "-"
        uses = writes.used_by(self.config_kind, obj.name)
        return format_html_join("", "<div>{}</div>", ((use,) for use in uses)) or "nothing"


@admin.register(PodTemplate)
class PodTemplateAdmin(UsedByMixin, VersionedAdmin):
    config_kind = ConfigKind.POD_TEMPLATE
    form = PodTemplateForm
    list_display = ["name", "updated_at"]
    search_fields = ["name"]
    readonly_fields = ["used_by", "revisions"]

    def save_model(self, request, obj, form, change):
        self._import(request, obj, {obj.name: form.cleaned_data["body"]})


@admin.register(ResourceValidation)
class ResourceValidationAdmin(UsedByMixin, VersionedAdmin):
    config_kind = ConfigKind.RESOURCE_VALIDATION
    form = ResourceValidationForm
    list_display = ["name", "rule_count", "updated_at"]
    search_fields = ["name"]
    readonly_fields = ["used_by", "revisions"]

    @admin.display(description="Rules")
    def rule_count(self, obj):
        return len(obj.rules)

    def save_model(self, request, obj, form, change):
        self._import(request, obj, {obj.name: form.cleaned_data["rules"]})


# ---- backends and revisions --------------------------------------------------------------------------

class BackendForm(forms.ModelForm):
    node_condition_rules = JSONDocumentField(required=False, initial=dict, empty=dict)

    class Meta:
        model = Backend
        fields = ["name", "description", "kind", "kubeconfig_path", "kube_context", "in_cluster", "scheduler",
                  "toolkit_on_host", "node_condition_rules"]


class SyncLogInline(admin.TabularInline):
    model = SyncLog
    extra = 0
    max_num = 0
    can_delete = False
    fields = readonly_fields = ["at", "level", "message"]
    verbose_name_plural = "Recent sync errors"

    def get_queryset(self, request):
        return super().get_queryset(request).order_by("-at", "-id")


def engine_object_count(backend: Backend) -> int:
    return sum((backend.engine_objects or {}).get("objects", {}).values())


def engine_has_nothing(backend: Backend) -> bool:
    """A backend on the default scheduler that holds none of our engine objects: nothing to reconcile."""
    return backend.scheduler == Backend.Scheduler.DEFAULT and not engine_object_count(backend)


def reconcile_backend(backend: Backend) -> tuple[str, str]:
    """(level, message) of one reconcile run, for the admin action; never raises."""
    engine = backend.get_scheduler_display()
    if engine_has_nothing(backend):
        return messages.INFO, f"{backend.name}: {engine}, no engine objects of ours: nothing to reconcile."
    if not is_connected(backend):
        return messages.ERROR, f"{backend.name}: not connected (set its kubeconfig or in-cluster configuration)."
    try:
        result = reconcile.run(backend, shared_cluster_for(backend))
    except ClusterError as exc:
        return messages.ERROR, f"{backend.name}: {exc.message}"
    except Exception as exc:  # a malformed kubeconfig raises the client's own errors: a message, not a 500
        log.exception("backend %s: engine reconcile failed", backend.name)
        return messages.ERROR, f"{backend.name}: unexpected {type(exc).__name__}: {exc}"
    if result is None:
        error = Backend.objects.values_list("engine_error", flat=True).get(pk=backend.pk)
        return messages.ERROR, f"{backend.name}: reconcile failed: {error}"
    summary = result.summary()
    counts = ", ".join(f"{kind} {n}" for kind, n in summary["objects"].items()) or "none"
    text = (f"{backend.name} ({engine}): created {summary['created']}, updated {summary['updated']}, "
            f"deleted {summary['deleted']}, unchanged {summary['unchanged']}; objects now: {counts}.")
    if result.idle:
        text += f" {result.idle}"
    if result.refused:
        return messages.WARNING, f"{text} Refused by the cluster (the others were written): " + "; ".join(
            f"{r.label} ({r.action}): {_short(r.message, 300)}" for r in result.refused[:20]) + "."
    return messages.SUCCESS, text


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    form = BackendForm
    list_display = ["name", "kind", "engine_column", "node_total", "last_sync_at", "sync_state"]
    list_filter = ["kind", "scheduler"]
    search_fields = ["name", "description"]
    readonly_fields = ["engine_state", "engine_managed", "engine_reconciled_at", "engine_error", "last_sync_at",
                       "sync_state", "sync_error", "sync_failing_since", "nodes_resource_version",
                       "pods_resource_version"]
    fieldsets = [
        (None, {"fields": ["name", "description", "kind", "kubeconfig_path", "kube_context", "in_cluster"]}),
        ("Engine (admission and placement)", {
            "fields": ["scheduler", "engine_state", "engine_managed", "engine_reconciled_at", "engine_error"],
            "description": "KAI Scheduler and Kueue backends: we write our quotas into the engine's objects "
                           "(KAI Queues and Topologies, Kueue's queues) and the engine admits and places the work. "
                           "The default scheduler: our own admission does."}),
        ("Nodes", {"fields": ["toolkit_on_host", "node_condition_rules"]}),
        ("Sync", {"fields": ["last_sync_at", "sync_state", "sync_error", "sync_failing_since",
                             "nodes_resource_version", "pods_resource_version"]}),
    ]
    inlines = [SyncLogInline]
    actions = ["reconcile_engine"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(node_total=Count("nodes"))

    @admin.display(description="Nodes", ordering="node_total")
    def node_total(self, backend):
        return backend.node_total

    @admin.display(description="Sync")
    def sync_state(self, backend):
        if not is_connected(backend):
            return "not connected"
        if backend.sync_error:
            return f"failing since {backend.sync_failing_since:%Y-%m-%d %H:%M:%S}: {backend.sync_error}"
        return "ok" if backend_online(backend) else "not synced recently"

    @admin.display(description="Engine", ordering="scheduler")
    def engine_column(self, backend):
        """"KAI Scheduler · 14 objects · 2 minutes ago", or the engine and its error."""
        parts = [backend.get_scheduler_display()]
        if engine_has_nothing(backend):
            return format_html("{}", parts[0])
        if backend.engine_error:
            return format_html('{} · <span class="errornote">failing: {}</span>', parts[0],
                               _short(backend.engine_error, 120))
        if (backend.engine_objects or {}).get("idle"):
            parts.append("nothing to write: " + backend.engine_objects["idle"])
        count = engine_object_count(backend)
        parts.append(f"{count} object{'' if count == 1 else 's'}")
        if backend.engine_refused:
            parts.append(f"{len(backend.engine_refused)} refused")
        parts.append(_ago(backend.engine_reconciled_at) if backend.engine_reconciled_at else "not reconciled yet")
        return " · ".join(parts)

    @admin.display(description="Engine")
    def engine_state(self, backend):
        if not backend or not backend.pk:
            return "-"
        text = self.engine_column(backend)
        return format_html("<strong>{}</strong>", text)

    @admin.display(description="Objects we manage in it")
    def engine_managed(self, backend):
        if not backend or not backend.pk:
            return "-"
        stored = backend.engine_objects or {}
        counts = stored.get("objects") or {}
        if not stored:
            return "none recorded yet (no reconcile has succeeded)"
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td></tr>", sorted(counts.items())) \
            or format_html('<tr><td colspan="2">{}</td></tr>', "none")
        changes = ", ".join(f"{key} {stored.get(key, 0)}" for key in ("created", "updated", "deleted", "unchanged"))
        rarer = {"recreated": "re-created (an immutable field changed)", "adopted": "adopted"}
        changes += "".join(f", {word} {stored[key]}" for key, word in rarer.items() if stored.get(key))
        refused = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
            (r.get("kind"), "/".join(filter(None, (r.get("namespace"), r.get("name")))), r.get("action"),
             r.get("since"), r.get("message")) for r in backend.engine_refused or []))
        idle = format_html('<p class="engine-idle">{}</p>', stored["idle"]) if stored.get("idle") else ""
        return format_html(
            '{}<table class="engine-objects"><thead><tr><th scope="col">Kind</th><th scope="col">Objects</th></tr>'
            "</thead><tbody>{}</tbody></table><p>Last run: {}.</p>{}",
            idle, rows, changes,
            format_html('<p>Refused by the cluster in the last run (every other object was written):</p>'
                        '<table class="engine-refused"><thead><tr><th scope="col">Kind</th><th scope="col">Name</th>'
                        '<th scope="col">Action</th><th scope="col">Since</th><th scope="col">The server said</th>'
                        "</tr></thead><tbody>{}</tbody></table>", refused) if refused else "",
        )

    @admin.action(description="Reconcile engine objects now", permissions=["change"])
    def reconcile_engine(self, request, queryset):
        for backend in queryset:
            level, text = reconcile_backend(backend)
            self.message_user(request, text, level)


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _ago(moment) -> str:
    now = timezone.now()
    if (now - moment).total_seconds() < 60:
        return "less than a minute ago"
    return f"{timesince(moment, now, depth=1)} ago"


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    """Read-only: nodes come from the clusters; change them with `label node` or in the cluster."""

    list_display = ["name", "backend", "status", "gpu_product", "gpu_used", "gpu_total", "sharing", "last_seen"]
    list_filter = ["backend", "status", "gpu_product", "sharing"]
    search_fields = ["name"]
    list_select_related = ["backend"]


@admin.register(ConfigRevision)
class ConfigRevisionAdmin(ReadOnlyAdmin):
    list_display = ["number", "kind", "name", "action", "author_name", "created_at", "description"]
    list_display_links = ["number", "name"]
    list_filter = ["kind", "action"]
    search_fields = ["name", "description", "author_name"]
    readonly_fields = ["kind", "number", "name", "action", "author_name", "created_at", "description",
                       "changes", "pretty_document"]
    fields = readonly_fields
    actions = ["roll_back", "roll_back_before"]

    def lookup_allowed(self, lookup, value, request=None):
        return lookup == "name" or super().lookup_allowed(lookup, value, request)

    @admin.display(description="Document")
    def pretty_document(self, obj):
        return pre(obj.document)

    @admin.display(description="Changes against the previous revision")
    def changes(self, obj):
        return format_html('<pre class="osmo-json">{}</pre>', history.unified_diff(obj.kind, obj.number)
                           or "No differences.")

    @admin.action(description="Roll back to the selected revision (writes a new revision)",
                  permissions=["view"])
    def roll_back(self, request, queryset):
        self._roll_back(request, queryset, before=False)

    @admin.action(description="Roll back to before the selected revision (deletes what it created)",
                  permissions=["view"])
    def roll_back_before(self, request, queryset):
        self._roll_back(request, queryset, before=True)

    def _roll_back(self, request, queryset, *, before: bool):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one revision to roll back to.", messages.ERROR)
            return
        revision = queryset.get()
        model = {ConfigKind.POOL: "pool", ConfigKind.POD_TEMPLATE: "podtemplate", ConfigKind.ROLE: "role",
                 ConfigKind.DEPARTMENT: "department", ConfigKind.PROJECT: "project"}.get(revision.kind,
                                                                                        "resourcevalidation")
        if not request.user.has_perm(f"pools.change_{model}"):
            self.message_user(request, f"You may not change {revision.kind} configuration.", messages.ERROR)
            return
        try:
            result = writes.rollback(revision.kind, revision.number, before=before, author=request.user)
        except ConfigError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return
        self.message_user(request, f"{result.summary()}. {result.impact_text()}".removesuffix(". "), messages.SUCCESS)


# Roles, assignments and tokens register their own admin pages.
