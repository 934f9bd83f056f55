"""The snapshot store: what the service acknowledged, what it refused, and the run history.

``Snapshot.open(path)`` opens the default DuckDB backend; every backend offers
:class:`SnapshotStore`, which is what the plan and the push depend on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from connector.snapshot._accounts import (
    DEFAULT_RENEW_MARGIN_S,
    DiscoveredAccount,
    PropertyState,
    PropertyStatusRecord,
)
from connector.snapshot._duckdb import DuckDBSnapshot, validated_payloads
from connector.snapshot._events import RECEIVED_EVENT_COLUMNS, IncomingEvent
from connector.snapshot._fingerprints import fingerprint_reader_of
from connector.snapshot._links import GUEST_LINK_COLUMNS, GuestLinkRecord
from connector.snapshot._migrations import LATEST_VERSION, MIGRATIONS, Migration, migrate
from connector.snapshot._model import (
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
)
from connector.snapshot._store import SnapshotStore


class Snapshot:
    """Entry point: ``with Snapshot.open(path) as snapshot: ...``."""

    @staticmethod
    @contextmanager
    def open(
        location: str | Path, *, lock_timeout: float = 0.0, read_only: bool = False
    ) -> Iterator[SnapshotStore]:
        """``read_only``: write nothing, create nothing (a plan); a missing file is empty."""
        # A PostgreSQL backend will be chosen here by a postgresql:// location.
        with DuckDBSnapshot.open(location, lock_timeout=lock_timeout, read_only=read_only) as store:
            yield store


__all__ = [
    "DEFAULT_RENEW_MARGIN_S",
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
    "SnapshotStore",
    "UnitStaysRequest",
    "fingerprint_reader_of",
    "migrate",
    "validated_payloads",
]
