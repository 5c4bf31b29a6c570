"""The parameters of a usage report, parsed from a query string or the CLI (pure: no Django). A bad value
raises `ParamError` naming the field, which the API answers with 400 and the page shows beside the field.

period: `24h`, `7d`, `30d` (ending now), `month` (with month=YYYY-MM), `range` (with from= and to=, dates or
ISO times; `to` as a date means the end of that day). `from`/`to` alone imply `range`, `month` alone `month`.
group_by: department, project, user, pool, platform. Spans are limited to OSMO_USAGE_MAX_DAYS (a budget)."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

GROUPS = ("department", "project", "user", "pool", "platform", "kind")
PERIODS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
PERIOD_CHOICES = (*PERIODS, "month", "range")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
MAX_TEXT = 64
FIRST_YEAR, LAST_YEAR = 1970, 9998  # what a report may name: no usage before the epoch, and room for its arithmetic


class ParamError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Params:
    group_by: str
    start: datetime
    end: datetime
    period: str
    pool: str = ""
    project: str = ""
    month: str = ""

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


def _text(query: Mapping[str, str], name: str) -> str:
    value = query.get(name) or ""
    if len(value) > MAX_TEXT:
        raise ParamError(name, f"at most {MAX_TEXT} characters")
    return value.strip()


def _moment(name: str, text: str, *, end: bool) -> datetime:
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except ValueError:
        raise ParamError(name, "expected a date (2026-11-01) or an ISO time (2026-11-01T08:00:00Z)") from None
    except OverflowError:  # an offset that takes the time out of the calendar (0001-01-01T00:00:00+05:00)
        moment = datetime.min.replace(tzinfo=UTC)
    # Checked before any arithmetic: a report's end, its hours and its steps stay inside the calendar.
    if not FIRST_YEAR <= moment.year <= LAST_YEAR:
        raise ParamError(name, f"a time from {FIRST_YEAR} to {LAST_YEAR}")
    return moment + timedelta(days=1) if end and len(text) == 10 else moment


def month_bounds(text: str, field: str = "month") -> tuple[datetime, datetime]:
    match = re.fullmatch(r"(\d{4})-(\d{2})", text, re.ASCII)
    if not match or not 1 <= int(match[2]) <= 12:
        raise ParamError(field, "expected a month as YYYY-MM")
    if not FIRST_YEAR <= int(match[1]) <= LAST_YEAR:
        raise ParamError(field, f"a month from {FIRST_YEAR} to {LAST_YEAR}")
    year, month = int(match[1]), int(match[2])
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def parse(query: Mapping[str, str], now: datetime, *, max_days: int, default_group: str = "project") -> Params:
    group_by = _text(query, "group_by") or default_group
    if group_by not in GROUPS:
        raise ParamError("group_by", f"one of {', '.join(GROUPS)}")
    period = _text(query, "period")
    month, start_text, end_text = _text(query, "month"), _text(query, "from"), _text(query, "to")
    if not period:
        period = "range" if (start_text or end_text) else "month" if month else "24h"
    if period not in PERIOD_CHOICES:
        raise ParamError("period", f"one of {', '.join(PERIOD_CHOICES)}")
    if period in PERIODS:
        start, end = now - PERIODS[period], now
    elif period == "month":
        if not month:
            raise ParamError("month", "required with period=month (YYYY-MM)")
        start, end = month_bounds(month)
    else:
        if not start_text:
            raise ParamError("from", "required with period=range")
        start = _moment("from", start_text, end=False)
        end = _moment("to", end_text, end=True) if end_text else now
        if end <= start:
            raise ParamError("to", "must be after from")
    if end - start > timedelta(days=max_days):
        raise ParamError("from" if period == "range" else "period", f"a report spans at most {max_days} days")
    pool, project = _text(query, "pool"), _text(query, "project")
    for name, value in (("pool", pool), ("project", project)):
        if value and not NAME.match(value):
            raise ParamError(name, "not a valid name")
    return Params(group_by, start, end, period, pool, project, month)
