"""Asset checks on the mapped records, run before anything is sent.

``quarantine_below_threshold`` is blocking: when more than the configured share of a
connection's rows is quarantined (default 1 %), the sync of that entity does not run in that
run, because a mapping that broke would otherwise push a partial picture. ``unit_ids_known``
warns about reservations that reference a unit neither this run nor the snapshot knows.
The checks of the sync assets (no new dead letters, accounts authenticated) are computed from
the sync's own report in ``assets/assets.py``.
"""

import json

import dagster as dg
import pandas as pd

from connector.contract import Entity
from pms_sync.assets import SNAPSHOT_POOL, connection_keys, entities_of
from pms_sync.connections import Connection
from pms_sync.handoff import MappedBatch
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, quarantine_share, quarantined_rows
from pms_sync.resources import SnapshotResource, SyncChecksResource

CHECK_QUARANTINE = "quarantine_below_threshold"
CHECK_UNIT_IDS = "unit_ids_known"


def build_checks(
    connection: Connection, partitions: dg.PartitionsDefinition
) -> list[dg.AssetChecksDefinition]:
    keys = connection_keys(connection.name)
    entities = entities_of(connection)
    checks: list[dg.AssetChecksDefinition] = []
    if Entity.ACCOMMODATION in entities:
        checks.append(_quarantine_check(keys.mapped_accommodations, None))
    if Entity.RESERVATION in entities:
        checks.append(_quarantine_check(keys.mapped_reservations, partitions))
        checks.append(_unit_ids_check(connection, partitions, Entity.ACCOMMODATION in entities))
    return checks


def _quarantine_check(
    key: dg.AssetKey, partitions: dg.PartitionsDefinition | None
) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name=CHECK_QUARANTINE,
        blocking=True,
        partitions_def=partitions,
        description=(
            "The share of input rows quarantined by validation stays at or below the threshold "
            "(resource sync_checks.max_quarantine_share, default 1 %); above it nothing is pushed."
        ),
    )
    def quarantine_below_threshold(
        mapped: MappedBatch, sync_checks: SyncChecksResource
    ) -> dg.AssetCheckResult:
        share = quarantine_share(mapped.records)
        limit = sync_checks.max_quarantine_share
        passed = share <= limit
        return dg.AssetCheckResult(
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
                "quarantined_rows": dg.MetadataValue.int(quarantined_rows(mapped.records)),
                "records": dg.MetadataValue.int(len(mapped.records.records)),
            },
        )

    return quarantine_below_threshold


def unit_references(reservations: pd.DataFrame) -> pd.DataFrame:
    """(account_id, record_id, unit_id) for every unit a reservation's payload references."""
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


def _unit_ids_result(
    mapped: MappedBatch, snapshot: SnapshotResource, accommodations: MappedBatch | None
) -> dg.AssetCheckResult:
    with snapshot.open() as store:
        acknowledged = store.acknowledged(Entity.ACCOMMODATION)
    known = set(zip(acknowledged["account_id"], acknowledged["record_id"], strict=True))
    if accommodations is not None:
        records = accommodations.records.records
        known |= set(zip(records["account_id"], records["record_id"], strict=True))
    references = unit_references(mapped.records.records)
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
    connection: Connection, partitions: dg.PartitionsDefinition, has_accommodations: bool
) -> dg.AssetChecksDefinition:
    keys = connection_keys(connection.name)
    options = {
        "asset": keys.mapped_reservations,
        "name": CHECK_UNIT_IDS,
        "partitions_def": partitions,
        "pool": SNAPSHOT_POOL,
        "description": (
            "Every reservation's unitId is a known accommodation of its account: mapped in this "
            "run or acknowledged by the service before. Unknown units would be refused (400)."
        ),
    }
    if has_accommodations:

        @dg.asset_check(
            **options, additional_ins={"accommodations": dg.AssetIn(keys.mapped_accommodations)}
        )
        def unit_ids_known(
            mapped: MappedBatch, accommodations: MappedBatch, snapshot: SnapshotResource
        ) -> dg.AssetCheckResult:
            return _unit_ids_result(mapped, snapshot, accommodations)

        return unit_ids_known

    @dg.asset_check(**options)
    def unit_ids_known_from_snapshot(
        mapped: MappedBatch, snapshot: SnapshotResource
    ) -> dg.AssetCheckResult:
        return _unit_ids_result(mapped, snapshot, None)

    return unit_ids_known_from_snapshot
