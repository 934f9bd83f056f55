"""The asset check on reservation statuses that mean cancelled in the PMS's words, in real
materializations of a connection's job against the sandbox (slow)."""

from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from connector.sandbox.testing import SandboxHandle
from tests.dagster.code_location import code_location
from tests.dagster.exports import Export, booking, unit
from tests.dagster.test_sync_runs import run

pytestmark = pytest.mark.slow

UNITS = [unit(1), unit(2)]
APRIL = [
    booking(1, date(2027, 4, 3)),
    booking(2, date(2027, 4, 4), status="Cancelled"),
    booking(3, date(2027, 4, 5), status="storniert"),
    booking(4, date(2027, 4, 6), status="Cancelled"),
    booking(5, date(2027, 4, 7), unit_number=2),
]


def evaluations(result: dg.ExecuteInProcessResult, name: str) -> list[dg.AssetCheckEvaluation]:
    return [
        event.event_specific_data
        for event in result.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
        and event.event_specific_data.check_name == name
    ]


def held(sandbox: SandboxHandle) -> dict[str, str]:
    return {r["id"]: r["resource"]["status"] for r in sandbox.records("demo", "reservation")}


def test_the_check_fails_naming_each_value_while_the_other_stays_are_synced(
    tmp_path: Path, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel = Export(tmp_path / "mappings" / "hotel", "hotel")
    hotel.write(UNITS, APRIL)
    defs = code_location(hotel.folder.parent, resources)

    result = run(defs, "2027-04")

    (check,) = evaluations(result, "cancellations_sent_as_cancelled")
    assert (check.passed, check.severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert check.asset_key.path[-1] == "mapped_reservations"
    assert "'Cancelled' 2, 'storniert' 1" in check.description
    assert "status: {column: status, map: {Cancelled: CANCELLED, storniert: CANCELLED}}" in (
        check.description
    )
    assert check.metadata["records"].value == 3
    # Three records of five quarantined for their status do not hold the others back.
    assert all(item.passed for item in evaluations(result, "quarantine_below_threshold"))
    assert held(clean_sandbox) == {"B1": "CONFIRMED", "B5": "CONFIRMED"}

    text = hotel.mapping.read_text()
    hotel.mapping.write_text(
        text.replace(
            "      status: status\n",
            "      status: {column: status, map: {Cancelled: CANCELLED, storniert: CANCELLED}}\n",
        )
    )
    fixed = run(code_location(hotel.folder.parent, resources), "2027-04")

    assert [item.passed for item in evaluations(fixed, "cancellations_sent_as_cancelled")] == [True]
    assert held(clean_sandbox) == {
        "B1": "CONFIRMED",
        "B2": "CANCELLED",
        "B3": "CANCELLED",
        "B4": "CANCELLED",
        "B5": "CONFIRMED",
    }
