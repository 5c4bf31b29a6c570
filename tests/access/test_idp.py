"""Sign-in from an authenticating proxy's headers, group-to-role mapping by sync mode, and CSRF on
session writes."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import ConfigKind, RoleAssignment
from tests.access.conftest import VISIBLE, give

pytestmark = pytest.mark.django_db
User = get_user_model()
PROXY = "10.0.0.7"
HEADER_LOGIN = override_settings(ACCESS_HEADER_LOGIN=True, ACCESS_TRUSTED_PROXIES=["10.0.0.0/24", "::1"])


def via_proxy(client, user="alice", groups="", address=PROXY, path="/api/profile/"):
    return client.get(path, REMOTE_ADDR=address, HTTP_X_FORWARDED_USER=user, HTTP_X_FORWARDED_GROUPS=groups)


def roles_of(username: str) -> set[str]:
    return set(RoleAssignment.objects.filter(user__username=username).values_list("role__name", flat=True))


def test_header_sign_in_is_off_by_default_and_the_headers_are_ignored(shared_node_pools):
    response = via_proxy(APIClient())

    assert response.status_code == 401
    assert not User.objects.filter(username="alice").exists()


@HEADER_LOGIN
def test_the_proxy_signs_a_new_user_in_with_the_role_named_like_their_group(shared_node_pools):
    response = via_proxy(APIClient(), groups="osmo-team, staff-ish")

    assert response.status_code == 200, response.content
    assert response.json()["id"] == "alice"
    assert {pool["name"] for pool in response.json()["pools"]} == VISIBLE["teammate"]
    assert RoleAssignment.objects.get(user__username="alice").source == "idp"
    assert not User.objects.get(username="alice").has_usable_password()


@HEADER_LOGIN
@pytest.mark.parametrize("address", ["10.0.1.7", "127.0.0.1", "not-an-ip", ""])
def test_header_sign_in_is_refused_from_any_other_address(shared_node_pools, address):
    response = via_proxy(APIClient(), address=address)

    assert response.status_code == 403
    assert response.json()["field"] == "X-Forwarded-User"
    assert not User.objects.filter(username="alice").exists()


@HEADER_LOGIN
def test_a_forged_header_cannot_take_over_a_signed_in_session(shared_node_pools, nobody):
    client = APIClient()
    client.force_login(nobody)

    assert via_proxy(client, user="ops", address="192.168.1.1").status_code == 403
    assert client.get("/api/profile/").json()["id"] == "nobody"


@HEADER_LOGIN
def test_an_ipv6_proxy_address_is_trusted_when_listed(shared_node_pools):
    response = via_proxy(APIClient(), address="::1")

    assert response.status_code == 200 and response.json()["id"] == "alice"


@HEADER_LOGIN
@override_settings(ACCESS_HEADER_USER="X-Auth-Request-User", ACCESS_HEADER_GROUPS="X-Auth-Request-Groups")
def test_the_header_names_are_settings(shared_node_pools):
    response = APIClient().get("/api/profile/", REMOTE_ADDR=PROXY, HTTP_X_AUTH_REQUEST_USER="bob",
                               HTTP_X_AUTH_REQUEST_GROUPS="osmo-team")

    assert response.status_code == 200 and response.json()["roles"] == ["osmo-team"]


@HEADER_LOGIN
def test_an_api_request_signs_in_on_its_own_in_a_few_reads(shared_node_pools, django_assert_max_num_queries):
    client = APIClient()
    via_proxy(client, groups="osmo-team")

    # the account, the roles to sync and those held (nothing to write), then the profile's own reads: the roles,
    # the pools, the profile's defaults; no session
    with django_assert_max_num_queries(6):
        response = via_proxy(client, groups="osmo-team")
    assert response.status_code == 200 and response.json()["roles"] == ["osmo-team"]
    assert "sessionid" not in response.cookies


@HEADER_LOGIN
def test_import_mode_adds_roles_and_never_removes_them(shared_node_pools):
    client = APIClient()
    via_proxy(client, groups="osmo-team")
    via_proxy(client, groups="")

    assert roles_of("alice") == {"osmo-team"}


@HEADER_LOGIN
def test_force_mode_adds_and_removes_by_the_mapped_groups_at_every_sign_in(shared_node_pools):
    writes.import_document(ConfigKind.ROLE, {"name": "vision", "sync_mode": "force",
                                              "external_roles": ["vision-researchers"]})
    client = APIClient()

    via_proxy(client, groups="vision-researchers")
    assert roles_of("alice") == {"vision"}
    via_proxy(client, groups="vision")  # the role's own name is not mapped when external_roles is set
    assert roles_of("alice") == set()


@HEADER_LOGIN
def test_force_mode_removes_a_role_assigned_by_hand_too(shared_node_pools, django_user_model):
    writes.import_document(ConfigKind.ROLE, {"name": "vision", "sync_mode": "force"})
    give(django_user_model.objects.create_user("alice"), "vision")

    via_proxy(APIClient(), groups="others")

    assert roles_of("alice") == set()


@HEADER_LOGIN
def test_ignore_mode_leaves_the_role_alone(shared_node_pools, django_user_model):
    writes.import_document(ConfigKind.ROLE, {"name": "vision", "sync_mode": "ignore"})
    writes.import_document(ConfigKind.ROLE, {"name": "audit", "sync_mode": "ignore"})
    give(django_user_model.objects.create_user("alice"), "vision")

    via_proxy(APIClient(), groups="audit")

    assert roles_of("alice") == {"vision"}


@HEADER_LOGIN
def test_an_overlong_user_name_from_the_proxy_is_refused_not_a_crash(shared_node_pools):
    response = via_proxy(APIClient(), user="u" * 151)

    assert response.status_code == 403 and "150" in response.json()["detail"]


@HEADER_LOGIN
def test_an_inactive_user_cannot_sign_in_through_the_proxy(shared_node_pools, django_user_model):
    django_user_model.objects.create_user("alice", is_active=False)

    assert via_proxy(APIClient()).status_code == 403


@HEADER_LOGIN
def test_a_different_user_header_replaces_the_session_user(shared_node_pools):
    client = APIClient()
    via_proxy(client, user="alice")

    assert via_proxy(client, user="bob").json()["id"] == "bob"


def test_local_password_sign_in_still_works(shared_node_pools, nobody):
    client = Client()
    response = client.post("/accounts/login/", {"username": "nobody", "password": "pw-nobody-1"})

    assert response.status_code == 302
    assert client.get("/api/profile/").json()["id"] == "nobody"


# ---- CSRF on session writes --------------------------------------------------------------------------------

def test_a_session_write_without_a_csrf_token_is_refused(shared_node_pools, teammate):
    client = Client(enforce_csrf_checks=True)
    client.force_login(teammate)

    response = client.post("/api/auth/access_token/x", {"expires_at": "2099-01-01"}, content_type="application/json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_a_session_write_with_the_csrf_token_goes_through(shared_node_pools, teammate):
    client = Client(enforce_csrf_checks=True)
    client.force_login(teammate)
    client.cookies["csrftoken"] = "b" * 32

    response = client.delete("/api/auth/access_token/x", HTTP_X_CSRFTOKEN="b" * 32)

    assert response.status_code == 404  # past CSRF and permission: the token simply does not exist


def test_a_staff_session_write_to_roles_needs_csrf_too(shared_node_pools, staff):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)

    response = client.post("/api/auth/user", {"id": "x"}, content_type="application/json")

    assert response.status_code == 403
    assert not User.objects.filter(username="x").exists()


def test_signing_out_is_a_post_that_needs_csrf(shared_node_pools, nobody):
    client = Client(enforce_csrf_checks=True)
    client.force_login(nobody)

    assert client.post("/accounts/logout/").status_code == 403
    assert client.get("/api/profile/").json()["id"] == "nobody"  # still signed in


@HEADER_LOGIN
def test_a_proxy_signed_page_session_write_needs_csrf(shared_node_pools):
    client = Client(enforce_csrf_checks=True)
    via_proxy(client, groups="osmo-team", path="/")  # a page: a session, as a browser behind the proxy keeps

    response = client.post("/accounts/logout/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_USER="alice",
                           HTTP_X_FORWARDED_GROUPS="osmo-team")

    assert response.status_code == 403


@HEADER_LOGIN
def test_an_api_request_with_the_header_is_signed_in_on_its_own_without_a_session_or_csrf(shared_node_pools):
    """OSMO's CLI with `--method dev` sends only the header and keeps no cookie: its JSON writes go through."""
    client = Client(enforce_csrf_checks=True)

    response = client.post("/api/auth/access_token/x", {"expires_at": "2099-01-01"}, content_type="application/json",
                           REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_USER="alice", HTTP_X_FORWARDED_GROUPS="osmo-team")

    assert response.status_code in (201, 400), response.content  # past sign-in and CSRF (400: the expiry's range)
    assert "sessionid" not in response.cookies
    assert client.get("/api/profile/").status_code in (401, 403)  # nothing was remembered


@HEADER_LOGIN
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_header_signed_api_write_that_is_not_json_is_refused(shared_node_pools, content_type):
    """What a page on another site can make a browser send through the proxy without a CORS preflight."""
    client = Client(enforce_csrf_checks=True)
    extra = {"content_type": content_type} if content_type else {}

    response = client.post("/api/auth/access_token/x", "expires_at=2099-01-01" if content_type else None,
                           REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_USER="alice", **extra)

    assert response.status_code == 403 and response.json()["field"] == "Content-Type"


@HEADER_LOGIN
def test_an_api_request_with_the_header_from_elsewhere_is_still_refused(shared_node_pools):
    response = Client().post("/api/auth/access_token/x", {"expires_at": "2099-01-01"},
                             content_type="application/json", REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_USER="alice")

    assert response.status_code == 403 and response.json()["field"] == "X-Forwarded-User"
