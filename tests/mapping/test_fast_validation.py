"""The mapping engine's native first pass accepts only what the contract accepts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError

from connector.contract import RESOURCES, Entity
from connector.contract.examples import EXAMPLE_RESERVATION
from connector.contract.formats import (
    CountryCode,
    CurrencyCode,
    DateYMD,
    HalfHourTime,
    TimeHHmm,
    Timestamp,
)
from connector.mapping.fast_validation import sure_validator


class _Formats(BaseModel):
    model_config = ConfigDict(strict=True)
    date: DateYMD | None = None
    timestamp: Timestamp | None = None
    hh_mm: TimeHHmm | None = None
    half_hour: HalfHourTime | None = None
    country: CountryCode | None = None
    currency: CurrencyCode | None = None


_SURE = sure_validator(_Formats)
_DATE_LIKE = st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z") | st.text(max_size=12)
_TIMESTAMP_LIKE = st.from_regex(
    r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,7})?Z?)?\Z"
) | st.text(max_size=25)
_TIME_LIKE = st.from_regex(r"\A[0-9]{2}:[0-9]{2}\Z") | st.text(max_size=6)
_CODE_LIKE = st.from_regex(r"\A[A-Z]{2,3}\Z") | st.text(max_size=4)


def _accepts(validate, document: dict) -> bool:
    try:
        validate(document)
    except ValidationError:
        return False
    return True


@settings(deadline=None)  # max_examples: the profile (tests/conftest.py)
@given(
    st.sampled_from(["date", "timestamp", "hh_mm", "half_hour", "country", "currency"]),
    _DATE_LIKE | _TIMESTAMP_LIKE | _TIME_LIKE | _CODE_LIKE,
)
def test_sure_validator_accepts_a_subset_of_the_contract(field, value):
    document = {field: value}
    if _accepts(_SURE.validate_python, document):
        assert _accepts(_Formats.model_validate, document), (field, value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("date", "2025-02-28"),
        ("date", "2024-12-31"),
        ("timestamp", "2025-01-31T12:00:00Z"),
        ("timestamp", "2025-01-31"),
        ("half_hour", "16:30"),
        ("hh_mm", "23:59"),
        ("country", "DE"),
        ("currency", "EUR"),
    ],
)
def test_sure_validator_takes_the_common_values(field, value):
    assert _accepts(_SURE.validate_python, {field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [("date", "2024-02-29"), ("date", "2025-02-30"), ("timestamp", "2025-01-31T12:00:00+01:00")],
)
def test_sure_validator_leaves_the_rest_to_the_contract(field, value):
    assert not _accepts(_SURE.validate_python, {field: value})


def test_sure_validator_returns_the_contract_model():
    model = RESOURCES[Entity.RESERVATION]
    document = model.model_validate(EXAMPLE_RESERVATION).model_dump_json(exclude_none=True)
    resource = sure_validator(model).validate_json(document)
    assert isinstance(resource, model)
    assert resource.to_json_dict() == model.model_validate_json(document).to_json_dict()
