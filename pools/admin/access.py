"""Admin for roles (saved through the configuration write path, so every edit is a revision),
role assignments and tokens (listed and revoked here, never created: secrets are shown once by the
API or `manage.py token create`)."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from pools.access import assignments
from pools.access.documents import ROLE_FIELDS, role_to_document, split_pool_actions, with_pool_actions
from pools.admin.base import ReadOnlyAdmin, VersionedAdmin, validated
from pools.admin.forms import JSONDocumentField, NameListField
from pools.models import AccessToken, AuditEvent, ConfigKind, Pool, Role, RoleAssignment

NO_GROUP = "none"


class GroupListField(NameListField):
    """The identity-provider groups that map to a role, one per line or comma separated: blank is None (the group
    named like the role), `none` alone is no group at all (an empty list)."""

    def prepare_value(self, value):
        if value is None:
            return ""
        return NO_GROUP if value == [] else super().prepare_value(value)

    def to_python(self, value):
        names = super().to_python(value)
        if not names:
            return None
        return [] if [name.lower() for name in names] == [NO_GROUP] else names


class RoleForm(forms.ModelForm):
    pools = forms.ModelMultipleChoiceField(
        Pool.objects.order_by("name"), to_field_name="name", required=False, widget=forms.CheckboxSelectMultiple,
        help_text="The role's holders may use exactly the ticked pools (each one writes the policy action "
                  "POST /api/pool/NAME). A role named osmo-TEAM also grants every pool whose name begins "
                  "with TEAM, ticked or not.")
    policies = JSONDocumentField(required=False, empty=list, label="Other policy rules",
                                 help_text='[{"actions": [{"base": "http", "path": "/api/pool/team*", '
                                           '"method": "post"}]}]; a path starting with ! denies. The ticked '
                                           "pools above are added to these rules when saved.")
    external_roles = GroupListField(label="Identity-provider groups",
                                    help_text="Groups whose members hold this role when they sign in through the "
                                              "identity provider, one per line or comma separated (vision-team, "
                                              f"ml-admins); empty: the group named like the role; {NO_GROUP}: no "
                                              "group.")

    class Meta:
        model = Role
        fields = ["name", *ROLE_FIELDS]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pool_names = list(Pool.objects.order_by("name").values_list("name", flat=True))
        self.stored = self.instance.policies or []  # saving the form overwrites the instance's
        self.picked, self.initial["policies"] = split_pool_actions(self.stored, self.pool_names)
        self.initial["pools"] = self.picked

    def merged_policies(self) -> list[dict]:
        """The rules of the JSON field with the ticked pools' actions; as stored when neither changed."""
        typed, rest = split_pool_actions(self.cleaned_data.get("policies") or [], self.pool_names)
        ticked = [pool.name for pool in self.cleaned_data.get("pools") or ()]
        pools = list(dict.fromkeys([*ticked, *typed]))
        if self.instance.pk and (set(pools), rest) == (set(self.picked), self.initial["policies"]):
            return self.stored
        return with_pool_actions(rest, sorted(pools))

    def document(self, name: str) -> dict:
        stored = {key: self.cleaned_data.get(key) for key in ROLE_FIELDS}
        stored["description"] = stored["description"] or ""
        stored["policies"] = self.merged_policies()
        return role_to_document(name, stored)

    def clean(self):
        data = super().clean()
        name = data.get("name") or self.instance.name
        if name and not self.errors:
            validated(ConfigKind.ROLE, self.document(name), name)
        return data


HOLDER = "holder"  # ?holder=USER on the add page (the user page's link): one more row with that user


def _holder(request):
    name = request.GET.get(HOLDER)
    return get_user_model().objects.filter(username=name).first() if name else None


class AssignmentInline(admin.TabularInline):
    model = RoleAssignment
    extra = 0
    fields = ["user", "source", "assigned_by", "assigned_at"]
    readonly_fields = ["source", "assigned_by", "assigned_at"]
    autocomplete_fields = ["user"]
    verbose_name_plural = "Holders"

    def get_extra(self, request, obj=None, **kwargs):
        return 1 if obj is None and _holder(request) is not None else 0


@admin.register(Role)
class RoleAdmin(VersionedAdmin):
    config_kind = ConfigKind.ROLE
    form = RoleForm
    list_display = ["name", "description", "sync_mode", "immutable", "updated_at"]
    list_filter = ["sync_mode", "immutable"]
    search_fields = ["name", "description"]
    readonly_fields = ["grants", "revisions"]
    inlines = [AssignmentInline]
    fieldsets = [
        (None, {"fields": ["name", "description", "pools", "grants", "external_roles", "sync_mode"]}),
        ("Policy JSON and flags (advanced)",
         {"classes": ["collapse"], "fields": ["policies", "immutable"]}),
        ("History", {"fields": ["revisions"]}),
    ]

    @admin.display(description="Holders may use")
    def grants(self, obj):
        if not obj or not obj.pk:
            return "-"
        rules = obj.rules()
        if rules.unusable:
            return format_html(
                '<div class="osmo-warning"><strong>This role is left out for its holders</strong> (it grants nothing) '
                "until its paths are fixed: {}</div>",
                format_html_join("; ", "{} ({})", rules.unusable))
        rows = [(pool, grant.reason) for pool in Pool.objects.order_by("name").values_list("name", flat=True)
                if (grant := rules.pool_grant(pool)) is not None]
        return format_html_join("", '<div class="osmo-grant"><strong>{}</strong>: {}</div>', rows) or (
            "No pool (besides the default pool, open to everyone signed in).")

    def save_model(self, request, obj, form, change):
        self._import(request, obj, form.document(obj.name))

    def get_formset_kwargs(self, request, obj, inline, prefix):
        kwargs = super().get_formset_kwargs(request, obj, inline, prefix)
        holder = _holder(request) if isinstance(inline, AssignmentInline) and not obj.pk else None
        if holder is not None and request.method == "GET":
            kwargs["initial"] = [{"user": holder.pk}]
        return kwargs

    def response_add(self, request, obj, post_url_continue=None):
        holder = _holder(request)
        if holder is not None and "_save" in request.POST:  # back to the user page it came from
            held = obj.assignments.filter(user=holder).exists()
            messages.success(request, f"Role {obj.name} added" + (f"; {holder.get_username()} holds it." if held else
                                                                  f"; {holder.get_username()} does not hold it."))
            return HttpResponseRedirect(reverse("admin:auth_user_change", args=[holder.pk]))
        return super().response_add(request, obj, post_url_continue)

    def save_formset(self, request, form, formset, change):
        instances = formset.save(commit=False)
        assignments.add([(a.user, form.instance) for a in instances if a.pk is None], by=request.user.get_username())
        for instance in instances:
            if instance.pk is not None:
                instance.save()
        for instance in formset.deleted_objects:
            instance.delete()
            assignments.revoked(instance.user, [form.instance.name])


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "all_roles", "created_at", "expires_at", "last_used_at"]
    list_filter = ["all_roles"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["user", "name", "prefix", "all_roles", "roles", "created_by", "created_at", "expires_at",
                       "last_used_at"]
    fields = readonly_fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """Read-only: audit rows are never added, changed or deleted by hand (pools.models.audit)."""

    list_display = ["at", "actor", "actor_kind", "token", "address", "kind", "object", "action", "summary"]
    list_filter = ["kind", "action", "actor_kind"]
    search_fields = ["actor", "object", "summary", "request_id"]
    date_hierarchy = "at"
