"""Definitions built from a folder of mapping files: one asset group per connection."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from assets.accounts import build_accounts_asset
from assets.assets import build_assets
from assets.checks import build_checks
from assets.connections import Connection, discover
from assets.events import build_events_definitions
from assets.jobs import build_job
from assets.links import build_links_definitions
from assets.partitions import reservation_partitions
from assets.resources import default_resources
from assets.schedules import build_reconcile_schedule, build_schedule
from assets.sensors import build_sensor
from assets.webhooks import build_webhooks_definitions
from connector.contract import Entity


@contextmanager
def _accepted_preview_apis() -> Iterator[None]:
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


def connection_definitions(connection: Connection) -> dg.Definitions:
    """Assets, checks, job, nightly schedule, (when configured) reconciliation schedule and
    (with a drop folder) sensor of one connection; guest links, webhooks and received events
    where its mapping declares them."""
    settings = connection.dagster
    partitions = reservation_partitions(settings.partitions_start, settings.timezone)
    job = build_job(connection)
    # Only reservations are partitioned: a units-only connection's runs carry no window.
    window = partitions if Entity.RESERVATION in connection.mapping.entities else None
    sensor = build_sensor(connection, job, window)
    reconcile = build_reconcile_schedule(connection, job, window)
    core = dg.Definitions(
        assets=[*build_assets(connection, partitions), build_accounts_asset(connection)],
        asset_checks=build_checks(connection, partitions),
        jobs=[job],
        schedules=[build_schedule(connection, job, window), *([reconcile] if reconcile else [])],
        sensors=[sensor] if sensor else [],
    )
    # What comes back from the service (docs/loop.md): each empty unless the mapping asks.
    return dg.Definitions.merge(
        core,
        build_links_definitions(connection),
        build_webhooks_definitions(connection),
        build_events_definitions(connection),
    )


def build_definitions(folder: Path, resources: dict[str, object] | None = None) -> dg.Definitions:
    """Definitions for every mapping file of ``folder``, with the given or default resources."""
    with _accepted_preview_apis():
        connections = [connection_definitions(connection) for connection in discover(folder)]
    return dg.Definitions.merge(
        *connections,
        dg.Definitions(resources=resources if resources is not None else default_resources()),
    )
