"""Enforcement on requests, in one place: may this request go through (`AccessPermission` for DRF,
`access_required` / `AccessRequiredMixin` for pages). Which rows it then sees is the `Access` of
`pools.models.visibility` (`Pool.objects.visible_to`, `Node.objects.visible_to`), and which pool and platform
names of a row it is told is the same module's `redact` (`Access.redact`), which the row builders of
`pools.fleet.usage`, the pages and both CSV writers apply (it lives below the fleet, which this layer is above).

The user's roles are read in one query, once per request: `AccessMiddleware` opens a cache around each
request.
"""

from enum import StrEnum
from functools import wraps

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpResponse
from django.urls import reverse
from rest_framework.permissions import SAFE_METHODS, BasePermission

from pools.models import ConfigKind, ConfigRevision
from pools.models.visibility import access_cache, access_for


class Rule(StrEnum):
    SIGNED_IN = "signed-in"  # any signed-in user; the view must scope its rows with visible_to
    POOL = "pool"  # a user who may use the pool named in the URL (the view's `pool_kwarg`)
    ADMIN = "admin"  # staff, or a role whose policies allow this method on this path


class AccessMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with access_cache():
            return self.get_response(request)


def authorize(request, rule: Rule, pool: str | None = None) -> bool:
    access = access_for(request)
    if not access.signed_in:
        return False
    if access.is_staff or rule == Rule.SIGNED_IN:
        return True
    if rule == Rule.POOL and pool and access.may_use_pool(pool):
        return True
    return access.request_grant(request.method, request.path) is not None


def rule_for(view, method: str) -> Rule:
    """Views declare `read_access` (GET, HEAD, OPTIONS) and `write_access`; both default to ADMIN, so
    a view that forgets to declare is closed rather than open."""
    return Rule(getattr(view, "read_access" if method in SAFE_METHODS else "write_access", Rule.ADMIN))


DENIED = {
    Rule.ADMIN: "This needs staff or a role whose policies allow {method} {path}.",
    Rule.POOL: "You may not use pool {pool}: none of your roles grants it (see /api/profile/).",
    Rule.SIGNED_IN: "Sign in first.",
}


class AccessPermission(BasePermission):
    """The one DRF permission class (the default in REST_FRAMEWORK settings)."""

    def has_permission(self, request, view):
        rule = rule_for(view, request.method)
        pool = view.kwargs.get(getattr(view, "pool_kwarg", "pool"))
        if authorize(request, rule, pool):
            return True
        self.message = DENIED[rule].format(method=request.method, path=request.path, pool=pool)
        return False


def _check_page(request, rule: Rule, pool: str | None):
    """None when the page may render; otherwise the response that refuses it."""
    if not request.user.is_authenticated:
        if getattr(request, "htmx", False):
            # A fragment cannot render a login page inside the region it replaces: send the browser there.
            response = HttpResponse(status=401)
            response["HX-Redirect"] = f"{settings.LOGIN_URL}?next={request.get_full_path()}"
            return response
        return redirect_to_login(request.get_full_path())
    if not authorize(request, rule, pool):
        raise PermissionDenied(DENIED[rule].format(method=request.method, path=request.path, pool=pool))
    return None


def access_required(read: Rule = Rule.SIGNED_IN, write: Rule = Rule.ADMIN, pool_kwarg: str = "pool"):
    """For function-based pages and fragments: the same rules as the API's permission class."""
    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            rule = read if request.method in SAFE_METHODS else write
            refusal = _check_page(request, rule, kwargs.get(pool_kwarg))
            return refusal or view(request, *args, **kwargs)
        return wrapped
    return decorator


class AccessRequiredMixin:
    """For class-based pages: declare `read_access` / `write_access` like an API view."""

    read_access = Rule.SIGNED_IN
    write_access = Rule.ADMIN
    pool_kwarg = "pool"

    def dispatch(self, request, *args, **kwargs):
        refusal = _check_page(request, rule_for(self, request.method), kwargs.get(self.pool_kwarg))
        return refusal or super().dispatch(request, *args, **kwargs)


# ---- configuration revisions ------------------------------------------------------------------------
# A revision holds an object's whole document, so history and diffs show it only to those who may read
# that object through the normal config API: GET /api/configs/<type>/ (every object of the type) or
# GET /api/configs/<type>/<name>/ (that one).

def config_path(kind: str, name: str | None = None) -> str:
    path = reverse("config-documents", kwargs={"kind": str(kind).lower()})
    return path if name is None else f"{path}{name}/"


def may_touch_config(request, method: str, kind: str, name: str | None = None) -> bool:
    access = access_for(request)
    if access.is_staff:
        return True
    return access.request_grant(method, config_path(kind)) is not None or (
        name is not None and access.request_grant(method, config_path(kind, name)) is not None)


def readable_revisions(request, revisions):
    """`revisions` (a ConfigRevision queryset) narrowed to those whose documents the caller may read."""
    access = access_for(request)
    if access.is_staff:
        return revisions
    whole = [kind for kind in ConfigKind if access.request_grant("GET", config_path(kind)) is not None]
    allowed = Q(kind__in=whole)
    pairs = (ConfigRevision.objects.exclude(kind__in=whole).values_list("kind", "name").distinct()
             if len(whole) < len(ConfigKind) else ())
    names: dict[str, list[str]] = {}
    for kind, name in pairs:
        if access.request_grant("GET", config_path(kind, name)) is not None:
            names.setdefault(kind, []).append(name)
    for kind, chosen in names.items():
        allowed |= Q(kind=kind, name__in=chosen)
    return revisions.filter(allowed)


def refuse_unreadable_revision(request, revision) -> None:
    """403 when the caller may not read this revision's document through the config API."""
    if revision is not None and not may_touch_config(request, "GET", revision.kind, revision.name):
        raise PermissionDenied(f"{revision.kind} revision {revision.number} is not yours to read: it needs staff "
                               f"or a role that allows GET {config_path(revision.kind)}")
