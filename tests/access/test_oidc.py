"""OpenID Connect sign-in, end to end against the stand-in provider in tests/oidc_provider.py: the browser's
trips are made by hand (our site through Django's test client, the provider over real HTTP), and our site talks
to the provider over real HTTP for its discovery document, keys and tokens."""

from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model

from pools.models import AuditEvent, RoleAssignment
from tests.oidc_provider import Provider
from tests.support.journey import config

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider(settings):
    with Provider() as running:
        settings.OIDC_ISSUER = running.issuer
        settings.OIDC_CLIENT_ID = running.client_id
        settings.OIDC_CLIENT_SECRET = running.client_secret
        settings.OIDC_PROVIDER_NAME = "Example SSO"
        yield running


def to_provider(client, next_url: str = "/") -> str:
    """Our sign-in's first leg: the authorization URL the browser is sent to."""
    response = client.get("/accounts/oidc/login/", {"next": next_url})
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def back_from_provider(authorize_url: str) -> str:
    """The provider approves at once: the callback URL (path and query) it sends the browser back to."""
    answer = requests.get(authorize_url, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    location = urlsplit(answer.headers["Location"])
    return f"{location.path}?{location.query}"


def sign_in(client, next_url: str = "/"):
    return client.get(back_from_provider(to_provider(client, next_url)))


def signed_in_as(client) -> str | None:
    answer = client.get("/api/profile/")
    return answer.json()["id"] if answer.status_code == 200 else None


def test_a_good_sign_in_creates_the_user_with_pkce_and_maps_groups_to_roles(client, provider):
    config("ROLE", {"name": "osmo-ml", "external_roles": ["ml-team"]})
    config("ROLE", {"name": "osmo-other", "external_roles": ["other-team"]})
    provider.user.update(groups=["ml-team", "unrelated"], given_name="Ada", family_name="Lovelace")

    authorize = to_provider(client, "/nodes/")
    query = parse_qs(urlsplit(authorize).query)
    assert authorize.startswith(f"{provider.issuer}/auth?")
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    response = client.get(back_from_provider(authorize))

    assert response.status_code == 302 and response["Location"] == "/nodes/"
    assert signed_in_as(client) == "ada"
    user = get_user_model().objects.get(username="ada")
    assert not user.has_usable_password() and user.email == "ada@example.com"
    assert (user.first_name, user.last_name) == ("Ada", "Lovelace")
    held = RoleAssignment.objects.filter(user=user).values_list("role__name", "source", "assigned_by")
    assert list(held) == [("osmo-ml", "oidc", "OpenID Connect")]
    verifier = provider.token_requests[-1]["code_verifier"]
    assert 43 <= len(verifier) <= 128  # the provider checked it against the challenge (RFC 7636)
    audit = list(AuditEvent.objects.filter(kind__in=["signin", "role"]).order_by("id").values_list(
        "kind", "action", "actor"))
    assert audit == [("role", "grant", "ada"), ("signin", "success", "ada")]
    assert AuditEvent.objects.get(kind="signin").summary == "signed in by OpenID Connect"


@pytest.mark.parametrize("tamper, words", [
    ({"aud": "another-client"}, "aud"),
    ({"aud": "another-client", "azp": "osmo"}, "aud"),  # Authlib alone lets this one through
    ({"aud": ["another-client", "third"]}, "aud"),
    ({"exp": 1_000_000_000, "iat": 999_999_000}, "expired"),
    ({"iss": "https://impostor.example"}, "iss"),
])
def test_a_token_with_a_wrong_claim_signs_nobody_in(client, provider, tamper, words):
    provider.tamper = tamper
    response = sign_in(client)
    assert response.status_code == 403
    assert words in response.content.decode()
    assert signed_in_as(client) is None
    assert not get_user_model().objects.filter(username="ada").exists()


def test_a_token_signed_by_another_key_signs_nobody_in(client, provider):
    provider.sign_with_stranger = True
    response = sign_in(client)
    assert response.status_code == 403 and b"refused" in response.content
    assert signed_in_as(client) is None


def test_a_replayed_nonce_or_a_replayed_answer_signs_nobody_in(client, provider):
    callback = back_from_provider(to_provider(client))
    assert client.get(callback).status_code == 302
    first_nonce = provider.nonces[-1]
    client.post("/accounts/logout/")

    # The same answer again: its state was spent by the first sign-in.
    assert client.get(callback).status_code == 403
    assert signed_in_as(client) is None
    # A fresh sign-in whose ID token carries the earlier sign-in's nonce.
    provider.tamper = {"nonce": first_nonce}
    response = sign_in(client)
    assert response.status_code == 403 and b"nonce" in response.content
    assert signed_in_as(client) is None


def test_a_group_added_and_removed_between_two_sign_ins_changes_the_roles(client, provider):
    config("ROLE", {"name": "osmo-a", "external_roles": ["a"], "sync_mode": "force"})
    config("ROLE", {"name": "osmo-b", "external_roles": ["b"], "sync_mode": "force"})
    config("ROLE", {"name": "osmo-kept", "external_roles": ["kept"], "sync_mode": "import"})
    provider.user["groups"] = ["a", "kept"]
    assert sign_in(client).status_code == 302
    user = get_user_model().objects.get(username="ada")
    assert set(user.access_roles.values_list("name", flat=True)) == {"osmo-a", "osmo-kept"}
    client.post("/accounts/logout/")

    provider.user["groups"] = ["b"]
    assert sign_in(client).status_code == 302
    # force follows the groups both ways; import only ever adds.
    assert set(user.access_roles.values_list("name", flat=True)) == {"osmo-b", "osmo-kept"}


def test_a_local_account_is_never_taken_over(client, provider, django_user_model):
    django_user_model.objects.create_user("ada", password="break-glass-Pa55")
    response = sign_in(client)
    assert response.status_code == 403 and b"local account" in response.content
    assert signed_in_as(client) is None


def test_the_user_name_claim_and_prefix_are_settings(client, provider, settings):
    settings.OIDC_USERNAME_CLAIM = "email"
    settings.OIDC_USER_PREFIX = "sso:"
    assert sign_in(client).status_code == 302
    assert signed_in_as(client) == "sso:ada@example.com"


def test_an_issuer_that_does_not_match_its_discovery_document_is_refused(client, provider):
    provider.issuer_in_discovery = "https://elsewhere.example/realms/test"
    response = client.get("/accounts/oidc/login/")
    assert response.status_code == 502 and b"discovery" in response.content


def test_next_never_leaves_the_site(client, provider):
    response = sign_in(client, "https://evil.example/")
    assert response.status_code == 302 and response["Location"] == "/"


def test_logout_ends_the_session_at_the_provider_too(client, provider):
    assert sign_in(client).status_code == 302
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert response["Location"].startswith(f"{provider.issuer}/logout?")
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/accounts/login/"]
    assert query["id_token_hint"][0].count(".") == 2
    assert signed_in_as(client) is None


def test_a_password_session_logs_out_here_only(client, provider, django_user_model):
    django_user_model.objects.create_user("local", password="break-glass-Pa55")
    assert client.login(username="local", password="break-glass-Pa55")
    response = client.post("/accounts/logout/")
    assert response["Location"] == "/accounts/login/"


def test_the_sign_in_page_offers_the_provider_only_when_configured(client, settings):
    assert b"oidc-sign-in" not in client.get("/accounts/login/").content
    assert client.get("/accounts/oidc/login/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
    with Provider() as running:
        settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID = running.issuer, running.client_id
        settings.OIDC_PROVIDER_NAME = "Example <SSO>"
        page = client.get("/accounts/login/?next=/nodes/").content.decode()
    assert 'href="/accounts/oidc/login/?next=/nodes/"' in page
    assert "Sign in with Example &lt;SSO&gt;" in page


def test_an_unreachable_provider_is_a_clear_error(client, settings):
    with Provider() as stopped:
        issuer = stopped.issuer
    settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID = issuer, "osmo"
    response = client.get("/accounts/oidc/login/")
    assert response.status_code == 502 and b"cannot be reached" in response.content
