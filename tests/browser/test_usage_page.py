"""/usage/ in Chromium at 1440 and 390 px: the known history's GPU-hours per project in the table, the stacked
chart drawn inline, regrouping by user from the form without a reload, and nothing wider than a phone outside
the scrolling table."""

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_usage_page_at_desk_and_phone_width(live_server, page, history, staff, screenshot):
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in(page, live_server, "/usage/?month=2026-11")
    table = page.locator("[data-testid=usage-table]")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("tbody tr").first.locator("[data-col=gpu_hours]")).to_have_text("21.00")
    expect(page.locator("[data-testid=usage-totals-row] [data-col=gpu_hours]")).to_have_text("25.00")
    expect(page.locator("svg[data-testid=usage-chart] rect").first).to_be_visible()
    screenshot(page, "usage", full_page=True)

    page.select_option("#id_group_by", "user")
    expect(table.locator("tbody tr")).to_have_count(3)
    assert "group_by=user" in page.url
    # Each change is in the address at once (issue 44: it lagged one change behind), and a reload shows the same.
    page.select_option("#id_group_by", "department")
    expect(page).to_have_url(re.compile(r"group_by=department"))
    page.select_option("#id_group_by", "project")
    expect(page).to_have_url(re.compile(r"group_by=project"))
    expect(table.locator("tbody tr")).to_have_count(2)
    page.select_option("#id_period", "30d")
    expect(page).to_have_url(re.compile(r"period=30d"))
    page.select_option("#id_period", "month")  # two changes at once: the first's answer must not come last
    page.fill("#id_month", "2026-10")
    page.press("#id_month", "Tab")
    expect(page).to_have_url(re.compile(r"period=month.*month=2026-10|month=2026-10.*period=month"))
    page.reload()
    expect(page.locator("#id_group_by")).to_have_value("project")
    expect(page.locator("#id_month")).to_have_value("2026-10")

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/usage/?month=2026-11")
    expect(page.locator("[data-testid=usage-table] tbody tr")).to_have_count(2)
    screenshot(page, "usage-phone", full_page=True)
    wide = page.evaluate("""[...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > 400 && !e.closest('.table-scroll'))
        .map(e => e.tagName + '#' + e.id + '.' + e.className)""")
    assert wide == []
