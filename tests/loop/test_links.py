"""Guest links of upcoming arrivals: fetched from the Open API after the sync, soonest first,
kept in the snapshot, fetched again only when missing or old, written back to the PMS."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from connector.cli import main
from connector.links import run_links
from connector.pipeline import run_sync
from connector.plan import Budget
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot
from tests.loop.loop_samples import arrivals, settings_for, write_connection

FILE_DESTINATION = "links:\n  destination: {file: out/links.csv}\n"


def synced(sandbox: SandboxHandle, tmp_path: Path, bookings: list[dict], extra: str) -> Path:
    mapping = write_connection(tmp_path / "hotel", bookings, extra)
    assert run_sync(mapping, settings_for(sandbox.base_url, tmp_path)).status == "succeeded"
    return mapping


def links_requests(sandbox: SandboxHandle) -> dict[str, int]:
    return sandbox.stats()["requests"].get("GET /openapi/v1/reservations/links", {})


def test_arrivals_of_the_next_days_get_their_links_soonest_first_and_in_the_file(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    today = date.today()  # one day for the whole test, even across midnight
    bookings = arrivals([9, 2, 0, 30, 14, -3], today=today)  # B3 too far, B5 already arrived
    bookings[1]["status"] = "CANCELLED"
    mapping = synced(clean_sandbox, tmp_path, bookings, FILE_DESTINATION)

    report = run_links(mapping, settings_for(clean_sandbox.base_url, tmp_path), today=today)

    assert report.fetched == ["B2", "B0", "B4"]
    assert (report.status, report.written, report.failed, report.pending) == ("ok", 3, [], [])
    written = pd.read_csv(tmp_path / "hotel" / "out" / "links.csv")
    assert written["reservation_id"].tolist() == ["B2", "B0", "B4"]
    assert written["guest_app"].str.startswith("https://guest.sandbox.invalid/demo/app/").all()
    assert set(written.columns) >= {"chat_link", "online_check_in_link", "message_author_type"}
    assert "message_body" not in written.columns


def test_the_next_run_reuses_fresh_links_and_sends_nothing(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([1, 2, 3]), FILE_DESTINATION)
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    run_links(mapping, settings)

    again = run_links(mapping, settings)

    assert (len(again.fetched), again.reused, again.requests, again.written) == (0, 3, 0, 3)
    assert links_requests(clean_sandbox) == {"200": 3}


def test_links_older_than_the_maximum_age_are_fetched_again(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([1, 2]), "links: {}\n")
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    run_links(mapping, settings)

    again = run_links(mapping, settings, max_age_hours=1e-9)

    assert (again.fetched, again.reused) == (["B0", "B1"], 0)


def test_the_chat_message_body_is_kept_only_when_the_mapping_asks(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([1]), "links:\n  last_message_body: true\n")
    settings = settings_for(clean_sandbox.base_url, tmp_path)

    run_links(mapping, settings)

    with Snapshot.open(settings.snapshot_path, read_only=True) as snapshot:
        kept = snapshot.guest_links("hotel")
    assert kept["message_body"].tolist() == ["Welcome! Your guest app is ready."]
    assert kept["message_author_type"].tolist() == ["admin"]


def test_without_the_option_the_chat_message_is_metadata_only(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([1]), "links: {}\n")
    settings = settings_for(clean_sandbox.base_url, tmp_path)

    run_links(mapping, settings)

    with Snapshot.open(settings.snapshot_path, read_only=True) as snapshot:
        kept = snapshot.guest_links("hotel")
    assert kept["message_body"].isna().all()
    assert kept["message_author"].tolist() == ["Demo Hotel"]


def test_a_budget_leaves_the_latest_arrivals_for_the_next_run(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([5, 1, 12, 3]), "links: {}\n")
    settings = settings_for(clean_sandbox.base_url, tmp_path, PMS_SYNC_URGENT_DAYS="4")

    report = run_links(mapping, settings, budget=Budget(max_requests=2))

    assert report.fetched == ["B1", "B3"]
    assert [item.reservation_id for item in report.pending] == ["B0", "B2"]
    assert report.pending_by_urgency == {"unit": 0, "upcoming": 0, "future": 2, "past": 0}
    assert report.status == "incomplete"
    later = run_links(mapping, settings)
    assert (later.fetched, later.reused) == (["B0", "B2"], 2)


def test_the_command_prints_one_json_document_and_exits_3_with_a_backlog(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([1, 2, 3]), FILE_DESTINATION)
    env = {
        "PMS_SYNC_CLIENT_ID": "demo-client",
        "PMS_SYNC_CLIENT_SECRET": "demo-secret",
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
    }

    result = CliRunner().invoke(
        main,
        [
            "links",
            str(mapping),
            "--json",
            "--base-url",
            clean_sandbox.base_url,
            "--max-requests",
            "1",
        ],
        env=env,
    )

    assert result.exit_code == 3, result.output
    document = json.loads(result.stdout)
    assert (document["fetched"], document["pending"], document["exit_code"]) == (1, 2, 3)
    assert document["backlog"]["upcoming"]["requests"] == 2
    assert document["write_back"][0]["rows"] == 1


def test_without_an_open_api_client_the_command_says_what_to_set(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = write_connection(tmp_path / "hotel", arrivals([1]), "links: {}\n")

    result = CliRunner().invoke(
        main,
        ["links", str(mapping), "--json", "--base-url", clean_sandbox.base_url],
        env={
            "PMS_SYNC_CLIENT_ID": "",
            "PMS_SYNC_CLIENT_SECRET": "",
            "PMS_SYNC_SNAPSHOT": str(tmp_path / "s.duckdb"),
        },
    )

    assert result.exit_code == 1
    assert "PMS_SYNC_CLIENT_ID" in json.loads(result.stdout)["error"]


def test_refused_client_credentials_stop_the_run_with_exit_4(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    client_secret = "wrong-secret-value"
    mapping = synced(clean_sandbox, tmp_path, arrivals([1]), "links: {}\n")

    result = CliRunner().invoke(
        main,
        ["links", str(mapping), "--json", "--base-url", clean_sandbox.base_url],
        env={
            "PMS_SYNC_CLIENT_ID": "demo-client",
            "PMS_SYNC_CLIENT_SECRET": client_secret,
            "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
            "PMS_SYNC_TOKEN_CACHE": str(tmp_path / "tokens.json"),
        },
    )

    assert result.exit_code == 4, result.output
    assert client_secret not in result.output


def test_a_failed_fetch_is_printed_once_with_its_status_and_request_id(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([1, 2]), FILE_DESTINATION)
    clean_sandbox.delete_records("demo", "reservation", ["B1"])  # deleted behind our back
    env = {
        "PMS_SYNC_CLIENT_ID": "demo-client",
        "PMS_SYNC_CLIENT_SECRET": "demo-secret",
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
    }

    result = CliRunner().invoke(
        main, ["links", str(mapping), "--base-url", clean_sandbox.base_url], env=env
    )

    [line] = [line for line in result.output.splitlines() if "failed  demo/B1" in line]
    assert "HTTP 404" in line and line.count("HTTP") == 1, line
    assert line.count("x-request-id") == 1, line
