"""Definitions built from a folder of mapping files: one asset group per connection."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.assets import build_assets
from assets.checks import build_checks
from assets.connections import Connection, discover
from assets.jobs import build_job
from assets.partitions import reservation_partitions
from assets.resources import default_resources
from assets.schedules import build_schedule
from assets.sensors import build_sensor


def connection_definitions(connection: Connection) -> dg.Definitions:
    """Assets, checks, job, nightly schedule and (with a drop folder) sensor of one connection."""
    settings = connection.dagster
    partitions = reservation_partitions(settings.partitions_start, settings.timezone)
    job = build_job(connection, partitions)
    sensor = build_sensor(connection, job, partitions)
    return dg.Definitions(
        assets=build_assets(connection, partitions),
        asset_checks=build_checks(connection, partitions),
        jobs=[job],
        schedules=[build_schedule(connection, job, partitions)],
        sensors=[sensor] if sensor else [],
    )


def build_definitions(folder: Path, resources: dict[str, object] | None = None) -> dg.Definitions:
    """Definitions for every mapping file of ``folder``, with the given or default resources."""
    return dg.Definitions.merge(
        *(connection_definitions(connection) for connection in discover(folder)),
        dg.Definitions(resources=resources if resources is not None else default_resources()),
    )
