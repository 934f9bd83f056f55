"""Known secrets go through full syncs (CLI and Dagster) and never come out unmasked.

Tokens, an Open API client secret, door and Wi-Fi codes and guest e-mails are planted in a
connection; the runs include a quarantined row carrying a door code, a record the service
refuses with 403 and one with 400 (dead letters), a refused token (401), a malformed tokens
file and a refused client secret. A second service, a small HTTP server on a real socket,
refuses everything with 400 and quotes the request's values back JSON-escaped (``\u00fc`` in
upper case, ``\\/``), URL-encoded and HTML-escaped. A base URL carries a password; a mapping
interpolates the token from the environment into a field. Then every line of output is
searched, for each secret in every one of those encodings: Python logging at DEBUG (all
loggers), stdout and stderr of the CLI, every Dagster event and metadata entry, the quarantine
frames and the snapshot's dead-letter table, and the messages of the exceptions. Last, the
files that hold secrets or guest data are stat'ed: owner-only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import logging
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
from click.testing import CliRunner

from connector.cli import main
from connector.client import ClientConfig, ClientCredentials, OpenApiClient, ensure_reachable
from connector.contract import Entity
from connector.errors import ConfigError, PmsSyncError
from connector.mapping.batches import mapped_records_from_resources
from connector.pipeline import load_batches, sync_batches
from connector.sandbox.config import AccountConfig, SandboxConfig
from connector.sandbox.config import ClientConfig as SandboxClient
from connector.sandbox.testing import SandboxHandle, running_sandbox
from connector.settings import load_settings, load_tokens_file
from pms_sync.partitions import range_tags
from pms_sync.resources import (
    IO_MANAGER_KEY,
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)
from pms_sync.storage import MappedRecordsIOManager
from tests.dagster.code_location import code_location
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
WIFI_ECHOED = (
    "Wüfi/Zugang-918273"  # JSON-escaped as W\u00fcfi\/Zugang, URL-encoded as W%C3%BCfi%2F…
)
EMAIL = "planted.guest.4711@example.org"
URL_PASSWORD = "pw-Url-4455-planted"
MAPPED_TOKEN = "tok-M4pp3d-env-interpolated"  # only ever read by a mapping, from the environment
CONFIG_TOKEN = "tok-C0nf1g-sandbox-config"
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
    WIFI_ECHOED,
    EMAIL,
    URL_PASSWORD,
    MAPPED_TOKEN,
    CONFIG_TOKEN,
)


def encodings(secret: str) -> set[str]:
    """The secret as it could come back: raw, JSON-escaped, URL-encoded or HTML-escaped."""
    escaped = json.dumps(secret)[1:-1]
    return {
        secret,
        escaped,
        escaped.replace("/", "\\/"),
        re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), escaped),
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote_plus(secret)),
        html.escape(secret),
    }


SEARCHED = {form: secret for secret in SECRETS for form in encodings(secret)}


def leaks(texts: list[str]) -> list[tuple[str, str]]:
    """(secret, the line it appears on) for every unmasked occurrence, in any encoding."""
    found = []
    for text in texts:
        for line in text.splitlines():
            found += [(secret, line[:300]) for form, secret in SEARCHED.items() if form in line]
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


class _RefusingEcho(BaseHTTPRequestHandler):
    """A service that refuses every record with 400 and quotes the request's values back."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        resource = json.loads(body).get("resource", {})
        values = [value for value in _string_leaves(resource)]
        quoted = json.dumps(f"refused values: {', '.join(values)}")  # ensure_ascii: \u00fc
        answer = (
            '{"message": '
            # Upper-case hex and escaped slashes, as PHP's and some Java encoders write them.
            + re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), quoted).replace(
                "/", "\\/"
            )
            + ', "form": '
            + json.dumps(urllib.parse.urlencode({"v": values}, doseq=True))
            + ', "html": '
            + json.dumps(html.escape(", ".join(values)), ensure_ascii=False)
            + "}"
        ).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json; charset=utf-8")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the test reads the client's sinks, not this server's log


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)
    elif isinstance(value, str):
        yield value


@pytest.fixture(scope="module")
def echoing_service() -> Iterator[str]:
    """The base URL of a real HTTP server (loopback socket) that answers every POST 400."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingEcho)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def connection(tmp_path: Path) -> Export:
    export = Export(tmp_path / "mappings" / "leaky", "leaky")
    export.write(
        [
            unit(1, account="leak", door=DOOR, wifi_code=WIFI_ECHOED),
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
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(tmp_path / "io")),
    }
    defs = code_location(connection.folder.parent, resources)
    job = defs.resolve_job_def("leaky_sync")
    tags = range_tags(dg.PartitionKeyRange("2025-01", "2025-12"))

    result = job.execute_in_process(tags=tags, raise_on_error=False)
    wrong_token_defs = code_location(
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


async def _open_api_accounts(base_url: str, secret: str, cache: Path | None = None) -> int:
    """Authenticate with the client secret (OAuth2) and list the accounts the client sees."""
    config = ClientConfig(base_url=base_url)
    credentials = ClientCredentials("leak-client", secret)
    async with OpenApiClient(config, credentials, cache_path=cache) as api:
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


# -- echoes in every encoding ---------------------------------------------------------------


def test_a_400_quoting_the_payload_json_escaped_url_encoded_or_html_escaped_is_masked(
    echoing_service: str,
    connection: Export,
    tmp_path: Path,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    snapshot = tmp_path / "echo.duckdb"
    settings = load_settings(base_url=echoing_service, snapshot=snapshot, token=TOKEN)
    batch = mapped_records_from_resources(
        Entity.ACCOMMODATION,
        [("leak", {**_unit("E1"), "doorCode": DOOR_400, "wifiCode": WIFI_ECHOED})],
    )

    report = sync_batches({Entity.ACCOMMODATION: batch}, settings)
    cli = run_cli(
        "sync",
        str(connection.mapping),
        "--json",
        env={
            "PMS_SYNC_BASE_URL": echoing_service,
            "PMS_SYNC_TOKEN": TOKEN,
            "PMS_SYNC_SNAPSHOT": str(tmp_path / "echo-cli.duckdb"),
        },
    )

    # The service did quote the codes back, in each encoding (or there is nothing to mask).
    [problem] = report.push.problems
    assert problem.http_status == 400 and "refused values" in problem.message
    assert {'"form":', '"html":', "***"} <= set(
        re.findall(r'"form":|"html":|\*\*\*', problem.message)
    )
    assert "-> 3" in cli and "refused values" in cli
    texts = [record.getMessage() for record in debug_logs.records]
    texts += [json.dumps(report.to_json_dict(), default=str), cli]
    texts += dead_letter_rows(snapshot) + dead_letter_rows(tmp_path / "echo-cli.duckdb")
    assert leaks(texts) == []


@pytest.mark.slow
def test_dagster_events_and_metadata_never_show_an_echoed_code(
    echoing_service: str,
    connection: Export,
    tmp_path: Path,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    snapshot = tmp_path / "echo.duckdb"
    resources = {
        "service": ServiceResource(base_url=echoing_service, token=TOKEN),
        "snapshot": SnapshotResource(path=str(snapshot)),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(max_quarantine_share=0.1),
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(tmp_path / "io")),
    }
    job = code_location(connection.folder.parent, resources).resolve_job_def("leaky_sync")
    tags = range_tags(dg.PartitionKeyRange("2025-01", "2025-12"))

    result = job.execute_in_process(tags=tags, raise_on_error=False)

    texts = [record.getMessage() for record in debug_logs.records]
    texts += [str(record.__dict__) for record in debug_logs.records]
    metadata: list[str] = []
    for event in result.all_events:
        texts.append(str(event))
        if event.is_step_materialization:
            materialization = event.event_specific_data.materialization
            metadata += [f"{k}: {v.value}" for k, v in materialization.metadata.items()]
    assert len(dead_letter_rows(snapshot)) > 40  # every record was refused with 400…
    assert any("refused values" in text for text in metadata)  # …and its echo shown
    assert leaks(texts + metadata) == []


# -- credentials in URLs ----------------------------------------------------------------------


def test_a_password_in_the_base_url_is_refused_and_never_printed(
    service: SandboxHandle, connection: Export, tmp_path: Path
) -> None:
    closed_port = _closed_port()
    reachable = service.base_url.replace("://", f"://ops:{URL_PASSWORD}@")
    unreachable = f"http://ops:{URL_PASSWORD}@127.0.0.1:{closed_port}"
    env = {"PMS_SYNC_TOKEN": TOKEN, "PMS_SYNC_SNAPSHOT": str(tmp_path / "url.duckdb")}

    runs = [
        CliRunner().invoke(main, ["sync", str(connection.mapping), "--base-url", url], env=env)
        for url in (reachable, unreachable)
    ]
    with pytest.raises(PmsSyncError) as not_reached:
        ensure_reachable(ClientConfig(base_url=unreachable, connect_timeout=0.5))
    with pytest.raises(ConfigError) as dagster_refused:
        ServiceResource(base_url=reachable, token=TOKEN).settings(
            SnapshotResource(path=str(tmp_path / "url.duckdb"))
        )

    for result in runs:
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "ops:***@" in result.output and "Traceback" not in result.output
    assert f"127.0.0.1:{closed_port}" in str(not_reached.value)
    assert "ops:***@" in str(dagster_refused.value)
    assert not (tmp_path / "url.duckdb").exists()
    errors = [str(not_reached.value), str(dagster_refused.value)]
    assert leaks([result.output for result in runs] + errors) == []


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- secrets read from the environment into a mapping -------------------------------------------


def test_a_token_interpolated_into_a_mapped_field_is_masked_by_validate_and_the_quarantine(
    connection: Export, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = connection.mapping.read_text()
    # A template, not a constant: a constant the member cannot take is refused when the file
    # is loaded (connector.mapping.checks), and this test is about the quarantine.
    text = text.replace(
        "      country: country\n", '      country: {template: "${PMS_SYNC_TOKEN}"}\n'
    )
    text = text.replace(
        "        firstName: first_name\n", '        firstName: {constant: "${PMS_SYNC_TOKEN}"}\n'
    )
    connection.mapping.write_text(text)
    monkeypatch.setenv("PMS_SYNC_TOKEN", MAPPED_TOKEN)

    validated = CliRunner().invoke(main, ["validate", str(connection.mapping), "--errors", "50"])
    previewed = CliRunner().invoke(main, ["preview", str(connection.mapping), "-n", "5"])
    batches, _ = load_batches(connection.mapping)

    quarantine = batches[Entity.ACCOMMODATION].quarantine
    assert validated.exit_code == 1 and "country" in validated.output
    assert (quarantine["field"] == "country").sum() == len(connection_units(connection))
    assert '"firstName": "***"' in previewed.output
    assert leaks([validated.output, previewed.output, quarantine.to_csv()]) == []


def connection_units(connection: Export) -> list[str]:
    return (connection.folder / "units.csv").read_text().splitlines()[1:]


# -- parse errors of secret-bearing files ------------------------------------------------------


def test_a_broken_tokens_or_sandbox_config_file_is_placed_by_line_and_column_only(
    connection: Export, tmp_path: Path
) -> None:
    tokens = _write(tmp_path / "tokens.yaml", f"other: fine-token\nleak: [{WRONG_TOKEN}\n")
    config = _write(
        tmp_path / "sandbox.yaml",
        f"accounts:\n  - id: a\n    name: A\n    sync_tokens: [{CONFIG_TOKEN}\n",
    )

    synced = CliRunner().invoke(
        main,
        ["sync", str(connection.mapping)],
        env={"PMS_SYNC_TOKENS_FILE": str(tokens), "PMS_SYNC_SNAPSHOT": str(tmp_path / "t.db")},
    )
    sandboxed = CliRunner().invoke(main, ["sandbox", "--config", str(config), "--port", "0"])

    assert synced.exit_code == 1 and "tokens.yaml" in synced.output
    assert re.search(r"line \d+, column \d+", synced.output), synced.output
    assert sandboxed.exit_code == 1 and "sandbox.yaml" in sandboxed.output
    assert re.search(r"line \d+, column \d+", sandboxed.output), sandboxed.output
    assert leaks([synced.output, sandboxed.output]) == []


# -- files that hold secrets or guest data ------------------------------------------------------


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def test_files_holding_tokens_codes_or_guest_data_are_owner_only(
    service: SandboxHandle, connection: Export, tmp_path: Path
) -> None:
    previous = os.umask(0o022)  # the usual default: 0644 files, 0755 folders without care
    try:
        cache = tmp_path / "state" / "openapi" / "tokens.json"
        asyncio.run(_open_api_accounts(service.base_url, CLIENT_SECRET, cache))
        data = tmp_path / "sandbox" / "data"
        with running_sandbox(data) as sandbox:  # the demo setup; it stores a door code
            stored = sync_batches(
                {
                    Entity.ACCOMMODATION: mapped_records_from_resources(
                        Entity.ACCOMMODATION, [("demo", {**_unit("P1"), "doorCode": DOOR})]
                    )
                },
                load_settings(
                    base_url=sandbox.base_url, token="demo-token", snapshot=tmp_path / "p.duckdb"
                ),
            )
        plan_file = tmp_path / "review" / "plans" / "plan.json"
        planned = CliRunner().invoke(
            main,
            ["plan", str(connection.mapping), "--out", str(plan_file)],
            env={"PMS_SYNC_SNAPSHOT": str(tmp_path / "plan.duckdb")},
        )
        io_manager = MappedRecordsIOManager(base_dir=str(tmp_path / "dagster" / "io"))
        context = dg.build_output_context(asset_key=dg.AssetKey(["leaky", "mapped"]))
        io_manager.handle_output(context, {"doorCode": DOOR})
    finally:
        os.umask(previous)

    pickle_file = tmp_path / "dagster" / "io" / "leaky" / "mapped" / "all.pkl"
    assert stored.outcomes["acknowledged"] == 1 and planned.exit_code == 0, planned.output
    assert {
        name: mode(path)
        for name, path in _private_paths(cache, data, plan_file, pickle_file).items()
    } == {name: "0o600" for name in _private_paths(cache, data, plan_file, pickle_file)}
    assert {
        mode(folder)
        for folder in (
            tmp_path / "state",
            cache.parent,
            tmp_path / "sandbox",
            data,
            tmp_path / "review",
            plan_file.parent,
            tmp_path / "dagster",
            pickle_file.parent,
        )
    } == {"0o700"}


def _private_paths(cache: Path, data: Path, plan_file: Path, pickle_file: Path) -> dict[str, Path]:
    paths = {"token cache": cache, "plan file": plan_file, "IO manager pickle": pickle_file}
    paths |= {
        f"sandbox {p.name}": p for p in data.iterdir() if p.name.startswith("sandbox.sqlite3")
    }
    return paths
