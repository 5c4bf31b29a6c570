"""The demo's week of usage (issue 27 point 6): `manage.py usage demo-history`, which `manage.py demo` asks for
through pools' `demo_loaded` signal (pools never imports scheduling), fills a new install's /usage/ page, once."""

from collections import defaultdict

import pytest

from pools.config.defaults import demo_loaded
from scheduling.models import Grain, PoolHour, ProjectPoolHour, UsageHour, UsageInterval
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def test_a_new_install_gets_a_week_of_history_once(demo_fleet, admin_client, settings):
    settings.OSMO_PROMETHEUS_URL = "simulated://dcgm"  # as `manage.py demo` serves it
    assert '"intervals": 0' not in run("usage", "demo-history")
    written = UsageInterval.objects.count()
    assert written > 100 and UsageHour.objects.count() > 100
    page = admin_client.get("/usage/", {"period": "7d"}).content.decode()
    assert 'data-testid="usage-chart"' in page and "No usage in this period" not in page
    measured = UsageHour.objects.filter(gpu_measured_seconds__gt=0)
    assert measured.count() > 100 and "GPU utilization: not measured" not in page
    assert 'id="usage-util-simulated"' in page
    assert admin_client.get("/api/usage/", {"period": "7d"}).json()["gpu_util_source"] == "simulated"
    assert all(0 < row.gpu_util_seconds / row.gpu_measured_seconds < 100 for row in measured[:50])
    assert '"skipped": "history exists"' in run("usage", "demo-history")
    assert UsageInterval.objects.count() == written


def test_without_a_utilization_source_the_week_is_not_measured(demo_fleet, admin_client, settings):
    settings.OSMO_PROMETHEUS_URL = ""  # `manage.py demo --no-serve`, as the README runs it
    run("usage", "demo-history")
    assert not UsageHour.objects.filter(gpu_measured_seconds__gt=0).exists()
    page = admin_client.get("/usage/", {"period": "7d"}).content.decode()
    assert "GPU utilization: not measured" in page and 'id="usage-util-simulated"' not in page
    assert admin_client.get("/api/usage/", {"period": "7d"}).json()["gpu_util_source"] == ""


def test_the_demo_s_week_is_possible(demo_fleet, admin_client, settings):
    """Hour by hour and pool by pool: never more GPUs held than the pool had; per project, borrowed within what
    it used and what it used within its deserved quota plus what it borrowed; every share of capacity at most
    100 %, over 24 hours and 7 days."""
    settings.OSMO_PROMETHEUS_URL = ""
    run("usage", "demo-history")
    used = defaultdict(int)
    for hour, pool, seconds in UsageHour.objects.filter(grain=Grain.HOUR).values_list("hour", "pool", "gpu_seconds"):
        used[(hour, pool)] += seconds
    capacity = {(row.hour, row.pool): row.capacity_gpu_seconds for row in PoolHour.objects.filter(grain=Grain.HOUR)}
    assert len(used) > 100
    over = {key: (seconds, capacity.get(key, 0)) for key, seconds in used.items() if seconds > capacity.get(key, 0)}
    assert not over
    deserved = {(row.hour, row.pool, row.project): row.deserved_gpu_seconds
                for row in ProjectPoolHour.objects.filter(grain=Grain.HOUR)}
    by_project = defaultdict(lambda: [0, 0])
    for hour, pool, project, seconds, borrowed in UsageHour.objects.filter(grain=Grain.HOUR).values_list(
            "hour", "pool", "project", "gpu_seconds", "borrowed_seconds"):
        by_project[(hour, pool, project)][0] += seconds
        by_project[(hour, pool, project)][1] += borrowed
    assert any(borrowed for _, borrowed in by_project.values())
    for key, (seconds, borrowed) in by_project.items():
        assert 0 <= borrowed <= seconds, key
        assert seconds - borrowed <= deserved.get(key, 0) + 1, key  # rounding: a second per row
    for period in ("24h", "7d"):
        for group_by in ("pool", "project", "department"):
            rows = admin_client.get("/api/usage/", {"period": period, "group_by": group_by}).json()["rows"]
            assert all((row["capacity_share_percent"] or 0) <= 100 for row in rows), (period, group_by, rows)


def test_the_demo_command_s_signal_writes_the_history(demo_fleet, settings):
    settings.OSMO_PROMETHEUS_URL = ""
    lines = [line for _, line in demo_loaded.send(sender=None)]
    assert any(line.startswith("Usage history: ") for line in lines), lines
    assert UsageInterval.objects.count() > 100
