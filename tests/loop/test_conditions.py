"""Conditions of outgoing-webhook configurations as the sandbox evaluates them against a
reservation (the documented filter types; others never match)."""

from __future__ import annotations

from typing import Any

import pytest

from connector.sandbox.conditions import UnsupportedCondition, condition_holds, conditions_hold

RESERVATION: dict[str, Any] = {
    "id": "B1",
    "status": "CONFIRMED",
    "channelName": "Booking.com",
    "agent": "Travel Co",
    "primaryGuest": {"firstName": "Anna", "country": "DE"},
    "unitReservations": [
        {"id": "1", "adults": 2, "checkin": "2025-03-01", "checkout": "2025-03-05"},
        {"id": "2", "adults": 1, "children": 2, "checkin": "2025-03-02", "checkout": "2025-03-04"},
    ],
}


@pytest.mark.parametrize(
    ("condition", "holds"),
    [
        ({"filterType": 2, "op": "=", "value": "CONFIRMED"}, True),
        ({"filterType": 2, "op": "!=", "value": "CONFIRMED"}, False),
        ({"filterType": 1, "op": "in", "value": ["Airbnb", "Booking.com"]}, True),
        ({"filterType": 15, "op": "!in", "value": ["AT", "CH"]}, True),
        ({"filterType": 6, "op": ">=", "value": 4}, True),  # 1 to 5 March: 4 nights
        ({"filterType": 6, "op": ">", "value": 4}, False),
        ({"filterType": 10, "op": "=", "value": 3}, True),  # adults summed over the units
        ({"filterType": 11, "op": "range", "value": 1, "secondValue": 2}, True),
        ({"filterType": 11, "op": "<", "value": "2"}, False),  # numbers compare as numbers
        ({"filterType": 30, "op": "exists"}, False),
        ({"filterType": 30, "op": "not exists"}, True),
        ({"filterType": 16, "op": "exists"}, True),
        ({"filterType": 30, "op": "=", "value": "Gold"}, False),  # absent: never equal
        ({"filterType": 30, "op": "!=", "value": "Gold"}, True),
    ],
)
def test_each_operator_compares_the_reservation_value_of_its_filter_type(
    condition: dict[str, Any], holds: bool
) -> None:
    assert condition_holds(condition, RESERVATION) is holds


def test_every_condition_must_hold_and_none_means_always() -> None:
    assert conditions_hold([], RESERVATION)
    assert not conditions_hold(
        [
            {"filterType": 2, "op": "=", "value": "CONFIRMED"},
            {"filterType": 6, "op": "<", "value": 2},
        ],
        RESERVATION,
    )


def test_a_filter_type_the_sandbox_does_not_implement_is_named() -> None:
    with pytest.raises(UnsupportedCondition, match="filterType 99"):
        conditions_hold([{"filterType": 99, "op": "exists"}], RESERVATION)
