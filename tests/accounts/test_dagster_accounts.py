"""Dagster: the Open API client is a resource, each connection has an ``accounts`` asset, and
its check fails when the export names a hotel the service does not have."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from connector.sandbox.testing import MANY_CLIENT_ID, MANY_CLIENT_SECRET, SandboxHandle
from pms_sync.account_partitions import accounts_definition, rectangle_tags
from pms_sync.connections import load_connection
from pms_sync.resources import (
    IO_MANAGER_KEY,
    OpenApiResource,
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)
from pms_sync.storage import MappedRecordsIOManager
from tests.accounts.chain import ChainExport, account, booking, hotel, unit
from tests.dagster.code_location import code_location


def resources(chain: SandboxHandle, state: Path) -> dict[str, object]:
    open_api = OpenApiResource(client_id=MANY_CLIENT_ID, client_secret=MANY_CLIENT_SECRET)
    return {
        "open_api": open_api,
        "service": ServiceResource(base_url=chain.base_url, open_api=open_api),
        "snapshot": SnapshotResource(path=str(state / "snapshot.duckdb"), lock_timeout=10),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(),
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(state / "io")),
    }


def materialized(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    (materialization, *_) = result.asset_materializations_for_node(f"chain__{asset}")
    return {key: value.value for key, value in materialization.metadata.items()}


def check_passed(result: dg.ExecuteInProcessResult, name: str) -> bool:
    [passed] = [
        event.event_specific_data.passed
        for event in result.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
        and event.event_specific_data.check_name == name
    ]
    return bool(passed)


def test_the_nightly_job_discovers_the_hotels_and_flags_the_one_the_service_lacks(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    rows = [unit(hotel(n), 1) for n in range(1, 101)] + [unit("HOTEL-999", 1)]
    ChainExport(tmp_path / "mappings" / "chain").write(rows)
    defs = code_location(tmp_path / "mappings", resources(chain, tmp_path))

    result = defs.resolve_job_def("chain_sync").execute_in_process(raise_on_error=False)

    assert result.success
    found = materialized(result, "accounts")
    assert (found["accounts_on_service"], found["accounts_in_export"]) == (120, 101)
    assert (found["accounts_found"], found["accounts_unknown"]) == (100, 1)
    assert found["accounts_without_rows"] == 20
    assert "HOTEL-999" in found["accounts"]
    assert check_passed(result, "accounts_known") is False
    synced = materialized(result, "synced_accommodations")
    assert (synced["acknowledged"], synced["unknown_external_ids"]) == (100, 1)
    assert {r["accountId"] for r in chain.records()} == {account(n) for n in range(1, 101)}


def test_without_an_open_api_client_the_accounts_asset_says_so(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    ChainExport(tmp_path / "mappings" / "chain").write([unit(hotel(1), 1)])
    given = {**resources(chain, tmp_path), "service": ServiceResource(base_url=chain.base_url)}
    defs = code_location(tmp_path / "mappings", given)

    result = defs.resolve_job_def("chain_sync").execute_in_process(
        raise_on_error=False,
        asset_selection=[
            dg.AssetKey(["chain", "mapped_accommodations"]),
            dg.AssetKey(["chain", "accounts"]),
        ],
    )

    assert materialized(result, "accounts")["open_api_client"] == "not configured"
    assert chain.count() == 0


def partition_metadata(instance: dg.DagsterInstance, asset: str, partition: str) -> dict[str, Any]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(["chain", asset]), asset_partitions=[partition]
        ),
        limit=1,
    ).records
    assert records and records[0].asset_materialization is not None, partition
    metadata = records[0].asset_materialization.metadata
    return {key: value.value for key, value in metadata.items()}


def test_a_run_of_several_hotels_named_by_external_id_gives_each_partition_its_own_counts(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    # Partition keys are the export's external ids; the sync's report names the account ids
    # they resolve to. A run over both hotels must still split its counts per hotel and month.
    export = ChainExport(tmp_path / "mappings" / "chain")
    # A run of one month and both hotels (a rectangle of partitions is one range of keys).
    next_month = (date.today().replace(day=1) + timedelta(days=32)).replace(day=1)
    ahead = (next_month - date.today()).days
    stays = [(hotel(1), 1, ahead + 2), (hotel(2), 1, ahead + 3), (hotel(2), 2, ahead + 9)]
    export.write(
        [unit(hotel(1), 1), unit(hotel(2), 1)],
        [booking(code, number, days) for code, number, days in stays],
    )
    export.mapping.write_text(
        export.mapping.read_text() + "dagster:\n  partition_by_account: true\n"
    )
    defs = code_location(tmp_path / "mappings", resources(chain, tmp_path))
    month = f"{next_month:%Y-%m}"
    expected = {f"{hotel(1)}|{month}": 1, f"{hotel(2)}|{month}": 2}
    connection = load_connection(export.mapping)

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(accounts_definition(connection).name, [hotel(1), hotel(2)])
        tags = rectangle_tags(dg.PartitionKeyRange(month, month), [hotel(1), hotel(2)])
        result = defs.resolve_job_def("chain_sync").execute_in_process(
            instance=instance, tags=tags, raise_on_error=False
        )

        assert result.success
        assert {r["id"] for r in chain.records(account(2), "reservation")} == {
            f"{hotel(2)}-B1",
            f"{hotel(2)}-B2",
        }
        for key, stays_of_hotel in expected.items():
            synced = partition_metadata(instance, "synced_reservations", key)
            counts = (synced["create"], synced["acknowledged"])
            assert counts == (stays_of_hotel, stays_of_hotel), key
            assert partition_metadata(instance, "mapped_reservations", key)["records"] == (
                stays_of_hotel
            )
