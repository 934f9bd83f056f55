"""`plan` and `sync` against the sandbox with an export whose statuses mean cancelled in the
PMS's words: the service never receives those bookings as live stays, the run reports the
values and the `map:` to add, and with that map they arrive as CANCELLED."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from connector.cli import main
from connector.sandbox.testing import SandboxHandle
from tests.mapping.status_exports import STATUSES, status_lines, write_mapping

CANCELLED_BOOKINGS = {
    "B2",
    "B3",
    "B4",
    "B5",
    "B6",
}  # Cancelled, Canceled by guest, storniert, annulé


def run(service: SandboxHandle, tmp_path: Path, *args: str) -> Result:
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "state" / "snapshot.duckdb"),
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_TOKENS_FILE": "",
        "PMS_SYNC_MAX_ATTEMPTS": "2",
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def stored(service: SandboxHandle) -> dict[str, str]:
    """Reservation id → the status the service holds."""
    return {
        record["id"]: record["resource"]["status"]
        for record in service.records("demo", "reservation")
    }


def document(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


@pytest.mark.slow
def test_sync_sends_no_cancelled_booking_as_a_live_stay_and_says_which_map_to_add(
    service: SandboxHandle, tmp_path: Path
) -> None:
    # B2 was a confirmed booking the service already holds; the PMS cancelled it since.
    mapping = write_mapping(tmp_path / "pms", "Status", {**STATUSES, "B2": "Confirmed"})
    first = run(service, tmp_path, "sync", str(mapping), "--json")
    write_mapping(tmp_path / "pms", "Status")

    planned = run(service, tmp_path, "plan", str(mapping), "--json")
    synced = run(service, tmp_path, "sync", str(mapping), "--json")

    assert first.exit_code == 3, first.output  # B3-B6 quarantined
    assert stored(service) == {
        "B1": "Confirmed",
        "B2": "Confirmed",
        "B7": "CANCELLED",
        "B8": "Checked in",
    }
    for result in (planned, synced):
        report = document(result)
        assert report["cancellation_like_statuses"] == [
            {"value": "Cancelled", "kind": "cancellation", "records": 2},
            {"value": "Canceled by guest", "kind": "cancellation", "records": 1},
            {"value": "annulé", "kind": "cancellation", "records": 1},
            {"value": "storniert", "kind": "cancellation", "records": 1},
        ]
        assert "'Cancelled' 2, 'Canceled by guest' 1, 'annulé' 1, 'storniert' 1" in result.stderr
        (advice,) = status_lines(result.stderr)
        assert set(yaml.safe_load(advice)["status"]["map"]) == {
            "Cancelled",
            "Canceled by guest",
            "annulé",
            "storniert",
        }
    assert planned.exit_code == 0
    report = document(synced)
    assert (synced.exit_code, report["status"], report["requests"]) == (3, "incomplete", 0)
    assert (report["quarantined"], report["kept_quarantined"]) == (5, 1)
    assert "the service keeps their last acknowledged version" in synced.stderr
    # The service holds no booking the PMS cancelled as anything but CANCELLED or its old version.
    held = stored(service)
    assert {held.get(booking) for booking in CANCELLED_BOOKINGS - {"B2"}} == {None}
    assert held["B2"] == "Confirmed"  # its last acknowledged version, until the map is added

    write_mapping(tmp_path / "pms", advice.removeprefix("status: "))
    fixed = run(service, tmp_path, "sync", str(mapping), "--json")

    assert fixed.exit_code == 0, fixed.output
    assert (document(fixed)["status"], document(fixed)["cancellation_like_statuses"]) == (
        "succeeded",
        [],
    )
    assert stored(service) == {
        **STATUSES,
        **dict.fromkeys(CANCELLED_BOOKINGS, "CANCELLED"),
    }
