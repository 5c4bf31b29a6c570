"""The Django admin for configuration: every edit goes through the import path, is a numbered
revision, and is refused exactly as an import would be."""

import json

import pytest
from django import forms
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from pools.config import writes
from pools.models import Backend, ConfigKind, ConfigRevision, Platform, PodTemplate, Pool, ResourceValidation

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("defaults")]  # what admin_client's pages show

VARIABLES = {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"}


def form_data(response) -> dict:
    """The POST data a browser would send back for the admin form rendered in `response`, unchanged."""
    data = {}

    def add(form):
        for field in form:
            value = field.value()
            if isinstance(field.field, forms.BooleanField):
                if value:
                    data[field.html_name] = "on"
            else:
                data[field.html_name] = "" if value is None else value

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        add(inline.formset.management_form)
        for form in inline.formset.forms:
            add(form)
    return data


def inline_prefix(response) -> str:
    [inline] = response.context["inline_admin_formsets"]
    return inline.formset.prefix


def new_pool_data(admin_client, **pool_fields) -> dict:
    """A complete add-pool form with one platform `gpu` in the inline, built from the add page."""
    page = admin_client.get("/admin/pools/pool/add/")
    assert page.status_code == 200
    prefix = inline_prefix(page)
    data = form_data(page)
    data.update({
        "name": "admin-pool",
        "description": "made in the admin",
        "backend": str(Backend.objects.get(name="default").pk),
        "default_platform": "gpu",
        "common_default_variables": json.dumps(VARIABLES),
        "common_resource_validations": "default_cpu, default_memory",
        "common_pod_template": "default_ctrl, default_user",
        "default_exit_actions": "{}",
        "action_permissions": "{}",
        "resources": "{}",
        "topology_keys": "[]",
        "node_selector": "{}",
        f"{prefix}-TOTAL_FORMS": "1",
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
        f"{prefix}-0-name": "gpu",
        f"{prefix}-0-description": "GPU nodes",
        f"{prefix}-0-override_pod_template": "gpu_toleration",
        f"{prefix}-0-resource_validations": "default_gpu",
        f"{prefix}-0-default_variables": '{"USER_GPU": 1}',
        f"{prefix}-0-allowed_mounts": "/data, /scratch",
        "_save": "Save",
    })
    data.update(pool_fields)
    return data


def revisions_of(kind, name):
    return ConfigRevision.objects.filter(kind=kind, name=name).order_by("number")


def text(response) -> str:
    return response.content.decode()


def errors(response):
    """What the admin form in `response` complains about, for assertion messages."""
    if response.context is None or "adminform" not in response.context:
        return response.status_code
    found = dict(response.context["adminform"].form.errors)
    for inline in response.context.get("inline_admin_formsets", []):
        found["inline"] = [inline.formset.non_form_errors(), inline.formset.errors]
    return found


# ---- pages render -----------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "/admin/",
    "/admin/pools/pool/",
    "/admin/pools/pool/add/",
    "/admin/pools/podtemplate/",
    "/admin/pools/podtemplate/add/",
    "/admin/pools/resourcevalidation/",
    "/admin/pools/resourcevalidation/add/",
    "/admin/pools/backend/",
    "/admin/pools/backend/add/",
    "/admin/pools/configrevision/",
])
def test_it_renders_each_configuration_page_for_staff(admin_client, url):
    response = admin_client.get(url)

    assert response.status_code == 200
    # The page it was asked for, whole: its own title as its heading, and the footer of the layout.
    assert f"<h1>{escape(response.context['title'])}</h1>" in text(response)
    assert text(response).rstrip().endswith("</html>")


def test_it_has_no_separate_platform_admin_because_platforms_are_inline(admin_client):
    assert admin_client.get("/admin/pools/platform/").status_code == 404
    page = admin_client.get("/admin/pools/pool/add/")
    assert inline_prefix(page) == "platforms"


@pytest.mark.parametrize(("model", "name"), [
    (Pool, "default"), (PodTemplate, "default_ctrl"), (ResourceValidation, "default_cpu"), (Backend, "default"),
])
def test_it_renders_the_change_page_of_each_default_object(admin_client, model, name):
    obj = model.objects.get(name=name)

    response = admin_client.get(f"/admin/pools/{model._meta.model_name}/{obj.pk}/change/")

    assert response.status_code == 200
    assert name in text(response)


def test_it_sends_a_member_who_is_not_staff_to_the_login_page(client, member, defaults):
    client.force_login(member)

    response = client.get("/admin/pools/pool/")

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


# ---- adding a pool ----------------------------------------------------------------------------------

def test_it_adds_a_pool_with_its_inline_platform_as_one_create_revision(admin_client, staff):
    before = ConfigRevision.objects.count()

    response = admin_client.post("/admin/pools/pool/add/", new_pool_data(admin_client))

    assert response.status_code == 302, errors(response)
    pool = Pool.objects.get(name="admin-pool")
    assert pool.description == "made in the admin"
    assert pool.default_platform == "gpu"
    assert pool.common_pod_template == ["default_ctrl", "default_user"]
    assert pool.common_resource_validations == ["default_cpu", "default_memory"]
    assert pool.common_default_variables == VARIABLES
    [platform] = Platform.objects.filter(pool=pool)
    assert platform.name == "gpu"
    assert platform.override_pod_template == ["gpu_toleration"]
    assert platform.resource_validations == ["default_gpu"]
    assert platform.default_variables == {"USER_GPU": 1}
    assert platform.allowed_mounts == ["/data", "/scratch"]
    assert ConfigRevision.objects.count() == before + 1
    [revision] = revisions_of(ConfigKind.POOL, "admin-pool")
    assert revision.action == "create"
    assert revision.author == staff
    assert revision.document["platforms"]["gpu"]["override_pod_template"] == ["gpu_toleration"]
    assert revision.document["default_platform"] == "gpu"


def test_it_refuses_a_pool_whose_default_platform_is_not_in_the_inline(admin_client):
    before = ConfigRevision.objects.count()

    response = admin_client.post("/admin/pools/pool/add/", new_pool_data(admin_client, default_platform="cpu"))

    assert response.status_code == 200
    assert "default_platform" in text(response)
    assert "is not one of the pool" in text(response)
    assert not Pool.objects.filter(name="admin-pool").exists()
    assert not Platform.objects.filter(name="gpu").exists()
    assert ConfigRevision.objects.count() == before


def test_it_refuses_a_pool_that_references_a_missing_pod_template_and_names_it(admin_client):
    before = ConfigRevision.objects.count()
    data = new_pool_data(admin_client)
    data["platforms-0-override_pod_template"] = "gpu_toleration, h100_template"

    response = admin_client.post("/admin/pools/pool/add/", data)

    assert response.status_code == 200
    assert "h100_template" in text(response)
    assert "do not exist" in text(response)
    assert not Pool.objects.filter(name="admin-pool").exists()
    assert ConfigRevision.objects.count() == before


def test_it_refuses_malformed_json_in_the_pool_variables_with_line_and_column(admin_client):
    before = ConfigRevision.objects.count()

    response = admin_client.post("/admin/pools/pool/add/",
                                 new_pool_data(admin_client, common_default_variables='{"USER_CPU": 1,}'))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "common_default_variables" in errors
    message = " ".join(errors["common_default_variables"])
    assert "line 1, column 16" in message
    assert "line 1, column 16" in text(response)
    assert '{"USER_CPU": 1,}' in text(response).replace("&quot;", '"')  # the typed text is kept
    assert not Pool.objects.filter(name="admin-pool").exists()
    assert ConfigRevision.objects.count() == before


def test_it_refuses_malformed_json_in_a_platforms_variables(admin_client):
    data = new_pool_data(admin_client)
    data["platforms-0-default_variables"] = '{"USER_GPU": 1'

    response = admin_client.post("/admin/pools/pool/add/", data)

    assert response.status_code == 200
    assert "line 1, column" in text(response)
    assert not Pool.objects.filter(name="admin-pool").exists()


# ---- changing a pool --------------------------------------------------------------------------------

def test_it_records_an_update_revision_when_the_default_pool_description_is_edited(admin_client, staff):
    pool = Pool.objects.get(name="default")
    page = admin_client.get(f"/admin/pools/pool/{pool.pk}/change/")
    data = form_data(page)
    data["description"] = "Every node no other pool claims"
    data["_save"] = "Save"

    response = admin_client.post(f"/admin/pools/pool/{pool.pk}/change/", data)

    assert response.status_code == 302, errors(response)
    pool.refresh_from_db()
    assert pool.description == "Every node no other pool claims"
    assert list(Platform.objects.filter(pool=pool).values_list("name", flat=True)) == ["default"]
    create, update = revisions_of(ConfigKind.POOL, "default")
    assert create.action == "create"
    assert update.action == "update"
    assert update.author == staff
    assert update.document["description"] == "Every node no other pool claims"


def test_it_writes_no_revision_when_the_pool_is_saved_unchanged(admin_client):
    pool = Pool.objects.get(name="default")
    data = form_data(admin_client.get(f"/admin/pools/pool/{pool.pk}/change/"))
    data["_save"] = "Save"
    before = ConfigRevision.objects.count()

    response = admin_client.post(f"/admin/pools/pool/{pool.pk}/change/", data)

    assert response.status_code == 302, errors(response)
    assert ConfigRevision.objects.count() == before


def test_it_removes_a_platform_ticked_for_deletion_in_the_inline(admin_client, staff):
    writes.import_document(ConfigKind.POOL, {"pools": {"two": {
        "backend": "default", "default_platform": "main", "platforms": {"main": {}, "spare": {}}}}})
    pool = Pool.objects.get(name="two")
    page = admin_client.get(f"/admin/pools/pool/{pool.pk}/change/")
    data = form_data(page)
    [spare] = [form for form in page.context["inline_admin_formsets"][0].formset.forms
               if form.instance.name == "spare"]
    data[f"{spare.prefix}-DELETE"] = "on"
    data["_save"] = "Save"

    response = admin_client.post(f"/admin/pools/pool/{pool.pk}/change/", data)

    assert response.status_code == 302, errors(response)
    assert list(Platform.objects.filter(pool=pool).values_list("name", flat=True)) == ["main"]
    update = revisions_of(ConfigKind.POOL, "two").last()
    assert update.action == "update"
    assert list(update.document["platforms"]) == ["main"]


def test_it_saves_blank_optional_json_fields_as_empty_values(admin_client):
    data = new_pool_data(admin_client, default_exit_actions="", action_permissions="", resources="",
                         topology_keys="", node_selector="")
    data["platforms-0-default_variables"] = ""

    response = admin_client.post("/admin/pools/pool/add/", data)

    assert response.status_code == 302, errors(response)
    pool = Pool.objects.get(name="admin-pool")
    assert (pool.default_exit_actions, pool.action_permissions, pool.resources) == ({}, {}, {})
    assert (pool.topology_keys, pool.node_selector) == ([], {})
    assert Platform.objects.get(pool=pool).default_variables == {}


def test_it_makes_the_pool_name_read_only_on_the_change_page(admin_client):
    pool = Pool.objects.get(name="default")
    page = admin_client.get(f"/admin/pools/pool/{pool.pk}/change/")
    assert "name" not in page.context["adminform"].form.fields
    assert "name" in admin_client.get("/admin/pools/pool/add/").context["adminform"].form.fields
    data = form_data(page)
    data.update({"name": "renamed", "_save": "Save"})

    response = admin_client.post(f"/admin/pools/pool/{pool.pk}/change/", data)

    assert response.status_code == 302
    assert Pool.objects.filter(name="default").exists()
    assert not Pool.objects.filter(name="renamed").exists()


def test_it_shows_the_effective_configuration_and_recent_revisions_on_the_pool_page(admin_client):
    pool = Pool.objects.get(name="default")

    response = admin_client.get(f"/admin/pools/pool/{pool.pk}/change/")

    assert response.status_code == 200
    page = text(response)
    assert "Effective configuration" in page
    assert "ephemeral-storage" in page
    assert "Recent revisions" in page
    revision = ConfigRevision.objects.get(kind=ConfigKind.POOL, name="default")
    assert f"r{revision.number} create" in page
    assert f"/admin/pools/configrevision/{revision.pk}/change/" in page


# ---- deleting ---------------------------------------------------------------------------------------

def test_it_shows_that_a_used_template_cannot_be_deleted_and_names_the_pool(admin_client):
    template = PodTemplate.objects.get(name="default_user")

    response = admin_client.get(f"/admin/pools/podtemplate/{template.pk}/delete/")

    assert response.status_code == 200
    page = text(response)
    assert "Cannot delete" in page
    assert "pool default" in page


def test_it_does_not_delete_a_used_template_when_the_deletion_is_confirmed(admin_client):
    template = PodTemplate.objects.get(name="default_user")
    before = ConfigRevision.objects.count()

    response = admin_client.post(f"/admin/pools/podtemplate/{template.pk}/delete/", {"post": "yes"})

    assert response.status_code == 400
    assert "Cannot delete" in text(response)
    assert PodTemplate.objects.filter(name="default_user").exists()
    assert ConfigRevision.objects.count() == before


def test_it_refuses_to_delete_the_default_pool(admin_client):
    pool = Pool.objects.get(name="default")
    before = ConfigRevision.objects.count()

    page = admin_client.get(f"/admin/pools/pool/{pool.pk}/delete/")
    response = admin_client.post(f"/admin/pools/pool/{pool.pk}/delete/", {"post": "yes"})

    assert page.status_code == 200
    assert "Cannot delete" in text(page)
    assert "default pool" in text(page)
    assert response.status_code == 400
    assert Pool.objects.filter(name="default").exists()
    assert Platform.objects.filter(pool=pool).exists()
    assert ConfigRevision.objects.count() == before


def test_it_refuses_the_bulk_delete_action_for_the_default_pool(admin_client):
    pool = Pool.objects.get(name="default")

    response = admin_client.post("/admin/pools/pool/", {
        "action": "delete_selected", "_selected_action": [pool.pk], "index": 0, "post": "yes"})

    assert Pool.objects.filter(name="default").exists()
    assert response.status_code == 200
    assert "Cannot delete" in text(response) and "default pool" in text(response)


def test_it_deletes_an_unused_template_and_records_a_delete_revision(admin_client, staff):
    template = PodTemplate.objects.get(name="gpu_toleration")
    body = template.body

    page = admin_client.get(f"/admin/pools/podtemplate/{template.pk}/delete/")
    response = admin_client.post(f"/admin/pools/podtemplate/{template.pk}/delete/", {"post": "yes"})

    assert page.status_code == 200
    assert "Cannot delete" not in text(page)
    assert response.status_code == 302
    assert not PodTemplate.objects.filter(name="gpu_toleration").exists()
    revision = revisions_of(ConfigKind.POD_TEMPLATE, "gpu_toleration").last()
    assert revision.action == "delete"
    assert revision.author == staff
    assert revision.document == body


def test_it_deletes_a_pool_other_than_default_with_its_platforms(admin_client, staff):
    admin_client.post("/admin/pools/pool/add/", new_pool_data(admin_client))
    pool = Pool.objects.get(name="admin-pool")

    response = admin_client.post(f"/admin/pools/pool/{pool.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Pool.objects.filter(name="admin-pool").exists()
    assert not Platform.objects.filter(pool_id=pool.pk).exists()
    assert revisions_of(ConfigKind.POOL, "admin-pool").last().action == "delete"


# ---- pod templates ----------------------------------------------------------------------------------

def test_it_adds_a_pod_template_as_a_create_revision(admin_client, staff):
    body = {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}}}

    response = admin_client.post("/admin/pools/podtemplate/add/", {"name": "l40s", "body": json.dumps(body),
                                                                   "_save": "Save"})

    assert response.status_code == 302, errors(response)
    assert PodTemplate.objects.get(name="l40s").body == body
    [revision] = revisions_of(ConfigKind.POD_TEMPLATE, "l40s")
    assert (revision.action, revision.author) == ("create", staff)


def test_it_refuses_a_pod_template_with_a_jinja_syntax_error(admin_client):
    body = {"spec": {"containers": [{"name": "x", "resources": {"limits": {"cpu": "{{USER_CPU"}}}]}}
    before = ConfigRevision.objects.count()

    response = admin_client.post("/admin/pools/podtemplate/add/", {"name": "broken", "body": json.dumps(body),
                                                                   "_save": "Save"})

    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert "broken" in text(response)
    assert "refused" in text(response)
    assert not PodTemplate.objects.filter(name="broken").exists()
    assert ConfigRevision.objects.count() == before


def test_it_refuses_a_template_change_that_would_break_a_pool_using_it(admin_client):
    template = PodTemplate.objects.get(name="default_user")
    body = {"spec": {"nodeSelector": {"team": "{{UNDEFINED_VARIABLE}}"}}}
    before = ConfigRevision.objects.count()

    response = admin_client.post(f"/admin/pools/podtemplate/{template.pk}/change/",
                                 {"body": json.dumps(body), "_save": "Save"})

    assert response.status_code == 200
    assert "UNDEFINED_VARIABLE" in text(response)
    template.refresh_from_db()
    assert "nodeSelector" not in template.body["spec"]
    assert ConfigRevision.objects.count() == before


# ---- revisions --------------------------------------------------------------------------------------

def test_it_redirects_the_pool_history_button_to_that_pools_revisions(admin_client):
    writes.import_document(ConfigKind.POOL, {"pools": {"other": {
        "backend": "default", "default_platform": "main", "platforms": {"main": {}}}}})
    document = writes.export(ConfigKind.POOL, "default")
    document["pools"]["default"]["description"] = "changed"
    writes.import_document(ConfigKind.POOL, document, name="default")
    pool = Pool.objects.get(name="default")

    response = admin_client.get(f"/admin/pools/pool/{pool.pk}/history/")

    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith("/admin/pools/configrevision/?")
    listing = admin_client.get(location)
    assert listing.status_code == 200
    shown = list(listing.context["cl"].result_list)
    assert sorted(revision.number for revision in shown) == sorted(
        revisions_of(ConfigKind.POOL, "default").values_list("number", flat=True))
    assert len(shown) == 2
    assert {(revision.kind, revision.name) for revision in shown} == {(ConfigKind.POOL, "default")}


def test_it_shows_the_diff_against_the_previous_revision_on_a_revision_page(admin_client):
    document = writes.export(ConfigKind.POOL, "default")
    document["pools"]["default"]["description"] = "Catch-all"
    [number] = writes.import_document(ConfigKind.POOL, document, name="default").revisions
    revision = ConfigRevision.objects.get(kind=ConfigKind.POOL, number=number)

    response = admin_client.get(f"/admin/pools/configrevision/{revision.pk}/change/")

    assert response.status_code == 200
    page = text(response).replace("&quot;", '"')
    assert "Changes against the previous revision" in page
    assert '+  "description": "Catch-all",' in page
    assert '-  "description": "Default pool",' in page


def test_it_rolls_back_a_pool_with_the_admin_action(admin_client, staff):
    original = ConfigRevision.objects.get(kind=ConfigKind.POOL, name="default")
    document = writes.export(ConfigKind.POOL, "default")
    document["pools"]["default"]["description"] = "changed"
    document["pools"]["default"]["platforms"]["extra"] = {}
    writes.import_document(ConfigKind.POOL, document, name="default")
    before = ConfigRevision.objects.count()

    response = admin_client.post("/admin/pools/configrevision/", {
        "action": "roll_back", "_selected_action": [original.pk], "index": 0})

    assert response.status_code == 302
    pool = Pool.objects.get(name="default")
    assert pool.description == "Default pool"
    assert list(Platform.objects.filter(pool=pool).values_list("name", flat=True)) == ["default"]
    assert ConfigRevision.objects.count() == before + 1
    newest = revisions_of(ConfigKind.POOL, "default").last()
    assert newest.action == "rollback"
    assert newest.author == staff
    assert str(original.number) in newest.description


def test_it_refuses_to_roll_back_two_revisions_at_once(admin_client):
    pks = list(ConfigRevision.objects.filter(kind=ConfigKind.POD_TEMPLATE).values_list("pk", flat=True)[:2])
    before = ConfigRevision.objects.count()

    response = admin_client.post("/admin/pools/configrevision/", {
        "action": "roll_back", "_selected_action": pks, "index": 0}, follow=True)

    assert response.status_code == 200
    assert "exactly one revision" in text(response)
    assert ConfigRevision.objects.count() == before


# ---- query counts -----------------------------------------------------------------------------------

def test_it_lists_5_or_50_pools_in_the_admin_with_the_same_number_of_queries(admin_client):
    def queries_for_changelist() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get("/admin/pools/pool/").status_code == 200
        return len(queries)

    body = {"backend": "default", "default_platform": "main", "platforms": {"main": {}, "spare": {}}}
    writes.import_document(ConfigKind.POOL, {"pools": {f"pool-{i:03d}": dict(body) for i in range(5)}})
    few = queries_for_changelist()
    writes.import_document(ConfigKind.POOL, {"pools": {f"more-{i:03d}": dict(body) for i in range(45)}})
    many = queries_for_changelist()

    assert many == few
