"""A connection's outgoing-webhook configurations reconciled with its webhooks file:
``<name>/webhooks``.

Each materialization applies the file named by the mapping's ``webhooks:`` member: the
service's configurations are created, updated or deleted until they match it (a second
materialization changes nothing). Exists for connections whose mapping names a webhooks file.
"""

from typing import Any

import dagster as dg

from connector.plan import render_value
from connector.webhooks import WebhooksReport, apply_webhooks_file
from pms_sync.connection_resources import SERVICE, SNAPSHOT
from pms_sync.connections import Connection
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, masked_metadata, masked_text


def build_webhooks_definitions(connection: Connection) -> dg.Definitions:
    mapping = connection.mapping
    if mapping.webhooks is None:
        return dg.Definitions()
    path = mapping.relative_path(mapping.webhooks)

    @dg.asset(
        key=connection.asset_key("webhooks"),
        group_name=connection.name,
        kinds={"yaml"},
        required_resource_keys=connection.resources.keys(SERVICE, SNAPSHOT),
        description=(
            f"The outgoing-webhook configurations of {mapping.name} at the service, as its "
            f"webhooks file `{path.name}` declares them (created, updated, deleted by name)."
        ),
    )
    def webhooks(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        resources = connection.resources
        settings = resources.service_of(context).settings(resources.snapshot_of(context))
        report = apply_webhooks_file(path, settings)
        metadata = webhooks_metadata(report)
        if report.stopped or report.failed:
            problems = report.stopped or "; ".join(
                f"{item.change.action} {item.change.name}: {item.message}" for item in report.failed
            )
            raise dg.Failure(description=masked_text(problems), metadata=metadata)
        context.log.info(f"webhooks of {mapping.name}: {report.plan.counts}")
        return dg.MaterializeResult(metadata=metadata)

    return dg.Definitions(assets=[webhooks])


def webhooks_metadata(report: WebhooksReport) -> dict[str, Any]:
    counts = report.plan.counts
    rows = [
        (
            str(change.action),
            change.name,
            item.field,
            render_value(item.old),
            render_value(item.new),
        )
        for change in report.plan.changes
        for item in (change.fields or ())
    ]
    rows += [
        (str(change.action), change.name, "", "", change.reason)
        for change in report.plan.changes
        if not change.fields
    ]
    return masked_metadata(
        {
            "created": dg.MetadataValue.int(counts["create"]),
            "updated": dg.MetadataValue.int(counts["update"]),
            "deleted": dg.MetadataValue.int(counts["delete"]),
            "unchanged": dg.MetadataValue.int(counts["unchanged"]),
            "failed": dg.MetadataValue.int(len(report.failed)),
            "changes": dg.MetadataValue.md(
                markdown_table(("action", "name", "field", "old", "new"), rows[:SAMPLE_ROWS])
            ),
        }
    )
