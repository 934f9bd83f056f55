"""Events received from the service (migration 10): each stored once, whatever the number of
deliveries, in the order of their last delivery; and how far each write-back destination has them
(migration 13).

A mixin of both backends. The receiver (``pms-sync receive``) writes them to a store of
its own (``events.duckdb`` by default, see ``connector.events``) so that a long-running process
never holds the snapshot's single-writer lock; the table is the same in both files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from connector.snapshot._primitives import StorePrimitives

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


class EventTables(StorePrimitives):
    """Reads and writes of ``received_events``, on either backend."""

    def record_events(self, deliveries: Sequence[IncomingEvent]) -> list[bool]:
        """Store each event once: a new key gets the next ``seq``; a known key (a redelivery)
        counts one more delivery and takes the next ``seq`` too, so the writers' cursors see
        the row changed and carry its count to the destinations. One transaction; per
        delivery, whether it was new."""
        if not deliveries:
            return []
        fresh: list[bool] = []
        with self._transaction() as session:
            self._lock_events(session)  # ``seq`` is the order of the last delivery
            [(last,)] = self._fetch(session, "SELECT coalesce(max(seq), 0) FROM received_events")
            seq = int(last)
            for item in deliveries:
                seq += 1
                known = self._fetch(
                    session,
                    "UPDATE received_events SET deliveries = deliveries + 1, seq = :seq, "
                    "last_received_at = greatest(last_received_at, :at) "
                    "WHERE connection = :connection AND event_key = :key RETURNING seq",
                    {
                        "at": item.received_at,
                        "seq": seq,
                        "connection": item.connection,
                        "key": item.event_key,
                    },
                )
                if known:
                    fresh.append(False)
                    continue
                self._execute(
                    session,
                    "INSERT INTO received_events VALUES (:connection, :key, :seq, :account, "
                    ":event, :resource, :at, :at, 1)",
                    {
                        "connection": item.connection,
                        "key": item.event_key,
                        "seq": seq,
                        "account": item.account_id,
                        "event": item.event,
                        "resource": item.resource,
                        "at": item.received_at,
                    },
                )
                fresh.append(True)
        return fresh

    def received_events(
        self, connection: str | None = None, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> pd.DataFrame:
        """Events of ``connection`` (None: every connection) with ``after_seq < seq <=
        upto_seq``, in the order of their last delivery. Columns: ``RECEIVED_EVENT_COLUMNS``."""
        return self._query(
            f"""
            SELECT {", ".join(RECEIVED_EVENT_COLUMNS)} FROM received_events
            WHERE (CAST(:connection AS VARCHAR) IS NULL OR connection = :connection)
              AND seq > :after AND (CAST(:upto AS BIGINT) IS NULL OR seq <= :upto)
            ORDER BY seq
            """,
            {"connection": connection, "after": after_seq, "upto": upto_seq},
        )

    def last_event_seq(self, connection: str | None = None) -> int:
        """The ``seq`` of the latest event of ``connection`` (None: of any); 0 without one."""
        found = self._query(
            "SELECT coalesce(max(seq), 0) AS seq FROM received_events "
            "WHERE CAST(:connection AS VARCHAR) IS NULL OR connection = :connection",
            {"connection": connection},
        )
        return int(found["seq"].iloc[0])

    def event_write_cursors(self, connection: str) -> dict[str, int]:
        """Per destination of ``connection``, the ``seq`` of the last event written there."""
        found = self._query(
            "SELECT destination, upto_seq FROM event_write_cursors WHERE connection = :connection",
            {"connection": connection},
        )
        return {
            str(d): int(s) for d, s in zip(found["destination"], found["upto_seq"], strict=True)
        }

    def advance_event_write_cursors(
        self, connection: str, written: Mapping[str, int], at: datetime
    ) -> None:
        """Record that each destination of ``written`` holds the events up to its ``seq``; a
        cursor never moves back (a slower writer that started earlier finishes later)."""
        if not written:
            return
        with self._transaction() as session:
            for destination, upto in written.items():
                self._execute(
                    session,
                    "INSERT INTO event_write_cursors VALUES (:connection, :destination, :upto, :at) "
                    "ON CONFLICT (connection, destination) DO UPDATE SET "
                    "upto_seq = greatest(event_write_cursors.upto_seq, excluded.upto_seq), "
                    "written_at = excluded.written_at",
                    {"connection": connection, "destination": destination, "upto": upto, "at": at},
                )
