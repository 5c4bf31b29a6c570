"""The totals row (`<tfoot>`) of the numeric tables: sums over every filtered row, not the page shown;
each node once in the pool table; blank under what does not add up; the CSV unchanged."""

import csv
import io
import re

import pytest

from pools.fleet.usage import cores
from pools.models import Node, Project
from pools.pages.formatting import number, size
from tests.pages import quota_world
from tests.pages.conftest import ALPHA, BRAVO, body, fragment, make_nodes

pytestmark = pytest.mark.django_db


def totals(text: str, table: str) -> dict[str, str]:
    row = re.search(rf'<tr class="totals" data-testid="{table}-totals-row">(.*?)</tr>', text, re.S).group(1)
    return dict(re.findall(r'<t[hd][^>]*data-col="([^"]+)"[^>]*>([^<]*)</t[hd]>', row))


def test_the_nodes_totals_are_over_every_filtered_row_across_pages(staff_client, fleet):
    make_nodes(130, [ALPHA])
    make_nodes(10, [BRAVO], prefix="other")
    filtered = Node.objects.filter(memberships__pool__name=ALPHA, status="Ready")
    assert filtered.count() > 50

    first = body(staff_client.get(f"/nodes/?pool={ALPHA}&status=Ready"))
    second = body(staff_client.get(f"/nodes/?pool={ALPHA}&status=Ready&page=2"))

    expected = {"node": f"Total of {filtered.count()}",
                "gpu_free": number(sum(n.gpu_free for n in filtered)),
                "gpu_used": number(sum(n.gpu_used for n in filtered)),
                "cpu_used": f"{cores(sum(n.cpu_requested for n in filtered)).normalize():,f}",
                "memory_total": size(sum(n.memory_allocatable for n in filtered)),
                "status": "", "pools": "", "gpu_product": "", "last_seen": ""}
    for text in (first, second):
        row = totals(text, "nodes")
        assert {key: row[key] for key in expected} == expected
    assert len(re.findall(r'data-testid="row"', first)) == 50


def test_a_live_refresh_of_the_nodes_table_carries_the_totals(staff_client, fleet):
    make_nodes(3, [ALPHA])
    text = body(fragment(staff_client, f"/nodes/?pool={ALPHA}", "nodes-table"))
    assert totals(text, "nodes")["gpu_total"] == "24"


def test_the_pool_tables_totals_count_a_shared_node_once_and_follow_the_filters(staff_client, fleet):
    make_nodes(4, [ALPHA, BRAVO])  # shared: in both rows, once in the totals
    make_nodes(2, [BRAVO], prefix="only-bravo")

    row = totals(body(staff_client.get("/")), "pools")
    assert (row["name"], row["node_count"], row["gpu_total"], row["description"]) == ("Total of 3", "6", "48", "")

    row = totals(body(fragment(staff_client, "/?q=alpha", "pools-table")), "pools")
    assert (row["name"], row["node_count"], row["gpu_total"]) == ("Total", "4", "32")


def test_the_pool_pages_nodes_table_has_its_totals(staff_client, fleet):
    make_nodes(3, [ALPHA])
    make_nodes(2, [BRAVO], prefix="other")
    assert totals(body(staff_client.get(f"/pools/{ALPHA}/")), "nodes")["gpu_total"] == "24"


def test_a_member_sees_totals_over_their_own_nodes_only(member_client, fleet):
    make_nodes(3, [ALPHA])
    make_nodes(5, [BRAVO], prefix="other")
    assert totals(body(member_client.get("/nodes/")), "nodes")["gpu_total"] == "24"
    assert totals(body(member_client.get("/")), "pools")["node_count"] == "3"


def test_the_csv_has_no_totals_row(staff_client, fleet):
    make_nodes(3, [ALPHA])
    rows = list(csv.reader(io.StringIO(body(staff_client.get(f"/nodes/?pool={ALPHA}&export=csv")))))
    assert len(rows) == 4 and not any(cell.startswith("Total") for row in rows for cell in row)


def test_the_projects_totals_are_over_every_filtered_project(staff_client, fleet):
    quota_world.build()  # vision 6 + nlp 4 (research) and secret 8 (product) GPUs deserved; 9 GPUs of pods

    everyone = totals(body(staff_client.get("/projects/?cols=name,department,gpu_deserved,gpu_allocated,members")),
                      "projects")
    research = totals(body(staff_client.get("/projects/?department=research&per_page=25")), "projects")

    assert (everyone["gpu_deserved"], everyone["gpu_allocated"], everyone["members"]) == ("18", "9", "")
    assert (research["gpu_deserved"], research["gpu_allocated"]) == ("10", "9")
    assert everyone["name"] == f"Total of {Project.objects.count()}" and research["name"] == "Total of 2"
