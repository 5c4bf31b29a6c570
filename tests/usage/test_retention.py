"""Retention (issue 27 point 2): raw intervals for OSMO_USAGE_INTERVAL_DAYS, hourly rows for ever unless
OSMO_USAGE_BUCKET_DAYS is set; the beat task prunes."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.models import PoolHour, UsageHour, UsageInterval
from scheduling.tasks import usage_prune

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 27, tzinfo=UTC)
# Usage rows are written by hand here: they end 89 to 800 days before NOW, and the observer and the rollup write
# only what they see at the moment they run (the rows from the doors: tests/usage/test_usage_journey.py).


def interval(days_ago: int, **fields) -> UsageInterval:
    end = NOW - timedelta(days=days_ago)
    return UsageInterval.objects.create(pod_uid=f"u{days_ago}", namespace="ns", pod_name="p", pool="a", project="x",
                                        start=end - timedelta(hours=1), end=end, changed_at=end, **fields)


def hour(days_ago: int) -> None:
    at = NOW - timedelta(days=days_ago)
    UsageHour.objects.create(hour=at, pool="a", project="x", gpu_seconds=1)
    PoolHour.objects.create(hour=at, pool="a", capacity_gpu_seconds=1)


def test_intervals_go_after_their_days_and_hours_stay_for_ever_by_default(settings, db):
    settings.OSMO_USAGE_INTERVAL_DAYS = 90
    old, recent = interval(91), interval(89)
    hour(800)
    open_one = UsageInterval.objects.create(pod_uid="open", namespace="ns", pod_name="p", pool="a", project="x",
                                            start=NOW - timedelta(days=200), changed_at=NOW)
    from scheduling.usage import rollup

    assert rollup.prune(NOW) == {"intervals": 1, "hours": 0}
    assert set(UsageInterval.objects.values_list("pk", flat=True)) == {recent.pk, open_one.pk}
    assert not UsageInterval.objects.filter(pk=old.pk).exists()
    assert UsageHour.objects.count() == 1


def test_hourly_rows_go_when_a_bucket_retention_is_set(settings, db):
    settings.OSMO_USAGE_BUCKET_DAYS = 365
    hour(400)
    hour(10)
    usage_prune.apply().get()
    assert list(UsageHour.objects.values_list("hour", flat=True)) == [NOW - timedelta(days=10)]
    assert list(PoolHour.objects.values_list("hour", flat=True)) == [NOW - timedelta(days=10)]
