"""Per-partition results of a run over several months: metadata and check results per month.

The reservations' assets run a contiguous range of months as one step (a single-run backfill,
the nightly window). Dagster records one materialization per month; each gets that month's own
counts through ``context.add_asset_metadata(..., partition_key=month)`` (the sync's report split
by ``connector.pipeline._windowed_report``), and each check gets one evaluation per month, emitted as
``AssetCheckEvaluation(partition=month)``: an ``AssetCheckResult`` of a range run carries no
partition, and the UI would show the months' checks as skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pandas as pd
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from connector.records import DateWindow, MappedRecords
from connector.safety.guard import SUCCESSFUL_RUN_STATUSES
from pms_sync.account_partitions import account_of
from pms_sync.handoff import MappedBatch
from pms_sync.partitions import window_of

ANOMALY_COUNTS_KEY = "anomaly_counts"
"""Metadata of a partition: per account, the counts the ``count_anomalies`` check compares."""


@dataclass(frozen=True)
class PartitionScope:
    """What one partition of a run holds: the check-in window of its month and, with account
    partitions, its account (as the export names it)."""

    window: DateWindow
    account: str | None = None


def partition_scopes(
    keys: Iterable[str], partitions: dg.PartitionsDefinition | None
) -> dict[str, PartitionScope]:
    """Every partition (a month, or an account and a month) of the run, with its scope."""
    assert isinstance(partitions, dg.TimeWindowPartitionsDefinition | dg.MultiPartitionsDefinition)
    return {
        key: PartitionScope(
            window_of(partitions.time_window_for_partition_key(key)), account_of(key)
        )
        for key in keys
    }


def scoped_records(
    batch: MappedBatch, scopes: Mapping[str, PartitionScope]
) -> dict[str, MappedRecords]:
    """Each partition's part of the run's mapped records, the batch split by month once."""
    by_window = batch.by_window(scope.window for scope in scopes.values())
    return {
        key: (
            by_window[scope.window]
            if scope.account is None
            else by_window[scope.window].of_accounts({scope.account})
        )
        for key, scope in scopes.items()
    }


def partition_windows(context: dg.AssetExecutionContext) -> dict[str, PartitionScope]:
    """Every partition of the asset's run, with its scope."""
    return partition_scopes(context.partition_keys, context.assets_def.partitions_def)


def add_partition_metadata(
    context: dg.AssetExecutionContext, by_partition: Mapping[str, Mapping[str, Any]]
) -> None:
    """Each month's own metadata on its materialization (the run's stays on all of them)."""
    for key, metadata in by_partition.items():
        context.add_asset_metadata(dict(metadata), partition_key=key)


def partition_check_events(
    context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
    results: Iterable[tuple[str, dg.AssetCheckResult]],
    specs: Mapping[dg.AssetCheckKey, dg.AssetCheckSpec],
) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
    """One evaluation per (partition, check), then the checks' outputs (one each).

    Each evaluation points at the materialization of its own partition, so the UI lists it
    under that partition's latest materialization.
    """
    instance = context.instance
    results = list(results)
    targets = _latest_materializations(
        instance, {(result.asset_key, partition) for partition, result in results}
    )
    done: list[dg.AssetCheckKey] = []
    for partition, result in results:
        asset_key = result.asset_key
        assert asset_key is not None and result.check_name is not None
        check_key = dg.AssetCheckKey(asset_key, result.check_name)
        if (asset_key, partition) not in targets:
            targets[(asset_key, partition)] = _target(instance, asset_key, partition)
        yield dg.AssetCheckEvaluation(
            asset_key=asset_key,
            check_name=result.check_name,
            passed=result.passed,
            metadata=result.metadata,
            severity=result.severity,
            description=result.description,
            blocking=specs[check_key].blocking,
            partition=partition,
            target_materialization_data=targets[(asset_key, partition)],
        )
        if check_key not in done:
            done.append(check_key)
    layer = context.op_execution_context.job_def.asset_layer
    for check_key in done:
        output = layer.get_op_output_name(check_key)
        if output is not None:
            yield dg.Output(None, output_name=output)


def _latest_materializations(
    instance: dg.DagsterInstance, wanted: set[tuple[dg.AssetKey | None, str]]
) -> dict[tuple[dg.AssetKey, str], AssetCheckEvaluationTargetMaterializationData | None]:
    """The latest materialization of each (asset, partition), one query per asset.

    A step's checks follow its own materializations of those partitions, so the newest
    records, one per partition, are found among as many records as partitions; a partition
    not among them is looked up alone (``_target``).
    """
    partitions: dict[dg.AssetKey, set[str]] = {}
    for asset_key, partition in wanted:
        if asset_key is not None:
            partitions.setdefault(asset_key, set()).add(partition)
    found: dict[tuple[dg.AssetKey, str], AssetCheckEvaluationTargetMaterializationData | None] = {}
    for asset_key, keys in partitions.items():
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=sorted(keys)),
            limit=len(keys),
        ).records
        for record in records:  # newest first
            key = record.partition_key
            if key is not None and (asset_key, key) not in found:
                found[(asset_key, key)] = _target_data(record)
    return found


def _target(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str
) -> AssetCheckEvaluationTargetMaterializationData | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition]), limit=1
    ).records
    return _target_data(records[0]) if records else None


def _target_data(record: Any) -> AssetCheckEvaluationTargetMaterializationData:
    return AssetCheckEvaluationTargetMaterializationData(
        run_id=record.event_log_entry.run_id,
        storage_id=record.storage_id,
        timestamp=record.timestamp,
    )


def partition_history(
    context: dg.AssetExecutionContext, asset_key: dg.AssetKey, partition: str, runs: int
) -> pd.DataFrame:
    """The counts of this partition's earlier successful syncs, per account, newest first
    (the columns of ``connector.safety.anomalies.history``): a month compared with itself."""
    columns = ["account_id", "started_at", "extracted", "changed", "acknowledged"]
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition]),
        limit=runs * 4,
    ).records
    rows: list[dict[str, Any]] = []
    seen = 0
    for record in records:
        if record.event_log_entry.run_id == context.run.run_id:
            continue
        materialization = record.asset_materialization
        metadata = materialization.metadata if materialization else {}
        status = metadata.get("status")
        counts = metadata.get(ANOMALY_COUNTS_KEY)
        if status is None or counts is None or status.value not in SUCCESSFUL_RUN_STATUSES:
            continue
        started = datetime.fromtimestamp(record.timestamp, UTC).replace(tzinfo=None)
        for account, values in dict(counts.value).items():
            rows.append({"account_id": account, "started_at": started, **values})
        seen += 1
        if seen >= runs:
            break
    frame = pd.DataFrame(rows, columns=columns)
    frame = frame[frame["extracted"] > 0] if len(frame) else frame
    return frame.sort_values("started_at", ascending=False).reset_index(drop=True)


def anomaly_counts_metadata(counts: Iterable[Any]) -> dg.JsonMetadataValue:
    """Per account: extracted, changed and acknowledged (``CurrentCounts`` of the partition)."""
    return dg.MetadataValue.json(
        json.loads(
            json.dumps(
                {
                    c.account_id: {
                        "extracted": c.extracted,
                        "changed": c.changed,
                        "acknowledged": c.acknowledged,
                    }
                    for c in counts
                }
            )
        )
    )
