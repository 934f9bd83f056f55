"""Rows written back to the PMS: a table of its own database (SQLAlchemy, upserted by key,
created when missing) or a CSV/Parquet file (rewritten whole, owner-only).

Used for guest links (``connector.links``) and received events (``connector.events``); the
destination is the one a mapping file declares (``connector.mapping.loop_sections``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from connector.mapping.loop_sections import Destination
from connector.sources.sql_source import _anchor_sqlite_path, safe_url
from connector.writeback._files import write_file
from connector.writeback._result import WriteBackError, WriteResult
from connector.writeback._sql import upsert_table


def write_back(
    rows: pd.DataFrame,
    destination: Destination,
    *,
    base_dir: Path,
    key: Sequence[str],
    column_types: Mapping[str, str] | None = None,
) -> WriteResult:
    """Write ``rows`` to ``destination`` (paths relative to ``base_dir``); ``key``: the
    columns a table is upserted by unless the destination names its own; ``column_types``:
    the types of a table created here (see ``upsert_table``)."""
    if destination.sql is not None:
        sql = destination.sql
        return upsert_table(
            rows,
            sql.url,
            sql.table,
            schema=sql.db_schema,
            key=sql.key or list(key),
            column_types=column_types,
            base_dir=base_dir,
        )
    return write_file(rows, _file_path(destination, base_dir))


def destination_name(destination: Destination, *, base_dir: Path) -> str:
    """Where ``destination`` writes, on one line and without its password: the table (a
    relative SQLite file anchored at ``base_dir``) or the file's absolute path. The same
    destination has the same name from any working directory: it keys what was written there."""
    if destination.sql is not None:
        sql = destination.sql
        url = safe_url(_anchor_sqlite_path(sql.url, base_dir))
        return f"{url} table {sql.db_schema + '.' if sql.db_schema else ''}{sql.table}"
    return str(_file_path(destination, base_dir).resolve())


def _file_path(destination: Destination, base_dir: Path) -> Path:
    assert destination.file is not None
    path = Path(destination.file).expanduser()
    return path if path.is_absolute() else base_dir / path


__all__ = [
    "WriteBackError",
    "WriteResult",
    "destination_name",
    "upsert_table",
    "write_back",
    "write_file",
]
