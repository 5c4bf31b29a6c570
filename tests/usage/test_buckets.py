"""The rollup's arithmetic (scheduling.usage.buckets, pure) and the report parameters (scheduling.usage.params)."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.usage import buckets, chart
from scheduling.usage.buckets import HOUR, Span
from scheduling.usage.params import ParamError, parse

KEY_A = ("training", "h100", "vision", "research", "ann")
KEY_B = ("training", "h100", "vision", "research", "bob")
KEY_C = ("training", "h100", "nlp", "research", "cy")


def test_a_span_is_split_at_hour_boundaries():
    hours = buckets.by_hour([Span(KEY_A, 1800, 3 * HOUR + 900, gpu=2)], 0, 10 * HOUR)
    assert {hour: [(piece.start, piece.end) for piece in pieces] for hour, pieces in hours.items()} == {
        0: [(1800, HOUR)], HOUR: [(HOUR, 2 * HOUR)], 2 * HOUR: [(2 * HOUR, 3 * HOUR)],
        3 * HOUR: [(3 * HOUR, 3 * HOUR + 900)]}


def test_a_span_is_clipped_to_the_hours_asked_for_and_keeps_its_last_half_second():
    hours = buckets.by_hour([Span(KEY_A, -1800, 5 * HOUR, gpu=1), Span(KEY_B, HOUR, 2 * HOUR + 0.5, gpu=1)],
                            0, 2 * HOUR)
    assert {hour: [(piece.key, piece.start, piece.end) for piece in pieces] for hour, pieces in hours.items()} == {
        0: [(KEY_A, 0, HOUR)], HOUR: [(KEY_A, HOUR, 2 * HOUR), (KEY_B, HOUR, 2 * HOUR)],
        2 * HOUR: [(KEY_A, 2 * HOUR, 3 * HOUR), (KEY_B, 2 * HOUR, 2 * HOUR + 0.5)]}


def test_a_span_ending_on_the_hour_has_no_piece_in_the_next_one_at_todays_epoch_seconds():
    # Near 1.8e9 a float's step is about 2.4e-7 s: `end - 1e-9` is `end` itself, so hours_of names the hour that
    # starts at `end`, and only the empty-piece check keeps a zero-length span out of it.
    hour = 498_611 * HOUR  # 2026-11-18 11:00 UTC
    assert float(hour) - 1e-9 == float(hour)
    hours = buckets.by_hour([Span(KEY_A, float(hour - 1800), float(hour), gpu=1)], hour - HOUR, hour + HOUR)
    assert {start: [(piece.start, piece.end) for piece in pieces] for start, pieces in hours.items()} == {
        hour - HOUR: [(hour - 1800, hour)]}


def test_covered_merges_touching_intervals_and_drops_empty_ones():
    # (8, 9) falls inside the last interval, not the first, and (9.5, 12) touches it.
    assert buckets.covered([(5, 5), (0, 2), (2, 4), (7, 9.5), (-3, -1), (3, 3.5), (8, 9), (9.5, 12)], 0, 10) == [
        (0, 4), (7, 10)]
    assert buckets.covered([], 0, 10) == []


def test_gpu_cpu_and_memory_seconds_add_up_per_key():
    figures = buckets.hour_figures([Span(KEY_A, 0, 1800, gpu=2, cpu=1000, memory=10),
                                    Span(KEY_A, 1800, 3600, gpu=1), Span(KEY_B, 0, 3600, gpu=1)], {})
    assert figures[KEY_A].rounded()["gpu_seconds"] == 2 * 1800 + 1800
    assert figures[KEY_A].rounded()["cpu_seconds"] == 1000 * 1800
    assert figures[KEY_A].rounded()["memory_byte_seconds"] == 10 * 1800
    assert figures[KEY_B].rounded()["gpu_seconds"] == 3600


def test_borrowed_is_the_use_above_deserved_preemptible_work_first():
    # vision deserves 4: ann holds 4 all hour (non-preemptible), bob 4 preemptible for the second half.
    spans = [Span(KEY_A, 0, 3600, gpu=4), Span(KEY_B, 1800, 3600, gpu=4, preemptible=True)]
    figures = buckets.hour_figures(spans, {("training", "vision"): 4})
    assert figures[KEY_A].rounded()["borrowed_seconds"] == 0
    assert figures[KEY_B].rounded()["borrowed_seconds"] == 4 * 1800


def test_borrowed_falls_on_non_preemptible_work_when_there_is_no_other():
    spans = [Span(KEY_A, 0, 3600, gpu=6), Span(KEY_B, 0, 1800, gpu=2)]
    figures = buckets.hour_figures(spans, {("training", "vision"): 4})
    # 0-30 min: 8 held, 4 borrowed, split 6:2; 30-60 min: 6 held, 2 borrowed, all ann's.
    assert figures[KEY_A].rounded()["borrowed_seconds"] == (3 * 1800 + 2 * 1800)
    assert figures[KEY_B].rounded()["borrowed_seconds"] == 1 * 1800


def test_projects_borrow_against_their_own_quota_only():
    figures = buckets.hour_figures([Span(KEY_A, 0, 3600, gpu=4), Span(KEY_C, 0, 3600, gpu=1)],
                                   {("training", "vision"): 4})
    assert figures[KEY_A].rounded()["borrowed_seconds"] == 0
    assert figures[KEY_C].rounded()["borrowed_seconds"] == 3600


def test_preempted_work_counts_its_gpu_seconds():
    figures = buckets.hour_figures([Span(KEY_A, 0, 900, gpu=4, preempted=True)], {})
    assert figures[KEY_A].rounded()["preempted_gpu_seconds"] == 3600


def test_starved_is_pending_time_while_under_deserved():
    use = [Span(KEY_A, 0, 1200, gpu=4), Span(KEY_A, 2400, 3600, gpu=2)]
    pending, starved = buckets.starved_seconds([(600, 3000), (2800, 3600)], use, 4, 0, 3600)
    assert pending == 3000
    assert starved == 3000 - 600  # 600-1200 the project held its 4 GPUs: not starved


def test_no_deserved_quota_means_never_starved():
    assert buckets.starved_seconds([(0, 3600)], [], 0, 0, 3600) == (3600, 0.0)


def test_capacity_seconds_clip_to_the_hour():
    assert buckets.capacity_seconds([("a", -1800, 1800, 8), ("a", 1800, 7200, 4)], 0) == {"a": 8 * 1800 + 4 * 1800}
    # Capacity that ends at the hour's start or begins at its end is no capacity of that hour: no row for its pool.
    assert buckets.capacity_seconds([("a", 0, HOUR, 8), ("b", HOUR, 2 * HOUR, 4), ("c", -HOUR, 0, 2),
                                     ("d", HOUR - 1, 2 * HOUR, 2)], 0) == {"a": 8 * HOUR, "d": 2}


NOW = datetime(2026, 11, 27, 12, 30, tzinfo=UTC)


def test_periods_and_months_resolve_to_bounds():
    assert parse({}, NOW, max_days=400).start == NOW - timedelta(hours=24)
    month = parse({"month": "2026-12"}, NOW, max_days=400)
    assert (month.start, month.end) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    span = parse({"from": "2026-11-01", "to": "2026-11-02"}, NOW, max_days=400)
    assert (span.start, span.end) == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC))


@pytest.mark.parametrize(("query", "field"), [({"group_by": "x"}, "group_by"), ({"month": "26-1"}, "month"),
                                              ({"from": "2026-11-01T25:00"}, "from"), ({"period": "1y"}, "period"),
                                              ({"from": "2026-11-02", "to": "2026-11-01T00:00:00Z"}, "to"),
                                              ({"pool": "a/b"}, "pool"), ({"project": "z" * 100}, "project")])
def test_bad_parameters_name_their_field(query, field):
    with pytest.raises(ParamError) as raised:
        parse(query, NOW, max_days=400)
    assert raised.value.field == field


def test_the_chart_escapes_names_and_stacks_the_series():
    svg = chart.stacked_bars(["00:00", "01:00"], ["<b>x</b>", "y"], [[1.0, 2.0], [3.0, 0.0]], title="t")
    assert "<b>x</b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    assert svg.count("GPU-hours</title></rect>") == 3  # the bars; the legend has a swatch per series
