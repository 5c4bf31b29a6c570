"""The user page of the admin: the roles a user holds and the projects they are a member of, ticked on and
off in one place, and the pools that gives them. Roles are given and taken through `pools.access.assignments`
(as `manage.py user` and `/api/auth/*` do); project membership through the project's document (a revision)."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import UserChangeForm
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from pools.access import assignments
from pools.admin.access import HOLDER
from pools.admin.base import ADMIN_AUTHOR_NOTE
from pools.config import writes
from pools.models import ConfigKind, Pool, Project, ProjectMember, Role
from pools.models.visibility import Access

User = get_user_model()


def _direct_projects(user):
    return Project.objects.filter(members__kind=ProjectMember.Kind.USER, members__name=user.get_username())


class UserAccessForm(UserChangeForm):
    roles = forms.ModelMultipleChoiceField(
        Role.objects.order_by("name"), required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Tick to give a role, untick to take it away.")
    projects = forms.ModelMultipleChoiceField(
        # An OSMO pool's own project has everyone who may use the pool as members: it is not ticked here.
        Project.objects.filter(pool__isnull=True).order_by("name"), required=False,
        widget=forms.CheckboxSelectMultiple, label="Projects",
        help_text="Projects this user is a member of by name (membership through a role is listed above).")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["roles"].label_from_instance = lambda role: (
            f"{role.name}: {role.description}" if role.description else role.name)
        query = f"?{urlencode({HOLDER: self.instance.get_username()})}" if self.instance.pk else ""
        self.fields["roles"].help_text = format_html(
            'Tick to give a role, untick to take it away. <a href="{}{}" class="osmo-new-role">New role for some '
            "pools, held by this user</a>", reverse("admin:pools_role_add"), query)
        if self.instance.pk:
            self.initial["roles"] = list(Role.objects.filter(assignments__user=self.instance))
            self.initial["projects"] = list(_direct_projects(self.instance).filter(pool__isnull=True))


def _set_projects(request, user, wanted) -> tuple[list[str], list[str]]:
    """Add or remove `user` by name in each project whose membership changes, one project document each."""
    name = user.get_username()
    current = {project.name for project in _direct_projects(user).filter(pool__isnull=True)}
    wanted = {project.name for project in wanted}
    for project in sorted(current ^ wanted):
        document = writes.export(ConfigKind.PROJECT, project)
        users = set(document["members"]["users"])
        document["members"]["users"] = sorted(users | {name} if project in wanted else users - {name})
        writes.import_document(ConfigKind.PROJECT, document, name=project, author=request.user,
                               description=f"{ADMIN_AUTHOR_NOTE}: membership of {name}")
    return sorted(wanted - current), sorted(current - wanted)


def _changes(what: str, added: list[str], removed: list[str]) -> str:
    parts = [f"added {', '.join(added)}" if added else "", f"removed {', '.join(removed)}" if removed else ""]
    return f"{what}: " + "; ".join(part for part in parts if part) if added or removed else ""


admin.site.unregister(User)


@admin.register(User)
class UserAccessAdmin(UserAdmin):
    form = UserAccessForm
    fieldsets = (
        UserAdmin.fieldsets[0],
        ("Access: roles and projects", {"fields": ("roles", "pools", "projects", "projects_through_roles")}),
        *UserAdmin.fieldsets[1:],
    )
    readonly_fields = ["pools", "projects_through_roles"]
    list_display = ["username", "is_staff", "is_active", "role_names", "last_login"]
    list_filter = [*UserAdmin.list_filter, ("role_assignments__role", admin.RelatedOnlyFieldListFilter)]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("role_assignments__role")

    @admin.display(description="Roles")
    def role_names(self, obj):
        return ", ".join(sorted(a.role.name for a in obj.role_assignments.all())) or "-"

    @admin.display(description="May use pools")
    def pools(self, obj):
        if not obj or not obj.pk:
            return "-"
        access = Access(obj)
        if not access.signed_in:
            return "None: the account is inactive."
        if access.is_staff:
            return "Every pool (staff)."
        rows = [(pool, "; ".join(grant.reason for grant in access.pool_grants(pool)))
                for pool in access.filter_pools(Pool.objects.order_by("name")).values_list("name", flat=True)]
        return format_html_join("", '<div class="osmo-grant"><strong>{}</strong>: {}</div>', rows) or "None."

    @admin.display(description="Projects through roles")
    def projects_through_roles(self, obj):
        if not obj or not obj.pk:
            return "-"
        held = Role.objects.filter(assignments__user=obj).values_list("name", flat=True)
        rows = (ProjectMember.objects.filter(kind=ProjectMember.Kind.ROLE, name__in=list(held))
                .select_related("project").order_by("project__name", "name"))
        return format_html_join(", ", '<a href="{}">{}</a> (role {})', (
            (reverse("admin:pools_project_change", args=[row.project_id]), row.project.name, row.name)
            for row in rows)) or "-"

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        if "roles" not in form.cleaned_data:  # the add form: roles are given on the page it leads to
            return
        user = form.instance
        roles = assignments.replace(user, form.cleaned_data["roles"], by=request.user.get_username())
        projects = _set_projects(request, user, form.cleaned_data["projects"])
        summary = [text for text in (_changes("Roles", *roles), _changes("Projects", *projects)) if text]
        if summary:
            messages.info(request, f"{user.get_username()}: " + ". ".join(summary) + ".")
