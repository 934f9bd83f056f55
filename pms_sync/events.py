"""Events the service sent for one connection: ``<name>/service_events``, and the sensor that
materializes it when the receiver (``pms-sync receive``) has stored new ones.

The receiver keeps events in its own DuckDB file (``events.duckdb`` beside the snapshot, or
``PMS_SYNC_EVENTS``). Each materialization takes the connection's events received after the
previous materialization (its ``upto_seq``) and, where the mapping declares ``events:
destination:``, writes them back. Exists for connections whose mapping has an ``events:``
section.
"""

from pathlib import Path

import dagster as dg

from connector.errors import PmsSyncError
from connector.events import events_store_path, last_event_seq, new_events, write_back_events
from pms_sync.connections import Connection
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, masked_metadata
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
        description=(
            f"Outgoing events of the service for {mapping.name} (reservationCreated, "
            "guestLinkOpenedCheckIn, …), as the receiver stored them, once each"
            + (", written back to the PMS." if destinations else ".")
        ),
    )
    def service_events(
        context: dg.AssetExecutionContext, snapshot: SnapshotResource
    ) -> dg.MaterializeResult:
        store = events_store_path(Path(snapshot.path))
        after = _previous_upto(context, key)
        tag = context.run.tags.get(UPTO_TAG)
        upto = int(tag) if tag and tag.isdigit() else None
        found = new_events(store, receiver_path, after, upto_seq=upto)
        metadata: dict[str, object] = {
            "received": dg.MetadataValue.int(len(found.events)),
            "after_seq": dg.MetadataValue.int(after),
            "upto_seq": dg.MetadataValue.int(found.upto_seq),
            "redeliveries": dg.MetadataValue.int(
                int(found.events["deliveries"].sum() - len(found.events))
                if len(found.events)
                else 0
            ),
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
        writes = [
            write_back_events(
                store,
                receiver_path,
                destination,
                base_dir=mapping.base_dir,
                after_seq=after,
                upto_seq=found.upto_seq,
            )
            for destination in (destinations if len(found.events) else [])
        ]
        if destinations:
            metadata["written"] = dg.MetadataValue.int(max((w.rows for w in writes), default=0))
            metadata["destination"] = dg.MetadataValue.text(
                "; ".join(write.destination for write in writes) or "nothing new to write"
            )
        return dg.MaterializeResult(metadata=masked_metadata(metadata))

    job = dg.define_asset_job(
        f"{connection.name}_events",
        selection=dg.AssetSelection.assets(key),
        description=f"Take in the events the receiver stored for {mapping.name}.",
        tags={"pms_sync/connection": connection.name},
    )

    @dg.sensor(
        name=f"{connection.name}_service_events",
        job=job,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Materializes {key.to_user_string()} when the receiver has stored new events "
            f"posted to /events/{receiver_path}."
        ),
    )
    def events_sensor(
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

    return dg.Definitions(assets=[service_events], jobs=[job], sensors=[events_sensor])


def _previous_upto(context: dg.AssetExecutionContext, key: dg.AssetKey) -> int:
    """The ``upto_seq`` of the asset's latest materialization: where this one starts."""
    latest = context.instance.get_latest_materialization_event(key)
    if latest is None or latest.asset_materialization is None:
        return 0
    value = latest.asset_materialization.metadata.get("upto_seq")
    return int(value.value) if value is not None and isinstance(value.value, int) else 0
