"""The query budget: `/` and `/nodes/` (first page, filtered, and their live fragments) make at most 10
SQL queries whatever the number of nodes, for staff and for a member whose roles are read per request."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.fleet import snapshots
from tests.pages.conftest import fragment
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db

BUDGET = 10
URLS = ["/", "/nodes/", f"/nodes/?pool={ALPHA}&status=Ready&sort=-gpu_free",
        "/nodes/?q=node-00&gpu=NVIDIA-H100-80GB-HBM3&page=2&per_page=25",
        f"/nodes/?platform={BRAVO}/h100&cols=node,pools,platforms,labels,backend"]


@pytest.fixture(params=[5, 200], ids=["5-nodes", "200-nodes"])
def sized_fleet(request, fleet):
    # Half in each pool, plus a few shared by both, so memberships outnumber nodes.
    half = request.param // 2
    make_nodes(half, [ALPHA], prefix="node-a")
    make_nodes(request.param - half - 2, [BRAVO], prefix="node-b")
    make_nodes(2, [ALPHA, BRAVO], prefix="node-s")
    return request.param


@pytest.fixture(params=["staff", "member"])
def any_client(request, client, staff, alpha_member):
    client.force_login(staff if request.param == "staff" else alpha_member)
    return client


@pytest.mark.parametrize("url", URLS)
def test_a_page_stays_within_the_query_budget_whatever_the_fleet_size(any_client, sized_fleet, url,
                                                                      django_assert_max_num_queries):
    with django_assert_max_num_queries(BUDGET):
        response = any_client.get(url)
    assert response.status_code == 200


@pytest.mark.parametrize("url", URLS)
def test_a_live_refresh_stays_within_the_query_budget(any_client, sized_fleet, url, django_assert_max_num_queries):
    with django_assert_max_num_queries(BUDGET):
        response = fragment(any_client, url)
    assert response.status_code == 200


def test_the_query_count_does_not_grow_with_the_fleet(staff_client, fleet):
    counts = []
    for size in (5, 200):
        make_nodes(size, [ALPHA], prefix=f"grow-{size}")
        with CaptureQueriesContext(connection) as queries:
            staff_client.get("/nodes/?per_page=200")
        counts.append(len(queries))

    assert counts[0] == counts[1]


def test_a_member_who_sees_the_default_pool_and_its_charts_stays_within_the_budget(client, alpha_member, settings,
                                                                                    django_assert_max_num_queries):
    # The default pool's status follows its nodes' backends: read with its figures, not in a query of its own.
    settings.ACCESS_DEFAULT_POOL_OPEN = True
    make_nodes(3, ["default"], prefix="spare")
    make_nodes(3, [ALPHA])
    snapshots.record(timezone.now() - timedelta(minutes=20))
    snapshots.record()
    client.force_login(alpha_member)

    with django_assert_max_num_queries(BUDGET):
        text = client.get("/").content.decode()

    assert 'href="/pools/default/"' in text and "<svg" in text  # the default pool's row, charts inline
    assert '"/?status=ONLINE">2 online</a>' in text and '"/?status=OFFLINE">0 offline</a>' in text
