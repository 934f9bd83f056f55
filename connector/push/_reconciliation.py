"""Full reconciliation passes: every record of a connection re-sent once, resumable.

A pass starts at a time T; a record acknowledged at or after T (by the pass itself, a real
change, a drift re-send or the rolling refresh) is done for that pass. A reconciling run
re-sends the records still older than T, after every real change and within its budget
(``reason`` ``reconcile``), and closes the pass once all of them are acknowledged; a run its
budget cuts short leaves the pass open, and the next reconciling run resumes it
(docs/drift.md). One pass per connection and entity, so the Dagster steps of units and
reservations progress independently.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from connector.contract import Entity
from connector.plan import REASON_RECONCILE, Plan
from connector.push._push import PushResult
from connector.records import MappedRecords
from connector.snapshot import ReconciliationPass, SnapshotStore


def open_passes(
    snapshot: SnapshotStore,
    connection: str | None,
    batches: Mapping[Entity, MappedRecords],
    at: datetime,
    *,
    write: bool,
) -> dict[Entity, ReconciliationPass]:
    """Per entity of the run, the connection's unfinished pass, or a new one starting ``at``
    (recorded only with ``write``: a plan or a dry run shows a pass without starting it).

    New passes start only once every entity's pass of the connection is finished: an entity
    done early (a few units) waits for the others (the reservations) instead of being re-sent
    again by every run that resumes them.
    """
    latest = {entity: snapshot.reconciliation_pass(connection, entity) for entity in Entity}
    unfinished = {e: found for e, found in latest.items() if found and found.finished_at is None}
    passes: dict[Entity, ReconciliationPass] = {}
    for entity in batches:
        if entity in unfinished:
            passes[entity] = unfinished[entity]
        elif unfinished:
            continue  # this entity's pass is done; the others' are not
        elif write:
            passes[entity] = snapshot.start_reconciliation(connection, entity, at)
        else:
            passes[entity] = ReconciliationPass(connection, entity, at)
    return passes


def finish_passes(
    snapshot: SnapshotStore,
    passes: Mapping[Entity, ReconciliationPass],
    plan: Plan,
    result: PushResult,
    at: datetime,
) -> list[Entity]:
    """Close the passes whose every remaining record this run re-sent and had acknowledged;
    returns their entities."""
    finished: list[Entity] = []
    changes = plan.changes
    for entity, found in passes.items():
        planned = (
            int(
                ((changes["entity"] == str(entity)) & (changes["reason"] == REASON_RECONCILE)).sum()
            )
            if len(changes)
            else 0
        )
        if result.resent[(str(entity), REASON_RECONCILE)] == planned:
            snapshot.finish_reconciliation(found, at)
            finished.append(entity)
    return finished
