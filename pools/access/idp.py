"""Sign-in from an authenticating proxy (oauth2-proxy, an ingress with OIDC...) that puts the user
name and groups in request headers, and the mapping of identity-provider groups onto roles.

Headers are believed only from the proxy addresses in ACCESS_TRUSTED_PROXIES: anyone else could
type them. A request that carries the user header from any other address is refused outright, so a
misrouted deployment fails loudly instead of silently signing nobody in.
"""

import ipaddress
import logging
from functools import lru_cache

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db import transaction
from django.http import JsonResponse

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


def parse_groups(value: str) -> list[str]:
    return sorted({group.strip() for group in value.split(",") if group.strip()})


def sync_roles(user, groups: list[str]) -> tuple[list[str], list[str]]:
    """Apply each role's sync mode for this sign-in: import adds, force adds and removes, ignore
    does nothing. Returns (added, removed) role names."""
    groups = set(groups)
    with transaction.atomic():
        roles = list(Role.objects.exclude(sync_mode=Role.SyncMode.IGNORE).only("id", "name", "sync_mode",
                                                                                "external_roles"))
        held = set(RoleAssignment.objects.filter(user=user).values_list("role_id", flat=True))
        add = [role for role in roles if role.id not in held and groups & set(role.groups)]
        remove = [role for role in roles if role.id in held and role.sync_mode == Role.SyncMode.FORCE
                  and not groups & set(role.groups)]
        RoleAssignment.objects.bulk_create(
            [RoleAssignment(user=user, role=role, source=RoleAssignment.Source.IDP, assigned_by="identity provider")
             for role in add], ignore_conflicts=True)
        if remove:
            RoleAssignment.objects.filter(user=user, role__in=remove).delete()
    return [role.name for role in add], [role.name for role in remove]


class TrustedHeaderBackend(ModelBackend):
    """Authenticates only the calls the middleware makes; password sign-in stays with ModelBackend."""

    def authenticate(self, request, trusted_header_user=None, groups=(), **kwargs):
        if not trusted_header_user:
            return None
        user, created = get_user_model().objects.get_or_create(username=trusted_header_user)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
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
        username = request.META.get(_meta_key(settings.ACCESS_HEADER_USER), "").strip()
        if not username:
            return None
        address = request.META.get("REMOTE_ADDR")
        if not trusted(address):
            log.warning("refused sign-in header %s from untrusted address %s", settings.ACCESS_HEADER_USER, address)
            return JsonResponse({"detail": f"Sign-in headers are accepted only from the authenticating proxy; "
                                           f"{address} is not one (ACCESS_TRUSTED_PROXIES)",
                                 "field": settings.ACCESS_HEADER_USER}, status=403)
        if len(username) > 150:
            return JsonResponse({"detail": "The user name from the proxy is longer than 150 characters",
                                 "field": settings.ACCESS_HEADER_USER}, status=403)
        groups = parse_groups(request.META.get(_meta_key(settings.ACCESS_HEADER_GROUPS), ""))
        user = request.user
        if user.is_authenticated and user.get_username() == username and request.session.get(SESSION_GROUPS) == groups:
            return None
        user = auth.authenticate(request, trusted_header_user=username, groups=groups)
        if user is None:
            return JsonResponse({"detail": f"User {username} may not sign in (inactive)",
                                 "field": settings.ACCESS_HEADER_USER}, status=403)
        auth.login(request, user, backend="pools.access.idp.TrustedHeaderBackend")
        request.session[SESSION_GROUPS] = groups
        return None
