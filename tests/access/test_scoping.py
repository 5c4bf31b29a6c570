"""`Pool.objects.visible_to`, `Node.objects.visible_to`, the redaction of a row's pool and platform
names, and what authorization costs in queries."""

import pytest
from django.db import connection
from django.test import RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext

from pools.fleet import usage
from pools.models import Backend, Node, Pool, Role, RoleAssignment
from pools.models.visibility import Access, access_cache, access_for, redact, redact_sql
from tests.access.conftest import (
    HIDDEN_PLATFORM,
    HIDDEN_POOL,
    POOLS,
    PRINCIPALS,
    SHARED_NODE,
    SHARED_PLATFORMS,
    VISIBLE,
    visible_nodes,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_each_principal_sees_exactly_their_pools(request, shared_node_pools, principal):
    user = request.getfixturevalue(principal)

    assert set(Pool.objects.visible_to(user).values_list("name", flat=True)) == VISIBLE[principal]


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_the_database_filter_agrees_with_the_rule_for_one_pool(request, shared_node_pools, principal):
    access = Access(request.getfixturevalue(principal))

    assert {name for name in POOLS if access.may_use_pool(name)} == VISIBLE[principal]


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_each_principal_sees_the_nodes_of_their_pools_and_only_staff_sees_nodes_in_no_pool(request, shared_node_pools,
                                                                                          principal):
    user = request.getfixturevalue(principal)

    assert set(Node.objects.visible_to(user).values_list("name", flat=True)) == visible_nodes(principal)


def test_a_node_in_a_visible_and_an_invisible_pool_is_listed_once(shared_node_pools, teammate):
    node = Node.objects.get(name="node-team-gpu-pool")
    node.memberships.create(pool=Pool.objects.get(name="other-team-pool"))

    assert list(Node.objects.visible_to(teammate).filter(name=node.name).values_list("name", flat=True)) == [node.name]


def test_deny_beats_allow_in_the_database_too(shared_node_pools, policy_user):
    assert not Pool.objects.visible_to(policy_user).filter(name="sim-secret").exists()
    assert Pool.objects.visible_to(policy_user).filter(name="sim-a").exists()


@override_settings(ACCESS_DEFAULT_POOL_OPEN=False)
def test_the_default_pool_can_be_closed_by_a_setting(shared_node_pools, nobody, teammate):
    assert not Pool.objects.visible_to(nobody).exists()
    assert "default" not in set(Pool.objects.visible_to(teammate).values_list("name", flat=True))


def test_visible_to_takes_a_request_too(shared_node_pools, teammate):
    http_request = RequestFactory().get("/")
    http_request.user = teammate

    assert set(Pool.objects.visible_to(http_request).values_list("name", flat=True)) == VISIBLE["teammate"]


def test_visible_to_composes_with_other_filters_and_subqueries(shared_node_pools, teammate):
    pools = Pool.objects.visible_to(teammate).filter(name__startswith="team").order_by("name")

    assert list(pools.values_list("name", flat=True)) == ["team-cluster-02", "team-gpu-pool", "teamcluster01"]
    # Their own node each, and the node they share with sim-a and hiddenpool-zq.
    assert Node.objects.filter(memberships__pool__in=pools).distinct().count() == 4


def test_an_inactive_user_sees_nothing(shared_node_pools, teammate):
    teammate.is_active = False

    assert not Pool.objects.visible_to(teammate).exists()


def test_a_role_removed_between_two_calls_outside_a_request_is_gone_at_once(shared_node_pools, teammate):
    assert Pool.objects.visible_to(teammate).filter(name="team-gpu-pool").exists()
    RoleAssignment.objects.filter(user=teammate).delete()

    assert not Pool.objects.visible_to(teammate).filter(name="team-gpu-pool").exists()

# ---- redaction -------------------------------------------------------------------------------------------

def test_redact_keeps_the_names_of_visible_pools_and_their_platforms_in_their_order():
    visible = frozenset({"b", "a"})

    assert redact(["c", "b", "a", "ab"], visible) == ["b", "a"]
    assert redact(["c/x", "b/y", "a/z/w", "a", "ab/x"], visible, platforms=True) == ["b/y", "a/z/w", "a"]
    assert redact(["c", "b"], None) == ["c", "b"]
    assert redact(["c/x"], None, platforms=True) == ["c/x"]
    assert redact(["a", "a/x"], frozenset()) == []


@pytest.mark.postgres  # the COPY writer is PostgreSQL's
@pytest.mark.parametrize("platforms", [False, True])
def test_redact_sql_keeps_exactly_what_redact_keeps(db, platforms):
    names = ["a", "b", "ab", "a/x", "b/y/z", "ab/x", "", "/x", "a/", "A", "a b", "a,b", "'a'"]
    visible = frozenset({"a", "a b", "", "'a'"})

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT array(SELECT name FROM unnest(%s::text[]) WITH ORDINALITY AS t(name, i) "
                       f"WHERE {redact_sql('name', platforms=platforms)} ORDER BY i)", [names, sorted(visible)])
        kept = cursor.fetchone()[0]

    assert kept == redact(names, visible, platforms=platforms)


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_a_row_names_only_the_pools_and_platforms_the_viewer_may_see(request, shared_node_pools, principal):
    node = Node.objects.get(name=SHARED_NODE)
    access = Access(request.getfixturevalue(principal))

    pools, platforms = access.redact(node.pool_names, node.platform_names)

    seen = sorted(VISIBLE[principal] & SHARED_PLATFORMS.keys())
    assert pools == seen
    assert platforms == [f"{pool}/{SHARED_PLATFORMS[pool]}" for pool in seen]


def test_staff_see_every_name_and_it_costs_no_query(shared_node_pools, staff, django_assert_num_queries):
    node = Node.objects.get(name=SHARED_NODE)

    with django_assert_num_queries(0):
        assert Access(staff).visible_pool_names is None
        assert Access(staff).redact(node.pool_names, node.platform_names) == (node.pool_names, node.platform_names)


def test_the_visible_names_are_read_once_per_request(shared_node_pools, teammate, django_assert_num_queries):
    with access_cache(), django_assert_num_queries(2):  # the roles, then the pools with their platforms
        for _ in range(3):
            assert access_for(teammate).visible_pool_names == VISIBLE["teammate"]
            assert access_for(teammate).visible_platforms["team-gpu-pool"] == [SHARED_PLATFORMS["team-gpu-pool"]]


@pytest.mark.parametrize(("filters", "teammate_finds", "cli_finds"), [
    ({"pool": "team-gpu-pool"}, True, True),
    ({"platform": SHARED_PLATFORMS["team-gpu-pool"]}, True, True),
    ({"pool": HIDDEN_POOL}, False, True),
    ({"platform": HIDDEN_PLATFORM}, False, True),
    ({"platform": f"{HIDDEN_POOL}/{HIDDEN_PLATFORM}"}, False, True),
    ({"platform": SHARED_PLATFORMS["sim-a"]}, False, True),
    ({"pool": "team-gpu-pool", "platform": HIDDEN_PLATFORM}, False, False),  # one membership must match both
])
def test_a_filter_matches_through_the_viewers_pools_only_and_the_cli_through_all(shared_node_pools, teammate, filters,
                                                                                  teammate_finds, cli_finds):
    def finds(nodes, access):
        return usage.filter_nodes(nodes, access=access, **filters).filter(name=SHARED_NODE).exists()

    assert finds(Node.objects.visible_to(teammate), Access(teammate)) is teammate_finds
    # The CLI is the operator's: no access given, every pool and platform counts.
    assert finds(Node.objects.all(), None) is cli_finds


# ---- query counts -------------------------------------------------------------------------------------

def grow(count_roles: int, count_pools: int, user) -> None:
    # By hand: thousands of pools and hundreds of roles, seconds each through the doors; what is measured is the
    # authorization's queries, not how the rows came.
    backend = Backend.objects.get(name="default")
    Pool.objects.bulk_create(Pool(name=f"extra-{i:04d}", backend=backend) for i in range(count_pools))
    roles = Role.objects.bulk_create(
        Role(name=f"osmo-extra-{i:04d}", policies=[{"actions": [
            {"base": "http", "path": f"/api/pool/other-{i}*", "method": "post"},
            {"base": "http", "path": f"!/api/pool/extra-{i:04d}", "method": "*"}]}]) for i in range(count_roles))
    RoleAssignment.objects.bulk_create(RoleAssignment(user=user, role=role) for role in roles)


def authorization_queries(user) -> int:
    """Queries to decide everything about one request: its pools, its nodes, one pool, one path."""
    with CaptureQueriesContext(connection) as queries, access_cache():
        access = access_for(user)
        access.may_use_pool("team-gpu-pool")
        access.request_grant("PUT", "/api/configs/pool/x/")
        Pool.objects.visible_to(user)
        Node.objects.visible_to(user)
    return len(queries)


@pytest.mark.parametrize(("roles", "pools"), [(0, 0), (50, 500)])
def test_authorization_costs_one_query_whatever_the_number_of_roles_and_pools(shared_node_pools, teammate, roles, pools,
                                                                               django_assert_max_num_queries):
    grow(roles, pools, teammate)

    with django_assert_max_num_queries(2):
        assert authorization_queries(teammate) == 1


def test_staff_authorization_costs_no_query(shared_node_pools, staff):
    assert authorization_queries(staff) == 0


def test_a_request_reads_the_roles_once_however_often_it_asks(shared_node_pools, teammate, client):
    grow(50, 500, teammate)
    client.force_login(teammate)

    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/profile/")

    assert response.status_code == 200
    role_reads = [q for q in queries if 'FROM "pools_role"' in q["sql"]]
    assert len(role_reads) == 1
    # session + user (authentication), roles (authorization), the visible pools and the default project
    # (the page's data)
    assert len(queries) <= 5


def test_listing_costs_the_same_with_5_or_500_pools_and_1_or_50_roles(shared_node_pools, teammate, client):
    client.force_login(teammate)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/profile/").status_code == 200
        return len(queries)

    few = count()
    grow(50, 500, teammate)

    assert count() == few
