"""Annotated string types for the formats the service interface names (spec §2).

The values stay strings, exactly as they travel in JSON; the annotations only check them.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from functools import cache
from typing import Annotated

import pycountry
from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

# Every pattern means the same in Python's re, pydantic-core's Rust regex and ECMA-262 (the
# dialect of JSON Schema, so of the OpenAPI document and its fuzzers): ASCII classes instead of
# \d (Unicode digits in Python and Rust), anchors matched with fullmatch (Python's $ also
# matches before a trailing newline), and the whitespace set spelled out instead of \s / \S
# (the three disagree on U+0085, U+FEFF and U+001C..U+001F).
HH_MM_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
HALF_HOUR_PATTERN = r"^([01][0-9]|2[0-3]):(00|30)$"
YYYY_MM_DD_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
WHITESPACE_CLASS = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
"""ECMA-262's whitespace and line terminators: what a "blank" string consists of."""
NON_BLANK_PATTERN = f"[^{WHITESPACE_CLASS}]"
HTTP_URL_PATTERN = f"^https?://[^{WHITESPACE_CLASS}]+$"

_HH_MM = re.compile(HH_MM_PATTERN)
_HALF_HOUR = re.compile(HALF_HOUR_PATTERN)
_YYYY_MM_DD = re.compile(YYYY_MM_DD_PATTERN)


def _check_hh_mm(value: str) -> str:
    if not _HH_MM.fullmatch(value):
        raise ValueError(f"expected a time as HH:mm (00:00 to 23:59), got {value!r}")
    return value


def _check_half_hour(value: str) -> str:
    if not _HALF_HOUR.fullmatch(value):
        raise ValueError(f"expected a time as HH:00 or HH:30, got {value!r}")
    return value


def _check_date(value: str) -> str:
    if not _YYYY_MM_DD.fullmatch(value):
        raise ValueError(f"expected a date as YYYY-MM-DD, got {value!r}")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a calendar date") from None
    return value


def _check_timestamp(value: str) -> str:
    # The spec only says "samples use an ISO 8601 UTC timestamp"; any ISO 8601 date or
    # date-time is accepted so that exports carrying only a booking date still validate.
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"expected an ISO 8601 date or timestamp such as 2025-01-31T12:00:00Z, got {value!r}"
        ) from None
    return value


@cache
def iso_countries() -> frozenset[str]:
    return frozenset(country.alpha_2 for country in pycountry.countries)


@cache
def iso_currencies() -> frozenset[str]:
    return frozenset(currency.alpha_3 for currency in pycountry.currencies)


def _check_country(value: str) -> str:
    if value not in iso_countries():
        raise ValueError(f"expected a two-letter ISO 3166-1 country code such as DE, got {value!r}")
    return value


def _check_currency(value: str) -> str:
    if value not in iso_currencies():
        raise ValueError(f"expected an ISO 4217 currency code such as EUR, got {value!r}")
    return value


def _whole_number(value: object) -> object:
    # JSON has one number type: 2, 2.0 and 2e0 are the same number, and JSON Schema (so the
    # OpenAPI document) calls each of them an integer. 2.5, NaN and infinities stay floats
    # and are refused by the strict int check that follows.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_whole_number)]
"""An integer as JSON Schema means it: a number without a fractional part, however spelled."""

# The bound before the validator: the other way round, pydantic writes it into the JSON schema
# of an optional member as "ge" (not a JSON Schema keyword) instead of "minimum".
NonNegativeJsonInt = Annotated[int, Field(ge=0), BeforeValidator(_whole_number)]

NonEmptyStr = Annotated[str, StringConstraints(min_length=1, pattern=NON_BLANK_PATTERN)]
"""A required string: the spec's required members carry a value, so blank is rejected."""

TimeHHmm = Annotated[
    str,
    AfterValidator(_check_hh_mm),
    # The pattern as documentation only: a Field pattern after the validator would be checked
    # but left out of the JSON schema.
    Field(json_schema_extra={"pattern": HH_MM_PATTERN}, examples=["15:00"]),
]
HalfHourTime = Annotated[
    str,
    AfterValidator(_check_half_hour),
    Field(json_schema_extra={"pattern": HALF_HOUR_PATTERN}, examples=["16:30"]),
]
DateYMD = Annotated[
    str,
    AfterValidator(_check_date),
    Field(json_schema_extra={"format": "date"}, examples=["2025-07-01"]),
]
Timestamp = Annotated[
    str,
    AfterValidator(_check_timestamp),
    Field(json_schema_extra={"format": "date-time"}, examples=["2025-01-31T12:00:00Z"]),
]
# The document lists the codes the validators accept: a pattern such as ^[A-Z]{2}$ would
# promise that "ZZ" is accepted.
CountryCode = Annotated[
    str,
    AfterValidator(_check_country),
    Field(json_schema_extra={"enum": sorted(iso_countries())}, examples=["DE"]),
]
CurrencyCode = Annotated[
    str,
    AfterValidator(_check_currency),
    Field(json_schema_extra={"enum": sorted(iso_currencies())}, examples=["EUR"]),
]
