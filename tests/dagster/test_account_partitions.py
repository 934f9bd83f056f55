"""Accounts as a partition dimension (``dagster.partition_by_account``): one run per account
that fails and is re-run on its own, against the real sandbox and a DuckDB snapshot (slow)."""

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from connector.sandbox.testing import SandboxHandle
from connector.snapshot import LockScope, Snapshot
from pms_sync.account_partitions import accounts_definition, partition_key
from pms_sync.assets import SNAPSHOT_POOL
from pms_sync.connections import load_connection
from pms_sync.resources import ServiceResource, SnapshotResource
from tests.dagster.code_location import code_location
from tests.dagster.exports import Export, booking, unit

pytestmark = pytest.mark.slow

BY_ACCOUNT = "  partition_by_account: true\n"
UNITS = [unit(1, "demo"), unit(2, "hotel-a")]
BOOKINGS = [
    booking(1, date(2025, 3, 5), "demo", unit_number=1),
    booking(2, date(2025, 4, 5), "demo", unit_number=1),
    booking(3, date(2025, 3, 8), "hotel-a", unit_number=2),
    booking(4, date(2025, 3, 20), "hotel-a", unit_number=2),
    booking(5, date(2025, 4, 9), "hotel-a", unit_number=2),
]
NIGHT = datetime(2025, 3, 10, 3, 30, tzinfo=UTC)  # nightly window: 2025-02 .. 2026-02


@pytest.fixture
def hotel(tmp_path: Path) -> Export:
    export = Export(tmp_path / "mappings" / "hotel", "hotel")
    export.write(UNITS, BOOKINGS, extra=BY_ACCOUNT)
    return export


def two_accounts_service(
    sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch
) -> ServiceResource:
    """The service with a token per account (the sandbox's ``demo`` and ``hotel-a``); a failed
    step is not retried (the production policy waits 30 s and more): the failure stays."""
    monkeypatch.setattr("pms_sync.assets.SYNC_RETRY", dg.RetryPolicy(max_retries=0))
    monkeypatch.setenv("TEST_HOTEL_A_TOKEN", "hotel-a-token")
    return ServiceResource(
        base_url=sandbox.base_url,
        token="demo-token",
        account_token_env={"hotel-a": "TEST_HOTEL_A_TOKEN"},
        max_attempts=1,
    )


def register_accounts_from_export(defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    """What a data engineer does once: materialize ``hotel/accounts`` (the export's accounts)."""
    result = defs.resolve_job_def("hotel_sync").execute_in_process(
        instance=instance,
        asset_selection=[
            dg.AssetKey(["hotel", "mapped_accommodations"]),
            dg.AssetKey(["hotel", "accounts"]),
        ],
    )
    assert result.success


def nightly_runs(defs: dg.Definitions, instance: dg.DagsterInstance) -> list[dg.RunRequest]:
    schedule = defs.resolve_schedule_def("hotel_nightly")
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=NIGHT)
    requests = schedule.evaluate_tick(context).run_requests
    assert requests is not None
    return list(requests)


def launch(
    defs: dg.Definitions, request: dg.RunRequest, instance: dg.DagsterInstance
) -> dg.ExecuteInProcessResult:
    return defs.resolve_job_def("hotel_sync").execute_in_process(
        tags=request.tags, instance=instance, raise_on_error=False
    )


def partition_metadata(
    instance: dg.DagsterInstance, asset: str, partition: str
) -> dict[str, Any] | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(["hotel", asset]), asset_partitions=[partition]
        ),
        limit=1,
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    metadata = records[0].asset_materialization.metadata
    return {key: value.value for key, value in metadata.items()}


def stays(sandbox: SandboxHandle, account: str) -> set[str]:
    return {record["id"] for record in sandbox.records(account, "reservation")}


def test_the_reservations_are_partitioned_by_account_and_month_with_the_option(
    hotel: Export, resources: dict[str, object]
) -> None:
    defs = code_location(hotel.folder.parent, resources)
    graph = defs.resolve_asset_graph()
    partitions = graph.get(dg.AssetKey(["hotel", "synced_reservations"])).partitions_def

    assert isinstance(partitions, dg.MultiPartitionsDefinition)
    assert partitions.partition_dimension_names == ["account", "month"]
    assert graph.get(dg.AssetKey(["hotel", "synced_accommodations"])).partitions_def is None
    # The backfill of a range of months for two accounts: Dagster's single-run policy groups
    # the partitions into one run per account (the dimension with fewer keys).
    months = ["2025-03", "2025-04", "2025-05"]
    keys = [partition_key(a, m) for a in ("demo", "hotel-a") for m in months]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("hotel_accounts", ["demo", "hotel-a"])
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            subset = partitions.subset_with_partition_keys(keys)
            ranges = subset.get_partition_key_ranges(partitions)
    assert sorted((str(r.start), str(r.end)) for r in ranges) == [
        ("demo|2025-03", "demo|2025-05"),
        ("hotel-a|2025-03", "hotel-a|2025-05"),
    ]


def test_the_mapping_s_lookup_accounts_are_added_by_the_sensor(
    hotel: Export, resources: dict[str, object]
) -> None:
    text = hotel.mapping.read_text().replace(
        "account: account\n",
        "account: {column: account, lookup: hotels}\nlookups:\n  hotels: {BER: demo, MUC: demo-2}\n",
    )
    hotel.mapping.write_text(text)
    defs = code_location(hotel.folder.parent, resources)
    sensor = defs.resolve_sensor_def("hotel_accounts")
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance))

        assert isinstance(result, dg.SensorResult)
        (request,) = result.dynamic_partitions_requests or []
        assert (request.partitions_def_name, sorted(request.partition_keys)) == (
            accounts_definition(load_connection(hotel.mapping)).name,
            ["demo", "demo-2"],
        )


def test_one_run_per_account_fails_and_is_re_run_on_its_own(
    hotel: Export,
    resources: dict[str, object],
    clean_sandbox: SandboxHandle,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = two_accounts_service(clean_sandbox, monkeypatch)
    defs = code_location(hotel.folder.parent, {**resources, "service": service})
    with dg.instance_for_test() as instance:
        register_accounts_from_export(defs, instance)
        assert instance.get_dynamic_partitions("hotel_accounts") == ["demo", "hotel-a"]

        requests = nightly_runs(defs, instance)

        assert [r.tags["pms_sync/account"] for r in requests] == ["demo", "hotel-a"]
        assert requests[0].tags["dagster/asset_partition_range_start"] == "demo|2025-02"
        assert requests[0].tags["dagster/asset_partition_range_end"] == "demo|2026-02"
        assert launch(defs, requests[0], instance).success
        clean_sandbox.set_faults(error_rate=1.0)  # the service fails while hotel-a runs
        failed = launch(defs, requests[1], instance)
        clean_sandbox.set_faults()

        assert not failed.success
        assert stays(clean_sandbox, "demo") == {"B1", "B2"}
        assert stays(clean_sandbox, "hotel-a") == set()
        synced = instance.get_materialized_partitions(dg.AssetKey(["hotel", "synced_reservations"]))
        assert {key.split("|")[0] for key in synced} == {"demo"}
        # Each (account, month) carries its own counts: what that account had in that month.
        march = partition_metadata(instance, "synced_reservations", "demo|2025-03")
        april = partition_metadata(instance, "synced_reservations", "demo|2025-04")
        assert march is not None and april is not None
        assert (march["create"], march["acknowledged"]) == (1, 1)
        assert (april["create"], april["acknowledged"]) == (1, 1)

        rerun = launch(defs, requests[1], instance)

        assert rerun.success
        assert stays(clean_sandbox, "hotel-a") == {"B3", "B4", "B5"}
        assert stays(clean_sandbox, "demo") == {"B1", "B2"}  # demo's run is not repeated
        march_a = partition_metadata(instance, "synced_reservations", "hotel-a|2025-03")
        mapped_a = partition_metadata(instance, "mapped_reservations", "hotel-a|2025-03")
        assert march_a is not None and mapped_a is not None
        assert (march_a["create"], march_a["acknowledged"]) == (2, 2)
        assert mapped_a["records"] == 2
        # demo's partitions still carry demo's own counts, not demo-2's.
        assert partition_metadata(instance, "synced_reservations", "demo|2025-03") == march
        # A run of one account never reads the other's rows as gone (the guard's baseline
        # is per account): a second nightly run of demo alone passes and sends nothing new.
        again = launch(defs, nightly_runs(defs, instance)[0], instance)
        assert again.success
        assert partition_metadata(instance, "synced_reservations", "demo|2025-03")["skip"] == 1


def test_on_postgresql_a_run_of_one_account_syncs_while_another_account_is_written(
    hotel: Export,
    resources: dict[str, object],
    clean_sandbox: SandboxHandle,
    postgres_snapshot_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = two_accounts_service(clean_sandbox, monkeypatch)
    snapshot = SnapshotResource(path=postgres_snapshot_url, lock_timeout=1)
    defs = code_location(
        hotel.folder.parent, {**resources, "service": service, "snapshot": snapshot}
    )
    synced = dg.AssetKey(["hotel", "synced_reservations"])
    # No pool on PostgreSQL: the scope locks keep two runs of one account apart, not Dagster.
    assert defs.resolve_assets_def(synced).op.pool is None
    on_duckdb = code_location(hotel.folder.parent, resources)
    assert on_duckdb.resolve_assets_def(synced).op.pool == SNAPSHOT_POOL
    with dg.instance_for_test() as instance:
        register_accounts_from_export(defs, instance)
        demo, hotel_a = nightly_runs(defs, instance)
        # A writer of demo (another run, the CLI) holds demo's scope of connection hotel.
        held = LockScope("hotel", frozenset({"demo"}))
        with Snapshot.open(postgres_snapshot_url, scope=held, lock_timeout=1):
            other_account = launch(defs, hotel_a, instance)
            same_account = launch(defs, demo, instance)

        assert other_account.success
        assert stays(clean_sandbox, "hotel-a") == {"B3", "B4", "B5"}
        assert not same_account.success  # waited lock_timeout for demo's scope, then failed
        assert stays(clean_sandbox, "demo") == set()
        assert launch(defs, demo, instance).success
        assert stays(clean_sandbox, "demo") == {"B1", "B2"}
