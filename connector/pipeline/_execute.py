"""Carry out a plan: exactly its effects, the same for ``sync`` and ``apply``.

Property status changes go first (a reactivated property's units are updated after it),
then the record changes, without the work held for an approval the run was not given.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.accounts import (
    AccountDiscovery,
    PropertyReport,
    apply_properties,
    planned_report,
    status_records,
    withhold_unreactivated,
)
from connector.client import RunStop, ServiceClient
from connector.duckdb_memory import memory_named
from connector.pipeline._request import SyncRequest
from connector.plan import Plan
from connector.push import ProgressCallback, PushResult, push_plan
from connector.safety.guard import withhold
from connector.snapshot import SnapshotStore

PUSH_STEP = "sending the plan and recording the answers in the snapshot (the push)"


@dataclass(frozen=True)
class Executed:
    push: PushResult
    properties: PropertyReport  # the plan's property changes with their outcomes


def execute_plan(
    plan: Plan,
    snapshot: SnapshotStore,
    discovery: AccountDiscovery,
    request: SyncRequest,
    *,
    stop: RunStop,
    on_progress: ProgressCallback | None = None,
) -> Executed:
    """Send the plan's property changes and records (``request.dry_run``: none)."""
    held = plan.held_kinds(request.approved)
    properties = planned_report(plan)
    apply_properties(properties, discovery.directory, held=held, dry_run=request.dry_run)
    if not request.dry_run:
        # Recorded before the push: its writer thread owns the snapshot until it ends.
        snapshot.record_property_statuses(status_records(properties, plan.connection))
    pushed = withhold_unreactivated(withhold(plan, held), properties)
    senders = set() if request.dry_run else set(pushed.changes["account_id"].astype(str))
    tokens = discovery.token_source(request.settings.tokens, senders)
    client = ServiceClient(request.settings.client, tokens)
    with memory_named(PUSH_STEP):
        result = push_plan(
            pushed,
            client,
            snapshot,
            dry_run=request.dry_run,
            options=request.settings.push,
            on_progress=on_progress,
            stop=stop,
        )
    discovery.after_push(tokens, client.retried_after_renewal)
    discovery.save(snapshot)
    discovery.report.properties = properties
    return Executed(result, properties)
