"""Personal API tokens: created with an expiry, shown once, stored as a SHA-256 digest, optionally
restricted to some of the user's roles, and accepted as `Authorization: Bearer <token>`."""

import datetime as dt
import secrets

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from pools.access import login_tokens
from pools.access.documents import check_access_name
from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.models import audit
from pools.models.access import AccessToken, Role, token_digest

SECRET_PREFIX = "osmo_"
# Writing last_used_at on every request would turn every read into a write; once a minute is enough.
LAST_USED_GRANULARITY = dt.timedelta(minutes=1)


class Conflict(ConfigError):
    """The object already exists (answered 409 by the API)."""


def parse_expiry(value) -> dt.datetime:
    """An ISO date (midnight UTC that day) or date-time; naive times are UTC."""
    try:
        # fromisoformat (inside parse_datetime) reads a bare date as its midnight.
        moment = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # well-formed but impossible, such as 2026-02-30
        moment = None
    if not moment:
        raise ConfigError(f"expires_at {value!r} is not an ISO date or date-time such as 2026-12-31 or "
                          "2026-12-31T18:00:00Z", field="expires_at")
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, dt.UTC)
    now = timezone.now()
    if moment <= now:
        raise ConfigError("expires_at must be in the future", field="expires_at")
    limit = settings.ACCESS_TOKEN_MAX_DAYS
    if moment > now + dt.timedelta(days=limit):
        raise ConfigError(f"expires_at may be at most {limit} days ahead (ACCESS_TOKEN_MAX_DAYS)",
                          field="expires_at")
    return moment


def create_token(user, name: str, expires_at: dt.datetime, *, roles: list[str] | None = None,
                 allowed_roles: set[str] | None = None, created_by: str = "") -> tuple[AccessToken, str]:
    """Returns the token and its secret, which is not stored and cannot be shown again.

    `roles` None: the token acts with all the user's roles, whatever they are when it is used.
    `allowed_roles` (the roles of the credential creating it, when that is itself a restricted token)
    keeps a token from minting a token with more roles than it has."""
    check_access_name(name, "Token")
    held = set(Role.objects.filter(assignments__user=user).values_list("name", flat=True))
    if allowed_roles is not None:
        held &= allowed_roles
        roles = sorted(held) if roles is None else roles
    if roles is not None:
        if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
            raise ConfigError("roles must be a list of role names", field="roles")
        missing = sorted(set(roles) - held)
        if missing:
            raise ConfigError(f"A token may only carry roles that {user.get_username()} holds; not held: "
                              f"{', '.join(missing)}", field="roles")
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = AccessToken.objects.create(user=user, name=name, digest=token_digest(secret), prefix=secret[:12],
                                               all_roles=roles is None, expires_at=expires_at, created_by=created_by)
            if roles:
                token.roles.set(Role.objects.filter(name__in=roles))
            audit.record("token", f"token/{user.get_username()}/{name}", "create",
                         f"expires {expires_at:%Y-%m-%d %H:%M} UTC; roles: "
                         + (", ".join(sorted(roles)) if roles is not None else "all of the user's"))
    except IntegrityError:
        raise Conflict(f"{user.get_username()} already has a token named {name!r}; revoke it first",
                       field="name") from None
    return token, secret


def revoke_token(user, name: str) -> None:
    with transaction.atomic():
        deleted, _ = AccessToken.objects.filter(user=user, name=name).delete()
        if deleted:
            audit.record("token", f"token/{user.get_username()}/{name}", "revoke")
    if not deleted:
        raise ConfigNotFound(f"{user.get_username()} has no token named {name!r}", field="name")


def describe(token: AccessToken, secret: str | None = None) -> dict:
    data = {
        "name": token.name,
        "user": token.user.get_username(),
        "prefix": token.prefix,
        "roles": None if token.all_roles else sorted(role.name for role in token.roles.all()),
        "created_at": token.created_at.isoformat(),
        "created_by": token.created_by,
        "expires_at": token.expires_at.isoformat(),
        "expired": token.expired,
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
    }
    if secret is not None:
        data["token"] = secret
    return data


def mark_used(token: AccessToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_GRANULARITY:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


def _refuse(message: str):
    return AuthenticationFailed({"detail": message, "field": "Authorization"})


class BearerAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>`, a personal token or a login token exchanged for one
    (`pools.access.login_tokens`). The token rides on the user object, so the request's Access uses only the
    token's roles."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None
        if len(parts) != 2:
            raise _refuse("Authorization: Bearer takes exactly one token")
        secret = parts[1].decode("latin-1")
        try:
            if login_tokens.looks_like_jwt(secret):  # a login token stands for the access token it came from
                token = login_tokens.authenticate(secret)
            else:
                token = login_tokens.usable(
                    AccessToken.objects.select_related("user").filter(digest=token_digest(secret)).first())
        except login_tokens.Refused as exc:
            raise _refuse(str(exc)) from None
        mark_used(token)
        token.user._osmo_token = token
        return token.user, token

    def authenticate_header(self, request):
        return 'Bearer realm="api"'
