"""The 24-hour GPU charts: snapshots read as epoch seconds, thinned, broken at gaps, drawn; and the charts
fragment of `/` in a constant number of queries however many pools it charts."""

import datetime as dt
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.models import Pool, UsageSnapshot
from pools.pages import charts, snapshots
from pools.pages.snapshots import Point
from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA
from tests.support.journey import config

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 3, 29, 12, 0, 0, 250_000, tzinfo=dt.UTC)
START = NOW.timestamp() - 24 * 3600
SLOT = 24 * 3600 / charts.MAX_POINTS
TEN_MINUTES = dt.timedelta(minutes=10)


def store(pool: Pool, *moments_and_used: tuple[dt.datetime, int], total: int = 8) -> None:
    """Snapshots at past moments, by hand: the snapshot task records the present only (tests/pages/test_overview.py
    runs it)."""
    UsageSnapshot.objects.bulk_create(UsageSnapshot(pool=pool, at=at, gpu_used=used, gpu_free=total - used,
                                                    gpu_total=total) for at, used in moments_and_used)


def path_points(path: str) -> list[tuple[int, int]]:
    """The outline's points between the two corners on the base line."""
    pairs = [tuple(map(int, pair.split(","))) for pair in re.findall(r"-?\d+,-?\d+", path)]
    return pairs[1:-1]


def test_series_gives_whole_epoch_seconds_of_the_window_oldest_first(fleet):
    older, newer = NOW - dt.timedelta(hours=3), NOW - dt.timedelta(minutes=10, microseconds=500_000)  # .25 s, .75 s
    store(fleet["alpha"], (NOW, 1), (newer, 2), (older, 3), (NOW - dt.timedelta(hours=25), 4))  # newest first

    points = snapshots.series([ALPHA, "nowhere"], NOW)

    assert list(points) == [ALPHA]  # a pool without snapshots has no entry
    assert points[ALPHA] == [Point(int(older.timestamp()), 3, 5, 8), Point(int(newer.timestamp()), 2, 6, 8),
                             Point(int(NOW.timestamp()), 1, 7, 8)]
    assert all(type(point.at) is int for point in points[ALPHA])


def test_series_of_no_pools_is_empty_without_a_query(fleet, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert snapshots.series([], NOW) == {}


def test_the_overview_of_a_user_without_pools_says_there_is_no_pool_to_chart(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("nobody", password="x"))

    assert "No pool to chart." in client.get("/").content.decode()


@pytest.mark.parametrize("zone", ["America/St_Johns", "Asia/Kathmandu", "Pacific/Chatham"])
def test_epoch_seconds_do_not_depend_on_the_time_zone(fleet, settings, zone):
    settings.TIME_ZONE = zone
    moment = dt.datetime(2026, 7, 1, 23, 59, 59, 900_000, tzinfo=dt.UTC)  # late in the day: dates differ by zone
    store(fleet["alpha"], (moment, 3))
    if connection.vendor == "postgresql":  # the database's session zone must not matter either
        with connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE %s", [zone])

    with timezone.override(zone):
        (point,) = snapshots.series([ALPHA], moment + dt.timedelta(minutes=1))[ALPHA]
        earlier = Point(point.at - 600, 1, 7, 8)  # a chart is drawn from its second point on
        chart = charts.gpu_chart(ALPHA, [earlier, point], moment + dt.timedelta(minutes=1), TEN_MINUTES)

    assert point.at == 1_782_950_399 == int(moment.timestamp())
    local = timezone.localtime(moment, timezone.get_default_timezone()).strftime("%Y-%m-%d %H:%M:%S")
    assert f"(at {local} " in chart.summary


def test_thinning_keeps_per_slot_the_point_with_most_used_and_the_later_of_a_tie():
    first = START + 10 * SLOT  # three points in one slot, then two tied in the next
    points = [Point(first + 1, 2, 6, 8), Point(first + 100, 5, 3, 8), Point(first + 200, 1, 7, 8),
              Point(first + SLOT + 1, 4, 4, 8), Point(first + SLOT + 300, 4, 4, 8)]

    assert charts._thin(points, START, 24 * 3600) == [points[1], points[4]]


def test_a_day_of_snapshots_every_minute_is_drawn_with_at_most_max_points():
    points = [Point(START + 60 * minute + 30, minute % 7, 8 - minute % 7, 8) for minute in range(24 * 60)]

    chart = charts.gpu_chart(ALPHA, points, NOW, dt.timedelta(minutes=1))

    (used,) = chart.used_paths
    assert len(path_points(used)) == charts.MAX_POINTS
    assert "at most 6 used" in chart.summary  # the peak survives the thinning
    assert max(y for _, y in path_points(used)) < charts.TOP + charts.PLOT_H  # every kept slot has its peak of 6


def test_points_are_placed_by_their_epoch_seconds_and_gaps_break_the_area():
    base = charts.TOP + charts.PLOT_H
    points = [Point(START, 0, 8, 8), Point(START + 1200, 8, 0, 8),  # one run, in two slots
              Point(START + 1200 + 3 * 600 + 1, 4, 4, 8),  # more than three intervals later: a run of its own
              Point(NOW.timestamp(), 4, 4, 8)]  # alone at the right edge

    chart = charts.gpu_chart(ALPHA, points, NOW, TEN_MINUTES)

    assert [path_points(path) for path in chart.used_paths] == [
        [(34, base), (38, charts.TOP)], [(42, 60), (44, 60)], [(303, 60), (305, 60)]]
    assert path_points(chart.free_paths[0]) == [(34, charts.TOP), (38, charts.TOP)]
    assert [x for x, _ in chart.x_ticks] == ["34.0", "101.5", "169.0", "236.5", "304.0"]


def test_the_chart_markup_is_drawn_unescaped_in_the_page(staff_client, fleet):
    now = timezone.now()
    store(fleet["alpha"], (now - dt.timedelta(minutes=20), 2), (now - dt.timedelta(minutes=10), 3))

    for text, css in ((body(fragment(staff_client, "/", target="pool-charts")), "sparkline"),
                      (body(staff_client.get(f"/pools/{ALPHA}/")), "gpu-chart")):
        svg = text[text.index(f'<svg class="{css}"'):text.index("</svg>")]
        assert svg.count('<path class="free" d="M') == svg.count('<path class="used" d="M') == 1
        assert svg.index('class="free"') < svg.index('class="used"')  # used is painted over free
        assert "&lt;" not in svg
        if css == "gpu-chart":
            assert svg.count('<line class="grid"') == 3 and ">now</text>" in svg


def test_a_sparkline_fills_its_small_frame_without_axes():
    points = [Point(NOW.timestamp() - 600, 8, 0, 8), Point(NOW.timestamp(), 0, 8, 8)]

    chart = charts.gpu_chart(ALPHA, points, NOW, TEN_MINUTES, frame=charts.SPARK)

    assert (chart.width, chart.height, chart.x_ticks, chart.y_ticks) == (120, 28, [], [])
    assert path_points(chart.used_paths[0]) == [(118, 2), (119, 27)]  # 8 of 8 used at the top, 0 at the base
    assert chart.summary.startswith(f"{ALPHA}: Now 0 of 8 GPUs used and 8 free")


def charts_queries(client) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        text = body(fragment(client, "/", target="pool-charts"))
    return len(queries.captured_queries), text.count('<path class="used"')


def test_the_charts_fragment_takes_as_many_queries_for_many_pools_as_for_few(staff_client, fleet):
    now = timezone.now()
    store(fleet["alpha"], *((now - step * TEN_MINUTES, step % 8) for step in range(144)))
    few = charts_queries(staff_client)

    config("POOL", {"pools": {f"extra-{index:02d}": {"backend": "default"} for index in range(20)}})
    pools = Pool.objects.filter(name__startswith="extra-")
    for pool in pools:
        store(pool, *((now - step * TEN_MINUTES, step % 8) for step in range(144)))
    many = charts_queries(staff_client)

    assert few[1] == 1 and many[1] == 21
    assert many[0] == few[0]


def test_describe_pool_draws_the_same_chart(staff_client, fleet):
    now = timezone.now()
    store(fleet["alpha"], (now - dt.timedelta(minutes=20), 2), (now - dt.timedelta(minutes=10), 3))

    text = body(staff_client.get(f"/pools/{ALPHA}/"))

    assert f'<title id="chart-{ALPHA}-title">{ALPHA}: GPUs used and free, last 24 hours</title>' in text
    assert text.count('<path class="used" d="M') == 1 and "Now 3 of 8 GPUs used and 5 free" in text
