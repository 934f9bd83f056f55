"""The trust rules end to end (docs/safety-rails.md, issues 13 and 36): a record present in the
export but invalid is never treated as gone, a unit or property with upcoming stays is not
deactivated without the stays approval (the mass-change approval is not it) and its run exits
5, and a run that got nothing usable says so. Real CLI runs against the sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from connector.sandbox.testing import SandboxHandle, many_accounts_config, running_sandbox
from tests.accounts.chain import ChainExport, hotel
from tests.accounts.chain import booking as chain_booking
from tests.accounts.chain import pms_sync as chain_sync
from tests.accounts.chain import unit as chain_unit
from tests.dagster.exports import Export, booking, unit
from tests.safety.cli_runs import document, pms_sync, sync_requests

pytestmark = pytest.mark.slow

SOON = date.today() + timedelta(days=10)
LATER = date.today() + timedelta(days=60)
PAST = date.today() - timedelta(days=60)


@pytest.fixture
def export(tmp_path: Path) -> Export:
    return Export(tmp_path / "mappings" / "trusted", "trusted")


def sync(service: SandboxHandle, state: Path, export: Export, *options: str) -> dict:
    result = pms_sync(service, state, "sync", str(export.mapping), "--json", *options)
    return document(result) | {"exit": result.exit_code, "stderr": result.stderr}


def unit_status(service: SandboxHandle, unit_id: str) -> str:
    units = {u["id"]: u["resource"] for u in service.records("demo", "accommodation")}
    return str(units[unit_id]["status"])


def test_a_unit_whose_row_turned_invalid_keeps_its_last_version_and_is_not_deactivated(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    export.write([unit(1), unit(2), unit(3)], None)
    assert sync(clean_sandbox, state, export)["exit"] == 0
    export.write([unit(1), unit(2, country="XXX"), unit(3)], None)  # one of three turned bad

    plan = pms_sync(clean_sandbox, state, "plan", str(export.mapping), "--json")
    synced = sync(clean_sandbox, state, export)

    planned = document(plan)
    assert plan.exit_code == 0
    assert planned["counts"]["deactivate"] == 0
    assert (planned["quarantined"], planned["kept_quarantined"]) == (1, 1)
    assert planned["by_entity"]["accommodation"]["quarantined"] == 1
    assert (synced["exit"], synced["requests"], synced["counts"]["deactivate"]) == (0, 0, 0)
    assert synced["kept_quarantined"] == 1
    assert "1 known record(s) are quarantined" in synced["stderr"]
    units = {u["id"]: u["resource"] for u in clean_sandbox.records("demo", "accommodation")}
    assert (units["U2"]["status"], units["U2"]["country"]) == ("ACTIVE", "AT")


def test_a_future_booking_with_a_negative_guest_count_is_not_cancelled(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    bookings = [booking(1, SOON), booking(2, LATER)]
    export.write([unit(1)], bookings, reservations_on_missing="cancel_future")
    assert sync(clean_sandbox, state, export)["exit"] == 0
    export.write(
        [unit(1)],
        [booking(1, SOON), booking(2, LATER, adults="-1")],
        reservations_on_missing="cancel_future",
    )

    synced = sync(clean_sandbox, state, export)

    assert (synced["counts"]["cancel"], synced["requests"], synced["kept_quarantined"]) == (0, 0, 1)
    stored = {r["id"]: r["resource"] for r in clean_sandbox.records("demo", "reservation")}
    assert stored["B2"]["status"] == "CONFIRMED"
    assert stored["B2"]["unitReservations"][0]["adults"] == 2


def test_a_row_without_an_id_holds_back_every_deactivation_of_its_account(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    units = [unit(n) for n in range(1, 41)]  # one deactivation stays under the guard's limit
    export.write(units, None)
    assert sync(clean_sandbox, state, export)["exit"] == 0
    # Unit 2 left; unit 3 lost its id: still in the export, but nobody can tell which it is.
    export.write([units[0], unit(3, unit_id=""), *units[3:]], None)

    synced = sync(clean_sandbox, state, export)

    assert (synced["counts"]["deactivate"], synced["held"], synced["requests"]) == (0, 2, 0)
    assert unit_status(clean_sandbox, "U2") == unit_status(clean_sandbox, "U3") == "ACTIVE"
    export.write([units[0], *units[2:]], None)  # the id is back: U2 is truly gone
    again = sync(clean_sandbox, state, export)
    assert (again["counts"]["deactivate"], unit_status(clean_sandbox, "U2")) == (1, "INACTIVE")


def test_a_unit_with_upcoming_stays_is_held_until_approved_and_its_past_is_no_obstacle(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    bookings = [
        booking(1, SOON, unit_number=1),
        booking(2, LATER, unit_number=1),
        booking(3, PAST, unit_number=2),
        booking(4, LATER, unit_number=3, status="CANCELLED"),
    ]
    export.write([unit(1), unit(2), unit(3), unit(4)], bookings)
    assert sync(clean_sandbox, state, export)["exit"] == 0
    export.write([unit(4)], bookings)  # units 1, 2 and 3 left the export
    sent = sync_requests(clean_sandbox)

    plan = pms_sync(clean_sandbox, state, "plan", str(export.mapping), "--json")
    volume_only = sync(clean_sandbox, state, export, "--allow-mass-change")
    synced = sync(clean_sandbox, state, export, "--allow-deactivation-with-stays")

    held = document(plan)["units_with_stays"]
    assert held == [
        {
            "account_id": "demo",
            "unit_id": "U1",
            "stays": 2,
            "last_checkout": (LATER + timedelta(days=2)).isoformat(),
            "released": False,
        }
    ]
    assert document(plan)["counts"]["deactivate"] == 2  # a past stay and a cancelled one
    assert document(plan)["held"] == 1
    # --allow-mass-change approves volume only (3 of 4 units gone): the guests' unit is held,
    # the run exits 5 and names the one approval that releases it.
    assert (volume_only["exit"], volume_only["status"]) == (5, "blocked")
    assert volume_only["counts"]["deactivate"] == 2
    [item] = volume_only["awaiting_approval"]
    assert (item["entity"], item["records"], item["flag"]) == (
        "accommodation",
        1,
        "--allow-deactivation-with-stays",
    )
    assert "guests still stay in U1" in volume_only["stderr"]
    assert "approve with --allow-deactivation-with-stays" in volume_only["stderr"]
    # The volume was approved above and that run is the guard's baseline now.
    assert (synced["exit"], synced["counts"]["deactivate"]) == (0, 1)
    assert sync_requests(clean_sandbox) == sent + 3
    assert unit_status(clean_sandbox, "U1") == "INACTIVE"


def test_a_held_unit_is_released_by_its_own_flag_without_approving_anything_else(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    units = [unit(n) for n in range(1, 41)]
    bookings = [booking(1, SOON, unit_number=40)]
    export.write(units, bookings)
    assert sync(clean_sandbox, state, export)["exit"] == 0
    export.write(units[:39], bookings)  # unit 40 leaves, its guest still arrives in 10 days

    held = sync(clean_sandbox, state, export)
    released = sync(clean_sandbox, state, export, "--allow-deactivation-with-stays")

    assert (held["exit"], held["status"], held["counts"]["deactivate"], held["held"]) == (
        5,
        "blocked",
        0,
        1,
    )
    assert "unit demo/U40 held, not deactivated: 1 stay(s) until" in held["stderr"]
    assert held["guard"]["changes"] == []  # one unit of 40: no mass change
    assert [i["approval"] for i in held["awaiting_approval"]] == ["deactivation_with_stays"]
    assert unit_status(clean_sandbox, "U40") == "INACTIVE"
    assert (released["exit"], released["counts"]["deactivate"]) == (0, 1)
    assert released["units_with_stays"][0]["released"] is True


def test_a_header_only_export_after_a_full_sync_sends_nothing_and_says_nothing_is_usable(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    export.write([unit(1), unit(2)], [booking(1, PAST)])
    assert sync(clean_sandbox, state, export)["exit"] == 0
    sent = sync_requests(clean_sandbox)
    export.write([], [])

    emptied = sync(clean_sandbox, state, export)

    assert emptied["exit"] == 6
    assert emptied["status"] == "unusable"
    assert set(emptied["unusable"]) == {"accommodation", "reservation"}
    assert (
        "nothing usable for accommodation: the export has no accommodation rows"
        in (emptied["stderr"])
    )
    # The accounts of the last run that have no row now trip the guard too.
    assert "the export has 0 accommodation rows, 100.0% fewer than the 2" in emptied["stderr"]
    assert sync_requests(clean_sandbox) == sent
    assert unit_status(clean_sandbox, "U1") == "ACTIVE"


def test_an_entity_with_every_record_quarantined_exits_with_nothing_usable(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    export.write([unit(1, country="XXX"), unit(2, country="YYY")], [booking(1, SOON)])

    result = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")

    report = document(result)
    assert result.exit_code == 6
    assert report["unusable"] == {
        "accommodation": "all 2 accommodation records of the export are quarantined"
    }
    assert report["quarantined"] == 2


def test_an_account_present_in_the_last_run_with_no_rows_now_is_reported_and_approvable(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    tokens = state / "tokens.yaml"
    tokens.write_text("demo: demo-token\nhotel-a: hotel-a-token\n")
    export.write([unit(1), unit(2), unit(3, account="hotel-a")], None)
    assert sync(clean_sandbox, state, export)["exit"] == 0
    export.write([unit(1), unit(2)], None)  # hotel-a's rows vanished from the export

    blocked = sync(clean_sandbox, state, export)
    approved = sync(clean_sandbox, state, export, "--allow-mass-change")
    after = sync(clean_sandbox, state, export)

    assert (blocked["exit"], blocked["guard"]["blocked_accounts"]) == (5, ["hotel-a"])
    assert "account 'hotel-a': the export has 0 accommodation rows" in blocked["stderr"]
    assert approved["exit"] == 0
    assert after["exit"] == 0  # the approved run made zero rows hotel-a's baseline


def test_a_run_of_some_accounts_compares_only_them_with_their_last_runs(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    """``--account`` (Dagster's account partitions run the same way): the accounts the run does
    not cover are not read as dropped to zero rows, and a covered account that lost its rows
    still stops the run."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "tokens.yaml").write_text("demo: demo-token\nhotel-a: hotel-a-token\n")
    export.write([unit(1), unit(2), unit(3, account="hotel-a")], None)
    assert sync(clean_sandbox, state, export)["exit"] == 0

    only_demo = sync(clean_sandbox, state, export, "--account", "demo")
    export.write([unit(3, account="hotel-a")], None)  # demo's rows vanished from the export
    only_hotel_a = sync(clean_sandbox, state, export, "--account", "hotel-a")
    demo_again = sync(clean_sandbox, state, export, "--account", "demo")

    assert (only_demo["exit"], only_demo["requests"]) == (0, 0)
    assert (only_hotel_a["exit"], only_hotel_a["requests"]) == (0, 0)
    # Nothing of demo is left to sync (exit 6), and the guard holds its deactivations back.
    assert (demo_again["exit"], demo_again["guard"]["blocked_accounts"]) == (6, ["demo"])
    assert "account 'demo': the export has 0 accommodation rows" in demo_again["stderr"], (
        demo_again["stderr"]
    )
    assert {unit_status(clean_sandbox, u) for u in ("U1", "U2")} == {"ACTIVE"}


def test_plan_creates_no_snapshot_where_there_is_none(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    export.write([unit(1)], [booking(1, SOON)])

    plan = pms_sync(clean_sandbox, state, "plan", str(export.mapping), "--json")

    assert plan.exit_code == 0
    assert document(plan)["counts"]["create"] == 2
    assert not state.exists()


def test_sync_json_is_one_document_when_reservations_are_held_back(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    export.write([unit(1)], [booking(1, SOON)])
    # The unit's request fails on both attempts (PMS_SYNC_MAX_ATTEMPTS=2): its booking is held.
    clean_sandbox.set_faults(fail_next=2)

    result = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")

    report = document(result)  # raises unless stdout is exactly one JSON document
    assert (result.exit_code, report["exit_code"], report["held_back_total"]) == (3, 3, 1)
    assert "held          reservation demo/B1" in result.stderr


def test_json_errors_are_one_document_too(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    export.write([unit(1)], None)
    export.mapping.write_text(export.mapping.read_text() + "\nunknown_member: 1\n")

    broken = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json")
    misused = pms_sync(clean_sandbox, state, "sync", str(export.mapping), "--json", "--nope")

    assert (broken.exit_code, document(broken)["status"]) == (1, "error")
    assert "unknown_member" in document(broken)["error"]
    assert (misused.exit_code, document(misused)["exit_code"]) == (2, 2)
    assert "--nope" in document(misused)["error"]


def test_a_month_partition_cancels_only_what_left_the_export_not_what_moved_or_broke(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    from connector.pipeline import run_sync
    from connector.records import DateWindow
    from connector.settings import load_settings

    month = (date.today().replace(day=1) + timedelta(days=62)).replace(day=1)
    following = (month + timedelta(days=40)).replace(day=1)
    window = DateWindow(month, following)
    settings = load_settings(
        base_url=clean_sandbox.base_url, snapshot=tmp_path / "snapshot.duckdb", token="demo-token"
    )
    stays = [booking(n, month + timedelta(days=n)) for n in (1, 2, 3, 4)]
    export.write([unit(1)], stays, reservations_on_missing="cancel_future")
    assert run_sync(export.mapping, settings).status == "succeeded"
    moved = following + timedelta(days=3)
    export.write(
        [unit(1)],
        [
            booking(1, moved),  # moved to the next month: that month's business
            booking(2, moved, adults="-1"),  # moved and broken: still in the export
            booking(4, month + timedelta(days=4), first_name=""),  # broken, in this month
        ],  # booking 3 left the export
        reservations_on_missing="cancel_future",
    )

    report = run_sync(export.mapping, settings, window=window, allow_mass_change=True)

    assert report.plan.counts["cancel"] == 1
    assert report.plan.kept_quarantined == 1  # booking 4; booking 2 lies outside the window
    status = {
        r["id"]: r["resource"]["status"] for r in clean_sandbox.records("demo", "reservation")
    }
    assert status == {"B1": "CONFIRMED", "B2": "CONFIRMED", "B3": "CANCELLED", "B4": "CONFIRMED"}


def test_answers_that_contradict_the_request_make_the_run_disagreed_with_exit_3(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    export.write([unit(1), unit(2)], None)
    assert sync(clean_sandbox, tmp_path / "first", export)["exit"] == 0

    # A second snapshot that never saw the first sync: its creates meet records the service
    # already holds, and the service answers "skipped".
    again = sync(clean_sandbox, tmp_path / "lost", export)

    assert (again["exit"], again["status"], again["outcomes"]["acknowledged"]) == (
        3,
        "disagreed",
        2,
    )
    assert again["disagreements_total"] == 2
    assert {d["record_id"] for d in again["disagreements"]} == {"U1", "U2"}
    assert all(d["request_id"] for d in again["disagreements"])


@pytest.fixture(scope="module")
def hotels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """A sandbox of three hotels under one Open API client (external ids HOTEL-001…)."""
    with running_sandbox(tmp_path_factory.mktemp("hotels"), many_accounts_config(3)) as handle:
        yield handle


def test_a_property_with_stays_is_held_under_the_mass_change_approval_and_the_run_exits_5(
    hotels: SandboxHandle, tmp_path: Path
) -> None:
    hotels.reset()
    export = ChainExport(tmp_path / "chain")
    rooms = [chain_unit(hotel(n), k) for n in (1, 2) for k in (1, 2)]
    stays = [chain_booking(hotel(2), 1, days_from_today=3), chain_booking(hotel(1), 2, 5)]
    chain_sync(hotels, tmp_path, "sync", "--json", str(export.write(rooms, stays)))
    export.write(rooms[:2], stays[1:])  # hotel 2 leaves the export; its guest arrives in 3 days

    held = chain_sync(
        hotels, tmp_path, "sync", "--json", "--allow-mass-change", str(export.mapping)
    )

    report = document(held)
    assert (held.exit_code, report["status"]) == (5, "blocked")
    [item] = report["awaiting_approval"]
    assert (item["account_id"], item["entity"], item["action"], item["flag"]) == (
        "acc-002",
        "property",
        "deactivate",
        "--allow-deactivation-with-stays",
    )
    assert "1 current or future stay(s)" in item["reason"]
    assert "approve with --allow-deactivation-with-stays" in held.stderr
    assert hotels.health()["inactiveProperties"] == []

    released = chain_sync(
        hotels, tmp_path, "sync", "--json", "--allow-deactivation-with-stays", str(export.mapping)
    )

    assert released.exit_code == 0, released.stderr
    assert [c["outcome"] for c in document(released)["properties"]["changes"]] == ["applied"]
    assert hotels.health()["inactiveProperties"] == ["acc-002"]
