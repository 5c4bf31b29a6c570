"""The permission matrix: every URL the site serves has an entry here, and every entry is checked for
the five principals (anonymous, no roles, osmo-team, a path policy, staff) on its list, detail, write,
CSV and fragment requests. A new URL without an entry fails `test_every_url_has_a_rule_in_the_matrix`.

Add an entry per URL name (`namespace:*` for a whole namespace such as the admin). Expectations:
ADMIN (staff or an admin role), SIGNED_IN (every signed-in user; the rows are scoped), PAGE (signed-in
page: anonymous is sent to the login page), or a dict per principal. `check` inspects a successful
response, usually `shows_only_visible`, which fails if a pool or node outside the principal's pools
appears anywhere in the body (JSON, HTML or CSV alike).

Redaction: `node-shared-zq` sits in a pool the teammate sees, one the policy user sees and one only staff
see (tests/access/conftest.py). Every answer to a principal, whatever its status, is searched byte by byte
for the names of the shared node's pools they may not see and of their platforms; a probe whose URL names
one of them (a filter, a search, a detail) is sent again with a name that does not exist, and both answers
must be the same (`TWINS`).
"""

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from pools.access import tokens
from pools.config import writes
from pools.models import (
    AccessToken,
    Backend,
    ConfigKind,
    ConfigRevision,
    Pod,
    Pool,
    Project,
    Quota,
    Role,
    RoleAssignment,
)
from pools.pages import csv as pages_csv
from scheduling.models import UsageHour, Workload, WorkloadEvent
from tests.access.conftest import (
    HIDDEN_PLATFORM,
    HIDDEN_POOL,
    POOLS,
    PRINCIPALS,
    SHARED_NODE,
    SHARED_PLATFORMS,
    VISIBLE,
    build_shared_node_pools,
    give,
    hidden_platforms,
    node_of,
    visible_nodes,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def pools_by_role_only(settings):
    """The world's projects have quotas in pools their members may not use, which only a site that grants pools by
    role alone has: that is what the redaction probes need. Project members' pools: tests/access/test_onboarding.py."""
    settings.OSMO_PROJECT_MEMBERS_USE_POOLS = False
TEAM_WORKLOAD = "0a0a0a0a-0000-4000-8000-00000000000a"
SECRET_WORKLOAD = "0b0b0b0b-0000-4000-8000-00000000000b"
# In `default`, which every user belongs to: everyone sees it, only staff its request (issue 25 point 3).
DEFAULT_WORKLOAD = "0c0c0c0c-0000-4000-8000-00000000000c"
CREDENTIAL = "hf-zq-credential-value"
PRIVATE_FLAG = "--zq-private-flag"
# The submit form (scheduling.pages.submit_form), as a browser posts it: the project's default pools as candidates.
SUBMIT_FORM = {"mode": "fields", "project": "team-project", "name": "probe", "image": "busybox", "command": "true"}
# The API's submission to team-project, whose default list names pools the teammate may not see (`projects`).
API_SUBMISSION = {"project": "team-project", "name": "probe", "image": "busybox", "command": ["true"]}
PROBE_WORKFLOW = "workflow:\n  name: probe\n  tasks:\n  - name: t\n    image: busybox\n    command: [\"true\"]\n"
FUTURE = (timezone.now() + dt.timedelta(days=10)).date().isoformat()
# Whole days, so that a probe and its twin ask for the same period to the second.
USAGE_PERIOD = (f"from={(timezone.now() - dt.timedelta(days=20)).date().isoformat()}"
                f"&to={(timezone.now() + dt.timedelta(days=1)).date().isoformat()}")

ADMIN = {"anonymous": 401, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 200}
SIGNED_IN = {"anonymous": 401, "nobody": 200, "teammate": 200, "policy_user": 200, "staff": 200}
PAGE = {"anonymous": 302, "nobody": 200, "teammate": 200, "policy_user": 200, "staff": 200}
PUBLIC = dict.fromkeys(PRINCIPALS, 200)
ADMIN_SITE = {"anonymous": 302, "nobody": 302, "teammate": 302, "policy_user": 302, "staff": 200}


def ok_as(expect: dict, status) -> dict:
    """`expect` with another answer for the principals it lets through."""
    return {who: status if code in (200, 201, 204) else code for who, code in expect.items()}


def may_submit_to(pool: str) -> dict:
    """A submission to a pool: refused with 403 (the same for a pool that does not exist) to those who may
    not use it; a dry run of the others passes or is refused by the pipeline."""
    return {who: 401 if who == "anonymous" else (200, 400) if pool in VISIBLE[who] else 403 for who in PRINCIPALS}


def page_only_for(pool: str) -> dict:
    """The same for a page: anonymous visitors are sent to the login page."""
    return only_for(pool) | {"anonymous": 302}


def only_for(*pools: str) -> dict:
    """A detail of one pool (or one of its nodes, or a node of any of `pools`): 404 for those who may see
    none of them, never 403."""
    return {who: 401 if who == "anonymous" else 200 if VISIBLE[who] & set(pools) else 404 for who in PRINCIPALS}


@dataclass
class Probe:
    kind: str  # list | detail | write | csv | fragment | page
    method: str
    url: str
    expect: dict[str, Any]  # principal -> status, or a tuple of acceptable statuses
    body: dict | None = None
    headers: dict = field(default_factory=dict)
    check: Any = None  # check(response, principal) for answers below 300
    writer: str = ""  # csv: "copy" (PostgreSQL's COPY; the reference writer elsewhere) or "python"
    form: bool = False  # send `body` as a browser's form does (multipart), not as JSON
    check_refused: bool = False  # run `check` on a 4xx answer too (a refusal's words must hide pools as well)


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def _bytes(response) -> bytes:
    # CSV downloads stream; read them once and keep the bytes for the other checks.
    if not hasattr(response, "_probe_bytes"):
        response._probe_bytes = b"".join(response.streaming_content) if response.streaming else response.content
    return response._probe_bytes


def _text(response) -> str:
    # Decoded once; a check may set `_probe_text` to the text with the principal's own query set aside.
    if not hasattr(response, "_probe_text"):
        response._probe_text = _bytes(response).decode()
    return response._probe_text


def shows_only_visible(response, principal):
    text = _text(response)
    leaked = [p for p in POOLS if p not in VISIBLE[principal] and _mentions(text, p)]
    leaked += [n for n in (node_of(p) for p in POOLS) if n not in visible_nodes(principal) and _mentions(text, n)]
    leaked += [name for name in hidden_platforms(principal) if _mentions(text, name)]
    assert not leaked, f"{principal} sees {leaked}"


def shows_the_shared_node(response, principal):
    """The shared node's row: the names the principal may see, and its true sharing (SHARED: it is in
    several pools, whether or not the principal sees them all)."""
    shows_only_visible(response, principal)
    text = _text(response)
    assert _mentions(text, SHARED_NODE)
    seen = VISIBLE[principal] & SHARED_PLATFORMS.keys()
    assert all(_mentions(text, pool) and _mentions(text, f"{pool}/{SHARED_PLATFORMS[pool]}") for pool in seen)
    if response["Content-Type"].startswith("application/json") and "sharing" in response.json():
        assert response.json()["sharing"] == "SHARED"


def lists_the_visible_nodes(response, principal):
    shows_only_visible(response, principal)
    assert {row["node"] for row in response.json()} == visible_nodes(principal)


def shows_all_visible_pools(response, principal):
    shows_only_visible(response, principal)
    text = _text(response)
    assert all(_mentions(text, pool) for pool in VISIBLE[principal])


# Projects (made by the `projects` fixture): a principal sees the ones they belong to, staff all of them.
VISIBLE_PROJECTS = {
    "anonymous": set(),
    "nobody": {"default"},
    "teammate": {"default", "team-project"},
    "policy_user": {"default"},
    "staff": {"default", "team-project", "secret-project"},
}
HIDDEN_NAMES = {"team-project": ["team-project"], "secret-project": ["secret-project", "secret-dept"]}


def shows_only_visible_projects(response, principal):
    shows_only_visible(response, principal)
    text = _text(response)
    leaked = [name for project, names in HIDDEN_NAMES.items() if project not in VISIBLE_PROJECTS[principal]
              for name in names if _mentions(text, name)]
    assert not leaked, f"{principal} sees {leaked}"


def shows_only_visible_projects_but_the_query(query: str):
    """The same, once the page's own links (which carry the query the principal typed) are set aside."""
    def check(response, principal):
        response._probe_text = _text(response).replace(query, "").replace(query.replace("&", "&amp;"), "")
        shows_only_visible_projects(response, principal)
    return check


def project_only_for(project: str) -> dict:
    """A project's page: 404 for those who do not belong to it, never 403."""
    return {who: 302 if who == "anonymous" else 200 if project in VISIBLE_PROJECTS[who] else 404
            for who in PRINCIPALS}


def lists_exactly_visible_nodes(response, principal):
    assert {row["node"] for row in response.json()} == visible_nodes(principal)


def pages_exactly_visible_nodes(response, principal):
    page = response.json()
    assert page["count"] == len(visible_nodes(principal))
    assert {row["node"] for row in page["results"]} == visible_nodes(principal)


def lists_exactly_visible_pools(response, principal):
    assert {row["name"] for row in response.json()} == VISIBLE[principal]


def names_nothing_of_the_fleet(response, principal):
    """The OpenAPI schema (its examples included) is the same for everyone: no pool or platform of ours."""
    body = _bytes(response)
    assert not [name for name in (HIDDEN_POOL, *SHARED_PLATFORMS.values(), SHARED_NODE) if name.encode() in body]


def lists_only_own_tokens(response, principal):
    assert "subject-token" not in {token["name"] for token in response.json()}


# Projects of the matrix world (`projects`): team-project's members are osmo-team's holders; only staff
# see secret-project. Each has a quota in a pool the teammate may use and in one only staff may use.
PROJECTS_VISIBLE = {"anonymous": set(), "nobody": {"default"}, "teammate": {"default", "team-project"},
                    "policy_user": {"default"}, "staff": {"default", "team-project", "secret-project"}}


def lists_exactly_visible_workloads(response, principal):
    shows_only_visible(response, principal)
    projects = {row["project"] for row in response.json()["results"]} if isinstance(response.json(), dict) \
        else {row["project"] for row in response.json()}
    assert projects == VISIBLE_PROJECTS[principal]


def reads_the_request(readers: set[str]):
    """A workload's request (command, env, variables, templates): only `readers` read it, and a credential-looking
    env value is masked for everyone (no principal submitted it)."""
    def check(response, principal):
        shows_only_visible(response, principal)
        text = _text(response)
        assert CREDENTIAL not in text, f"{principal} reads the credential"
        assert (PRIVATE_FLAG in text) is (principal in readers), f"{principal}: request shown {PRIVATE_FLAG in text}"
    return check


def only_for_project(project: str) -> dict:
    return {who: 401 if who == "anonymous" else 200 if project in PROJECTS_VISIBLE[who] else 404
            for who in PRINCIPALS}


def lists_exactly_visible_projects(response, principal):
    shows_only_visible(response, principal)
    assert {row["name"] for row in response.json()} == PROJECTS_VISIBLE[principal]


def lists_quota_rows_only_for_staff(response, principal):
    assert bool(response.json()) == (principal == "staff")


# Usage rows (the `projects` fixture): team-project's in team-gpu-pool is the teammate's; default's is everyone's.
USAGE_PROJECTS = {"anonymous": set(), "nobody": {"default"}, "teammate": {"default", "team-project"},
                  "policy_user": {"default"}, "staff": {"default", "team-project", "secret-project"}}


def lists_exactly_visible_usage(response, principal):
    shows_only_visible_projects(response, principal)
    if response.streaming:
        rows = {line.split(",", 1)[0] for line in _text(response).splitlines()[1:-1]}
    elif response["Content-Type"].startswith("application/json"):
        rows = {row["group"] for row in response.json()["rows"]}
    else:
        body = _text(response).split("<tbody>", 1)[-1].split("</tbody>", 1)[0] if "<tbody>" in _text(response) else ""
        rows = set(re.findall(r'<th scope="row" data-col="group"[^>]*>(?:<[^>]+>)*([^<]*)<', body))
    assert rows == USAGE_PROJECTS[principal]


def names_no_other_user(response, principal):
    shows_only_visible_projects(response, principal)
    text = _text(response)
    assert ("someone-else" in text) is (principal == "staff")
    assert ("teammate-user" in text) is (principal == "staff")


MATRIX: dict[str, list[Probe]] = {
    # ---- site root and admin --------------------------------------------------------------------------
    "admin:*": [Probe("page", "get", "/admin/", ADMIN_SITE),
                Probe("list", "get", "/admin/pools/role/", ADMIN_SITE),
                Probe("list", "get", "/admin/pools/accesstoken/", ADMIN_SITE)],
    # ---- configuration documents: staff or an admin role, reads and writes --------------------------------
    "config-history": [Probe("list", "get", "/api/configs/history/?type=role", ADMIN)],
    "config-rollback": [Probe("write", "post", "/api/configs/history/rollback/", ADMIN,
                              body={"type": "role", "revision": 1})],
    "config-diff": [Probe("detail", "get", "/api/configs/history/diff/?type=role&revision=1", ADMIN)],
    "config-documents": [Probe("list", "get", "/api/configs/pool/", ADMIN),
                         Probe("list", "get", "/api/configs/role/", ADMIN),
                         Probe("write", "put", "/api/configs/pod_template/", ADMIN, body={"probe": {"spec": {}}})],
    "config-document": [Probe("detail", "get", "/api/configs/pool/team-gpu-pool/", ADMIN),
                        Probe("write", "put", "/api/configs/role/probe-role/", ADMIN, body={"name": "probe-role"}),
                        Probe("write", "delete", "/api/configs/role/sim-users/", ADMIN)],
    "config-role-generate": [Probe("write", "post", "/api/configs/role/osmo-team/pool/", ADMIN)],
    # ---- users, roles and other people's tokens: staff or an admin role ------------------------------------
    "auth-users": [Probe("list", "get", "/api/auth/user", ADMIN),
                   Probe("write", "post", "/api/auth/user", ok_as(ADMIN, 201), body={"id": "probe"})],
    "auth-user": [Probe("detail", "get", "/api/auth/user/subject", ADMIN),
                  Probe("write", "delete", "/api/auth/user/subject", ok_as(ADMIN, 204))],
    "auth-user-roles": [Probe("write", "post", "/api/auth/user/subject/roles", ok_as(ADMIN, 201),
                              body={"role_name": "sim-users"})],
    "auth-user-role": [Probe("write", "delete", "/api/auth/user/subject/roles/osmo-team", ok_as(ADMIN, 204))],
    "auth-user-tokens": [Probe("list", "get", "/api/auth/user/subject/access_token/", ADMIN)],
    "auth-user-token": [Probe("write", "post", "/api/auth/user/subject/access_token/probe", ok_as(ADMIN, 201),
                              body={"expires_at": FUTURE}),
                        Probe("write", "delete", "/api/auth/user/subject/access_token/subject-token",
                              ok_as(ADMIN, 204))],
    "auth-role-users": [Probe("list", "get", "/api/auth/roles/osmo-team/users", ADMIN),
                        Probe("write", "post", "/api/auth/roles/osmo-team/users", ADMIN, body={"user_ids": ["x"]})],
    # ---- one's own tokens and profile: every signed-in user -------------------------------------------------
    # The exchange of a personal token for a login token (OSMO's CLI login): open to all, the token in the body is
    # the credential; an unknown one is 401 whoever asks (tests/access/test_login_tokens.py exchanges real ones).
    "auth-login-token": [Probe("write", "post", "/api/auth/jwt/access_token", dict.fromkeys(PRINCIPALS, 401),
                               body={"token": "osmo_unknown"})],
    "auth-tokens": [Probe("list", "get", "/api/auth/access_token/", SIGNED_IN, check=lists_only_own_tokens)],
    "auth-token": [Probe("write", "post", "/api/auth/access_token/probe", ok_as(SIGNED_IN, 201),
                         body={"expires_at": FUTURE}),
                   Probe("write", "delete", "/api/auth/access_token/subject-token", ok_as(SIGNED_IN, 404))],
    "profile": [Probe("detail", "get", "/api/profile/", SIGNED_IN, check=shows_all_visible_pools)],
    # Notification choices: one's own (every signed-in user), a project's default (staff or an admin role).
    "profile-notifications": [
        Probe("detail", "get", "/api/profile/notifications/", SIGNED_IN, check=shows_only_visible),
        Probe("write", "put", "/api/profile/notifications/", SIGNED_IN, body={"transitions": ["failed"]}),
        Probe("write", "delete", "/api/profile/notifications/", SIGNED_IN)],
    "project-notifications": [
        Probe("detail", "get", "/api/notifications/projects/team-project/", ADMIN),
        Probe("write", "put", "/api/notifications/projects/team-project/", ADMIN, body={"transitions": ["failed"]}),
        Probe("write", "delete", "/api/notifications/projects/secret-project/", ADMIN)],
    # The profile page: one's own tokens and notification choices; another's token is "no token of yours" (404).
    "profile-page": [Probe("page", "get", "/profile/", PAGE, check=shows_only_visible)],
    "profile-token-create": [Probe("write", "post", "/profile/tokens/", ok_as(PAGE, 400))],
    "profile-token-revoke": [Probe("write", "post", "/profile/tokens/subject-token/revoke/", ok_as(PAGE, 404))],
    "profile-notifications-save": [Probe("write", "post", "/profile/notifications/", dict.fromkeys(PRINCIPALS, 302))],
    "profile-credential-set": [Probe("write", "post", "/profile/credentials/", ok_as(PAGE, 400))],
    "profile-credential-delete": [Probe("write", "post", "/profile/credentials/nope-zq/delete/", ok_as(PAGE, 404))],
    # ---- pages -------------------------------------------------------------------------------------------
    "login": [Probe("page", "get", "/accounts/login/", PUBLIC)],
    # The audit log: staff read every row, anyone else their own actions (tests/access/test_audit.py).
    "api-audit": [Probe("list", "get", "/api/audit/", SIGNED_IN, check=shows_only_visible)],
    # OpenID Connect sign-in is off here (no OIDC_ISSUER): both legs answer 404 to everyone
    # (tests/access/test_oidc.py signs in through a stand-in provider).
    "oidc-login": [Probe("page", "get", "/accounts/oidc/login/", dict.fromkeys(PRINCIPALS, 404))],
    "oidc-callback": [Probe("page", "get", "/accounts/oidc/callback/?code=c&state=s",
                            dict.fromkeys(PRINCIPALS, 404))],
    # ---- health and metrics (osmo_site.health): no sign-in; /metrics is off (404) until a scrape token or
    # addresses are configured, and then needs one of them whoever is signed in (tests/test_health_metrics.py)
    "healthz": [Probe("page", "get", "/healthz", PUBLIC)],
    "readyz": [Probe("page", "get", "/readyz", PUBLIC)],
    "metrics": [Probe("page", "get", "/metrics", dict.fromkeys(PRINCIPALS, 404))],
    "logout": [Probe("write", "post", "/accounts/logout/", dict.fromkeys(PRINCIPALS, 302))],
    "profile-permissions": [
        Probe("page", "get", "/profile/permissions/", PAGE, check=shows_all_visible_pools),
        Probe("fragment", "get", "/profile/permissions/", ok_as(PAGE, 200) | {"anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible),
    ],
    # ---- pages (pools/pages, namespace "pages"): sign-in pages, rows scoped like the API ----------------------
    "pages:*": [
        Probe("page", "get", "/audit/", PAGE, check=shows_only_visible),
        Probe("csv", "get", "/audit/?export=csv", PAGE, check=shows_only_visible),
        Probe("page", "get", "/", PAGE, check=shows_all_visible_pools),
        Probe("fragment", "get", "/", ok_as(PAGE, 200) | {"anonymous": 401}, headers={"HTTP_HX_REQUEST": "true"},
              check=shows_only_visible),
        Probe("csv", "get", "/?export=csv", PAGE, check=shows_all_visible_pools),
        Probe("page", "get", "/?cols=name,platforms", PAGE, check=shows_all_visible_pools),
        Probe("csv", "get", "/?export=csv&cols=name,platforms", PAGE, check=shows_all_visible_pools),
        Probe("list", "get", "/nodes/?cols=node,pools,platforms,labels,sharing", PAGE, check=shows_only_visible),
        Probe("fragment", "get", "/nodes/?cols=node,pools,platforms", ok_as(PAGE, 200) | {"anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible),
        Probe("csv", "get", "/nodes/?export=csv&cols=node,pools,platforms", PAGE, check=shows_only_visible,
              writer="copy"),
        Probe("csv", "get", "/nodes/?export=csv&cols=node,pools,platforms", PAGE, check=shows_only_visible,
              writer="python"),
        Probe("csv", "get", "/nodes/?export=csv&cols=platforms", PAGE, check=shows_only_visible, writer="copy"),
        Probe("csv", "get", "/nodes/?export=csv&cols=pools", PAGE, check=shows_only_visible, writer="python"),
        Probe("list", "get", f"/nodes/?pool={HIDDEN_POOL}&cols=node,pools,platforms", PAGE, check=shows_only_visible),
        Probe("list", "get", f"/nodes/?platform={HIDDEN_POOL}/{HIDDEN_PLATFORM}", PAGE, check=shows_only_visible),
        Probe("fragment", "get", f"/nodes/?q={HIDDEN_PLATFORM}&cols=node,pools,platforms",
              ok_as(PAGE, 200) | {"anonymous": 401}, headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible),
        Probe("csv", "get", f"/nodes/?export=csv&q={HIDDEN_POOL}&cols=node,pools,platforms", PAGE,
              check=shows_only_visible, writer="copy"),
        Probe("csv", "get", f"/nodes/?export=csv&q={HIDDEN_POOL}&cols=node,pools,platforms", PAGE,
              check=shows_only_visible, writer="python"),
        Probe("detail", "get", "/pools/team-gpu-pool/?cols=node,pools,platforms,sharing",
              page_only_for("team-gpu-pool"), check=shows_only_visible),
        Probe("fragment", "get", "/pools/team-gpu-pool/?cols=node,pools,platforms",
              ok_as(page_only_for("team-gpu-pool"), 200) | {"anonymous": 401}, headers={"HTTP_HX_REQUEST": "true"},
              check=shows_only_visible),
        Probe("csv", "get", "/pools/team-gpu-pool/?export=csv", page_only_for("team-gpu-pool"),
              check=shows_only_visible),
        Probe("detail", "get", "/pools/sim-a/?cols=node,pools,platforms", page_only_for("sim-a"),
              check=shows_only_visible),
        Probe("detail", "get", "/pools/sim-secret/", page_only_for("sim-secret"), check=shows_only_visible),
        Probe("detail", "get", f"/pools/{HIDDEN_POOL}/", page_only_for(HIDDEN_POOL), check=shows_only_visible),
        Probe("detail", "get", f"/nodes/{node_of('sim-a')}/", page_only_for("sim-a"), check=shows_only_visible),
        Probe("detail", "get", f"/nodes/{SHARED_NODE}/", only_for(*SHARED_PLATFORMS) | {"anonymous": 302},
              check=shows_only_visible),
        Probe("detail", "get", f"/nodes/{node_of(HIDDEN_POOL)}/", page_only_for(HIDDEN_POOL), check=shows_only_visible),
        Probe("write", "post", f"/nodes/{node_of('sim-a')}/cordon/",
              {"anonymous": 302, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 302},
              body={"cordon": "maybe"}),
        Probe("list", "get", "/config/history/", PAGE, check=shows_only_visible),
        Probe("csv", "get", "/config/history/?export=csv", PAGE, check=shows_only_visible),
        Probe("detail", "get", "/config/history/diff/?type=role&revision=1",
              {"anonymous": 302, "nobody": 404, "teammate": 404, "policy_user": 404, "staff": 200}),
        Probe("page", "get", "/config/history/rollback/?type=role&revision=1",
              {"anonymous": 302, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 200}),
        Probe("write", "post", "/config/history/rollback/",
              {"anonymous": 302, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": (400, 404)},
              body={"type": "role", "revision": 1}),
        Probe("write", "post", "/tables/nodes/columns/", dict.fromkeys(PRINCIPALS, 302), body={"columns": ["node"]}),
        Probe("page", "get", "/quotas/", PAGE, check=shows_only_visible_projects),
        Probe("fragment", "get", "/quotas/", ok_as(PAGE, 200) | {"anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible_projects),
        Probe("csv", "get", "/quotas/?export=csv", PAGE, check=shows_only_visible_projects),
        Probe("detail", "get", "/quotas/?pool=sim-secret", PAGE,
              check=shows_only_visible_projects_but_the_query("pool=sim-secret")),
        # A JSON body names no cell: staff reach the view and are refused (400); test_quotas.py edits for real.
        Probe("write", "post", "/quotas/edit/",
              {"anonymous": 302, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 400},
              body={"cell": "project:team-project:team-gpu-pool:gpu:deserved", "value": "1"}),
        Probe("list", "get", "/projects/", PAGE, check=shows_only_visible_projects),
        Probe("list", "get", "/projects/?department=secret-dept", PAGE,
              check=shows_only_visible_projects_but_the_query("department=secret-dept")),
        Probe("fragment", "get", "/projects/", ok_as(PAGE, 200) | {"anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible_projects),
        Probe("csv", "get", "/projects/?export=csv&cols=name,department,default_pools", PAGE,
              check=shows_only_visible_projects),
        Probe("detail", "get", "/projects/default/", PAGE, check=shows_only_visible_projects),
        Probe("detail", "get", "/projects/team-project/", project_only_for("team-project"),
              check=shows_only_visible_projects),
        Probe("detail", "get", "/projects/secret-project/", project_only_for("secret-project"),
              check=shows_only_visible_projects),
        Probe("csv", "get", "/projects/secret-project/?export=csv", project_only_for("secret-project"),
              check=shows_only_visible_projects),
        Probe("csv", "get", "/projects/secret-project/?export=csv&table=members", project_only_for("secret-project"),
              check=shows_only_visible_projects),
        # Onboarding a member (pools.quotas.onboarding): staff only; a bad name is refused on the page (400).
        Probe("write", "post", "/projects/team-project/",
              {"anonymous": 302, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 400},
              body={"user": "not a name"}, form=True),
    ],
    # ---- inventory: every signed-in user, scoped to their pools -----------------------------------------------
    "api-pool-list": [Probe("list", "get", "/api/pools/", SIGNED_IN, check=lists_exactly_visible_pools),
                      Probe("list", "get", "/api/pools/?limit=1000", SIGNED_IN, check=shows_only_visible)],
    "api-pool-detail": [Probe("detail", "get", "/api/pools/team-gpu-pool/", only_for("team-gpu-pool"),
                       check=shows_only_visible),
                 Probe("detail", "get", "/api/pools/sim-a/", only_for("sim-a"), check=shows_only_visible),
                 Probe("detail", "get", "/api/pools/sim-secret/", only_for("sim-secret")),
                 Probe("detail", "get", f"/api/pools/{HIDDEN_POOL}/", only_for(HIDDEN_POOL),
                       check=shows_only_visible),
                 Probe("detail", "get", "/api/pools/default/", SIGNED_IN, check=shows_only_visible)],
    "api-resource-list": [Probe("list", "get", "/api/resources/", SIGNED_IN, check=lists_exactly_visible_nodes),
                      Probe("list", "get", "/api/resources/?pool=team-gpu-pool", SIGNED_IN,
                            check=shows_only_visible),
                      # Free text matches pool names through visible memberships only.
                      Probe("list", "get", "/api/resources/?q=node-", SIGNED_IN, check=lists_exactly_visible_nodes),
                      Probe("list", "get", "/api/resources/?q=team", SIGNED_IN, check=shows_only_visible),
                      Probe("list", "get", "/api/resources/?limit=1000&offset=0", SIGNED_IN,
                            check=pages_exactly_visible_nodes),
                      Probe("list", "get", "/api/resources/?platform=teamplat-zq", SIGNED_IN,
                            check=shows_only_visible),
                      Probe("list", "get", f"/api/resources/?pool={HIDDEN_POOL}", SIGNED_IN,
                            check=shows_only_visible),
                      Probe("list", "get", f"/api/resources/?platform={HIDDEN_PLATFORM}", SIGNED_IN,
                            check=shows_only_visible),
                      Probe("list", "get", f"/api/resources/?platform={HIDDEN_POOL}/{HIDDEN_PLATFORM}", SIGNED_IN,
                            check=shows_only_visible),
                      Probe("list", "get", "/api/resources/?platform=simplat-zq&status=Unknown", SIGNED_IN,
                            check=shows_only_visible),
                      Probe("list", "get", f"/api/resources/?q={HIDDEN_POOL}", SIGNED_IN,
                            check=shows_only_visible)],
    "api-node-detail": [Probe("detail", "get", f"/api/nodes/{node_of('sim-a')}/", only_for("sim-a"),
                              check=shows_only_visible),
                        Probe("detail", "get", f"/api/nodes/{SHARED_NODE}/", only_for(*SHARED_PLATFORMS),
                              check=shows_the_shared_node)],
    "api-node-labels": [Probe("write", "post", f"/api/nodes/{node_of('sim-a')}/labels",
                              ok_as(ADMIN, (200, 400, 502, 503)), body={"labels": {}})],
    "api-node-cordon": [Probe("write", "post", f"/api/nodes/{node_of('sim-a')}/cordon", ok_as(ADMIN, 400),
                              body={"cordon": "yes"})],
    "api-node-uncordon": [Probe("write", "post", f"/api/nodes/{node_of('sim-a')}/uncordon",
                                ok_as(ADMIN, (200, 502, 503)))],
    "api-schema": [Probe("detail", "get", "/api/schema/", SIGNED_IN, check=names_nothing_of_the_fleet)],
    "api-root": [Probe("list", "get", "/api/", SIGNED_IN, check=names_nothing_of_the_fleet)],
    "api-docs": [Probe("page", "get", "/api/docs/", PAGE, check=names_nothing_of_the_fleet)],
    "api-docs-redoc": [Probe("page", "get", "/api/docs/redoc/", PAGE, check=names_nothing_of_the_fleet)],
    # ---- departments, projects and quotas: every signed-in user, scoped to their projects and pools ----------
    "api-project-members": [Probe("write", "post", "/api/projects/team-project/members/", ok_as(ADMIN, 201),
                                  body={"user": "probe-member"})],
    "api-project-list": [Probe("list", "get", "/api/projects/", SIGNED_IN, check=lists_exactly_visible_projects)],
    "api-project-detail": [
        Probe("detail", "get", "/api/projects/team-project/", only_for_project("team-project"),
              check=shows_only_visible),
        Probe("detail", "get", "/api/projects/secret-project/", only_for_project("secret-project")),
        Probe("detail", "get", "/api/projects/default/", SIGNED_IN, check=shows_only_visible)],
    "api-department-list": [Probe("list", "get", "/api/departments/", SIGNED_IN, check=shows_only_visible)],
    "api-department-detail": [
        Probe("detail", "get", "/api/departments/team-dept/", only_for_project("team-project"),
              check=shows_only_visible),
        Probe("detail", "get", "/api/departments/secret-dept/", only_for_project("secret-project"))],
    "api-quota-list": [
        Probe("list", "get", "/api/quotas/", SIGNED_IN, check=shows_only_visible),
        Probe("list", "get", "/api/quotas/?pool=sim-secret", SIGNED_IN, check=lists_quota_rows_only_for_staff),
        Probe("list", "get", f"/api/quotas/?pool={HIDDEN_POOL}&project=team-project", SIGNED_IN,
              check=lists_quota_rows_only_for_staff),
        Probe("list", "get", "/api/quotas/?project=secret-project", SIGNED_IN,
              check=lists_quota_rows_only_for_staff)],
    # ---- workloads: members of the project and the submitter; names of pools they may not see are left out ---
    "api-workload-list": [
        Probe("list", "get", "/api/workloads/", SIGNED_IN, check=lists_exactly_visible_workloads),
        Probe("list", "get", f"/api/workloads/?pool={HIDDEN_POOL}", SIGNED_IN, check=shows_only_visible),
        # The dry run and a refusal name only the candidates the caller may see (team-project's defaults name
        # sim-secret and the staff-only pool: told to the teammate as "(a pool you may not see)").
        Probe("write", "post", "/api/workloads/?dry_run=1", {
            "anonymous": 401, "nobody": 400, "teammate": (200, 400), "policy_user": 400, "staff": (200, 400)},
            body=API_SUBMISSION, check=shows_only_visible_projects),
        Probe("write", "post", "/api/workloads/?dry_run=1", {
            "anonymous": 401, "nobody": 400, "teammate": (400, 403), "policy_user": 400, "staff": (400, 403)},
            body={**API_SUBMISSION, "resources": {"gpu": 10_000}}, check=shows_only_visible, check_refused=True)],
    "api-workload-detail": [
        Probe("detail", "get", f"/api/workloads/{TEAM_WORKLOAD}/", only_for_project("team-project"),
              check=reads_the_request({"teammate", "staff"})),
        Probe("detail", "get", f"/api/workloads/{DEFAULT_WORKLOAD}/", SIGNED_IN, check=reads_the_request({"staff"})),
        Probe("detail", "get", f"/api/workloads/{SECRET_WORKLOAD}/", only_for_project("secret-project"))],
    # Logs: who may read the request (404 for those who may not see the workload, 403 for those who see it only);
    # these pending workloads have no pod yet, so a reader is told so (404 with its reason).
    "api-workload-logs": [
        Probe("detail", "get", f"/api/workloads/{TEAM_WORKLOAD}/logs", ok_as(only_for_project("team-project"), 404),
              check=shows_only_visible),
        Probe("detail", "get", f"/api/workloads/{DEFAULT_WORKLOAD}/logs",
              {"anonymous": 401, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 404},
              check=shows_only_visible)],
    "osmo-workflow-logs": [
        Probe("detail", "get", "/api/workflow/team-flow-1/logs", ok_as(only_for_project("team-project"), 404),
              check=shows_only_visible),
        Probe("detail", "get", "/api/workflow/open-flow-1/logs",
              {"anonymous": 401, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 404},
              check=shows_only_visible)],
    "api-workload-idle": [Probe("list", "get", "/api/workloads/idle/", SIGNED_IN, check=shows_only_visible)],
    "api-workload-cancel": [
        Probe("write", "post", f"/api/workloads/{SECRET_WORKLOAD}/cancel/", only_for_project("secret-project"))],
    "osmo-submit": [
        Probe("write", "post", "/api/pool/team-gpu-pool/workflow?dry_run=true",
              may_submit_to("team-gpu-pool"), body={"file": PROBE_WORKFLOW}, check=shows_only_visible),
        Probe("write", "post", "/api/pool/sim-a/workflow?dry_run=true", may_submit_to("sim-a"),
              body={"file": PROBE_WORKFLOW}, check=shows_only_visible),
        Probe("write", "post", f"/api/pool/{HIDDEN_POOL}/workflow?dry_run=true",
              may_submit_to(HIDDEN_POOL), body={"file": PROBE_WORKFLOW})],
    "workloads:*": [
        Probe("page", "get", "/workloads/", PAGE, check=shows_only_visible),
        Probe("fragment", "get", "/workloads/", ok_as(PAGE, 200) | {"anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible),
        Probe("csv", "get", "/workloads/?export=csv&cols=name,pools,pool,reason", PAGE, check=shows_only_visible),
        Probe("page", "get", "/workloads/idle/", PAGE, check=shows_only_visible),
        Probe("csv", "get", "/workloads/idle/?export=csv&cols=name,project,pool,gpus", PAGE, check=shows_only_visible),
        Probe("list", "get", f"/workloads/?pool={HIDDEN_POOL}&cols=name,pools", PAGE, check=shows_only_visible),
        Probe("detail", "get", f"/workloads/{TEAM_WORKLOAD}/", project_only_for("team-project"),
              check=reads_the_request({"teammate", "staff"})),
        Probe("detail", "get", f"/workloads/{DEFAULT_WORKLOAD}/", PAGE, check=reads_the_request({"staff"})),
        Probe("detail", "get", f"/workloads/{SECRET_WORKLOAD}/", project_only_for("secret-project")),
        Probe("fragment", "get", f"/workloads/{TEAM_WORKLOAD}/logs/",
              project_only_for("team-project") | {"anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible),
        Probe("fragment", "get", f"/workloads/{DEFAULT_WORKLOAD}/logs/",
              ok_as(PAGE, 403) | {"staff": 200, "anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible),
        Probe("write", "post", f"/workloads/{SECRET_WORKLOAD}/cancel/",
              ok_as(project_only_for("secret-project"), 302)),
        Probe("fragment", "get", "/workloads/queue/?pool=team-gpu-pool", page_only_for("team-gpu-pool"),
              check=shows_only_visible),
        Probe("fragment", "get", f"/workloads/queue/?pool={HIDDEN_POOL}", page_only_for(HIDDEN_POOL),
              check=shows_only_visible),
        Probe("fragment", "get", "/workloads/queue/?project=team-project", project_only_for("team-project"),
              check=shows_only_visible),
        # Submitting from the browser: the form lists only the principal's projects and usable pools; "Run again"
        # fills it only for those who may read the request; the dry run and the submit refuse a project that is
        # not theirs (400, the box named) and show only the pools they may see.
        Probe("page", "get", "/workloads/new/", PAGE, check=shows_only_visible_projects),
        Probe("detail", "get", f"/workloads/new/?from={TEAM_WORKLOAD}", project_only_for("team-project"),
              check=reads_the_request({"teammate", "staff"})),
        Probe("detail", "get", f"/workloads/new/?from={DEFAULT_WORKLOAD}", PAGE, check=reads_the_request({"staff"})),
        Probe("detail", "get", f"/workloads/new/?from={SECRET_WORKLOAD}", project_only_for("secret-project")),
        Probe("fragment", "post", "/workloads/new/dry-run/", {
            "anonymous": 401, "nobody": 400, "teammate": (200, 400), "policy_user": 400, "staff": (200, 400)},
            body=SUBMIT_FORM, form=True, headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible_projects),
        Probe("write", "post", "/workloads/new/", {
            "anonymous": 302, "nobody": 400, "teammate": (302, 400), "policy_user": 400, "staff": (302, 400)},
            body=SUBMIT_FORM, form=True, check=shows_only_visible_projects)],
    # ---- usage: rows of the viewer's projects in pools they may see, and their own; staff all ---------------
    "usage:*": [
        Probe("page", "get", f"/usage/?{USAGE_PERIOD}", PAGE, check=lists_exactly_visible_usage),
        Probe("fragment", "get", f"/usage/?{USAGE_PERIOD}&group_by=pool", ok_as(PAGE, 200) | {"anonymous": 401},
              headers={"HTTP_HX_REQUEST": "true"}, check=shows_only_visible_projects),
        Probe("csv", "get", f"/usage/?{USAGE_PERIOD}&export=csv", PAGE, check=lists_exactly_visible_usage),
        Probe("csv", "get", f"/usage/?{USAGE_PERIOD}&group_by=platform&export=csv", PAGE,
              check=shows_only_visible_projects),
        Probe("list", "get", f"/usage/?{USAGE_PERIOD}&group_by=user", PAGE, check=names_no_other_user),
        Probe("list", "get", f"/usage/?{USAGE_PERIOD}&group_by=department&pool={HIDDEN_POOL}", PAGE,
              check=shows_only_visible_projects)],
    "api-usage": [
        Probe("list", "get", f"/api/usage/?{USAGE_PERIOD}", SIGNED_IN, check=lists_exactly_visible_usage),
        Probe("list", "get", f"/api/usage/?{USAGE_PERIOD}&group_by=pool", SIGNED_IN, check=shows_only_visible_projects),
        Probe("list", "get", f"/api/usage/?{USAGE_PERIOD}&group_by=user", SIGNED_IN, check=names_no_other_user),
        Probe("list", "get", f"/api/usage/?{USAGE_PERIOD}&pool={HIDDEN_POOL}", SIGNED_IN,
              check=shows_only_visible_projects),
        Probe("list", "get", f"/api/usage/?{USAGE_PERIOD}&group_by=nothing", ok_as(SIGNED_IN, 400))],
    "osmo-workflows": [Probe("list", "get", "/api/workflow", SIGNED_IN, check=shows_only_visible)],
    # OSMO's CLI's paths (pools.api.osmo_fleet, scheduling.api.osmo_account): the same scoping as ours.
    "osmo-pool-quota": [Probe("list", "get", "/api/pool_quota?all_pools=True", SIGNED_IN,
                              check=shows_all_visible_pools),
                        Probe("list", "get", f"/api/pool_quota?pools={HIDDEN_POOL}&all_pools=False", SIGNED_IN,
                              check=shows_only_visible)],
    "osmo-pools": [Probe("list", "get", "/api/pool?all_pools=True", SIGNED_IN, check=shows_all_visible_pools),
                   Probe("list", "get", f"/api/pool?pools={HIDDEN_POOL}", SIGNED_IN, check=shows_only_visible)],
    "osmo-resources": [
        Probe("list", "get", "/api/resources?all_pools=True", SIGNED_IN, check=shows_only_visible),
        Probe("list", "get", "/api/resources?pools=team-gpu-pool&all_pools=False", SIGNED_IN,
              check=shows_only_visible),
        Probe("list", "get", f"/api/resources?pools={HIDDEN_POOL}&all_pools=False", SIGNED_IN,
              check=shows_only_visible),
        Probe("list", "get", f"/api/resources?platforms={HIDDEN_PLATFORM}&all_pools=True", SIGNED_IN,
              check=shows_only_visible)],
    "osmo-resource": [
        Probe("detail", "get", f"/api/resources/{SHARED_NODE}", only_for(*SHARED_PLATFORMS), check=shows_only_visible),
        Probe("detail", "get", f"/api/resources/{node_of(HIDDEN_POOL)}", only_for(HIDDEN_POOL),
              check=shows_only_visible)],
    "osmo-profile-settings": [
        Probe("detail", "get", "/api/profile/settings", SIGNED_IN, check=shows_all_visible_pools),
        Probe("write", "post", "/api/profile/settings", ok_as(SIGNED_IN, 400) | {"staff": 200},
              body={"pool": HIDDEN_POOL},
              check=shows_only_visible)],
    "osmo-version": [Probe("detail", "get", "/api/version", PUBLIC)],
    # One's own credentials only: another user's is a name that does not exist (tests/workflows/test_credentials.py).
    "osmo-credentials": [Probe("list", "get", "/api/credentials", SIGNED_IN)],
    "osmo-credential": [Probe("write", "post", "/api/credentials/probe-zq", SIGNED_IN,
                              body={"generic_credential": {"credential": {"k": "v"}}}),
                        Probe("write", "delete", "/api/credentials/nope-zq", ok_as(SIGNED_IN, 404))],
    "osmo-workflow-events": [
        Probe("detail", "get", "/api/workflow/team-flow-1/events", only_for_project("team-project"),
              check=shows_only_visible),
        Probe("detail", "get", "/api/workflow/secret-flow-1/events", only_for_project("secret-project"))],
    "osmo-workflow-spec": [
        # These workflows were made as rows, not from a file: readers are told there is no spec (404).
        Probe("detail", "get", "/api/workflow/team-flow-1/spec", ok_as(only_for_project("team-project"), 404)),
        Probe("detail", "get", "/api/workflow/open-flow-1/spec",
              {"anonymous": 401, "nobody": 403, "teammate": 403, "policy_user": 403, "staff": 404})],
    "osmo-workflow-error-logs": [
        Probe("detail", "get", "/api/workflow/team-flow-1/error_logs", ok_as(only_for_project("team-project"), 404),
              check=shows_only_visible)],
    "osmo-workflow": [
        Probe("detail", "get", "/api/workflow/team-flow-1", only_for_project("team-project"),
              check=shows_only_visible),
        Probe("detail", "get", "/api/workflow/secret-flow-1", only_for_project("secret-project"))],
    "osmo-workflow-cancel": [
        Probe("write", "post", "/api/workflow/secret-flow-1/cancel", only_for_project("secret-project"))],
    # Port-forward: a teammate sees the workflow but not its tasks' addresses (403); staff are told the pending
    # task has no pod to forward to (409); whoever does not see it, 404.
    "osmo-workflow-portforward": [
        Probe("detail", "post", "/api/workflow/team-flow-1/portforward/train?task_ports=8888",
              {"anonymous": 401, "nobody": 404, "teammate": 403, "policy_user": 404, "staff": 409})],
}


# ---- the URL configuration ----------------------------------------------------------------------------------

def url_keys(patterns=None, namespace=None) -> set[str]:
    keys = set()
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace:
                keys.add(f"{pattern.namespace}:*")
            else:
                keys |= url_keys(pattern.url_patterns, namespace)
        elif isinstance(pattern, URLPattern):
            keys.add(pattern.name or f"<{str(pattern.pattern) or 'root'}>")
    return keys


def test_every_url_has_a_rule_in_the_matrix():
    served = url_keys()

    missing = sorted(served - MATRIX.keys())
    stale = sorted(MATRIX.keys() - served)

    assert not missing, f"URLs without an access rule in tests/access/test_matrix.py MATRIX: {missing}"
    assert not stale, f"MATRIX entries for URLs that no longer exist: {stale}"


def test_every_matrix_entry_probes_every_principal():
    for key, probes in MATRIX.items():
        assert probes, key
        for probe in probes:
            assert set(probe.expect) == set(PRINCIPALS), (key, probe.url)


# ---- the checks -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """The world every case reads (tests/access/conftest.py's pools, `subject` and `projects`), built once per
    module and process inside a transaction rolled back at the end: a case runs in a savepoint of it (pytest-django's
    `db`), so whatever a write probe changes is gone before the next case. Built per case, it cost about half of
    each of the thousand cases."""
    with django_db_blocker.unblock(), override_settings(OSMO_PROJECT_MEMBERS_USE_POOLS=False), transaction.atomic():
        build_shared_node_pools()
        give(get_user_model().objects.create_user("subject"), "osmo-team")
        tokens.create_token(get_user_model().objects.get(username="subject"), "subject-token",
                            timezone.now() + dt.timedelta(days=5))
        build_projects()
        yield
        transaction.set_rollback(True)


@pytest.fixture
def shared_node_pools(world, db):
    """The module's world (the principals' fixtures ask for it by this name)."""


@pytest.fixture
def subject(world, db, django_user_model):
    """Someone else: holds osmo-team and a token the principals must neither see nor revoke."""
    return django_user_model.objects.get(username="subject")


@pytest.fixture
def projects(world, db):
    """The projects of `build_projects`, in the module's world."""


def build_projects():
    """team-project (role osmo-team) and secret-project (one named user), each with quotas in a pool the
    team may use, a pool it may not and the staff-only pool; pods counted in pools the team may and may not see."""
    writes.import_document(ConfigKind.DEPARTMENT, [{"name": "team-dept"}, {"name": "secret-dept"}], author="tests")
    quotas = [{"node_pool": pool, "gpu": {"deserved": 1}} for pool in ("team-gpu-pool", "sim-secret", HIDDEN_POOL)]
    writes.import_document(ConfigKind.PROJECT, [
        {"name": "team-project", "department": "team-dept", "members": {"roles": ["osmo-team"]},
         "default_node_pools": ["team-gpu-pool", "sim-secret", HIDDEN_POOL], "resources": quotas},
        {"name": "secret-project", "department": "secret-dept", "members": {"users": ["someone-else"]},
         "default_node_pools": ["sim-secret"], "resources": quotas}], author="tests")
    backend = Backend.objects.get(name="default")
    # By hand, the pods, workloads and usage hours below: the world's nodes are bare rows with no cluster to sync
    # from, the workloads are a submitter's with no account here (someone-else), each with the staff-only pool among
    # its candidates, and the usage hours are dated two hours back; the matrix reads what each principal is shown.
    Pod.objects.bulk_create([
        # Without a pool label on the shared node: counted in each of its pools, the hidden one too.
        Pod(backend=backend, uid="team-pod", namespace="proj-team-project", name="train-0", node_name=SHARED_NODE,
            phase="Running", gpu=2),
        Pod(backend=backend, uid="team-labelled-pod", namespace="proj-team-project", name="p",
            node_name=node_of("team-gpu-pool"), phase="Running", gpu=1, pool="team-gpu-pool"),
        Pod(backend=backend, uid="secret-pod", namespace="proj-secret-project", name="p",
            node_name=node_of("team-gpu-pool"), phase="Running", gpu=2)])
    # Pending workloads, one per project, whose candidate pools include ones the team may not see.
    submitted = timezone.now()
    for pk, project, flow in ((TEAM_WORKLOAD, "team-project", "team-flow-1"),
                              (SECRET_WORKLOAD, "secret-project", "secret-flow-1"),
                              (DEFAULT_WORKLOAD, "default", "open-flow-1")):
        pools = ["team-gpu-pool", "sim-secret", HIDDEN_POOL]
        env = {"HF_TOKEN": CREDENTIAL}
        container = {"name": "user", "command": ["train", PRIVATE_FLAG],
                     "env": [{"name": "HF_TOKEN", "value": CREDENTIAL}]}
        workload = Workload.objects.create(
            id=pk, name=flow.rsplit("-", 1)[0], workflow=flow, group="train", project=Project.objects.get(name=project),
            submitter_name="someone-else", source="osmo", pools=pools, gpu=1,
            request={"name": "train", "pools": pools, "command": ["train", PRIVATE_FLAG], "env": env},
            templates={pool: {"platform": "", "pod_template": {"spec": {"containers": [container]}}} for pool in pools},
            reasons=[{"pool": pool, "code": "CAPACITY", "message": f"No room in {pool}.", "details": {}}
                     for pool in pools], positions=dict.fromkeys(pools, 1), submitted_at=submitted)
        WorkloadEvent.objects.create(workload=workload, at=submitted, status="PENDING", reason="SUBMITTED",
                                     message=f"Candidate pools: {', '.join(pools)}.", pools=pools)
    # Usage hours (issue 27): each project in a pool the team sees, one it does not and the staff-only one.
    hour = (submitted - dt.timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    UsageHour.objects.bulk_create([
        UsageHour(hour=hour, pool=pool, platform=platform, project=project, department=department, user=user,
                  gpu_seconds=3600)
        for pool, platform, project, department, user in (
            ("team-gpu-pool", "teamplat-zq", "team-project", "team-dept", "teammate-user"),
            (HIDDEN_POOL, HIDDEN_PLATFORM, "team-project", "team-dept", "teammate-user"),
            ("sim-secret", "", "team-project", "team-dept", "someone-else"),
            ("team-gpu-pool", "teamplat-zq", "secret-project", "secret-dept", "someone-else"),
            ("default", "", "default", "default", ""))])


def snapshot() -> tuple:
    return (ConfigRevision.objects.count(), Role.objects.count(), RoleAssignment.objects.count(),
            AccessToken.objects.count(), get_user_model().objects.count(), Pool.objects.count(),
            list(Role.objects.values_list("name", "policies")),
            list(Quota.objects.order_by("pk").values_list("gpu_deserved", "gpu_limit", "gpu_weight")))


# URLs whose views do not follow their entry yet. Strict: once a view is fixed its cases pass, the xfail
# turns into a failure, and the entry must leave this list.
PENDING: dict[str, str] = {}


def _marks(key: str, principal: str):
    if key in PENDING and principal in ("nobody", "teammate", "policy_user"):
        return [pytest.mark.xfail(strict=True, reason=PENDING[key])]
    return []


CASES = [pytest.param(key, probe, principal, id=f"{key}-{probe.kind}-{probe.method}-{index}-{principal}",
                      marks=_marks(key, principal))
         for key, probes in MATRIX.items() for index, probe in enumerate(probes) for principal in PRINCIPALS]


# Names of the shared node's pools and platforms that a URL may carry, each with the pool it belongs to and
# a name of the same shape that does not exist.
TWINS = {HIDDEN_POOL: (HIDDEN_POOL, "nonexist-zq"), HIDDEN_PLATFORM: (HIDDEN_POOL, "nonepla-zq"),
         "simplat-zq": ("sim-a", "nopelat-zq"), "teamplat-zq": ("team-gpu-pool", "nonplat-zq")}


def hidden_names(principal: str) -> list[str]:
    """The names no answer to `principal` may hold: the shared node's pools they may not see (the
    distinctive one, searched as bytes), and their platforms."""
    return [*([] if HIDDEN_POOL in VISIBLE[principal] else [HIDDEN_POOL]), *hidden_platforms(principal)]


def send(client, probe: Probe, url: str):
    kwargs = {"format": "multipart" if probe.form else "json"} if probe.body is not None else {}
    if probe.body is not None:
        return getattr(client, probe.method)(url, probe.body, **kwargs, **probe.headers)
    return getattr(client, probe.method)(url, **probe.headers)


def _comparable(response, replacements: dict[str, str]) -> bytes:
    """The answer with the names of the request in place of the other request's, and without what
    differs between any two answers (the CSRF token, relative times, the file name's time)."""
    body = _bytes(response)
    for name, other in replacements.items():
        body = body.replace(name.encode(), other.encode())
    body = re.sub(rb'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+', rb"\1", body)
    return re.sub(rb"<time[^>]*>[^<]*</time>", b"<time>", body)


@pytest.fixture
def csv_writer(monkeypatch):
    """Which writer each CSV probe used: PostgreSQL's COPY ("copy") or the reference writer ("python")."""
    used = []
    copy_export = pages_csv.copy_export

    def spy(*args, **kwargs):
        export = copy_export(*args, **kwargs)
        used.append("python" if export is None else "copy")
        return export

    monkeypatch.setattr(pages_csv, "copy_export", spy)
    return used


@pytest.mark.parametrize(("key", "probe", "principal"), CASES)
def test_the_matrix(client_as, subject, projects, key, probe, principal, monkeypatch, csv_writer):
    client = client_as(principal)
    before = snapshot()
    if probe.writer == "python":
        monkeypatch.setattr(pages_csv, "FAST_PATH", False)

    response = send(client, probe, probe.url)

    expected = probe.expect[principal]
    acceptable = expected if isinstance(expected, tuple) else (expected,)
    assert response.status_code in acceptable, (principal, probe.method, probe.url, response.content[:300])
    if response.status_code in (401, 403):
        assert snapshot() == before, "a refused request changed something"
    # A request that names a pool or platform the principal may not see is checked through its twin below.
    named = {name: twin for name, (pool, twin) in TWINS.items() if name in probe.url and pool not in VISIBLE[principal]}
    if probe.check and (response.status_code < 300 or probe.check_refused) and not named:
        probe.check(response, principal)
    if probe.writer and response.status_code == 200 and response.streaming:
        assert csv_writer[-1:] == ["copy" if probe.writer == "copy" and connection.vendor == "postgresql"
                                   else "python"]

    # Redaction: no answer names a pool of the shared node that the principal may not see, or its platforms,
    # unless the request named it; then the answer is the one a name that does not exist gets.
    unnamed = [name for name in hidden_names(principal) if name not in named]
    leaked = [name for name in unnamed if name.encode() in _bytes(response)]
    assert not leaked, f"{principal} is told {leaked} by {probe.method.upper()} {probe.url}"
    if named:
        url = probe.url
        for name, twin in named.items():
            url = url.replace(name, twin)
        other = send(client, probe, url)
        assert other.status_code == response.status_code, (url, other.content[:300])
        assert _comparable(response, named) == _comparable(other, {}), (
            f"{principal}: {probe.url} does not answer as {url} does")
        if probe.check and other.status_code < 300:
            probe.check(other, principal)
