"""The live regions' periods and the form's dry-run delay come from the settings (osmo_site/settings.py), written
as htmx reads an interval; the browser tests shorten them (tests/browser/conftest.py) and the site keeps 5 s, 2 s,
5 s and 300 ms."""

import pytest

from pools.pages.polls import htmx_interval
from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA, make_nodes


def test_an_interval_is_written_in_whole_seconds_or_else_in_milliseconds():
    assert [htmx_interval(ms) for ms in (5000, 2000, 300, 1500, 20)] == ["5s", "2s", "300ms", "1500ms", "20ms"]


def test_the_sites_own_periods(settings):
    assert (settings.LIVE_POLL_MS, settings.LOG_POLL_MS, settings.LOG_WAIT_MS, settings.DRY_RUN_DELAY_MS) == (
        5000, 2000, 5000, 300)


@pytest.mark.django_db
def test_a_live_table_and_the_form_read_the_settings_at_each_request(staff_client, fleet, settings):
    make_nodes(1, [ALPHA])
    settings.LIVE_POLL_MS, settings.DRY_RUN_DELAY_MS = 500, 20

    assert 'hx-trigger="every 500ms"' in body(fragment(staff_client, "/nodes/"))
    assert 'hx-trigger="change delay:20ms, pools-changed' in body(staff_client.get("/workloads/new/"))
