"""The service's response counts checked against the one record that was sent."""

from __future__ import annotations

import pytest

from connector.canonical import canonical_json
from connector.push import response_disagreement

RESERVATION = canonical_json(
    {"id": "R1", "unitReservations": [{"id": "1"}, {"id": "2"}], "status": "CONFIRMED"}
)
IDS = ["R1-1", "R1-2"]


@pytest.mark.parametrize(
    ("entity", "action", "body"),
    [
        ("accommodation", "create", {"savedProperties": 1, "skippedProperties": 0}),
        ("accommodation", "update", {}),
        ("accommodation", "update", None),
        (
            "reservation",
            "create",
            {"newReservations": 1, "updatedReservations": 0, "reservationIds": IDS},
        ),
        ("reservation", "update", {"newReservations": 0, "updatedReservations": 1}),
        (
            "reservation",
            "cancel",
            {"updatedReservations": 1, "newReservations": 0, "skippedReservations": 0},
        ),
    ],
)
def test_counts_of_one_saved_record_agree(entity: str, action: str, body: dict | None) -> None:
    assert response_disagreement(entity, action, RESERVATION, body) is None


@pytest.mark.parametrize(
    ("entity", "action", "body", "expected"),
    [
        ("accommodation", "create", {"savedProperties": 0, "skippedProperties": 1}, "skipped"),
        ("accommodation", "create", {"savedProperties": 2}, "savedProperties=1"),
        ("reservation", "update", {"skippedReservations": 1}, "skipped"),
        ("reservation", "create", {"newReservations": 0, "updatedReservations": 0}, "no new"),
        ("reservation", "create", {"newReservations": 0, "updatedReservations": 1}, "already knew"),
        ("reservation", "update", {"newReservations": 1, "updatedReservations": 0}, "did not know"),
        ("reservation", "create", {"reservationIds": ["R1-1"]}, "reservationIds"),
    ],
)
def test_counts_that_do_not_say_one_record_saved_as_sent_disagree(
    entity: str, action: str, body: dict, expected: str
) -> None:
    assert expected in (response_disagreement(entity, action, RESERVATION, body) or "")
