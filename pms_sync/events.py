"""Events the service sent for one connection: ``<name>/service_events``, and the sensor that
materializes it when the receiver (``pms-sync receive``) has stored new ones.

The receiver keeps events in its own DuckDB file (``events.duckdb`` beside the snapshot, or
``PMS_SYNC_EVENTS``). Where the mapping declares ``events: destination:``, each
materialization writes every destination the events it does not hold yet, through
``connector.events.write_new_events`` like ``pms-sync events write``: the cursors are kept in the
events store, shared by both. Without a destination it reports the events received after its
previous materialization (its ``upto_seq``). Exists for connections whose mapping has an
``events:`` section.
"""

from pathlib import Path

import dagster as dg

from connector.errors import PmsSyncError
from connector.events import events_store_path, last_event_seq, new_events, write_new_events
from pms_sync.connection_resources import SNAPSHOT
from pms_sync.connections import Connection
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, masked_metadata, masked_text
from pms_sync.resources import SnapshotResource

UPTO_TAG = "pms_sync/events_upto"
"""Run tag of a sensor's run: the last event (seq) it was started for."""
RESOURCE_CHARS = 120


def build_events_definitions(connection: Connection) -> dg.Definitions:
    mapping = connection.mapping
    if mapping.events is None:
        return dg.Definitions()
    key = connection.asset_key("service_events")
    destinations = mapping.events.destinations
    receiver_path = connection.name

    @dg.asset(
        key=key,
        group_name=connection.name,
        kinds={"duckdb"},
        required_resource_keys=connection.resources.keys(SNAPSHOT),
        description=(
            f"Outgoing events of the service for {mapping.name} (reservationCreated, "
            "guestLinkOpenedCheckIn, …), as the receiver stored them, once each"
            + (", written back to the PMS." if destinations else ".")
        ),
    )
    def service_events(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        store = events_store_path(Path(connection.resources.snapshot_of(context).path))
        tag = context.run.tags.get(UPTO_TAG)
        upto = int(tag) if tag and tag.isdigit() else None
        report = None
        if destinations:
            # The cursors in the store say what each destination holds, whoever wrote it
            # (this asset or `pms-sync events write`): nothing is written twice.
            report = write_new_events(
                store, receiver_path, destinations, base_dir=mapping.base_dir, upto_seq=upto
            )
            found = report.found
        else:
            found = new_events(store, receiver_path, _previous_upto(context, key), upto_seq=upto)
        metadata: dict[str, object] = {
            "received": dg.MetadataValue.int(len(found.events)),
            "after_seq": dg.MetadataValue.int(found.after_seq),
            "upto_seq": dg.MetadataValue.int(found.upto_seq),
            "redeliveries": dg.MetadataValue.int(found.redeliveries),
            "by_event": dg.MetadataValue.md(
                markdown_table(("event", "received"), found.counts.items())
            ),
            "sample": dg.MetadataValue.md(
                markdown_table(
                    ("seq", "event", "account", "resource"),
                    (
                        (row.seq, row.event, row.account_id, str(row.resource)[:RESOURCE_CHARS])
                        for row in found.events.head(SAMPLE_ROWS).itertuples(index=False)
                    ),
                )
            ),
        }
        if report is not None:
            metadata["written"] = dg.MetadataValue.int(report.written)
            metadata["destination"] = dg.MetadataValue.text(
                "; ".join(w.destination for w in report.writes if w.upto_seq > w.after_seq)
                or "nothing new to write"
            )
            if report.errors:
                raise dg.Failure(
                    description=masked_text("; ".join(report.errors)),
                    metadata=masked_metadata(metadata),
                )
        return dg.MaterializeResult(metadata=masked_metadata(metadata))

    job = dg.define_asset_job(
        f"{connection.name}_events",
        selection=dg.AssetSelection.assets(key),
        description=f"Take in the events the receiver stored for {mapping.name}.",
        tags={"pms_sync/connection": connection.name},
    )

    def tick(
        context: dg.SensorEvaluationContext, snapshot: SnapshotResource
    ) -> dg.SensorResult | dg.SkipReason:
        store = events_store_path(Path(snapshot.path))
        try:
            last = last_event_seq(store, receiver_path)
        except PmsSyncError as error:  # the receiver is writing a batch: next tick
            return dg.SkipReason(f"events store busy: {error}")
        seen = int(context.cursor) if context.cursor and context.cursor.isdigit() else 0
        if last <= seen:
            return dg.SkipReason(f"no new event for {receiver_path} in {store}")
        # One run per new high-water mark: a re-evaluated tick never launches it twice.
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"{connection.name}:events:{last}", tags={UPTO_TAG: str(last)}
                )
            ],
            cursor=str(last),
        )

    sensor = dg.sensor(
        name=f"{connection.name}_service_events",
        job=job,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Materializes {key.to_user_string()} when the receiver has stored new events "
            f"posted to /events/{receiver_path}."
        ),
    )
    # A sensor's resources are its parameters (a sensor called directly passes each required
    # key as one): the shared snapshot is one, a component's own is a value and needs none.
    if connection.resources.snapshot is None:

        def shared_snapshot(
            context: dg.SensorEvaluationContext, snapshot: SnapshotResource
        ) -> dg.SensorResult | dg.SkipReason:
            return tick(context, snapshot)

        events_sensor = sensor(shared_snapshot)
    else:

        def own_snapshot(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
            return tick(context, connection.resources.snapshot_of(context))

        events_sensor = sensor(own_snapshot)

    return dg.Definitions(assets=[service_events], jobs=[job], sensors=[events_sensor])


def _previous_upto(context: dg.AssetExecutionContext, key: dg.AssetKey) -> int:
    """The ``upto_seq`` of the asset's latest materialization: where this one starts."""
    latest = context.instance.get_latest_materialization_event(key)
    if latest is None or latest.asset_materialization is None:
        return 0
    value = latest.asset_materialization.metadata.get("upto_seq")
    return int(value.value) if value is not None and isinstance(value.value, int) else 0
