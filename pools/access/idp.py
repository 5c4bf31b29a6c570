"""Sign-in from an authenticating proxy (oauth2-proxy, an ingress with OIDC...) that puts the user
name and groups in request headers, and the mapping of identity-provider groups onto roles.

Headers are believed only from the proxy addresses in ACCESS_TRUSTED_PROXIES: anyone else could
type them. A request that carries the user header from any other address is refused outright, so a
misrouted deployment fails loudly instead of silently signing nobody in.

Identity-provider users keep to their own namespace: a header's name N signs in the account
ACCESS_HEADER_USER_PREFIX + N (the prefix is empty unless set), and only an account that can sign in no
other way (no usable password, not a superuser: made by the proxy or by POST /api/auth/user). A local
account (one with a password, or a superuser) is never taken over by a header, whatever its name; with a
prefix set, a header user made before it, under the bare name, keeps signing in. Under /api/ each request
that carries the header is signed in on its own, without a session (and so without CSRF: `HeaderAuthentication`);
pages sign in once into a session, as a password does. Header values arrive as
WSGI's Latin-1 text; they are read as the UTF-8 the proxy sent, and refused when they hold control
characters.
"""

import ipaddress
import logging
import unicodedata
from functools import lru_cache

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db import transaction
from django.http import JsonResponse
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS

from pools.access import assignments
from pools.engine.user_names import user_name_problem
from pools.models import Role, RoleAssignment

log = logging.getLogger(__name__)
SESSION_GROUPS = "osmo_idp_groups"


def _meta_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


@lru_cache(maxsize=8)
def _networks(proxies: tuple[str, ...]):
    return tuple(ipaddress.ip_network(proxy, strict=False) for proxy in proxies)


def trusted(address: str | None) -> bool:
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in network for network in _networks(tuple(settings.ACCESS_TRUSTED_PROXIES)))


class BadHeader(ValueError):
    pass


def header_text(value: str) -> str:
    """A header value as the text the proxy meant: WSGI hands bytes over as Latin-1, proxies send UTF-8.
    A value that is not Latin-1 already holds decoded text (a test client, an ASGI server) and is kept."""
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:
        text = value
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadHeader("is not valid UTF-8") from None
    if any(unicodedata.category(char).startswith("C") for char in text):
        raise BadHeader("holds control or invisible formatting characters")
    return text


def header_prefix() -> str:
    return getattr(settings, "ACCESS_HEADER_USER_PREFIX", "")


def is_idp_account(user) -> bool:
    """An account the proxy may sign in: one that has no other way in (no password) and is no superuser."""
    return not user.has_usable_password() and not user.is_superuser


def account_names(name: str) -> list[str]:
    """The user names a header name may sign in, in order: the prefixed one, then (with a prefix) the bare
    one of a header user made before the prefix was set."""
    prefix = header_prefix()
    return [prefix + name, name] if prefix else [name]


def parse_groups(value: str) -> list[str]:
    return sorted({group.strip() for group in value.split(",") if group.strip()})


def sync_roles(user, groups: list[str], *, source=RoleAssignment.Source.IDP,
               by: str = "identity provider") -> tuple[list[str], list[str]]:
    """Apply each role's sync mode for this sign-in: import adds, force adds and removes, ignore
    does nothing. Returns (added, removed) role names."""
    groups = set(groups)

    def changes():
        roles = list(Role.objects.exclude(sync_mode=Role.SyncMode.IGNORE).only("id", "name", "sync_mode",
                                                                                "external_roles"))
        held = set(RoleAssignment.objects.filter(user=user).values_list("role_id", flat=True))
        return ([role for role in roles if role.id not in held and groups & set(role.groups)],
                [role for role in roles if role.id in held and role.sync_mode == Role.SyncMode.FORCE
                 and not groups & set(role.groups)])

    # Read first, outside a transaction: an API request through the proxy signs in on its own each time, and most
    # find nothing to change.
    add, remove = changes()
    if add or remove:
        with transaction.atomic():
            add, remove = changes()
            # The sign-in's own user is the actor of what its groups change.
            assignments.add([(user, role) for role in add], by=by, source=source, actor=user)
            if remove:
                assignments.remove(user, remove, actor=user)
    return [role.name for role in add], [role.name for role in remove]


class TrustedHeaderBackend(ModelBackend):
    """Authenticates only the calls the middleware makes; password sign-in stays with ModelBackend."""

    @staticmethod
    def account(name: str):
        """The existing account a header name signs in, or None when there is none yet: the prefixed name
        first; the bare name only when it is a header user (never a local account of that name)."""
        names = account_names(name)
        users = {user.get_username(): user for user in get_user_model().objects.filter(username__in=names)}
        first = users.get(names[0])
        if first is not None or len(names) == 1:
            return first
        legacy = users.get(names[1])
        return legacy if legacy is not None and is_idp_account(legacy) else None

    def authenticate(self, request, trusted_header_user=None, groups=(), **kwargs):
        if not trusted_header_user:
            return None
        user = self.account(trusted_header_user)
        if user is not None and not is_idp_account(user):
            log.warning("refused sign-in header %r: %s is a local account", trusted_header_user, user)
            if request is not None:
                request.idp_refusal = (f"{user.get_username()} is a local account: the authenticating proxy may "
                                       f"not sign it in")
            return None
        if user is None:
            user, created = get_user_model().objects.get_or_create(username=header_prefix() + trusted_header_user)
            if created:
                user.set_unusable_password()
                user.save(update_fields=["password"])
            elif not is_idp_account(user):  # made locally between the look-up and here
                return None
        if not self.user_can_authenticate(user):
            return None
        added, removed = sync_roles(user, list(groups))
        if added or removed:
            log.info("sign-in of %s from identity provider: roles added %s, removed %s", user, added, removed)
        return user


class TrustedHeaderMiddleware:
    """After AuthenticationMiddleware. Signs the header's user in (a session, like a password sign-in)
    and re-applies group mappings whenever the user or their groups change."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if settings.ACCESS_HEADER_LOGIN:
            refusal = self.sign_in(request)
            if refusal is not None:
                return refusal
        return self.get_response(request)

    def sign_in(self, request):
        raw = request.META.get(_meta_key(settings.ACCESS_HEADER_USER), "")
        if not raw.strip():
            return None
        address = request.META.get("REMOTE_ADDR")
        if not trusted(address):
            log.warning("refused sign-in header %s from untrusted address %s", settings.ACCESS_HEADER_USER, address)
            return JsonResponse({"detail": f"Sign-in headers are accepted only from the authenticating proxy; "
                                           f"{address} is not one (ACCESS_TRUSTED_PROXIES)",
                                 "field": settings.ACCESS_HEADER_USER}, status=403)
        header = settings.ACCESS_HEADER_USER
        try:
            username = header_text(raw).strip()
        except BadHeader as exc:
            return JsonResponse({"detail": f"The user name from the proxy {exc}", "field": header}, status=400)
        try:
            groups = parse_groups(header_text(request.META.get(_meta_key(settings.ACCESS_HEADER_GROUPS), "")))
        except BadHeader as exc:
            return JsonResponse({"detail": f"The groups from the proxy {exc}",
                                 "field": settings.ACCESS_HEADER_GROUPS}, status=400)
        if problem := user_name_problem(username):
            return JsonResponse({"detail": f"The user name from the proxy is refused: {problem}", "field": header},
                                status=403)
        if len(header_prefix() + username) > 150:
            return JsonResponse({"detail": "The user name from the proxy is longer than 150 characters"
                                           + (" with its prefix" if header_prefix() else ""),
                                 "field": header}, status=403)
        api = request.path_info.startswith("/api/")
        user = request.user
        if (not api and user.is_authenticated and user.get_username() in account_names(username)
                and is_idp_account(user) and request.session.get(SESSION_GROUPS) == groups):
            return None
        user = auth.authenticate(request, trusted_header_user=username, groups=groups)
        if user is None:
            reason = getattr(request, "idp_refusal", None) or f"User {username} may not sign in (inactive)"
            return JsonResponse({"detail": reason, "field": header}, status=403)
        if api:
            # An API client (OSMO's CLI with `--method dev` sends only the header) keeps no cookie: this request is
            # signed in on its own, without a session, and HeaderAuthentication lets DRF see it.
            request.user = user
            request._osmo_header_user = user
            return None
        auth.login(request, user, backend="pools.access.idp.TrustedHeaderBackend")
        request.session[SESSION_GROUPS] = groups
        return None


class HeaderAuthentication(BaseAuthentication):
    """DRF's view of an API request the proxy's header signed in (`TrustedHeaderMiddleware`): no session, so no
    CSRF token to check. A write must then be sent as `Content-Type: application/json`, which a browser cannot send
    to another site without a CORS preflight this site never allows: a page elsewhere cannot write through a
    visitor's proxy sign-in (OSMO's CLI sends that type on every call)."""

    def authenticate(self, request):
        user = getattr(request._request, "_osmo_header_user", None)
        if user is None:
            return None
        if request.method not in SAFE_METHODS and request.content_type.split(";")[0].strip() != "application/json":
            raise PermissionDenied({"detail": "A write signed in by the proxy's header must be sent as "
                                              "Content-Type: application/json", "field": "Content-Type"})
        return user, None
