"""Sign-in through the company's OpenID Connect provider (Keycloak, Okta, Entra ID, Dex...).

The authorization code flow with PKCE (S256), carried out by Authlib's Django client: the provider is found by
its discovery document (OIDC_ISSUER + /.well-known/openid-configuration, whose `issuer` must be OIDC_ISSUER
itself), the ID token's signature is checked against the provider's JWKS, and its issuer, audience (our client
id), expiry and nonce (one per sign-in, kept in the session and spent by it) are checked before anyone is signed
in. Off unless OIDC_ISSUER and OIDC_CLIENT_ID are set; password sign-in stays for break-glass local accounts.

Accounts follow the proxy sign-in's rules (pools.access.idp): the claim OIDC_USERNAME_CLAIM (default
`preferred_username`, then `sub`) names the account OIDC_USER_PREFIX + name, created on first sign-in without a
password, and a local account (one with a password, or a superuser) is never taken over. The OIDC_GROUPS_CLAIM
claim (default `groups`) is mapped onto roles on every sign-in through each role's sync mode, with the
assignment rows' source `oidc`. Logging out of a session that came from the provider also ends the provider's
session (its `end_session_endpoint`, when it has one).
"""

import logging
import unicodedata
from functools import lru_cache
from urllib.parse import urlencode

from authlib.common.errors import AuthlibBaseError
from authlib.integrations.base_client import OAuthError
from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET
from joserfc.errors import JoseError

from pools.access.idp import is_idp_account, sync_roles
from pools.engine.user_names import user_name_problem
from pools.models import RoleAssignment

log = logging.getLogger(__name__)
# What a provider's answer can fail with: its own errors and a state that is not this session's (Authlib's),
# a bad signature, audience, expiry or nonce (joserfc's, through Authlib's claim checks), an unreachable or
# garbled provider.
FAILURES = (AuthlibBaseError, JoseError, OSError, ValueError)
BACKEND = "pools.access.oidc.OIDCBackend"
SESSION_ID_TOKEN = "osmo_oidc_id_token"
SESSION_NEXT = "osmo_oidc_next"
NAME_LIMIT = 150  # Django's user name length
CLOCK_SKEW = 60  # seconds an ID token's times may be off from ours


def enabled() -> bool:
    return bool(getattr(settings, "OIDC_ISSUER", "") and getattr(settings, "OIDC_CLIENT_ID", ""))


@lru_cache(maxsize=4)
def _client(issuer: str, client_id: str, client_secret: str, scopes: str):
    registry = OAuth()
    registry.register(
        name="provider", client_id=client_id, client_secret=client_secret or None,
        server_metadata_url=issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={"scope": scopes, "code_challenge_method": "S256",
                       "timeout": getattr(settings, "OIDC_TIMEOUT", 10)})
    return registry.create_client("provider")


def client():
    """The provider's client for the current settings, its discovery document loaded and checked."""
    provider = _client(settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET,
                       settings.OIDC_SCOPES)
    metadata = provider.load_server_metadata()
    if metadata.get("issuer") != settings.OIDC_ISSUER:
        raise OAuthError("discovery", f"the discovery document names issuer {metadata.get('issuer')!r}, not "
                                      f"OIDC_ISSUER {settings.OIDC_ISSUER!r}")
    return provider


class Refused(Exception):
    """A sign-in the provider vouched for that we still refuse (the message is shown to the user)."""


def account_name(claims: dict) -> str:
    for claim in (settings.OIDC_USERNAME_CLAIM, "sub"):
        value = claims.get(claim)
        if isinstance(value, str) and value.strip():
            name = value.strip()
            break
    else:
        raise Refused(f"the provider's ID token has no {settings.OIDC_USERNAME_CLAIM} or sub claim")
    if any(unicodedata.category(char).startswith("C") for char in name):
        raise Refused("the user name from the provider holds control or invisible formatting characters")
    if problem := user_name_problem(name):
        raise Refused(f"the user name from the provider is refused: {problem}. Ask an administrator to fix the "
                      f"name at the provider, or to name accounts by another claim (OIDC_USERNAME_CLAIM)")
    name = settings.OIDC_USER_PREFIX + name
    if len(name) > NAME_LIMIT:
        raise Refused(f"the user name from the provider is longer than {NAME_LIMIT} characters")
    return name


def groups_of(claims: dict) -> list[str]:
    value = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        raise Refused(f"the provider's {settings.OIDC_GROUPS_CLAIM} claim is neither a list nor a string")
    return sorted({group.strip() for group in value if isinstance(group, str) and group.strip()})


class OIDCBackend(ModelBackend):
    """Authenticates only the callback's checked claims; passwords stay with ModelBackend."""

    def authenticate(self, request, oidc_claims=None, **kwargs):
        if oidc_claims is None:
            return None
        name = account_name(oidc_claims)
        users = get_user_model().objects
        user, created = users.get_or_create(username=name)
        if created:
            user.set_unusable_password()
        elif not is_idp_account(user):
            raise Refused(f"{name} is a local account: the identity provider may not sign it in")
        for field, claim in (("email", "email"), ("first_name", "given_name"), ("last_name", "family_name")):
            value = oidc_claims.get(claim)
            if isinstance(value, str):
                setattr(user, field, value[:user._meta.get_field(field).max_length])
        user.save()
        if not self.user_can_authenticate(user):
            raise Refused(f"{name} may not sign in (inactive)")
        added, removed = sync_roles(user, groups_of(oidc_claims), source=RoleAssignment.Source.OIDC,
                                    by="OpenID Connect")
        if added or removed:
            log.info("OIDC sign-in of %s: roles added %s, removed %s", user, added, removed)
        return user


def _refuse(request, message: str, status: int = 403) -> HttpResponse:
    log.warning("refused OIDC sign-in: %s", message)
    return render(request, "access/oidc_refused.html", {"message": message}, status=status)


@require_GET
def login(request):
    """Starts a sign-in: to the provider's authorization endpoint, with state, nonce and a PKCE challenge."""
    if not enabled():
        return _refuse(request, "OpenID Connect sign-in is not configured here (OIDC_ISSUER).", status=404)
    target = request.GET.get("next", "")
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        target = settings.LOGIN_REDIRECT_URL
    try:
        provider = client()
    except FAILURES as exc:
        return _refuse(request, f"The identity provider cannot be reached: {exc}", status=502)
    request.session[SESSION_NEXT] = target
    return provider.authorize_redirect(request, request.build_absolute_uri(reverse("oidc-callback")))


@require_GET
def callback(request):
    """The provider's answer: the code exchanged (with the PKCE verifier), the ID token checked, then signed in."""
    if not enabled():
        return _refuse(request, "OpenID Connect sign-in is not configured here (OIDC_ISSUER).", status=404)
    try:
        # Authlib checks the issuer and nonce by itself, but the audience only through `azp`: ask for ours.
        token = client().authorize_access_token(request, leeway=CLOCK_SKEW, claims_options={
            "iss": {"essential": True, "value": settings.OIDC_ISSUER},
            "aud": {"essential": True, "value": settings.OIDC_CLIENT_ID},
            "exp": {"essential": True}})
    except FAILURES as exc:
        return _refuse(request, f"The identity provider's answer was refused: {exc}")
    claims = token.get("userinfo")
    if not claims:
        return _refuse(request, "The identity provider's answer holds no ID token.")
    try:
        user = auth.authenticate(request, oidc_claims=dict(claims))
    except Refused as exc:
        return _refuse(request, str(exc))
    if user is None:
        return _refuse(request, "The identity provider's user may not sign in.")
    target = request.session.pop(SESSION_NEXT, settings.LOGIN_REDIRECT_URL)
    auth.login(request, user, backend=BACKEND)
    request.session[SESSION_ID_TOKEN] = token.get("id_token", "")
    return HttpResponseRedirect(target)


class LogoutView(auth_views.LogoutView):
    """Django's log-out; a session that came from the provider is also ended there."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get(SESSION_ID_TOKEN)
        response = super().post(request, *args, **kwargs)
        if not id_token or not enabled():
            return response
        try:
            end = client().load_server_metadata().get("end_session_endpoint")
        except FAILURES:
            log.warning("OIDC log-out: the provider cannot be reached; signed out here only")
            return response
        if not end:
            return response
        back = request.build_absolute_uri(settings.LOGOUT_REDIRECT_URL)
        query = urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": back,
                           "client_id": settings.OIDC_CLIENT_ID})
        return HttpResponseRedirect(f"{end}{'&' if '?' in end else '?'}{query}")
