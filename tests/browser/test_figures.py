"""The questions an admin asks, answered on the page (issue 16): free H100s in `training` from the pool page,
at a laptop's and a phone's width; the fleet cards and the pool figures follow the database without a reload.
Every expectation is read back from the database."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from pools.models import Node, NodeMembership
from tests.support.browser import HANG_MS, sign_in

pytestmark = pytest.mark.django_db(transaction=True)
SHOTS = Path("/tmp/shots-figures")
SIZES = {"laptop": (1440, 900), "phone": (390, 844)}


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def free_h100_in_training() -> tuple[int, int]:
    """(free on nodes not ready or cordoned, free on Ready uncordoned nodes), added up by hand over the nodes."""
    nodes = [m.node for m in NodeMembership.objects.filter(pool__name="training").select_related("node")
             if "dgx-h100" in m.platforms]
    assert nodes and all(node.gpu_product == "NVIDIA-H100-80GB-HBM3" for node in nodes)
    return (sum(n.gpu_free for n in nodes if n.status != "Ready" or n.unschedulable),
            sum(n.gpu_free for n in nodes if n.status == "Ready" and not n.unschedulable))


@pytest.mark.parametrize("size", SIZES)
def test_finding_the_free_h100s_in_training_from_the_pool_page(live_server, browser, fleet_with_history, size):
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    try:
        sign_in(page, live_server, "/")
        page.click("#pools-table tr[data-key=training] [data-col=name] a")
        page.wait_for_url(f"{live_server.url}/pools/training/")
        not_ready, free_ready = free_h100_in_training()

        row = page.locator("#platforms-table tr[data-key=dgx-h100]")
        expect(row.locator("[data-col=gpu_free]")).to_have_text(str(free_ready))
        expect(row.locator("[data-col=gpu_free_not_ready]")).to_have_text(str(not_ready))
        shot(page, f"pool-{size}")

        row.locator("[data-col=gpu_free] a").click()
        page.wait_for_url(re.compile(r"/nodes/\?platform=training%2Fdgx-h100&status=Ready&sort=-gpu_free$"))
        expected = Node.objects.filter(memberships__pool__name="training", status="Ready",
                                       memberships__platforms__contains=["dgx-h100"])
        expect(page.locator("#nodes-table tfoot [data-col=gpu_free]")).to_have_text(str(free_ready))
        expect(page.locator("#nodes-table tfoot th")).to_have_text(f"Total of {expected.count()}")
        shot(page, f"free-h100-{size}")
    finally:
        context.close()


def test_the_cards_and_the_pool_figures_follow_a_node_change_without_a_reload(live_server, page, fleet_with_history):
    sign_in(page, live_server, "/")
    page.evaluate("window.__samePage = true")
    not_ready = page.locator("[data-testid=card-not-ready]")
    before = Node.objects.exclude(status="Ready").count()
    expect(not_ready).to_have_text(f"{before} not ready")
    expect(not_ready).to_have_attribute("href", "/nodes/?status=attention")
    shot(page, "overview-laptop")

    target = Node.objects.filter(status="Ready", memberships__pool__name="training").order_by("name").first()
    # By hand, as the sync would write it: fleet_with_history's nodes are rows with no cluster behind them.
    Node.objects.filter(pk=target.pk).update(status="Not ready (Memory pressure)", reasons=["Memory pressure"])

    expect(not_ready).to_have_text(f"{before + 1} not ready")
    assert page.evaluate("window.__samePage") is True

    page.goto(f"{live_server.url}/pools/training/")
    figure = page.locator("#pool-figures [data-col=not_ready] a")
    in_training = Node.objects.filter(memberships__pool__name="training").exclude(status="Ready").count()
    expect(figure).to_have_text(str(in_training))
    page.evaluate("window.__samePage = true")
    Node.objects.filter(pk=target.pk).update(status="Ready", reasons=[])
    expect(figure).to_have_text(str(in_training - 1))
    assert page.evaluate("window.__samePage") is True
