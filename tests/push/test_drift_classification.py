"""Which acknowledged answers reveal drift, and whether the same answer healed it
(connector.plan.drift_of; docs/drift.md)."""

from __future__ import annotations

from typing import Any

import pytest

from connector.canonical import canonical_json
from connector.client import SyncAnswer
from connector.contract import AccommodationSyncResponse, Entity, ReservationSyncResponse
from connector.plan import drift_of
from connector.push import answer_contradictions

RESERVATION = canonical_json({"id": "R1", "unitReservations": [{"id": "1"}], "status": "CONFIRMED"})


def answer(entity: str, body: dict[str, Any]) -> SyncAnswer:
    if entity == Entity.ACCOMMODATION:
        return AccommodationSyncResponse.model_validate(body)
    return ReservationSyncResponse.model_validate(body)


def classify(
    entity: str,
    action: str,
    reason: str,
    body: dict[str, Any],
    *,
    explained: bool = False,
    other_content: bool = False,
) -> tuple[str, bool] | None:
    sync_answer = answer(entity, body)
    found = drift_of(
        entity,
        action,
        reason,
        sync_answer,
        list(answer_contradictions(entity, action, RESERVATION, sync_answer)),
        explained=explained,
        other_content_may_be_stored=other_content,
    )
    return None if found is None else (str(found.kind), found.healed)


@pytest.mark.parametrize(
    ("entity", "action", "reason", "body", "expected"),
    [
        # The service lost a record it had acknowledged: our update re-created it.
        ("reservation", "update", "changed", {"newReservations": 1}, ("lost", True)),
        ("reservation", "cancel", "missing_from_export", {"newReservations": 1}, ("lost", True)),
        ("reservation", "update", "refresh", {"newReservations": 1}, ("lost", True)),
        # It held a version the snapshot never recorded: ours replaced it.
        ("reservation", "create", "new", {"updatedReservations": 1}, ("unrecorded", True)),
        # A re-send of unchanged content that was stored again: it held other content.
        ("reservation", "update", "refresh", {"updatedReservations": 1}, ("changed", True)),
        ("accommodation", "update", "reconcile", {"savedProperties": 1}, ("changed", True)),
        # Counts that do not account for the one record: left open for the next run.
        ("accommodation", "create", "new", {"savedProperties": 2}, ("unaccounted", False)),
        (
            "reservation",
            "update",
            "changed",
            {"updatedReservations": 1, "reservationIds": ["R1-1", "R2-1"]},
            ("unaccounted", False),
        ),
    ],
)
def test_answers_that_reveal_drift(
    entity: str, action: str, reason: str, body: dict[str, Any], expected: tuple[str, bool]
) -> None:
    assert classify(entity, action, reason, body) == expected


@pytest.mark.parametrize(
    ("entity", "action", "reason", "body"),
    [
        ("reservation", "update", "changed", {"updatedReservations": 1}),
        ("reservation", "create", "new", {"newReservations": 1}),
        ("accommodation", "update", "changed", {"savedProperties": 1}),
        # A re-send the service already held exactly: no drift.
        ("reservation", "update", "refresh", {"skippedReservations": 1}),
        ("accommodation", "update", "refresh", {"skippedProperties": 1}),
        # A snapshot lost after the service stored the record: skipped, nothing else known.
        ("reservation", "create", "new", {"skippedReservations": 1}),
        # A re-send of open drift only heals it, whatever its counts say.
        ("accommodation", "update", "drifted", {"savedProperties": 2}),
        ("reservation", "update", "drifted", {"newReservations": 1}),
    ],
)
def test_answers_that_reveal_no_drift(
    entity: str, action: str, reason: str, body: dict[str, Any]
) -> None:
    assert classify(entity, action, reason, body) is None


def test_a_create_answered_already_known_after_a_lost_answer_is_no_drift() -> None:
    body = {"updatedReservations": 1}
    assert classify("reservation", "create", "new", body, explained=True) is None


def test_a_skip_while_the_service_may_hold_another_content_of_ours_is_left_open() -> None:
    body = {"skippedReservations": 1}
    assert classify("reservation", "create", "new", body, other_content=True) == (
        "kept_other",
        False,
    )
