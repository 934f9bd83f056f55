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
    assert destination.file is not None
    path = Path(destination.file).expanduser()
    return write_file(rows, path if path.is_absolute() else base_dir / path)


__all__ = ["WriteBackError", "WriteResult", "upsert_table", "write_back", "write_file"]
