"""Timeout strings: the short "1h30m" form and ISO-8601 durations."""

import re
from datetime import timedelta
from typing import Any

from .errors import TimeoutFormatError

_SHORT = re.compile(
    r"(?:(?P<days>\d+)d)?(?:(?P<hours>\d+)h)?(?:(?P<minutes>\d+)m)?(?:(?P<seconds>\d+)s)?",
    re.IGNORECASE | re.ASCII,
)

_NUM = r"\d+(?:[.,]\d+)?"
_ISO = re.compile(
    rf"P(?:(?P<years>{_NUM})Y)?(?:(?P<months>{_NUM})M)?(?:(?P<weeks>{_NUM})W)?"
    rf"(?:(?P<days>{_NUM})D)?"
    rf"(?:T(?:(?P<hours>{_NUM})H)?(?:(?P<minutes>{_NUM})M)?(?:(?P<seconds>{_NUM})S)?)?",
    re.IGNORECASE | re.ASCII,
)

_HELP = (
    "expected a duration like '90s', '30m', '2h', '1d' or '1h30m' (units d, h, m, s "
    "in that order), or an ISO-8601 duration like 'PT2H', 'P1D', 'P1DT2H30M' or 'P2W'"
)


def _build(value: str, parts: dict[str, str | None]) -> timedelta:
    try:
        return timedelta(**{unit: float(n.replace(",", ".")) for unit, n in parts.items() if n is not None})
    except OverflowError as exc:
        raise TimeoutFormatError(f"timeout {value!r} is too large") from exc


TIMEOUT_MAX_LENGTH = 64  # the timeout columns' length: checked here, before the database


def parse_timeout(value: Any) -> timedelta:
    if not isinstance(value, str):
        raise TimeoutFormatError(f"invalid timeout {value!r}: {_HELP}")
    if len(value) > TIMEOUT_MAX_LENGTH:
        raise TimeoutFormatError(f"timeout {value[:20]!r}... is {len(value)} characters long; at most "
                                 f"{TIMEOUT_MAX_LENGTH}")
    text = value.strip()
    short = _SHORT.fullmatch(text)
    if text and short is not None:
        return _build(value, short.groupdict())
    iso = _ISO.fullmatch(text)
    # "P" and "PT" match the pattern but name no amount of time.
    if iso is None or not any(iso.groupdict().values()) or text.upper().endswith("T"):
        raise TimeoutFormatError(f"invalid timeout {value!r}: {_HELP}")
    parts = iso.groupdict()
    years, months = parts.pop("years"), parts.pop("months")
    if years is not None or months is not None:
        raise TimeoutFormatError(
            f"invalid timeout {value!r}: years and months are ambiguous as durations "
            "(their length varies); use days or weeks instead"
        )
    return _build(value, parts)
