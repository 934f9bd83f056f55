"""What a snapshot backend provides so that every operation is written once.

The operations (``connector.snapshot._operations`` and the table mixins it gathers) speak one
SQL both DuckDB and PostgreSQL run: ``:name`` parameters, lists as
``IN (SELECT unnest(CAST(:list AS VARCHAR[])))``, upserts as ``ON CONFLICT … DO UPDATE``, a
batch of rows as ``{rows}`` (aliased ``batch``, every column not text read through a CAST).
A backend supplies the connection, the frames, the batch transfer and the few expressions
the two spell differently.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeAlias

import pandas as pd
import pyarrow as pa

Rows: TypeAlias = pd.DataFrame | pa.Table
"""A batch of rows an operation writes or joins with: ``{rows}`` in its SQL."""

Params: TypeAlias = Mapping[str, object]


class StorePrimitives:
    """The backend's side: connection, frames, batch transfer, dialect."""

    location: str
    read_only: bool  # opened for a plan: every write raises SnapshotError

    def _query(self, sql: str, params: Params | None = None) -> pd.DataFrame:
        """A read's rows as a frame with DuckDB's dtypes."""
        raise NotImplementedError

    def _arrow(self, sql: str, params: Params | None = None, rows: Rows | None = None) -> pa.Table:
        """A read's rows as Arrow (dates as date32)."""
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Any]:
        """One transaction of writes (refused on a read-only store)."""
        raise NotImplementedError

    def _execute(
        self, session: Any, sql: str, params: Params | None = None, rows: Rows | None = None
    ) -> int:
        """Run one statement in ``session``; the number of rows it changed."""
        raise NotImplementedError

    def _fetch(
        self, session: Any, sql: str, params: Params | None = None, rows: Rows | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement in ``session``; the rows it returned."""
        raise NotImplementedError

    def _json_text(self, document: str, member: str) -> str:
        """SQL of a JSON text column's top-level member as text (NULL when absent)."""
        raise NotImplementedError

    def _row_hash(self, columns: str) -> str:
        """SQL of a 64-bit hash of the comma-separated ``columns``."""
        raise NotImplementedError

    def _lock_events(self, session: Any) -> None:
        """Writers of the events table take turns (a database with many writers)."""


def latest_per_key(rows: pd.DataFrame, keys: tuple[str, ...]) -> pd.DataFrame:
    """One row per key, the last one: one upsert statement may not touch a row twice."""
    return rows.drop_duplicates(list(keys), keep="last")


def in_list(column: str, parameter: str) -> str:
    """SQL: ``column`` is one of the list parameter's values."""
    return f"{column} IN (SELECT unnest(CAST(:{parameter} AS VARCHAR[])))"
