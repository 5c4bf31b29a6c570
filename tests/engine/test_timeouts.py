from datetime import timedelta

import pytest

from pools.engine import TimeoutFormatError, parse_timeout


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2h", timedelta(hours=2)),
        ("30m", timedelta(minutes=30)),
        ("1d", timedelta(days=1)),
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("1d30s", timedelta(days=1, seconds=30)),
        ("2H", timedelta(hours=2)),
        ("1H30M", timedelta(hours=1, minutes=30)),
        ("0s", timedelta(0)),
        ("0h", timedelta(0)),
        (" 5m ", timedelta(minutes=5)),
    ],
)
def test_it_parses_the_short_form(text, expected):
    assert parse_timeout(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT2H", timedelta(hours=2)),
        ("P1D", timedelta(days=1)),
        ("P1DT2H30M", timedelta(days=1, hours=2, minutes=30)),
        ("PT0.5S", timedelta(seconds=0.5)),
        ("P2W", timedelta(weeks=2)),
        ("PT90M", timedelta(minutes=90)),
        ("PT1H0M10S", timedelta(hours=1, seconds=10)),
        ("pt2h", timedelta(hours=2)),
        ("PT0S", timedelta(0)),
        ("P0D", timedelta(0)),
    ],
)
def test_it_parses_iso_8601_durations(text, expected):
    assert parse_timeout(text) == expected


@pytest.mark.parametrize("text", ["P1Y", "P1M", "P1Y2M", "P1MT2H"])
def test_it_refuses_iso_years_and_months_as_ambiguous(text):
    with pytest.raises(TimeoutFormatError, match="ambiguous"):
        parse_timeout(text)


@pytest.mark.parametrize(
    "text",
    ["2 hours", "", "h", "-1h", "P", "PT", "P1DT", "30m1h", "1h 30m", "1.5h", "2x", "T2H", "PT2D", "P2H"],
)
def test_it_refuses_other_forms_listing_the_accepted_ones(text):
    with pytest.raises(TimeoutFormatError) as caught:
        parse_timeout(text)
    message = str(caught.value)
    assert "1h30m" in message
    assert "PT2H" in message


@pytest.mark.parametrize("value", [None, 3600, timedelta(hours=1)])
def test_it_refuses_values_that_are_not_strings(value):
    with pytest.raises(TimeoutFormatError):
        parse_timeout(value)


def test_it_reports_overflowing_durations_as_format_errors():
    with pytest.raises(TimeoutFormatError):
        parse_timeout("999999999999d")
