"""The workload pages: the table (filters, totals, sort, CSV), a workload's page (reasons per pool with
positions, events, templates), cancel (owner and staff, CSRF), and the queues of pool and project pages."""

import csv
import io

import pytest
from django.test import Client

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import post_workload

pytestmark = pytest.mark.django_db


def test_the_table_lists_filters_and_totals_over_every_filtered_row(researcher_client, training_queue):
    page = researcher_client.get("/workloads/")
    assert page.status_code == 200
    text = page.content.decode()
    for name in ("big-one", "big-two", "wait-0", "wait-2"):
        assert name in text
    assert "5 workloads: 2 pending (10 GPUs), 3 admitted or running (12 GPUs)" in text
    assert 'id="nav-workloads"' in text and 'aria-current="page">Workloads' in text

    pending = researcher_client.get("/workloads/?status=PENDING&per_page=25").content.decode()
    assert "big-one" not in pending and "wait-0" not in pending and "wait-2" in pending
    assert "2 workloads: 2 pending (10 GPUs), 0 admitted or running (0 GPUs)" in pending

    by_pool = researcher_client.get("/workloads/?pool=training&priority=low").content.decode()
    assert "big-one" in by_pool and "big-two" in by_pool and "wait-0" not in by_pool
    unknown = researcher_client.get("/workloads/?pool=nowhere")
    assert "No workload matches these filters." in unknown.content.decode()


def test_the_table_sorts_by_gpus_and_its_fragment_and_csv_agree(researcher_client, training_queue):
    fragment = researcher_client.get("/workloads/?sort=-gpu", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="workloads-table")
    text = fragment.content.decode()
    assert "<html" not in text and text.index("big-") < text.index("wait-")

    download = researcher_client.get("/workloads/?export=csv&status=PENDING")
    assert download["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert {row["Name"]: row["Why pending"].split(":")[0] for row in rows} == {"big-two": "LIMIT", "wait-2": "LIMIT"}


def test_a_workloads_page_says_why_per_pool_with_positions_and_shows_events_and_templates(researcher_client,
        training_queue):
    waiting = training_queue["pending"][1]  # wait-2
    page = researcher_client.get(f"/workloads/{waiting['id']}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="workload-reasons"' in text
    stored = Workload.objects.get(pk=waiting["id"])
    assert stored.reasons[0]["message"].replace("'", "&#x27;") in text
    assert f'<td class="num">{stored.positions["training"]}</td>' in text
    assert "Submitted by researcher via api" in text
    assert "nvcr.io/nvidia/pytorch:24.05-py3" in text  # the pod template
    assert 'id="cancel-form"' in text and "csrfmiddlewaretoken" in text


def test_the_owner_cancels_from_the_page_with_the_csrf_token_and_others_may_not(world, researcher_client,
        training_queue):
    waiting = training_queue["pending"][0]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world["researcher"])
    assert strict.post(f"/workloads/{waiting['id']}/cancel/").status_code == 403  # no CSRF token

    other = Client()
    other.force_login(world["other"])  # not a member of vision: the workload is not theirs to see
    assert other.post(f"/workloads/{waiting['id']}/cancel/").status_code == 404

    response = researcher_client.post(f"/workloads/{waiting['id']}/cancel/", {"message": "wrong data"})
    assert response.status_code == 302
    assert Workload.objects.get(pk=waiting["id"]).status == Status.FAILED_CANCELED
    page = researcher_client.get(response["Location"]).content.decode()
    assert "canceled" in page and "wrong data" in page and 'id="cancel-form"' not in page


def test_a_member_who_did_not_submit_sees_no_cancel_button(world, researcher_api, django_user_model):
    from pools.config import writes
    from pools.models import ConfigKind

    created = post_workload(researcher_api)
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["researcher", "other"]},
        "default_node_pools": ["training"], "resources": [{"node_pool": "training", "gpu": {"deserved": 4}}]}},
        author="tests")
    other = Client()
    other.force_login(world["other"])
    page = other.get(f"/workloads/{created['id']}/").content.decode()
    assert "train-resnet" in page and 'id="cancel-form"' not in page
    assert other.post(f"/workloads/{created['id']}/cancel/").status_code == 403
    assert Workload.objects.get(pk=created["id"]).status == Status.PENDING


def test_pool_and_project_pages_load_their_queues(researcher_client, training_queue):
    pool_page = researcher_client.get("/pools/training/").content.decode()
    assert 'hx-get="/workloads/queue/?pool=training"' in pool_page
    fragment = researcher_client.get("/workloads/queue/?pool=training").content.decode()
    assert "2 pending, 3 admitted or running." in fragment
    by_position = sorted(training_queue["pending"],
                         key=lambda w: Workload.objects.get(pk=w["id"]).positions["training"])
    order = [fragment.index(f">{w['name']}<") for w in by_position]
    assert order == sorted(order)  # listed in queue order

    project_page = researcher_client.get("/projects/vision/").content.decode()
    assert 'hx-get="/workloads/queue/?project=vision"' in project_page
    assert "big-two" in researcher_client.get("/workloads/queue/?project=vision").content.decode()
    assert researcher_client.get("/workloads/queue/?project=secret").status_code == 404
    assert researcher_client.get("/workloads/queue/").status_code == 404


@pytest.mark.parametrize("url", ["/workloads/", "/workloads/?export=csv", "/workloads/?status=alive&sort=-gpu",
                                 "/api/workloads/", "/api/workloads/?limit=10", "/workloads/queue/?pool=training",
                                 "/workloads/queue/?project=vision"])
def test_lists_cost_the_same_queries_for_5_or_40_workloads(world, researcher_api, researcher_client, url):
    def queries() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        client = researcher_api if url.startswith("/api/") else researcher_client
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
            if getattr(response, "streaming", False):
                b"".join(response.streaming_content)
        assert response.status_code == 200
        return len(captured)

    for i in range(5):
        post_workload(researcher_api, name=f"few-{i}")
    run_cycle()
    few = queries()
    for i in range(35):
        post_workload(researcher_api, name=f"many-{i}", priority="low")
    run_cycle()
    assert queries() == few, url
    assert few <= 13, few  # 3 of them the start estimates' (scheduling.run.estimates)


def test_a_workloads_page_refreshes_its_status_reasons_and_events(researcher_client, training_queue):
    waiting = training_queue["pending"][0]
    page = researcher_client.get(f"/workloads/{waiting['id']}/").content.decode()
    assert 'id="workload-live"' in page and f'hx-get="/workloads/{waiting["id"]}/"' in page

    pending = waiting["id"]  # canceled at once by the page's form
    assert researcher_client.post(f"/workloads/{pending}/cancel/").status_code == 302
    fragment = researcher_client.get(f"/workloads/{waiting['id']}/", HTTP_HX_REQUEST="true",
                                     HTTP_HX_TARGET="workload-live")
    text = fragment.content.decode()
    assert "<html" not in text and 'id="workload-live"' in text
    assert ">FAILED_CANCELED</span>" in text and 'id="workload-reasons"' not in text
    assert "Pod templates" not in text  # the parts that do not move stay out of the fragment


def test_a_workloads_page_links_the_nodes_it_is_placed_on_to_their_pages(researcher_client, training_queue):
    admitted = Workload.objects.get(pk=training_queue["admitted"][0]["id"])
    assert admitted.placement and not admitted.job_name

    text = researcher_client.get(f"/workloads/{admitted.pk}/").content.decode()

    for node in admitted.placement:
        assert f'<a href="/nodes/{node}/">{node}</a>' in text
        assert researcher_client.get(f"/nodes/{node}/").status_code == 200  # the researcher may see the node too
