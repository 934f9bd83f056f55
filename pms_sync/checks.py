"""Asset checks on the mapped records, run before anything is sent.

``quarantine_below_threshold`` is blocking: when more than the configured share of a
connection's rows is quarantined (default 1 %), the sync of that entity does not run in that
run, because a mapping that broke would otherwise push a partial picture. ``unit_ids_known``
warns about reservations that reference a unit neither this run nor the snapshot knows.
``cancellations_sent_as_cancelled`` fails (not blocking: the records are already quarantined)
when a reservation status means cancelled in the PMS's words but is not ``CANCELLED``.
The checks of the sync assets (no new dead letters, accounts authenticated) are computed from
the sync's own report in ``pms_sync/sync_checks.py``.
"""

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import dagster as dg
import pandas as pd

from connector.contract import Entity
from connector.pipeline import RunOutcome
from connector.records import MappedRecords, is_status_finding, status_findings, status_message
from pms_sync.assets import SNAPSHOT_POOL, connection_keys, entities_of
from pms_sync.connection_resources import SNAPSHOT
from pms_sync.connections import Connection
from pms_sync.handoff import MappedBatch
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, quarantine_share, quarantined_rows
from pms_sync.partition_reports import partition_check_events, partition_scopes, scoped_records
from pms_sync.resources import SnapshotResource, SyncChecksResource
from pms_sync.storage import OPTIONAL_INPUT
from pms_sync.sync_checks import check_severity

CHECK_QUARANTINE = "quarantine_below_threshold"
CHECK_UNIT_IDS = "unit_ids_known"
CHECK_CANCELLATIONS = "cancellations_sent_as_cancelled"


def build_checks(
    connection: Connection, partitions: dg.PartitionsDefinition, pool: str | None = SNAPSHOT_POOL
) -> list[dg.AssetChecksDefinition]:
    keys = connection_keys(connection.asset_key())
    entities = entities_of(connection)
    checks: list[dg.AssetChecksDefinition] = []
    if Entity.ACCOMMODATION in entities:
        checks.append(_quarantine_check(keys.mapped_accommodations, None))
    if Entity.RESERVATION in entities:
        checks.append(_quarantine_check(keys.mapped_reservations, partitions))
        checks.append(_cancellations_check(keys.mapped_reservations, partitions))
        checks.append(
            _unit_ids_check(connection, partitions, Entity.ACCOMMODATION in entities, pool)
        )
    return checks


def month_batches(
    context: dg.AssetCheckExecutionContext,
    partitions: dg.PartitionsDefinition,
    batch: MappedBatch,
) -> dict[str, MappedRecords]:
    """The run's mapped reservations, partition by partition (month, or account and month;
    rows without a check-in in every month)."""
    scopes = partition_scopes(context.op_execution_context.partition_keys, partitions)
    return scoped_records(batch, scopes)


def _per_month(
    context: dg.AssetCheckExecutionContext, results: dict[str, dg.AssetCheckResult]
) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
    spec = context.check_specs[0]
    yield from partition_check_events(context, results.items(), {spec.key: spec})


def _quarantine_check(
    key: dg.AssetKey, partitions: dg.PartitionsDefinition | None
) -> dg.AssetChecksDefinition:
    options: dict[str, Any] = {
        "asset": key,
        "name": CHECK_QUARANTINE,
        "blocking": True,
        "partitions_def": partitions,
        "description": (
            "The share of input rows quarantined by validation stays at or below the threshold "
            "(resource sync_checks.max_quarantine_share, default 1 %); above it nothing is "
            "pushed. A partitioned asset is checked month by month: one month over the "
            "threshold holds back the run's push."
        ),
    }
    if partitions is not None:
        # Dagster's stub types a check as returning one result; this one yields one per month.
        @dg.asset_check(**options)  # type: ignore[arg-type]
        def quarantine_below_threshold_per_month(
            context: dg.AssetCheckExecutionContext,
            mapped: MappedBatch,
            sync_checks: SyncChecksResource,
        ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
            months = month_batches(context, partitions, mapped)
            yield from _per_month(
                context,
                {
                    month: _quarantine_result(key, batch, sync_checks)
                    for month, batch in months.items()
                },
            )

        return quarantine_below_threshold_per_month

    @dg.asset_check(**options)
    def quarantine_below_threshold(
        mapped: MappedBatch, sync_checks: SyncChecksResource
    ) -> dg.AssetCheckResult:
        return _quarantine_result(key, mapped.records, sync_checks)

    return quarantine_below_threshold


def _quarantine_result(
    key: dg.AssetKey, records: MappedRecords, sync_checks: SyncChecksResource
) -> dg.AssetCheckResult:
    # Statuses that may mean cancelled have their own check, which does not hold the rest back.
    records = replace(
        records, quarantine=records.quarantine.loc[~is_status_finding(records.quarantine)]
    )
    share = quarantine_share(records)
    limit = sync_checks.max_quarantine_share
    passed = share <= limit
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_QUARANTINE,
        passed=passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=None
        if passed
        else (
            f"{share:.1%} of the rows are quarantined, above the {limit:.1%} limit: the "
            "push is held back. Read the quarantine sample in the asset's metadata, fix the "
            "export or the mapping, or raise sync_checks.max_quarantine_share."
        ),
        metadata={
            "quarantine_share": dg.MetadataValue.float(round(share, 6)),
            "max_quarantine_share": dg.MetadataValue.float(limit),
            "quarantined_rows": dg.MetadataValue.int(quarantined_rows(records)),
            "records": dg.MetadataValue.int(len(records.records)),
        },
    )


def _cancellations_check(
    key: dg.AssetKey, partitions: dg.PartitionsDefinition
) -> dg.AssetChecksDefinition:
    @dg.asset_check(  # type: ignore[arg-type]
        asset=key,
        name=CHECK_CANCELLATIONS,
        partitions_def=partitions,
        description=(
            "No reservation status means cancelled in the PMS's words (Cancelled, storniert, "
            "annulé, CXL, a numeric code, …) without being CANCELLED, the only status the "
            "service reads as a cancellation. Such records are quarantined, not sent as live "
            "stays; the check fails naming each value, its records and the map: to add to "
            "the mapping (docs/mapping.md). The rest of the sync goes on."
        ),
    )
    def cancellations_sent_as_cancelled(
        context: dg.AssetCheckExecutionContext, mapped: MappedBatch
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
        months = month_batches(context, partitions, mapped)
        fix = mapped.records.status_fix
        yield from _per_month(
            context,
            {month: _cancellations_result(key, batch, fix) for month, batch in months.items()},
        )

    return cancellations_sent_as_cancelled


def _cancellations_result(
    key: dg.AssetKey, batch: MappedRecords, fix: str | None
) -> dg.AssetCheckResult:
    findings = status_findings(batch.quarantine)
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_CANCELLATIONS,
        passed=not findings,
        severity=check_severity(RunOutcome.STATUS_FINDINGS),
        description=status_message(findings, fix) if findings else None,
        metadata={
            "records": dg.MetadataValue.int(sum(item.records for item in findings)),
            "values": dg.MetadataValue.md(
                markdown_table(
                    ("status", "kind", "records"),
                    [(item.value, item.kind, item.records) for item in findings],
                )
            ),
        },
    )


def unit_references(reservations: pd.DataFrame) -> pd.DataFrame:
    """(account_id, record_id, unit_id) for every unit a reservation's payload references.

    Reservations carried over by fingerprint (no payload) were checked when they were mapped."""
    reservations = reservations.loc[reservations["payload"].notna()]
    rows = [
        (account, record, str(unit.get("unitId")))
        for account, record, payload in zip(
            reservations["account_id"],
            reservations["record_id"],
            reservations["payload"],
            strict=True,
        )
        for unit in json.loads(payload).get("unitReservations") or []
    ]
    return pd.DataFrame(rows, columns=["account_id", "record_id", "unit_id"])


def _known_units(
    snapshot: SnapshotResource, accommodations: MappedBatch | None
) -> set[tuple[str, str]]:
    with snapshot.read() as store:
        acknowledged = store.acknowledged(Entity.ACCOMMODATION)
    known = set(zip(acknowledged["account_id"], acknowledged["record_id"], strict=True))
    if accommodations is not None:
        records = accommodations.records.records
        known |= set(zip(records["account_id"], records["record_id"], strict=True))
    return known


def _unit_ids_per_month(
    context: dg.AssetCheckExecutionContext,
    partitions: dg.PartitionsDefinition,
    mapped: MappedBatch,
    snapshot: SnapshotResource,
    accommodations: MappedBatch | None,
) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
    known = _known_units(snapshot, accommodations)
    key = context.check_specs[0].asset_key
    months = month_batches(context, partitions, mapped)
    yield from _per_month(
        context, {month: _unit_ids_result(key, batch, known) for month, batch in months.items()}
    )


def _unit_ids_result(
    key: dg.AssetKey, batch: MappedRecords, known: set[tuple[str, str]]
) -> dg.AssetCheckResult:
    references = unit_references(batch.records)
    is_unknown = pd.Series(
        [
            (account, unit) not in known
            for account, unit in zip(references["account_id"], references["unit_id"], strict=True)
        ],
        index=references.index,
        dtype=bool,
    )
    unknown = references.loc[is_unknown]
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_UNIT_IDS,
        passed=unknown.empty,
        # The service refuses such a reservation (400) and it is dead-lettered; the others go.
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "unknown_unit_references": dg.MetadataValue.int(len(unknown)),
            "reservations_affected": dg.MetadataValue.int(int(unknown["record_id"].nunique())),
            "sample": dg.MetadataValue.md(
                markdown_table(
                    ("account", "reservation", "unitId"),
                    unknown.head(SAMPLE_ROWS).itertuples(index=False),
                )
            ),
        },
    )


def _unit_ids_check(
    connection: Connection,
    partitions: dg.PartitionsDefinition,
    has_accommodations: bool,
    pool: str | None,
) -> dg.AssetChecksDefinition:
    keys = connection_keys(connection.asset_key())
    options: dict[str, Any] = {
        "asset": keys.mapped_reservations,
        "name": CHECK_UNIT_IDS,
        "partitions_def": partitions,
        "pool": pool,
        "required_resource_keys": connection.resources.keys(SNAPSHOT),
        "description": (
            "Every reservation's unitId is a known accommodation of its account: mapped in this "
            "run or acknowledged by the service before. Unknown units would be refused (400)."
        ),
    }
    if has_accommodations:

        @dg.asset_check(  # type: ignore[arg-type]
            **options,
            additional_ins={
                "accommodations": dg.AssetIn(
                    keys.mapped_accommodations, metadata={OPTIONAL_INPUT: True}
                )
            },
        )
        def unit_ids_known(
            context: dg.AssetCheckExecutionContext,
            mapped: MappedBatch,
            accommodations: MappedBatch | None,
        ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
            snapshot = connection.resources.snapshot_of(context)
            yield from _unit_ids_per_month(context, partitions, mapped, snapshot, accommodations)

        return unit_ids_known

    @dg.asset_check(**options)  # type: ignore[arg-type]
    def unit_ids_known_from_snapshot(
        context: dg.AssetCheckExecutionContext, mapped: MappedBatch
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
        snapshot = connection.resources.snapshot_of(context)
        yield from _unit_ids_per_month(context, partitions, mapped, snapshot, None)

    return unit_ids_known_from_snapshot
