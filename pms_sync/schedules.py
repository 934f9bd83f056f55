"""Schedules of each connection: the nightly sync, with cron and timezone from the mapping's
dagster section, and the full reconciliation when the mapping asks for one."""

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from pms_sync.account_partitions import (
    no_accounts_yet,
    per_account_requests,
    rectangle_tags,
    registered_accounts,
)
from pms_sync.connections import Connection
from pms_sync.partitions import current_range, full_range_tags, nightly_tags

RECONCILE_TAG = "pms_sync/reconcile"
"""A run with this tag set to "1" continues the connection's full reconciliation pass."""


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
    def nightly(
        context: dg.ScheduleEvaluationContext,
    ) -> dg.RunRequest | list[dg.RunRequest] | dg.SkipReason:
        tick = context.scheduled_execution_time
        today = tick.date() if tick else None
        trigger = {"pms_sync/trigger": "nightly"}
        if partitions is not None and connection.partitioned_by_account:
            # One run per account: each fails, retries and is re-run on its own.
            accounts = registered_accounts(context.instance, connection)
            if not accounts:
                return no_accounts_yet(connection)
            months = current_range(partitions, today)
            tick_name = f"nightly:{tick.isoformat() if tick else today}"
            return per_account_requests(months, accounts, trigger, tick_name)
        window = nightly_tags(partitions, today)
        return dg.RunRequest(run_key=None, tags={**window, **trigger})

    return nightly


def build_reconcile_schedule(
    connection: Connection,
    job: UnresolvedAssetJobDefinition,
    partitions: dg.MonthlyPartitionsDefinition | None,
) -> dg.ScheduleDefinition | None:
    """The full reconciliation of the connection, when its mapping names a
    ``dagster.reconcile_schedule`` (none otherwise: off unless configured)."""
    settings = connection.dagster
    cron = getattr(settings, "reconcile_schedule", None)
    if not cron:
        return None

    @dg.schedule(
        name=f"{connection.name}_reconcile",
        job=job,
        cron_schedule=cron,
        execution_timezone=settings.timezone,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=(
            f"Re-sends every record of {connection.mapping.name} the service acknowledged "
            f"(all accommodations, reservations of every partition) at `{cron}` "
            f"({settings.timezone}), after the changes, at the pace the rate limits allow and "
            "within service.reconcile_max_duration_s; the next run resumes an unfinished pass "
            "(docs/drift.md)."
        ),
    )
    def reconcile(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        tick = context.scheduled_execution_time
        window = full_range_tags(partitions, tick.date() if tick else None)
        if partitions is not None and connection.partitioned_by_account:
            # Reconciliation passes are kept per connection: one run of every account.
            accounts = registered_accounts(context.instance, connection)
            if not accounts:
                return no_accounts_yet(connection)
            months = dg.PartitionKeyRange(*window.values())
            window = rectangle_tags(months, accounts)
        return dg.RunRequest(
            run_key=None,
            tags={**window, RECONCILE_TAG: "1", "pms_sync/trigger": "reconcile"},
        )

    return reconcile
