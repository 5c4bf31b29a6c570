"""At 390 px (a phone), the first screen of `/quotas/`, `/workloads/` and `/nodes/` shows rows: the filters fold
behind one "Filters" control, a quota row shows its allocated and over-quota figures beside the editable cells
without scrolling sideways, and a pending workload says why in its row without a tap. `LAYOUT_SHOTS=<dir>` saves
the first screens."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from scheduling.run.cycle import run_cycle
from scheduling.submit.submission import submit
from tests.scheduling.conftest import body
from tests.support.browser import HANG_MS, htmx_settled

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def phone(browser, live_server, world, staff):
    """A phone signed in as staff (the quota cells are forms), over the workloads world with a queue."""
    researcher = world["researcher"]
    for name, gpu, priority in (("pretrain-a", 8, "low"), ("pretrain-b", 8, "low"), ("finetune", 2, "normal")):
        submit(researcher, body(name=name, priority=priority, resources={"gpu": gpu, "cpu": "2", "memory": "8Gi"}))
        run_cycle()
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ops")
    page.fill("input[name=password]", "pw-ops-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    yield page
    context.close()


def on_first_screen(locator) -> dict:
    """The element's box, asserted inside the 390 x 844 window as the page opens (no scroll, no tap)."""
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] + 1, box
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], box
    return box


def open_page(page, url: str, name: str) -> None:
    page.goto(url)
    htmx_settled(page)
    shots = os.environ.get("LAYOUT_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{shots}/{name}-first-screen-390.png")


def filters_fold(page, table: str) -> None:
    """One control on the first screen; the filters behind it until it is tapped."""
    on_first_screen(page.locator(f"#{table}-filters-toggle"))
    expect(page.locator(f"#{table}-filters .filter-grid")).to_be_hidden()
    page.click(f"#{table}-filters-toggle")
    expect(page.locator(f"#{table}-filters .filter-grid")).to_be_visible()
    page.click(f"#{table}-filters-toggle")
    expect(page.locator(f"#{table}-filters .filter-grid")).to_be_hidden()


def test_the_workloads_first_screen_shows_rows_and_why_one_waits(phone, live_server):
    open_page(phone, f"{live_server.url}/workloads/", "workloads")
    rows = phone.locator("[data-testid=workloads-table] tbody tr")
    expect(rows).to_have_count(3)
    waiting = phone.locator("[data-testid=workloads-table] tbody tr", has_text="pretrain-b")
    on_first_screen(waiting.locator("th[data-col=name]"))
    reason = on_first_screen(waiting.locator("td[data-col=reason]"))
    expect(waiting.locator("td[data-col=reason]")).to_contain_text("LIMIT")
    assert reason["height"] > 0
    filters_fold(phone, "workloads")


def test_the_nodes_first_screen_shows_rows(phone, live_server):
    open_page(phone, f"{live_server.url}/nodes/", "nodes")
    first = phone.locator("[data-testid=nodes-table] tbody tr").first
    on_first_screen(first.locator("th[data-col=node]"))
    on_first_screen(first.locator("td[data-col=gpu_free]"))
    filters_fold(phone, "nodes")


def test_the_quotas_first_screen_shows_rows_with_allocated_and_over_quota_beside_the_editable_cells(phone,
                                                                                                     live_server):
    open_page(phone, f"{live_server.url}/quotas/", "quotas")
    expect(phone.locator("#quotas-about p")).to_be_hidden()  # the page's introduction folds too
    row = phone.locator("[data-testid=quota-pool] tbody tr[data-testid=row]").first
    on_first_screen(row.locator("th[data-col=unit]"))
    for column in ("gpu_deserved", "gpu_allocated", "gpu_over_quota", "gpu_limit", "gpu_weight", "gpu_fair_share"):
        on_first_screen(row.locator(f"td[data-col={column}]"))
    on_first_screen(row.locator("td[data-col=gpu_deserved] input[name=value]"))  # staff edit it in place
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    scrolls = phone.locator("[data-testid=quota-pool] .table-scroll")
    assert scrolls.count() >= 2
    for index in range(scrolls.count()):  # nothing hidden to the right of any quota table
        assert scrolls.nth(index).evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    filters_fold(phone, "quotas")
    phone.click("#quotas-about > summary")
    expect(phone.locator("#quotas-about p")).to_be_visible()
