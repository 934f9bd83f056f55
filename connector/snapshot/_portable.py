"""Reads whose SQL is the same on every backend (no parameters, no dialect), written once.

A mixin of both backends; each provides ``_query(sql)`` returning DuckDB-shaped frames.
"""

from __future__ import annotations

import pandas as pd

from connector.snapshot._accounts import PropertyState, PropertyStatusRecord


class PortableReads:
    """Reads both backends run verbatim."""

    def _query(self, sql: str) -> pd.DataFrame:
        raise NotImplementedError  # provided by the backend

    def possibly_stored(self) -> dict[tuple[str, str, str], str]:
        rows = self._query(
            "SELECT account_id, entity, record_id, content_hash FROM possibly_stored"
        )
        return {
            (str(account), str(entity), str(record)): str(digest)
            for account, entity, record, digest in rows.itertuples(index=False)
        }

    def dead_letters(self) -> pd.DataFrame:
        return self._query("SELECT * FROM dead_letters ORDER BY account_id, entity, record_id")

    def runs(self) -> pd.DataFrame:
        return self._query("SELECT * FROM runs ORDER BY started_at")

    def property_statuses(self) -> dict[str, PropertyStatusRecord]:
        rows = self._query("SELECT * FROM property_status ORDER BY account_id")
        return {
            str(row.account_id): PropertyStatusRecord(
                account_id=str(row.account_id),
                status=PropertyState(str(row.status)),
                update_sub_units=bool(row.update_sub_units),
                changed_at=pd.Timestamp(row.changed_at).to_pydatetime(),
                request_id=None if pd.isna(row.request_id) else str(row.request_id),
                connection=None if pd.isna(row.connection) else str(row.connection),
            )
            for row in rows.itertuples(index=False)
        }
