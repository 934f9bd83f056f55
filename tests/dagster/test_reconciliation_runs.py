"""The weekly full reconciliation and the drift check in Dagster, against the real sandbox."""

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from connector.sandbox.testing import SandboxHandle
from pms_sync.partitions import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pms_sync.schedules import RECONCILE_TAG
from tests.dagster.code_location import code_location
from tests.dagster.exports import Export, booking, unit

UNITS = [unit(1), unit(2)]
BOOKINGS = [booking(i, date(2025, 3 + i % 3, 1 + i), unit_number=1 + i % 2) for i in range(6)]
WEEKLY = '  reconcile_schedule: "0 4 * * 0"\n'


@pytest.fixture
def hotel(tmp_path: Path) -> Export:
    return Export(tmp_path / "mappings" / "hotel", "hotel")


def reconcile_request(defs: dg.Definitions, tick: datetime) -> dg.RunRequest:
    schedule = defs.resolve_schedule_def("hotel_reconcile")
    with dg.build_schedule_context(scheduled_execution_time=tick) as context:
        return schedule.evaluate_tick(context).run_requests[0]


def test_the_reconcile_schedule_exists_only_when_the_mapping_names_one(
    hotel: Export, resources: dict[str, object]
) -> None:
    hotel.write(UNITS, BOOKINGS)
    without = code_location(hotel.folder.parent, resources)
    hotel.write(UNITS, BOOKINGS, extra=WEEKLY)
    defs = code_location(hotel.folder.parent, resources)

    request = reconcile_request(defs, datetime(2026, 5, 17, 2, 0, tzinfo=UTC))

    assert [s.name for s in without.schedules] == ["hotel_nightly"]
    schedule = defs.resolve_schedule_def("hotel_reconcile")
    assert (schedule.cron_schedule, schedule.execution_timezone) == ("0 4 * * 0", "Europe/Vienna")
    assert request.tags[RECONCILE_TAG] == "1"
    # Every partition: the first month of the connection to eleven months ahead.
    assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == "2025-01"
    assert request.tags[ASSET_PARTITION_RANGE_END_TAG] == "2027-04"


def checks(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], Any]:
    return {
        (e.asset_key.path[-1], e.check_name): e
        for e in (
            event.event_specific_data
            for event in result.all_events
            if event.event_type_value == "ASSET_CHECK_EVALUATION"
        )
    }


def event_is_check(data: Any, asset: str, check: str) -> bool:
    return (
        isinstance(data, dg.AssetCheckEvaluation)
        and data.asset_key.path[-1] == asset
        and data.check_name == check
    )


@pytest.mark.slow
def test_a_reconciliation_run_heals_drift_and_its_check_counts_it_per_account(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, BOOKINGS, extra=WEEKLY)
    defs = code_location(hotel.folder.parent, resources)
    job = defs.resolve_job_def("hotel_sync")
    request = reconcile_request(defs, datetime(2026, 5, 17, 2, 0, tzinfo=UTC))
    nightly_tags = {key: value for key, value in request.tags.items() if key != RECONCILE_TAG}
    assert job.execute_in_process(tags=nightly_tags, raise_on_error=False).success
    clean_sandbox.delete_records("demo", "reservation", ["B1", "B4"])
    clean_sandbox.edit_records("demo", "accommodation", ["U2"], {"name": "Renamed by staff"})
    synced = {(r["entity"], r["id"]): r["resource"] for r in clean_sandbox.records()}

    nightly = job.execute_in_process(tags=nightly_tags, raise_on_error=False)
    result = job.execute_in_process(tags=request.tags, raise_on_error=False)

    assert nightly.success and result.success
    held = {(r["entity"], r["id"]): r["resource"] for r in clean_sandbox.records()}
    assert held[("accommodation", "U2")]["name"] == "Apartment 2"
    assert {("reservation", "B1"), ("reservation", "B4")} <= set(held)
    assert len(held) == len(UNITS) + len(BOOKINGS) and synced.keys() <= held.keys()
    units = checks(result)[("synced_accommodations", "drift_healed")]
    # The reservations' check is evaluated per month: each month counts its own stays.
    months = [
        e
        for e in (event.event_specific_data for event in result.all_events)
        if event_is_check(e, "synced_reservations", "drift_healed")
    ]
    assert units.passed and all(month.passed for month in months)
    assert units.metadata["drift_found"].value == units.metadata["drift_healed"].value == 1
    assert sum(month.metadata["drift_found"].value for month in months) == 2
    assert sum(month.metadata["drift_healed"].value for month in months) == 2
    (materialization, *_) = result.asset_materializations_for_node("hotel__synced_reservations")
    assert materialization.metadata["resent_reconcile"].value == len(BOOKINGS)
