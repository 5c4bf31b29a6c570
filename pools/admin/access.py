"""Admin for roles (saved through the configuration write path, so every edit is a revision),
role assignments and tokens (listed and revoked here, never created: secrets are shown once by the
API or `manage.py token create`)."""

from django import forms
from django.contrib import admin

from pools.access.documents import ROLE_FIELDS, role_to_document
from pools.admin.base import VersionedAdmin, validated
from pools.admin.forms import JSONDocumentField
from pools.models import AccessToken, ConfigKind, Role, RoleAssignment


class RoleForm(forms.ModelForm):
    policies = JSONDocumentField(required=False, empty=list,
                                 help_text='[{"actions": [{"base": "http", "path": "/api/pool/team*", '
                                           '"method": "post"}]}]; a path starting with ! denies.')
    external_roles = JSONDocumentField(required=False, help_text='Identity-provider groups, e.g. ["vision"]; '
                                                                 "leave empty for the group named like the role.")

    class Meta:
        model = Role
        fields = ["name", *ROLE_FIELDS]

    def document(self, name: str) -> dict:
        stored = {key: self.cleaned_data.get(key) for key in ROLE_FIELDS}
        stored["description"] = stored["description"] or ""
        return role_to_document(name, stored)

    def clean(self):
        data = super().clean()
        name = data.get("name") or self.instance.name
        if name and not self.errors:
            validated(ConfigKind.ROLE, self.document(name), name)
        return data


class AssignmentInline(admin.TabularInline):
    model = RoleAssignment
    extra = 0
    fields = ["user", "source", "assigned_by", "assigned_at"]
    readonly_fields = ["source", "assigned_by", "assigned_at"]
    autocomplete_fields = ["user"]


@admin.register(Role)
class RoleAdmin(VersionedAdmin):
    config_kind = ConfigKind.ROLE
    form = RoleForm
    list_display = ["name", "description", "sync_mode", "immutable", "updated_at"]
    list_filter = ["sync_mode", "immutable"]
    search_fields = ["name", "description"]
    readonly_fields = ["revisions"]
    inlines = [AssignmentInline]

    def save_model(self, request, obj, form, change):
        self._import(request, obj, form.document(obj.name))

    def save_formset(self, request, form, formset, change):
        for instance in formset.save(commit=False):
            instance.assigned_by = instance.assigned_by or request.user.get_username()
            instance.save()
        for instance in formset.deleted_objects:
            instance.delete()


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
