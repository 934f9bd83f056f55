"""Incremental reads of SQL inputs with a cursor: which inputs a run reads since the cursor
the snapshot keeps, and the cursors kept once the run's changes are settled.

The CLI and the Dagster assets both map through ``load_batches``, which asks ``choose_reads``
here; both sync through ``sync_request``, which calls ``commit_reads``. A cursor is kept per
connection, input and scope (the entities, check-in window and accounts a run reads the
input for): a run of another scope never reads since a value it did not sync itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from connector.contract import Entity
from connector.cursors import CursorValue, ReadMode
from connector.plan import Plan
from connector.push import Outcome, PushResult
from connector.records import DateWindow, MappedRecords
from connector.snapshot import SnapshotStore, StoredCursor, source_cursors

if TYPE_CHECKING:
    from connector.mapping.model import Mapping as MappingFile

__all__ = ["ReadChoice", "ReadOptions", "choose_reads", "commit_reads", "settled"]


@dataclass(frozen=True)
class ReadOptions:
    """How a run may read its SQL inputs with a cursor (settings ``full_read*``)."""

    interval_s: float  # a full read when the last one is this old (seconds); 0: always
    full_read: bool = False  # every input in full in this run


@dataclass(frozen=True)
class ReadChoice:
    """Per input with a cursor: the value to read since, or why it is read in full."""

    since: dict[str, CursorValue] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # input -> why in full
    scopes: dict[str, str] = field(default_factory=dict)  # input -> the cursor's scope

    def annotated(self, batch: MappedRecords) -> MappedRecords:
        """The batch with its reads' scope and the reason of each full read."""
        reads = tuple(
            replace(
                read,
                scope=self.scopes.get(read.input, ""),
                reason=""
                if read.mode == ReadMode.INCREMENTAL
                else self.reasons.get(read.input, ""),
            )
            for read in batch.reads
        )
        return replace(batch, reads=reads)


def read_scope(
    entities: Collection[Entity], window: DateWindow | None, accounts: Collection[str] | None
) -> str:
    """The text naming what a run reads an input for."""
    parts = ["entities=" + ",".join(sorted(str(entity) for entity in entities))]
    if window is not None:
        parts.append(f"window={window.start}..{window.end}")
    if accounts is not None:
        parts.append("accounts=" + ",".join(sorted(str(account) for account in accounts)))
    return ";".join(parts)


def choose_reads(
    mapping: MappingFile,
    *,
    entities: Collection[Entity] | None,
    window: DateWindow | None,
    accounts: Collection[str] | None,
    snapshot_path: str | Path,
    options: ReadOptions,
    now: datetime,
) -> ReadChoice:
    """Which inputs of ``mapping`` (``connector.mapping.Mapping``) this run reads since their
    stored cursor: those ``Mapping.incremental_inputs`` allows, whose scope has a cursor value
    and a full read younger than ``options.interval_s``; every other input with a cursor is
    read in full, with the reason."""
    from connector.mapping.model import SqlInput

    chosen = [entity for entity, _ in mapping.entities.items()]
    if entities is not None:
        chosen = [entity for entity in chosen if entity in set(entities)]
    allowed = mapping.incremental_inputs(chosen)
    stored = source_cursors(snapshot_path, mapping.name)
    choice = ReadChoice()
    for name, spec in mapping.inputs.items():
        if not isinstance(spec, SqlInput) or spec.cursor_column is None:
            continue
        readers = [entity for entity in chosen if mapping.entities[entity].input == name]
        scope = read_scope(readers, window, accounts)
        choice.scopes[name] = scope
        if name not in allowed:
            choice.reasons[name] = (
                "read by a join or list of another input"
                if mapping.cursor_key(name) is not None
                else "no key: give cursor.key, or an id that is a plain column"
            )
            continue
        cursor = stored.get((name, scope))
        reason = _full_read_reason(cursor, options, now)
        if reason is None:
            assert cursor is not None and cursor.value is not None
            choice.since[name] = cursor.value
        else:
            choice.reasons[name] = reason
    return choice


def _full_read_reason(
    cursor: StoredCursor | None, options: ReadOptions, now: datetime
) -> str | None:
    if options.full_read:
        return "full read asked (--full-read, --full-resync, --only)"
    if cursor is None or cursor.value is None or cursor.full_read_at is None:
        return "no cursor of an acknowledged full read yet"
    if options.interval_s <= 0:
        return "full-read interval 0: every read is full"
    age = (now - cursor.full_read_at).total_seconds()
    if age >= options.interval_s:
        return f"last full read {_age(age)} ago, the interval is {_age(options.interval_s)}"
    return None


def _age(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds:.0f} s"


def settled(plan: Plan, push: PushResult) -> bool:
    """Whether every change the run planned is settled, so its reads' cursors may move: each
    acknowledged or dead-lettered (a refused record is read again when its row changes, which
    moves its cursor), none failed, pending, deferred, held back or awaiting an approval."""
    if push.dry_run or plan.awaiting_approval or plan.unusable or plan.status_error:
        return False
    if push.held_back or sum(push.deferred.values()) or push.stopped_accounts:
        return False
    unsettled = (Outcome.FAILED, Outcome.PENDING)
    return not any(push.outcomes.get(str(outcome), 0) for outcome in unsettled)


def commit_reads(
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    connection: str | None,
    now: datetime,
) -> None:
    """Keep the cursors of the batches' reads: the largest value read, and for a full read
    its time (a read that found no row keeps the stored value)."""
    kept: dict[tuple[str, str], StoredCursor] = {}
    for batch in batches.values():
        for read in batch.reads:
            full = read.mode == ReadMode.FULL
            kept[(read.input, read.scope)] = StoredCursor(
                input_name=read.input,
                scope=read.scope,
                value=read.upto,
                full_read_at=now if full else None,
                committed_at=now,
            )
    snapshot.save_source_cursors(connection, list(kept.values()))
