"""Short-lived login tokens (JWTs) exchanged for a personal access token, as OSMO's CLI logs in:
`osmo login URL --method token --token T` posts `{"token": T}` to `POST /api/auth/jwt/access_token`, reads the
answer's `{"token": <JWT>}` (its `exp`, and `name` to greet), sends `Authorization: Bearer <JWT>` on every call
and posts the same path again when `exp` is near.

A login token is signed (HS256, PyJWT) with a key derived from SECRET_KEY for this use only, lives
ACCESS_LOGIN_TOKEN_SECONDS (300, OSMO's) and never past the access token it came from. It carries that token's
id (`tid`): every request that presents it reads the access token again, so it acts with exactly that token's
roles and scoping (a restricted token's JWT stays restricted) and stops the moment the token is revoked or
expires, or its user is made inactive, not only at the next refresh."""

import secrets
import time

import jwt
from django.conf import settings
from django.utils.crypto import salted_hmac

from pools.models.access import AccessToken, Role, token_digest

ALGORITHM = "HS256"
ISSUER = "osmo-pools"
AUDIENCE = "osmo-pools-api"
MAX_SECRET = 512  # far above a token's length: a longer body is refused before any look-up


class Refused(Exception):
    """The secret or JWT does not sign anyone in; the message says why, in one line."""


def _key() -> str:
    return salted_hmac("pools.access.login_tokens", "signing key", algorithm="sha256").hexdigest()


def lifetime() -> int:
    return int(getattr(settings, "ACCESS_LOGIN_TOKEN_SECONDS", 300))


def looks_like_jwt(secret: str) -> bool:
    return secret.count(".") == 2 and not secret.startswith("osmo_")


def usable(token: AccessToken | None) -> AccessToken:
    if token is None:
        raise Refused("Unknown or revoked token")
    if token.expired:
        raise Refused(f"Token {token.name!r} expired at {token.expires_at.isoformat()}")
    if not token.user.is_active:
        raise Refused("The token's user is inactive")
    return token


def exchange(secret) -> tuple[AccessToken, str, int]:
    """(the access token, a login token for it, its expiry in seconds since the epoch)."""
    if not isinstance(secret, str) or not secret or len(secret) > MAX_SECRET:
        raise Refused("token: give the access token (a string) to exchange")
    token = usable(AccessToken.objects.select_related("user").filter(digest=token_digest(secret)).first())
    now = int(time.time())
    expires = min(now + lifetime(), int(token.expires_at.timestamp()))
    roles = Role.objects.filter(assignments__user=token.user)  # as Access reads them: held, and the token's
    if not token.all_roles:
        roles = roles.filter(tokens=token)
    username = token.user.get_username()
    claims = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "nbf": now, "exp": expires, "sub": username,
              "name": username, "unique_name": username, "jti": secrets.token_urlsafe(12),
              "osmo_token_name": token.name, "tid": token.pk,
              "roles": sorted(roles.values_list("name", flat=True))}
    return token, jwt.encode(claims, _key(), algorithm=ALGORITHM), expires


def authenticate(secret: str) -> AccessToken:
    """The access token a login token stands for, read again now; Refused when it no longer signs in."""
    try:
        claims = jwt.decode(secret, _key(), algorithms=[ALGORITHM], audience=AUDIENCE, issuer=ISSUER,
                            options={"require": ["exp", "iat", "sub", "tid"]})
    except jwt.ExpiredSignatureError:
        raise Refused("The login token expired: post the access token to /api/auth/jwt/access_token again") from None
    except jwt.InvalidTokenError as exc:
        raise Refused(f"Invalid login token: {exc}") from None
    token = AccessToken.objects.select_related("user").filter(pk=claims["tid"]).first()
    if token is not None and token.user.get_username() != claims["sub"]:
        token = None
    return usable(token)
