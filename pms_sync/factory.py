"""The definitions of one connection: its asset group, checks, job, schedules and sensors.

``PmsSyncComponent`` (``pms_sync.component``) adds the resources; it is the one way to build them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from connector.contract import Entity
from pms_sync.account_partitions import build_accounts_sensor, reservation_partitions_of
from pms_sync.accounts import build_accounts_asset
from pms_sync.assets import SyncExecute, build_assets, run_sync_step, snapshot_pool
from pms_sync.checks import build_checks
from pms_sync.connections import Connection
from pms_sync.events import build_events_definitions
from pms_sync.exports import export_specs
from pms_sync.jobs import build_job
from pms_sync.links import build_links_definitions
from pms_sync.partitions import reservation_partitions
from pms_sync.schedules import build_reconcile_schedule, build_schedule
from pms_sync.sensors import build_sensors
from pms_sync.webhooks import build_webhooks_definitions


@contextmanager
def accepted_preview_apis() -> Iterator[None]:
    """Silence the two warnings of Dagster APIs we chose knowingly (docs/decisions.md).

    ``backfill_policy`` (beta) makes a backfill or the nightly window one run that reads the
    export once; ``partitions_def`` on an asset check (preview) lets a check of a partitioned
    asset read exactly the run's partitions. Any other warning still shows.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"Parameter `backfill_policy`", category=dg.BetaWarning
        )
        warnings.filterwarnings(
            "ignore",
            message=r"Specifying a partitions_def on an AssetCheckSpec",
            category=dg.PreviewWarning,
        )
        yield


def connection_definitions(
    connection: Connection, snapshot: str | None = None, execute: SyncExecute = run_sync_step
) -> dg.Definitions:
    """Everything of one connection: the place where its definitions are assembled.

    The PMS exports (external assets), the mapped and synced assets and their checks, the job,
    the nightly schedule and, with a drop folder, its sensors; the Open API accounts asset and
    (when configured) the reconciliation schedule; guest links, webhooks and received events
    where its mapping declares them. ``snapshot``: the snapshot location the code location's
    resources name, which decides the snapshot steps' pool (``pms_sync.assets.snapshot_pool``).
    ``execute``: runs each sync step (``PmsSyncComponent.execute``).
    """
    settings = connection.dagster
    months = reservation_partitions(settings.partitions_start, settings.timezone)
    # Reservations by month, or by account and month (pms_sync.account_partitions).
    partitions = reservation_partitions_of(connection, months)
    pool = snapshot_pool(connection, snapshot)
    job = build_job(connection)
    # Only reservations are partitioned: a units-only connection's runs carry no window.
    window = months if Entity.RESERVATION in connection.mapping.entities else None
    reconcile = build_reconcile_schedule(connection, job, window)
    accounts_sensor = build_accounts_sensor(connection) if window is not None else None
    core = dg.Definitions(
        assets=[
            *export_specs(connection),
            *build_assets(connection, partitions, pool, execute),
            build_accounts_asset(connection, pool),
        ],
        asset_checks=build_checks(connection, partitions, pool),
        jobs=[job],
        schedules=[build_schedule(connection, job, window), *([reconcile] if reconcile else [])],
        sensors=[*build_sensors(connection, job, window), *filter(None, [accounts_sensor])],
    )
    # What comes back from the service (docs/loop.md): each empty unless the mapping asks.
    return dg.Definitions.merge(
        core,
        build_links_definitions(connection),
        build_webhooks_definitions(connection),
        build_events_definitions(connection),
    )
