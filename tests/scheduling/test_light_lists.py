"""Issue 25, bounded rows and light lists: a stored request has a size limit (a 400 naming it), and no list,
fragment, export or OSMO list reads the request, variables or rendered templates, so one large row cannot slow
anyone's list (SQL captured with CaptureQueriesContext)."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from scheduling.models import Workload
from tests.scheduling.conftest import SHARED, body
from tests.scheduling.test_osmo import submit_workflow

pytestmark = pytest.mark.django_db

HEAVY = ('"scheduling_workload"."request"', '"scheduling_workload"."variables"', '"scheduling_workload"."templates"')
BIG = "x" * 3_000_000


@pytest.fixture
def heavy_row(researcher_api):
    """A workload, and another whose stored request and variables hold 3 MB each (as rows stored before the limit
    could: the finding's were 100 MB)."""
    assert researcher_api.post("/api/workloads/", body(name="light"), format="json").status_code == 201
    assert submit_workflow(researcher_api, query="?priority=LOW").status_code == 200
    response = researcher_api.post("/api/workloads/", body(name="heavy"), format="json")
    assert response.status_code == 201, response.json()
    # By hand: fields far past what a door accepts, so that a list that read them would show it.
    Workload.objects.filter(name="heavy").update(request={"command": [BIG]}, variables={"FILLER": BIG},
                                                 templates={"training": {"platform": "h100", "pod_template": BIG}})
    return Workload.objects.get(name="heavy")


def read(client, url: str, **headers) -> tuple[bytes, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **headers)
        content = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code == 200, content[:300]
    return content, [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize(("url", "headers"), [
    ("/api/workloads/", {}),
    ("/api/workloads/?limit=1", {}),
    ("/api/workloads/?pool=training&status=PENDING", {}),
    ("/workloads/", {}),
    ("/workloads/?sort=-gpu", {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "workloads-table"}),
    ("/workloads/?export=csv", {}),
    ("/workloads/queue/?pool=training", {}),
    ("/workloads/queue/?project=vision", {}),
    ("/api/workflow", {}),
    (f"/api/workflow?pools={SHARED}", {}),
])
def test_lists_never_read_the_request_variables_or_templates(heavy_row, researcher_api, world, url, headers):
    client = researcher_api
    if not url.startswith("/api/"):
        client = Client()
        client.force_login(world["researcher"])
    content, queries = read(client, url, **headers)
    workload_queries = [sql for sql in queries if '"scheduling_workload"' in sql]
    assert workload_queries
    for sql in workload_queries:
        assert not any(column in sql for column in HEAVY), sql
    assert len(content) < 200_000 and BIG[:1000].encode() not in content


def test_the_admin_change_list_does_not_read_them_and_the_change_page_does(heavy_row, admin_client):
    content, queries = read(admin_client, "/admin/scheduling/workload/")
    listed = [sql for sql in queries if 'FROM "scheduling_workload"' in sql]
    assert listed and not any(column in sql for sql in listed for column in HEAVY)
    assert b"heavy" in content and BIG[:1000].encode() not in content
    content, _queries = read(admin_client, f"/admin/scheduling/workload/{heavy_row.pk}/change/")
    assert BIG[:1000].encode() in content


def test_the_list_still_names_the_heavy_row_in_a_fixed_number_of_queries(heavy_row, researcher_api,
                                                                          django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        names = {row["name"] for row in researcher_api.get("/api/workloads/").json()}
    assert {"light", "heavy"} <= names


def test_the_detail_still_answers_the_whole_request(heavy_row, researcher_api):
    answer = researcher_api.get(f"/api/workloads/{heavy_row.pk}/").json()
    assert answer["request"]["command"] == [BIG] and answer["variables"]["FILLER"] == BIG


def test_a_request_over_the_stored_limit_is_a_400_naming_it(researcher_api, settings):
    settings.OSMO_WORKLOAD_MAX_STORED_BYTES = 20_000
    small = researcher_api.post("/api/workloads/", body(name="small"), format="json")
    assert small.status_code == 201, small.json()
    for query in ("", "?dry_run=1"):
        response = researcher_api.post(f"/api/workloads/{query}", body(name="big", command=["echo", "y" * 30_000]),
                                       format="json")
        assert response.status_code == 400, response.json()
        answer = response.json()
        assert answer["field"] == "request" and answer["limit"] == "OSMO_WORKLOAD_MAX_STORED_BYTES"
        assert "OSMO_WORKLOAD_MAX_STORED_BYTES = 20,000 bytes" in answer["detail"]
    assert not Workload.objects.filter(name="big").exists()


def test_a_workflow_group_over_the_stored_limit_is_a_400_and_nothing_is_saved(researcher_api, settings):
    settings.OSMO_WORKLOAD_MAX_STORED_BYTES = 20_000
    response = submit_workflow(researcher_api, query="?priority=LOW", variables=(f"dataset={'z' * 30_000}",))
    assert response.status_code == 400, response.json()
    answer = response.json()
    assert answer["limit"] == "OSMO_WORKLOAD_MAX_STORED_BYTES" and answer["detail"].startswith("Group ")
    assert not Workload.objects.exists()
