"""The workload pages refresh what moves every 5 s: the table (a live table), and on a workload's page its status,
reasons, Job, events and the cancel form, which goes once the workload has ended. The poll pauses while the focus
is in the cancel form (static/osmo/pages.js), so a message being typed is not replaced."""

import re

import pytest

pytestmark = pytest.mark.django_db


def live(client, path: str, target: str) -> str:
    response = client.get(path, HTTP_HX_REQUEST="true", HTTP_HX_TARGET=target)
    assert response.status_code == 200
    text = response.content.decode()
    assert "<html" not in text
    return text


def test_a_workloads_page_polls_with_its_cancel_form_inside_and_pauses_while_it_has_the_focus(researcher_client,
        training_queue):
    waiting = training_queue["pending"][0]
    page = researcher_client.get(f"/workloads/{waiting['id']}/").content.decode()
    region = page[page.index('<div id="workload-live"'):]
    tag = region[:region.index(">") + 1]

    assert 'hx-trigger="every 5s"' in tag and 'data-poll-paused-within=".cancel-form"' in tag
    # The status first, then the cancel form below it.
    assert region.index('id="workload-status"') < region.index('id="cancel-form"')
    assert page.count('id="cancel-form"') == 1


def test_the_cancel_form_leaves_the_fragment_once_the_workload_has_ended(researcher_client, training_queue):
    waiting = training_queue["pending"][0]
    path = f"/workloads/{waiting['id']}/"
    before = live(researcher_client, path, "workload-live")
    pending = waiting["id"]  # canceled at once by the page's form
    assert researcher_client.post(f"/workloads/{pending}/cancel/").status_code == 302
    after = live(researcher_client, path, "workload-live")

    assert 'id="cancel-form"' in before and "csrfmiddlewaretoken" in before and ">PENDING</span>" in before
    assert 'id="cancel-form"' not in after and ">FAILED_CANCELED</span>" in after


def test_the_workloads_table_fragment_answers_the_figures_of_the_moment(researcher_client, training_queue):
    page = researcher_client.get("/workloads/").content.decode()
    assert 'hx-trigger="every 5s"' in re.search(r'<div id="workloads-table"[^>]*>', page).group(0)
    before = live(researcher_client, "/workloads/", "workloads-table")
    pending = training_queue["pending"][0]["id"]  # canceled at once by the page's form
    assert researcher_client.post(f"/workloads/{pending}/cancel/").status_code == 302
    after = live(researcher_client, "/workloads/", "workloads-table")

    assert "5 workloads: 2 pending (10 GPUs), 3 admitted or running (12 GPUs)" in before
    assert "5 workloads: 1 pending (2 GPUs), 3 admitted or running (12 GPUs)" in after
