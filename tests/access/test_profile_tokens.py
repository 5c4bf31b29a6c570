"""One's own API tokens on the profile page (issue 26 point 6): created with a name and an expiry, the secret shown
once; listed with expiry and last use; revoked, after which the token is refused. A user neither sees nor
revokes another's tokens, and every form needs its CSRF token."""

import re

import pytest
from django.test import Client
from rest_framework.test import APIClient

from pools.models import AccessToken

pytestmark = pytest.mark.django_db


def browser(user, *, strict: bool = False) -> Client:
    client = Client(enforce_csrf_checks=strict)
    client.force_login(user)
    return client


def csrf_of(page: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_a_user_creates_a_token_on_the_profile_page_and_sees_its_secret_once(teammate):
    client = browser(teammate, strict=True)
    page = client.get("/profile/")
    assert page.status_code == 200
    assert 'id="token-form"' in page.content.decode() and "No token yet" in page.content.decode()

    created = client.post("/profile/tokens/", {"name": "laptop", "days": "7",
                                                "csrfmiddlewaretoken": csrf_of(page.content.decode())})

    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    secret = re.search(r'id="new-token-secret">([^<]+)<', created.content.decode()).group(1)
    assert secret.startswith("osmo_")
    token = AccessToken.objects.get(user=teammate, name="laptop")
    assert (token.expires_at - token.created_at).days in (6, 7) and token.created_by == "teammate"
    again = client.get("/profile/").content.decode()
    assert secret not in again and 'id="token-laptop"' in again and token.prefix in again
    assert "never" in again  # not used yet

    assert bearer(secret).get("/api/profile/").json()["token"] == "laptop"
    used = client.get("/profile/").content.decode()
    token.refresh_from_db()
    assert token.last_used_at is not None and f'datetime="{token.last_used_at:%Y-%m-%dT%H:%M:%S}' in used


def test_a_form_without_its_csrf_token_is_refused(teammate):
    client = browser(teammate, strict=True)

    assert client.post("/profile/tokens/", {"name": "laptop", "days": "7"}).status_code == 403
    assert client.post("/profile/notifications/", {"transitions": ["failed"]}).status_code == 403
    assert not AccessToken.objects.exists()


def test_a_revoked_token_is_refused_at_once(teammate):
    client = browser(teammate)
    page = client.post("/profile/tokens/", {"name": "ci", "days": "30"}).content.decode()
    secret = re.search(r'id="new-token-secret">([^<]+)<', page).group(1)
    assert bearer(secret).get("/api/profile/").status_code == 200

    revoked = client.post("/profile/tokens/ci/revoke/")

    assert revoked.status_code == 302 and revoked["Location"] == "/profile/"
    assert "Token ci revoked" in client.get("/profile/").content.decode()
    refused = bearer(secret).get("/api/profile/")
    assert refused.status_code == 401 and refused.json()["field"] == "Authorization"


def test_bad_token_input_is_shown_on_the_page_with_a_4xx(teammate):
    client = browser(teammate)

    bad_name = client.post("/profile/tokens/", {"name": "no spaces <b>", "days": "7"})
    assert bad_name.status_code == 400 and "&lt;b&gt;" in bad_name.content.decode()
    assert "<b>" not in bad_name.content.decode().split('id="token-form"')[1].split("</form>")[0]
    too_long = client.post("/profile/tokens/", {"name": "laptop", "days": "100000"})
    assert too_long.status_code == 400 and "days must be from 1 to" in too_long.content.decode()
    not_a_number = client.post("/profile/tokens/", {"name": "laptop", "days": "soon"})
    assert not_a_number.status_code == 400 and "whole number" in not_a_number.content.decode()
    assert client.post("/profile/tokens/", {"name": "laptop", "days": "7"}).status_code == 201
    twice = client.post("/profile/tokens/", {"name": "laptop", "days": "7"})
    assert twice.status_code == 409 and "already has a token named" in twice.content.decode()
    huge = client.post("/profile/tokens/", {"name": "x" * 5000, "days": "7"})
    assert huge.status_code == 400
    assert AccessToken.objects.filter(user=teammate).count() == 1


def test_a_user_neither_sees_nor_revokes_anothers_tokens(teammate, policy_user):
    browser(teammate).post("/profile/tokens/", {"name": "teams-laptop", "days": "7"})

    other = browser(policy_user)
    assert "teams-laptop" not in other.get("/profile/").content.decode()
    refused = other.post("/profile/tokens/teams-laptop/revoke/")
    assert refused.status_code == 404 and "has no token named" in refused.content.decode()
    assert AccessToken.objects.filter(user=teammate, name="teams-laptop").exists()
    assert "teams-laptop" not in other.get("/api/auth/access_token/").content.decode()


def test_an_anonymous_visitor_is_sent_to_sign_in(shared_node_pools):
    response = Client().get("/profile/")

    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert Client().post("/profile/tokens/", {"name": "x", "days": "1"}).status_code == 302
    assert not AccessToken.objects.exists()


def test_the_permissions_page_links_to_the_profile(teammate):
    assert 'id="profile-page-link" href="/profile/"' in browser(teammate).get("/profile/permissions/").content.decode()
