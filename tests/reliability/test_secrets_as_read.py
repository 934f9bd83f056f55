"""Credentials are checked where they are read, and ``--json`` prints one document whatever
happens. Over real sockets: the `pms-sync` process against the session's sandbox.

A secret file saved on Windows ends in CR LF, and ``PMS_SYNC_TOKEN=$(cat token.txt)`` keeps the
CR: surrounding whitespace is stripped. A control character inside a value is a configuration
error naming the setting (and the account of a tokens file), never the value. An error no
command expected (here: the token cache's path is a folder, so the token cannot be saved) is
one JSON document with ``--json``, one masked line on stderr without, and a traceback only
with ``PMS_SYNC_DEBUG=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from click.testing import CliRunner

from connector.cli import main
from connector.contract import Entity
from connector.errors import ConfigError
from connector.mapping.batches import mapped_records_from_resources
from connector.pipeline import sync_batches
from connector.sandbox.testing import SandboxHandle, running_sandbox
from connector.snapshot import DiscoveredAccount
from pms_sync.resources import OpenApiResource, ServiceResource, SnapshotResource

REPOSITORY = Path(__file__).resolve().parents[2]
HOTEL = REPOSITORY / "mappings" / "hotel" / "mapping.yaml"
HOTEL_RECORDS = 100  # 40 units, 60 reservations
INNER_CR_TOKEN = "tok-Inner\rCR-4711"
UNIT = {
    "id": "U-1",
    "status": "ACTIVE",
    "name": "Room 1",
    "street": "Hauptstraße",
    "streetNumber": "7",
    "country": "DE",
    "city": "Berlin",
    "wifiName": "guest",
    "wifiCode": "wifi-code-991",
    "doorCode": "door-code-4711",
}


class Done(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


SETTINGS = (
    "PMS_SYNC_BASE_URL",
    "PMS_SYNC_SNAPSHOT",
    "PMS_SYNC_TOKEN",
    "PMS_SYNC_TOKENS_FILE",
    "PMS_SYNC_CLIENT_ID",
    "PMS_SYNC_CLIENT_SECRET",
    "PMS_SYNC_OPENAPI_URL",
    "PMS_SYNC_TOKEN_CACHE",
    "PMS_SYNC_DEBUG",
)
"""The settings a test gives: none of them is taken from the environment of the tests."""


@pytest.fixture(scope="module")
def demo_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """The demo setup: accounts demo and demo-2, both written to with demo-token, both in the
    scope of demo-client / demo-secret (the hotel example's accounts)."""
    with running_sandbox(tmp_path_factory.mktemp("demo-sandbox")) as handle:
        yield handle


@pytest.fixture
def clean_sandbox(demo_sandbox: SandboxHandle) -> SandboxHandle:
    demo_sandbox.reset()
    return demo_sandbox


def _clean_environment() -> dict[str, str | None]:
    return dict.fromkeys(SETTINGS)


def pms_sync(*args: str, env: dict[str, str]) -> Done:
    """``pms-sync ARGS`` in this process (CliRunner), with no PMS_SYNC_* setting but ``env``."""
    result = CliRunner().invoke(main, list(args), env={**_clean_environment(), **env})
    return Done(result.exit_code, result.stdout, result.stderr)


def pms_sync_process(*args: str, env: dict[str, str]) -> Done:
    """The real entry point in a process of its own, with no PMS_SYNC_* setting but ``env``."""
    clean = {name: value for name, value in os.environ.items() if name not in SETTINGS}
    done = subprocess.run(
        [sys.executable, "-c", "from connector.cli import main; main()", *args],
        env={**clean, **env, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Done(done.returncode, done.stdout, done.stderr)


def one_document(done: Done) -> dict[str, Any]:
    """Standard output is exactly one JSON document (one line)."""
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    return json.loads(lines[0])


def service_env(sandbox: SandboxHandle, tmp_path: Path, **more: str) -> dict[str, str]:
    return {
        "PMS_SYNC_BASE_URL": sandbox.base_url,
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "state" / "snapshot.duckdb"),
        **more,
    }


# -- surrounding whitespace is stripped ----------------------------------------------------------


def test_a_token_read_with_its_windows_line_ending_is_stripped_and_the_sync_works(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    env = service_env(clean_sandbox, tmp_path, PMS_SYNC_TOKEN="demo-token\r\n")

    done = pms_sync_process("sync", str(HOTEL), "--json", env=env)

    assert done.returncode == 0, done.stderr
    document = one_document(done)
    assert document["status"] == "succeeded"
    assert document["outcomes"]["acknowledged"] == HOTEL_RECORDS
    assert clean_sandbox.count() == HOTEL_RECORDS
    assert "Traceback" not in done.stderr


def test_a_tokens_file_saved_on_windows_is_read_without_its_line_endings(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_bytes(b'demo: "demo-token\\r\\n"\r\ndemo-2: " demo-token\\t"\r\n')
    env = service_env(clean_sandbox, tmp_path, PMS_SYNC_TOKENS_FILE=str(tokens))

    done = pms_sync("sync", str(HOTEL), "--json", env=env)

    assert done.returncode == 0, done.stderr
    assert one_document(done)["outcomes"]["acknowledged"] == HOTEL_RECORDS


def test_an_open_api_client_secret_with_a_line_ending_is_stripped(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    env = service_env(
        clean_sandbox,
        tmp_path,
        PMS_SYNC_CLIENT_ID="demo-client\r\n",
        PMS_SYNC_CLIENT_SECRET="demo-secret\r\n",
    )

    done = pms_sync("accounts", "--json", env=env)

    assert done.returncode == 0, done.stdout + done.stderr
    document = one_document(done)
    assert document["client_id"] == "demo-client"
    assert sorted(a["externalId"] for a in document["accounts"]) == ["demo", "demo-2"]


def test_the_dagster_resources_strip_their_credentials_too(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    open_api = OpenApiResource(client_id="demo-client", client_secret="demo-secret\r\n")
    service = ServiceResource(
        base_url=clean_sandbox.base_url, token="demo-token\r\n", open_api=open_api
    )
    settings = service.settings(SnapshotResource(path=str(tmp_path / "snapshot.duckdb")))
    batch = mapped_records_from_resources(Entity.ACCOMMODATION, [("demo", UNIT)])

    report = sync_batches({Entity.ACCOMMODATION: batch}, settings)

    assert settings.tokens.default == "demo-token"
    assert settings.open_api is not None
    assert settings.open_api.credentials.client_secret == "demo-secret"
    assert report.outcomes["acknowledged"] == 1
    assert [record["id"] for record in clean_sandbox.records("demo")] == ["U-1"]


def test_a_discovered_account_token_is_stripped_as_well() -> None:
    found = DiscoveredAccount("ext-a", "hotel-a", "Hotel A", "acc-token-1\r\n", 0.0, 0.0)

    assert found.token == "acc-token-1"


# -- a control character inside is a configuration error -----------------------------------------


def test_a_token_with_a_control_character_inside_names_the_setting_never_the_value(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    env = service_env(clean_sandbox, tmp_path, PMS_SYNC_TOKEN=INNER_CR_TOKEN)

    done = pms_sync("sync", str(HOTEL), "--json", env=env)

    assert done.returncode == 1
    document = one_document(done)
    assert (document["status"], document["exit_code"]) == ("error", 1)
    assert document["error"].startswith("PMS_SYNC_TOKEN: the value holds U+000D")
    for part in ("tok-Inner", "CR-4711"):
        assert part not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert clean_sandbox.stats()["total"] == 0  # refused before anything was sent


def test_a_tokens_file_value_with_a_cr_inside_names_the_file_and_the_account(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"demo-2": "demo-token", "demo": "tok-File\rCR-8822"}))
    env = service_env(clean_sandbox, tmp_path, PMS_SYNC_TOKENS_FILE=str(tokens))

    done = pms_sync("sync", str(HOTEL), "--json", env=env)

    assert done.returncode == 1
    error = one_document(done)["error"]
    assert error.startswith(f"the tokens file {tokens}, account 'demo': the value holds U+000D")
    for part in ("tok-File", "CR-8822"):
        assert part not in done.stdout + done.stderr
    assert clean_sandbox.stats()["total"] == 0


def test_a_dagster_resource_token_with_a_control_character_names_the_resource() -> None:
    service = ServiceResource(token="tok-Resource\x00Nul-1234")

    with pytest.raises(ConfigError) as refused:
        service.tokens()

    assert str(refused.value).startswith("the service resource's token: the value holds U+0000")
    assert "Resource" not in str(refused.value).split(":", 1)[1]


# -- an unexpected error is still one document ---------------------------------------------------


def _cache_is_a_folder(sandbox: SandboxHandle, tmp_path: Path) -> dict[str, str]:
    """Settings under which saving the Open API token fails with IsADirectoryError: an error
    no command expects, injected for real."""
    folder = tmp_path / "openapi-tokens.json"
    folder.mkdir()
    return service_env(
        sandbox,
        tmp_path,
        PMS_SYNC_CLIENT_ID="demo-client",
        PMS_SYNC_CLIENT_SECRET="demo-secret",
        PMS_SYNC_TOKEN_CACHE=str(folder),
    )


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    hooks = tmp_path / "webhooks.yaml"
    hooks.write_text(
        "webhooks:\n  - name: arrivals\n    event: reservationCreated\n"
        "    url: http://127.0.0.1:9/events/hotel\n"
    )
    return {
        "sync": ["sync", str(HOTEL)],
        "accounts": ["accounts"],
        "webhooks plan": ["webhooks", "plan", str(hooks)],
    }


@pytest.mark.parametrize("command", ["sync", "accounts", "webhooks plan"])
def test_an_unexpected_error_with_json_is_one_document_with_an_error_member(
    clean_sandbox: SandboxHandle, tmp_path: Path, command: str
) -> None:
    env = _cache_is_a_folder(clean_sandbox, tmp_path)

    done = pms_sync(*_commands(tmp_path)[command], "--json", env=env)

    assert done.returncode == 1
    document = one_document(done)
    assert (document["status"], document["exit_code"]) == ("error", 1)
    assert document["error"].startswith("IsADirectoryError: [Errno 21] Is a directory")
    assert "Traceback" not in done.stdout + done.stderr
    assert "error: unexpected IsADirectoryError" in done.stderr
    assert "demo-secret" not in done.stdout + done.stderr


def test_without_json_an_unexpected_error_is_one_line_and_its_traceback_comes_on_request(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    env = _cache_is_a_folder(clean_sandbox, tmp_path)

    quiet = pms_sync("accounts", env=env)
    debug = pms_sync_process("accounts", env={**env, "PMS_SYNC_DEBUG": "1"})

    assert (quiet.returncode, quiet.stdout) == (1, "")
    assert quiet.stderr.splitlines() == [
        line for line in quiet.stderr.splitlines() if line.startswith("error: unexpected")
    ]
    assert "set PMS_SYNC_DEBUG=1 to see the traceback" in quiet.stderr
    assert debug.returncode == 1
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert debug.stderr.rstrip().splitlines()[-1].startswith("error: unexpected IsADirectoryError")
    assert "demo-secret" not in debug.stderr
