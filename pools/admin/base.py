"""What every versioned kind's admin shares: its revisions, its history link, guarded deletes and saves
through the one write path."""

import json

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from pools.config import writes
from pools.config.kinds import WriteResult
from pools.engine import ConfigError
from pools.models import ConfigRevision

admin.site.site_header = "GPU pools control plane"
admin.site.site_title = "GPU pools"
admin.site.index_title = "Configuration"

ADMIN_AUTHOR_NOTE = "Edited in the admin"


def pre(data) -> str:
    return format_html('<pre class="osmo-json">{}</pre>', json.dumps(data, indent=2, ensure_ascii=False))


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the admin shows and never adds, changes or deletes (they come from elsewhere)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class VersionedAdmin(admin.ModelAdmin):
    """Shared behaviour of the versioned kinds: history, revisions panel, guarded deletes."""

    config_kind: str
    change_form_template = "admin/pools/impact_change_form.html"

    def render_change_form(self, request, context, *args, **kwargs):
        forms_ = [context["adminform"].form] if "adminform" in context else []
        forms_ += [inline.formset for inline in context.get("inline_admin_formsets", ())]
        pending = [form.pending_impact for form in forms_ if getattr(form, "pending_impact", None)]
        if pending:
            context["impact"] = pending[0]
            context["confirm_impact_field"] = CONFIRM_IMPACT
            if len(context["errors"]) == 1:
                context["errors"] = []  # the confirmation is the only thing missing: no "Please correct the error"
        return super().render_change_form(request, context, *args, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "name"] if obj else fields

    @admin.display(description="Recent revisions")
    def revisions(self, obj):
        if not obj or not obj.pk:
            return "-"
        rows = ConfigRevision.objects.filter(kind=self.config_kind, name=obj.name).order_by("-number")[:10]
        if not rows:
            return "-"
        return format_html_join(
            "", '<div><a href="{}">r{} {}</a> by {} at {} {}</div>',
            ((reverse("admin:pools_configrevision_change", args=[r.pk]), r.number, r.action,
              r.author_name or "-", r.created_at.strftime("%Y-%m-%d %H:%M"), r.description) for r in rows),
        )

    def history_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, object_id)
        query = urlencode({"kind__exact": self.config_kind, "name": obj.name if obj else ""})
        return HttpResponseRedirect(f"{reverse('admin:pools_configrevision_changelist')}?{query}")

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms, protected = super().get_deleted_objects(objs, request)
        for obj in objs:
            protected += [f"{obj.name}: {reason}" for reason in writes.deletion_blockers(self.config_kind, obj.name)]
        return deleted, counts, perms, protected

    def delete_view(self, request, object_id, extra_context=None):
        response = super().delete_view(request, object_id, extra_context)
        if request.method == "POST" and (getattr(response, "context_data", None) or {}).get("protected"):
            response.status_code = 400  # refused: the page lists what holds the object
        return response

    def delete_model(self, request, obj):
        writes.delete(self.config_kind, obj.name, author=request.user, description=ADMIN_AUTHOR_NOTE)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)

    def _import(self, request, obj, document) -> WriteResult:
        result = writes.import_document(self.config_kind, document, name=obj.name, author=request.user,
                                         description=ADMIN_AUTHOR_NOTE)
        obj.pk = type(obj).objects.values_list("pk", flat=True).get(name=obj.name)
        if result.backends_created:
            messages.warning(request, result.summary())
        if result.impact_text():
            messages.info(request, result.impact_text())
        return result


# The hidden field of the confirmation step: the token of the impact the admin saw and confirmed.
CONFIRM_IMPACT = "confirm_impact"


def hold_unconfirmed(form, result: WriteResult) -> None:
    """A save that moves nodes between pools waits until the admin has seen that impact and confirmed it: the
    form (or formset) keeps it as `pending_impact`, which VersionedAdmin shows above the form."""
    impact = result.impact
    if impact is not None and impact.moves_nodes and form.data.get(CONFIRM_IMPACT) != impact.token():
        form.pending_impact = impact
        raise forms.ValidationError("Not saved yet: this change moves nodes between pools. Check the figures at the "
                                    "top of the page, then confirm.", code="confirm_impact")


def validated(kind: str, document: dict, name: str) -> WriteResult:
    """What importing `document` would do (writes.validate); a refusal as the form's error."""
    try:
        return writes.validate(kind, document, name=name)
    except ConfigError as exc:
        raise forms.ValidationError(exc.message) from None
