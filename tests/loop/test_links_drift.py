"""A guest-links 404 of a reservation the service acknowledged (deleted there behind the
connector's back) is drift: recorded by the links run, re-sent by the next sync, and its links
fetched by the links run after it, instead of the same failure every night."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from click.testing import CliRunner

from connector.cli import main
from connector.contract import Entity
from connector.links import run_links
from connector.pipeline import run_sync
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot
from tests.loop.loop_samples import arrivals, settings_for
from tests.loop.test_links import FILE_DESTINATION, synced

RESERVATION_CONNECT = "POST /api/v1/hooks/reservation/connect"


def reservations_sent(sandbox: SandboxHandle) -> int:
    return sum(sandbox.stats()["requests"].get(RESERVATION_CONNECT, {}).values())


def open_drift(snapshot_path: Path | str) -> list[tuple[str, str, str]]:
    with Snapshot.open(snapshot_path, read_only=True) as snapshot:
        rows = snapshot.open_drift(Entity.RESERVATION)
    return [(r.account_id, r.record_id, r.kind) for r in rows.itertuples(index=False)]


def test_a_links_404_is_drift_that_the_next_sync_re_sends_and_links_then_fetch(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    today = date.today()
    mapping = synced(clean_sandbox, tmp_path, arrivals([1, 2], today=today), FILE_DESTINATION)
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    clean_sandbox.delete_records("demo", "reservation", ["B1"])  # deleted behind our back

    first = run_links(mapping, settings, today=today)

    assert first.fetched == ["B0"] and first.status == "incomplete"
    assert [(f.reservation_id, f.http_status) for f in first.drift_recorded] == [("B1", 404)]
    assert first.to_json_dict()["drift_recorded"] == 1
    assert open_drift(settings.snapshot_path) == [("demo", "B1", "missing")]

    sent_before = reservations_sent(clean_sandbox)
    resync = run_sync(mapping, settings)

    assert resync.status == "succeeded"
    assert resync.to_json_dict()["resend"]["acknowledged"] == {"drifted": 1}
    assert reservations_sent(clean_sandbox) == sent_before + 1  # B1 re-sent, nothing else
    assert [r["id"] for r in clean_sandbox.records("demo", "reservation")] == ["B0", "B1"]
    assert open_drift(settings.snapshot_path) == []

    healed = run_links(mapping, settings, today=today)

    assert (healed.fetched, healed.reused, healed.status) == (["B1"], 1, "ok")
    assert healed.drift_recorded == []


def test_the_links_command_says_how_many_were_recorded_as_drift(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = synced(clean_sandbox, tmp_path, arrivals([1, 2, 3]), FILE_DESTINATION)
    clean_sandbox.delete_records("demo", "reservation", ["B0", "B2"])
    env = {
        "PMS_SYNC_CLIENT_ID": "demo-client",
        "PMS_SYNC_CLIENT_SECRET": "demo-secret",
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
    }
    command = ["links", str(mapping), "--base-url", clean_sandbox.base_url]

    printed = CliRunner().invoke(main, command, env=env)
    document = json.loads(CliRunner().invoke(main, [*command, "--json"], env=env).stdout)

    assert printed.exit_code == 3
    assert "recorded as drift: 2 reservation(s) the service no longer holds (404)" in (
        printed.stdout
    )
    assert (document["drift_recorded"], document["failed"], document["exit_code"]) == (2, 2, 3)
