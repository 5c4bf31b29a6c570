"""How figures read on the pages: thousands separators, binary byte units, cores, relative times.
Pure functions; the CSV keeps the raw figures instead (see `csv.py`)."""

from datetime import datetime
from decimal import Decimal

from django.utils import timezone
from django.utils.timesince import timesince

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def number(value) -> str:
    if value is None:
        return "—"
    return f"{value:,}"


NOT_MEASURED = "not measured"


def measured(value) -> str:
    """A figure that may not have been measured (GPU utilization): None says so rather than a dash."""
    return NOT_MEASURED if value is None else number(value)


def cores(value: Decimal | None, places: int | None = None) -> str:
    """`places`: at most that many decimals (a table cell: 39.48 reads as 39.5)."""
    if value is None:
        return "—"
    value = Decimal(value)
    if places is not None:
        value = value.quantize(Decimal(1).scaleb(-places))
    # normalize() drops trailing zeros; "f" keeps 100 from printing as 1E+2.
    return format(value.normalize(), ",f")


def size(value: int | None) -> str:
    """Binary units, as Kubernetes reports memory: 2,112,145,412Ki reads as 1.97 TiB."""
    if value is None:
        return "—"
    amount = float(value)
    for unit in _UNITS:
        if abs(amount) < 1024 or unit == _UNITS[-1]:
            break
        amount /= 1024
    if unit == "bytes":
        return f"{int(amount):,} bytes"
    return f"{amount:,.2f} {unit}" if amount < 10 else f"{amount:,.1f} {unit}"


def absolute(moment: datetime | None) -> str:
    if moment is None:
        return ""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z")


def relative(moment: datetime | None, now: datetime | None = None) -> str:
    if moment is None:
        return "never"
    now = now or timezone.now()
    if moment > now:
        return "just now"
    if (now - moment).total_seconds() < 60:
        return "less than a minute ago"
    # timesince says "2 hours, 3 minutes"; one unit is enough to read a table at a glance.
    return f"{timesince(moment, now, depth=1)} ago"


_SHORT_UNITS = ((86400 * 365, "y"), (86400 * 30, "mo"), (86400 * 7, "w"), (86400, "d"), (3600, "h"), (60, "min"),
                (1, "s"))


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """`relative` for a table cell, where width is short: "12 s ago", "5 min ago", "3 h ago" (whole units,
    rounded down)."""
    if moment is None:
        return "never"
    seconds = int(((now or timezone.now()) - moment).total_seconds())
    if seconds < 1:
        return "just now"
    return next(f"{seconds // size}\xa0{unit} ago" for size, unit in _SHORT_UNITS if seconds >= size)


def moment(value: datetime | None, now: datetime | None = None) -> dict:
    """What a template needs for `<time datetime="iso" title="absolute">relative</time>`."""
    return {"iso": value.isoformat() if value else "", "absolute": absolute(value), "relative": relative(value, now)}


def percent(part: int, whole: int) -> int:
    return round(100 * part / whole) if whole else 0
