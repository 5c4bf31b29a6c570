from decimal import Decimal

import pytest

from pools.engine import QuantityError, is_quantity, parse_quantity


@pytest.mark.parametrize(
    ("suffix", "multiplier"),
    [
        ("Ki", 2**10),
        ("Mi", 2**20),
        ("Gi", 2**30),
        ("Ti", 2**40),
        ("Pi", 2**50),
        ("Ei", 2**60),
        ("n", Decimal("1e-9")),
        ("u", Decimal("1e-6")),
        ("m", Decimal("1e-3")),
        ("", 1),
        ("k", 10**3),
        ("M", 10**6),
        ("G", 10**9),
        ("T", 10**12),
        ("P", 10**15),
        ("E", 10**18),
    ],
)
def test_it_applies_every_suffix(suffix, multiplier):
    assert parse_quantity(f"3{suffix}") == 3 * Decimal(multiplier)


def test_it_keeps_binary_and_decimal_giga_apart():
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1G") == 10**9
    assert parse_quantity("1Gi") > parse_quantity("1G")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("64Gi", 64 * 2**30),
        ("500m", Decimal("0.5")),
        ("1.5T", Decimal("1.5e12")),
        ("1", 1),
        ("0.5", Decimal("0.5")),
        (".5", Decimal("0.5")),
        ("1e3", 1000),
        ("2E6", 2_000_000),
        ("1e-3", Decimal("0.001")),
        ("100Ki", 102_400),
        ("1k", 1000),
        ("0", 0),
        ("+2", 2),
        ("-2Gi", -2 * 2**30),
        ("  8Gi\n", 8 * 2**30),
    ],
)
def test_it_parses_kubernetes_quantity_strings(text, expected):
    assert parse_quantity(text) == Decimal(expected)


def test_it_returns_decimals():
    assert isinstance(parse_quantity("1Gi"), Decimal)
    assert isinstance(parse_quantity(3), Decimal)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (16, 16), (0.5, Decimal("0.5")), (0.1, Decimal("0.1")), (Decimal("2.5"), Decimal("2.5"))],
)
def test_it_accepts_plain_numbers(value, expected):
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    "value", ["", "   ", "1.5X", "Gi", "1 Gi", "--1", "1Gib", "1gi", "e3", "1e", "1.2.3"]
)
def test_it_refuses_malformed_quantities_naming_the_value_and_the_suffixes(value):
    with pytest.raises(QuantityError) as caught:
        parse_quantity(value)
    message = str(caught.value)
    assert repr(value) in message
    assert "Gi" in message
    assert "m" in message


@pytest.mark.parametrize("value", [True, False, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_it_refuses_values_that_are_not_quantities(value):
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_it_reports_out_of_range_values_as_quantity_errors():
    with pytest.raises(QuantityError):
        parse_quantity("1e999999999")


def test_it_tells_whether_a_value_is_a_quantity():
    assert is_quantity("64Gi")
    assert is_quantity(0)
    assert not is_quantity("64 Gi")
    assert not is_quantity(True)
    assert not is_quantity("abc")
