"""The Open API token cache is bound to the client secret that obtained its token: a changed
secret is a new token request, and a wrong one fails at once (exit 4) instead of riding on a
cached token, or on account tokens the snapshot remembers, until they expire. Over real
sockets: `pms-sync` commands against a demo sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from connector.cli import main
from connector.sandbox.testing import SandboxHandle, running_sandbox

HOTEL = Path(__file__).resolve().parents[2] / "mappings" / "hotel" / "mapping.yaml"
HOTEL_RECORDS = 100
TOKEN_ENDPOINT = "POST /openapi/v1/oauth2/token"
SETTINGS = (
    "PMS_SYNC_BASE_URL",
    "PMS_SYNC_SNAPSHOT",
    "PMS_SYNC_TOKEN",
    "PMS_SYNC_TOKENS_FILE",
    "PMS_SYNC_CLIENT_ID",
    "PMS_SYNC_CLIENT_SECRET",
    "PMS_SYNC_OPENAPI_URL",
    "PMS_SYNC_TOKEN_CACHE",
)


@pytest.fixture(scope="module")
def demo_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """The demo setup: demo-client / demo-secret sees demo and demo-2 (the hotel example)."""
    with running_sandbox(tmp_path_factory.mktemp("demo-sandbox")) as handle:
        yield handle


@pytest.fixture
def service(demo_sandbox: SandboxHandle) -> SandboxHandle:
    demo_sandbox.reset()
    return demo_sandbox


def pms_sync(service: SandboxHandle, state: Path, secret: str, *args: str) -> Result:
    """``pms-sync ARGS --json`` with the demo client and ``secret``, and no sync token: every
    account's token comes from the Open API."""
    env: dict[str, str | None] = dict.fromkeys(SETTINGS)
    env |= {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(state / "snapshot.duckdb"),
        "PMS_SYNC_CLIENT_ID": "demo-client",
        "PMS_SYNC_CLIENT_SECRET": secret,
    }
    return CliRunner().invoke(main, [*args, "--json"], env=env)


def document(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


def token_answers(service: SandboxHandle) -> dict[str, int]:
    return service.stats()["requests"].get(TOKEN_ENDPOINT, {})


def sync_requests(service: SandboxHandle) -> int:
    requests = service.stats()["requests"]
    return sum(sum(v.values()) for endpoint, v in requests.items() if "/api/v1/hooks/" in endpoint)


def test_a_wrong_secret_fails_at_once_though_the_snapshot_holds_valid_account_tokens(
    service: SandboxHandle, tmp_path: Path
) -> None:
    first = pms_sync(service, tmp_path, "demo-secret", "sync", str(HOTEL))
    wrong = pms_sync(service, tmp_path, "not-the-secret", "sync", str(HOTEL), "--full-resync")
    sent_before_right = sync_requests(service)
    right = pms_sync(service, tmp_path, "demo-secret", "sync", str(HOTEL), "--full-resync")

    assert first.exit_code == 0 and document(first)["outcomes"]["acknowledged"] == HOTEL_RECORDS
    assert wrong.exit_code == 4, wrong.output
    assert document(wrong)["status"] == "error"
    # The service's words, not a fixed text: another test of this process may have registered
    # "wrong" as a secret, and masking then shows "Unknown client or *** client secret".
    assert "client secret (HTTP 401" in document(wrong)["error"]
    assert "not-the-secret" not in wrong.output
    assert sent_before_right == HOTEL_RECORDS  # the wrong secret's run sent nothing
    assert right.exit_code == 0, right.output
    assert document(right)["outcomes"]["acknowledged"] == HOTEL_RECORDS
    # One token for the first run, one refused request for the wrong secret; the right one
    # again needs none: the cache shows it obtained the token.
    assert token_answers(service) == {"200": 1, "401": 1}


def test_a_changed_secret_asks_for_a_token_instead_of_using_the_cached_one(
    service: SandboxHandle, tmp_path: Path
) -> None:
    first = pms_sync(service, tmp_path, "demo-secret", "accounts")
    wrong = pms_sync(service, tmp_path, "not-the-secret", "accounts")
    again = pms_sync(service, tmp_path, "demo-secret", "accounts")

    assert (first.exit_code, wrong.exit_code, again.exit_code) == (0, 4, 0)
    assert token_answers(service) == {"200": 1, "401": 1}
    cache = (tmp_path / "openapi-tokens.json").read_text()
    assert "demo-secret" not in cache
    (entry,) = json.loads(cache).values()
    assert entry["secret_hash"].startswith("pbkdf2-sha256$")


def test_an_entry_of_an_older_cache_without_the_secret_s_hash_is_not_trusted(
    service: SandboxHandle, tmp_path: Path
) -> None:
    assert pms_sync(service, tmp_path, "demo-secret", "accounts").exit_code == 0
    cache = tmp_path / "openapi-tokens.json"
    older = {
        key: {name: value for name, value in entry.items() if name != "secret_hash"}
        for key, entry in json.loads(cache.read_text()).items()
    }
    cache.write_text(json.dumps(older))

    wrong = pms_sync(service, tmp_path, "not-the-secret", "accounts")
    right = pms_sync(service, tmp_path, "demo-secret", "accounts")

    assert (wrong.exit_code, right.exit_code) == (4, 0)
    assert token_answers(service) == {"200": 2, "401": 1}
