"""The nightly sync of each connection: cron and timezone from the mapping's dagster section."""

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from pms_sync.connections import Connection
from pms_sync.partitions import nightly_tags


def build_schedule(
    connection: Connection,
    job: UnresolvedAssetJobDefinition,
    partitions: dg.MonthlyPartitionsDefinition | None,
) -> dg.ScheduleDefinition:
    settings = connection.dagster

    @dg.schedule(
        name=f"{connection.name}_nightly",
        job=job,
        cron_schedule=settings.schedule,
        execution_timezone=settings.timezone,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=(
            f"Syncs {connection.mapping.name} at `{settings.schedule}` ({settings.timezone}): "
            "all accommodations, and reservations with check-in from last month to twelve "
            "months ahead, in one run."
        ),
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        tick = context.scheduled_execution_time
        window = nightly_tags(partitions, tick.date() if tick else None)
        return dg.RunRequest(run_key=None, tags={**window, "pms_sync/trigger": "nightly"})

    return nightly
