"""The totals row (`<tfoot>`) of the numeric tables: sums over every filtered row, not the page shown;
each node once in the pool table and in a pool's platform table (the pool's own figures); each pool section
of the quota tables over its department rows, which hold their projects'; blank under what does not add up;
only what the viewer sees; the CSV unchanged."""

import csv
import io
import re

import pytest

from pools.config import writes
from pools.fleet import usage
from pools.fleet.usage import cores
from pools.models import ConfigKind, Node, NodeMembership, Pool, Project
from pools.pages.formatting import number, size
from pools.pages.quota_pages import flat_rows
from pools.quotas.figures import quota_tables
from tests.pages import quota_world
from tests.pages.conftest import body, fragment
from tests.pages.test_quotas import htmx_edit
from tests.support.fleet import ALPHA, BRAVO, make_nodes

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


# ---- the platform table of a pool's page: the pool's own figures, each node once -----------------------------

def test_the_platform_totals_are_the_pool_s_figures_with_a_node_on_two_platforms_counted_once(staff_client, fleet):
    make_nodes(4, [ALPHA])  # each on h100
    both = make_nodes(2, [ALPHA], prefix="both", start=1)
    # In both rows. By hand: the sync derives platforms from a cluster's labels, and make_nodes' rows have none.
    NodeMembership.objects.filter(node__in=both).update(platforms=["h100", "cpu"])
    make_nodes(2, [BRAVO], prefix="other")

    text = body(staff_client.get(f"/pools/{ALPHA}/"))
    live = body(fragment(staff_client, f"/pools/{ALPHA}/", "pool-live"))

    detail = usage.pool_detail(Pool.objects.get(name=ALPHA), nodes=Node.objects.none())
    figures = ("node_count", "gpu_total", "gpu_used", "gpu_free", "gpu_free_not_ready", "gpu_unhealthy")
    expected = {"name": "Pool (each node once)", "default": "", "node_selector": "",
                **{key: number(detail[key]) for key in figures}}
    for page in (text, live):
        row = totals(page, "platforms")
        assert {key: row[key] for key in expected} == expected
    assert (detail["node_count"], detail["gpu_total"]) == (6, 48)
    rows = {row["name"]: row for row in detail["platforms"]}
    assert rows["h100"]["node_count"] + rows["cpu"]["node_count"] == 8  # what a plain sum would have said
    assert rows["h100"]["gpu_total"] + rows["cpu"]["gpu_total"] == 64
    platforms_csv = list(csv.reader(io.StringIO(body(staff_client.get(f"/pools/{ALPHA}/?export=csv")))))
    assert [row[0] for row in platforms_csv[1:]] == ["h100", "cpu"]  # rows only, as the nodes CSV


# ---- the quota tables: per pool section, the department rows (projects are inside them) ------------------

def quota_totals(text: str, pool: str | None = None) -> dict[str, str]:
    if pool is not None:
        start = text.index(f'data-pool="{pool}"')
        text = text[start:text.index("</section>", start)]
    return totals(text, "quotas")


def second_department():
    """ops deserves 2 GPUs in alpha-pool; its project infra deserves 1 and runs 3 (borrowing 1)."""
    writes.import_document(ConfigKind.DEPARTMENT, [{"name": "ops", "resources": [
        {"node_pool": ALPHA, "gpu": {"deserved": 2}}]}], author="tests")
    writes.import_document(ConfigKind.PROJECT, [quota_world.project_document("infra", "ops", {ALPHA: {"deserved": 1}})],
                           author="tests")
    quota_world.pods("proj-infra", "a-0001", 3, pool=ALPHA)


def department_sums(pool: str) -> dict[str, str]:
    (table,) = quota_tables([Pool.objects.get(name=pool)])
    rows = [row for row in flat_rows(table) if row["project"] is None]
    keys = ("gpu_deserved", "gpu_allocated", "gpu_fair_share", "gpu_over_quota")
    return {key: number(sum(row[key] for row in rows)) for key in keys}


def test_a_quota_section_s_totals_are_its_department_rows_and_follow_an_edit(staff_client, fleet):
    quota_world.build()
    second_department()

    text = body(staff_client.get("/quotas/"))
    alpha = quota_totals(text, ALPHA)

    expected = department_sums(ALPHA)
    assert {key: alpha[key] for key in expected} == expected
    assert (alpha["unit"], alpha["gpu_deserved"], alpha["gpu_allocated"]) == ("Pool total", "12", "12")
    assert (alpha["gpu_limit"], alpha["gpu_weight"]) == ("", "")  # a sum of limits means nothing
    assert quota_totals(text, BRAVO)["gpu_deserved"] == "8"
    assert quota_totals(body(staff_client.get(f"/pools/{ALPHA}/")))["gpu_deserved"] == "12"

    assert htmx_edit(staff_client, f"department:research:{ALPHA}:gpu:deserved", "13").status_code == 200

    for refreshed in (fragment(staff_client, "/quotas/", "quotas-table"), staff_client.get(f"/pools/{ALPHA}/")):
        after = quota_totals(body(refreshed), ALPHA)
        assert after["gpu_deserved"] == "15" and after == {**after, **department_sums(ALPHA)}


def test_quota_totals_count_a_project_shown_without_its_department(staff_client, fleet):
    quota_world.build()

    cpu = body(staff_client.get("/quotas/?cols=unit,gpu_deserved,cpu_allocated,memory_allocated"))
    searched = quota_totals(body(staff_client.get("/quotas/?q=visi")), ALPHA)

    assert (searched["gpu_deserved"], searched["gpu_allocated"]) == ("6", "8")  # vision's row, the only one shown
    assert set(quota_totals(cpu, ALPHA)) == {"unit", "gpu_deserved", "cpu_allocated", "memory_allocated"}


def test_a_member_s_quota_totals_are_over_the_rows_they_see(member_client, fleet, settings):
    settings.OSMO_PROJECT_MEMBERS_USE_POOLS = False  # vision's quota in bravo-secret grants the pool by role only
    quota_world.build()
    second_department()
    writes.import_document(ConfigKind.PROJECT, [quota_world.project_document(
        "vision", "research", {ALPHA: {"deserved": 6, "limit": 12, "over_quota_weight": "High"},
                               BRAVO: {"deserved": 3}}, members={"roles": ["osmo-alpha"]})], author="tests")

    text = body(member_client.get("/quotas/"))
    project = body(member_client.get("/projects/vision/"))

    row = quota_totals(text, ALPHA)
    assert (row["unit"], row["gpu_deserved"], row["gpu_allocated"]) == ("Pool total", "6", "8")  # vision's only
    assert len(re.findall(r'data-testid="quotas-totals-row"', text)) == 1  # bravo-secret is not theirs
    row = totals(project, "quotas")
    assert (row["pool"], row["gpu_deserved"], row["gpu_allocated"]) == ("Total", "6", "8")


def test_a_project_page_sums_its_pools_and_leaves_out_usage_counted_in_several(staff_client, fleet):
    quota_world.build()
    writes.import_document(ConfigKind.PROJECT, [quota_world.project_document(
        "vision", "research", {ALPHA: {"deserved": 6}, BRAVO: {"deserved": 3}})], author="tests")
    quota_world.pods("proj-vision", "b-0001", 2, pool=BRAVO)

    row = totals(body(staff_client.get("/projects/vision/")), "quotas")
    assert (row["pool"], row["gpu_deserved"], row["gpu_allocated"]) == ("Total of 2 pools", "9", "10")

    make_nodes(1, [ALPHA, BRAVO], prefix="shared", start=1)
    quota_world.pods("proj-vision", "shared-0001", 1)  # no pool label, on a node of both pools: counted in each
    text = body(fragment(staff_client, "/projects/vision/", "project-quotas"))
    row = totals(text, "quotas")
    assert (row["gpu_deserved"], row["gpu_allocated"], row["gpu_over_quota"]) == ("9", "", "")
    assert "not summed: some of its pods count in several pools" in text
