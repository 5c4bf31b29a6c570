"""Personal API tokens: shown once, stored hashed, expiring, revocable, carrying a subset of roles."""

import datetime as dt

import pytest
from django.core.management import CommandError
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from pools.access import tokens
from pools.models import AccessToken, RoleAssignment
from tests.access.conftest import VISIBLE, give
from tests.support.commands import run

pytestmark = pytest.mark.django_db
FUTURE = (timezone.now() + dt.timedelta(days=30)).date().isoformat()


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def visible(client) -> set[str]:
    response = client.get("/api/profile/")
    assert response.status_code == 200, response.content
    return {pool["name"] for pool in response.json()["pools"]}


def create(client, name="laptop", **body):
    return client.post(f"/api/auth/access_token/{name}", {"expires_at": FUTURE, **body}, format="json")


@pytest.fixture
def both_roles(teammate):
    return give(teammate, "sim-users")


def test_a_user_creates_a_token_whose_secret_is_shown_once_and_stored_hashed(client_as, teammate):
    response = create(client_as("teammate"))

    assert response.status_code == 201, response.content
    secret = response.json()["token"]
    stored = AccessToken.objects.get(user=teammate, name="laptop")
    assert secret.startswith("osmo_") and len(secret) > 40
    assert secret not in (stored.digest, stored.prefix) and stored.digest == tokens.token_digest(secret)
    listed = client_as("teammate").get("/api/auth/access_token/").json()
    assert [t["name"] for t in listed] == ["laptop"] and "token" not in listed[0]
    assert listed[0]["roles"] is None and listed[0]["prefix"] == secret[:12]


def test_the_api_accepts_a_bearer_token_and_sees_what_its_user_sees(client_as):
    secret = create(client_as("teammate")).json()["token"]

    assert visible(bearer(secret)) == VISIBLE["teammate"]
    assert AccessToken.objects.get().last_used_at is not None


def test_a_bearer_request_needs_no_csrf_token(client_as):
    secret = create(client_as("teammate")).json()["token"]
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

    assert create(client, "second").status_code == 201


def test_an_expired_token_is_refused_with_401(client_as):
    secret = create(client_as("teammate")).json()["token"]
    # By hand: an expiry already past (or a minute away) is a time no door makes pass.
    AccessToken.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    response = bearer(secret).get("/api/profile/")

    assert response.status_code == 401
    assert "expired" in response.json()["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_token_is_refused_at_once(client_as):
    owner = client_as("teammate")
    secret = create(owner).json()["token"]
    assert bearer(secret).get("/api/profile/").status_code == 200

    assert owner.delete("/api/auth/access_token/laptop").status_code == 204

    assert bearer(secret).get("/api/profile/").status_code == 401
    assert owner.delete("/api/auth/access_token/laptop").status_code == 404


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer osmo_not-a-token"])
def test_a_malformed_or_unknown_bearer_token_is_refused(shared_node_pools, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    response = client.get("/api/profile/")

    assert response.status_code == 401
    assert response.json()["field"] == "Authorization"


def test_a_token_restricted_to_one_role_sees_only_that_roles_pools(client_as, both_roles):
    secret = create(client_as("teammate"), roles=["sim-users"]).json()["token"]

    assert visible(client_as("teammate")) == VISIBLE["teammate"] | {"sim-a"}
    assert visible(bearer(secret)) == {"default", "sim-a"}


def test_a_token_cannot_carry_a_role_its_user_does_not_hold(client_as, teammate):
    response = create(client_as("teammate"), roles=["sim-users"])

    assert response.status_code == 400
    assert response.json()["field"] == "roles" and "sim-users" in response.json()["detail"]
    assert not AccessToken.objects.exists()


def test_a_token_loses_a_role_its_user_loses(client_as, both_roles):
    restricted = create(client_as("teammate"), "restricted", roles=["osmo-team"]).json()["token"]
    unrestricted = create(client_as("teammate"), "all").json()["token"]

    RoleAssignment.objects.filter(user=both_roles, role__name="osmo-team").delete()

    assert visible(bearer(restricted)) == {"default"}
    assert visible(bearer(unrestricted)) == {"default", "sim-a"}


def test_a_restricted_token_cannot_mint_a_token_with_more_roles(client_as, both_roles):
    restricted = create(client_as("teammate"), "restricted", roles=["osmo-team"]).json()["token"]

    wider = create(bearer(restricted), "wider", roles=["osmo-team", "sim-users"])
    default = create(bearer(restricted), "default-roles")

    assert wider.status_code == 400 and wider.json()["field"] == "roles"
    assert default.status_code == 201 and default.json()["roles"] == ["osmo-team"]


def test_a_staff_users_token_restricted_to_roles_is_not_staff(client_as, staff):
    give(staff, "osmo-team")
    secret = create(client_as("staff"), roles=["osmo-team"]).json()["token"]
    full = create(client_as("staff"), "full").json()["token"]

    assert bearer(secret).get("/api/configs/pool/").status_code == 403
    assert bearer(full).get("/api/configs/pool/").status_code == 200


def test_a_token_name_is_unique_per_user(client_as):
    create(client_as("teammate"))

    response = create(client_as("teammate"))

    assert response.status_code == 409 and response.json()["field"] == "name"


@pytest.mark.parametrize(("expires_at", "words"), [("tomorrow", "not an ISO date"), ("2001-01-01", "future"),
                                                   ("2030-02-30", "not an ISO date"), (20301231, "not an ISO"),
                                                   ("2999-01-01", "at most 365 days"), (None, "not an ISO")])
def test_the_expiry_must_be_a_date_in_the_allowed_future(client_as, expires_at, words):
    response = create(client_as("teammate"), expires_at=expires_at)

    assert response.status_code == 400
    assert response.json()["field"] == "expires_at" and words in response.json()["detail"]


@pytest.mark.parametrize("name", ["a b", "x" * 129, "-x"])
def test_a_bad_token_name_is_refused(client_as, name):
    response = create(client_as("teammate"), name)

    assert response.status_code == 400 and response.json()["field"] == "name"


def test_the_expiry_is_required(client_as):
    response = client_as("teammate").post("/api/auth/access_token/x", {}, format="json")

    assert response.status_code == 400 and response.json()["field"] == "expires_at"


@override_settings(ACCESS_TOKEN_MAX_DAYS=5)
def test_the_longest_expiry_is_a_setting(client_as):
    assert create(client_as("teammate")).status_code == 400


def test_staff_creates_a_token_for_another_user_and_others_cannot(client_as, teammate, nobody):
    by_staff = client_as("staff").post("/api/auth/user/teammate/access_token/ci", {"expires_at": FUTURE},
                                       format="json")
    by_peer = client_as("nobody").post("/api/auth/user/teammate/access_token/ci2", {"expires_at": FUTURE},
                                       format="json")

    assert by_staff.status_code == 201 and by_staff.json()["user"] == "teammate"
    assert by_staff.json()["created_by"] == "ops"
    assert visible(bearer(by_staff.json()["token"])) == VISIBLE["teammate"]
    assert by_peer.status_code == 403
    listed = client_as("staff").get("/api/auth/user/teammate/access_token/").json()
    assert [t["name"] for t in listed] == ["ci"]
    assert client_as("staff").delete("/api/auth/user/teammate/access_token/ci").status_code == 204


def test_a_user_lists_only_their_own_tokens(client_as, teammate, nobody):
    create(client_as("teammate"))
    create(client_as("nobody"), "mine")

    assert [t["name"] for t in client_as("nobody").get("/api/auth/access_token/").json()] == ["mine"]


# ---- manage.py token ---------------------------------------------------------------------------------------

def token_command(*args) -> str:
    return run("token", *args).strip()


def test_the_token_command_prints_a_working_secret(teammate):
    secret = token_command("create", "teammate", "cli", "--expires-days", "7")

    assert visible(bearer(secret)) == VISIBLE["teammate"]
    token = AccessToken.objects.get(name="cli")
    assert dt.timedelta(days=6) < token.expires_at - timezone.now() <= dt.timedelta(days=7)
    assert "cli" in token_command("list", "teammate")
    token_command("revoke", "teammate", "cli")
    assert not AccessToken.objects.exists()


def test_the_token_command_restricts_roles_and_refuses_bad_input(both_roles):
    secret = token_command("create", "teammate", "sim", "--role", "sim-users")

    assert visible(bearer(secret)) == {"default", "sim-a"}
    with pytest.raises(CommandError, match="no user"):
        token_command("create", "ghost", "x")
    with pytest.raises(CommandError, match="expires-days"):
        token_command("create", "teammate", "x", "--expires-days", "0")
    with pytest.raises(CommandError, match="already has a token"):
        token_command("create", "teammate", "sim")
