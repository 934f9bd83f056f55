"""The contract models enforce spec §2: exact names, required members, formats, no unknown members."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from connector.contract import (
    Accommodation,
    AccommodationEnvelope,
    PrimaryGuest,
    Reservation,
    ReservationEnvelope,
    UnitReservation,
    WebhookConfig,
)
from connector.contract.examples import EXAMPLE_ACCOMMODATION, EXAMPLE_RESERVATION


def _errors(model: type, payload: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(payload)
    return [
        (".".join(str(p) for p in error["loc"]), error["msg"]) for error in caught.value.errors()
    ]


def _required_fields(model: type) -> list[str]:
    return [name for name, info in model.model_fields.items() if info.is_required()]


def test_examples_round_trip_to_identical_json() -> None:
    assert (
        Accommodation.model_validate(EXAMPLE_ACCOMMODATION).to_json_dict() == EXAMPLE_ACCOMMODATION
    )
    assert Reservation.model_validate(EXAMPLE_RESERVATION).to_json_dict() == EXAMPLE_RESERVATION


def test_required_members_match_the_spec() -> None:
    assert _required_fields(Accommodation) == [
        "id", "status", "name", "street", "streetNumber", "country", "city",
        "wifiName", "wifiCode", "doorCode",
    ]  # fmt: skip
    assert _required_fields(Reservation) == [
        "id", "status", "createdAt", "primaryGuest", "unitReservations",
    ]  # fmt: skip
    assert _required_fields(UnitReservation) == [
        "id", "adults", "checkin", "checkout", "unitId", "unitName",
    ]  # fmt: skip
    assert _required_fields(PrimaryGuest) == ["firstName"]


@pytest.mark.parametrize("field", _required_fields(Accommodation))
def test_accommodation_without_a_required_member_is_rejected(field: str) -> None:
    payload = {k: v for k, v in EXAMPLE_ACCOMMODATION.items() if k != field}
    assert (field, "Field required") in _errors(Accommodation, payload)


@pytest.mark.parametrize("field", _required_fields(UnitReservation))
def test_unit_reservation_without_a_required_member_is_rejected(field: str) -> None:
    payload = copy.deepcopy(EXAMPLE_RESERVATION)
    del payload["unitReservations"][0][field]
    assert (f"unitReservations.0.{field}", "Field required") in _errors(Reservation, payload)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("minimumCheckInTime", "3pm", "expected a time as HH:mm"),
        ("maximumCheckOutTime", "24:00", "expected a time as HH:mm"),
        ("country", "DEU", "two-letter ISO 3166-1"),
        ("country", "XX", "two-letter ISO 3166-1"),
        ("status", "active", "Input should be 'ACTIVE' or 'INACTIVE'"),
        ("bedroomsNumber", "2", "Input should be a valid integer"),
        ("name", "   ", "String should match pattern"),
        ("lateCheckOutOverride", "yes", "Input should be a valid boolean"),
    ],
)
def test_accommodation_format_violations_name_the_field(
    field: str, value: Any, message: str
) -> None:
    payload = {**EXAMPLE_ACCOMMODATION, field: value}
    errors = _errors(Accommodation, payload)
    assert any(loc == field and message in msg for loc, msg in errors), errors


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("checkin", "01.07.2025", "expected a date as YYYY-MM-DD"),
        ("checkout", "2025-02-31", "is not a calendar date"),
        ("estimatedCheckInTime", "16:15", "expected a time as HH:00 or HH:30"),
        ("estimatedCheckOutTime", "4pm", "expected a time as HH:00 or HH:30"),
        ("currency", "EURO", "ISO 4217"),
        ("currency", "XYZ", "ISO 4217"),
        ("adults", 2.5, "Input should be a valid integer"),
        ("adults", -1, "greater than or equal to 0"),
        ("price", "12.50", "Input should be a valid number"),
    ],
)
def test_unit_reservation_format_violations_name_the_field(
    field: str, value: Any, message: str
) -> None:
    payload = copy.deepcopy(EXAMPLE_RESERVATION)
    payload["unitReservations"][0][field] = value
    errors = _errors(Reservation, payload)
    assert any(loc == f"unitReservations.0.{field}" and message in msg for loc, msg in errors), (
        errors
    )


def test_checkout_must_be_after_checkin() -> None:
    payload = copy.deepcopy(EXAMPLE_RESERVATION)
    payload["unitReservations"][0]["checkout"] = payload["unitReservations"][0]["checkin"]
    errors = _errors(Reservation, payload)
    assert any("must be after checkin" in msg for _, msg in errors), errors


def test_reservation_needs_at_least_one_unit_reservation() -> None:
    payload = {**EXAMPLE_RESERVATION, "unitReservations": []}
    assert any(loc == "unitReservations" for loc, _ in _errors(Reservation, payload))


def test_guest_country_must_be_iso_alpha2() -> None:
    payload = copy.deepcopy(EXAMPLE_RESERVATION)
    payload["primaryGuest"]["country"] = "Germany"
    assert any(loc == "primaryGuest.country" for loc, _ in _errors(Reservation, payload))


def test_created_at_must_be_iso_8601() -> None:
    payload = {**EXAMPLE_RESERVATION, "createdAt": "yesterday"}
    assert any(
        loc == "createdAt" and "ISO 8601" in msg for loc, msg in _errors(Reservation, payload)
    )


def test_unknown_members_are_rejected_not_dropped() -> None:
    payload = {**EXAMPLE_ACCOMMODATION, "wifiPassword": "x"}
    assert ("wifiPassword", "Extra inputs are not permitted") in _errors(Accommodation, payload)
    nested = copy.deepcopy(EXAMPLE_RESERVATION)
    nested["unitReservations"][0]["adult"] = 2
    assert ("unitReservations.0.adult", "Extra inputs are not permitted") in _errors(
        Reservation, nested
    )


def test_envelopes_fix_the_entity_and_event() -> None:
    envelope = {"accountId": "demo", "event": "create", "entity": "accommodation"}
    AccommodationEnvelope.model_validate({**envelope, "resource": EXAMPLE_ACCOMMODATION})
    assert any(
        loc == "entity"
        for loc, _ in _errors(ReservationEnvelope, {**envelope, "resource": EXAMPLE_RESERVATION})
    )
    assert any(
        loc == "event"
        for loc, _ in _errors(
            AccommodationEnvelope,
            {**envelope, "event": "upsert", "resource": EXAMPLE_ACCOMMODATION},
        )
    )


def test_webhook_config_requires_name_event_url_and_known_event() -> None:
    WebhookConfig.model_validate(
        {"name": "n", "event": "reservationCreated", "url": "https://example.org/hook"}
    )
    errors = _errors(WebhookConfig, {"name": "n", "event": "guestLinkOpened", "url": "https://x"})
    assert any(loc == "event" for loc, _ in errors)
    assert {loc for loc, _ in _errors(WebhookConfig, {})} == {"name", "event", "url"}
