"""Enforcement in one place. Every API view, page, fragment and CSV export asks the same `Access`
object: which pools (`Pool.objects.visible_to`), which nodes (`Node.objects.visible_to`), and may this
request go through (`AccessPermission` for DRF, `access_required` / `AccessRequiredMixin` for pages).

The user's roles are read in one query, once per request (a cache that `AccessMiddleware` opens and
closes around each request); pool filtering happens in the database with the same regexes the pure
rules use, so no pool list is loaded to decide anything.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from functools import cached_property, reduce, wraps
from operator import or_

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import CharField, Exists, OuterRef, Q, Value
from django.db.models.functions import Concat
from django.http import HttpResponse
from rest_framework.permissions import SAFE_METHODS, BasePermission

from .policies import POOL_PATH, STAFF_GRANT, Grant, RoleRules, pool_grants, request_grant

DEFAULT_POOL = "default"


class Rule(StrEnum):
    SIGNED_IN = "signed-in"  # any signed-in user; the view must scope its rows with visible_to
    POOL = "pool"  # a user who may use the pool named in the URL (the view's `pool_kwarg`)
    ADMIN = "admin"  # staff, or a role whose policies allow this method on this path


class Access:
    """What one credential (a session user, or a user through one of their tokens) may do."""

    def __init__(self, user, token=None):
        self.user = user
        self.token = token

    @property
    def signed_in(self) -> bool:
        return self.user is not None and self.user.is_authenticated and self.user.is_active

    @property
    def is_staff(self) -> bool:
        # A token restricted to some roles acts with those roles only, even for a staff user.
        return self.signed_in and self.user.is_staff and (self.token is None or self.token.all_roles)

    @property
    def default_pool_open(self) -> bool:
        return settings.ACCESS_DEFAULT_POOL_OPEN

    @cached_property
    def roles(self) -> tuple[RoleRules, ...]:
        if not self.signed_in:
            return ()
        from .models import Role

        roles = Role.objects.filter(assignments__user=self.user)
        if self.token is not None and not self.token.all_roles:
            roles = roles.filter(tokens=self.token)
        return tuple(RoleRules.from_policies(name, policies)
                     for name, policies in roles.order_by("name").values_list("name", "policies"))

    @property
    def role_names(self) -> list[str]:
        return [role.name for role in self.roles]

    def pool_grants(self, pool: str) -> list[Grant]:
        if not self.signed_in:
            return []
        return pool_grants(pool, self.roles, staff=self.is_staff, default_open=self.default_pool_open,
                           default_pool=DEFAULT_POOL)

    def may_use_pool(self, pool: str) -> bool:
        return self.is_staff or bool(self.pool_grants(pool))

    def request_grant(self, method: str, path: str) -> Grant | None:
        if self.is_staff:
            return STAFF_GRANT
        return request_grant(method, path, self.roles) if self.signed_in else None

    def pool_filter(self) -> Q | None:
        """The WHERE clause of visible pools (over `name` and the `access_path` alias); None: nothing."""
        terms = [Q(name=DEFAULT_POOL)] if self.default_pool_open else []
        for role in self.roles:
            allow_path, allow_name, deny_path = role.pool_regexes()
            allowed = [q for q in (allow_path and Q(access_path__regex=allow_path),
                                   allow_name and Q(name__regex=allow_name)) if q]
            if allowed:
                term = reduce(or_, allowed)
                terms.append(term & ~Q(access_path__regex=deny_path) if deny_path else term)
        return reduce(or_, terms) if terms else None

    def filter_pools(self, queryset):
        if self.is_staff:
            return queryset
        condition = self.pool_filter() if self.signed_in else None
        if condition is None:
            return queryset.none()
        return queryset.alias(access_path=Concat(Value(POOL_PATH), "name", output_field=CharField())).filter(condition)

    def filter_nodes(self, queryset):
        if self.is_staff:
            return queryset
        if not self.signed_in:
            return queryset.none()
        from pools.models import NodeMembership, Pool

        pools = self.filter_pools(Pool.objects.all())
        return queryset.filter(Exists(NodeMembership.objects.filter(node=OuterRef("pk"), pool__in=pools)))


# Per-request cache of Access objects by credential; None outside a request (shell, Celery, tests
# calling visible_to directly), where every call reads the roles afresh.
_request_cache: ContextVar[dict | None] = ContextVar("osmo_access_cache", default=None)


@contextmanager
def access_cache():
    """Within this block every credential's roles are read at most once (the middleware wraps each
    request in one; a task or a streamed export can open its own)."""
    reset = _request_cache.set({})
    try:
        yield
    finally:
        _request_cache.reset(reset)


class AccessMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with access_cache():
            return self.get_response(request)


def access_for(subject) -> Access:
    """The Access of a user or of a request's user (through the token it authenticated with, if any)."""
    user = subject if hasattr(subject, "is_authenticated") or subject is None else getattr(subject, "user", None)
    token = getattr(user, "_osmo_token", None)
    if user is None or not user.is_authenticated:
        return Access(user)
    cache = _request_cache.get()
    key = (user.pk, token.pk if token is not None else None)
    if cache is None:
        return Access(user, token)
    if key not in cache:
        cache[key] = Access(user, token)
    return cache[key]


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
