"""The admin's "which nodes are broken, and why?" in Chromium, at a laptop's and a phone's width: from the
overview's not-ready card (or the nodes filter) to a node's page and its reason; and a cordon and uncordon from
the node page, written to the stand-in API server and read back from it and from the database."""

import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from pools.fleet import node_history
from pools.fleet.sync import BackendSync, cluster_for
from pools.models import Backend, Node
from tests.kube_objects import make_node, operator_pods
from tests.support.browser import sign_in
from tests.support.fleet_with_history import NOT_READY

pytestmark = pytest.mark.django_db(transaction=True)
WIDTHS = [(1440, 900), (390, 844)]
SHOTS = "/tmp/shots-nodes"


def no_page_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_from_the_overview_to_a_broken_nodes_reason_in_two_clicks(live_server, page, fleet_with_history, width, height,
                                                                   screenshot):
    page.set_viewport_size({"width": width, "height": height})
    broken = Node.objects.select_related("backend").get(name="dgx-h100-004")
    now = timezone.now()
    node_history.record(broken.backend, [(broken.name, "added", {"status": "Ready", "pools": broken.pool_names})],
                        now - timedelta(days=3))
    node_history.record(broken.backend, [(broken.name, "status", {"before": "Ready", "after": broken.status})],
                        now - timedelta(minutes=40))
    sign_in(page, live_server, "/")

    card = page.locator("a[href*='status=attention']").first
    if card.count():
        card.click()
    else:  # the card is not a link in this build: the filter says the same
        page.goto(f"{live_server.url}/nodes/")
        page.select_option("#filter-status", "attention")
    page.wait_for_url(re.compile(r"/nodes/\?(.*&)?status=attention"))
    attention = sorted(Node.objects.exclude(status="Ready").values_list("name", flat=True))
    assert sorted(attention) == sorted(NOT_READY)  # the Unknown one included
    rows = page.locator("#nodes-table tr[data-testid=row]")
    expect(rows).to_have_count(len(attention))

    page.locator("#nodes-table a", has_text="dgx-h100-004").click()
    page.wait_for_url(f"{live_server.url}/nodes/dgx-h100-004/")
    expect(page.locator("#node-status")).to_have_text("Not ready (Disk pressure)")
    expect(page.locator("[data-testid=reason]")).to_have_text(["Disk pressure"])
    expect(page.locator("#node-events li")).to_have_count(2)
    expect(page.locator("#node-events li").first).to_contain_text("Status Ready \u2192 Not ready (Disk pressure)")
    expect(page.locator("#sign-out")).to_be_visible()
    assert no_page_overflow(page)
    screenshot(page, "node" if width > 600 else "node-phone", full_page=True)  # the README's pictures


@pytest.fixture
def synced(standin, defaults, tmp_path):
    standin.add_nodes([make_node("gpu-7", gpus=8, product="NVIDIA-H100-80GB-HBM3")])
    standin.add_pods(operator_pods("gpu-7"))
    call_command("backend", "add", "lab", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    backend = Backend.objects.get(name="lab")
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    return backend


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_staff_cordon_and_uncordon_a_node_from_its_page(live_server, page, staff, synced, standin, width, height):
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, live_server, "/nodes/gpu-7/")
    expect(page.locator("#node-status")).to_have_text("Ready")

    page.click("#cordon-button")
    expect(page.locator("#node-status")).to_have_text("Cordoned")
    expect(page.locator(".messages")).to_contain_text("Node gpu-7 cordoned")
    assert standin.node("gpu-7")["spec"]["unschedulable"] is True
    assert Node.objects.get(name="gpu-7").unschedulable
    assert no_page_overflow(page)
    page.screenshot(path=f"{SHOTS}/node-cordoned-{width}.png", full_page=True)

    page.click("#uncordon-button")
    expect(page.locator("#node-status")).to_have_text("Ready")
    expect(page.locator("#cordon-button")).to_be_visible()
    assert "unschedulable" not in standin.node("gpu-7")["spec"]
    assert not Node.objects.get(name="gpu-7").unschedulable
    # Newest first: the uncordon's status and the uncordon, the cordon's, and the node's first sync.
    expect(page.locator("#node-events li")).to_have_count(5)
    assert page.locator("#node-events li").evaluate_all("items => items.map(item => item.dataset.kind)") == [
        "status", "cordon", "status", "cordon", "added"]
    expect(page.locator("#node-events li").nth(1)).to_contain_text("Uncordoned")
