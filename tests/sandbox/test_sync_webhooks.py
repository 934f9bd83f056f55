"""The sync webhooks over real sockets: auth, validation, upsert, counts (spec §4.1, §4.2, §7)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from connector.contract import (
    Accommodation,
    AccommodationEnvelope,
    PrimaryGuest,
    Reservation,
    UnitReservation,
)
from connector.sandbox.testing import SandboxHandle
from tests.sandbox import payloads

ACCOMMODATION_PATH = "/api/v1/hooks/accommodation/connect"
RESERVATION_PATH = "/api/v1/hooks/reservation/connect"
PATHS = {"accommodation": ACCOMMODATION_PATH, "reservation": RESERVATION_PATH}
DEMO_TOKEN = {"X-Wishbox-Auth-Token": "demo-token"}


@pytest.fixture(scope="module")
def demo_client(sandbox: SandboxHandle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sandbox.base_url, headers=DEMO_TOKEN) as http:
        yield http


@pytest.fixture
def client(clean_sandbox: SandboxHandle, demo_client: httpx.Client) -> httpx.Client:
    """A client sending the demo account's token, against an emptied sandbox."""
    return demo_client


def _valid(entity: str) -> dict[str, Any]:
    resource = payloads.accommodation() if entity == "accommodation" else payloads.reservation()
    return payloads.envelope(entity, resource)


def _required(model: type) -> list[str]:
    return [name for name, field in model.model_fields.items() if field.is_required()]


# (entity, path to the object holding the member, member) for every required member.
REQUIRED_MEMBERS = (
    [("accommodation", (), name) for name in _required(AccommodationEnvelope)]
    + [("reservation", (), name) for name in _required(AccommodationEnvelope)]
    + [("accommodation", ("resource",), name) for name in _required(Accommodation)]
    + [("reservation", ("resource",), name) for name in _required(Reservation)]
    + [("reservation", ("resource", "primaryGuest"), name) for name in _required(PrimaryGuest)]
    + [
        ("reservation", ("resource", "unitReservations", 0), name)
        for name in _required(UnitReservation)
    ]
)


def _at(document: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        document = document[part]
    return document


def _dotted(path: tuple[str | int, ...], member: str) -> str:
    return ".".join(str(part) for part in (*path, member))


@pytest.mark.parametrize(
    ("entity", "path", "member"),
    REQUIRED_MEMBERS,
    ids=[f"{e}:{_dotted(p, m)}" for e, p, m in REQUIRED_MEMBERS],
)
def test_a_missing_required_member_is_refused_with_its_path(
    client: httpx.Client, sandbox: SandboxHandle, entity: str, path: tuple, member: str
) -> None:
    body = _valid(entity)
    del _at(body, path)[member]

    response = client.post(PATHS[entity], json=body)

    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert f"{_dotted(path, member)}: required member is missing" in response.text
    assert sandbox.records() == []


def _set(path: tuple[str | int, ...], member: str, value: Any) -> Callable[[dict], None]:
    def change(body: dict) -> None:
        _at(body, path)[member] = value

    return change


_UNIT = ("resource", "unitReservations", 0)
FORMAT_VIOLATIONS: list[tuple[str, str, Callable[[dict], None], str]] = [
    (
        "accommodation",
        "HH:mm hour",
        _set(("resource",), "minimumCheckInTime", "25:00"),
        "resource.minimumCheckInTime: expected a time as HH:mm",
    ),
    (
        "accommodation",
        "HH:mm without colon",
        _set(("resource",), "maximumCheckOutTime", "1030"),
        "resource.maximumCheckOutTime: expected a time as HH:mm",
    ),
    (
        "accommodation",
        "country name",
        _set(("resource",), "country", "Germany"),
        "resource.country: expected a two-letter ISO 3166-1 country code",
    ),
    (
        "accommodation",
        "unknown country",
        _set(("resource",), "country", "XX"),
        "resource.country: expected a two-letter ISO 3166-1 country code",
    ),
    (
        "accommodation",
        "status enum",
        _set(("resource",), "status", "OPEN"),
        "resource.status: input should be 'ACTIVE' or 'INACTIVE', got 'OPEN'",
    ),
    (
        "accommodation",
        "integer as string",
        _set(("resource",), "bedroomsNumber", "3"),
        "resource.bedroomsNumber: input should be a valid integer, got a string",
    ),
    (
        "accommodation",
        "blank required string",
        _set(("resource",), "name", "  "),
        "resource.name: string should match pattern",
    ),
    (
        "accommodation",
        "unknown resource member",
        _set(("resource",), "colour", "blue"),
        "resource.colour: unknown member",
    ),
    ("accommodation", "unknown envelope member", _set((), "tenant", "x"), "tenant: unknown member"),
    (
        "accommodation",
        "event enum",
        _set((), "event", "delete"),
        "event: input should be 'create' or 'update', got 'delete'",
    ),
    (
        "accommodation",
        "entity of the other endpoint",
        _set((), "entity", "reservation"),
        "entity: input should be 'accommodation', got 'reservation'",
    ),
    (
        "reservation",
        "YYYY-MM-DD",
        _set(_UNIT, "checkin", "01.02.2025"),
        "resource.unitReservations.0.checkin: expected a date as YYYY-MM-DD, got '01.02.2025'",
    ),
    (
        "reservation",
        "calendar date",
        _set(_UNIT, "checkout", "2025-02-30"),
        "resource.unitReservations.0.checkout: '2025-02-30' is not a calendar date",
    ),
    (
        "reservation",
        "HH:00/HH:30 check-in",
        _set(_UNIT, "estimatedCheckInTime", "16:15"),
        "resource.unitReservations.0.estimatedCheckInTime: expected a time as HH:00 or HH:30",
    ),
    (
        "reservation",
        "HH:00/HH:30 check-out",
        _set(_UNIT, "estimatedCheckOutTime", "9:00"),
        "resource.unitReservations.0.estimatedCheckOutTime: expected a time as HH:00 or HH:30",
    ),
    (
        "reservation",
        "currency",
        _set(_UNIT, "currency", "EURO"),
        "resource.unitReservations.0.currency: expected an ISO 4217 currency code",
    ),
    (
        "reservation",
        "guest country",
        _set(("resource", "primaryGuest"), "country", "gb"),
        "resource.primaryGuest.country: expected a two-letter ISO 3166-1 country code",
    ),
    (
        "reservation",
        "checkout before checkin",
        _set(_UNIT, "checkout", "2025-06-30"),
        "resource.unitReservations.0: checkout 2025-06-30 must be after checkin 2025-07-01",
    ),
    (
        "reservation",
        "checkout on checkin day",
        _set(_UNIT, "checkout", "2025-07-01"),
        "must be after checkin",
    ),
    (
        "reservation",
        "adults as string",
        _set(_UNIT, "adults", "2"),
        "resource.unitReservations.0.adults: input should be a valid integer, got a string",
    ),
    (
        "reservation",
        "price as string",
        _set(_UNIT, "price", "12.5"),
        "resource.unitReservations.0.price: input should be a valid number, got a string",
    ),
    (
        "reservation",
        "createdAt timestamp",
        _set(("resource",), "createdAt", "yesterday"),
        "resource.createdAt: expected an ISO 8601 date or timestamp",
    ),
    (
        "reservation",
        "no unit reservations",
        _set(("resource",), "unitReservations", []),
        "resource.unitReservations: list should have at least 1 item",
    ),
    (
        "reservation",
        "unknown unit member",
        _set(_UNIT, "roomNumber", "12"),
        "resource.unitReservations.0.roomNumber: unknown member",
    ),
    (
        "reservation",
        "object expected",
        _set(("resource",), "primaryGuest", "Ada"),
        "resource.primaryGuest: input should be an object, got a string",
    ),
]


@pytest.mark.parametrize(
    ("entity", "case", "change", "message"),
    FORMAT_VIOLATIONS,
    ids=[f"{entity}:{case}" for entity, case, _, _ in FORMAT_VIOLATIONS],
)
def test_a_format_violation_is_refused_with_path_and_reason(
    client: httpx.Client,
    sandbox: SandboxHandle,
    entity: str,
    case: str,
    change: Callable[[dict], None],
    message: str,
) -> None:
    body = _valid(entity)
    change(body)

    response = client.post(PATHS[entity], json=body)

    assert response.status_code == 400
    assert message in response.text
    assert sandbox.records() == []


@pytest.mark.parametrize("path", [ACCOMMODATION_PATH, RESERVATION_PATH])
@pytest.mark.parametrize("body", [b"{not json", b"", b"[]", b"null"])
def test_a_body_that_is_not_a_json_object_is_refused(
    client: httpx.Client, path: str, body: bytes
) -> None:
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    assert response.text.startswith("body: ")


def test_a_secret_of_the_wrong_type_is_not_repeated_in_the_message(client: httpx.Client) -> None:
    body = _valid("accommodation")
    body["resource"]["doorCode"] = 987654

    response = client.post(ACCOMMODATION_PATH, json=body)

    assert response.status_code == 400
    assert "resource.doorCode" in response.text
    assert "987654" not in response.text


def test_a_new_accommodation_is_saved_and_stored_as_sent(
    client: httpx.Client, sandbox: SandboxHandle
) -> None:
    body = _valid("accommodation")

    response = client.post(ACCOMMODATION_PATH, json=body)

    assert response.status_code == 200
    assert response.json() == {
        "savedProperties": 1,
        "skippedProperties": 0,
        "summary": "1 property saved, 0 skipped",
    }
    [record] = sandbox.records("demo", "accommodation")
    assert record["resource"] == body["resource"]
    assert (record["writes"], record["lastEvent"]) == (1, "create")


def test_identical_content_is_skipped_and_not_written(
    client: httpx.Client, sandbox: SandboxHandle
) -> None:
    body = _valid("accommodation")
    client.post(ACCOMMODATION_PATH, json=body)
    # The same content with its members in another order is the same record.
    reordered = copy.deepcopy(body)
    reordered["resource"] = dict(reversed(list(body["resource"].items())))
    reordered["event"] = "update"

    response = client.post(ACCOMMODATION_PATH, json=reordered)

    assert response.json()["savedProperties"] == 0
    assert response.json()["skippedProperties"] == 1
    [record] = sandbox.records("demo", "accommodation")
    assert (record["writes"], record["lastEvent"], record["lastSeq"]) == (
        1,
        "create",
        record["firstSeq"],
    )


def test_changed_content_is_saved_whatever_the_event_says(
    client: httpx.Client, sandbox: SandboxHandle
) -> None:
    client.post(ACCOMMODATION_PATH, json=_valid("accommodation"))
    changed = payloads.envelope(
        "accommodation", payloads.accommodation(status="INACTIVE"), event="create"
    )

    response = client.post(ACCOMMODATION_PATH, json=changed)

    assert response.json()["savedProperties"] == 1
    [record] = sandbox.records("demo", "accommodation")
    assert record["resource"]["status"] == "INACTIVE"
    assert record["writes"] == 2
    assert record["lastSeq"] > record["firstSeq"]


def test_an_update_of_an_unknown_reservation_creates_it(
    client: httpx.Client, sandbox: SandboxHandle
) -> None:
    body = payloads.envelope("reservation", payloads.reservation(), event="update")

    response = client.post(RESERVATION_PATH, json=body)

    assert response.status_code == 200
    assert response.json()["newReservations"] == 1
    [record] = sandbox.records("demo", "reservation")
    assert record["lastEvent"] == "update"


def test_reservation_counts_follow_new_updated_and_skipped(client: httpx.Client) -> None:
    first = payloads.envelope("reservation", payloads.reservation())
    changed = payloads.envelope(
        "reservation", payloads.reservation(status="MODIFIED"), event="update"
    )

    responses = [
        client.post(RESERVATION_PATH, json=body).json() for body in (first, first, changed)
    ]
    counts = [
        {
            key: response[key]
            for key in ("newReservations", "updatedReservations", "skippedReservations")
        }
        for response in responses
    ]

    assert counts == [
        {"newReservations": 1, "updatedReservations": 0, "skippedReservations": 0},
        {"newReservations": 0, "updatedReservations": 0, "skippedReservations": 1},
        {"newReservations": 0, "updatedReservations": 1, "skippedReservations": 0},
    ]


def test_reservation_ids_join_reservation_and_unit_reservation_ids(client: httpx.Client) -> None:
    response = client.post(RESERVATION_PATH, json=_valid("reservation"))

    body = response.json()
    assert body["reservationIds"] == ["res-1-u1", "res-1-u2"]
    assert body["summary"] == "1 new, 0 updated, 0 skipped reservation(s)"


def test_records_are_kept_per_account_and_entity(
    sandbox: SandboxHandle, client: httpx.Client
) -> None:
    client.post(RESERVATION_PATH, json=_valid("reservation"))
    other = payloads.envelope("reservation", payloads.reservation(), account_id="hotel-a")
    client.post(RESERVATION_PATH, json=other, headers={"X-Wishbox-Auth-Token": "hotel-a-token"})

    assert [r["accountId"] for r in sandbox.records(entity="reservation")] == ["demo", "hotel-a"]
    assert sandbox.records("hotel-a", "accommodation") == []


def test_sequences_order_the_writes(sandbox: SandboxHandle, client: httpx.Client) -> None:
    for unit_id in ("a", "b", "c"):
        client.post(
            ACCOMMODATION_PATH,
            json=payloads.envelope("accommodation", payloads.accommodation(unit_id)),
        )

    sequences = [record["firstSeq"] for record in sandbox.records("demo", "accommodation")]

    assert sequences == sorted(sequences)
    assert len(set(sequences)) == 3


@pytest.mark.parametrize(
    "transport",
    [
        {"headers": {"X-Wishbox-Auth-Token": "demo-token"}},
        {"headers": {"Authorization": "Bearer demo-token"}},
        {"body": {"apiToken": "demo-token"}},
    ],
    ids=["x-wishbox-auth-token", "authorization-bearer", "apitoken-member"],
)
def test_the_token_is_accepted_from_header_bearer_or_body(
    clean_sandbox: SandboxHandle, transport: dict[str, Any]
) -> None:
    body = {**_valid("accommodation"), **transport.get("body", {})}

    response = clean_sandbox.http.post(
        ACCOMMODATION_PATH, json=body, headers=transport.get("headers")
    )

    assert response.status_code == 200
    assert len(clean_sandbox.records("demo")) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Wishbox-Auth-Token": "wrong"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic ZGVtbzp4"},
    ],
    ids=["missing", "unknown-header-token", "unknown-bearer", "not-a-bearer"],
)
@pytest.mark.parametrize("path", [ACCOMMODATION_PATH, RESERVATION_PATH])
def test_a_missing_or_unknown_token_is_refused_with_401(
    clean_sandbox: SandboxHandle, headers: dict[str, str], path: str
) -> None:
    entity = "accommodation" if path == ACCOMMODATION_PATH else "reservation"

    response = clean_sandbox.http.post(path, json=_valid(entity), headers=headers)

    assert response.status_code == 401
    assert response.headers["content-type"].startswith("text/plain")
    assert clean_sandbox.records() == []


def test_an_unknown_api_token_member_is_refused_with_401(clean_sandbox: SandboxHandle) -> None:
    body = {**_valid("reservation"), "apiToken": "wrong"}

    response = clean_sandbox.http.post(RESERVATION_PATH, json=body)

    assert response.status_code == 401


def test_authentication_comes_before_validation(clean_sandbox: SandboxHandle) -> None:
    response = clean_sandbox.http.post(RESERVATION_PATH, content=b"{broken")

    assert response.status_code == 401


@pytest.mark.parametrize("path", [ACCOMMODATION_PATH, RESERVATION_PATH])
def test_a_token_of_another_account_is_refused_with_403(
    client: httpx.Client, sandbox: SandboxHandle, path: str
) -> None:
    entity = "accommodation" if path == ACCOMMODATION_PATH else "reservation"
    body = {**_valid(entity), "accountId": "hotel-b"}

    response = client.post(path, json=body)

    assert response.status_code == 403
    assert "'hotel-b'" in response.text
    assert sandbox.records() == []


def test_a_token_shared_by_two_accounts_writes_to_both(
    clean_sandbox: SandboxHandle,
) -> None:
    for account_id in ("hotel-a", "hotel-b"):
        body = {**_valid("accommodation"), "accountId": account_id}
        response = clean_sandbox.http.post(
            ACCOMMODATION_PATH,
            json=body,
            headers={"Authorization": "Bearer group-token"},
        )
        assert response.status_code == 200

    assert {r["accountId"] for r in clean_sandbox.records()} == {"hotel-a", "hotel-b"}


def test_an_unknown_account_is_refused_with_403(client: httpx.Client) -> None:
    response = client.post(
        ACCOMMODATION_PATH, json={**_valid("accommodation"), "accountId": "nobody"}
    )

    assert response.status_code == 403
