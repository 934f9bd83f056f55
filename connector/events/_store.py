"""Reading received events for a connection, and writing them back where its mapping says.

The events store is a DuckDB file the receiver writes batch by batch; readers open it
read-only between two batches (waiting for a batch in progress, ``lock_timeout_s``). It also
keeps, per connection and destination, the last event written there (``event_write_cursors``):
the CLI and Dagster write back through ``write_new_events`` and share those cursors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from connector.errors import PmsSyncError
from connector.mapping.loop_sections import Destination
from connector.snapshot import RECEIVED_EVENT_COLUMNS, Snapshot
from connector.writeback import WriteBackError, destination_name, write_back

EVENT_KEY = ("connection", "event_key")
EVENT_COLUMN_TYPES = {
    "seq": "bigint",
    "deliveries": "bigint",
    "received_at": "timestamp",
    "last_received_at": "timestamp",
}


@dataclass(frozen=True)
class NewEvents:
    """Events of one connection received after ``after_seq``, up to ``upto_seq``."""

    connection: str
    after_seq: int
    upto_seq: int
    events: pd.DataFrame  # columns RECEIVED_EVENT_COLUMNS, by their last delivery

    @property
    def counts(self) -> dict[str, int]:
        if not len(self.events):
            return {}
        return {str(k): int(v) for k, v in self.events["event"].value_counts().sort_index().items()}

    @property
    def redeliveries(self) -> int:
        """Deliveries beyond the first, over these events."""
        events = self.events
        return int(events["deliveries"].sum() - len(events)) if len(events) else 0


def _empty() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in RECEIVED_EVENT_COLUMNS})


def new_events(
    store_path: Path,
    connection: str,
    after_seq: int = 0,
    *,
    upto_seq: int | None = None,
    lock_timeout_s: float = 10.0,
) -> NewEvents:
    """The connection's events with ``after_seq < seq <= upto_seq`` (no file: none)."""
    if not Path(store_path).exists():
        return NewEvents(connection, after_seq, after_seq, _empty())
    with Snapshot.open(store_path, lock_timeout=lock_timeout_s, read_only=True) as store:
        found = store.received_events(connection, after_seq=after_seq, upto_seq=upto_seq)
    upto = int(found["seq"].max()) if len(found) else (upto_seq or after_seq)
    return NewEvents(connection, after_seq, upto, found)


@dataclass(frozen=True)
class DestinationWrite:
    """One destination of a write-back: its cursor before and after, and what it took."""

    destination: str  # writeback.destination_name: the cursor's key, without credentials
    after_seq: int  # the last event it held before
    upto_seq: int  # the last event it holds now (unchanged when the write failed)
    rows: int = 0  # rows written: the new events to a table, every event to a file
    created: bool = False
    error: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "after_seq": self.after_seq,
            "upto_seq": self.upto_seq,
            "rows": self.rows,
            "created": self.created,
            "error": self.error,
        }


@dataclass(frozen=True)
class EventsWriteReport:
    """What one write-back of a connection's events did (``pms-sync events write``, Dagster's
    ``<connection>/service_events``)."""

    store: Path
    found: NewEvents  # events some destination did not hold yet
    writes: list[DestinationWrite]
    cursor_error: str | None = None  # written, but the cursors could not be saved

    @property
    def written(self) -> int:
        """Rows written (to each destination the mapping declares)."""
        return max((write.rows for write in self.writes), default=0)

    @property
    def errors(self) -> list[str]:
        found = [write.error for write in self.writes if write.error is not None]
        return found + ([self.cursor_error] if self.cursor_error else [])

    @property
    def status(self) -> str:
        """``ok``; ``incomplete`` when a destination could not be written (its events wait for
        the next run) or the cursors could not be saved (the next run writes them again)."""
        return "incomplete" if self.errors else "ok"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "connection": self.found.connection,
            "store": str(self.store),
            "received": len(self.found.events),
            "after_seq": self.found.after_seq,
            "upto_seq": self.found.upto_seq,
            "by_event": self.found.counts,
            "redeliveries": self.found.redeliveries,
            "written": self.written,
            "write_back": [write.to_json_dict() for write in self.writes],
            "write_errors": self.errors,
        }


def write_new_events(
    store_path: Path,
    connection: str,
    destinations: Sequence[Destination],
    *,
    base_dir: Path,
    upto_seq: int | None = None,
    lock_timeout_s: float = 10.0,
) -> EventsWriteReport:
    """Write each destination the connection's events it does not hold yet, up to
    ``upto_seq`` (None: the latest): a table gets them upserted by connection and key, a file
    is rewritten with every event of the connection. Each destination's cursor (in the store)
    moves only after its write succeeded, so a crash in between writes the events again
    (upserted, or the file rewritten): none is lost, none is doubled. One destination failing
    does not keep the others."""
    names = [destination_name(d, base_dir=base_dir) for d in destinations]
    if not Path(store_path).exists():  # nothing received yet
        return EventsWriteReport(store_path, NewEvents(connection, 0, 0, _empty()), [])
    with Snapshot.open(store_path, lock_timeout=lock_timeout_s, read_only=True) as store:
        cursors = store.event_write_cursors(connection)
        upto = store.last_event_seq(connection) if upto_seq is None else upto_seq
        held = [cursors.get(name, 0) for name in names]
        behind = [(d, seq) for d, seq in zip(destinations, held, strict=True) if seq < upto]
        # A file behind is rewritten whole: then every event is read, else only the new ones.
        since = min((0 if d.file is not None else seq for d, seq in behind), default=upto)
        events = store.received_events(connection, after_seq=since, upto_seq=upto)
    # A run started for an older high-water mark (a sensor's) finds the destinations ahead.
    oldest = min(*held, upto) if held else 0
    found = NewEvents(connection, oldest, upto, events[events["seq"] > oldest])

    writes: list[DestinationWrite] = []
    advanced: dict[str, int] = {}
    for destination, name, seq in zip(destinations, names, held, strict=True):
        if seq >= upto:
            writes.append(DestinationWrite(name, seq, seq))
            continue
        rows = events if destination.file is not None else events[events["seq"] > seq]
        try:
            result = write_back(
                rows,
                destination,
                base_dir=base_dir,
                key=EVENT_KEY,
                column_types=EVENT_COLUMN_TYPES,
            )
        except WriteBackError as error:
            writes.append(DestinationWrite(name, seq, seq, error=str(error)))
            continue
        writes.append(DestinationWrite(name, seq, upto, result.rows, result.created))
        advanced[name] = upto
    cursor_error = None
    try:
        if advanced:
            with Snapshot.open(store_path, lock_timeout=lock_timeout_s) as store:
                store.advance_event_write_cursors(connection, advanced, _now())
    except PmsSyncError as error:
        cursor_error = (
            f"the events are written, but where they were written could not be recorded "
            f"({error}); the next run writes them again (upserted, no row twice)"
        )
    return EventsWriteReport(store_path, found, writes, cursor_error)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def last_event_seq(store_path: Path, connection: str, *, lock_timeout_s: float = 5.0) -> int:
    """The ``seq`` of the connection's latest event (0: none, or no store yet)."""
    if not Path(store_path).exists():
        return 0
    with Snapshot.open(store_path, lock_timeout=lock_timeout_s, read_only=True) as store:
        return store.last_event_seq(connection)
