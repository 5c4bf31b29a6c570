"""Granting one user one pool in the admin, in Chromium, on a laptop and on a phone: from the user's page,
"New role for some pools", tick `training`, save (back on the user page, the role held); then that user
signs in and sees `training` only, on the nodes page and in the API."""

import json

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from pools.config import writes
from pools.models import Backend, ConfigKind
from tests.browser.test_csp import RECORD_VIOLATIONS
from tests.support.browser import HANG_MS, sign_in
from tests.support.fleet import make_nodes, pool_document

pytestmark = pytest.mark.django_db(transaction=True)

SIZES = {"laptop": (1440, 900), "phone": (390, 844)}


@pytest.fixture
def pools(defaults, staff, django_user_model, settings):
    settings.ACCESS_DEFAULT_POOL_OPEN = False  # so "training only" means exactly that
    writes.import_document(ConfigKind.POOL, {"pools": {
        "training": pool_document(description="Pre-training on DGX H100"),
        "training-b": pool_document(description="A second training pool (same prefix)"),
        "inference": pool_document(description="Online inference"),
    }}, author=staff)
    Backend.objects.filter(name="default").update(last_sync_at=timezone.now())  # by hand: no cluster to sync here
    make_nodes(3, ["training"], prefix="dgx", start=1)
    make_nodes(2, ["training-b"], prefix="dgxb", start=1)
    make_nodes(2, ["inference"], prefix="l40s", start=1)
    return django_user_model.objects.create_user("alice", password="pw-alice-1")


@pytest.mark.parametrize("size", SIZES)
def test_staff_grant_a_user_one_pool_and_the_user_sees_that_pool_only(browser, live_server, pools, size,
                                                                      screenshot):
    width, height = SIZES[size]
    staff_context = browser.new_context(viewport={"width": width, "height": height})
    page = staff_context.new_page()
    page.set_default_timeout(HANG_MS)
    page.add_init_script(RECORD_VIOLATIONS)  # the admin's pages, under the Content-Security-Policy too
    sign_in(page, live_server, f"/admin/auth/user/{pools.pk}/change/", admin=True)

    page.click("a.osmo-new-role")  # click 1: from the user's page
    page.fill("input[name=name]", "trainers")
    page.check("input[name=pools][value=training]")
    expect(page.locator("details")).not_to_have_attribute("open", "")  # the raw policy JSON waits to be asked for
    screenshot(page, f"grant-pool-role-{size}", full_page=True)
    assert page.evaluate("window.__violations") == []
    page.click("input[name=_save]")  # click 2: saved, and back on the user page with the role held

    page.wait_for_url(f"**/admin/auth/user/{pools.pk}/change/")
    expect(page.locator(".messagelist")).to_contain_text("Role trainers added; alice holds it.")
    expect(page.locator("input[name=roles]:checked")).to_have_count(1)
    expect(page.locator(".field-pools")).to_contain_text("training")
    expect(page.locator(".field-pools")).not_to_contain_text("training-b")
    screenshot(page, f"grant-pool-user-{size}", full_page=True)
    assert page.evaluate("window.__violations") == []
    staff_context.close()

    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    sign_in(page, live_server, "/nodes/", username="alice", password="pw-alice-1")
    expect(page.get_by_text("dgx-0001").first).to_be_visible()
    body = page.content()
    assert "dgxb-" not in body and "l40s-" not in body and "training-b" not in body
    screenshot(page, f"grant-pool-nodes-{size}")
    answer = page.request.get(f"{live_server.url}/api/pools/")
    assert [row["name"] for row in json.loads(answer.text())] == ["training"]
    context.close()
