"""The service's response counts checked against the one record that was sent."""

from __future__ import annotations

from typing import Any

import pytest

from connector.canonical import canonical_json
from connector.client import SyncAnswer
from connector.contract import AccommodationSyncResponse, Entity, ReservationSyncResponse
from connector.push import response_disagreement

RESERVATION = canonical_json(
    {"id": "R1", "unitReservations": [{"id": "1"}, {"id": "2"}], "status": "CONFIRMED"}
)
IDS = ["R1-1", "R1-2"]


def answer(entity: str, body: dict[str, Any] | None) -> SyncAnswer | None:
    if body is None:
        return None
    if entity == Entity.ACCOMMODATION:
        return AccommodationSyncResponse.model_validate(body)
    return ReservationSyncResponse.model_validate(body)


@pytest.mark.parametrize(
    ("entity", "action", "body"),
    [
        ("accommodation", "create", {"savedProperties": 1, "skippedProperties": 0}),
        ("accommodation", "deactivate", {"savedProperties": 1}),
        ("accommodation", "update", {}),
        ("accommodation", "update", {"summary": "saved"}),
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
    assert response_disagreement(entity, action, RESERVATION, answer(entity, body)) is None


@pytest.mark.parametrize(
    ("entity", "action", "body", "expected"),
    [
        ("accommodation", "update", {"savedProperties": 0, "skippedProperties": 1}, "skipped"),
        ("accommodation", "create", {"skippedProperties": 1}, "skipped"),
        ("accommodation", "create", {"savedProperties": 2}, "counts of 2 records"),
        ("accommodation", "create", {"savedProperties": 1, "skippedProperties": 1}, "counts of 2"),
        ("accommodation", "create", {"savedProperties": 0, "skippedProperties": 0}, "not stored"),
        ("accommodation", "update", {"savedProperties": 0}, "nothing saved"),
        ("reservation", "update", {"skippedReservations": 1}, "skipped"),
        ("reservation", "create", {"newReservations": 0, "updatedReservations": 0}, "no new"),
        ("reservation", "create", {"newReservations": 0, "updatedReservations": 1}, "already knew"),
        ("reservation", "update", {"newReservations": 1, "updatedReservations": 0}, "did not know"),
        ("reservation", "cancel", {"newReservations": 1}, "sent as cancel"),
        ("reservation", "create", {"newReservations": 2}, "counts of 2 records"),
        ("reservation", "create", {"reservationIds": ["R1-1"]}, "reservationIds"),
        ("reservation", "create", {"newReservations": 1, "reservationIds": ["X-1"]}, "differ"),
    ],
)
def test_counts_that_do_not_say_one_record_saved_as_sent_disagree(
    entity: str, action: str, body: dict, expected: str
) -> None:
    assert expected in (
        response_disagreement(entity, action, RESERVATION, answer(entity, body)) or ""
    )


@pytest.mark.parametrize(
    ("entity", "action", "body"),
    [
        ("accommodation", "create", {"savedProperties": 0, "skippedProperties": 1}),
        ("accommodation", "update", {"skippedProperties": 1}),
        ("reservation", "create", {"skippedReservations": 1, "reservationIds": IDS}),
        ("reservation", "update", {"newReservations": 0, "skippedReservations": 1}),
        ("reservation", "create", {"newReservations": 0, "updatedReservations": 1}),
    ],
)
def test_a_skip_or_already_known_after_a_lost_answer_of_the_same_record_agrees(
    entity: str, action: str, body: dict
) -> None:
    said = answer(entity, body)

    assert response_disagreement(entity, action, RESERVATION, said) is not None
    assert response_disagreement(entity, action, RESERVATION, said, answer_lost_before=True) is None


@pytest.mark.parametrize(
    ("entity", "action", "body"),
    [
        ("accommodation", "create", {"savedProperties": 0, "skippedProperties": 0}),
        ("accommodation", "create", {"savedProperties": 3}),
        ("reservation", "update", {"newReservations": 1, "updatedReservations": 0}),
        ("reservation", "create", {"newReservations": 0, "updatedReservations": 0}),
        ("reservation", "create", {"skippedReservations": 1, "reservationIds": ["R1-9"]}),
    ],
)
def test_a_lost_answer_does_not_explain_counts_of_nothing_or_of_a_stranger(
    entity: str, action: str, body: dict
) -> None:
    said = answer(entity, body)

    assert response_disagreement(entity, action, RESERVATION, said, answer_lost_before=True)
