"""Which 2xx bodies acknowledge a record: the documented JSON object of spec §4.1/§4.2 only."""

from __future__ import annotations

import json

import pytest

from connector.client import AcknowledgementPolicy, read_answer
from connector.contract import Entity

JSON = "application/json"
DOCUMENTED = AcknowledgementPolicy.DOCUMENTED


def body(document: object) -> bytes:
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("entity", "document"),
    [
        (Entity.ACCOMMODATION, {"savedProperties": 1, "skippedProperties": 0, "summary": "ok"}),
        (Entity.ACCOMMODATION, {"skippedProperties": 1}),
        (Entity.ACCOMMODATION, {"savedProperties": 1, "error": None, "traceId": "t-1"}),
        (
            Entity.RESERVATION,
            {
                "newReservations": 1,
                "updatedReservations": 0,
                "skippedReservations": 0,
                "summary": "1 new",
                "reservationIds": ["R1-1"],
            },
        ),
        (Entity.RESERVATION, {"updatedReservations": 1, "summary": None}),
        (Entity.RESERVATION, {"updatedReservations": 1, "message": "updated"}),
    ],
)
def test_the_documented_object_with_a_count_acknowledges(
    entity: Entity, document: dict[str, object]
) -> None:
    reading = read_answer(entity, 200, JSON, body(document))

    assert reading.acknowledged
    assert reading.answer is not None


@pytest.mark.parametrize(
    ("entity", "content_type", "raw", "expected"),
    [
        (
            Entity.RESERVATION,
            "text/html; charset=utf-8",
            b"<!DOCTYPE html><html>login</html>",
            "HTTP 200 with a text/html body, not the JSON object of spec \u00a74.2",
        ),
        (
            Entity.ACCOMMODATION,
            None,
            b"",
            "HTTP 200 with an empty body, not the JSON object of spec \u00a74.1",
        ),
        (Entity.RESERVATION, JSON, b"  \n", "with an empty body"),
        (Entity.RESERVATION, JSON, b"{", "an application/json body that does not parse as JSON"),
        (Entity.RESERVATION, None, b"OK", "a body that is not JSON"),
        (Entity.RESERVATION, JSON, b"[1]", "with a JSON array"),
        (Entity.RESERVATION, JSON, b"true", "with a JSON boolean"),
        (Entity.RESERVATION, JSON, b'{"error": "db down"}', "an error object (error: 'db down')"),
        (Entity.RESERVATION, JSON, b'{"errors": [{"code": 5}]}', "an error object (errors:"),
        (Entity.ACCOMMODATION, JSON, b'{"message": "Unauthorized"}', "message: 'Unauthorized'"),
        (
            Entity.RESERVATION,
            JSON,
            b'{"newReservations": "1"}',
            "whose member newReservations is a JSON string, not an integer as spec \u00a74.2",
        ),
        (Entity.ACCOMMODATION, JSON, b'{"savedProperties": true}', "is a JSON boolean"),
        (Entity.ACCOMMODATION, JSON, b'{"savedProperties": 1.0}', "is a JSON number"),
        (Entity.ACCOMMODATION, JSON, b'{"savedProperties": 1, "summary": 3}', "member summary"),
        (
            Entity.RESERVATION,
            JSON,
            b'{"newReservations": 1, "reservationIds": [7]}',
            "member reservationIds[0] is a JSON number, not a string",
        ),
        (
            Entity.ACCOMMODATION,
            JSON,
            b'{"savedProperties": 1, "savedProperties": 0}',
            "savedProperties appears more than once",
        ),
        (Entity.ACCOMMODATION, JSON, b'{"savedProperties": -1}', "negative count"),
        (Entity.ACCOMMODATION, JSON, b"{}", "without any count of spec \u00a74.1"),
        (Entity.RESERVATION, JSON, b'{"summary": "done"}', "PMS_SYNC_ACKNOWLEDGEMENT=documented"),
        (
            Entity.RESERVATION,
            JSON,
            b'{"newReservations": 0, "updatedReservations": 0, "skippedReservations": 0}',
            "counts say nothing was stored (newReservations=0, updatedReservations=0, "
            "skippedReservations=0)",
        ),
        (Entity.ACCOMMODATION, JSON, b'{"savedProperties": 0}', "nothing was stored"),
    ],
)
def test_any_other_body_is_unconfirmed_and_says_what_came(
    entity: Entity, content_type: str | None, raw: bytes, expected: str
) -> None:
    reading = read_answer(entity, 200, content_type, raw)

    assert not reading.acknowledged
    assert expected in (reading.problem or "")


def test_counts_of_nothing_keep_the_answer_so_the_push_can_list_the_disagreement() -> None:
    reading = read_answer(Entity.ACCOMMODATION, 200, JSON, b'{"savedProperties": 0}')

    assert reading.answer is not None and reading.answer.savedProperties == 0


@pytest.mark.parametrize("raw", [b"{}", b'{"summary": "saved"}', b'{"reservationIds": ["R1-1"]}'])
def test_the_documented_policy_accepts_objects_without_counts(raw: bytes) -> None:
    assert read_answer(Entity.RESERVATION, 200, JSON, raw, DOCUMENTED).acknowledged


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"status": "error"}', "undocumented members only (status)"),
        (b'{"error": "quota"}', "an error object"),
        (b'{"newReservations": 0, "updatedReservations": 0}', "nothing was stored"),
        (b'{"newReservations": "1"}', "is a JSON string"),
    ],
)
def test_the_documented_policy_still_refuses_errors_wrong_types_and_counts_of_nothing(
    raw: bytes, expected: str
) -> None:
    reading = read_answer(Entity.RESERVATION, 200, JSON, raw, DOCUMENTED)

    assert expected in (reading.problem or "")


@pytest.mark.parametrize(
    "raw",
    [
        # Written the same way twice, and the second time with an escape (the same name).
        b'{"savedProperties": 1, "skippedProperties": 0, "savedProperties": 1}',
        b'{"savedProperties": 1, "\\u0073avedProperties": 1}',
        # Escaped quotes that shift where a reader without escapes sees strings start.
        b'{"savedProperties": 1, "a": 1, "\\"a": 1, "a": "\\"a\\":"}',
        # In a nested object of an undocumented member: a repeated door code is no less repeated.
        b'{"savedProperties": 1, "x": {"doorCode": "1", "doorCode": "2"}}',
        b'{"savedProperties": 1, "x": [{"a": 1}, {"a": 1, "a": 2}]}',
    ],
)
def test_a_member_named_twice_is_unconfirmed_however_the_name_is_written(raw: bytes) -> None:
    reading = read_answer(Entity.ACCOMMODATION, 200, JSON, raw)

    assert not reading.acknowledged
    assert "appears more than once" in (reading.problem or "")


@pytest.mark.parametrize(
    "raw",
    [
        # A value equal to a member name, and escapes without any repetition: acknowledged
        # (the quick look at the text is unsure, the full check decides).
        b'{"newReservations": 1, "summary": "newReservations", "reservationIds": ["R1-1"]}',
        b'{"newReservations": 1, "summary": "caf\\u00e9 \\"ok\\""}',
        b'{"newReservations": 1, "x": [{"a": 1}, {"a": 2}], "y": {"a": 3}}',
        # Values that start with a colon, and whitespace between a name and its colon.
        b'{"newReservations" :\n1, "summary": ": stored", "x": " :"}',
    ],
)
def test_an_answer_whose_names_only_look_repeated_acknowledges(raw: bytes) -> None:
    assert read_answer(Entity.RESERVATION, 200, JSON, raw).acknowledged
