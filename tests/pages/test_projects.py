"""`/projects/` and `/projects/<name>/`: the user's projects only (all of them for staff), their quotas per
pool, members and how each holds membership, default pools, and a CSV of every table."""

import csv
import io
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.config import writes
from pools.models import ConfigKind
from tests.pages import quota_world
from tests.pages.conftest import body
from tests.support.fleet import ALPHA, BRAVO

pytestmark = pytest.mark.django_db


def row_keys(text: str) -> list[str]:
    return re.findall(r'<tr data-key="([^"]+)"', text)


def read_csv(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body(response))))


def test_staff_see_every_project_with_its_gpu_figures(staff_client, projects_and_quotas):
    text = body(staff_client.get("/projects/"))
    rows = read_csv(staff_client.get("/projects/?export=csv"))

    assert row_keys(text) == ["default", "nlp", "secret", "vision"]
    assert rows[0] == ["Project", "Department", "Namespace", "GPU deserved", "GPU allocated", "Members"]
    assert rows[1:] == [["default", "default", "proj-default", "0", "0", "0"],
                        ["nlp", "research", "proj-nlp", "4", "1", "1"],
                        ["secret", "product", "proj-secret", "8", "0", "1"],
                        ["vision", "research", "proj-vision", "6", "8", "1"]]
    assert '<a href="/projects/vision/">vision</a>' in text
    assert re.search(r'<tr data-key="vision".*?data-col="gpu_allocated" class="num[^"]*"[^>]*>8<', text)


def test_a_member_sees_only_the_projects_they_belong_to(member_client, projects_and_quotas):
    text = body(member_client.get("/projects/"))
    rows = read_csv(member_client.get("/projects/?export=csv"))

    assert row_keys(text) == ["default", "vision"]
    assert [row[0] for row in rows[1:]] == ["default", "vision"]
    for hidden in ("nlp", "secret", "product"):
        assert hidden not in text


def test_the_projects_table_filters_and_sorts_from_the_url(staff_client, projects_and_quotas):
    assert row_keys(body(staff_client.get("/projects/?sort=-gpu_deserved"))) == ["secret", "vision", "nlp",
                                                                                 "default"]
    assert row_keys(body(staff_client.get("/projects/?department=research"))) == ["nlp", "vision"]
    assert row_keys(body(staff_client.get("/projects/?q=proj-sec"))) == ["secret"]


def test_gpu_deserved_counts_only_the_pools_the_user_may_see(member_client, projects_and_quotas, settings):
    settings.OSMO_PROJECT_MEMBERS_USE_POOLS = False  # vision's quota in bravo is not the member's on a role-only site
    writes.import_document(ConfigKind.PROJECT, quota_world.project_document(
        "vision", "research", {ALPHA: {"deserved": 6}, BRAVO: {"deserved": 3}}, members={"roles": ["osmo-alpha"]}),
        author="tests")

    rows = read_csv(member_client.get("/projects/?export=csv"))

    assert rows[2][:4] == ["vision", "research", "proj-vision", "6"]


def test_the_projects_csv_escapes_formula_cells(staff_client, projects_and_quotas):
    writes.import_document(ConfigKind.PROJECT, quota_world.project_document(
        "nlp", "research", {}, description="=HYPERLINK(\"http://x\")", members={"users": ["-2+3", "bob"]}),
        author="tests")

    projects = read_csv(staff_client.get("/projects/?export=csv&cols=name,description,gpu_deserved"))
    members = read_csv(staff_client.get("/projects/nlp/?export=csv&table=members"))

    assert projects[2] == ["nlp", "'=HYPERLINK(\"http://x\")", "0"]
    assert members[1:] == [["'-2+3", "user", "user -2+3, by name"], ["bob", "user", "user bob, by name"]]


def test_a_project_page_shows_its_quotas_per_pool_with_allocated_and_fair_share(member_client, projects_and_quotas):
    text = body(member_client.get("/projects/vision/"))
    rows = read_csv(member_client.get("/projects/vision/?export=csv&cols=gpu_deserved,gpu_allocated,gpu_fair_share"))

    grid = text[text.index('id="project-quotas"'):text.index('id="members-region"')]
    assert row_keys(grid) == [f"{ALPHA}/research/vision"]
    assert re.findall(r'<th scope="col" data-col="([^"]+)"', grid)[:2] == ["pool", "gpu_deserved"]
    assert rows == [["Pool", "Department", "Project", "GPU deserved", "GPU allocated", "GPU fair share",
                     "Shared usage"], [ALPHA, "research", "vision", "6", "8", "8", "false"]]
    assert "<form" not in grid


def test_staff_edit_a_project_s_quotas_on_its_page(staff_client, projects_and_quotas):
    text = body(staff_client.get("/projects/vision/"))

    assert 'id="qe-project-vision-alpha-pool-gpu-deserved"' in text
    assert 'hx-trigger="every 5s, quotas-changed from:body"' in text


def test_a_project_page_says_how_each_member_holds_membership(staff_client, projects_and_quotas):
    writes.import_document(ConfigKind.PROJECT, quota_world.project_document(
        "vision", "research", {}, members={"users": ["alice", "dora"], "roles": ["osmo-alpha"]}), author="tests")

    vision = body(staff_client.get("/projects/vision/"))
    default = body(staff_client.get("/projects/default/"))

    assert re.findall(r'data-col="how">([^<]+)<', vision) == [
        "everyone holding role osmo-alpha", "user alice, by name", "user dora, by name"]
    assert re.findall(r'data-col="how">([^<]+)<', default) == [
        "everyone: the default project is open to every signed-in user"]


def test_a_pool_s_own_project_belongs_to_everyone_who_may_use_the_pool(member_client, projects_and_quotas):
    document = writes.export(ConfigKind.POOL, ALPHA)["pools"][ALPHA]
    document["resources"] = {"gpu": {"guarantee": 2}}
    writes.import_document(ConfigKind.POOL, {"pools": {ALPHA: document}}, author="tests")

    text = body(member_client.get(f"/projects/{ALPHA}/"))

    assert re.findall(r'data-col="how">([^<]+)<', text) == [f"everyone who may use pool {ALPHA}"]


def test_the_default_pools_fall_back_to_the_department_s_then_default(member_client, projects_and_quotas):
    own = body(member_client.get("/projects/vision/"))
    writes.import_document(ConfigKind.PROJECT, quota_world.project_document(
        "vision", "research", {}, members={"roles": ["osmo-alpha"]}), author="tests")
    writes.import_document(ConfigKind.DEPARTMENT, {"name": "research", "default_node_pools": [BRAVO, ALPHA]},
                           author="tests")
    department = body(member_client.get("/projects/vision/"))
    writes.import_document(ConfigKind.DEPARTMENT, {"name": "research"}, author="tests")
    fallback = body(member_client.get("/projects/vision/"))

    def listed(text):
        return re.findall(r'<li><a href="/pools/[^"]+/">([^<]+)</a></li>', text.split('id="default-pools"')[1])

    assert "the project&#x27;s own list" in own and listed(own) == [ALPHA]
    assert "its department&#x27;s list" in department and listed(department) == [ALPHA]
    assert "so the default pool" in fallback
    # bravo-secret is on both lists, and the member may not use it: counted, never named.
    assert "And 1 pool you may not use." in own and BRAVO not in own and BRAVO not in department


def test_a_project_page_loads_its_queue_of_workloads(member_client, projects_and_quotas):
    text = body(member_client.get("/projects/vision/"))

    assert 'hx-get="/workloads/queue/?project=vision"' in text


def test_a_project_the_user_does_not_belong_to_is_not_found(member_client, projects_and_quotas):
    assert member_client.get("/projects/secret/").status_code == 404
    assert member_client.get("/projects/nlp/?export=csv").status_code == 404
    assert member_client.get("/projects/no-such-project/").status_code == 404


def test_staff_see_any_project(staff_client, projects_and_quotas):
    response = staff_client.get("/projects/secret/")

    assert response.status_code == 200 and "secret" in body(response)


def test_the_projects_page_makes_the_same_queries_whatever_the_number_of_projects(member_client, projects_and_quotas):
    def count():
        with CaptureQueriesContext(connection) as queries:
            member_client.get("/projects/")
        return len(queries)

    before = count()
    writes.import_document(ConfigKind.PROJECT, [quota_world.project_document(
        f"p{index}", "research", {ALPHA: {"deserved": 0}}, members={"roles": ["osmo-alpha"]}) for index in range(30)],
        author="tests")

    assert count() == before <= 12  # 12 since the totals row: its two sums (deserved, allocated)


def test_a_project_page_lists_every_pool_where_it_has_a_quota_or_running_pods(staff_client, projects_and_quotas):
    quota_world.pods("proj-nlp", "b-0001", 2)  # unlabelled, on a node of bravo-secret
    quota_world.pods("proj-nlp", "a-0001", 1, pool=BRAVO, prefix="q")  # labelled with bravo-secret
    quota_world.pods("proj-vision", "b-0002", 1, pool=BRAVO)

    nlp = body(staff_client.get("/projects/nlp/?export=csv&cols=gpu_deserved,gpu_allocated"))
    secret = body(staff_client.get("/projects/secret/?export=csv&cols=gpu_deserved,gpu_allocated"))

    assert nlp.splitlines()[1:] == [f"{ALPHA},research,nlp,4,1,false", f"{BRAVO},research,nlp,0,3,false"]
    assert secret.splitlines()[1:] == [f"{BRAVO},product,secret,8,0,false"]
