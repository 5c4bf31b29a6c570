"""The workload pages in Chromium: a researcher finds why their work waits, cancels it from its page, and
sees the pool's queue load into the pool page; the pictures for the README (`docs/screenshots/workloads.png`,
`workload.png`, `workloads-phone.png`)."""

import pytest
from playwright.sync_api import expect

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.submit.submission import submit
from tests.scheduling.conftest import body
from tests.support.browser import htmx_settled, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queue(world):
    researcher = world["researcher"]
    for name, gpu, priority in (("pretrain-a", 8, "low"), ("pretrain-b", 8, "low"), ("finetune", 2, "normal"),
                                ("eval", 2, "normal"), ("sweep", 2, "normal")):
        submit(researcher, body(name=name, priority=priority, resources={"gpu": gpu, "cpu": "2", "memory": "8Gi"}))
        run_cycle()
    return world


def test_a_researcher_sees_why_work_waits_and_cancels_it(live_server, page, queue, screenshot):
    sign_in(page, live_server, "/workloads/", username="researcher", password="pw-res-123")
    table = page.locator("[data-testid=workloads-table]")
    expect(table.locator("tbody tr")).to_have_count(5)
    expect(page.locator("[data-testid=workloads-totals]")).to_have_text(
        "5 workloads: 2 pending (10 GPUs), 3 admitted or running (12 GPUs)")
    screenshot(page, "workloads", full_page=True)

    page.select_option("#filter-status", "PENDING")
    expect(table.locator("tbody tr")).to_have_count(2)
    assert "status=PENDING" in page.url

    page.click("text=sweep")
    expect(page.locator("#workload-reasons")).to_contain_text("LIMIT")
    screenshot(page, "workload", full_page=True)
    # Polls pause while the focus is in the cancel form (static/osmo/pages.js); a poll already on its way is not
    # swapped in either while it is there (test_poll_races.py).
    page.focus("#cancel-message")
    htmx_settled(page)
    page.fill("#cancel-message", "not needed")
    page.click("#cancel-button")
    expect(page.locator("#workload-status")).to_have_text("FAILED_CANCELED")
    expect(page.locator("#workload-events")).to_contain_text("not needed")
    assert Workload.objects.get(name="sweep").status == Status.FAILED_CANCELED


def test_the_pool_page_loads_its_queue_and_the_table_fits_a_phone(live_server, page, queue, screenshot):
    sign_in(page, live_server, "/pools/training/", username="researcher", password="pw-res-123")
    expect(page.locator("#queue-summary")).to_contain_text("2 pending, 3 admitted or running.")
    expect(page.locator("#queue-pending tbody tr")).to_have_count(2)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/workloads/")
    expect(page.locator("[data-testid=workloads-table] tbody tr")).to_have_count(5)
    screenshot(page, "workloads-phone", full_page=True)
    # What sticks out, outside the scrolling tables (for the failure message).
    wide = page.evaluate("""[...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > 400 && !e.closest('.table-scroll'))
        .map(e => `${e.tagName}#${e.id} ${Math.round(e.getBoundingClientRect().right)}`).slice(0, 15)""")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 420, (width, wide)  # the table scrolls inside its region, the page does not


def test_a_running_workloads_page_shows_its_job_and_follows_it_live_to_completed(live_server, page, queue, standin,
                                                                                 kube, screenshot):
    from scheduling.run.dispatch import dispatch
    from tests.scheduling.test_lifecycle import job_status, observe, pod

    workload = Workload.objects.get(name="finetune")
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    pod(standin, workload, 0, "Running")
    observe(kube, workload)

    sign_in(page, live_server, f"/workloads/{workload.pk}/", username="researcher", password="pw-res-123")
    expect(page.locator("#workload-status")).to_have_text("RUNNING")
    expect(page.locator("#workload-job")).to_contain_text(f"{workload.namespace}/{workload.job_name}")
    expect(page.locator("#workload-pods tbody tr")).to_have_count(1)
    expect(page.locator("#workload-pods")).to_contain_text("training-h100-000")
    screenshot(page, "workload-running", full_page=True)

    pod(standin, workload, 0, "Succeeded", exit_code=0)
    job_status(standin, workload, "Complete", "CompletionsReached")
    observe(kube, workload)
    # No reload: the page's live region (every 5 s) picks the change up.
    expect(page.locator("#workload-status")).to_have_text("COMPLETED")
    expect(page.locator("#workload-events")).to_contain_text("Every replica succeeded")
