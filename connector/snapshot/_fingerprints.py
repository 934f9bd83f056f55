"""The snapshot's side of source fingerprints (migration 11, connector.mapping.fingerprints).

A fingerprint is kept only while the service holds, active, exactly the content its rows
mapped to: it is read back joined with ``acknowledged`` on the content hash, so a record
refused, cancelled, deactivated, drifted to another version or sent by another connection
since is mapped again, whatever its fingerprint says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa

from connector.contract import Entity
from connector.duckdb_memory import open_duckdb

FINGERPRINTS_SINCE = 11
"""The migration that created ``source_fingerprints``."""

# One statement for both backends, in SQLAlchemy's parameter style (DuckDB takes `$name`).
STORED_SQL = """
SELECT f.source_account, f.record_id, f.fingerprint, f.content_hash, a.checkin, a.checkout
FROM source_fingerprints AS f
JOIN acknowledged AS a
  ON a.account_id = f.account_id AND a.entity = f.entity AND a.record_id = f.record_id
 AND a.content_hash = f.content_hash AND a.status = 'active'
 AND a.connection IS NOT DISTINCT FROM CAST(:owner AS VARCHAR)
WHERE f.connection = :connection AND f.entity = :entity
  AND f.mapping_fingerprint = :mapping_fingerprint
"""


def connection_key(connection: str | None) -> str:
    """The ``connection`` column's value: '' for the unnamed connection."""
    return connection or ""


@contextmanager
def fingerprint_reader_of(
    location: str | Path | None, connection: str | None
) -> Iterator[Callable[[Entity, str], pa.Table | None]]:
    """A FingerprintReader over a snapshot, through its own read-only connection.

    Reads nothing (every record is mapped) where there is nothing to read: no location, no
    file yet, a schema before fingerprints, a file another process is writing, a database
    that does not answer.
    """
    if location is None:
        reader = FileReader(None, connection)
        yield reader
        return
    from connector.snapshot._backends import backend_of

    with backend_of(location).fingerprint_reader(location, connection) as found:
        yield found


class FileReader:
    """Reads a DuckDB snapshot file through a short-lived read-only connection per entity, so
    no second DuckDB instance holds memory while the mapping runs."""

    def __init__(self, path: str | Path | None, connection: str | None) -> None:
        self._connection = connection
        self._file = Path(path).expanduser() if path is not None else None

    def __call__(self, entity: Entity, mapping_fingerprint: str) -> pa.Table | None:
        if self._file is None or not self._file.exists():
            return None
        try:
            with open_duckdb(str(self._file), read_only=True) as db:
                versions = {
                    v for (v,) in db.execute("SELECT version FROM schema_migrations").fetchall()
                }
                if FINGERPRINTS_SINCE not in versions:
                    return None
                from connector.snapshot._duckdb import DuckDBSnapshot

                store = DuckDBSnapshot(db, str(self._file), read_only=True)
                return store.stored_fingerprints(self._connection, entity, mapping_fingerprint)
        except duckdb.Error:
            return None  # a file another process is writing: every record is mapped

    def read_attached(
        self, engine: duckdb.DuckDBPyConnection, entity: Entity, mapping_fingerprint: str
    ) -> pa.Table | None:
        """The same rows as a call, read by the engine's own connection: the file is attached
        read-only there (the engine's DuckDB, its one memory limit), read, and detached
        before anything else runs. None when the file cannot be attached (the call then
        decides)."""
        if self._file is None or not self._file.exists():
            return None
        try:
            engine.execute(f"ATTACH ? AS {_ATTACHED} (READ_ONLY)", [str(self._file)])
        except duckdb.Error:
            return None
        try:
            versions = {
                v
                for (v,) in engine.execute(
                    f"SELECT version FROM {_ATTACHED}.schema_migrations"
                ).fetchall()
            }
            if FINGERPRINTS_SINCE not in versions:
                return None
            return engine.sql(
                STORED_SQL.replace(":", "$")
                .replace("FROM source_fingerprints", f"FROM {_ATTACHED}.source_fingerprints")
                .replace("JOIN acknowledged", f"JOIN {_ATTACHED}.acknowledged"),
                params={
                    "connection": connection_key(self._connection),
                    "owner": self._connection,
                    "entity": str(entity),
                    "mapping_fingerprint": mapping_fingerprint,
                },
            ).to_arrow_table()
        except duckdb.Error:
            return None
        finally:
            engine.execute(f"DETACH DATABASE IF EXISTS {_ATTACHED}")

    def close(self) -> None:
        return None


_ATTACHED = "pms_sync_snapshot"
"""The name the snapshot file is attached under, for as long as the stored rows are copied."""
