"""Kubernetes resource quantities ("64Gi", "500m", "1.5T") as Decimals."""

import re
from decimal import Decimal
from typing import Any

from .errors import QuantityError

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -3, "u": -2, "m": -1, "": 0, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}

MULTIPLIERS: dict[str, Decimal] = {
    **{s: Decimal(1024) ** p for s, p in _BINARY.items()},
    **{s: Decimal(1000) ** p for s, p in _DECIMAL.items()},
}

# The exponent branch is tried first so that "2E6" is 2*10^6 rather than
# a malformed "2E" (exa) followed by junk; "1E" alone still means exa.
_PATTERN = re.compile(
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)",
    re.ASCII,  # fullwidth and Arabic-Indic digits are digits to `\d` and to Decimal, never to an API server
)

_SUFFIX_HELP = (
    "valid suffixes: " + ", ".join([*_BINARY, *(s for s in _DECIMAL if s)]) + ", an exponent like e3, or none"
)


def parse_quantity(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}: booleans are not quantities")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, (float, Decimal)):
        # repr keeps 0.1 as 0.1 rather than its binary expansion.
        number = Decimal(repr(value)) if isinstance(value, float) else value
        if not number.is_finite():
            raise QuantityError(f"invalid quantity {value!r}: not a finite number")
        return number
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}: expected a number or string")
    match = _PATTERN.fullmatch(value.strip())
    if match is None:
        raise QuantityError(f"invalid quantity {value!r}; {_SUFFIX_HELP}")
    try:
        return Decimal(match["number"] + (match["exponent"] or "")) * MULTIPLIERS[match["suffix"] or ""]
    except ArithmeticError as exc:
        raise QuantityError(f"invalid quantity {value!r}: out of range") from exc


def strict_syntax(text: str) -> bool:
    """Whether `text` is written as the API server reads a quantity: no surrounding spaces, as parse_quantity
    forgives."""
    return _PATTERN.fullmatch(text) is not None


def is_quantity(value: Any) -> bool:
    try:
        parse_quantity(value)
    except QuantityError:
        return False
    return True
