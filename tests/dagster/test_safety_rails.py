"""The safety rails in Dagster: the guard fails the step until the run config approves it, and
the count_anomalies check fires on a run whose export lost 40 % of its rows."""

from pathlib import Path

import dagster as dg
import pytest

from connector.sandbox.testing import SandboxHandle
from pms_sync.assets import build_assets
from pms_sync.connections import discover
from pms_sync.factory import accepted_preview_apis
from pms_sync.partitions import reservation_partitions
from pms_sync.resources import SyncChecksResource
from pms_sync.safety import CHECK_COUNT_ANOMALIES
from tests.dagster.exports import Export, unit

pytestmark = pytest.mark.slow


def materialize_units(folder: Path, resources: dict[str, object]) -> dg.ExecuteInProcessResult:
    (connection,) = discover(folder)
    with accepted_preview_apis():
        assets = build_assets(connection, reservation_partitions(None, "UTC"))
    return dg.materialize(assets, resources=resources, raise_on_error=False)


def check_evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        event.event_specific_data.check_name: event.event_specific_data
        for event in result.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def test_an_export_that_lost_40_percent_of_its_rows_is_held_then_flagged_by_the_anomaly_check(
    tmp_path: Path, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    units = Export(tmp_path / "mappings" / "flats", "flats")
    units.write([unit(n) for n in range(1, 11)], None)
    for _ in range(2):  # two ordinary nights of history
        assert materialize_units(units.folder.parent, resources).success
    # 5 of 10 units gone, a new one arrives: the export has 40 % fewer rows.
    units.write([*(unit(n) for n in range(1, 6)), unit(11)], None)

    blocked = materialize_units(units.folder.parent, resources)

    assert not blocked.success
    failure = next(e for e in blocked.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert "5 of 10 known accommodation records would be deactivated (50.0%" in message
    assert "resources.sync_checks.config.allow_mass_change: true" in message
    # Only the deactivations are held: the new unit beside them was sent.
    stored = {
        u["id"]: u["resource"]["status"] for u in clean_sandbox.records("demo", "accommodation")
    }
    assert set(stored.values()) == {"ACTIVE"}
    assert "U11" in stored

    approved = materialize_units(
        units.folder.parent,
        {**resources, "sync_checks": SyncChecksResource(allow_mass_change=True)},
    )

    assert approved.success  # a warning does not fail the run
    anomaly = check_evaluations(approved)[CHECK_COUNT_ANOMALIES]
    assert not anomaly.passed
    assert anomaly.severity == dg.AssetCheckSeverity.WARN
    assert "6 rows extracted, -40% against the median 10" in anomaly.description
    inactive = [
        u
        for u in clean_sandbox.records("demo", "accommodation")
        if u["resource"]["status"] == "INACTIVE"
    ]
    assert len(inactive) == 5


def test_the_anomaly_check_passes_on_an_ordinary_night_and_errors_when_nothing_is_acknowledged(
    tmp_path: Path, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    units = Export(tmp_path / "mappings" / "flats", "flats")
    units.write([unit(n) for n in range(1, 6)], None)
    assert materialize_units(units.folder.parent, resources).success
    units.write([unit(n) for n in range(1, 5)] + [unit(5, name="Penthouse")], None)

    ordinary = materialize_units(units.folder.parent, resources)

    assert check_evaluations(ordinary)[CHECK_COUNT_ANOMALIES].passed
    # demo-token may not write to hotel-b: every record is refused (403), none acknowledged.
    units.write([unit(n, account="hotel-b") for n in range(1, 4)], None)

    refused = materialize_units(units.folder.parent, resources)

    anomaly = check_evaluations(refused)[CHECK_COUNT_ANOMALIES]
    assert not anomaly.passed
    assert anomaly.severity == dg.AssetCheckSeverity.ERROR
    assert "3 change(s) sent, none acknowledged" in anomaly.description
