"""`/api/projects/`, `/api/departments/`, `/api/quotas/`: a researcher's rows are their projects' in the pools
they may use, with the fair shares everyone sees; staff see every row; a hidden name answers as a missing one."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.config import writes
from pools.models import ConfigKind
from tests.quotas.conftest import project_doc, running_pods

pytestmark = pytest.mark.django_db


def by_unit(rows):
    return {(row["pool"], row["project"] or f"dept:{row['department']}"): row for row in rows}


# ---- projects ---------------------------------------------------------------------------------------------

def test_a_researcher_lists_only_their_projects_and_only_pools_they_may_use(member_api):
    response = member_api.get("/api/projects/")
    assert response.status_code == 200
    rows = {row["name"]: row for row in response.json()}
    assert set(rows) == {"default", "vision"}
    vision = rows["vision"]
    assert vision["department"] == "research" and vision["namespace"] == "proj-vision"
    assert vision["default_node_pools"] == ["training"]  # inference is not theirs to see
    assert vision["members"] == {"users": ["researcher"], "roles": ["osmo-training"]}
    assert "inference" not in response.content.decode()


def test_staff_list_every_project_with_every_pool_and_role(staff_api):
    rows = {row["name"]: row for row in staff_api.get("/api/projects/").json()}
    assert set(rows) == {"default", "vision", "nlp"}
    assert rows["vision"]["default_node_pools"] == ["inference", "training"]
    assert rows["vision"]["members"]["roles"] == ["osmo-secret", "osmo-training"]


def test_a_project_detail_outside_the_researcher_s_projects_is_not_found(member_api):
    assert member_api.get("/api/projects/nlp/").status_code == 404
    assert member_api.get("/api/projects/no-such-project/").status_code == 404


def test_a_project_detail_carries_its_quota_rows_in_visible_pools(member_api, staff_api):
    detail = member_api.get("/api/projects/vision/").json()
    assert [row["pool"] for row in detail["quotas"]] == ["training"]
    staff_detail = staff_api.get("/api/projects/vision/").json()
    assert [row["pool"] for row in staff_detail["quotas"]] == ["inference", "training"]
    assert detail["quotas"][0] == staff_detail["quotas"][1]


# ---- departments ------------------------------------------------------------------------------------------

def test_a_researcher_sees_the_departments_of_their_projects_with_only_their_projects(member_api):
    rows = member_api.get("/api/departments/").json()
    assert [(row["name"], row["projects"]) for row in rows] == [("default", ["default"]), ("research", ["vision"])]
    assert member_api.get("/api/departments/product/").status_code == 404
    assert member_api.get("/api/departments/research/").json()["projects"] == ["vision"]


def test_staff_see_every_department(staff_api):
    rows = {row["name"]: row["projects"] for row in staff_api.get("/api/departments/").json()}
    assert rows == {"default": ["default"], "product": ["nlp"], "research": ["vision"]}


# ---- the quota table --------------------------------------------------------------------------------------

def test_a_researcher_sees_their_project_rows_with_the_fair_shares_staff_see(member_api, staff_api):
    mine = member_api.get("/api/quotas/").json()
    everyone = by_unit(staff_api.get("/api/quotas/").json())
    assert [(row["pool"], row["department"], row["project"]) for row in mine] == [("training", "research", "vision")]
    assert mine[0] == everyone[("training", "vision")]
    gpu = mine[0]["gpu"]
    assert gpu == {"deserved": 8, "limit": 16, "over_quota_weight": "High", "allocated": 10,
                   "allocated_non_preemptible": 10, "fair_share": 10, "over_quota": 2,
                   "pending": 0, "starved": False}


def test_staff_see_department_rows_and_every_pool(staff_api):
    rows = by_unit(staff_api.get("/api/quotas/").json())
    assert {("training", "dept:research"), ("training", "dept:product"), ("inference", "nlp"),
            ("inference", "vision"), ("training", "nlp"), ("training", "vision")} <= set(rows)
    assert rows[("training", "dept:research")]["project"] is None
    assert rows[("training", "dept:research")]["gpu"]["deserved"] == 12


def test_figures_are_in_api_units(staff_api):
    vision = by_unit(staff_api.get("/api/quotas/").json())[("training", "vision")]
    assert vision["cpu"]["deserved"] == 0.5 and vision["cpu"]["allocated"] == 5  # ten pods of 500m
    assert vision["memory"]["deserved"] == 2**30 and vision["memory"]["allocated"] == 10 * 2**30
    assert vision["memory"]["limit"] == -1 and vision["cpu"]["over_quota_weight"] == "Medium"


@pytest.mark.parametrize("query", ["pool=inference", "pool=no-such-pool", "project=nlp", "project=no-such-project",
                                   "department=product", "department=no-such-department"])
def test_a_filter_naming_what_a_researcher_may_not_see_answers_like_a_missing_name(member_api, query):
    response = member_api.get(f"/api/quotas/?{query}")
    assert response.status_code == 200
    assert response.json() == []


def test_staff_filter_by_pool_project_and_department(staff_api):
    assert {row["pool"] for row in staff_api.get("/api/quotas/?pool=inference").json()} == {"inference"}
    assert {row["project"] for row in staff_api.get("/api/quotas/?project=nlp").json()} == {"nlp"}
    rows = staff_api.get("/api/quotas/?department=research&pool=training").json()
    assert [(row["department"], row["project"]) for row in rows] == [("research", None), ("research", "vision")]


def test_a_researcher_s_filters_narrow_their_own_rows(member_api):
    assert len(member_api.get("/api/quotas/?pool=training&project=vision&department=research").json()) == 1


def test_anonymous_callers_are_refused(quota_world, client):
    for url in ("/api/projects/", "/api/departments/", "/api/quotas/", "/api/projects/vision/"):
        assert client.get(url).status_code in (401, 403)


def test_lists_answer_one_page_when_limit_or_offset_is_given(staff_api):
    every = staff_api.get("/api/quotas/").json()
    page = staff_api.get("/api/quotas/?limit=2&offset=1").json()
    assert page["count"] == len(every) and page["results"] == every[1:3]
    projects = staff_api.get("/api/projects/?limit=1").json()
    assert projects["count"] == 3 and [row["name"] for row in projects["results"]] == ["default"]
    assert staff_api.get("/api/departments/?offset=2").json()["results"][0]["name"] == "research"
    assert staff_api.get("/api/projects/?limit=0").status_code == 400


# ---- cost and schema --------------------------------------------------------------------------------------

def _counts(client, urls):
    counts = {}
    for url in urls:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts[url] = len(queries)
    return counts


@pytest.mark.parametrize("principal", ["member_api", "staff_api"])
def test_the_query_count_does_not_grow_with_projects_departments_pools_or_pods(request, principal):
    client = request.getfixturevalue(principal)
    urls = ["/api/projects/", "/api/departments/", "/api/quotas/", "/api/projects/vision/",
            "/api/departments/research/"]
    before = _counts(client, urls)
    writes.import_document(ConfigKind.POOL, {"pools": {f"training-{i}": {"backend": "default", "platforms": {
        "h100": {}}} for i in range(5)}}, author="tests")
    writes.import_document(ConfigKind.DEPARTMENT, [{"name": f"d{i}"} for i in range(5)], author="tests")
    writes.import_document(ConfigKind.PROJECT, [
        project_doc(f"p{i}", f"d{i % 5}", {"training": {"gpu": {"deserved": 0}}, f"training-{i % 5}": {}},
                    members={"users": ["researcher", f"someone-{i}"], "roles": ["osmo-training"]})
        for i in range(20)], author="tests")
    for i in range(20):
        running_pods(f"proj-p{i}", "t-0003", "training", count=3, gpu=0)
    after = _counts(client, urls)
    assert after == before
    assert max(after.values()) <= 12


def test_the_schema_documents_the_row_shapes(staff_api):
    schema = staff_api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    row = components["QuotaRow"]["properties"]
    assert set(row) >= {"pool", "department", "project", "gpu", "cpu", "memory", "shared_usage"}
    gpu = components["GpuFigures"]["properties"]
    assert gpu["deserved"]["type"] == "number" and "GPUs" in gpu["deserved"]["description"]
    assert components["MemoryFigures"]["properties"]["allocated"]["type"] == "integer"
    assert "quotas" in components["ProjectDetail"]["properties"]
    assert {"/api/projects/", "/api/projects/{name}/", "/api/departments/", "/api/quotas/"} <= set(schema["paths"])
