"""Which backend holds a snapshot: the one place a location picks it.

A ``postgresql://`` URL (``connector.snapshot._location.is_database_url``) is a PostgreSQL
database, anything else a DuckDB file. Each backend module offers the three entries below;
the PostgreSQL one is imported only when a URL asks for it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from connector.contract import Entity
from connector.snapshot._cursors import StoredCursor
from connector.snapshot._location import is_database_url
from connector.snapshot._locks import LockScope
from connector.snapshot._store import SnapshotStore

FingerprintReader = Callable[[Entity, str], pa.Table | None]


class SnapshotBackend(Protocol):
    """What a backend module offers (``_duckdb``, ``_postgres``)."""

    def open_store(
        self,
        location: str | Path,
        *,
        lock_timeout: float,
        read_only: bool,
        scope: LockScope | None,
    ) -> AbstractContextManager[SnapshotStore]: ...

    def validated_payloads(
        self, location: str | Path, record_ids: pa.Array | None
    ) -> pa.Table | None: ...

    def source_cursors(
        self, location: str | Path, connection: str | None
    ) -> dict[tuple[str, str], StoredCursor]: ...

    def fingerprint_reader(
        self, location: str | Path, connection: str | None
    ) -> AbstractContextManager[FingerprintReader]: ...


def backend_of(location: str | Path) -> SnapshotBackend:
    """The backend of a snapshot location: a PostgreSQL URL's, or a DuckDB file's."""
    if is_database_url(location):
        from connector.snapshot import _postgres

        return _postgres
    from connector.snapshot import _duckdb

    return _duckdb
