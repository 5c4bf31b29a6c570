"""Roles in the Django admin go through the configuration write path; tokens are listed, never made there."""

import json

import pytest

from pools.config import writes
from pools.models import ConfigKind, ConfigRevision, Role
from tests.test_admin import form_data

pytestmark = pytest.mark.django_db


def test_a_role_added_in_the_admin_is_a_numbered_revision(admin_client):
    data = form_data(admin_client.get("/admin/pools/role/add/"))
    data.update({"name": "osmo-vision", "description": "made in the admin", "sync_mode": "force",
                 "policies": json.dumps([{"actions": [{"base": "http", "path": "/api/pool/v*", "method": "post"}]}]),
                 "external_roles": "vision"})

    response = admin_client.post("/admin/pools/role/add/", data)

    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    role = Role.objects.get(name="osmo-vision")
    assert (role.sync_mode, role.external_roles) == ("force", ["vision"])
    assert ConfigRevision.objects.get(kind=ConfigKind.ROLE).document == writes.export(ConfigKind.ROLE, "osmo-vision")


def test_the_admin_refuses_a_bad_policy_as_an_import_would(admin_client):
    data = form_data(admin_client.get("/admin/pools/role/add/"))
    data.update({"name": "r", "sync_mode": "import",
                 "policies": json.dumps([{"actions": [{"base": "http", "path": "/x", "method": "FETCH"}]}])})

    response = admin_client.post("/admin/pools/role/add/", data)

    assert response.status_code == 200
    assert "FETCH" in str(response.context["adminform"].form.errors)
    assert not Role.objects.exists()


def test_an_unchanged_role_saved_in_the_admin_writes_no_revision(admin_client):
    writes.import_document(ConfigKind.ROLE, {"name": "r", "actions": [{"path": "/x", "method": "GET"}]})
    role = Role.objects.get()
    page = admin_client.get(f"/admin/pools/role/{role.pk}/change/")

    response = admin_client.post(f"/admin/pools/role/{role.pk}/change/", form_data(page))

    assert response.status_code == 302
    assert ConfigRevision.objects.filter(kind=ConfigKind.ROLE).count() == 1


def test_tokens_cannot_be_added_in_the_admin(admin_client):
    assert admin_client.get("/admin/pools/accesstoken/add/").status_code == 403
    assert admin_client.get("/admin/pools/accesstoken/").status_code == 200
