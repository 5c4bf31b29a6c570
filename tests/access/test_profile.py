"""GET /api/profile/ and the "Effective permissions" page: which pools, and the role and rule behind each."""

import pytest
from django.test import Client, override_settings

from pools.models import ConfigKind
from tests.access.conftest import VISIBLE, give

pytestmark = pytest.mark.django_db


def grants_by_pool(client) -> dict:
    response = client.get("/api/profile/")
    assert response.status_code == 200
    return {pool["name"]: [(g["role"], g["rule"]) for g in pool["grants"]] for pool in response.json()["pools"]}


def test_the_profile_names_the_role_and_rule_behind_each_pool(client_as):
    grants = grants_by_pool(client_as("teammate"))

    assert set(grants) == VISIBLE["teammate"]
    assert grants["team-gpu-pool"] == [("osmo-team", "osmo-<team> name rule")]
    assert grants["default"] == [(None, "default pool")]


def test_the_profile_shows_a_policy_grant_with_its_path(client_as):
    grants = grants_by_pool(client_as("policy_user"))

    assert grants["sim-a"] == [("sim-users", "policy POST /api/pool/sim*")]
    assert "sim-secret" not in grants


def test_a_pool_granted_twice_lists_both_reasons(client_as, teammate):
    from pools.config import writes

    writes.import_document(ConfigKind.ROLE, {"name": "gpu", "actions": [
        {"base": "http", "path": "/api/pool/team-gpu*", "method": "POST"}]})
    give(teammate, "gpu")

    assert [role for role, _ in grants_by_pool(client_as("teammate"))["team-gpu-pool"]] == ["gpu", "osmo-team"]


def test_staff_see_every_pool_because_they_are_staff(client_as):
    grants = grants_by_pool(client_as("staff"))

    assert set(grants) == VISIBLE["staff"]
    assert grants["sim-secret"] == [(None, "staff")]


def test_the_profile_says_who_and_with_which_roles(client_as):
    body = client_as("policy_user").get("/api/profile/").json()

    assert (body["id"], body["is_staff"], body["token"], body["roles"]) == ("policy", False, None, ["sim-users"])


@override_settings(ACCESS_DEFAULT_POOL_OPEN=False)
def test_without_the_open_default_pool_a_user_without_roles_has_no_pool(client_as):
    assert grants_by_pool(client_as("nobody")) == {}


def test_the_permissions_page_shows_each_pool_with_its_role_and_rule(client_as):
    response = client_as("teammate").get("/profile/permissions/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "Effective permissions" in html
    assert "team-gpu-pool" in html and "osmo-team" in html and "osmo-&lt;team&gt; name rule" in html
    assert "sim-a" not in html and "other-team-pool" not in html
    assert response.templates[0].name == "access/permissions.html"
    assert "pages/base.html" in [t.name for t in response.templates]


def test_the_permissions_page_tells_a_user_without_pools_what_to_ask_for(client_as):
    with override_settings(ACCESS_DEFAULT_POOL_OPEN=False):
        html = client_as("nobody").get("/profile/permissions/").content.decode()

    assert "No pool" in html


def test_the_permissions_page_sends_an_anonymous_visitor_to_sign_in(shared_node_pools):
    response = Client().get("/profile/permissions/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/profile/permissions/"


def test_an_htmx_request_without_a_session_is_told_where_to_sign_in(shared_node_pools):
    response = Client().get("/profile/permissions/", HTTP_HX_REQUEST="true")

    assert response.status_code == 401
    assert response["HX-Redirect"] == "/accounts/login/?next=/profile/permissions/"


def test_the_login_page_extends_the_base_template(shared_node_pools):
    response = Client().get("/accounts/login/")

    assert response.status_code == 200
    assert "pages/base.html" in [t.name for t in response.templates]
