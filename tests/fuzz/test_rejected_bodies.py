"""Property: whatever JSON the contract rejects, the sandbox answers 400 (never a 500) with a
plain-string body naming the path; whatever it accepts is stored as the canonical JSON of the
validated resource.

Envelopes are generated valid, then mutated: a required member dropped, a wrong type, a bad
format, an unknown member, deep nesting, a huge string, control and astral characters, a
non-object document, invalid UTF-8, a duplicate member, numbers such as 1e400 or NaN, a
truncated body. Each request goes to the real sandbox over a real socket; the verdict to expect
is the contract's own (``validate_json_body``), and mutations that can only be invalid also
assert that the contract rejects them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from connector.canonical import canonical_json
from connector.contract import ENVELOPES, SYNC_PATHS, Entity, validate_json_body
from connector.contract.examples import EXAMPLE_ACCOMMODATION
from connector.contract.openapi import build_openapi
from connector.sandbox.config import DEMO_SYNC_TOKEN
from connector.sandbox.testing import SandboxHandle
from connector.sandbox.validation_messages import describe_validation_error
from tests.sandbox import payloads

# PMS_SYNC_FUZZ_EXAMPLES is the per-operation budget of the schemathesis run; one envelope
# costs a fraction of an operation's example, so this property gets twelve times as many.
EXAMPLES = 12 * int(os.environ.get("PMS_SYNC_FUZZ_EXAMPLES", "25"))
# A large budget outlasts the suite's 300 s per-test timeout: allow a second per example.
pytestmark = pytest.mark.timeout(max(300, EXAMPLES))
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
    ],
)
AUTH = {"X-Wishbox-Auth-Token": DEMO_SYNC_TOKEN}
ACCOUNT = "demo"
Path = tuple[str | int, ...]

# -- valid envelopes ---------------------------------------------------------------------------

_COUNTRIES = build_openapi()["components"]["schemas"]["Accommodation"]["properties"]["country"][
    "enum"
]
_CURRENCIES = ["EUR", "GBP", "USD", "CHF", "JPY", "XAU"]
_text = st.text(st.characters(codec="utf-8"), max_size=12)
_non_blank = st.tuples(st.sampled_from("aZ9é😀-_#"), _text).map("".join)
_count = st.integers(min_value=0, max_value=10**6)
_money = st.floats(min_value=-(10**9), max_value=10**9, allow_nan=False, allow_infinity=False)


@st.composite
def _accommodations(draw: st.DrawFn) -> dict[str, Any]:
    return payloads.accommodation(
        draw(_non_blank),
        name=draw(_non_blank),
        city=draw(_non_blank),
        doorCode=draw(_non_blank),
        country=draw(st.sampled_from(_COUNTRIES)),
        status=draw(st.sampled_from(["ACTIVE", "INACTIVE"])),
        floor=draw(st.none() | _text),
        bedroomsNumber=draw(st.none() | _count),
        coordinates={
            "lat": draw(st.floats(-90, 90, allow_nan=False)),
            "lon": draw(st.floats(-180, 180, allow_nan=False)),
        },
        bedTypes=draw(
            st.lists(st.fixed_dictionaries({"bedType": st.integers(), "amount": _count}))
        ),
    )


@st.composite
def _reservations(draw: st.DrawFn) -> dict[str, Any]:
    units = []
    for index in range(draw(st.integers(min_value=1, max_value=3))):
        checkin = draw(st.dates(max_value=date(9000, 1, 1)))
        units.append(
            payloads.unit_reservation(
                f"u{index}-{draw(_text)}",
                adults=draw(_count),
                checkin=checkin.isoformat(),
                checkout=(checkin + timedelta(days=draw(st.integers(1, 60)))).isoformat(),
                price=draw(_money),
                currency=draw(st.sampled_from(_CURRENCIES)),
                comments=draw(_text),
            )
        )
    return payloads.reservation(
        draw(_non_blank),
        status=draw(_non_blank),
        unitReservations=units,
        primaryGuest={"firstName": draw(_non_blank), "email": draw(_text)},
        channelId=draw(st.none() | st.integers(min_value=-(10**30), max_value=10**30)),
    )


@st.composite
def valid_envelopes(draw: st.DrawFn) -> tuple[Entity, dict[str, Any]]:
    entity = draw(st.sampled_from(list(Entity)))
    builder = _accommodations if entity is Entity.ACCOMMODATION else _reservations
    resource = {
        key: value for key, value in draw(builder()).items() if value is not None
    }  # an optional member is left out rather than sent as null, like the connector does
    event = draw(st.sampled_from(["create", "update"]))
    return entity, payloads.envelope(entity.value, resource, ACCOUNT, event)


# -- mutations ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutated:
    entity: Entity
    body: bytes
    kind: str
    must_be_rejected: bool


def _dump(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


def _walk(value: Any, path: Path = ()) -> list[tuple[Path, Any]]:
    found = [(path, value)]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _walk(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _walk(item, (*path, index))
    return found


def _set(document: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return document


_REQUIRED = {
    Entity.ACCOMMODATION: [
        ("accountId",),
        ("event",),
        ("entity",),
        ("resource",),
        *[("resource", name) for name in ("id", "status", "name", "country", "doorCode")],
    ],
    Entity.RESERVATION: [
        ("accountId",),
        ("resource", "id"),
        ("resource", "createdAt"),
        ("resource", "primaryGuest"),
        ("resource", "primaryGuest", "firstName"),
        ("resource", "unitReservations", 0, "checkin"),
        ("resource", "unitReservations", 0, "unitId"),
    ],
}
# Keyed by the member's dotted path without list indexes.
_BAD_FORMATS: dict[str, list[Any]] = {
    "resource.unitReservations.checkin": [
        "0000-00-00",
        "31.02.2025",
        "2025-02-30",
        "2025-7-1",
        "2025-07-01\n",
        "\uff12\uff10\uff12\uff15-07-01",
    ],
    "resource.unitReservations.checkout": ["2025-13-01", "", "tomorrow"],
    "resource.unitReservations.estimatedCheckInTime": ["16:15", "24:00", "4:30", "16:30\n"],
    "resource.unitReservations.currency": ["EURO", "eur", "XYZ"],
    "resource.minimumCheckInTime": ["24:00", "7:5", "15:00\n", "1\u0665:00", "15h00"],
    "resource.country": ["XX", "de", "DEU", "", "D E"],
    "resource.primaryGuest.country": ["XX", "gb"],
    "resource.createdAt": ["yesterday", "2025-02-30T00:00:00Z", "31.01.2025 12:00"],
    "resource.name": ["", " ", "\t\n", "\u3000\ufeff"],
    "resource.primaryGuest.firstName": ["", "\u2028"],
    "accountId": ["", " "],
    "event": ["delete", "CREATE"],
}


def _format_key(path: Path) -> str:
    return ".".join(str(part) for part in path if isinstance(part, str))


_ODD_STRINGS = st.sampled_from(
    [
        "\x00",
        "\x1b[31mred\x1b[0m",
        "\u202eevil",
        "😀👩‍👩‍👧",
        '=HYPERLINK("http://x")',
        "\r\n",
        "\ud7ff\ue000\U0010ffff",
        "'; DROP TABLE records; --",
    ]
) | st.text(st.characters(codec="utf-8", categories=["Cc", "Cf", "Zs", "So", "Co"]), min_size=1)
_NUMBER_LITERALS = [
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    "1.5",
    "2.0",
    "2e0",
    "-0",
    "1E+2",
    "0.1e-400",
    "123456789012345678901234567890",
    "1" + "0" * 5000,
]
_FLOAT_MEMBERS = {"price", "paidAmount", "lat", "lon"}
_WRONG_VALUES = st.sampled_from(
    [None, True, False, 0, -1, 1.5, "", "x", [], [1], {}, {"a": 1}, ["x", None]]
)


def _string_leaves(document: Any) -> list[Path]:
    return [path for path, value in _walk(document) if isinstance(value, str)]


def _number_leaves(document: Any) -> list[Path]:
    return [
        path
        for path, value in _walk(document)
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]


def _replace_literal(document: Any, path: Path, literal: str) -> bytes:
    marker = "__number_literal_marker__"
    return _dump(_set(document, path, marker)).replace(f'"{marker}"'.encode(), literal.encode())


@st.composite
def mutated_envelopes(draw: st.DrawFn) -> Mutated:
    entity, document = draw(valid_envelopes())
    kind = draw(
        st.sampled_from(
            [
                "valid",
                "drop required",
                "drop any",
                "wrong type",
                "bad format",
                "unknown member",
                "deep nesting",
                "huge string",
                "odd characters",
                "non-object",
                "invalid utf-8",
                "duplicate member",
                "number literal",
                "non-finite number",
                "truncated",
            ]
        )
    )
    paths = [path for path, _ in _walk(document)]
    if kind == "valid":
        return Mutated(entity, _dump(document), kind, False)
    if kind == "drop required":
        path = draw(st.sampled_from(_REQUIRED[entity]))
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        del parent[path[-1]]
        return Mutated(entity, _dump(document), kind, True)
    if kind == "drop any":
        path = draw(st.sampled_from([p for p in paths if p and isinstance(p[-1], str)]))
        _set(document, path, None)
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        del parent[path[-1]]
        return Mutated(entity, _dump(document), kind, False)
    if kind == "wrong type":
        path = draw(st.sampled_from(paths))
        return Mutated(entity, _dump(_set(document, path, draw(_WRONG_VALUES))), kind, False)
    if kind == "bad format":
        candidates = [p for p in paths if _format_key(p) in _BAD_FORMATS]
        path = draw(st.sampled_from(candidates))
        value = draw(st.sampled_from(_BAD_FORMATS[_format_key(path)]))
        return Mutated(entity, _dump(_set(document, path, value)), kind, True)
    if kind == "unknown member":
        objects = [p for p, v in _walk(document) if isinstance(v, dict)]
        path = draw(st.sampled_from(objects))
        parent = document
        for part in path:
            parent = parent[part]
        name = draw(st.text(min_size=1, max_size=20).filter(lambda n: n not in parent))
        if path == () and name == "apiToken":
            name = "apiToken2"
        parent[name] = draw(_WRONG_VALUES)
        # A known member name of another model may be valid where it lands: the contract says.
        return Mutated(entity, _dump(document), kind, False)
    if kind == "deep nesting":
        path = draw(st.sampled_from(paths))
        depth = draw(st.sampled_from([300, 1000, 20000]))
        marker = "__deep_marker__"
        body = _dump(_set(document, path, marker)).replace(
            f'"{marker}"'.encode(), b"[" * depth + b"]" * depth
        )
        return Mutated(entity, body, kind, True)
    if kind == "huge string":
        path = draw(st.sampled_from(_string_leaves(document)))
        size = draw(st.sampled_from([10_000, 1_000_000]))
        return Mutated(entity, _dump(_set(document, path, "é" * (size // 2))), kind, False)
    if kind == "odd characters":
        path = draw(st.sampled_from(_string_leaves(document)))
        value = draw(_ODD_STRINGS)
        return Mutated(entity, _dump(_set(document, path, value)), kind, False)
    if kind == "non-object":
        value = draw(st.sampled_from([[], [document], "x", 1, None, True, 1.5]))
        return Mutated(entity, _dump(value), kind, True)
    if kind == "invalid utf-8":
        path = draw(st.sampled_from(_string_leaves(document)))
        marker = "__bytes_marker__"
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80"]))
        body = _dump(_set(document, path, marker)).replace(marker.encode(), bad)
        return Mutated(entity, body, kind, True)
    if kind == "duplicate member":
        objects = [(p, v) for p, v in _walk(document) if isinstance(v, dict) and v]
        path, obj = draw(st.sampled_from(objects))
        name = draw(st.sampled_from(sorted(obj)))
        marker = "__duplicate_marker__"
        obj[marker] = 0
        twin = json.dumps(name, ensure_ascii=False) + ": " + json.dumps(obj[name])
        body = _dump(_set(document, path, obj)).replace(f'"{marker}": 0'.encode(), twin.encode())
        return Mutated(entity, body, kind, True)
    if kind == "number literal":
        leaves = _number_leaves(document) or [("resource", "bedroomsNumber")]
        path = draw(st.sampled_from(leaves))
        literal = draw(st.sampled_from(_NUMBER_LITERALS))
        return Mutated(entity, _replace_literal(document, path, literal), kind, False)
    if kind == "non-finite number":
        floats = [path for path in _number_leaves(document) if isinstance(path[-1], str)]
        floats = [path for path in floats if path[-1] in _FLOAT_MEMBERS]
        path = draw(st.sampled_from(floats))
        literal = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"]))
        return Mutated(entity, _replace_literal(document, path, literal), kind, True)
    assert kind == "truncated"
    body = _dump(document)
    cut = draw(st.integers(min_value=0, max_value=len(body) - 1))
    return Mutated(entity, body[:cut], kind, True)


# -- the property ------------------------------------------------------------------------------


def _contract_verdict(entity: Entity, body: bytes) -> tuple[Any, ValidationError | None]:
    try:
        return validate_json_body(ENVELOPES[entity], body), None
    except ValidationError as error:
        return None, error


def _stored_resource(sandbox: SandboxHandle, entity: Entity, resource_id: str) -> dict[str, Any]:
    found = [r for r in sandbox.records(ACCOUNT, entity.value) if r["id"] == resource_id]
    assert len(found) == 1, f"expected one stored {entity} {resource_id!r}, found {len(found)}"
    return found[0]["resource"]


@FUZZ_SETTINGS
@given(case=mutated_envelopes())
def test_rejected_envelopes_get_400_naming_a_path_and_accepted_ones_are_stored_canonically(
    sandbox: SandboxHandle, case: Mutated
) -> None:
    sandbox.reset()
    envelope, error = _contract_verdict(case.entity, case.body)
    event(f"{case.kind}: {'rejected' if error else 'accepted'}")
    note(f"{case.entity} {case.kind}: {case.body[:2000]!r}")
    if case.must_be_rejected:
        assert error is not None, f"the contract accepted a {case.kind} mutation"

    response = sandbox.http.post(
        SYNC_PATHS[case.entity],
        content=case.body,
        headers={**AUTH, "Content-Type": "application/json"},
    )

    if error is not None:
        assert response.status_code == 400, (case.kind, response.status_code, response.text[:300])
        assert response.headers["content-type"].startswith("text/plain")
        assert response.text == describe_validation_error(error)
        path = response.text.split(": ", 1)[0]
        assert (
            path == "body"
            or path.split(".")[0] in ENVELOPES[case.entity].model_fields
            or ("unknown member" in response.text)
        ), response.text[:300]
        assert sandbox.count() == 0
        return
    expected_status = 200 if envelope.accountId == ACCOUNT else 403
    assert response.status_code == expected_status, (case.kind, response.text[:300])
    if expected_status == 200:
        stored = _stored_resource(sandbox, case.entity, envelope.resource.id)
        canonical = canonical_json(envelope.resource.to_json_dict())
        assert canonical_json(stored) == canonical
        assert stored == json.loads(canonical)


def test_the_example_resources_survive_the_round_trip_unchanged(
    clean_sandbox: SandboxHandle,
) -> None:
    body = payloads.envelope("accommodation", dict(EXAMPLE_ACCOMMODATION))
    response = clean_sandbox.http.post(SYNC_PATHS[Entity.ACCOMMODATION], json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    stored = _stored_resource(clean_sandbox, Entity.ACCOMMODATION, EXAMPLE_ACCOMMODATION["id"])
    assert stored == EXAMPLE_ACCOMMODATION
