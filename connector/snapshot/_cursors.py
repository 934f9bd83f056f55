"""Incremental cursors of SQL inputs (migration 14): per connection, input and scope, the
largest cursor value a run read and when the input was last read in full.

A mixin of both backends. Written only once a run's every planned change is settled
(connector.pipeline._incremental), so a killed or failed run leaves the value where it was
and the next run reads the same rows again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from connector.cursors import CursorKind, CursorValue
from connector.snapshot._fingerprints import connection_key
from connector.snapshot._primitives import StorePrimitives


@dataclass(frozen=True)
class StoredCursor:
    """One input's cursor in one scope."""

    input_name: str
    scope: str
    value: CursorValue | None  # None: no value read yet (an empty table)
    full_read_at: datetime | None  # the last full read whose run was acknowledged
    committed_at: datetime


class CursorTables(StorePrimitives):
    """Reads and writes of ``source_cursors``, on either backend."""

    def source_cursors(self, connection: str | None) -> dict[tuple[str, str], StoredCursor]:
        """The cursors of ``connection``, by (input, scope)."""
        found = self._query(
            "SELECT input_name, scope, cursor_value, cursor_kind, full_read_at, committed_at "
            "FROM source_cursors WHERE connection = :connection",
            {"connection": connection_key(connection)},
        )
        cursors: dict[tuple[str, str], StoredCursor] = {}
        for row in found.itertuples(index=False):
            value = (
                CursorValue(str(row.cursor_value), CursorKind(str(row.cursor_kind)))
                if pd.notna(row.cursor_value)
                else None
            )
            cursors[(str(row.input_name), str(row.scope))] = StoredCursor(
                input_name=str(row.input_name),
                scope=str(row.scope),
                value=value,
                full_read_at=_moment(row.full_read_at),
                committed_at=_moment(row.committed_at) or datetime.min,
            )
        return cursors

    def save_source_cursors(self, connection: str | None, cursors: Sequence[StoredCursor]) -> None:
        """Keep each cursor in one transaction; a cursor without a value or a full-read time
        keeps the stored one (an incremental read that found no changed row)."""
        if not cursors:
            return
        with self._transaction() as session:
            for cursor in cursors:
                self._execute(
                    session,
                    "INSERT INTO source_cursors VALUES (:connection, :input, :scope, :value, "
                    ":kind, CAST(:full_read_at AS TIMESTAMP), :at) "
                    "ON CONFLICT (connection, input_name, scope) DO UPDATE SET "
                    "cursor_value = coalesce(excluded.cursor_value, source_cursors.cursor_value), "
                    "cursor_kind = coalesce(excluded.cursor_kind, source_cursors.cursor_kind), "
                    "full_read_at = coalesce(excluded.full_read_at, source_cursors.full_read_at), "
                    "committed_at = excluded.committed_at",
                    {
                        "connection": connection_key(connection),
                        "input": cursor.input_name,
                        "scope": cursor.scope,
                        "value": cursor.value.text if cursor.value else None,
                        "kind": str(cursor.value.kind) if cursor.value else None,
                        "full_read_at": cursor.full_read_at,
                        "at": cursor.committed_at,
                    },
                )


def _moment(value: object) -> datetime | None:
    if value is None or pd.isna(value):
        return None
    return pd.Timestamp(value).to_pydatetime()
