"""Known secrets go through full syncs (CLI and Dagster) and never come out unmasked.

Tokens, an Open API client secret, door and Wi-Fi codes and guest e-mails are planted in a
connection; the runs include a quarantined row carrying a door code, a record the service
refuses with 403 and one with 400 (dead letters), a refused token (401), a malformed tokens
file and a refused client secret. Then every line of output is searched: Python logging at
DEBUG (all loggers), stdout and stderr of the CLI, every Dagster event and metadata entry, the
quarantine frames and the snapshot's dead-letter table, and the messages of the exceptions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from assets.factory import build_definitions
from assets.partitions import range_tags
from assets.resources import ServiceResource, SnapshotResource, SourcesResource, SyncChecksResource
from assets.storage import MappedRecordsIOManager
from connector.batches import mapped_records_from_resources
from connector.client import ClientConfig, ClientCredentials, OpenApiClient
from connector.contract import Entity
from connector.errors import PmsSyncError
from connector.pipeline import load_batches, sync_batches
from connector.sandbox.config import AccountConfig, SandboxConfig
from connector.sandbox.config import ClientConfig as SandboxClient
from connector.sandbox.testing import SandboxHandle, running_sandbox
from connector.settings import load_settings, load_tokens_file
from tests.dagster.exports import Export, booking, unit

REPOSITORY = Path(__file__).resolve().parents[2]
TOKEN = "tok-Q7x9-planted-sync-token"
OTHER_TOKEN = "tok-Z3k1-other-account-token"
WRONG_TOKEN = "tok-W0rng-refused-token"
CLIENT_SECRET = "cs-M4p8-planted-client-secret"
DOOR = "D00R-918273"
DOOR_REFUSED = "D00R-403403"
DOOR_QUARANTINED = "D00R-552211"
DOOR_400 = "D00R-400400"
WIFI = "WiFi-Pass-564738"
EMAIL = "planted.guest.4711@example.org"
SECRETS = (
    TOKEN,
    OTHER_TOKEN,
    WRONG_TOKEN,
    CLIENT_SECRET,
    DOOR,
    DOOR_REFUSED,
    DOOR_QUARANTINED,
    DOOR_400,
    WIFI,
    EMAIL,
)


def leaks(texts: list[str]) -> list[tuple[str, str]]:
    """(secret, the line it appears on) for every unmasked occurrence."""
    found = []
    for text in texts:
        for line in text.splitlines():
            found += [(secret, line[:300]) for secret in SECRETS if secret in line]
    return found


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    config = SandboxConfig(
        accounts=[
            AccountConfig(id="leak", name="Leak Hotel", externalId="leak", sync_tokens=[TOKEN]),
            AccountConfig(
                id="other", name="Other Hotel", externalId="other", sync_tokens=[OTHER_TOKEN]
            ),
        ],
        clients=[
            SandboxClient(client_id="leak-client", client_secret=CLIENT_SECRET, accounts=["leak"])
        ],
    )
    with running_sandbox(tmp_path_factory.mktemp("leak-sandbox"), config) as handle:
        yield handle


@pytest.fixture
def connection(tmp_path: Path) -> Export:
    export = Export(tmp_path / "mappings" / "leaky", "leaky")
    export.write(
        [
            unit(1, account="leak", door=DOOR, wifi_code=WIFI),
            # TOKEN may not write to "other": a 403, dead-lettered with its door code inside.
            unit(2, account="other", door=DOOR_REFUSED, wifi_code=WIFI),
            # An invalid country quarantines the row; its door code must not travel with it.
            unit(3, account="leak", door=DOOR_QUARANTINED, wifi_code=WIFI, country="XX"),
            # Enough good rows to keep the quarantine under Dagster's blocking threshold.
            *(unit(n, account="leak") for n in range(10, 50)),
        ],
        [booking(1, date(2025, 3, 5), account="leak", email=EMAIL)],
    )
    return export


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # the root logger: every library's records included
    return caplog


def run_cli(*args: str, env: dict[str, str]) -> str:
    # Python logging at DEBUG for the whole process, then the real `pms-sync` entry point.
    bootstrap = (
        "import logging, sys; logging.basicConfig(level=logging.DEBUG, stream=sys.stderr); "
        "from connector.cli import main; sys.argv[0] = 'pms-sync'; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", bootstrap, *args],
        env={**os.environ, **env, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return f"$ pms-sync {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"


def dead_letter_rows(snapshot: Path) -> list[str]:
    with duckdb.connect(str(snapshot), read_only=True) as db:
        return [str(row) for row in db.execute("SELECT * FROM dead_letters").fetchall()]


@pytest.mark.slow
def test_cli_runs_never_show_a_secret(
    service: SandboxHandle, connection: Export, tmp_path: Path
) -> None:
    service.reset()
    snapshot = tmp_path / "cli.duckdb"
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_TOKEN": TOKEN,
        "PMS_SYNC_SNAPSHOT": str(snapshot),
    }
    mapping = str(connection.mapping)
    wrong_tokens = tmp_path / "wrong.yaml"
    wrong_tokens.write_text(f"leak: {WRONG_TOKEN}\n")

    # Three processes only (each pays ≈ 3 s of imports); validate and plan print less.
    outputs = [
        run_cli("preview", mapping, "-n", "10", env=env),
        run_cli("sync", mapping, env=env),
        run_cli(
            "sync",
            mapping,
            "--json",
            "--full-resync",
            env={**env, "PMS_SYNC_TOKENS_FILE": str(wrong_tokens)},
        ),
    ]
    letters = dead_letter_rows(snapshot)

    # The runs did what the secrets are supposed to be hidden in.
    assert "-> 3" in outputs[1] and "-> 4" in outputs[2], outputs
    assert {r["id"] for r in service.records("leak")} >= {"U1", "B1"}
    assert len(letters) == 1 and "403" in letters[0]
    assert leaks([*outputs, *letters]) == []


@pytest.mark.slow
def test_dagster_runs_never_show_a_secret(
    service: SandboxHandle,
    connection: Export,
    tmp_path: Path,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    service.reset()
    snapshot = tmp_path / "dagster.duckdb"
    resources = {
        "service": ServiceResource(base_url=service.base_url, token=TOKEN),
        "snapshot": SnapshotResource(path=str(snapshot), lock_timeout=10),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(max_quarantine_share=0.1),
        "io_manager": MappedRecordsIOManager(base_dir=str(tmp_path / "io")),
    }
    defs = build_definitions(connection.folder.parent, resources)
    job = defs.resolve_job_def("leaky_sync")
    tags = range_tags(dg.PartitionKeyRange("2025-01", "2025-12"))

    result = job.execute_in_process(tags=tags, raise_on_error=False)
    wrong_token_defs = build_definitions(
        connection.folder.parent,
        {
            **resources,
            "service": ServiceResource(base_url=service.base_url, token=WRONG_TOKEN),
            # A fresh snapshot: with the first one nothing would be sent, no token refused.
            "snapshot": SnapshotResource(path=str(tmp_path / "other.duckdb")),
        },
    )
    wrong_token_run = wrong_token_defs.resolve_job_def("leaky_sync").execute_in_process(
        tags=tags, raise_on_error=False
    )

    texts = [record.getMessage() for record in debug_logs.records]
    texts += [str(record.__dict__) for record in debug_logs.records]
    for run in (result, wrong_token_run):
        for event in run.all_events:
            texts.append(str(event))
            if event.is_step_materialization:
                materialization = event.event_specific_data.materialization
                texts += [f"{k}: {v.value}" for k, v in materialization.metadata.items()]
    texts += dead_letter_rows(snapshot)

    materialized = [e for e in result.all_events if e.is_step_materialization]
    assert materialized, "the run materialized its assets"
    assert {r["id"] for r in service.records("leak")} >= {"U1", "B1"}
    assert not wrong_token_run.success
    assert len(dead_letter_rows(snapshot)) == 1
    assert leaks(texts) == []


def test_quarantine_entries_mask_the_codes_of_the_refused_row(connection: Export) -> None:
    batches, _ = load_batches(connection.mapping)

    quarantine = batches[Entity.ACCOMMODATION].quarantine

    assert set(quarantine["record_id"]) == {"U3"}
    assert leaks([quarantine.to_csv(), quarantine.to_json()]) == []


def test_a_400_echo_logs_and_exceptions_of_the_library_never_show_a_secret(
    service: SandboxHandle, tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    service.reset()
    snapshot = tmp_path / "library.duckdb"
    settings = load_settings(base_url=service.base_url, snapshot=snapshot, token=TOKEN)
    good = mapped_records_from_resources(
        Entity.ACCOMMODATION,
        [("leak", {**_unit("L1"), "doorCode": DOOR_400, "wifiCode": WIFI})],
    )
    # The contract wants text; a number (the code's digits) is refused with 400 by the service.
    # The connector's own mapping would quarantine it, so the payload is altered here.
    refused = good.records.copy()
    refused["payload"] = refused["payload"].str.replace(
        f'"doorCode":"{DOOR_400}"', f'"doorCode":{{"code":"{DOOR_400}"}}'
    )
    batch = dataclasses.replace(good, records=refused)

    report = sync_batches({Entity.ACCOMMODATION: batch}, settings)
    errors: list[str] = []
    for attempt in (
        lambda: load_tokens_file(_write(tmp_path / "t.yaml", f"leak: [{TOKEN}\n")),
        lambda: load_tokens_file(_write(tmp_path / "t.json", f'{{"leak": "{TOKEN}"')),
        lambda: load_tokens_file(_write(tmp_path / "t2.yaml", f"- {TOKEN}\n")),
        lambda: asyncio.run(_open_api_accounts(service.base_url, "wrong-" + CLIENT_SECRET)),
    ):
        try:
            attempt()
        except PmsSyncError as error:
            errors += [str(error), repr(error), str(error.__cause__ or "")]
    accounts = asyncio.run(_open_api_accounts(service.base_url, CLIENT_SECRET))

    assert report.outcomes["dead_lettered"] == 1
    assert report.push.problems[0].http_status == 400
    assert len(errors) == 12 and accounts == 1
    texts = [record.getMessage() for record in debug_logs.records]
    texts += [str(report.to_json_dict()), *dead_letter_rows(snapshot), *errors]
    texts.append(repr(ClientCredentials("leak-client", CLIENT_SECRET)))
    assert leaks(texts) == []


async def _open_api_accounts(base_url: str, secret: str) -> int:
    """Authenticate with the client secret (OAuth2) and list the accounts the client sees."""
    config = ClientConfig(base_url=base_url)
    async with OpenApiClient(config, ClientCredentials("leak-client", secret)) as api:
        await api.access_token()
        return api.token_requests


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _unit(unit_id: str) -> dict[str, object]:
    return {
        "id": unit_id,
        "status": "ACTIVE",
        "name": f"Room {unit_id}",
        "street": "Hauptstraße",
        "streetNumber": "7",
        "country": "DE",
        "city": "Berlin",
        "wifiName": "guest",
        "wifiCode": "x",
        "doorCode": "x",
    }
