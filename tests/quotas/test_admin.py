"""The admin for departments and projects: the form and its inlines are one document, checked and saved through
the configuration write path (a numbered revision each), refused with the write path's message."""

import html

import pytest

from pools.config import writes
from pools.models import ConfigKind, ConfigRevision, Department, Pool, Project, Quota
from tests.test_admin import form_data

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quota_world")]  # what admin_client's pages show


def revisions(kind, name):
    return list(ConfigRevision.objects.filter(kind=kind, name=name).order_by("number").values_list("action",
                                                                                                 flat=True))


def inline(data: dict, prefix: str, rows: list[dict]) -> dict:
    """`data` with the inline `prefix` holding exactly `rows` as new forms (after its existing ones)."""
    existing = int(data[f"{prefix}-INITIAL_FORMS"])
    for index, row in enumerate(rows, start=existing):
        data.update({f"{prefix}-{index}-{key}": value for key, value in row.items()})
    data[f"{prefix}-TOTAL_FORMS"] = str(existing + len(rows))
    return data


def new_project_data(admin_client, **quota) -> dict:
    page = admin_client.get("/admin/pools/project/add/")
    assert page.status_code == 200
    data = form_data(page)
    data.update({"name": "robotics", "department": str(Department.objects.get(name="research").pk),
                 "description": "made in the admin", "namespace": "", "default_node_pools": "training, inference",
                 "_save": "Save"})
    inline(data, "quotas", [{"pool": str(pool_pk("training")), "gpu_deserved": "2", "gpu_limit": "",
                             "gpu_weight": "3", "cpu_deserved": "16", "cpu_limit": "", "cpu_weight": "2",
                             "memory_deserved": "64Gi", "memory_limit": "", "memory_weight": "2", **quota}])
    inline(data, "members", [{"kind": "user", "name": "alice"}, {"kind": "role", "name": "osmo-training"}])
    return data


def pool_pk(name):
    return Pool.objects.get(name=name).pk


def test_a_project_added_in_the_admin_with_a_quota_is_a_numbered_revision(admin_client):
    response = admin_client.post("/admin/pools/project/add/", new_project_data(admin_client))

    assert response.status_code == 302, response.context and response.context["errors"]
    assert revisions(ConfigKind.PROJECT, "robotics") == ["create"]
    document = writes.export(ConfigKind.PROJECT, "robotics")
    assert document["namespace"] == "proj-robotics"
    assert document["default_node_pools"] == ["training", "inference"]
    assert document["members"] == {"users": ["alice"], "roles": ["osmo-training"]}
    assert document["resources"] == [{"node_pool": "training",
                                      "gpu": {"deserved": 2, "limit": -1, "over_quota_weight": "High"},
                                      "cpu": {"deserved": 16000, "limit": -1, "over_quota_weight": "Medium"},
                                      "memory": {"deserved": 64 * 2**30, "limit": -1, "over_quota_weight": "Medium"}}]


def test_a_project_s_quota_edited_in_the_admin_is_a_numbered_revision(admin_client):
    url = f"/admin/pools/project/{Project.objects.get(name='vision').pk}/change/"
    data = form_data(admin_client.get(url))
    index = next(key.split("-")[1] for key, value in data.items()
                 if key.startswith("quotas-") and key.endswith("-pool") and value == pool_pk("training"))
    assert data[f"quotas-{index}-cpu_deserved"] == "500m" and data[f"quotas-{index}-memory_deserved"] == "1Gi"
    data[f"quotas-{index}-gpu_deserved"] = "6.5"

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.context and response.context["errors"]
    assert revisions(ConfigKind.PROJECT, "vision") == ["create", "update"]
    row = Quota.objects.get(project__name="vision", pool__name="training")
    assert (row.gpu_deserved, row.gpu_limit, row.gpu_weight, row.cpu_deserved) == (6.5, 16, 3, 500)


def test_a_project_saved_unchanged_writes_no_revision(admin_client):
    url = f"/admin/pools/project/{Project.objects.get(name='vision').pk}/change/"
    before = writes.export(ConfigKind.PROJECT, "vision")
    assert admin_client.post(url, form_data(admin_client.get(url))).status_code == 302
    assert revisions(ConfigKind.PROJECT, "vision") == ["create"]
    assert writes.export(ConfigKind.PROJECT, "vision") == before


def test_a_quota_deserving_more_than_its_limit_is_refused_with_the_write_path_s_message(admin_client):
    data = new_project_data(admin_client, gpu_deserved="8", gpu_limit="4")
    count = ConfigRevision.objects.count()

    response = admin_client.post("/admin/pools/project/add/", data)

    assert response.status_code == 200
    assert "deserved 8 is above its limit 4" in response.content.decode()
    assert ConfigRevision.objects.count() == count
    assert not Project.objects.filter(name="robotics").exists()


def test_an_edit_the_write_path_refuses_changes_nothing(admin_client):
    url = f"/admin/pools/project/{Project.objects.get(name='vision').pk}/change/"
    data = form_data(admin_client.get(url))
    index = next(key.split("-")[1] for key, value in data.items()
                 if key.startswith("quotas-") and key.endswith("-pool") and value == pool_pk("training"))
    data[f"quotas-{index}-gpu_deserved"] = "20"  # above its limit of 16, and above the department's 12
    before = writes.export(ConfigKind.PROJECT, "vision")

    response = admin_client.post(url, data)

    assert response.status_code == 200
    assert "deserved 20 is above its limit 16" in response.content.decode()
    assert writes.export(ConfigKind.PROJECT, "vision") == before
    assert revisions(ConfigKind.PROJECT, "vision") == ["create"]


def test_a_field_the_admin_cannot_read_is_refused_on_its_field(admin_client):
    response = admin_client.post("/admin/pools/project/add/", new_project_data(admin_client, memory_deserved="lots"))
    assert response.status_code == 200
    assert "is not memory such as 512Gi" in response.content.decode()
    assert not Project.objects.filter(name="robotics").exists()


def test_projects_deserving_more_than_their_department_are_refused(admin_client):
    data = new_project_data(admin_client, gpu_deserved="5")  # vision deserves 8 of research's 12
    response = admin_client.post("/admin/pools/project/add/", data)
    assert response.status_code == 200
    assert "its projects deserve 13 GPUs of pool training, more than the department&#x27;s 12 GPUs" in \
        response.content.decode()


def test_a_department_added_with_a_quota_is_a_numbered_revision(admin_client):
    data = form_data(admin_client.get("/admin/pools/department/add/"))
    data.update({"name": "platform", "description": "", "default_node_pools": "training", "_save": "Save"})
    inline(data, "quotas", [{"pool": str(pool_pk("inference")), "gpu_deserved": "16", "gpu_limit": "32",
                             "gpu_weight": "", "cpu_deserved": "", "cpu_limit": "", "cpu_weight": "2",
                             "memory_deserved": "", "memory_limit": "", "memory_weight": "2"}])

    response = admin_client.post("/admin/pools/department/add/", data)

    assert response.status_code == 302, response.context and response.context["errors"]
    assert revisions(ConfigKind.DEPARTMENT, "platform") == ["create"]
    assert writes.export(ConfigKind.DEPARTMENT, "platform")["resources"] == [
        {"node_pool": "inference", "gpu": {"deserved": 16, "limit": 32, "over_quota_weight": "None"}}]


def test_deleting_in_the_admin_goes_through_the_write_path(admin_client):
    vision = Project.objects.get(name="vision")
    response = admin_client.post(f"/admin/pools/project/{vision.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert revisions(ConfigKind.PROJECT, "vision") == ["create", "delete"]
    product = Department.objects.get(name="product")
    page = admin_client.get(f"/admin/pools/department/{product.pk}/delete/")
    assert "it holds projects nlp" in page.content.decode()


def test_a_pool_s_own_project_is_read_only_in_the_admin(admin_client):
    writes.import_document(ConfigKind.POOL, {"pools": {"training": {
        **writes.export(ConfigKind.POOL, "training")["pools"]["training"],
        "resources": {"gpu": {"guarantee": 4, "maximum": 8}}}}}, author="tests")
    own = Project.objects.get(name="training")
    url = f"/admin/pools/project/{own.pk}/change/"
    assert admin_client.post(url, form_data(admin_client.get(url))).status_code == 403


def test_the_list_pages_answer(admin_client):
    for url in ("/admin/pools/project/", "/admin/pools/department/"):
        page = admin_client.get(url)
        assert page.status_code == 200
        assert "research" in page.content.decode()


@pytest.mark.parametrize("field, value", [("gpu_deserved", "\uff11"), ("gpu_deserved", "NaN"),
                                          ("cpu_deserved", "\u0664"), ("memory_deserved", "\u0661Gi")])
def test_a_quota_typed_in_other_digits_or_as_nan_is_refused_naming_it(admin_client, field, value):
    """Decimal reads a fullwidth 1 as 1 and "NaN" as a number that no comparison takes (a 500 before)."""
    response = admin_client.post("/admin/pools/project/add/", new_project_data(admin_client, **{field: value}))
    assert response.status_code == 200
    assert f"{value!r} is not" in html.unescape(response.content.decode())
    assert not Project.objects.filter(name="robotics").exists()


def test_a_new_quota_row_starts_at_the_weight_a_missing_row_means_and_a_member_row_at_user(admin_client):
    """A missing quota row means weight Medium (pools.models.quotas): the inline's new row says the same, not None
    (never borrow); a new member row names a user, with no blank kind to pick."""
    page = admin_client.get("/admin/pools/project/add/").content.decode()
    template = page[page.index('id="quotas-empty"'):]
    assert '<option value="2" selected>Medium</option>' in template[:template.index('id="members-group"')]
    members = page[page.index('id="members-empty"'):]
    assert '<option value="user" selected>' in members and '<option value="" ' not in members.split("</select>")[0]
