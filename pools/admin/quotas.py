"""Admin for departments and projects, with their quotas (and a project's members) inline. The form and its
inlines are one document: before saving, the last inline to clean runs the real write path on it in a
rolled-back transaction (`writes.validate`), so the admin refuses exactly what `config update PROJECT` would
refuse, with the same message; the save is `writes.import_document` (a numbered revision), a delete
`writes.delete`.

Quota amounts are typed as people write them: GPUs as numbers (to hundredths), CPU in cores (`8`, `0.5`,
`500m`), memory as a quantity (`512Gi`) or bytes. A blank deserved leaves that resource without a quota (a
project then deserves none of it, a department the sum of its projects'); a blank limit is no limit.
"""

from decimal import Decimal

from django import forms
from django.contrib import admin
from django.db.models import Count
from django.forms.models import BaseInlineFormSet

from pools.admin.base import VersionedAdmin, validated
from pools.admin.forms import NameListField
from pools.engine import QuantityError, parse_quantity
from pools.models import ConfigKind, Department, Project, ProjectMember, Quota
from pools.models.quotas import MEDIUM
from pools.quotas.documents import RESOURCES, weight_name

WEIGHT_CHOICES = [("", "None"), ("0", "Lowest"), ("1", "Low"), ("2", "Medium"), ("3", "High")]
_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


class AmountField(forms.CharField):
    """One quota amount of `resource` (gpu, cpu or memory), typed as a person writes it and stored in the
    model's unit (GPUs, millicores, bytes). `limit`: blank or -1 is no limit (-1)."""

    def __init__(self, resource: str, *, limit: bool = False, **kwargs):
        self.resource, self.limit = resource, limit
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.TextInput(attrs={"size": 7}))
        super().__init__(**kwargs)

    def to_python(self, value):
        text = (super().to_python(value) or "").strip()
        if not text:
            return -1 if self.limit else None
        if self.limit and text == "-1":
            return -1
        try:
            amount = parse_quantity(text)  # as `config update` reads it: ASCII digits, no NaN (Decimal takes both)
        except QuantityError:
            raise forms.ValidationError(f"{text!r} is not {self._unit()}") from None
        if amount < 0:
            raise forms.ValidationError("Amounts are never negative" + (" (-1 is no limit)" if self.limit else ""))
        if self.resource == "gpu":
            if amount != amount.quantize(Decimal("0.01")):
                raise forms.ValidationError(f"{text} has more than two decimals (GPUs are counted to hundredths)")
            return amount.quantize(Decimal("0.01"))
        amount *= 1000 if self.resource == "cpu" else 1
        if amount != amount.to_integral_value():
            unit = "millicores" if self.resource == "cpu" else "bytes"
            raise forms.ValidationError(f"{text} is not a whole number of {unit}")
        return int(amount)

    def prepare_value(self, value):
        if isinstance(value, str) or value is None:  # what the user typed, shown again as typed
            return value
        if value == -1:
            return "" if self.limit else "-1"
        if self.resource == "gpu":
            return f"{Decimal(value).normalize():f}"
        if self.resource == "cpu":
            return str(value // 1000) if value % 1000 == 0 else f"{value}m"
        for suffix, size in _BINARY:
            if value and value % size == 0:
                return f"{value // size}{suffix}"
        return str(value)

    def _unit(self) -> str:
        return {"gpu": "a number of GPUs", "cpu": "CPU cores such as 8, 0.5 or 500m",
                "memory": "memory such as 512Gi or a number of bytes"}[self.resource]


def _weight_field(label: str) -> forms.TypedChoiceField:
    # A new row starts at Medium: what a missing quota row means (pools.models.quotas), not None (never borrow).
    return forms.TypedChoiceField(choices=WEIGHT_CHOICES, coerce=int, empty_value=None, required=False, label=label,
                                  initial=str(MEDIUM),
                                  help_text="Share of idle capacity above deserved; None: never above deserved, "
                                            "Lowest: may borrow, no over-quota share")


class QuotaForm(forms.ModelForm):
    gpu_deserved = AmountField("gpu", label="GPU deserved")
    gpu_limit = AmountField("gpu", limit=True, label="GPU limit", help_text="Blank: no limit")
    gpu_weight = _weight_field("GPU weight")
    cpu_deserved = AmountField("cpu", label="CPU deserved", help_text="Cores: 8, 0.5 or 500m")
    cpu_limit = AmountField("cpu", limit=True, label="CPU limit", help_text="Blank: no limit")
    cpu_weight = _weight_field("CPU weight")
    memory_deserved = AmountField("memory", label="Memory deserved", help_text="512Gi, or bytes")
    memory_limit = AmountField("memory", limit=True, label="Memory limit", help_text="Blank: no limit")
    memory_weight = _weight_field("Memory weight")

    class Meta:
        model = Quota
        fields = ["pool", *(f"{r}_{part}" for r in RESOURCES for part in ("deserved", "limit", "weight"))]


def _number(value):
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def quota_entries(formset) -> list[dict]:
    """The `resources` list of a document, from the quota inline's cleaned forms."""
    entries = []
    for form in formset.forms:
        data = form.cleaned_data
        if not data or data.get("DELETE"):
            continue
        entry = {"node_pool": data["pool"].name}
        for resource in RESOURCES:
            if data.get(f"{resource}_deserved") is not None:
                entry[resource] = {"deserved": _number(data[f"{resource}_deserved"]),
                                   "limit": _number(data[f"{resource}_limit"]),
                                   "over_quota_weight": weight_name(data[f"{resource}_weight"])}
        entries.append(entry)
    return entries


class UnitFormSet(BaseInlineFormSet):
    """One inline of a department or project. The inlines of one page share `group` (the admin makes the
    classes per request); the last one to clean checks the whole document through the write path."""

    group: list
    admin: "UnitAdmin"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.group.append(self)

    def clean(self):
        super().clean()
        instance = self.instance
        if self is not self.group[-1] or not getattr(instance, "_osmo_form_valid", False):
            return  # the form's own errors are shown on its fields already
        others_valid = all(formset.is_valid() for formset in self.group if formset is not self)
        if not others_valid or any(form.errors for form in self.forms):
            return
        self.document = self.admin.document(instance, {formset.model: formset for formset in self.group})
        validated(self.admin.config_kind, self.document, instance.name)


class QuotaInline(admin.TabularInline):
    model = Quota
    form = QuotaForm
    formset = UnitFormSet
    extra = 0
    verbose_name_plural = "Quotas (per pool; GPUs, CPU cores, memory)"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("pool", "project", "department")

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "pool":  # a plain choice: pools are edited on their own page
            field.widget.can_add_related = field.widget.can_change_related = False
            field.widget.can_view_related = field.widget.can_delete_related = False
        return field


class MemberInline(admin.TabularInline):
    model = ProjectMember
    formset = UnitFormSet
    fields = ["kind", "name"]
    extra = 0
    verbose_name_plural = "Members (a user by user name, or a role whose holders are members)"

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "kind":  # a new row names a user unless told otherwise (and has no blank choice)
            kwargs["initial"] = ProjectMember.Kind.USER
        return super().formfield_for_dbfield(db_field, request, **kwargs)


class UnitAdmin(VersionedAdmin):
    """What the department and project pages share: one document from the form and its inlines, saved
    once through the write path after every part of it was checked."""

    def get_formsets_with_inlines(self, request, obj=None):
        group: list = []  # the formsets of this one request
        for formset, inline in super().get_formsets_with_inlines(request, obj):
            yield type(formset.__name__, (formset,), {"group": group, "admin": self}), inline

    def save_form(self, request, form, change):
        obj = super().save_form(request, form, change)
        obj._osmo_form_valid = True  # the inlines may now check the whole document
        return obj

    def save_model(self, request, obj, form, change):
        pass  # saved with its inlines, as one document, in save_related

    def save_related(self, request, form, formsets, change):
        self._import(request, form.instance, formsets[-1].document)
        # The admin's change message reads what formset.save() would have recorded.
        for formset in formsets:
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []

    def document(self, instance, formsets: dict) -> dict:
        raise NotImplementedError


class DepartmentForm(forms.ModelForm):
    default_node_pools = NameListField(help_text="Pool names, tried in order, for its projects' work.")

    class Meta:
        model = Department
        fields = ["name", "description", "default_node_pools"]


@admin.register(Department)
class DepartmentAdmin(UnitAdmin):
    config_kind = ConfigKind.DEPARTMENT
    form = DepartmentForm
    inlines = [QuotaInline]
    list_display = ["name", "description", "project_count", "updated_at"]
    search_fields = ["name", "description"]
    fields = ["name", "description", "default_node_pools", "revisions"]
    readonly_fields = ["revisions"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_projects=Count("projects"))

    @admin.display(description="Projects", ordering="n_projects")
    def project_count(self, obj):
        return obj.n_projects

    def document(self, instance, formsets):
        return {"name": instance.name, "description": instance.description,
                "default_node_pools": list(instance.default_node_pools), "resources": quota_entries(formsets[Quota])}


class ProjectForm(forms.ModelForm):
    namespace = forms.CharField(required=False, max_length=63,
                                help_text="Kubernetes namespace of the project's work; blank: proj-NAME.")
    default_node_pools = NameListField(help_text="Pool names, tried in order, for the project's work.")

    class Meta:
        model = Project
        fields = ["name", "department", "description", "namespace", "default_node_pools"]


@admin.register(Project)
class ProjectAdmin(UnitAdmin):
    config_kind = ConfigKind.PROJECT
    form = ProjectForm
    inlines = [QuotaInline, MemberInline]
    list_display = ["name", "department", "namespace", "pool", "member_count", "updated_at"]
    list_filter = ["department"]
    list_select_related = ["department", "pool"]
    search_fields = ["name", "namespace", "description"]
    fields = ["name", "department", "description", "namespace", "default_node_pools", "pool", "revisions"]
    readonly_fields = ["pool", "revisions"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_members=Count("members"))

    @admin.display(description="Members", ordering="n_members")
    def member_count(self, obj):
        return obj.n_members

    def has_change_permission(self, request, obj=None):
        # An OSMO pool's own project follows its pool's resources.gpu: edit the pool instead.
        return super().has_change_permission(request, obj) and not (obj is not None and obj.pool_id)

    def document(self, instance, formsets):
        members: dict[str, list[str]] = {"users": [], "roles": []}
        for form in formsets[ProjectMember].forms:
            if form.cleaned_data and not form.cleaned_data.get("DELETE"):
                members[f"{form.cleaned_data['kind']}s"].append(form.cleaned_data["name"])
        document = {"name": instance.name, "department": instance.department.name,
                    "description": instance.description, "default_node_pools": list(instance.default_node_pools),
                    "members": members, "resources": quota_entries(formsets[Quota])}
        if instance.namespace:
            document["namespace"] = instance.namespace
        return document
