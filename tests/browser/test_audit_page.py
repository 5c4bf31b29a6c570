"""The audit log's page in a browser, at laptop and phone widths: staff read rows on the first screen, filter them
by kind (the table refreshes in place), and a member sees only their own actions."""

import pytest
from playwright.sync_api import expect

from pools.models.audit import record
from tests.support.browser import HANG_MS, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_staff_read_and_filter_the_audit_log(browser, live_server, staff, member, screenshot, width, height):
    record("node", "node/h100-001", "cordon", actor=staff)
    record("token", "token/researcher/laptop", "create", "expires 2026-12-01", actor=member)
    record("config", "POOL/training", "update", "revision 7 (description: \"a\" → \"b\")", actor=staff)
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    try:
        sign_in(page, live_server, "/audit/")
        rows = page.locator("[data-testid=audit-table] tbody tr")
        # The three above, this sign-in (the newest, first), and the creation of the two accounts (user/...: every
        # account's creation is audited, whatever door made it; the oldest).
        expect(rows).to_have_count(6)
        expect(rows.first).to_contain_text("user/ops")
        box = rows.nth(1).bounding_box()
        assert box is not None and box["y"] + box["height"] <= height  # rows on the first screen
        expect(rows.nth(1)).to_contain_text("POOL/training")
        screenshot(page, f"audit-{width}")
        if width < 600:
            page.click("#audit-filters-toggle")
        page.select_option("#filter-kind", "token")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("token/researcher/laptop")
        assert "kind=token" in page.url
    finally:
        context.close()


def test_a_member_reads_only_their_own_actions(browser, live_server, staff, member):
    record("node", "node/h100-001", "cordon", actor=staff)
    record("token", "token/researcher/laptop", "create", actor=member)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    try:
        sign_in(page, live_server, "/audit/", username="researcher", password="pw-res-123")
        rows = page.locator("[data-testid=audit-table] tbody tr")
        expect(rows).to_have_count(2)  # the token, and this sign-in
        assert "h100-001" not in page.content()
        expect(page.locator("#nav-audit")).to_have_count(0)
    finally:
        context.close()
