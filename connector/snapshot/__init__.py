"""The snapshot store: what the service acknowledged, what it refused, and the run history.

``Snapshot.open(location)`` opens a DuckDB file (the default) or, for a ``postgresql://`` URL,
a PostgreSQL database; every backend offers :class:`SnapshotStore`, which is what the plan and
the push depend on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from connector.snapshot._accounts import (
    DiscoveredAccount,
    PropertyState,
    PropertyStatusRecord,
)
from connector.snapshot._backends import backend_of
from connector.snapshot._cursors import StoredCursor
from connector.snapshot._duckdb import DuckDBSnapshot
from connector.snapshot._events import RECEIVED_EVENT_COLUMNS, IncomingEvent
from connector.snapshot._fingerprints import fingerprint_reader_of
from connector.snapshot._links import GUEST_LINK_COLUMNS, GuestLinkRecord
from connector.snapshot._location import (
    SnapshotLocation,
    is_database_url,
    shown_location,
    snapshot_location,
    state_dir,
)
from connector.snapshot._locks import LockScope
from connector.snapshot._migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    Migration,
    migrate,
    statements_for,
)
from connector.snapshot._model import (
    ACKNOWLEDGEMENT_SCHEMA,
    Acknowledgement,
    DiffRequest,
    DiffResult,
    DriftEvent,
    OnMissing,
    PossiblyStored,
    ReconciliationPass,
    RecordStatus,
    Refusal,
    ResendRequest,
    ResendResult,
    RunCounts,
    RunRecord,
    UnitStaysRequest,
    acknowledgement_table,
)
from connector.snapshot._store import SnapshotStore


class Snapshot:
    """Entry point: ``with Snapshot.open(location) as snapshot: ...``."""

    @staticmethod
    @contextmanager
    def open(
        location: str | Path,
        *,
        lock_timeout: float = 0.0,
        read_only: bool = False,
        scope: LockScope | None = None,
    ) -> Iterator[SnapshotStore]:
        """``read_only``: write nothing, create nothing (a plan); a missing file is empty.

        ``scope``: what a writer writes (a connection, some of its accounts). A PostgreSQL
        snapshot lets writers of different scopes work at once (None: the whole snapshot); a
        DuckDB file has one writer whatever the scope. ``lock_timeout``: seconds to wait for
        the writer holding it.
        """
        with backend_of(location).open_store(
            location, lock_timeout=lock_timeout, read_only=read_only, scope=scope
        ) as store:
            yield store


def source_cursors(
    location: str | Path, connection: str | None
) -> dict[tuple[str, str], StoredCursor]:
    """The connection's incremental cursors, read before a run opens the snapshot (nothing
    when there is nothing to read: no snapshot yet, an older schema, a file another process
    is writing; the run then reads its inputs in full)."""
    return backend_of(location).source_cursors(location, connection)


def validated_payloads(location: str | Path, record_ids: pa.Array | None = None) -> pa.Table | None:
    """MD5s of the payloads the snapshot knows valid under the current contract (None: none
    known); with ``record_ids``, of those records' payloads only, so a run that maps a few
    records reads only their MD5s. Read before a run opens the snapshot for
    writing."""
    return backend_of(location).validated_payloads(location, record_ids)


__all__ = [
    "ACKNOWLEDGEMENT_SCHEMA",
    "GUEST_LINK_COLUMNS",
    "LATEST_VERSION",
    "MIGRATIONS",
    "RECEIVED_EVENT_COLUMNS",
    "Acknowledgement",
    "DiffRequest",
    "DiffResult",
    "DiscoveredAccount",
    "DriftEvent",
    "DuckDBSnapshot",
    "GuestLinkRecord",
    "IncomingEvent",
    "LockScope",
    "Migration",
    "OnMissing",
    "PossiblyStored",
    "PropertyState",
    "PropertyStatusRecord",
    "ReconciliationPass",
    "RecordStatus",
    "Refusal",
    "ResendRequest",
    "ResendResult",
    "RunCounts",
    "RunRecord",
    "Snapshot",
    "SnapshotLocation",
    "SnapshotStore",
    "StoredCursor",
    "UnitStaysRequest",
    "acknowledgement_table",
    "fingerprint_reader_of",
    "is_database_url",
    "migrate",
    "shown_location",
    "snapshot_location",
    "source_cursors",
    "state_dir",
    "statements_for",
    "validated_payloads",
]
