"""Events received from the service (migration 10): each stored once, whatever the number of
deliveries, in the order of arrival.

A mixin of the DuckDB backend. The receiver (``pms-sync receive``) writes them to a store of
its own (``events.duckdb`` by default, see ``connector.events``) so that a long-running process
never holds the snapshot's single-writer lock; the table is the same in both files.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

import duckdb
import pandas as pd

RECEIVED_EVENT_COLUMNS: tuple[str, ...] = (
    "connection",
    "event_key",
    "seq",
    "account_id",
    "event",
    "resource",
    "received_at",
    "last_received_at",
    "deliveries",
)


@dataclass(frozen=True)
class IncomingEvent:
    """One delivery of an event, as the receiver accepted it."""

    connection: str  # '' when posted to the receiver's /events without a connection
    event_key: str  # natural idempotency key: SHA-256 of the body's canonical JSON
    account_id: str | None
    event: str
    resource: str  # JSON text
    received_at: datetime


class EventTables:
    """Reads and writes of ``received_events``; mixed into the DuckDB backend."""

    def _query(
        self, sql: str, params: list[object] | dict[str, object] | None = None
    ) -> pd.DataFrame:
        raise NotImplementedError  # provided by the backend

    def _transaction(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        raise NotImplementedError  # provided by the backend

    def record_events(self, deliveries: Sequence[IncomingEvent]) -> list[bool]:
        """Store each event once: a new key gets the next ``seq``, a known key (a redelivery)
        only counts one more delivery. One transaction; per delivery, whether it was new."""
        if not deliveries:
            return []
        fresh: list[bool] = []
        with self._transaction() as cursor:
            (last,) = cursor.execute(
                "SELECT coalesce(max(seq), 0) FROM received_events"
            ).fetchone() or (0,)
            seq = int(last)
            for item in deliveries:
                known = cursor.execute(
                    "UPDATE received_events SET deliveries = deliveries + 1, "
                    "last_received_at = greatest(last_received_at, $at) "
                    "WHERE connection = $connection AND event_key = $key RETURNING seq",
                    {"at": item.received_at, "connection": item.connection, "key": item.event_key},
                ).fetchall()
                if known:
                    fresh.append(False)
                    continue
                seq += 1
                cursor.execute(
                    "INSERT INTO received_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
                    [
                        item.connection,
                        item.event_key,
                        seq,
                        item.account_id,
                        item.event,
                        item.resource,
                        item.received_at,
                        item.received_at,
                    ],
                )
                fresh.append(True)
        return fresh

    def received_events(
        self, connection: str | None = None, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> pd.DataFrame:
        """Events of ``connection`` (None: every connection) with ``after_seq < seq <=
        upto_seq``, in the order they arrived. Columns: ``RECEIVED_EVENT_COLUMNS``."""
        return self._query(
            f"""
            SELECT {", ".join(RECEIVED_EVENT_COLUMNS)} FROM received_events
            WHERE ($connection IS NULL OR connection = $connection)
              AND seq > $after AND ($upto IS NULL OR seq <= $upto)
            ORDER BY seq
            """,
            {"connection": connection, "after": after_seq, "upto": upto_seq},
        )

    def last_event_seq(self, connection: str | None = None) -> int:
        """The ``seq`` of the latest event of ``connection`` (None: of any); 0 without one."""
        found = self._query(
            "SELECT coalesce(max(seq), 0) AS seq FROM received_events "
            "WHERE $connection IS NULL OR connection = $connection",
            {"connection": connection},
        )
        return int(found["seq"].iloc[0])
