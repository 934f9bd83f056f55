"""Numbers as exports write them: thousands separators and currencies around the digits.

``thousands:`` declares how digits are grouped and ``currency: strip`` lets a currency code or
symbol stand before or after the number; a value written any other way is refused, never
guessed (docs/mapping.md, "Numbers with thousands separators and currencies").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mapping_helpers import (
    accommodation_mapping,
    field_values,
    map_bookings,
    map_units,
    unit_values,
    write_mapping,
)

from connector.errors import MappingError
from connector.mapping import load_mapping


def bookings(*prices: str) -> list[dict[str, Any]]:
    return [{"booking": f"b{index}", "total": price} for index, price in enumerate(prices, 1)]


def test_comma_grouped_thousands_with_a_decimal_point_are_read(tmp_path: Path) -> None:
    data = bookings("1,445,000.00", "950.00", "1445000.5", "-1,234.50", "12,345")
    batch = map_bookings(tmp_path, data, {"price": {"column": "total", "thousands": ","}})
    assert unit_values(batch, "price") == [1445000.0, 950.0, 1445000.5, -1234.5, 12345.0]
    assert batch.quarantine.empty


@pytest.mark.parametrize(
    ("written", "members", "expected"),
    [
        ("Rp1,445,000.00", {"thousands": ","}, 1445000.0),
        ("$1,234.50", {"thousands": ","}, 1234.5),
        ("USD 1,234.50", {"thousands": ","}, 1234.5),
        ("-$1,234.50", {"thousands": ","}, -1234.5),
        ("1,234.50 EUR", {"thousands": ","}, 1234.5),
        ("IDR 1.445.000,00", {"thousands": ".", "decimal": ","}, 1445000.0),
        ("€ 1.234,50", {"thousands": ".", "decimal": ","}, 1234.5),
        ("1.234,50 €", {"thousands": ".", "decimal": ","}, 1234.5),
        ("1 234,50 €", {"thousands": " ", "decimal": ","}, 1234.5),
        ("1\u00a0234,50\u00a0€", {"thousands": " ", "decimal": ","}, 1234.5),
        ("1\u202f234,50 €", {"thousands": " ", "decimal": ","}, 1234.5),
        ("CHF 1'234.50", {"thousands": "'"}, 1234.5),
        ("1.234,50 kr", {"thousands": ".", "decimal": ","}, 1234.5),
        # Without thousands: the decimal separator alone, as without a currency.
        ("€ 12,50", {"decimal": ","}, 12.5),
        ("12.50€", {}, 12.5),
    ],
)
def test_a_currency_code_or_symbol_around_the_number_is_stripped(
    tmp_path: Path, written: str, members: dict[str, str], expected: float
) -> None:
    spec = {"column": "total", "currency": "strip", **members}
    batch = map_bookings(tmp_path, bookings(written), {"price": spec})
    assert unit_values(batch, "price") == [expected]
    assert batch.quarantine.empty


_POINT = " written 1,234,567.89"
_COMMA = " written 1.234.567,89"
_CURRENCY = ", a currency code or symbol before or after it allowed"


@pytest.mark.parametrize(
    ("written", "members", "reason"),
    [
        # A decimal comma in a column of decimal points: 1250 or 12.5? Neither is sent.
        ("12,50", {"thousands": ","}, _POINT),
        ("1,44,500.00", {"thousands": ","}, _POINT),
        ("1.234,50", {"thousands": ","}, _POINT),
        ("1 234.50", {"thousands": ","}, _POINT),
        ("1.5", {"thousands": ".", "decimal": ","}, _COMMA),
        # A currency only where it is declared, and only a currency, once.
        ("Rp1,445,000.00", {"thousands": ","}, _POINT),
        ("12 %", {"thousands": ",", "currency": "strip"}, _POINT + _CURRENCY),
        ("EUR 12 USD", {"thousands": ",", "currency": "strip"}, _POINT + _CURRENCY),
        ("ca. 12", {"currency": "strip"}, _CURRENCY),
        ("--12", {"currency": "strip"}, _CURRENCY),
    ],
)
def test_a_number_not_written_as_declared_quarantines_its_record_naming_file_row_and_field(
    tmp_path: Path, written: str, members: dict[str, str], reason: str
) -> None:
    data = bookings("1", written)
    batch = map_bookings(tmp_path, data, {"price": {"column": "total", **members}})
    quarantined = batch.quarantine
    assert quarantined[["input", "rows", "field", "value"]].values.tolist() == [
        ["bookings.csv", "2", "unitReservations.price", written]
    ]
    assert quarantined["reason"].iloc[0] == f"expected a number{reason}, got '{written}'"


def test_whole_numbers_and_number_texts_read_the_same_separators(tmp_path: Path) -> None:
    data = [{"unit_id": "u1", "size": "1,200", "code": "USD 4,711"}]
    data.append({"unit_id": "u2", "size": "85", "code": "12,5"})
    fields = {
        "sizeSqM": {"column": "size", "thousands": ","},
        "apartmentNumber": {
            "column": "code",
            "as": "number_text",
            "thousands": ",",
            "currency": "strip",
        },
    }
    batch = map_units(tmp_path, data, fields)
    assert field_values(batch, "sizeSqM") == [1200, 85]
    # A number text not written as declared stays as it is, as any text that is no number.
    assert field_values(batch, "apartmentNumber") == ["4711", "12,5"]


def test_arithmetic_reads_each_operand_as_it_declares(tmp_path: Path) -> None:
    data = [
        {"booking": "b1", "rate": "Rp1,250,000.00", "nights": "3"},
        {"booking": "b2", "rate": "Rp1.250.000", "nights": "3"},
    ]
    rate = {"column": "rate", "thousands": ",", "currency": "strip"}
    batch = map_bookings(tmp_path, data, {"price": {"product": [rate, "nights"]}})
    assert unit_values(batch, "price") == [3750000.0]
    quarantined = batch.quarantine
    assert quarantined[["rows", "field", "value"]].values.tolist() == [
        ["2", "unitReservations.price", "Rp1.250.000"]
    ]
    assert quarantined["reason"].iloc[0] == "expected a number to multiply, got 'Rp1.250.000'"


def _load_error(tmp_path: Path, fields: dict[str, Any]) -> str:
    lines = write_mapping(tmp_path, accommodation_mapping(fields))
    with pytest.raises(MappingError) as raised:
        load_mapping(lines)
    return str(raised.value)


def test_the_same_separator_for_thousands_and_decimals_is_an_error_naming_its_line(
    tmp_path: Path,
) -> None:
    message = _load_error(tmp_path, {"sizeSqM": {"column": "size", "thousands": "."}})
    assert "thousands and decimal are both '.'" in message
    assert "mapping.yaml:40:" in message and "entities.accommodation.fields.sizeSqM" in message


def test_thousands_or_currency_on_a_member_that_is_no_number_is_an_error_naming_its_line(
    tmp_path: Path,
) -> None:
    message = _load_error(
        tmp_path,
        {
            "city": {"column": "town", "thousands": ","},
            "maximumCheckOutTime": {"column": "out", "currency": "strip"},
        },
    )
    assert "thousands applies to numbers; this member expects text" in message
    assert "currency applies to numbers; this member expects a time of day" in message
    assert "fields.city.thousands" in message and "fields.maximumCheckOutTime.currency" in message


def test_an_unknown_thousands_separator_is_refused_when_the_file_is_loaded(tmp_path: Path) -> None:
    message = _load_error(tmp_path, {"sizeSqM": {"column": "size", "thousands": "_"}})
    assert "mapping.yaml:42:" in message and "fields.sizeSqM.thousands" in message


def test_the_currency_of_a_mixed_column_is_read_from_the_same_column(tmp_path: Path) -> None:
    data = bookings("Rp1,445,000.00", "USD 1,234.50", "€1,234.50")
    units = {
        "price": {"column": "total", "thousands": ",", "currency": "strip"},
        "currency": {"column": "total", "regex": r"([^\d\s.,+-]+)", "as": "currency"},
    }
    batch = map_bookings(tmp_path, data, units)
    assert unit_values(batch, "price") == [1445000.0, 1234.5, 1234.5]
    assert unit_values(batch, "currency") == ["IDR", "USD", "EUR"]


def test_an_operand_converted_with_as_is_read_as_the_number_it_became(tmp_path: Path) -> None:
    # Its conversion already wrote "1234.5": read again with a decimal comma it was no number.
    data = [{"booking": "b1", "rate": "1.234,5", "nights": "2"}]
    rate = {"column": "rate", "decimal": ",", "as": "number"}
    batch = map_bookings(tmp_path, data, {"price": {"product": [rate, "nights"]}})
    assert unit_values(batch, "price") == [2469.0]
    assert batch.quarantine.empty
