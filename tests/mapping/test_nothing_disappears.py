"""Nothing of an export disappears silently, and no control character reaches the service.

A reservation whose rows are in the export but none of them a unit row is quarantined with
its reason and counted, and a sync never sends or cancels it. Control characters in mapped
text are refused naming file, row, field and code point (a secret's value is never shown), or
stripped where the mapping says ``control_characters: strip``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mapping_helpers import reservation_mapping, write_csv, write_mapping

from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.records import MappedRecords
from connector.sandbox.testing import SandboxHandle, running_sandbox

REPOSITORY = Path(__file__).resolve().parents[2]
ROOMS_ONLY = [{"column": "kind", "equals": "room"}]
FUTURE = {"checkin": {"column": "arrival"}, "checkout": {"column": "departure"}}


def _bookings(folder: Path, rows: list[dict[str, Any]], **entity: Any) -> Path:
    write_csv(folder / "bookings.csv", rows)
    document = reservation_mapping(FUTURE)
    spec = document["entities"]["reservation"]
    spec["fields"]["unitReservations"]["filter"] = ROOMS_ONLY
    spec.update(entity)
    return write_mapping(folder, document)


def _row(booking: str, kind: str) -> dict[str, str]:
    return {"booking": booking, "kind": kind, "arrival": "2030-07-01", "departure": "2030-07-03"}


def _reservations(path: Path) -> MappedRecords:
    return map_records(load_mapping(path))[Entity.RESERVATION]


# -- a reservation without unit rows ------------------------------------------------------------


def test_a_booking_without_unit_rows_is_quarantined_naming_its_rows(tmp_path: Path) -> None:
    rows = [_row("B1", "room"), _row("B2", "parking"), _row("B2", "fee")]

    batch = _reservations(_bookings(tmp_path, rows))

    assert list(batch.records["record_id"]) == ["B1"]
    problems = batch.quarantine.to_dict("records")
    assert [(p["record_id"], p["input"], p["rows"], p["field"]) for p in problems] == [
        ("B2", "bookings.csv", "2,3", "unitReservations")
    ]
    assert problems[0]["reason"].startswith("no unit rows")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    with running_sandbox(tmp_path_factory.mktemp("sandbox")) as handle:
        yield handle


def _sync(mapping: Path, sandbox: SandboxHandle, state: Path) -> dict[str, Any]:
    """``pms-sync sync MAPPING --json`` in a process of its own, against the sandbox."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPOSITORY),
        "PMS_SYNC_BASE_URL": sandbox.base_url,
        "PMS_SYNC_SNAPSHOT": str(state / "snapshot.duckdb"),
        "PMS_SYNC_TOKEN": "demo-token",
    }
    command = [sys.executable, "-c", "from connector.cli import main; main()"]
    done = subprocess.run(
        [*command, "sync", str(mapping), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=mapping.parent,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _stored(sandbox: SandboxHandle) -> dict[str, str]:
    return {
        record["id"]: record["resource"]["status"]
        for record in sandbox.records("demo", "reservation")
    }


def test_a_sync_neither_sends_nor_cancels_a_booking_without_unit_rows(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    sandbox.reset()
    entity = {"on_missing": "cancel_future"}
    first = [_row("B1", "room"), _row("B2", "room"), _row("B3", "parking")]
    report = _sync(_bookings(tmp_path, first, **entity), sandbox, tmp_path)
    assert report["quarantine"]["reservation"] == 1, report
    assert _stored(sandbox) == {"B1": "CONFIRMED", "B2": "CONFIRMED"}

    # B2's room row is gone, its parking row is still there: in the export, not cancelled.
    second = [_row("B1", "room"), _row("B2", "parking"), _row("B3", "parking")]
    report = _sync(_bookings(tmp_path, second, **entity), sandbox, tmp_path)

    assert report["quarantine"]["reservation"] == 2, report
    assert _stored(sandbox) == {"B1": "CONFIRMED", "B2": "CONFIRMED"}


# -- control characters -------------------------------------------------------------------------


def _guests(folder: Path, names: list[tuple[str, str, str]], **options: Any) -> Path:
    """Bookings (booking, first name, door code) with a mapping sending name and door code."""
    rows = [{**_row(booking, "room"), "name": name, "door": door} for booking, name, door in names]
    write_csv(folder / "bookings.csv", rows)
    document = reservation_mapping(
        {**FUTURE, "doorCode": "door"}, {"primaryGuest": {"firstName": "name"}}
    )
    document.update(options)
    return write_mapping(folder, document)


def test_a_nul_byte_in_a_name_is_refused_naming_file_row_field_and_code_point(
    tmp_path: Path,
) -> None:
    path = _guests(
        tmp_path, [("B1", "Ann\tLee\r\nJr", "11"), ("B2", "B\x00en", "22"), ("B3", "Bo\x85b", "33")]
    )

    batch = _reservations(path)

    assert list(batch.records["record_id"]) == ["B1"]
    problems = [
        (p["record_id"], p["input"], p["rows"], p["field"], p["reason"].split(" in the text")[0])
        for p in batch.quarantine.to_dict("records")
    ]
    assert problems == [
        ("B2", "bookings.csv", "2", "primaryGuest.firstName", "control character U+0000"),
        ("B3", "bookings.csv", "3", "primaryGuest.firstName", "control character U+0085"),
    ]
    assert "\x00" not in batch.quarantine.to_csv()
    # Tab, line feed and carriage return are text.
    assert json.loads(batch.records["payload"][0])["primaryGuest"]["firstName"] == "Ann\tLee\r\nJr"


def test_a_door_code_with_a_control_character_is_refused_without_showing_it(
    tmp_path: Path,
) -> None:
    batch = _reservations(_guests(tmp_path, [("B1", "Ann", "4711\x07")]))

    assert batch.records.empty
    (problem,) = batch.quarantine.to_dict("records")
    assert problem["field"] == "unitReservations.doorCode"
    assert problem["reason"].startswith("control character U+0007")
    assert "4711" not in json.dumps(problem)


def test_strip_sends_the_cleaned_value_to_the_service(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    sandbox.reset()
    names = [("B1", "B\x00en", "47\x1b11"), ("B2", "Ann\x7f", "22")]
    path = _guests(tmp_path, names, control_characters="strip")

    report = _sync(path, sandbox, tmp_path)

    assert report["quarantine"].get("reservation", 0) == 0, report
    stored = {record["id"]: record["resource"] for record in sandbox.records("demo", "reservation")}
    assert stored["B1"]["primaryGuest"]["firstName"] == "Ben"
    assert stored["B1"]["unitReservations"][0]["doorCode"] == "4711"
    assert stored["B2"]["primaryGuest"]["firstName"] == "Ann"


def test_a_refused_record_is_not_sent(sandbox: SandboxHandle, tmp_path: Path) -> None:
    sandbox.reset()
    path = _guests(tmp_path, [("B1", "Ann", "11"), ("B2", "B\x00en", "22")])

    report = _sync(path, sandbox, tmp_path)

    assert report["quarantine"]["reservation"] == 1, report
    assert sorted(record["id"] for record in sandbox.records("demo", "reservation")) == ["B1"]
