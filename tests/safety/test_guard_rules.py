"""Thresholds of the mass-change guard and what it holds: its limits combined with a minimum
count, and end to end over the sandbox, only the kind of change that crossed a limit is held
(the account's creates and updates beside it are sent)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from connector.safety.guard import GuardRules
from connector.sandbox.testing import SandboxHandle
from tests.dagster.exports import Export, booking, unit
from tests.safety.cli_runs import document, pms_sync, sync_requests


def test_deactivations_trip_the_guard_above_five_percent_of_known_records() -> None:
    rules = GuardRules()

    assert not rules.missing_trips(5, known=100)  # exactly 5 %: allowed
    assert rules.missing_trips(6, known=100)


def test_more_than_fifty_records_trip_the_guard_whatever_the_share() -> None:
    rules = GuardRules()

    assert not rules.missing_trips(50, known=100_000)
    assert rules.missing_trips(51, known=100_000)  # 0.05 % but more than 50


def test_fewer_than_min_records_never_trip_whatever_the_share() -> None:
    rules = GuardRules()

    assert not rules.missing_trips(1, known=5)  # one villa of five: 20 %
    assert not rules.missing_trips(1, known=19)  # one room of 19
    assert not rules.missing_trips(2, known=2)
    assert rules.missing_trips(3, known=12)  # 25 %, three of them
    assert rules.missing_trips(120, known=300)  # 40 %
    assert GuardRules(min_records=1).missing_trips(1, known=12)


def test_no_missing_record_never_trips_even_without_known_records() -> None:
    assert not GuardRules().missing_trips(0, known=0)
    assert GuardRules().missing_trips(3, known=0)


def test_row_drop_trips_above_the_share_fewer_than_the_last_successful_run() -> None:
    rules = GuardRules()

    assert not rules.row_drop_trips(70, previous=100)  # exactly 30 % fewer
    assert rules.row_drop_trips(69, previous=100)
    assert not rules.row_drop_trips(150, previous=100)
    assert not rules.row_drop_trips(0, previous=0)  # no history: nothing to compare


def test_a_row_drop_needs_min_records_gone_unless_the_whole_export_vanished() -> None:
    rules = GuardRules()

    assert not rules.row_drop_trips(2, previous=3)  # one unit of three: 33 % fewer
    assert not rules.row_drop_trips(3, previous=5)  # two of five: 40 % fewer
    assert rules.row_drop_trips(2, previous=5)  # three of five
    assert rules.row_drop_trips(0, previous=1)  # an account's rows all vanished


# -- end to end: real CLI runs against the sandbox ------------------------------------------

SOON = date.today() + timedelta(days=20)


def statuses(service: SandboxHandle, entity: str) -> dict[str, str]:
    return {r["id"]: r["resource"]["status"] for r in service.records("demo", entity)}


@pytest.mark.slow
@pytest.mark.parametrize("units", [5, 19])
def test_one_unit_leaving_a_small_account_is_deactivated_without_approval(
    clean_sandbox: SandboxHandle, tmp_path: Path, units: int
) -> None:
    """One villa of five (20 %), one room of 19 (5.3 %): fewer than min_records, sent."""
    state, export = tmp_path / "state", Export(tmp_path / "mappings" / "villas", "villas")
    export.write([unit(n) for n in range(1, units + 1)], None)
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0
    export.write([unit(n) for n in range(1, units)], None)

    result = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")

    report = document(result)
    assert (result.exit_code, report["status"]) == (0, "succeeded"), result.stderr
    assert report["counts"]["deactivate"] == 1
    assert report["guard"]["changes"] == [] and report["awaiting_approval"] == []
    assert statuses(clean_sandbox, "accommodation")[f"U{units}"] == "INACTIVE"


@pytest.mark.slow
def test_a_large_removal_holds_only_the_deactivations_and_sends_the_rest_of_the_account(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    state, export = tmp_path / "state", Export(tmp_path / "mappings" / "resort", "resort")
    units = [unit(n) for n in range(1, 101)]
    export.write(units, [booking(1, SOON, unit_number=1)])
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0
    sent = sync_requests(clean_sandbox)
    # 40 of 100 units leave; in the same export a unit is renamed and a guest books.
    kept = [units[0], unit(2, name="Garden Suite"), *units[2:60]]
    export.write(kept, [booking(1, SOON, unit_number=1), booking(2, SOON, unit_number=3)])

    held = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")

    report = document(held)
    assert (held.exit_code, report["status"]) == (5, "blocked")
    assert report["guard"]["held"] == [
        {"account_id": "demo", "entity": "accommodation", "action": "deactivate"}
    ]
    [item] = report["awaiting_approval"]
    assert (item["entity"], item["action"], item["records"], item["flag"]) == (
        "accommodation",
        "deactivate",
        40,
        "--allow-mass-change",
    )
    assert "40 of 100 known accommodation records would be deactivated" in held.stderr
    assert "work held awaiting an approval" in held.stderr
    assert "--allow-mass-change" in held.stderr
    assert sync_requests(clean_sandbox) == sent + 2  # the update and the new booking
    units_now = {r["id"]: r["resource"] for r in clean_sandbox.records("demo", "accommodation")}
    assert units_now["U2"]["name"] == "Garden Suite"
    assert {units_now[f"U{n}"]["status"] for n in range(61, 101)} == {"ACTIVE"}
    assert statuses(clean_sandbox, "reservation") == {"B1": "CONFIRMED", "B2": "CONFIRMED"}

    approved = pms_sync(
        clean_sandbox, state, "sync", str(export.mapping), "--allow-mass-change", "--json"
    )

    assert approved.exit_code == 0, approved.stderr
    assert document(approved)["counts"]["deactivate"] == 40
    assert sync_requests(clean_sandbox) == sent + 42
    assert {statuses(clean_sandbox, "accommodation")[f"U{n}"] for n in range(61, 101)} == {
        "INACTIVE"
    }


@pytest.mark.slow
def test_cancellations_are_guarded_apart_from_the_deactivations_and_creates(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    state, export = tmp_path / "state", Export(tmp_path / "mappings" / "inn", "inn")
    units = [unit(n) for n in range(1, 11)]
    stays = [booking(n, SOON + timedelta(days=n), unit_number=1 + n % 5) for n in range(1, 11)]
    export.write(units, stays, reservations_on_missing="cancel_future")
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0
    # Half the bookings vanish; unit 10 (no stays) leaves and unit 11 arrives.
    export.write([*units[:9], unit(11)], stays[:5], reservations_on_missing="cancel_future")

    held = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")

    report = document(held)
    assert (held.exit_code, report["status"]) == (5, "blocked")
    assert [(i["entity"], i["action"], i["records"]) for i in report["awaiting_approval"]] == [
        ("reservation", "cancel", 5)
    ]
    accommodations = statuses(clean_sandbox, "accommodation")
    assert (accommodations["U10"], accommodations["U11"]) == ("INACTIVE", "ACTIVE")
    assert set(statuses(clean_sandbox, "reservation").values()) == {"CONFIRMED"}

    approved = pms_sync(
        clean_sandbox, state, "sync", str(export.mapping), "--allow-mass-change", "--json"
    )

    assert approved.exit_code == 0, approved.stderr
    cancelled = {i for i, s in statuses(clean_sandbox, "reservation").items() if s == "CANCELLED"}
    assert cancelled == {f"B{n}" for n in range(6, 11)}
