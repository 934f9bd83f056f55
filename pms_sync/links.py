"""Guest links of one connection's upcoming arrivals: ``<name>/guest_links``.

Downstream of the synced reservations: after a sync, the links of the reservations checking
in within the mapping's ``links.days_ahead`` (not cancelled) are fetched from the Open API,
soonest first, within the run's budget and the client's rate limits, kept in the snapshot and
written back where the mapping declares. Exists for connections whose mapping has a
``links:`` section. The function calls ``connector.links`` and turns its report into metadata.
"""

from typing import Any

import dagster as dg
from pydantic import Field

from connector.contract import Entity
from connector.links import LinksPolicy, LinksReport, links_for_mapping
from connector.plan import Budget, format_duration
from pms_sync.assets import SNAPSHOT_POOL, connection_keys
from pms_sync.connection_resources import SERVICE, SNAPSHOT
from pms_sync.connections import Connection
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, masked_metadata, masked_text

DEFAULT_MAX_DURATION_S = 300.0
"""A links step holds the snapshot pool: by default it starts no request after 5 minutes and
leaves the rest (latest arrivals) to the next run."""


class GuestLinksConfig(dg.Config):
    """Budget and window of one links step (run config of ``<name>/guest_links``)."""

    max_requests: int | None = Field(
        default=None, description="Links fetched at most; the rest wait for the next run."
    )
    max_duration_s: float | None = Field(
        default=DEFAULT_MAX_DURATION_S,
        description="Seconds after which no link request is started; empty: no limit.",
    )
    days_ahead: int | None = Field(
        default=None, description="Check-ins up to this many days ahead; empty: the mapping's."
    )


def build_links_definitions(connection: Connection) -> dg.Definitions:
    """The ``guest_links`` asset of a connection whose mapping declares ``links:``."""
    mapping = connection.mapping
    if mapping.links is None or Entity.RESERVATION not in mapping.entities:
        return dg.Definitions()
    keys = connection_keys(connection.asset_key())
    targets = [
        f"the table {d.sql.table}" if d.sql is not None else f"the file {d.file}"
        for d in mapping.links.destinations
    ]
    where = f"written back to {' and '.join(targets)}" if targets else "kept in the snapshot"

    @dg.asset(
        key=connection.asset_key("guest_links"),
        deps=[keys.synced_reservations],
        group_name=connection.name,
        kinds={"duckdb"},
        pool=SNAPSHOT_POOL,
        required_resource_keys=connection.resources.keys(SERVICE, SNAPSHOT),
        description=(
            f"Guest-app, chat and online check-in links of {mapping.name}'s arrivals in the "
            f"next {mapping.links.days_ahead} days, fetched from the service's Open API and "
            f"{where}."
        ),
    )
    def guest_links(
        context: dg.AssetExecutionContext, config: GuestLinksConfig
    ) -> dg.MaterializeResult:
        resources = connection.resources
        settings = resources.service_of(context).settings(resources.snapshot_of(context))
        policy = LinksPolicy.from_settings(mapping.links).overridden(days_ahead=config.days_ahead)
        report = links_for_mapping(
            mapping,
            settings,
            policy=policy,
            budget=Budget(max_requests=config.max_requests, max_duration_s=config.max_duration_s),
        )
        metadata = links_metadata(report)
        if report.stopped or report.write_errors:
            raise dg.Failure(
                description=masked_text(report.stopped or "; ".join(report.write_errors)),
                metadata=metadata,
            )
        if report.drift_recorded:
            context.log.warning(
                f"{len(report.drift_recorded)} reservation(s) the service no longer holds "
                "(links 404): recorded as drift, the next sync re-sends them"
            )
        if report.pending:
            context.log.warning(
                f"{len(report.pending)} reservation(s) still without links: the next run "
                "fetches them (soonest arrival first)"
            )
        return dg.MaterializeResult(metadata=metadata)

    return dg.Definitions(assets=[guest_links])


def links_metadata(report: LinksReport) -> dict[str, Any]:
    pending = report.pending_by_urgency
    return masked_metadata(
        {
            "fetched": dg.MetadataValue.int(len(report.fetched)),
            "reused": dg.MetadataValue.int(report.reused),
            "written": dg.MetadataValue.int(report.written),
            "failed": dg.MetadataValue.int(len(report.failed)),
            "drift_recorded": dg.MetadataValue.int(len(report.drift_recorded)),
            "pending": dg.MetadataValue.int(len(report.pending)),
            "pending_upcoming": dg.MetadataValue.int(pending.get("upcoming", 0)),
            "pending_future": dg.MetadataValue.int(pending.get("future", 0)),
            "candidates": dg.MetadataValue.int(report.candidates),
            "open_api_requests": dg.MetadataValue.int(report.requests),
            "token_renewals": dg.MetadataValue.int(report.token_renewals),
            "throttled": dg.MetadataValue.int(report.throttled),
            "checkin_window": dg.MetadataValue.text(
                f"{report.first_checkin.isoformat()} to {report.last_checkin.isoformat()}"
            ),
            "destination": dg.MetadataValue.text(
                "; ".join(write.destination for write in report.writes) or "snapshot only"
            ),
            "backlog": dg.MetadataValue.md(
                markdown_table(
                    ("urgency", "links", "cleared after"),
                    (
                        (row.urgency, row.requests, format_duration(row.eta_s))
                        for row in report.backlog
                        if row.requests
                    ),
                )
            ),
            "failures": dg.MetadataValue.md(
                markdown_table(
                    ("reservation", "HTTP", "message", "x-request-id"),
                    (
                        (
                            f"{f.account_id}/{f.reservation_id}",
                            f.http_status or "",
                            f.message,
                            f.request_id or "",
                        )
                        for f in report.failed[:SAMPLE_ROWS]
                    ),
                )
            ),
        }
    )
