"""Annotated string types for the formats the service interface names (spec §2).

The values stay strings, exactly as they travel in JSON; the annotations only check them.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from functools import cache
from typing import Annotated

import pycountry
from pydantic import AfterValidator, Field, StringConstraints

_HH_MM = re.compile(r"^(?:[01]\d|2[0-3]):[0-5]\d$")
_HALF_HOUR = re.compile(r"^(?:[01]\d|2[0-3]):(?:00|30)$")
_YYYY_MM_DD = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _check_hh_mm(value: str) -> str:
    if not _HH_MM.match(value):
        raise ValueError(f"expected a time as HH:mm (00:00 to 23:59), got {value!r}")
    return value


def _check_half_hour(value: str) -> str:
    if not _HALF_HOUR.match(value):
        raise ValueError(f"expected a time as HH:00 or HH:30, got {value!r}")
    return value


def _check_date(value: str) -> str:
    if not _YYYY_MM_DD.match(value):
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


NonEmptyStr = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
"""A required string: the spec's required members carry a value, so blank is rejected."""

TimeHHmm = Annotated[
    str,
    AfterValidator(_check_hh_mm),
    Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$", examples=["15:00"]),
]
HalfHourTime = Annotated[
    str,
    AfterValidator(_check_half_hour),
    Field(pattern=r"^([01]\d|2[0-3]):(00|30)$", examples=["16:30"]),
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
CountryCode = Annotated[
    str, AfterValidator(_check_country), Field(pattern=r"^[A-Z]{2}$", examples=["DE"])
]
CurrencyCode = Annotated[
    str, AfterValidator(_check_currency), Field(pattern=r"^[A-Z]{3}$", examples=["EUR"])
]
