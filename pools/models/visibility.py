"""Who may see which rows: the `Access` of one credential, read once per request, and the querysets
every list goes through (`Pool.objects.visible_to(user)`, `Node.objects.visible_to(user)`, defined
with their models).

The rule becomes a WHERE clause: pool filtering happens in the database with the same regexes the pure
rules (`pools.engine.policies`) use, so no pool list is loaded to decide anything. Enforcement on
requests (permission class, page decorator) is `pools.access.scoping`.

Redaction: a node can sit in several pools, and whoever sees it through one of them must not learn the
names of the others or of their platforms. `redact` (and `redact_sql`, its twin for PostgreSQL's COPY) is
the one rule every door applies to a row's pool and platform names: the API's rows (`pools.fleet.usage`),
the pages, their fragments and both CSV writers (`pools.pages`). The viewer's pool names come from
`Access.visible_pool_names`: one query per request, none for staff.
"""

import json
import logging
from collections.abc import Iterable
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cached_property, reduce
from operator import or_

from django.apps import apps
from django.conf import settings
from django.db.models import CharField, Exists, F, OuterRef, Q, TextField, Value
from django.db.models.functions import Cast, Concat

from pools.engine.policies import POOL_PATH, STAFF_GRANT, Grant, RoleRules, pool_grants, request_grant

from .access import Role

DEFAULT_POOL = "default"
log = logging.getLogger("pools.access")


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
    def _held(self) -> tuple[tuple[RoleRules, ...], dict[str, tuple[str, ...]], tuple[str, ...]]:
        """The roles this credential acts with, the projects that name it as a member (by user name, or one of
        those roles) and, unless OSMO_PROJECT_MEMBERS_USE_POOLS is off, the pools where one of those projects
        has a quota: one query for all three (a UNION), read once per request."""
        if not self.signed_in:
            return (), {}, ()
        restricted = self.token is not None and not self.token.all_roles
        roles = Role.objects.filter(assignments__user=self.user)
        if restricted:
            roles = roles.filter(tokens=self.token)
        # A token restricted to some roles acts with those roles only: memberships by name do not come with it.
        named = Q(kind="role", name__in=roles.values("name"))
        if not restricted:
            named |= Q(kind="user", name=self.user.get_username())
        members = apps.get_model("pools", "ProjectMember").objects.filter(named)
        # No ORDER BY in the parts: SQLite refuses one in a compound statement's subqueries.
        rows = roles.order_by().annotate(kind=Value("role"), detail=Cast("policies", TextField())).values_list(
            "kind", "name", "detail")
        rows = rows.union(apps.get_model("pools", "Project").objects.filter(
            Exists(members.filter(project=OuterRef("pk")))).order_by().annotate(kind=Value("project"), detail=Value(""))
            .values_list("kind", "name", "detail"), all=True)
        if settings.OSMO_PROJECT_MEMBERS_USE_POOLS:
            rows = rows.union(apps.get_model("pools", "Quota").objects.filter(project__isnull=False).filter(
                Exists(members.filter(project=OuterRef("project_id")))).order_by().annotate(
                kind=Value("pool"), detail=F("project__name")).values_list("kind", "pool__name", "detail"), all=True)
        rules, projects, pools = [], [], {}
        for kind, name, detail in rows:
            if kind == "role":
                rules.append(RoleRules.from_policies(name, json.loads(detail) if isinstance(detail, str) else detail))
            elif kind == "project":
                projects.append(name)
            else:
                pools.setdefault(name, []).append(detail)
        rules.sort(key=lambda role: role.name)
        for role in rules:
            for path, problem in role.unusable:
                log.warning("role %s is left out for %s: it holds the path %r, which no rule can use (%s); "
                            "fix it with `config update ROLE %s`", role.name, self.user.get_username(), path,
                            problem, role.name)
        return (tuple(role for role in rules if not role.unusable),
                {pool: tuple(sorted(set(names))) for pool, names in pools.items()}, tuple(sorted(projects)))

    @property
    def roles(self) -> tuple[RoleRules, ...]:
        return self._held[0]

    @property
    def project_pools(self) -> dict[str, tuple[str, ...]]:
        """{pool: the member projects with a quota in it}: the pools a project's members may use."""
        return self._held[1]

    @property
    def member_projects(self) -> tuple[str, ...]:
        """The projects that name this credential's user as a member, or one of its roles (not the open `default`
        project, nor a pool's own project through the pool)."""
        return self._held[2]

    @property
    def role_names(self) -> list[str]:
        return [role.name for role in self.roles]

    def pool_grants(self, pool: str) -> list[Grant]:
        if not self.signed_in:
            return []
        return pool_grants(pool, self.roles, staff=self.is_staff, default_open=self.default_pool_open,
                           default_pool=DEFAULT_POOL, projects=self.project_pools.get(pool, ()))

    def may_use_pool(self, pool: str) -> bool:
        return self.is_staff or bool(self.pool_grants(pool))

    def request_grant(self, method: str, path: str) -> Grant | None:
        if self.is_staff:
            return STAFF_GRANT
        return request_grant(method, path, self.roles) if self.signed_in else None

    def pool_filter(self) -> Q | None:
        """The WHERE clause of visible pools (over `name` and the `access_path` alias); None: nothing."""
        terms = [Q(name=DEFAULT_POOL)] if self.default_pool_open else []
        if self.project_pools:
            terms.append(Q(name__in=sorted(self.project_pools)))
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

    @cached_property
    def visible_platforms(self) -> dict[str, list[str]]:
        """The pools this credential may use, by name, each with its platforms in order: one query, read
        once per request (the Access is cached per request)."""
        # By name from the app registry: the models module imports this one (visible_to).
        pools = self.filter_pools(apps.get_model("pools", "Pool").objects.all())
        platforms: dict[str, list[str]] = {}
        for pool, platform in pools.order_by("name", "platforms__position", "platforms__name").values_list(
                "name", "platforms__name"):
            names = platforms.setdefault(pool, [])
            if platform:
                names.append(platform)
        return platforms

    @property
    def visible_pool_names(self) -> frozenset[str] | None:
        """The names `redact` keeps; None for staff, who see every name (and cost no query)."""
        return None if self.is_staff else frozenset(self.visible_platforms)

    def redact(self, pools: Iterable[str], platforms: Iterable[str]) -> tuple[list[str], list[str]]:
        """A row's pool names and `pool/platform` names, without those of pools this credential may not see."""
        visible = self.visible_pool_names
        return redact(pools, visible), redact(platforms, visible, platforms=True)


# ---- redaction: the pool and platform names of a row that a viewer may see -------------------------------

def redact(names: Iterable[str], visible: frozenset[str] | None, *, platforms: bool = False) -> list[str]:
    """`names` (pool names, or with `platforms` `pool/platform` names) without those of pools outside
    `visible`, in their order; `visible` None keeps every name (staff, the CLI). The rule for every door:
    a pool or platform the viewer may not use is never named to them, not even beside one they may."""
    if visible is None:
        return list(names)
    return [name for name in names if (name.split("/", 1)[0] if platforms else name) in visible]


def redact_sql(item: str, *, platforms: bool = False) -> str:
    """`redact`'s test for one name, as a PostgreSQL condition on the text expression `item`, with one
    parameter: the visible names as an array (`sorted(visible)`). The COPY writer of the CSV exports keeps
    a list element when it holds, so both writers keep the same names."""
    pool = f"split_part({item}, '/', 1)" if platforms else item
    return f"{pool} = ANY(%s)"


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
