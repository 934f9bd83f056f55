"""The Open API over real sockets: OAuth2, accounts, guest links, property status, webhooks."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from connector.contract import AccountsPage, GuestLinks, StoredWebhookConfig, TokenResponse
from connector.sandbox.testing import SandboxHandle
from tests.sandbox import payloads

TOKEN_PATH = "/openapi/v1/oauth2/token"
ACCOUNTS_PATH = "/api/openapi/v1/accounts"
LINKS_PATH = "/openapi/v1/reservations/links"
WEBHOOKS_PATH = "/api/openapi/v1/webhooks"
MULTI = ("multi-client", "multi-secret")
DEMO = ("demo-client", "demo-secret")


@pytest.fixture
def http(clean_sandbox: SandboxHandle) -> httpx.Client:
    return clean_sandbox.http


def _access_token(http: httpx.Client, credentials: tuple[str, str] = MULTI) -> str:
    client_id, secret = credentials
    response = http.post(
        TOKEN_PATH,
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def multi(http: httpx.Client) -> dict[str, str]:
    """Headers carrying an access token of the client that sees all three accounts."""
    return _bearer(_access_token(http, MULTI))


# -- OAuth2 ------------------------------------------------------------------------------------


def _basic(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {
            "data": {
                "grant_type": "client_credentials",
                "client_id": "demo-client",
                "client_secret": "demo-secret",
            }
        },
        {
            "json": {
                "grant_type": "client_credentials",
                "client_id": "demo-client",
                "client_secret": "demo-secret",
            }
        },
        {"data": {"grant_type": "client_credentials"}, "headers": _basic(*DEMO)},
    ],
    ids=["form", "json", "http-basic"],
)
def test_client_credentials_grant_issues_a_bearer_token_with_lifetime_in_seconds(
    http: httpx.Client, request_kwargs: dict[str, Any]
) -> None:
    response = http.post(TOKEN_PATH, **request_kwargs)

    assert response.status_code == 200
    token = TokenResponse.model_validate(response.json())
    assert token.token_type == "Bearer"
    assert token.expires_in == 3600
    assert http.get(ACCOUNTS_PATH, headers=_bearer(token.access_token)).status_code == 200


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {
            "data": {
                "grant_type": "client_credentials",
                "client_id": "demo-client",
                "client_secret": "wrong",
            }
        },
        {
            "data": {
                "grant_type": "client_credentials",
                "client_id": "nobody",
                "client_secret": "demo-secret",
            }
        },
        {"data": {"grant_type": "client_credentials"}},
        {"data": {"grant_type": "client_credentials"}, "headers": _basic("demo-client", "wrong")},
    ],
    ids=["wrong-secret", "unknown-client", "no-credentials", "wrong-basic-secret"],
)
def test_bad_client_credentials_are_refused_with_401(
    http: httpx.Client, request_kwargs: dict[str, Any]
) -> None:
    response = http.post(TOKEN_PATH, **request_kwargs)

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert "demo-secret" not in response.text


def test_another_grant_type_is_refused_with_400(http: httpx.Client) -> None:
    response = http.post(
        TOKEN_PATH,
        data={"grant_type": "password", "client_id": "demo-client", "client_secret": "demo-secret"},
    )

    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer not-issued"}, {"Authorization": "demo-token"}],
    ids=["missing", "unknown", "no-scheme"],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", ACCOUNTS_PATH),
        ("GET", LINKS_PATH + "?externalId=res-1"),
        ("PUT", "/properties/unit-1"),
        ("GET", WEBHOOKS_PATH),
        ("DELETE", WEBHOOKS_PATH + "/abc"),
    ],
)
def test_open_api_endpoints_refuse_a_missing_or_unknown_access_token(
    http: httpx.Client, headers: dict[str, str], method: str, path: str
) -> None:
    response = http.request(method, path, headers=headers, json={"status": "INACTIVE"})

    assert response.status_code == 401
    assert set(response.json()) == {"error", "message"}


def test_a_sync_token_is_not_an_access_token(http: httpx.Client) -> None:
    assert http.get(ACCOUNTS_PATH, headers=_bearer("demo-token")).status_code == 401


# -- accounts ----------------------------------------------------------------------------------


def test_accounts_lists_name_and_external_id_with_default_pagination(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    response = http.get(ACCOUNTS_PATH, headers=multi)

    assert response.status_code == 200
    page = AccountsPage.model_validate(response.json())
    assert [(a.name, a.externalId) for a in page.data] == [
        ("Demo Hotel", "demo"),
        ("Hotel A", "ext-a"),
        ("Hotel B", "ext-b"),
    ]
    assert all(set(item) == {"name", "externalId"} for item in response.json()["data"])
    assert response.json()["pagination"] == {
        "pageSize": 50,
        "total": 3,
        "pages": 1,
        "page": 1,
        "hasMore": False,
    }


def test_accounts_pages_through_with_page_and_page_size(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    first = http.get(ACCOUNTS_PATH, params={"page": 1, "pageSize": 2}, headers=multi).json()
    second = http.get(ACCOUNTS_PATH, params={"page": 2, "pageSize": 2}, headers=multi).json()

    assert [a["externalId"] for a in first["data"]] == ["demo", "ext-a"]
    assert first["pagination"] == {
        "pageSize": 2,
        "total": 3,
        "pages": 2,
        "page": 1,
        "hasMore": True,
    }
    assert [a["externalId"] for a in second["data"]] == ["ext-b"]
    assert second["pagination"]["hasMore"] is False


@pytest.mark.parametrize(
    "params",
    [{"pageSize": 51}, {"pageSize": 0}, {"pageSize": "ten"}, {"page": 0}, {"page": -1}],
    ids=["pageSize-51", "pageSize-0", "pageSize-not-a-number", "page-0", "page-negative"],
)
def test_accounts_refuses_an_out_of_range_page_or_page_size(
    http: httpx.Client, multi: dict[str, str], params: dict[str, Any]
) -> None:
    response = http.get(ACCOUNTS_PATH, params=params, headers=multi)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert next(iter(params)) in response.json()["message"]


def test_page_size_50_is_accepted(http: httpx.Client, multi: dict[str, str]) -> None:
    assert http.get(ACCOUNTS_PATH, params={"pageSize": 50}, headers=multi).status_code == 200


def test_external_id_lookup_adds_id_and_an_account_level_token(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    response = http.get(ACCOUNTS_PATH, params={"externalId": "ext-a"}, headers=multi)

    assert response.status_code == 200
    [account] = response.json()["data"]
    assert (account["name"], account["externalId"], account["id"]) == (
        "Hotel A",
        "ext-a",
        "hotel-a",
    )
    assert 0 < account["expires_in"] <= 3600
    assert response.json()["pagination"]["total"] == 1
    # The account-level token acts for that account alone: its own listing is empty (§4.3 rule 1).
    own = http.get(ACCOUNTS_PATH, headers=_bearer(account["token"]))
    assert own.status_code == 200
    assert own.json()["data"] == []


def test_external_id_lookup_reuses_the_valid_account_token(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    tokens = {
        http.get(ACCOUNTS_PATH, params={"externalId": "ext-b"}, headers=multi).json()["data"][0][
            "token"
        ]
        for _ in range(2)
    }

    assert len(tokens) == 1


def test_external_id_without_match_gives_an_empty_array(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    response = http.get(ACCOUNTS_PATH, params={"externalId": "nope"}, headers=multi)

    assert response.status_code == 200
    assert response.json()["data"] == []


def test_a_single_account_scope_lists_an_empty_array(http: httpx.Client) -> None:
    response = http.get(ACCOUNTS_PATH, headers=_bearer(_access_token(http, DEMO)))

    assert response.status_code == 200
    assert response.json()["data"] == []
    assert response.json()["pagination"]["total"] == 0


# -- guest links -------------------------------------------------------------------------------


def _store_reservation(
    sandbox: SandboxHandle, account_id: str = "demo", token: str = "demo-token"
) -> None:
    body = payloads.envelope("reservation", payloads.reservation("res-1"), account_id=account_id)
    response = sandbox.http.post(
        "/api/v1/hooks/reservation/connect",
        json=body,
        headers={"X-Wishbox-Auth-Token": token},
    )
    assert response.status_code == 200


def test_links_of_a_stored_reservation_are_deterministic(
    clean_sandbox: SandboxHandle, http: httpx.Client, multi: dict[str, str]
) -> None:
    _store_reservation(clean_sandbox)
    params = {"externalId": "res-1", "includeLastMessage": 1}

    first = http.get(LINKS_PATH, params=params, headers=multi)
    again = http.get(LINKS_PATH, params=params, headers=_bearer(_access_token(http, DEMO)))

    assert first.status_code == 200
    links = GuestLinks.model_validate(first.json())
    assert links.guestApp.startswith("https://")
    assert links.chatLastMessage is not None
    assert links.chatLastMessage.authorType == "admin"
    assert again.json() == first.json()


def test_links_leave_out_the_last_message_unless_asked(
    clean_sandbox: SandboxHandle, http: httpx.Client, multi: dict[str, str]
) -> None:
    _store_reservation(clean_sandbox)

    response = http.get(LINKS_PATH, params={"externalId": "res-1"}, headers=multi)

    assert set(response.json()) == {"guestApp", "chatLink", "onlineCheckInLink"}


def test_links_differ_between_reservations_of_two_accounts(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    _store_reservation(clean_sandbox, "demo", "demo-token")
    _store_reservation(clean_sandbox, "hotel-a", "hotel-a-token")
    demo = http.get(
        LINKS_PATH, params={"externalId": "res-1"}, headers=_bearer(_access_token(http, DEMO))
    )

    assert demo.status_code == 200
    assert "/demo/" in demo.json()["guestApp"]


def test_links_of_a_reservation_stored_in_two_scoped_accounts_are_ambiguous(
    clean_sandbox: SandboxHandle, http: httpx.Client, multi: dict[str, str]
) -> None:
    _store_reservation(clean_sandbox, "demo", "demo-token")
    _store_reservation(clean_sandbox, "hotel-a", "hotel-a-token")

    response = http.get(LINKS_PATH, params={"externalId": "res-1"}, headers=multi)

    assert response.status_code == 409


def test_links_of_an_unknown_reservation_are_404(http: httpx.Client, multi: dict[str, str]) -> None:
    response = http.get(LINKS_PATH, params={"externalId": "nope"}, headers=multi)

    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_links_need_the_external_id(http: httpx.Client, multi: dict[str, str]) -> None:
    assert http.get(LINKS_PATH, headers=multi).status_code == 400


# -- property status ---------------------------------------------------------------------------


def _store_units(sandbox: SandboxHandle, *units: dict[str, Any]) -> None:
    for unit in units:
        response = sandbox.http.post(
            "/api/v1/hooks/accommodation/connect",
            json=payloads.envelope("accommodation", unit),
            headers={"X-Wishbox-Auth-Token": "demo-token"},
        )
        assert response.status_code == 200


def test_deactivating_a_property_changes_its_stored_status(
    clean_sandbox: SandboxHandle, http: httpx.Client, multi: dict[str, str]
) -> None:
    _store_units(clean_sandbox, payloads.accommodation("unit-1"), payloads.accommodation("unit-2"))

    response = http.put("/properties/unit-1", json={"status": "INACTIVE"}, headers=multi)

    assert response.status_code == 200
    record = next(r for r in clean_sandbox.records("demo", "accommodation") if r["id"] == "unit-1")
    assert response.json() == {
        "id": record["serviceId"],
        "status": "INACTIVE",
        "updatedSubUnits": 0,
    }
    statuses = {r["id"]: r["resource"]["status"] for r in clean_sandbox.records("demo")}
    assert statuses == {"unit-1": "INACTIVE", "unit-2": "ACTIVE"}
    assert record["writes"] == 1


def test_a_property_is_found_by_its_service_id_too(
    clean_sandbox: SandboxHandle, http: httpx.Client, multi: dict[str, str]
) -> None:
    _store_units(clean_sandbox, payloads.accommodation("unit-1"))
    [record] = clean_sandbox.records("demo", "accommodation")

    response = http.put(
        f"/properties/{record['serviceId']}", json={"status": "INACTIVE"}, headers=multi
    )

    assert response.status_code == 200
    assert clean_sandbox.records("demo")[0]["resource"]["status"] == "INACTIVE"


def test_update_sub_units_applies_the_status_to_units_of_the_same_room_type(
    clean_sandbox: SandboxHandle, http: httpx.Client, multi: dict[str, str]
) -> None:
    _store_units(
        clean_sandbox,
        payloads.accommodation("unit-1"),
        payloads.accommodation("unit-2"),
        payloads.accommodation("unit-3", roomType={"id": "rt-suite"}),
    )

    response = http.put(
        "/properties/unit-1",
        params={"updateSubUnits": "true"},
        json={"status": "INACTIVE"},
        headers=multi,
    )

    assert response.json()["updatedSubUnits"] == 1
    statuses = {r["id"]: r["resource"]["status"] for r in clean_sandbox.records("demo")}
    assert statuses == {"unit-1": "INACTIVE", "unit-2": "INACTIVE", "unit-3": "ACTIVE"}


def test_a_sync_after_a_status_change_counts_as_an_update(
    clean_sandbox: SandboxHandle, http: httpx.Client, multi: dict[str, str]
) -> None:
    _store_units(clean_sandbox, payloads.accommodation("unit-1"))
    http.put("/properties/unit-1", json={"status": "INACTIVE"}, headers=multi)

    response = http.post(
        "/api/v1/hooks/accommodation/connect",
        json=payloads.envelope("accommodation", payloads.accommodation("unit-1")),
        headers={"X-Wishbox-Auth-Token": "demo-token"},
    )

    assert response.json()["savedProperties"] == 1
    assert clean_sandbox.records("demo")[0]["resource"]["status"] == "ACTIVE"


@pytest.mark.parametrize(
    ("body", "params"),
    [
        ({"status": "PAUSED"}, {}),
        ({"status": "INACTIVE", "reason": "x"}, {}),
        ({}, {}),
        ({"status": "INACTIVE"}, {"updateSubUnits": "maybe"}),
    ],
    ids=["bad-status", "unknown-member", "no-status", "bad-flag"],
)
def test_a_bad_property_update_is_refused_with_400(
    clean_sandbox: SandboxHandle,
    http: httpx.Client,
    multi: dict[str, str],
    body: dict[str, Any],
    params: dict[str, str],
) -> None:
    _store_units(clean_sandbox, payloads.accommodation("unit-1"))

    response = http.put("/properties/unit-1", params=params, json=body, headers=multi)

    assert response.status_code == 400
    assert clean_sandbox.records("demo")[0]["resource"]["status"] == "ACTIVE"


def test_an_unknown_property_is_404(http: httpx.Client, multi: dict[str, str]) -> None:
    response = http.put("/properties/nope", json={"status": "INACTIVE"}, headers=multi)

    assert response.status_code == 404


def test_a_property_outside_the_token_scope_is_404(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    body = payloads.envelope(
        "accommodation", payloads.accommodation("unit-9"), account_id="hotel-a"
    )
    clean_sandbox.http.post(
        "/api/v1/hooks/accommodation/connect",
        json=body,
        headers={"X-Wishbox-Auth-Token": "hotel-a-token"},
    )

    response = http.put(
        "/properties/unit-9",
        json={"status": "INACTIVE"},
        headers=_bearer(_access_token(http, DEMO)),
    )

    assert response.status_code == 404


# -- outgoing-webhook configurations -----------------------------------------------------------

WEBHOOK = {
    "name": "new bookings",
    "event": "reservationCreated",
    "url": "https://example.com/hook",
    "conditions": [{"filterType": 2, "op": "=", "value": "CONFIRMED"}],
    "headers": [{"key": "X-Check", "value": "abc"}],
}


def test_webhook_configurations_can_be_created_read_listed_updated_and_deleted(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    created = http.post(WEBHOOKS_PATH, json=WEBHOOK, headers=multi)
    assert created.status_code == 201
    stored = StoredWebhookConfig.model_validate_json(created.text)
    assert created.json()["isEnabled"] is True
    item_path = f"{WEBHOOKS_PATH}/{stored.id}"

    assert http.get(item_path, headers=multi).json() == created.json()
    assert http.get(WEBHOOKS_PATH, headers=multi).json() == {"data": [created.json()]}

    changed = {**WEBHOOK, "event": "guestLinkOpenedCheckIn", "isEnabled": False}
    updated = http.put(item_path, json=changed, headers=multi)
    assert updated.status_code == 200
    assert updated.json()["_id"] == stored.id
    assert updated.json()["event"] == "guestLinkOpenedCheckIn"
    assert http.get(item_path, headers=multi).json()["isEnabled"] is False

    deleted = http.delete(item_path, headers=multi)
    assert deleted.status_code == 204
    assert http.get(item_path, headers=multi).status_code == 404
    assert http.get(WEBHOOKS_PATH, headers=multi).json() == {"data": []}


@pytest.mark.parametrize(
    "body",
    [
        {**WEBHOOK, "event": "guestLinkOpened"},
        {**WEBHOOK, "event": "reservationUpdated"},
        {key: value for key, value in WEBHOOK.items() if key != "name"},
        {key: value for key, value in WEBHOOK.items() if key != "event"},
        {key: value for key, value in WEBHOOK.items() if key != "url"},
        {**WEBHOOK, "url": "ftp://example.com"},
        {**WEBHOOK, "conditions": [{"filterType": 2, "op": "like", "value": "x"}]},
        {**WEBHOOK, "secret": "x"},
    ],
    ids=[
        "renamed-event",
        "unknown-event",
        "no-name",
        "no-event",
        "no-url",
        "not-http-url",
        "bad-operator",
        "unknown-member",
    ],
)
def test_a_bad_webhook_configuration_is_refused_with_400(
    http: httpx.Client, multi: dict[str, str], body: dict[str, Any]
) -> None:
    response = http.post(WEBHOOKS_PATH, json=body, headers=multi)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert http.get(WEBHOOKS_PATH, headers=multi).json()["data"] == []


def test_a_bad_event_name_is_answered_with_the_known_names(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    response = http.post(WEBHOOKS_PATH, json={**WEBHOOK, "event": "guestLinkOpened"}, headers=multi)

    assert "guestLinkOpenedGuestApp" in response.json()["message"]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_an_unknown_webhook_id_is_404(
    http: httpx.Client, multi: dict[str, str], method: str
) -> None:
    response = http.request(
        method, f"{WEBHOOKS_PATH}/0123456789abcdef01234567", json=WEBHOOK, headers=multi
    )

    assert response.status_code == 404


def test_webhook_configurations_of_one_account_are_not_seen_by_another(
    http: httpx.Client, multi: dict[str, str]
) -> None:
    http.post(WEBHOOKS_PATH, json=WEBHOOK, headers=multi)

    demo_view = http.get(WEBHOOKS_PATH, headers=_bearer(_access_token(http, DEMO)))

    assert demo_view.json() == {"data": []}
