"""The demo's week of usage (issue 27 point 6): `manage.py usage demo-history`, which `manage.py demo` asks for
through pools' `demo_loaded` signal (pools never imports scheduling), fills a new install's /usage/ page, once."""

import pytest

from pools.config.defaults import demo_loaded
from scheduling.models import UsageHour, UsageInterval
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def test_a_new_install_gets_a_week_of_history_once(demo_fleet, admin_client, settings):
    settings.OSMO_PROMETHEUS_URL = ""  # `manage.py demo` runs it before setting it: the week's figures are simulated
    assert '"intervals": 0' not in run("usage", "demo-history")
    written = UsageInterval.objects.count()
    assert written > 100 and UsageHour.objects.count() > 100
    page = admin_client.get("/usage/", {"period": "7d"}).content.decode()
    assert 'data-testid="usage-chart"' in page and "No usage in this period" not in page
    measured = UsageHour.objects.filter(gpu_measured_seconds__gt=0)
    assert measured.count() > 100 and "GPU utilization: not measured" not in page
    assert all(0 < row.gpu_util_seconds / row.gpu_measured_seconds < 100 for row in measured[:50])
    assert '"skipped": "history exists"' in run("usage", "demo-history")
    assert UsageInterval.objects.count() == written


def test_the_demo_command_s_signal_writes_the_history(demo_fleet, settings):
    settings.OSMO_PROMETHEUS_URL = ""
    lines = [line for _, line in demo_loaded.send(sender=None)]
    assert any(line.startswith("Usage history: ") for line in lines), lines
    assert UsageInterval.objects.count() > 100
