"""The pure parts: formatting, table declarations (HTML and CSV from one source), charts and diffs."""

import datetime as dt
from decimal import Decimal

import pytest
from django.http import QueryDict

from pools.fleet import usage
from pools.models import Node
from pools.pages import charts, diffs, formatting
from pools.pages.listing import Listing, Sort, parse_sort
from pools.pages.snapshots import Point
from pools.pages.tables import NODES, POOLS, TABLES, RowContext
from tests.support.fleet import ALPHA, BRAVO, make_nodes

NOW = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(("value", "text"), [(0, "0 bytes"), (1023, "1,023 bytes"), (1536, "1.50 KiB"),
                                             (2_162_836_901_888, "1.97 TiB"), (64 * 2**30, "64.0 GiB"), (None, "—")])
def test_sizes_read_in_binary_units(value, text):
    assert formatting.size(value) == text


def test_numbers_and_cores_are_grouped_and_trimmed():
    assert formatting.number(1234567) == "1,234,567"
    assert formatting.cores(Decimal("191.450")) == "191.45"
    assert formatting.cores(Decimal("100.000")) == "100"
    assert formatting.cores(Decimal("12000")) == "12,000"


def test_table_cells_keep_one_decimal_of_cores():
    assert formatting.cores(Decimal("39.48"), places=1) == "39.5"
    assert formatting.cores(Decimal("223.000"), places=1) == "223"
    assert formatting.cores(Decimal("12000"), places=1) == "12,000"


def test_table_cells_say_how_long_ago_in_one_short_unit():
    assert formatting.ago(NOW - dt.timedelta(seconds=12), NOW) == "12\xa0s ago"
    assert formatting.ago(NOW - dt.timedelta(minutes=14, seconds=59), NOW) == "14\xa0min ago"
    assert formatting.ago(NOW - dt.timedelta(hours=2, minutes=5), NOW) == "2\xa0h ago"
    assert formatting.ago(NOW - dt.timedelta(days=9), NOW) == "1\xa0w ago"
    assert formatting.ago(NOW - dt.timedelta(days=400), NOW) == "1\xa0y ago"
    assert formatting.ago(NOW + dt.timedelta(seconds=10), NOW) == "just now"
    assert formatting.ago(None, NOW) == "never"


def test_relative_times_use_one_unit():
    assert formatting.relative(NOW - dt.timedelta(hours=2, minutes=5), NOW) == "2\xa0hours ago"
    assert formatting.relative(NOW - dt.timedelta(seconds=10), NOW) == "less than a minute ago"
    assert formatting.relative(NOW + dt.timedelta(seconds=10), NOW) == "just now"
    assert formatting.relative(None, NOW) == "never"
    assert formatting.absolute(NOW) == "2026-01-02 12:00:00 UTC"


@pytest.mark.django_db
def test_node_columns_mean_what_the_api_rows_mean(fleet):
    """The pages read `values()` rows for speed; every figure must equal `usage.node_row`'s."""
    make_nodes(3, [ALPHA, BRAVO])
    same = {"node": "node", "status": "status", "pools": "pools", "platforms": "platforms",
            "gpu_product": "gpu_product", "gpu_total": "gpu_total", "gpu_used": "gpu_used", "gpu_free": "gpu_free",
            "gpu_unhealthy": "gpu_unhealthy", "cpu_used": "cpu_used", "cpu_total": "cpu_total",
            "memory_used": "memory_used", "memory_total": "memory_total", "storage": "storage_total",
            "last_seen": "last_seen", "reasons": "reasons", "backend": "backend", "schedulable": "schedulable"}
    rows = Node.objects.order_by("name").values(*NODES.fields(NODES.columns))
    for row, api in zip(rows, usage.node_rows(), strict=True):
        for key, api_key in same.items():
            assert NODES.by_key[key].value(row, RowContext()) == api[api_key], key


def test_every_table_declares_unique_keys_and_csv_headers():
    for table in TABLES.values():
        assert len({c.key for c in table.columns}) == len(table.columns)
        assert len({c.csv_header for c in table.columns}) == len(table.columns)
        assert table.default_columns


def test_a_member_sees_only_their_pools_in_a_nodes_pool_and_platform_cells():
    ctx = RowContext(visible_pools=frozenset({"a"}))
    row = {"pool_names": ["a", "b"], "platform_names": ["a/x", "b/y"]}

    assert NODES.by_key["pools"].value(row, ctx) == ["a"]
    assert NODES.by_key["platforms"].value(row, ctx) == ["a/x"]
    assert NODES.by_key["pools"].value(row, RowContext()) == ["a", "b"]


def test_choose_keeps_known_columns_in_the_given_order_without_repeats():
    assert [c.key for c in NODES.choose(["gpu_free", "x", "node", "gpu_free"])] == ["gpu_free", "node"]
    assert NODES.choose([]) == NODES.default_columns


def test_sort_falls_back_to_the_default_for_unknown_or_unsortable_columns():
    assert parse_sort(NODES, "-gpu_free") == Sort(NODES.by_key["gpu_free"], True)
    assert parse_sort(NODES, "pools") == Sort(NODES.by_key["node"], False)  # lists do not sort
    assert parse_sort(NODES, "") == Sort(NODES.by_key["node"], False)


def test_listing_links_drop_empty_filters_the_page_and_the_default_page_size():
    listing = Listing(POOLS, path="/", query=QueryDict("q=&status=ONLINE&page=3&per_page=50&export=csv"),
                      columns=POOLS.default_columns, sort=parse_sort(POOLS, None), ctx=RowContext(), rows=[],
                      total=0)

    assert listing.url == "/?status=ONLINE"
    assert listing.csv_url == "/?status=ONLINE&export=csv"
    assert listing.link(sort="-gpu_free") == "/?status=ONLINE&sort=-gpu_free"


def test_a_chart_stacks_used_under_free_and_breaks_at_gaps():
    interval = dt.timedelta(minutes=10)
    points = [Point((NOW - dt.timedelta(minutes=m)).timestamp(), used, 8 - used, 8)
              for m, used in ((600, 2), (590, 3), (60, 4), (50, 6), (0, 8))]

    chart = charts.gpu_chart("alpha", points, NOW, interval)

    assert len(chart.used_paths) == len(chart.free_paths) == 3  # three runs: 600-590, 60-50, and now alone
    assert chart.used_paths[0].startswith("M") and chart.used_paths[0].endswith("Z")
    assert chart.summary.startswith("Now 8 of 8 GPUs used and 0 free")
    assert [label for _, label in chart.x_ticks] == ["\u221224 h", "\u221218 h", "\u221212 h", "\u22126 h", "now"]
    assert [label for _, label in chart.y_ticks] == ["0", "4", "8"]


def test_an_empty_chart_says_when_its_first_point_comes():
    chart = charts.gpu_chart("alpha", [], NOW, dt.timedelta(minutes=10))

    assert chart.empty and chart.summary == "Collecting, first point in 10 minutes."
    assert "Collecting, first point in 10 minutes." in chart.html and "record_usage_snapshots" not in chart.html


def test_a_side_by_side_diff_pairs_changed_lines_and_cuts_long_equal_runs():
    left = ["{", *[f"  a{i}" for i in range(10)], '  "x": 1', "}"]
    right = ["{", *[f"  a{i}" for i in range(10)], '  "x": 2', '  "y": 3', "}"]

    rows = diffs.side_by_side(left, right, context=2)

    assert [row.kind for row in rows] == ["skip", "equal", "equal", "replace", "insert", "equal"]
    assert rows[0].left == "9 unchanged lines"
    assert (rows[3].left, rows[3].right, rows[3].left_number, rows[3].right_number) == ('  "x": 1', '  "x": 2', 12, 12)
    assert diffs.changed(rows)
    assert not diffs.changed(diffs.side_by_side(left, left, context=2))
    assert len(diffs.side_by_side(left, right)) == len(right)
