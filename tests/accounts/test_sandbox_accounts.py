"""The sandbox's accounts of a multi-account client: account tokens that write and expire,
properties deactivated with their units, and many accounts seeded from the command line."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from connector.sandbox.config import GeneratedAccounts, SandboxConfig
from connector.sandbox.testing import (
    MANY_CLIENT_ID,
    MANY_CLIENT_SECRET,
    SandboxHandle,
    sandbox_process,
)
from tests.accounts.chain import SHORT_CLIENT_ID, SHORT_CLIENT_SECRET, SHORT_LIFETIME_S
from tests.sandbox.payloads import accommodation, envelope

ACCOUNTS = "/api/openapi/v1/accounts"
UNITS = "/api/v1/hooks/accommodation/connect"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client_token(http: httpx.Client, client_id: str, secret: str) -> str:
    response = http.post(
        "/openapi/v1/oauth2/token",
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )
    return str(response.json()["access_token"])


def account_token(http: httpx.Client, client: str, external_id: str) -> str:
    [found] = http.get(ACCOUNTS, params={"externalId": external_id}, headers=bearer(client)).json()[
        "data"
    ]
    return str(found["token"])


def write_unit(http: httpx.Client, token: str, account_id: str, unit_id: str) -> httpx.Response:
    body = envelope("accommodation", accommodation(unit_id), account_id)
    return http.post(UNITS, json=body, headers=bearer(token))


def test_an_account_token_from_the_lookup_writes_to_its_own_account_only(
    chain: SandboxHandle,
) -> None:
    client = client_token(chain.http, MANY_CLIENT_ID, MANY_CLIENT_SECRET)
    token = account_token(chain.http, client, "HOTEL-001")

    own = write_unit(chain.http, token, "acc-001", "U1")
    other = write_unit(chain.http, token, "acc-002", "U1")
    with_client_token = write_unit(chain.http, client, "acc-001", "U2")

    assert (own.status_code, other.status_code, with_client_token.status_code) == (200, 403, 401)
    assert [r["accountId"] for r in chain.records()] == ["acc-001"]


@pytest.mark.slow
def test_a_lookup_in_the_second_half_of_a_token_hands_out_a_new_one(
    chain: SandboxHandle,
) -> None:
    client = client_token(chain.http, SHORT_CLIENT_ID, SHORT_CLIENT_SECRET)
    first = account_token(chain.http, client, "HOTEL-002")
    again = account_token(chain.http, client, "HOTEL-002")
    time.sleep(SHORT_LIFETIME_S / 2 + 0.1)

    renewed = account_token(chain.http, client, "HOTEL-002")

    assert again == first  # reused in its first half: lookups do not pile up tokens
    assert renewed != first
    assert write_unit(chain.http, first, "acc-002", "U1").status_code == 200  # still valid


@pytest.mark.slow
def test_an_account_token_is_refused_with_401_once_it_expired(chain: SandboxHandle) -> None:
    client = client_token(chain.http, SHORT_CLIENT_ID, SHORT_CLIENT_SECRET)
    token = account_token(chain.http, client, "HOTEL-003")
    time.sleep(SHORT_LIFETIME_S + 0.1)

    response = write_unit(chain.http, token, "acc-003", "U1")

    assert response.status_code == 401
    assert "expired" in response.text
    assert chain.count() == 0


def test_deactivating_an_account_property_deactivates_every_unit_of_it(
    chain: SandboxHandle,
) -> None:
    client = client_token(chain.http, MANY_CLIENT_ID, MANY_CLIENT_SECRET)
    token = account_token(chain.http, client, "HOTEL-004")
    for unit_id in ("U1", "U2"):
        write_unit(chain.http, token, "acc-004", unit_id)

    response = chain.http.put(
        "/properties/acc-004",
        params={"updateSubUnits": "true"},
        json={"status": "INACTIVE"},
        headers=bearer(client),
    )

    assert response.json() == {"id": "acc-004", "status": "INACTIVE", "updatedSubUnits": 2}
    assert chain.health()["inactiveProperties"] == ["acc-004"]
    assert {(r["resource"]["status"], r["propertyStatus"]) for r in chain.records("acc-004")} == {
        ("INACTIVE", "INACTIVE")
    }


def test_a_property_outside_the_token_scope_is_not_found(chain: SandboxHandle) -> None:
    client = client_token(chain.http, SHORT_CLIENT_ID, SHORT_CLIENT_SECRET)

    response = chain.http.put(
        "/properties/acc-050", json={"status": "INACTIVE"}, headers=bearer(client)
    )

    assert response.status_code == 404
    assert chain.health()["inactiveProperties"] == []


def test_a_config_file_can_generate_many_accounts(tmp_path: Path) -> None:
    config = SandboxConfig.model_validate(
        {
            "accounts": [{"id": "demo", "name": "Demo"}],
            "generated_accounts": {"count": 75, "external_id_prefix": "H", "token_lifetime_s": 9},
        }
    )

    assert len(config.accounts) == 76
    assert config.accounts[-1].externalId == "H-075"
    [client] = config.clients
    assert (client.client_id, len(client.accounts), client.token_lifetime_s) == (
        "many-client",
        75,
        9,
    )
    assert GeneratedAccounts(count=1000).accounts()[0].id == "acc-0001"


@pytest.mark.slow
def test_the_sandbox_command_seeds_many_accounts_with_short_lived_tokens(tmp_path: Path) -> None:
    arguments = ("--many-accounts", "120", "--token-lifetime", "60")

    with sandbox_process(tmp_path / "sandbox", extra_args=arguments) as service:
        client = client_token(service.http, MANY_CLIENT_ID, MANY_CLIENT_SECRET)
        listed = service.http.get(ACCOUNTS, params={"page": 3}, headers=bearer(client)).json()
        [found] = service.http.get(
            ACCOUNTS, params={"externalId": "HOTEL-120"}, headers=bearer(client)
        ).json()["data"]
        banner = service.log()

    assert listed["pagination"] == {
        "pageSize": 50,
        "total": 120,  # the generated accounts: the demo client keeps its own two
        "pages": 3,
        "page": 3,
        "hasMore": False,
    }
    assert (found["id"], found["expires_in"]) == ("acc-120", 60)
    assert "accounts acc-001 … acc-120 (120) (tokens 60 s)" in banner
