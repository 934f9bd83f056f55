"""One job per connection: every asset and check of its keys, in dependency order."""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from pms_sync.connections import Connection


def job_name(connection: Connection) -> str:
    return f"{connection.name}_sync"


def build_job(connection: Connection) -> UnresolvedAssetJobDefinition:
    # Partitioning is inferred from the selected assets (reservations by month of check-in).
    return dg.define_asset_job(
        job_name(connection),
        # By key, not group: a defs.yaml's post_processing may move assets to other groups.
        # The PMS exports share the prefix: external assets no job materializes.
        selection=dg.AssetSelection.key_prefixes(connection.asset_key().path).materializable(),
        description=(
            f"Map {connection.mapping.name}'s export, check it, and push the changes to the "
            "service: accommodations, then reservations of the run's check-in window."
        ),
        tags={"pms_sync/connection": connection.name},
        # Every step in the run's own process: a step process would import Dagster and
        # pms-sync and open its resources again, for work that is sequential anyway.
        executor_def=dg.in_process_executor,
    )
