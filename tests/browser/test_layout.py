"""Every page fits the screen, on a laptop (1440x900) and on a phone (390x844): nothing pushes the page
sideways, "Sign out" is on screen whenever someone is signed in, and at 1440 px the nodes table with its
default columns fits its container (no sideways scrolling). `LAYOUT_SHOTS=<dir>` saves a picture of each page."""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from pools.models import ConfigKind, ConfigRevision, TablePreference
from scheduling.models import Workload
from scheduling.run.cycle import run_cycle
from scheduling.submit.submission import submit
from tests.scheduling.conftest import body
from tests.support.browser import HANG_MS, htmx_settled, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

LAPTOP, PHONE = (1440, 900), (390, 844)
SIZES = pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1440", "390"])

# What sticks out of the viewport (outside a region that scrolls on purpose), for the failure message.
WIDE = """width => [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > width + 1 && !e.closest('.table-scroll'))
    .map(e => `${e.tagName.toLowerCase()}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`)
    .slice(0, 12)"""


def shot(page, name: str) -> None:
    shots = os.environ.get("LAYOUT_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{shots}/{name}-{page.viewport_size['width']}.png", full_page=True)


def visit(page, url: str, *, status: int = 200, signed_in: bool = True) -> None:
    response = page.goto(url)
    assert response.status == status, url
    htmx_settled(page)
    width = page.viewport_size["width"]
    shot(page, re.sub(r"[^a-z0-9]+", "-", url.split("//", 1)[1].split("/", 1)[1].lower()).strip("-") or "overview")
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= width, (url, scroll_width, page.evaluate(WIDE, width))
    sign_out = page.locator("#sign-out")
    if signed_in:
        expect(sign_out).to_be_visible()
        box = sign_out.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (url, box)
    else:
        expect(sign_out).to_have_count(0)


@SIZES
def test_the_fleet_pages_fit_the_screen_and_keep_sign_out_in_reach(live_server, browser, fleet_with_history, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    try:
        visit(page, f"{live_server.url}/accounts/login/", signed_in=False)
        visit(page, f"{live_server.url}/no-such-page/", status=404, signed_in=False)
        sign_in(page, live_server)
        newer, older = ConfigRevision.objects.filter(kind=ConfigKind.POOL, name="training").order_by("-number")[:2]
        for path in ("/", "/nodes/", "/pools/training/", "/config/history/",
                     f"/config/history/diff/?type=pool&revision={newer.number}",
                     f"/config/history/rollback/?type=pool&revision={older.number}", "/profile/permissions/",
                     "/profile/"):
            visit(page, f"{live_server.url}{path}")
        visit(page, f"{live_server.url}/no-such-page/", status=404)
        visit(page, f"{live_server.url}/pools/no-such-pool/", status=404)

        page.goto(f"{live_server.url}/nodes/")
        grid, region = page.locator("#nodes-grid"), page.locator("#nodes-scroll")
        row = page.locator("#nodes-table tr[data-key='dgx-h100-004']")
        if size == LAPTOP:  # the default columns, every one of them on screen, and the links in the bar
            assert grid.evaluate("t => t.scrollWidth") <= region.evaluate("r => r.clientWidth")
            assert region.evaluate("r => r.scrollWidth <= r.clientWidth")
            expect(page.locator("#nav-menu-toggle")).to_be_hidden()
            expect(page.locator("#nav-quotas")).to_be_visible()
            expect(row.locator("td[data-col=gpu_product]")).to_be_visible()
            expect(row.locator(".row-more")).to_be_hidden()
            row.locator("[data-col=taints] summary").click()  # "1 taint" opens into the taint
            expect(row.locator("[data-col=taints] li")).to_have_text("nvidia.com/gpu=present:NoSchedule")
            # Labels on: a count per row, not a row as tall as the node's labels (1,140 px on the demo).
            page.goto(f"{live_server.url}/nodes/?cols={','.join(['node', 'status', 'labels', 'gpu_free'])}")
            labels = page.locator("#nodes-table tr[data-key='dgx-h100-001'] [data-col=labels]")
            expect(labels.locator("summary")).to_have_text("7 labels")
            heights = page.locator("#nodes-grid tbody tr").evaluate_all(
                "rows => rows.map(r => r.getBoundingClientRect().height)")
            assert max(heights) < 3 * min(heights), heights  # one line, two where a status wraps
            labels.locator("summary").click()
            expect(labels.locator("li")).to_have_count(7)
        else:  # the key columns, the rest under "More"; the links behind "Menu"
            expect(row.locator("td[data-col=gpu_product]")).to_be_hidden()
            expect(row.locator("td[data-col=gpu_free]")).to_be_visible()
            row.locator(".row-more > summary").click()
            expect(row.locator("td[data-col=gpu_product]")).to_be_visible()
            expect(row.locator("td[data-col=gpu_product]")).to_have_text("NVIDIA-H100-80GB-HBM3")
            expect(page.locator("#nodes-table tr[data-key='dgx-h100-005'] td[data-col=gpu_product]")).to_be_hidden()
            gpu_type, free = (row.locator(f"[data-col={key}]").bounding_box() for key in ("gpu_product", "gpu_free"))
            assert gpu_type["y"] > free["y"] and gpu_type["x"] + gpu_type["width"] <= size[0]  # a line below
            expect(page.locator("#nav-quotas")).to_be_hidden()
            page.click("#nav-menu-toggle")
            expect(page.locator("#nav-quotas")).to_be_visible()
            shot(page, "menu-open")
            assert page.evaluate("document.documentElement.scrollWidth") <= size[0]
            page.click("#nav-quotas")
            page.wait_for_url(f"{live_server.url}/quotas/")
            expect(page.locator("#nav-quotas")).to_have_attribute("aria-current", "page")
    finally:
        context.close()


@SIZES
def test_the_quota_project_and_workload_pages_fit_the_screen(live_server, browser, world, staff, size):
    submit(world["researcher"], body(name="layout-check", resources={"gpu": 2, "cpu": "2", "memory": "8Gi"}))
    run_cycle()
    workload = Workload.objects.get(name="layout-check")
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    try:
        sign_in(page, live_server)
        for path in ("/quotas/", "/projects/", "/projects/vision/", "/workloads/", f"/workloads/{workload.pk}/",
                     "/workloads/new/", f"/workloads/new/?from={workload.pk}"):
            visit(page, f"{live_server.url}{path}")
    finally:
        context.close()


def test_the_column_chooser_moves_a_column_and_the_page_and_csv_follow(live_server, page, fleet_with_history, staff):
    sign_in(page, live_server)
    page.goto(f"{live_server.url}/nodes/")
    page.click("#nodes-columns-toggle")
    page.uncheck("#col-nodes-platforms")
    with page.expect_navigation():
        page.click("#col-nodes-gpu_free-up")
    expect(page.locator("#nodes-columns")).to_have_attribute("open", "")  # open again for the next move
    with page.expect_navigation():
        page.click("#col-nodes-gpu_free-up")
    shot(page, "column-chooser")
    keys = page.locator("#nodes-grid thead th[data-col]").evaluate_all("cells => cells.map(c => c.dataset.col)")
    assert keys[:6] == ["node", "status", "pools", "gpu_product", "gpu_free", "gpu_total"]
    assert TablePreference.objects.get(user=staff, table="nodes").columns == keys
    page.click("#nodes-columns-toggle")  # closed, off the download button
    with page.expect_download() as info:
        page.click("#nodes-csv")
    with open(info.value.path(), encoding="utf-8") as file:
        assert file.readline().strip().split(",")[:6] == ["Node", "Status", "Pools", "GPU type", "GPU free",
                                                          "GPU total"]
