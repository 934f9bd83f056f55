"""x-request-id, fault injection and the admin API, over real sockets."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from connector.sandbox.testing import SandboxHandle
from tests.sandbox import payloads

SYNC = "/api/v1/hooks/reservation/connect"
UNITS = "/api/v1/hooks/accommodation/connect"
ACCOUNTS = "/api/openapi/v1/accounts"
DEMO_TOKEN = {"X-Wishbox-Auth-Token": "demo-token"}


@pytest.fixture
def http(clean_sandbox: SandboxHandle) -> httpx.Client:
    return clean_sandbox.http


def _reservation(reservation_id: str = "res-1") -> dict[str, Any]:
    return payloads.envelope("reservation", payloads.reservation(reservation_id))


def _access_headers(http: httpx.Client) -> dict[str, str]:
    response = http.post(
        "/openapi/v1/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "multi-client",
            "client_secret": "multi-secret",
        },
    )
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


# -- x-request-id ------------------------------------------------------------------------------

REQUESTS_OF_EVERY_KIND: list[tuple[str, str, dict[str, Any], dict[str, Any], int]] = [
    ("sync 200", "POST", SYNC, {"json": _reservation(), "headers": DEMO_TOKEN}, 200),
    ("sync 400", "POST", SYNC, {"content": b"{", "headers": DEMO_TOKEN}, 400),
    ("sync 401", "POST", SYNC, {"json": _reservation()}, 401),
    (
        "sync 403",
        "POST",
        SYNC,
        {"json": {**_reservation(), "accountId": "hotel-b"}, "headers": DEMO_TOKEN},
        403,
    ),
    ("sync 405", "GET", SYNC, {}, 405),
    (
        "oauth 401",
        "POST",
        "/openapi/v1/oauth2/token",
        {"data": {"grant_type": "client_credentials", "client_id": "x", "client_secret": "y"}},
        401,
    ),
    ("accounts 401", "GET", ACCOUNTS, {}, 401),
    ("unknown path 404", "GET", "/nothing/here", {}, 404),
    ("admin health", "GET", "/_sandbox/health", {}, 200),
    ("admin stats", "GET", "/_sandbox/stats", {}, 200),
    ("admin records 400", "GET", "/_sandbox/records?entity=guest", {}, 400),
]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [case[1:] for case in REQUESTS_OF_EVERY_KIND],
    ids=[case[0] for case in REQUESTS_OF_EVERY_KIND],
)
def test_every_response_carries_a_fresh_request_id(
    http: httpx.Client, method: str, path: str, kwargs: dict[str, Any], status: int
) -> None:
    first = http.request(method, path, **kwargs)
    second = http.request(method, path, **kwargs)

    assert first.status_code == status
    ids = [first.headers.get("x-request-id"), second.headers.get("x-request-id")]
    assert all(request_id and len(request_id) == 32 for request_id in ids)
    assert ids[0] != ids[1]


def test_a_client_request_id_is_not_echoed(http: httpx.Client) -> None:
    response = http.get("/_sandbox/health", headers={"x-request-id": "mine"})

    assert response.headers["x-request-id"] != "mine"


@pytest.mark.parametrize("status", [500, 429, 503])
def test_injected_faults_carry_a_request_id(
    clean_sandbox: SandboxHandle, http: httpx.Client, status: int
) -> None:
    clean_sandbox.set_faults(fail_next=1, fail_next_status=status)

    response = http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)

    assert response.status_code == status
    assert len(response.headers["x-request-id"]) == 32


def test_open_api_successes_carry_a_request_id(http: httpx.Client) -> None:
    headers = _access_headers(http)
    created = http.post(
        "/api/openapi/v1/webhooks",
        json={"name": "n", "event": "orderDenied", "url": "https://example.com"},
        headers=headers,
    )
    deleted = http.delete(f"/api/openapi/v1/webhooks/{created.json()['_id']}", headers=headers)

    assert created.headers["x-request-id"]
    assert deleted.status_code == 204
    assert deleted.headers["x-request-id"]


# -- fault injection ---------------------------------------------------------------------------


def test_an_injected_500_stores_nothing(clean_sandbox: SandboxHandle, http: httpx.Client) -> None:
    clean_sandbox.set_faults(error_rate=1.0)

    response = http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)

    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/plain")
    assert clean_sandbox.records() == []


def test_an_injected_500_on_the_open_api_is_a_json_error(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    headers = _access_headers(http)
    clean_sandbox.set_faults(error_rate=1.0)

    response = http.get(ACCOUNTS, headers=headers)

    assert response.status_code == 500
    assert response.json()["error"] == "internal_error"


def test_an_injected_429_carries_retry_after(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    clean_sandbox.set_faults(rate_limit_rate=1.0, retry_after_s=3)

    response = http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)

    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert clean_sandbox.records() == []


def test_fail_next_fails_exactly_the_next_requests(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    clean_sandbox.set_faults(fail_next=2)

    statuses = [
        http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN).status_code for _ in range(3)
    ]

    assert statuses == [500, 500, 200]
    [record] = clean_sandbox.records()
    assert record["writes"] == 1


def test_latency_delays_every_request(clean_sandbox: SandboxHandle, http: httpx.Client) -> None:
    clean_sandbox.set_faults(latency_ms=150)

    started = time.perf_counter()
    response = http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)
    elapsed = time.perf_counter() - started

    assert response.status_code == 200
    assert elapsed >= 0.15


def test_a_timeout_fault_hangs_until_the_client_gives_up(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    clean_sandbox.set_faults(timeout_rate=1.0, timeout_s=30)

    with pytest.raises(httpx.ReadTimeout):
        http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN, timeout=0.3)

    clean_sandbox.set_faults()
    assert http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN).status_code == 200
    assert clean_sandbox.records()[0]["writes"] == 1
    deadline = time.monotonic() + 2
    while (
        "499" not in clean_sandbox.stats()["requests"][f"POST {SYNC}"]
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    assert clean_sandbox.stats()["requests"][f"POST {SYNC}"]["499"] == 1


def test_a_timeout_fault_answers_504_after_timeout_s(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    clean_sandbox.set_faults(timeout_rate=1.0, timeout_s=0.2)

    response = http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)

    assert response.status_code == 504
    assert clean_sandbox.records() == []


def test_faults_never_touch_the_admin_api(clean_sandbox: SandboxHandle) -> None:
    clean_sandbox.set_faults(error_rate=1.0, latency_ms=0)

    assert clean_sandbox.records() == []
    assert clean_sandbox.health()["status"] == "ok"


def test_empty_faults_clear_them(clean_sandbox: SandboxHandle, http: httpx.Client) -> None:
    clean_sandbox.set_faults(error_rate=1.0)
    clean_sandbox.set_faults()

    assert http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN).status_code == 200


def test_seeded_faults_repeat_exactly(clean_sandbox: SandboxHandle, http: httpx.Client) -> None:
    def statuses() -> list[int]:
        clean_sandbox.set_faults(error_rate=0.3, rate_limit_rate=0.2, seed=7)
        return [
            http.post(SYNC, json=_reservation(f"r{i}"), headers=DEMO_TOKEN).status_code
            for i in range(30)
        ]

    first, second = statuses(), statuses()

    assert first == second
    assert {200, 429, 500} <= set(first)


@pytest.mark.parametrize(
    "faults",
    [
        {"error_rate": 2},
        {"error_rate": 0.6, "rate_limit_rate": 0.6},
        {"fail_next": -1},
        {"explode": True},
    ],
    ids=["rate-above-1", "rates-sum-above-1", "negative-fail-next", "unknown-member"],
)
def test_invalid_fault_settings_are_refused(http: httpx.Client, faults: dict[str, Any]) -> None:
    response = http.post("/_sandbox/faults", json=faults)

    assert response.status_code == 400
    assert http.get("/_sandbox/faults").json()["faults"]["error_rate"] == 0


# -- admin API ---------------------------------------------------------------------------------


def test_stats_count_requests_per_endpoint_and_status(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)
    http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)
    http.post(SYNC, json=_reservation())
    clean_sandbox.set_faults(fail_next=1)
    http.post(
        UNITS, json=payloads.envelope("accommodation", payloads.accommodation()), headers=DEMO_TOKEN
    )
    http.put("/properties/x", json={})
    clean_sandbox.records()

    stats = clean_sandbox.stats()

    assert stats == {
        "requests": {
            f"POST {UNITS}": {"500": 1},
            f"POST {SYNC}": {"200": 2, "401": 1},
            "PUT /properties/{id}": {"401": 1},
        },
        "total": 5,
        "injected": {"error": 1},
        "in_flight": 0,
    }


def test_reset_forgets_records_stats_and_faults_but_keeps_credentials(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    headers = _access_headers(http)
    http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)
    clean_sandbox.set_faults(error_rate=1.0)

    clean_sandbox.reset()

    assert clean_sandbox.records() == []
    assert clean_sandbox.stats() == {"requests": {}, "total": 0, "injected": {}, "in_flight": 0}
    assert http.get(ACCOUNTS, headers=headers).status_code == 200
    assert http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN).status_code == 200


def test_records_filter_by_account_and_entity(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)
    http.post(
        UNITS, json=payloads.envelope("accommodation", payloads.accommodation()), headers=DEMO_TOKEN
    )

    assert [r["entity"] for r in clean_sandbox.records("demo")] == ["reservation", "accommodation"]
    assert [r["entity"] for r in clean_sandbox.records("demo", "accommodation")] == [
        "accommodation"
    ]
    assert clean_sandbox.records("hotel-a") == []


def test_records_can_be_counted_and_paged(clean_sandbox: SandboxHandle, http: httpx.Client) -> None:
    for reservation_id in ("r1", "r2", "r3"):
        http.post(SYNC, json=_reservation(reservation_id), headers=DEMO_TOKEN)

    assert clean_sandbox.count("demo", "reservation") == 3
    assert clean_sandbox.count("hotel-a") == 0
    assert [r["id"] for r in clean_sandbox.records(limit=2)] == ["r1", "r2"]
    assert [r["id"] for r in clean_sandbox.records(limit=2, offset=2)] == ["r3"]
    assert http.get("/_sandbox/records", params={"limit": "-1"}).status_code == 400


def test_records_carry_their_bookkeeping(clean_sandbox: SandboxHandle, http: httpx.Client) -> None:
    http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)

    [record] = clean_sandbox.records("demo", "reservation")

    assert set(record) == {
        "accountId", "entity", "id", "serviceId", "resource", "firstSeq", "lastSeq",
        "writes", "lastEvent", "createdAt", "updatedAt", "propertyStatus",
    }  # fmt: skip
    assert record["resource"]["unitReservations"][0]["id"] == "u1"


def test_health_names_accounts_and_record_counts(
    clean_sandbox: SandboxHandle, http: httpx.Client
) -> None:
    http.post(SYNC, json=_reservation(), headers=DEMO_TOKEN)

    health = clean_sandbox.health()

    assert health == {
        "status": "ok",
        "accounts": ["demo", "hotel-a", "hotel-b"],
        "records": {"reservation": 1},
        "inactiveProperties": [],
    }
