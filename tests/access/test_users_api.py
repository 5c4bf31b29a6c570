"""The user and role APIs of seed 000, step 5, as OSMO lists them."""

import pytest
from django.contrib.auth import get_user_model

from pools.models import RoleAssignment
from tests.access.conftest import give

pytestmark = pytest.mark.django_db
User = get_user_model()


def post(client, url, body):
    return client.post(url, body, format="json")


@pytest.fixture
def staff_session_api(client_as):
    """An API client signed in (by session) as `staff`, among the principals of tests/access/conftest.py."""
    return client_as("staff")


def test_it_creates_a_user_with_roles(staff_session_api, staff):
    response = post(staff_session_api, "/api/auth/user", {"id": "alice@example.com", "roles": ["osmo-team"]})

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"] == "alice@example.com"
    assert [(r["name"], r["source"], r["assigned_by"]) for r in body["roles"]] == [("osmo-team", "manual", "ops")]
    assert not User.objects.get(username="alice@example.com").has_usable_password()


def test_it_refuses_a_user_that_exists_with_409(staff_session_api, nobody):
    response = post(staff_session_api, "/api/auth/user", {"id": "nobody"})

    assert response.status_code == 409
    assert response.json() == {"detail": "User 'nobody' already exists", "field": "id"}


@pytest.mark.parametrize(("body", "field"), [({}, "id"), ({"id": ""}, "id"), ({"id": "a b"}, "id"),
                                             ({"id": "a", "roles": "osmo-team"}, "roles"),
                                             ({"id": "a", "roles": ["no-such-role"]}, "roles")])
def test_it_refuses_a_bad_user_body_naming_the_field_and_creates_nothing(staff_session_api, body, field):
    response = post(staff_session_api, "/api/auth/user", body)

    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not User.objects.filter(username="a").exists()


def test_it_refuses_a_body_that_is_not_json_with_line_and_column(staff_session_api):
    response = staff_session_api.post("/api/auth/user", data='{"id": ', content_type="application/json")

    assert response.status_code == 400
    assert "line 1, column" in response.json()["detail"]


def test_it_shows_and_deletes_a_user(staff_session_api, teammate):
    shown = staff_session_api.get("/api/auth/user/teammate")
    deleted = staff_session_api.delete("/api/auth/user/teammate")
    again = staff_session_api.get("/api/auth/user/teammate")

    assert shown.status_code == 200 and [r["name"] for r in shown.json()["roles"]] == ["osmo-team"]
    assert deleted.status_code == 204
    assert again.status_code == 404 and again.json()["field"] == "id"


def test_a_trailing_slash_is_accepted_too(staff_session_api, teammate):
    response = staff_session_api.get("/api/auth/user/teammate/")

    assert response.status_code == 200 and response.json()["id"] == "teammate"


def test_you_cannot_delete_yourself(staff_session_api, staff):
    response = staff_session_api.delete("/api/auth/user/ops")

    assert response.status_code == 400 and "yourself" in response.json()["detail"]
    assert User.objects.filter(username="ops").exists()


def test_it_assigns_and_removes_a_role(staff_session_api, nobody):
    assigned = post(staff_session_api, "/api/auth/user/nobody/roles", {"role_name": "osmo-team"})
    again = post(staff_session_api, "/api/auth/user/nobody/roles", {"role_name": "osmo-team"})
    removed = staff_session_api.delete("/api/auth/user/nobody/roles/osmo-team")
    removed_again = staff_session_api.delete("/api/auth/user/nobody/roles/osmo-team")

    assert assigned.status_code == 201 and assigned.json()["assigned"] is True
    assert again.status_code == 200 and again.json()["assigned"] is False
    assert removed.status_code == 204
    assert removed_again.status_code == 404


@pytest.mark.parametrize(("url", "body", "status", "field"), [
    ("/api/auth/user/nobody/roles", {"role_name": "nope"}, 404, "role_name"),
    ("/api/auth/user/ghost/roles", {"role_name": "osmo-team"}, 404, "id"),
    ("/api/auth/user/nobody/roles", {}, 400, "role_name"),
])
def test_assigning_answers_unknown_users_and_roles_with_a_named_field(staff_session_api, nobody, url, body, status,
                                                                      field):
    response = post(staff_session_api, url, body)

    assert response.status_code == status
    assert response.json()["field"] == field


def test_it_lists_a_roles_users(staff_session_api, teammate, nobody):
    give(nobody, "osmo-team")

    response = staff_session_api.get("/api/auth/roles/osmo-team/users")

    assert response.status_code == 200
    assert [u["id"] for u in response.json()["users"]] == ["nobody", "teammate"]


def test_it_assigns_a_role_to_many_users_saying_which_were_assigned_already_or_failed(staff_session_api, teammate,
                                                                                        nobody):
    response = post(staff_session_api, "/api/auth/roles/osmo-team/users",
                    {"user_ids": ["nobody", "teammate", "ghost", "nobody"]})

    assert response.status_code == 200
    assert response.json() == {"role": "osmo-team", "assigned": ["nobody"], "already_assigned": ["teammate"],
                               "failed": [{"id": "ghost", "detail": "no such user"}]}
    assert RoleAssignment.objects.filter(role__name="osmo-team").count() == 2


def test_bulk_assignment_refuses_a_body_without_a_list(staff_session_api):
    response = post(staff_session_api, "/api/auth/roles/osmo-team/users", {"user_ids": "nobody"})

    assert response.status_code == 400 and response.json()["field"] == "user_ids"


@pytest.mark.parametrize("principal", ["nobody", "teammate", "policy_user"])
def test_users_without_staff_or_an_admin_role_cannot_manage_users(client_as, principal):
    client = client_as(principal)

    assert post(client, "/api/auth/user", {"id": "x"}).status_code == 403
    assert post(client, "/api/auth/user/nobody/roles", {"role_name": "osmo-team"}).status_code == 403
    assert client.get("/api/auth/roles/osmo-team/users").status_code == 403
    assert not User.objects.filter(username="x").exists()


def test_a_role_whose_policies_allow_the_auth_paths_manages_users(client_as, nobody):
    from pools.config import writes
    from pools.models import ConfigKind

    writes.import_document(ConfigKind.ROLE, {"name": "user-managers", "actions": [
        {"base": "http", "path": "/api/auth/*", "method": "*"}]})
    give(nobody, "user-managers")

    response = post(client_as("nobody"), "/api/auth/user", {"id": "x"})

    assert response.status_code == 201 and response.json()["id"] == "x"
    assert User.objects.filter(username="x").exists()


def test_a_user_manager_role_cannot_reach_staff_powers_through_a_staff_user(client_as, nobody, staff):
    from pools.config import writes
    from pools.models import ConfigKind

    writes.import_document(ConfigKind.ROLE, {"name": "user-managers", "actions": [
        {"base": "http", "path": "/api/auth/*", "method": "*"}]})
    give(nobody, "user-managers")
    client = client_as("nobody")

    token = post(client, "/api/auth/user/ops/access_token/t", {"expires_at": "2099-01-01"})
    deleted = client.delete("/api/auth/user/ops")

    assert token.status_code == deleted.status_code == 403
    assert token.json()["detail"] == "Only staff may create a token for a staff user"
    assert User.objects.filter(username="ops").exists()
