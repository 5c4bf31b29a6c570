"""`/api/pools/` and `/api/resources/` as viewsets: the nodes page's FilterSet, optional limit/offset pages,
and bounded queries. (The rows themselves, against a real cluster sync: tests/test_inventory_ops.py.)"""

import csv
import io

import pytest
from rest_framework.test import APIClient

from pools.models import Node, NodeMembership
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(fleet):
    make_nodes(4, [ALPHA], prefix="alpha")
    make_nodes(4, [BRAVO], prefix="bravo")
    make_nodes(1, [ALPHA, BRAVO], prefix="shared")
    # By hand: make_nodes' rows have no cluster behind them, which `label`, `cordon` and the sync's platforms need.
    Node.objects.filter(name="bravo-0001").update(labels={"team": "vision"})
    Node.objects.filter(name="alpha-0002").update(status="Cordoned")
    NodeMembership.objects.filter(node__name="alpha-0001").update(platforms=["cpu"])


def signed_in(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def api_names(client, query: str) -> list[str]:
    response = client.get(f"/api/resources/?{query}")
    assert response.status_code == 200, response.content
    return [row["node"] for row in response.json()]


def page_names(client, query: str) -> list[str]:
    response = client.get(f"/nodes/?export=csv&cols=node&sort=node&{query}")
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()
    return [row["Node"] for row in csv.DictReader(io.StringIO(text))]


QUERIES = [
    "", f"pool={ALPHA}", f"platform={BRAVO}/h100", f"platform={ALPHA}/cpu", "status=Not+ready",
    "status=Not+ready+%28Disk+pressure%29", "status=Not+ready+%28Scheduling+disabled%29", "status=Ready",
    "gpu=NVIDIA-A100-SXM4-80GB", "q=vision", "q=team%3Dvision", "q=SHARED", f"q={BRAVO[:5]}", "q=cpu",
    f"pool={ALPHA}&status=Ready&gpu=NVIDIA-H100-80GB-HBM3", f"pool={BRAVO}",
]


@pytest.mark.parametrize("query", QUERIES)
def test_the_nodes_page_and_the_resources_api_filter_alike(client, staff, alpha_member, nodes, query):
    for user in (staff, alpha_member):
        client.force_login(user)

        assert api_names(signed_in(user), query) == page_names(client, query), (user, query)


def test_it_filters_by_gpu_type_and_free_text(api, nodes):
    assert api_names(api, "gpu=NVIDIA-A100-SXM4-80GB") == ["alpha-0000", "alpha-0002", "bravo-0000", "bravo-0002",
                                                            "shared-0000"]
    assert api_names(api, "q=team%3Dvision") == ["bravo-0001"]
    assert api_names(api, "q=cordoned") == ["alpha-0002"]
    assert api_names(api, f"q={ALPHA}&status=Ready") == ["alpha-0001", "alpha-0003"]


def test_free_text_does_not_match_through_a_pool_the_caller_may_not_see(alpha_member, nodes):
    member = signed_in(alpha_member)

    assert api_names(member, "q=bravo-0") == []
    assert api_names(member, f"q={BRAVO}") == []
    assert api_names(member, "q=cpu") == ["alpha-0001"]


def test_a_value_outside_the_callers_choices_matches_no_node(alpha_member, nodes):
    member = signed_in(alpha_member)

    assert api_names(member, f"pool={BRAVO}") == []
    assert api_names(member, "pool=no-such-pool") == []
    assert api_names(member, f"platform={BRAVO}/h100") == []
    assert api_names(member, "status=Sleepy") == []
    assert api_names(member, f"pool={ALPHA}") == ["alpha-0000", "alpha-0001", "alpha-0002", "alpha-0003",
                                                  "shared-0000"]


def test_a_bare_platform_name_or_a_custom_reason_is_accepted(api, nodes):
    # By hand: a reason no kubelet condition names, as an operator's node problem detector might report it.
    Node.objects.filter(name="bravo-0003").update(status="Not ready (GPU fell off the bus)")

    assert api_names(api, "platform=cpu") == ["alpha-0001"]
    assert api_names(api, "status=Not+ready+%28GPU+fell+off+the+bus%29") == ["bravo-0003"]


def test_a_list_is_one_plain_array_without_limit_or_offset(api, nodes):
    rows = api.get("/api/resources/").json()
    pools = api.get("/api/pools/").json()

    assert isinstance(rows, list) and len(rows) == 9
    assert isinstance(pools, list) and {pool["name"] for pool in pools} >= {ALPHA, BRAVO}


def test_limit_and_offset_answer_one_page_with_count_and_links(api, nodes):
    first = api.get("/api/resources/?limit=4").json()
    second = api.get(first["next"]).json()
    third = api.get(second["next"]).json()

    assert first["count"] == second["count"] == third["count"] == 9
    assert [row["node"] for row in first["results"]] == ["alpha-0000", "alpha-0001", "alpha-0002", "alpha-0003"]
    assert [row["node"] for row in second["results"]] == ["bravo-0000", "bravo-0001", "bravo-0002", "bravo-0003"]
    assert [row["node"] for row in third["results"]] == ["shared-0000"]
    assert first["previous"] is None and third["next"] is None
    assert api.get(third["previous"]).json() == second
    assert "offset" not in api.get("/api/resources/?limit=4&offset=4").json()["previous"]


def test_a_page_keeps_the_filters(api, nodes):
    page = api.get(f"/api/resources/?pool={BRAVO}&limit=2").json()

    assert page["count"] == 5
    assert f"pool={BRAVO}" in page["next"]
    assert [row["node"] for row in api.get(page["next"]).json()["results"]] == ["bravo-0002", "bravo-0003"]


def test_offset_alone_answers_the_rest_as_a_page(api, nodes):
    page = api.get("/api/resources/?offset=7").json()
    pools = api.get("/api/pools/?offset=1").json()

    assert [row["node"] for row in page["results"]] == ["bravo-0003", "shared-0000"]
    assert page["next"] is None and "offset=0" in page["previous"]
    assert pools["count"] == 3 and len(pools["results"]) == 2


def test_a_limit_or_offset_beyond_the_databases_integers_is_a_page_not_a_500(api, nodes):
    """Found by the fuzz test: 10**24 reached SQLite as a LIMIT or OFFSET ("datatype mismatch", a 500) and
    PostgreSQL as one ("bigint out of range")."""
    beyond = api.get(f"/api/resources/?offset={10 ** 24}&limit={10 ** 25}")
    everything = api.get(f"/api/pools/?limit={10 ** 25}")

    assert beyond.status_code == 200 and beyond.json()["results"] == [] and beyond.json()["count"] == 9
    assert beyond.json()["next"] is None
    assert everything.status_code == 200 and len(everything.json()["results"]) == 3


@pytest.mark.parametrize(("query", "field"), [("limit=0", "limit"), ("limit=x", "limit"), ("offset=-1", "offset")])
def test_a_bad_limit_or_offset_is_refused_naming_it(api, nodes, query, field):
    response = api.get(f"/api/resources/?{query}")

    assert response.status_code == 400
    assert response.json()["field"] == field and field in response.json()["detail"]


@pytest.mark.parametrize("query", ["", "limit=2&offset=2", f"q=vision&pool={BRAVO}", "platform=cpu&limit=1"])
def test_the_resource_list_is_bounded_in_queries(alpha_member, nodes, django_assert_max_num_queries, query):
    make_nodes(40, [ALPHA], prefix="more")
    member = signed_in(alpha_member)

    with django_assert_max_num_queries(6):
        assert member.get(f"/api/resources/?{query}").status_code == 200


def test_the_pool_list_pages_in_a_bounded_number_of_queries(api, nodes, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        page = api.get("/api/pools/?limit=2").json()

    assert [pool["name"] for pool in page["results"]] == sorted([ALPHA, BRAVO, "default"])[:2]


@pytest.mark.parametrize("who", ["staff", "member"])
def test_the_resource_list_is_exactly_what_its_schema_serializer_renders(staff, alpha_member, nodes, who):
    """`/api/resources/` answers the rows as they are (fast), byte for byte what NodeRowSerializer, its schema,
    would render for the same rows: the same fields, decimals, times and redactions."""
    from rest_framework.renderers import JSONRenderer

    from pools.api.inventory import NodeRowSerializer
    from pools.fleet import usage
    from pools.models.visibility import access_for

    user = staff if who == "staff" else alpha_member
    answered = signed_in(user).get("/api/resources/")
    expected = NodeRowSerializer(list(usage.node_rows(Node.objects.visible_to(user), access_for(user))), many=True).data
    assert answered.status_code == 200 and answered.content == JSONRenderer().render(expected)
    assert len(answered.json()) == Node.objects.visible_to(user).count() > 0


def test_free_counts_the_free_gpus_of_ready_uncordoned_nodes_only(api, nodes):
    # By hand: `cordon` writes the cluster first, and make_nodes' rows have none.
    Node.objects.filter(name=Node.objects.filter(gpu_free__gt=0).order_by("name").first().name).update(
        unschedulable=True)
    for pool in api.get("/api/pools/").json():
        members = Node.objects.filter(memberships__pool__name=pool["name"])
        assert pool["gpu_free"] == sum(node.gpu_free for node in members
                                       if node.status == "Ready" and not node.unschedulable)
        assert pool["gpu_free_not_ready"] == sum(node.gpu_free for node in members
                                                 if node.status != "Ready" or node.unschedulable)
    assert any(pool["gpu_free_not_ready"] for pool in api.get("/api/pools/").json())
