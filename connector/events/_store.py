"""Reading received events for a connection, and writing them back where its mapping says.

The events store is a DuckDB file the receiver writes batch by batch; readers open it
read-only between two batches (waiting for a batch in progress, ``lock_timeout_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from connector.mapping.loop_sections import Destination
from connector.snapshot import RECEIVED_EVENT_COLUMNS, Snapshot
from connector.writeback import WriteResult, write_back

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
    events: pd.DataFrame  # columns RECEIVED_EVENT_COLUMNS, in order of arrival

    @property
    def counts(self) -> dict[str, int]:
        if not len(self.events):
            return {}
        return {str(k): int(v) for k, v in self.events["event"].value_counts().sort_index().items()}


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


def write_back_events(
    store_path: Path,
    connection: str,
    destination: Destination,
    *,
    base_dir: Path,
    after_seq: int = 0,
    upto_seq: int | None = None,
    lock_timeout_s: float = 10.0,
) -> WriteResult:
    """A table gets the new events (``after_seq < seq <= upto_seq``) upserted by connection
    and key; a file is rewritten with every event of the connection up to ``upto_seq``."""
    since = after_seq if destination.sql is not None else 0
    rows = new_events(
        store_path, connection, since, upto_seq=upto_seq, lock_timeout_s=lock_timeout_s
    ).events
    return write_back(
        rows, destination, base_dir=base_dir, key=EVENT_KEY, column_types=EVENT_COLUMN_TYPES
    )


def last_event_seq(store_path: Path, connection: str, *, lock_timeout_s: float = 5.0) -> int:
    """The ``seq`` of the connection's latest event (0: none, or no store yet)."""
    if not Path(store_path).exists():
        return 0
    with Snapshot.open(store_path, lock_timeout=lock_timeout_s, read_only=True) as store:
        return store.last_event_seq(connection)
