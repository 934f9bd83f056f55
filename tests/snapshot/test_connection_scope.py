"""Several connections (mappings) writing to one account share one snapshot file: each
reconciles only the records it owns."""

from __future__ import annotations

from pathlib import Path

import duckdb
from snapshot_samples import TODAY, acknowledge_all, batches, unit

from connector.plan import ReconcilePolicy, build_plan
from connector.snapshot import MIGRATIONS, Snapshot, SnapshotStore, migrate

HOTEL = ReconcilePolicy(connection="hotel")
SQL_PMS = ReconcilePolicy(connection="sql_pms")


def sync(snapshot: SnapshotStore, data, policy: ReconcilePolicy):
    """Plan, acknowledge every change and adopt the export, as a successful run does."""
    plan = build_plan(snapshot, data, policy=policy, today=TODAY)
    acknowledge_all(snapshot, plan)
    for entity, batch in data.items():
        snapshot.adopt(entity, batch.records, policy.connection)
    return plan


def test_a_second_connections_full_export_does_not_deactivate_the_first_connections_units(
    snapshot: SnapshotStore,
) -> None:
    sync(snapshot, batches([unit("H1"), unit("H2")]), HOTEL)

    plan = build_plan(snapshot, batches([unit("S1")]), policy=SQL_PMS, today=TODAY)

    assert plan.counts["deactivate"] == 0
    assert list(plan.changes["record_id"]) == ["S1"]


def test_a_connection_still_deactivates_its_own_units_gone_from_its_export(
    snapshot: SnapshotStore,
) -> None:
    sync(snapshot, batches([unit("H1"), unit("H2")]), HOTEL)
    sync(snapshot, batches([unit("S1")]), SQL_PMS)

    plan = build_plan(snapshot, batches([unit("H1")]), policy=HOTEL, today=TODAY)

    assert plan.changes[["record_id", "action"]].values.tolist() == [["H2", "deactivate"]]


def test_a_unit_that_moved_to_another_connection_is_owned_by_the_latest_acknowledger(
    snapshot: SnapshotStore,
) -> None:
    sync(snapshot, batches([unit("H1"), unit("M1")]), HOTEL)
    sync(snapshot, batches([unit("S1"), unit("M1", name="Moved")]), SQL_PMS)

    hotel_plan = build_plan(snapshot, batches([unit("H1")]), policy=HOTEL, today=TODAY)
    sql_plan = build_plan(snapshot, batches([unit("S1")]), policy=SQL_PMS, today=TODAY)

    assert hotel_plan.counts["deactivate"] == 0
    assert sql_plan.changes[["record_id", "action"]].values.tolist() == [["M1", "deactivate"]]


def test_an_unchanged_unit_exported_by_another_connection_changes_owner_without_a_request(
    snapshot: SnapshotStore,
) -> None:
    sync(snapshot, batches([unit("H1"), unit("M1")]), HOTEL)

    moved = sync(snapshot, batches([unit("M1")]), SQL_PMS)
    hotel_plan = build_plan(snapshot, batches([unit("H1")]), policy=HOTEL, today=TODAY)

    assert moved.request_count == 0
    assert hotel_plan.counts["deactivate"] == 0
    owners = snapshot.acknowledged().set_index("record_id")["connection"].to_dict()
    assert owners == {"H1": "hotel", "M1": "sql_pms"}


def test_records_from_before_owners_existed_are_reconciled_by_no_named_connection(
    snapshot_path: Path,
) -> None:
    # A file written by a pms-sync without owners (schema version 2) holding two units.
    snapshot_path.parent.mkdir(parents=True)
    with duckdb.connect(str(snapshot_path)) as connection:
        migrate(connection, MIGRATIONS[:2])
        for unit_id in ("H1", "H2"):
            connection.execute(
                "INSERT INTO acknowledged VALUES ('acc-1', 'accommodation', ?, 'h', '{}', "
                "NULL, NULL, 'active', TIMESTAMP '2026-01-01 00:00:00', NULL)",
                [unit_id],
            )

    with Snapshot.open(snapshot_path) as store:
        owners = store.acknowledged()["connection"]
        named = build_plan(store, batches([unit("S1")]), policy=SQL_PMS, today=TODAY)
        unnamed = build_plan(store, batches([unit("H1")]), policy=ReconcilePolicy(), today=TODAY)

    assert owners.isna().all()
    assert named.counts["deactivate"] == 0
    deactivated = unnamed.changes.loc[unnamed.changes["action"] == "deactivate", "record_id"]
    assert list(deactivated) == ["H2"]


def test_the_mappings_name_is_the_connection_that_owns_its_records() -> None:
    from connector.mapping import load_mapping

    mapping = load_mapping("mappings/hotel/mapping.yaml")

    assert ReconcilePolicy.from_mapping(mapping).connection == mapping.name == "hotel"
