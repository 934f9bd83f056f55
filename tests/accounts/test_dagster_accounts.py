"""Dagster: the Open API client is a resource, each connection has an ``accounts`` asset, and
its check fails when the export names a hotel the service does not have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from connector.sandbox.testing import MANY_CLIENT_ID, MANY_CLIENT_SECRET, SandboxHandle
from pms_sync.factory import build_definitions
from pms_sync.resources import (
    IO_MANAGER_KEY,
    OpenApiResource,
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)
from pms_sync.storage import MappedRecordsIOManager
from tests.accounts.chain import ChainExport, account, hotel, unit


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
    defs = build_definitions(tmp_path / "mappings", resources(chain, tmp_path))

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
    defs = build_definitions(tmp_path / "mappings", given)

    result = defs.resolve_job_def("chain_sync").execute_in_process(
        raise_on_error=False,
        asset_selection=[
            dg.AssetKey(["chain", "mapped_accommodations"]),
            dg.AssetKey(["chain", "accounts"]),
        ],
    )

    assert materialized(result, "accounts")["open_api_client"] == "not configured"
    assert chain.count() == 0
