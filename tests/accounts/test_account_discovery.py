"""A connection of many hotels finds its accounts and their tokens through the Open API."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.sandbox.rate_limits import RateLimit
from connector.sandbox.testing import (
    MANY_CLIENT_ID,
    SandboxHandle,
    many_accounts_config,
    running_sandbox,
)
from connector.snapshot import Snapshot
from tests.accounts.chain import (
    ChainExport,
    account,
    document,
    hotel,
    pms_sync,
    unit,
)

HUNDRED = [unit(hotel(n), k) for n in range(1, 101) for k in (1, 2)]


def test_accounts_lists_the_120_accounts_of_the_client_from_3_pages(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    result = pms_sync(chain, tmp_path, "accounts", "--json")

    listed = document(result)
    assert result.exit_code == 0
    assert (len(listed["accounts"]), listed["total"], listed["pages"]) == (120, 120, 3)
    assert listed["accounts"][0] == {"externalId": "HOTEL-001", "name": "Hotel 001"}
    assert listed["requests"] == 4  # one token, three pages


def test_accounts_shows_one_account_by_external_id_with_its_token_masked(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    result = pms_sync(chain, tmp_path, "accounts", "--json", "--external-id", "HOTEL-007")

    shown = document(result)["account"]
    assert result.exit_code == 0
    assert (shown["id"], shown["name"], shown["token"]) == ("acc-007", "Hotel 007", "***")
    assert 0 < shown["expires_in"] <= 3600
    looked_up = chain.http.get(
        "/api/openapi/v1/accounts",
        params={"externalId": "HOTEL-007"},
        headers={"Authorization": f"Bearer {_client_token(chain)}"},
    ).json()["data"][0]["token"]
    assert looked_up not in result.output


def test_accounts_of_an_unknown_external_id_exits_1_with_one_json_document(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    result = pms_sync(chain, tmp_path, "accounts", "--json", "--external-id", "NOPE")

    assert result.exit_code == 1
    assert document(result)["account"] is None
    assert "'NOPE'" in document(result)["error"]


def test_a_refused_client_secret_exits_4_without_showing_it(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    result = pms_sync(
        chain, tmp_path, "accounts", "--json", client=(MANY_CLIENT_ID, "wrong-secret-123")
    )

    assert result.exit_code == 4
    assert document(result)["status"] == "error"
    assert "wrong-secret-123" not in result.output


def test_an_export_of_100_hotels_and_an_unknown_one_syncs_the_100_with_only_the_client(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    mapping = ChainExport(tmp_path / "chain").write([*HUNDRED, unit("HOTEL-999", 1)])

    result = pms_sync(chain, tmp_path, "sync", "--json", str(mapping))

    report = document(result)
    stored = chain.records(entity="accommodation")
    assert result.exit_code == 0
    assert len(stored) == 200
    assert {r["accountId"] for r in stored} == {account(n) for n in range(1, 101)}
    assert report["outcomes"]["failed"] == report["outcomes"]["pending"] == 0
    discovery = report["accounts_discovery"]
    assert discovery["unknown_external_ids"] == {"HOTEL-999": 1}
    assert (discovery["open_api"]["pages"], discovery["open_api"]["lookups"]) == (3, 100)
    [quarantined] = [row for row in report["quarantine_sample"] if row["value"] == "HOTEL-999"]
    assert quarantined["field"] == "account"
    assert quarantined["record_id"] == "HOTEL-999-U1"
    assert "external id 'HOTEL-999' matches no account" in quarantined["reason"]
    token = chain.http.get(
        "/api/openapi/v1/accounts",
        params={"externalId": "HOTEL-001"},
        headers={"Authorization": f"Bearer {_client_token(chain)}"},
    ).json()["data"][0]["token"]
    assert token not in result.output  # the account tokens it used are never shown


def test_a_second_run_finds_the_accounts_in_the_snapshot_without_lookups(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    mapping = ChainExport(tmp_path / "chain").write(HUNDRED)
    pms_sync(chain, tmp_path, "sync", "--json", str(mapping))

    again = document(pms_sync(chain, tmp_path, "sync", "--json", str(mapping)))

    assert again["accounts_discovery"]["open_api"]["lookups"] == 0
    assert again["accounts_discovery"]["open_api"]["requests"] == 0
    assert again["accounts_discovery"]["open_api"]["cache_hits"] == 100
    assert again["requests"] == 0
    with Snapshot.open(tmp_path / "snapshot.duckdb", read_only=True) as snapshot:
        cached = snapshot.discovered_accounts(f"{chain.base_url}|{MANY_CLIENT_ID}")
    assert {(a.external_id, a.account_id) for a in cached} == {
        (hotel(n), account(n)) for n in range(1, 101)
    }


def test_a_tokens_file_wins_over_the_discovered_token_of_its_account(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    mapping = ChainExport(tmp_path / "chain").write([unit(hotel(1), 1), unit(hotel(2), 1)])
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("acc-001: not-a-valid-token\n")

    result = pms_sync(
        chain, tmp_path, "sync", "--json", str(mapping), PMS_SYNC_TOKENS_FILE=str(tokens)
    )

    report = document(result)
    assert result.exit_code == 4  # the file's token was sent for acc-001, and refused
    assert list(report["stopped_accounts"]) == ["acc-001"]
    assert [r["accountId"] for r in chain.records(entity="accommodation")] == ["acc-002"]
    assert report["token_renewals"] == 0  # a given token is never renewed


def test_an_external_id_mapping_without_the_client_fails_naming_the_settings(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    mapping = ChainExport(tmp_path / "chain").write(HUNDRED[:2])

    result = pms_sync(chain, tmp_path, "sync", "--json", str(mapping), client=("", ""))

    assert result.exit_code == 1
    assert "PMS_SYNC_CLIENT_ID and PMS_SYNC_CLIENT_SECRET" in document(result)["error"]
    assert chain.count() == 0


@pytest.mark.parametrize("command", ["plan", "sync --dry-run"])
def test_plan_and_dry_run_resolve_external_ids_and_send_nothing(
    chain: SandboxHandle, tmp_path: Path, command: str
) -> None:
    mapping = ChainExport(tmp_path / "chain").write([unit(hotel(5), 1), unit("HOTEL-999", 1)])

    result = pms_sync(chain, tmp_path, *command.split(), "--json", str(mapping))

    assert result.exit_code == 0
    assert document(result)["accounts"] == ["acc-005"]
    assert document(result)["counts"]["create"] == 1
    assert chain.count() == 0


@pytest.mark.slow
def test_open_api_requests_wait_for_the_clients_rate_limit_instead_of_meeting_429(
    tmp_path: Path,
) -> None:
    config = many_accounts_config(40).model_copy(
        update={"rate_limits": {MANY_CLIENT_ID: RateLimit(second=20)}}
    )
    mapping = ChainExport(tmp_path / "chain").write([unit(hotel(n), 1) for n in range(1, 41)])

    with running_sandbox(tmp_path / "sandbox", config) as limited:
        result = pms_sync(limited, tmp_path, "sync", "--json", str(mapping))
        answered = limited.stats()["requests"]
        stored = limited.count()

    report = document(result)
    api = report["accounts_discovery"]["open_api"]
    assert result.exit_code == 0
    assert api["requests"] == 1 + 1 + 40  # token, one page, 40 lookups: over 20 per second
    assert api["throttled"] == 0
    assert "429" not in answered["GET /api/openapi/v1/accounts"]
    assert stored == 40


def _client_token(chain: SandboxHandle) -> str:
    response = chain.http.post(
        "/openapi/v1/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": MANY_CLIENT_ID,
            "client_secret": "many-secret",
        },
    )
    return str(response.json()["access_token"])
