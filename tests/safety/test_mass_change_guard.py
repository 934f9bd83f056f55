"""The mass-change guard end to end: a truncated export is not pushed until approved."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from connector.sandbox.testing import SandboxHandle
from tests.dagster.exports import Export, booking, unit
from tests.safety.cli_runs import document, pms_sync, sync_requests

pytestmark = pytest.mark.slow

UNITS = [unit(n) for n in range(1, 21)]
BOOKINGS = [booking(n, date(2031, 1 + n % 12, 10), unit_number=1 + n % 20) for n in range(30)]


@pytest.fixture
def export(tmp_path: Path) -> Export:
    written = Export(tmp_path / "mappings" / "guarded", "guarded")
    written.write(UNITS, BOOKINGS)
    return written


def test_an_export_truncated_to_half_its_rows_pushes_nothing_until_approved(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")
    assert first.exit_code == 0, first.output
    sent = sync_requests(clean_sandbox)
    export.write(UNITS[:10], BOOKINGS[:15])  # the PMS stopped writing halfway

    blocked = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")

    assert blocked.exit_code == 5
    assert sync_requests(clean_sandbox) == sent  # nothing pushed
    report = document(blocked)
    assert report["status"] == "blocked"
    assert report["guard"]["blocked_accounts"] == ["demo"]
    assert report["guard"]["held"] == [
        {"account_id": "demo", "entity": "accommodation", "action": "deactivate"},
        {"account_id": "demo", "entity": "reservation", "action": "cancel"},
    ]
    message = blocked.stderr
    # Every missing unit still has 2031 stays at the service: held (spec §3), not deactivated.
    assert report["counts"]["deactivate"] == 0
    assert {u["unit_id"] for u in report["units_with_stays"]} == {f"U{n}" for n in range(11, 21)}
    assert "unit demo/U11 held, not deactivated: 1 stay(s) until 2031-" in message
    assert "the export has 10 accommodation rows, 50.0% fewer than the 20" in message
    assert "15 reservation rows, 50.0% fewer than the 30" in message
    assert "--allow-mass-change" in message
    units = clean_sandbox.records("demo", "accommodation")
    assert {u["resource"]["status"] for u in units} == {"ACTIVE"}

    volume_only = pms_sync(
        clean_sandbox, state, "sync", str(export.mapping), "--allow-mass-change", "--json"
    )

    # The volume is approved; the guests' units need their own approval.
    assert volume_only.exit_code == 5
    assert [i["approval"] for i in document(volume_only)["awaiting_approval"]] == [
        "deactivation_with_stays"
    ]
    assert sync_requests(clean_sandbox) == sent

    approved = pms_sync(
        clean_sandbox,
        state,
        "sync",
        str(export.mapping),
        "--allow-mass-change",
        "--allow-deactivation-with-stays",
        "--json",
    )

    assert approved.exit_code == 0, approved.output
    assert document(approved)["counts"]["deactivate"] == 10
    status = {
        u["id"]: u["resource"]["status"] for u in clean_sandbox.records("demo", "accommodation")
    }
    assert {i for i, s in status.items() if s == "INACTIVE"} == {f"U{n}" for n in range(11, 21)}
    assert sync_requests(clean_sandbox) == sent + 10


def test_a_blocked_run_is_not_the_baseline_of_the_next_one(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0
    export.write(UNITS, BOOKINGS[:15])  # only the reservations export lost half its rows

    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 5
    again = pms_sync(clean_sandbox, state, "sync", str(export.mapping))

    assert again.exit_code == 5  # still compared with the last successful run's 30 rows
    assert "15 reservation rows, 50.0% fewer than the 30" in again.stderr


def test_a_half_written_export_is_refused_before_anything_is_read(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    units_csv = export.folder / "units.csv"
    units_csv.write_text(units_csv.read_text().rstrip("\n"))  # last row not finished yet

    result = pms_sync(clean_sandbox, tmp_path / "state", "sync", str(export.mapping))

    assert result.exit_code == 1
    assert "units.csv does not end with a newline" in result.stderr
    assert sync_requests(clean_sandbox) == 0


def test_connections_sharing_an_account_are_each_compared_with_their_own_runs(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    smaller = Export(tmp_path / "mappings" / "annex", "annex")
    smaller.write([unit(n) for n in range(101, 111)], None)  # 10 other units, same account
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0

    annex = pms_sync(clean_sandbox, state, "sync", str(smaller.mapping), "--json")
    again = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")

    # Neither run reads the other connection's 20 or 10 units as its own export shrinking.
    assert annex.exit_code == 0, annex.stderr
    assert document(annex)["counts"]["create"] == 10
    assert again.exit_code == 0, again.stderr
    assert document(again)["counts"]["deactivate"] == 0
