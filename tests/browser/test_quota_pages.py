"""The quota pages in Chromium: staff change one figure in place (saved on leaving the cell, the table then
refreshed), a refusal shows in the cell and writes nothing, a researcher sees their project only; and the
pictures for the README (`docs/screenshots/quotas.png`, `project.png`)."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from pools.config import writes
from pools.models import Backend, ConfigKind, ConfigRevision, Pod, Quota
from tests.support.browser import sign_in
from tests.support.commands import run
from tests.support.fleet import make_nodes, pool_document

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quotas(defaults, staff, django_user_model):
    writes.import_document(ConfigKind.POOL, {"pools": {
        "training": pool_document(description="Pre-training on DGX H100"),
        "inference": pool_document(description="Online inference", resources={"gpu": {"guarantee": 4, "weight": 1}}),
    }}, author=staff)
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-training", "description": "", "actions": []},
                           author=staff)
    # By hand, as the nodes and pods below: make_nodes' rows have no cluster behind them to sync from (allocation
    # from the stand-in through the sync is tests/test_figures_journey.py's).
    Backend.objects.filter(name="default").update(last_sync_at=timezone.now())
    # Every fourth node is not Ready: with the shared one, 40 GPUs usable in training.
    make_nodes(5, ["training"], prefix="dgx", start=1)
    make_nodes(3, ["inference"], prefix="l40s", start=1)
    make_nodes(1, ["training", "inference"], prefix="shared", start=1)
    writes.import_document(ConfigKind.DEPARTMENT, [
        {"name": "research", "default_node_pools": ["training"],
         "resources": [{"node_pool": "training", "gpu": {"deserved": 28, "limit": 40}}]},
        {"name": "product", "resources": [{"node_pool": "training", "gpu": {"deserved": 16}}]}], author=staff)
    projects = [("vision", "research", 12, 24, "High", ["osmo-training"]), ("nlp", "research", 8, -1, "Medium", []),
                ("speech", "research", 4, 8, "Low", []), ("search", "product", 10, -1, "Medium", []),
                ("ads", "product", 6, 12, "None", [])]
    writes.import_document(ConfigKind.PROJECT, [
        {"name": name, "department": department, "members": {"roles": roles, "users": ["alice"] if roles else []},
         "resources": [{"node_pool": "training", "gpu": {"deserved": deserved, "limit": limit,
                                                         "over_quota_weight": weight}}]}
        for name, department, deserved, limit, weight, roles in projects], author=staff)
    backend = Backend.objects.get(name="default")
    usage = {"vision": 14, "nlp": 6, "speech": 1, "search": 8, "ads": 2}
    Pod.objects.bulk_create(Pod(backend=backend, uid=f"{name}-{i}", namespace=f"proj-{name}", name=f"job-{i}",
                                node_name=f"dgx-{1 + i % 4:04d}", phase="Running", gpu=1, pool="training")
                            for name, gpus in usage.items() for i in range(gpus))
    Pod.objects.create(backend=backend, uid="shared-0", namespace="proj-vision", name="notebook",
                       node_name="shared-0001", phase="Running", gpu=2)
    django_user_model.objects.create_user("alice", password="pw-alice-1")
    run("user", "add-role", "alice", "osmo-training")


def test_staff_change_a_figure_in_place_and_a_refusal_stays_in_its_cell(live_server, page, quotas, screenshot):
    # short_polls' 500 ms polls land around the saves: none replaces a cell whose save is on the way, nor a refusal
    # (test_poll_races.py makes those moments happen).
    sign_in(page, live_server, "/quotas/")
    training = page.locator("[data-testid=quota-pool][data-pool=training]")
    expect(training.locator("tr[data-testid=row]")).to_have_count(7)
    expect(training.locator("[data-testid=over-subscribed]")).to_have_text("over-subscribed by 4 GPUs")
    screenshot(page, "quotas", full_page=True)
    revisions = ConfigRevision.objects.count()

    deserved = page.locator("#qe-project-nlp-training-gpu-deserved")
    deserved.fill("-3")
    deserved.press("Enter")
    alert = page.locator("#qe-project-nlp-training-gpu-deserved-error")
    expect(alert).to_contain_text("is negative")
    assert ConfigRevision.objects.count() == revisions

    deserved = page.locator("#qe-project-nlp-training-gpu-deserved")
    deserved.fill("6")
    page.evaluate("document.addEventListener('htmx:afterSettle', "
                  "e => { if (e.target.id === 'quotas-table') document.body.dataset.refreshed = 'yes'; })")
    deserved.press("Tab")  # leaving the cell saves it
    expect(page.locator("#quota-status")).to_contain_text("GPU deserved of project nlp in pool training: saved")
    assert Quota.objects.get(project__name="nlp", pool__name="training").gpu_deserved == 6
    assert ConfigRevision.objects.count() == revisions + 1
    expect(page.locator("#qe-project-nlp-training-gpu-deserved-error")).to_have_count(0)
    # The save refreshes the tables (quotas-changed), or a poll does. (networkidle, once reached at load, waits for
    # nothing.)
    expect(page.locator("body[data-refreshed=yes]")).to_have_count(1)

    page.select_option("#qe-project-ads-training-gpu-over_quota_weight", "Low")
    expect(page.locator("#quota-status")).to_contain_text("GPU weight of project ads in pool training: saved")
    assert Quota.objects.get(project__name="ads", pool__name="training").gpu_weight == 1


def test_a_researcher_sees_their_project_and_its_page(live_server, page, quotas, screenshot):
    sign_in(page, live_server, "/quotas/", username="alice", password="pw-alice-1")
    # vision in training (its pods on the shared node count in inference too, a pool alice may not use)
    expect(page.locator("tr[data-testid=row]")).to_have_count(1)
    expect(page.locator(".quota-cell")).to_have_count(0)
    assert "nlp" not in page.content()

    page.click("a[href='/projects/vision/']")
    page.wait_for_url(f"{live_server.url}/projects/vision/")
    expect(page.locator("#members-table tbody [data-col=how]")).to_have_text(
        ["everyone holding role osmo-training", "user alice, by name"])
    expect(page.locator("#default-pools li")).to_have_text(["training"])
    screenshot(page, "project", full_page=True)
