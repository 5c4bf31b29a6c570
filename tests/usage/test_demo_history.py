"""The demo's week of usage (issue 27 point 6): `manage.py usage demo-history` (which `manage.py demo` runs)
fills a new install's /usage/ page, once."""

import pytest

from scheduling.models import UsageHour, UsageInterval
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def test_a_new_install_gets_a_week_of_history_once(demo_fleet, admin_client):
    assert '"intervals": 0' not in run("usage", "demo-history")
    written = UsageInterval.objects.count()
    assert written > 100 and UsageHour.objects.count() > 100
    page = admin_client.get("/usage/", {"period": "7d"}).content.decode()
    assert 'data-testid="usage-chart"' in page and "No usage in this period" not in page
    assert '"skipped": "history exists"' in run("usage", "demo-history")
    assert UsageInterval.objects.count() == written
