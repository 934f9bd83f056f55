"""The definitions generated from mapping files, the nightly schedule and the drop-folder sensor."""

import json
import os
import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from dagster.components.testing import create_defs_folder_sandbox

from pms_sync.assets import SNAPSHOT_POOL
from pms_sync.component import PmsSyncComponent, folder_definitions
from pms_sync.partitions import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    current_range,
    reservation_partitions,
)
from pms_sync.resources import SnapshotResource
from tests.dagster.code_location import code_location
from tests.dagster.exports import Export, booking, unit

pytestmark = pytest.mark.filterwarnings("error::dagster.BetaWarning")


@pytest.fixture
def two_connections(tmp_path: Path) -> Path:
    folder = tmp_path / "mappings"
    Export(folder / "hotel", "hotel").write([unit(1)], [booking(1, date(2025, 3, 1))])
    Export(folder / "apartments", "city-apartments").write(
        [unit(1)], [booking(1, date(2025, 3, 1))], extra="  drop_folder: inbox\n"
    )
    return folder


def test_each_mapping_file_becomes_an_asset_group_with_its_checks_job_and_schedule(
    two_connections: Path, resources: dict[str, object]
) -> None:
    defs = code_location(two_connections, resources)
    graph = defs.resolve_asset_graph()

    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert keys == {
        f"{name}/{asset}"
        for name in ("hotel", "city_apartments")
        for asset in (
            "pms/units",
            "pms/bookings",
            "mapped_accommodations",
            "mapped_reservations",
            "synced_accommodations",
            "synced_reservations",
            "accounts",
        )
    }
    assert {graph.get(key).group_name for key in graph.get_all_asset_keys()} == {
        "hotel",
        "city_apartments",
    }
    checks = {(key.asset_key.to_user_string(), key.name) for key in graph.asset_check_keys}
    assert checks == {
        (f"{name}/{asset}", check)
        for name in ("hotel", "city_apartments")
        for asset, check in (
            ("mapped_accommodations", "quarantine_below_threshold"),
            ("mapped_reservations", "quarantine_below_threshold"),
            ("mapped_reservations", "unit_ids_known"),
            ("mapped_reservations", "cancellations_sent_as_cancelled"),
            ("synced_accommodations", "no_new_dead_letters"),
            ("synced_accommodations", "accounts_authenticated"),
            ("synced_reservations", "no_new_dead_letters"),
            ("synced_reservations", "accounts_authenticated"),
            ("synced_reservations", "upcoming_arrivals_sent"),
            ("synced_accommodations", "count_anomalies"),
            ("synced_reservations", "count_anomalies"),
            ("synced_accommodations", "service_answers_agree"),
            ("synced_reservations", "service_answers_agree"),
            ("accounts", "accounts_known"),
            ("synced_accommodations", "drift_healed"),
            ("synced_reservations", "drift_healed"),
        )
    }
    hotel = dg.AssetKey(["hotel", "synced_reservations"])
    assert dg.AssetKey(["hotel", "synced_accommodations"]) in graph.get(hotel).parent_keys
    assert graph.get(hotel).partitions_def is not None
    assert graph.get(dg.AssetKey(["hotel", "synced_accommodations"])).partitions_def is None
    assert defs.resolve_job_def("hotel_sync") and defs.resolve_job_def("city_apartments_sync")
    schedule = defs.resolve_schedule_def("hotel_nightly")
    assert (schedule.cron_schedule, schedule.execution_timezone) == ("30 3 * * *", "Europe/Vienna")
    # Only the connection that names a drop folder is watched.
    assert sorted(sensor.name for sensor in defs.sensors) == [
        "city_apartments_drop_folder",
        "city_apartments_drop_folder_archive",
    ]


def test_the_snapshot_steps_queue_per_file_on_duckdb_and_per_connection_on_postgresql(
    two_connections: Path, resources: dict[str, object]
) -> None:
    def pools(snapshot: str) -> dict[str, str | None]:
        """The pool of each connection's synced reservations and accounts steps."""
        defs = code_location(
            two_connections, {**resources, "snapshot": SnapshotResource(path=snapshot)}
        )
        return {
            f"{name}/{asset}": defs.resolve_assets_def(dg.AssetKey([name, asset])).op.pool
            for name in ("hotel", "city_apartments")
            for asset in ("synced_reservations", "accounts")
        }

    # One DuckDB file, one writer: every connection's steps share one pool.
    assert set(pools(str(two_connections / "snapshot.duckdb")).values()) == {SNAPSHOT_POOL}
    # PostgreSQL: a pool per connection, so two connections sync at once and one connection's
    # runs queue on each other rather than time out on its lock (no server is opened here).
    assert pools("postgresql://pms@127.0.0.1:5432/test") == {
        "hotel/synced_reservations": f"{SNAPSHOT_POOL}/hotel",
        "city_apartments/synced_reservations": f"{SNAPSHOT_POOL}/city_apartments",
        "hotel/accounts": f"{SNAPSHOT_POOL}/hotel",
        "city_apartments/accounts": f"{SNAPSHOT_POOL}/city_apartments",
    }


def test_the_pms_exports_are_external_assets_upstream_of_the_mapped_assets(
    two_connections: Path, resources: dict[str, object]
) -> None:
    graph = code_location(two_connections, resources).resolve_asset_graph()

    mapped_units = graph.get(dg.AssetKey(["hotel", "mapped_accommodations"]))
    mapped_stays = graph.get(dg.AssetKey(["hotel", "mapped_reservations"]))
    export = graph.get(dg.AssetKey(["hotel", "pms", "bookings"]))

    assert mapped_units.parent_keys == {dg.AssetKey(["hotel", "pms", "units"])}
    assert mapped_stays.parent_keys == {dg.AssetKey(["hotel", "pms", "bookings"])}
    assert not export.is_materializable
    assert export.metadata["path"].value == "bookings.csv"
    assert export.group_name == "hotel"


def test_the_synced_assets_turn_stale_when_the_nightly_run_is_missed(
    two_connections: Path, resources: dict[str, object]
) -> None:
    graph = code_location(two_connections, resources).resolve_asset_graph()

    for asset in ("synced_accommodations", "synced_reservations"):
        policy = graph.get(dg.AssetKey(["hotel", asset])).freshness_policy
        assert isinstance(policy, dg.FreshnessPolicy)
        assert policy.fail_window.to_timedelta() == timedelta(hours=26)


def test_bundled_mappings_load_as_the_code_location() -> None:
    from assets.definitions import defs

    names = {job.name for job in defs.jobs}
    assert names and all(name.endswith("_sync") for name in names)
    assert len(list(defs.schedules)) == len(names)


def test_the_jobs_and_runs_of_an_asset_selection_run_their_steps_in_one_process() -> None:
    from assets.definitions import defs

    repository = defs.get_repository_def()
    jobs = [repository.get_job(job.name) for job in defs.jobs]
    assets_job = repository.get_implicit_global_asset_job_def()

    assert jobs and all(job.executor_def is dg.in_process_executor for job in jobs)
    assert assets_job.executor_def is dg.in_process_executor


def test_the_components_attributes_in_a_defs_yaml_name_the_state_folder_and_the_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PMS_SYNC_SNAPSHOT", raising=False)
    hotel = Export(tmp_path / "pms" / "hotel", "hotel")
    hotel.write([unit(1, "demo")], [booking(1, date(2025, 3, 5), "demo", unit_number=1)])
    state = tmp_path / "state"
    synced = dg.AssetKey(["hotel", "synced_reservations"])
    # The example of docs/dagster.md, loaded by Dagster's own loader of a defs folder.
    with create_defs_folder_sandbox() as sandbox, warnings.catch_warnings():
        # Dagster's loader uses beta APIs of its own (code references, sensor owners) and a
        # pydantic 1 one; the other tests hold pms-sync's definitions to no BetaWarning.
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.filterwarnings("ignore", "`parse_obj_as` is deprecated")
        folder = sandbox.defs_folder_path / "hotel"
        folder.mkdir()
        (folder / "defs.yaml").write_text(
            "type: pms_sync.PmsSyncComponent\n"
            "attributes:\n"
            f"  mapping: {hotel.mapping}\n"
            f"  state_dir: {state}\n"
            "  partition_by_account: true\n"
        )
        with sandbox.load_component_and_build_defs(defs_path=folder) as (component, defs):
            assert isinstance(component, PmsSyncComponent)
            snapshot = defs.resources["snapshot"]
            assert isinstance(snapshot, SnapshotResource)
            assert snapshot.path == str(state / "snapshot.duckdb")
            by_account = defs.resolve_assets_def(synced).partitions_def
            assert isinstance(by_account, dg.MultiPartitionsDefinition)
            assert {d.name for d in by_account.partitions_defs} == {"account", "month"}
    # The mapping alone asks for no account partitions: the attribute won.
    monthly = folder_definitions(hotel.folder.parent, tmp_path).resolve_assets_def(synced)
    assert isinstance(monthly.partitions_def, dg.TimeWindowPartitionsDefinition)


def test_nightly_run_covers_last_month_to_eleven_months_ahead(
    two_connections: Path, resources: dict[str, object]
) -> None:
    defs = code_location(two_connections, resources)
    schedule = defs.resolve_schedule_def("hotel_nightly")
    tick = datetime(2026, 5, 14, 1, 30, tzinfo=UTC)

    with dg.build_schedule_context(scheduled_execution_time=tick) as context:
        request = schedule.evaluate_tick(context).run_requests[0]

    assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == "2026-04"
    assert request.tags[ASSET_PARTITION_RANGE_END_TAG] == "2027-04"


def test_nightly_window_starts_at_the_first_partition_of_a_young_connection() -> None:
    partitions = reservation_partitions("2025-01", "UTC")
    window = current_range(partitions, date(2025, 1, 20))
    assert (window.start, window.end) == ("2025-01", "2025-12")


def test_sensor_starts_one_run_per_new_or_changed_file_and_none_for_an_unchanged_one(
    two_connections: Path, resources: dict[str, object]
) -> None:
    defs = code_location(two_connections, resources)
    sensor = defs.resolve_sensor_def("city_apartments_drop_folder")
    inbox = two_connections / "apartments" / "inbox"

    def tick(cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
        with dg.build_sensor_context(cursor=cursor, definitions=defs) as context:
            data = sensor.evaluate_tick(context)
        return data.run_requests or [], data.cursor

    requests, cursor = tick(None)
    assert requests == []  # no folder yet: nothing to sync

    inbox.mkdir()
    export = inbox / "bookings.csv"
    export.write_text("booking_id\nB1\n")
    (inbox / "upload.csv.part").write_text("half a file")
    requests, cursor = tick(cursor)
    assert len(requests) == 1
    assert requests[0].tags["pms_sync/files"] == "bookings.csv"

    requests, cursor_after = tick(cursor)
    assert requests == []  # unchanged file: no second run
    cursor = cursor_after or cursor

    export.write_text("booking_id\nB1\nB2\n")  # rewritten in place, new size
    requests, cursor = tick(cursor)
    assert len(requests) == 1

    (inbox / "units.csv").write_text("unit_id\nU3\n")
    requests, cursor = tick(cursor)
    assert [r.tags["pms_sync/files"] for r in requests] == ["units.csv"]
    assert set(json.loads(cursor or "{}")) == {"bookings.csv", "units.csv"}


def test_the_landed_file_is_the_runs_input_and_a_file_matching_no_input_starts_no_run(
    two_connections: Path, resources: dict[str, object]
) -> None:
    defs = code_location(two_connections, resources)
    sensor = defs.resolve_sensor_def("city_apartments_drop_folder")
    inbox = two_connections / "apartments" / "inbox"
    inbox.mkdir()
    (inbox / "notes.txt").write_text("not an export")

    with dg.build_sensor_context(cursor=None, definitions=defs) as context:
        ignored = sensor.evaluate_tick(context)
    (inbox / "bookings.csv").write_text("booking_id\nB1\n")
    with dg.build_sensor_context(cursor=ignored.cursor, definitions=defs) as context:
        (request,) = sensor.evaluate_tick(context).run_requests or []

    assert ignored.run_requests == []
    assert request.run_config["ops"] == {
        "city_apartments__mapped_reservations": {
            "config": {"files": {"bookings": str(inbox / "bookings.csv")}}
        }
    }


def test_sensor_notices_a_file_touched_with_the_same_size(
    two_connections: Path, resources: dict[str, object]
) -> None:
    defs = code_location(two_connections, resources)
    sensor = defs.resolve_sensor_def("city_apartments_drop_folder")
    inbox = two_connections / "apartments" / "inbox"
    inbox.mkdir()
    export = inbox / "units.csv"
    export.write_text("unit_id\nU1\n")
    with dg.build_sensor_context(cursor=None, definitions=defs) as context:
        first = sensor.evaluate_tick(context)
    stat = export.stat()
    os.utime(export, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with dg.build_sensor_context(cursor=first.cursor, definitions=defs) as context:
        second = sensor.evaluate_tick(context)
    assert len(second.run_requests or []) == 1
