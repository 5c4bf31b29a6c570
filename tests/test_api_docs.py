"""/api/ lists the endpoints the caller may read; /api/docs/ and /api/docs/redoc/ serve Swagger UI and Redoc
from our own origin (drf-spectacular-sidecar), to signed-in users, with no script or style inline."""

import re

import pytest
from django.contrib.staticfiles import finders
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import ConfigKind
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def signed_in(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def test_the_api_root_answers_anonymous_callers_like_the_rest_of_the_api(client):
    response = client.get("/api/")
    assert response.status_code in (401, 403)
    assert response.json()["detail"]


def test_the_api_root_lists_the_endpoints_a_member_may_read_and_each_answers(member):
    client = signed_in(member)
    root = client.get("/api/").json()
    assert {"pools", "resources", "quotas", "projects", "workloads", "schema", "docs"} <= root.keys()
    assert root["pools"] == "http://testserver/api/pools/"
    assert "users" not in root and "configs_pool" not in root and "config_history" not in root
    for name, url in root.items():
        assert client.get(url).status_code == 200, name


def test_the_api_root_lists_an_admin_endpoint_to_a_role_whose_policy_allows_it(member, defaults):
    writes.import_document(ConfigKind.ROLE, {"name": "pool-readers", "policies": [{"actions": [
        {"base": "http", "path": "/api/configs/pool/*", "method": "get"}]}]}, author="tests")
    run("user", "add-role", member.get_username(), "pool-readers")
    client = signed_in(member)
    root = client.get("/api/").json()
    assert root["configs_pool"] == "http://testserver/api/configs/pool/"
    assert "configs_role" not in root and "users" not in root
    assert client.get(root["configs_pool"]).status_code == 200
    assert client.get("/api/configs/role/").status_code == 403


def test_staff_see_every_endpoint(staff):
    root = signed_in(staff).get("/api/").json()
    assert {"users", "config_history", *(f"configs_{kind.lower()}" for kind in ConfigKind.values)} <= root.keys()


@pytest.mark.parametrize("path", ["/api/docs/", "/api/docs/redoc/"])
def test_the_docs_pages_send_anonymous_visitors_to_sign_in(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize("path", ["/api/docs/", "/api/docs/redoc/"])
def test_the_docs_pages_load_their_assets_from_our_origin_only(member, path):
    client = signed_in(member)
    response = client.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "an asset from another origin"
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "an inline script"
    assets = re.findall(r"(?:src|href)=\"/static/([^\"]+)\"", html)
    assert any("drf_spectacular_sidecar" in asset for asset in assets)
    for asset in assets:
        assert finders.find(asset), asset
    assert 'data-schema-url="/api/schema/?format=json"' in html
    assert 'id="nav-api-docs"' in html and 'aria-current="page">API docs' in html


def test_the_schema_the_docs_read_lists_the_api_root(member):
    schema = signed_in(member).get("/api/schema/?format=json").json()
    assert "/api/" in schema["paths"] and "/api/pools/" in schema["paths"]
