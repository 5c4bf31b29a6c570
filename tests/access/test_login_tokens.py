"""Login tokens: `POST /api/auth/jwt/access_token {"token"}` exchanges a personal token for a short-lived JWT,
accepted as `Authorization: Bearer` with exactly the roles and scoping of the token it came from."""

import base64
import datetime as dt
import json
import time

import jwt as pyjwt
import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tests.access.conftest import VISIBLE, give
from tests.access.test_tokens import bearer, create, visible

pytestmark = pytest.mark.django_db
EXCHANGE = "/api/auth/jwt/access_token"


def claims(login_token: str) -> dict:
    """The JWT's claims read as OSMO's CLI reads them: the middle part, base64 without checking."""
    payload = login_token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=="))


def exchange(secret, client=None):
    return (client or APIClient()).post(EXCHANGE, {"token": secret}, format="json")


def test_an_access_token_is_exchanged_for_a_short_lived_signed_login_token(client_as):
    secret = create(client_as("teammate")).json()["token"]

    answered = exchange(secret)

    assert answered.status_code == 200, answered.content
    body = answered.json()
    assert set(body) == {"token", "expires_at", "name"} and body["name"] == "teammate"
    read = claims(body["token"])
    assert read["name"] == "teammate" and read["sub"] == "teammate" and read["osmo_token_name"] == "laptop"
    assert read["roles"] == ["osmo-team"]
    assert read["exp"] == body["expires_at"] and 0 < read["exp"] - time.time() <= 300
    assert pyjwt.get_unverified_header(body["token"])["alg"] == "HS256"
    assert visible(bearer(body["token"])) == VISIBLE["teammate"]


def test_a_refresh_posts_the_same_path_and_needs_no_csrf(client_as):
    secret = create(client_as("teammate")).json()["token"]
    first = exchange(secret).json()["token"]

    again = exchange(secret, APIClient(enforce_csrf_checks=True))

    assert again.status_code == 200 and again.json()["token"].count(".") == 2
    assert create(bearer(first), "minted-by-jwt").status_code == 201  # a write, without CSRF


def test_a_restricted_tokens_login_token_stays_restricted(client_as, teammate):
    give(teammate, "sim-users")
    restricted = create(client_as("teammate"), "restricted", roles=["sim-users"]).json()["token"]

    login_token = exchange(restricted).json()["token"]

    assert claims(login_token)["roles"] == ["sim-users"]
    assert visible(bearer(login_token)) == {"default", "sim-a"}
    wider = create(bearer(login_token), "wider", roles=["osmo-team"])
    assert wider.status_code == 400 and wider.json()["field"] == "roles"


def test_a_staff_users_restricted_login_token_is_not_staff(client_as, staff):
    give(staff, "osmo-team")
    restricted = exchange(create(client_as("staff"), roles=["osmo-team"]).json()["token"]).json()["token"]
    full = exchange(create(client_as("staff"), "full").json()["token"]).json()["token"]

    assert bearer(restricted).get("/api/configs/pool/").status_code == 403
    assert bearer(full).get("/api/configs/pool/").status_code == 200


def test_a_revoked_tokens_login_token_is_refused_at_once_and_cannot_be_refreshed(client_as):
    owner = client_as("teammate")
    secret = create(owner).json()["token"]
    login_token = exchange(secret).json()["token"]
    assert bearer(login_token).get("/api/profile/").status_code == 200

    assert owner.delete("/api/auth/access_token/laptop").status_code == 204

    refused = bearer(login_token).get("/api/profile/")
    assert refused.status_code == 401 and refused.json()["field"] == "Authorization"
    again = exchange(secret)
    assert again.status_code == 401 and again.json()["field"] == "token"
    # A new token of the same name is another token: the old login token stays refused.
    create(owner)
    assert bearer(login_token).get("/api/profile/").status_code == 401


def test_a_login_token_stops_with_its_users_deactivation_and_its_tokens_expiry(client_as, teammate):
    from pools.models import AccessToken

    login_token = exchange(create(client_as("teammate")).json()["token"]).json()["token"]
    # By hand: an expiry already past (or a minute away) is a time no door makes pass.
    AccessToken.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert "expired" in bearer(login_token).get("/api/profile/").json()["detail"]
    AccessToken.objects.update(expires_at=timezone.now() + dt.timedelta(days=1))
    teammate.is_active = False
    teammate.save()
    assert bearer(login_token).get("/api/profile/").status_code == 401


def test_a_login_token_never_outlives_its_access_token(client_as):
    from pools.models import AccessToken

    secret = create(client_as("teammate")).json()["token"]
    soon = timezone.now() + dt.timedelta(seconds=60)
    # By hand: an expiry already past (or a minute away) is a time no door makes pass.
    AccessToken.objects.update(expires_at=soon)

    assert exchange(secret).json()["expires_at"] == int(soon.timestamp())


# A lifetime of 0 makes a login token whose `exp` is the second it was signed in, which every later check finds
# past (PyJWT refuses exp <= now): expired without waiting for a clock.
@override_settings(ACCESS_LOGIN_TOKEN_SECONDS=0)
def test_an_expired_login_token_is_refused_with_how_to_get_another(client_as):
    login_token = exchange(create(client_as("teammate")).json()["token"]).json()["token"]

    refused = bearer(login_token).get("/api/profile/")

    assert refused.status_code == 401 and "/api/auth/jwt/access_token" in refused.json()["detail"]


@pytest.mark.parametrize("forged", [
    # Signed with another key, and unsigned ("alg": "none"): both refused.
    pyjwt.encode({"sub": "staff", "name": "staff", "tid": 1, "iat": int(time.time()),
                  "exp": int(time.time()) + 60, "iss": "osmo-pools", "aud": "osmo-pools-api"}, "another-key-" * 4),
    pyjwt.encode({"sub": "staff", "name": "staff", "tid": 1, "iat": int(time.time()),
                  "exp": int(time.time()) + 60, "iss": "osmo-pools", "aud": "osmo-pools-api"}, None, algorithm="none"),
    "a.b.c",
])
def test_a_forged_login_token_is_refused(shared_node_pools, forged):
    refused = bearer(forged).get("/api/profile/")

    assert refused.status_code == 401 and refused.json()["field"] == "Authorization"


def test_a_login_token_naming_another_users_token_is_refused(client_as, teammate, nobody):
    from pools.access import login_tokens

    mine = create(client_as("nobody"), "mine").json()["token"]
    theirs_id = exchange(create(client_as("teammate")).json()["token"]).json()["token"]
    read = claims(theirs_id)
    forged = pyjwt.encode({**read, "sub": "nobody"}, login_tokens._key(), algorithm="HS256")

    assert bearer(forged).get("/api/profile/").status_code == 401
    assert bearer(exchange(mine).json()["token"]).get("/api/profile/").json()["id"] == "nobody"


@pytest.mark.parametrize(("body", "status"), [({"token": "osmo_not-a-token"}, 401), ({"token": 12}, 401),
                                              ({}, 401), ({"token": "x" * 10_000}, 401)])
def test_a_bad_exchange_is_refused_naming_the_field(shared_node_pools, body, status):
    refused = APIClient().post(EXCHANGE, body, format="json")

    assert refused.status_code == status and refused.json()["field"] == "token"
