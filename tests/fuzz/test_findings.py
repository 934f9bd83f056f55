"""Regression tests for what the fuzzing of the sandbox and the contract found: one test per
finding, each a plain request over a real socket (see docs/decisions.md, "Input the
fuzzing settled")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from connector.contract import (
    Accommodation,
    ReservationEnvelope,
    UnitReservation,
    validate_json_body,
)
from connector.contract.openapi import build_openapi
from connector.sandbox.config import DEMO_SYNC_TOKEN
from connector.sandbox.testing import MULTI_CLIENT_ID, MULTI_CLIENT_SECRET, SandboxHandle
from tests.sandbox import payloads

ACCOMMODATION_PATH = "/api/v1/hooks/accommodation/connect"
AUTH = {"X-Wishbox-Auth-Token": DEMO_SYNC_TOKEN, "Content-Type": "application/json"}


def _accommodation_body(**changes: Any) -> str:
    return json.dumps(payloads.envelope("accommodation", payloads.accommodation(**changes)))


def _bearer(sandbox: SandboxHandle) -> dict[str, str]:
    response = sandbox.http.post(
        "/openapi/v1/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": MULTI_CLIENT_ID,
            "client_secret": MULTI_CLIENT_SECRET,
        },
    )
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


@pytest.mark.parametrize("spelling", ["2.0", "2e0", "0.2E1"])
def test_a_whole_number_in_any_spelling_is_an_integer_and_stored_as_one(
    clean_sandbox: SandboxHandle, spelling: str
) -> None:
    body = _accommodation_body(bedroomsNumber=7).replace(
        '"bedroomsNumber": 7', f'"bedroomsNumber": {spelling}'
    )
    response = clean_sandbox.http.post(ACCOMMODATION_PATH, content=body, headers=AUTH)
    assert response.status_code == 200, response.text
    stored = clean_sandbox.records("demo", "accommodation")[0]["resource"]
    assert stored["bedroomsNumber"] == 2
    assert isinstance(stored["bedroomsNumber"], int)


def test_a_fractional_guest_count_is_still_refused(clean_sandbox: SandboxHandle) -> None:
    body = _accommodation_body(bedroomsNumber=7).replace(
        '"bedroomsNumber": 7', '"bedroomsNumber": 2.5'
    )
    response = clean_sandbox.http.post(ACCOMMODATION_PATH, content=body, headers=AUTH)
    assert response.status_code == 400
    assert response.text.startswith("resource.bedroomsNumber: ")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_nan_and_infinite_numbers_are_refused_not_stored(
    clean_sandbox: SandboxHandle, literal: str
) -> None:
    body = _accommodation_body(coordinates={"lat": 1}, bedTypes=[{"bedType": 1, "amount": 1}])
    body = body.replace('"lat": 1', f'"lat": {literal}')
    response = clean_sandbox.http.post(ACCOMMODATION_PATH, content=body, headers=AUTH)
    assert response.status_code == 400
    assert response.text.startswith("resource.coordinates.lat: ")
    assert clean_sandbox.count() == 0


def test_a_nan_price_of_a_reservation_is_refused(clean_sandbox: SandboxHandle) -> None:
    body = json.dumps(payloads.envelope("reservation", payloads.reservation())).replace(
        '"price": 320.5', '"price": NaN', 1
    )
    response = clean_sandbox.http.post(
        "/api/v1/hooks/reservation/connect", content=body, headers=AUTH
    )
    assert response.status_code == 400
    assert response.text.startswith("resource.unitReservations.0.price: ")


def test_a_member_sent_twice_is_refused_naming_its_path(clean_sandbox: SandboxHandle) -> None:
    body = _accommodation_body(doorCode="1111").replace(
        '"doorCode": "1111"', '"doorCode": "1111", "doorCode": "2222"'
    )
    response = clean_sandbox.http.post(ACCOMMODATION_PATH, content=body, headers=AUTH)
    assert response.status_code == 400
    assert response.text == "resource.doorCode: member appears more than once in its object"
    assert clean_sandbox.count() == 0


def test_a_deeply_nested_body_without_a_token_header_is_a_401_not_a_500(
    clean_sandbox: SandboxHandle,
) -> None:
    body = '{"apiToken": "demo-token", "x": ' + "[" * 50_000 + "]" * 50_000 + "}"
    response = clean_sandbox.http.post(
        ACCOMMODATION_PATH, content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 401


def test_a_deeply_nested_json_token_request_is_a_400_not_a_500(
    clean_sandbox: SandboxHandle,
) -> None:
    response = clean_sandbox.http.post(
        "/openapi/v1/oauth2/token",
        content="[" * 50_000 + "]" * 50_000,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/openapi/v1/accounts", {"pagesize": "10"}),
        ("/api/openapi/v1/webhooks", {"": "null"}),
        ("/openapi/v1/reservations/links", {"externalId": "r", "lastMessage": "1"}),
    ],
)
def test_an_unknown_query_parameter_of_the_open_api_is_a_400_naming_it(
    clean_sandbox: SandboxHandle, path: str, params: dict[str, str]
) -> None:
    response = clean_sandbox.http.get(path, params=params, headers=_bearer(clean_sandbox))
    assert response.status_code == 400
    assert response.json()["message"].startswith("query: unknown parameter(s)")


def test_an_unknown_query_parameter_of_a_sync_webhook_is_a_plain_400(
    clean_sandbox: SandboxHandle,
) -> None:
    response = clean_sandbox.http.post(
        ACCOMMODATION_PATH, params={"dryRun": "1"}, content=_accommodation_body(), headers=AUTH
    )
    assert response.status_code == 400
    assert response.text.startswith("query: unknown parameter(s) ['dryRun']")
    assert clean_sandbox.count() == 0


@pytest.mark.parametrize("value", ["", "+2", " 2", "2_0", "\u0662"])
def test_a_page_that_is_not_plain_ascii_digits_is_a_400(
    clean_sandbox: SandboxHandle, value: str
) -> None:
    response = clean_sandbox.http.get(
        "/api/openapi/v1/accounts", params={"page": value}, headers=_bearer(clean_sandbox)
    )
    assert response.status_code == 400
    assert response.json()["message"].startswith("page: ")


def test_the_webhook_list_has_the_shape_the_document_gives_it(
    clean_sandbox: SandboxHandle,
) -> None:
    response = clean_sandbox.http.get("/api/openapi/v1/webhooks", headers=_bearer(clean_sandbox))
    operation = build_openapi()["paths"]["/api/openapi/v1/webhooks"]["get"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/WebhookConfigList"}
    assert response.json() == {"data": []}


@pytest.mark.parametrize("value", ["15:00\n", "1\u0665:00", "\uff11\uff15:00"])
def test_a_time_with_a_trailing_newline_or_non_ascii_digits_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="minimumCheckInTime"):
        Accommodation.model_validate({**payloads.accommodation(), "minimumCheckInTime": value})


@pytest.mark.parametrize("value", ["\ufeff", "\u3000", " \t"])
def test_a_string_of_ecma_whitespace_is_blank(value: str) -> None:
    with pytest.raises(ValidationError, match="name"):
        Accommodation.model_validate({**payloads.accommodation(), "name": value})


@pytest.mark.parametrize("value", ["\x1c", "\x85"])
def test_a_control_character_that_ecma_does_not_call_whitespace_is_not_blank(value: str) -> None:
    Accommodation.model_validate({**payloads.accommodation(), "name": value})


def test_the_document_lists_exactly_the_country_codes_the_contract_accepts() -> None:
    schemas = build_openapi()["components"]["schemas"]
    listed = schemas["Accommodation"]["properties"]["country"]["enum"]
    for code in listed:
        Accommodation.model_validate({**payloads.accommodation(), "country": code})
    with pytest.raises(ValidationError):
        Accommodation.model_validate({**payloads.accommodation(), "country": "ZZ"})
    assert "ZZ" not in listed


def test_the_document_keeps_the_time_patterns_and_integer_bounds() -> None:
    schemas = build_openapi()["components"]["schemas"]
    minimum_check_in = schemas["Accommodation"]["properties"]["minimumCheckInTime"]["anyOf"][0]
    assert minimum_check_in["pattern"] == "^([01][0-9]|2[0-3]):[0-5][0-9]$"
    children = schemas["UnitReservation"]["properties"]["children"]["anyOf"][0]
    assert children == {"minimum": 0, "type": "integer"}
    assert "checkout" in (UnitReservation.__doc__ or "")


def test_a_400_quoting_a_megabyte_value_is_cut_short(clean_sandbox: SandboxHandle) -> None:
    body = _accommodation_body(country="X" * 1_000_000)
    response = clean_sandbox.http.post(ACCOMMODATION_PATH, content=body, headers=AUTH)
    assert response.status_code == 400
    assert response.text.startswith("resource.country: expected a two-letter ISO 3166-1")
    assert len(response.text) < 1_000
    assert response.text.endswith(" characters)")


def test_a_blank_required_string_is_reported_as_blank(clean_sandbox: SandboxHandle) -> None:
    response = clean_sandbox.http.post(
        ACCOMMODATION_PATH, content=_accommodation_body(name="\u3000"), headers=AUTH
    )
    assert response.status_code == 400
    assert response.text == (
        "resource.name: string should match pattern of a non-blank value: got only whitespace"
    )


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        (
            "GET",
            "/openapi/v1/reservations/links",
            {"externalId": "r", "includeLastMessage": "true"},
        ),
        ("GET", "/openapi/v1/reservations/links", {"externalId": "r", "includeLastMessage": "yes"}),
        ("PUT", "/properties/unit-1", {"updateSubUnits": "1"}),
        ("PUT", "/properties/unit-1", {"updateSubUnits": "TRUE"}),
    ],
)
def test_a_flag_takes_only_the_values_the_document_gives_it(
    clean_sandbox: SandboxHandle, method: str, path: str, params: dict[str, str]
) -> None:
    response = clean_sandbox.http.request(
        method, path, params=params, json={"status": "ACTIVE"}, headers=_bearer(clean_sandbox)
    )
    assert response.status_code == 400
    assert response.json()["message"].startswith(next(iter(params.keys() - {"externalId"})))


def test_validate_json_body_names_a_duplicate_inside_a_list_item() -> None:
    body = json.dumps(payloads.envelope("reservation", payloads.reservation())).replace(
        '"adults": 2', '"adults": 2, "adults": 3', 2
    )
    with pytest.raises(ValidationError) as raised:
        validate_json_body(ReservationEnvelope, body)
    [problem] = raised.value.errors()
    assert problem["type"] == "duplicate_member"
    assert problem["loc"] == ("resource", "unitReservations", 0, "adults")


def test_validate_json_body_accepts_what_the_model_accepts_without_duplicates() -> None:
    document = payloads.envelope("reservation", payloads.reservation())
    validated = validate_json_body(ReservationEnvelope, json.dumps(document))
    assert validated == ReservationEnvelope.model_validate_json(json.dumps(document))


@pytest.mark.parametrize(
    "credentials",
    ["Basic é", "Basic !!!", "Basic", "Basic " + "//79", "Basic " + "Og==", "basic Og=="],
)
def test_a_malformed_basic_header_at_the_token_endpoint_is_a_401_not_a_500(
    clean_sandbox: SandboxHandle, credentials: str
) -> None:
    response = clean_sandbox.http.post(
        "/openapi/v1/oauth2/token",
        content="grant_type=client_credentials",
        headers={
            "Authorization": credentials.encode("latin-1"),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


_HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=40
)


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(scheme=st.sampled_from(["Basic", "basic", "BASIC", "Bearer"]), credentials=_HEADER_TEXT)
def test_no_authorization_header_makes_the_token_endpoint_answer_500(
    sandbox: SandboxHandle, scheme: str, credentials: str
) -> None:
    response = sandbox.http.post(
        "/openapi/v1/oauth2/token",
        content="grant_type=client_credentials",
        headers={
            "Authorization": f"{scheme} {credentials}".strip().encode("latin-1"),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert response.status_code in (400, 401)
