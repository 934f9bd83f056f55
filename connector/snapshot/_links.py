"""The snapshot's memory of guest links (migration 10): per reservation the guest-app, chat
and online check-in links the Open API gave, the metadata of the chat's last message, and when
they were fetched.

A mixin of the DuckDB backend, like ``_accounts.py``, so the SQL of the table is in one place
(the PostgreSQL backend ports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, fields
from datetime import date, datetime

import duckdb
import pandas as pd

from connector.contract import CANCELLED


@dataclass(frozen=True)
class GuestLinkRecord:
    """One reservation's links as fetched (``message_*``: the chat's last message, if any)."""

    account_id: str
    reservation_id: str
    connection: str | None
    checkin: date | None
    guest_app: str
    chat_link: str
    online_check_in_link: str
    fetched_at: datetime
    message_author: str | None = None
    message_author_type: str | None = None
    message_time: str | None = None
    message_sent_via: str | None = None
    message_has_attachment: bool | None = None
    message_seen: bool | None = None
    message_body: str | None = None  # None unless the links policy keeps bodies
    request_id: str | None = None


GUEST_LINK_COLUMNS: tuple[str, ...] = tuple(item.name for item in fields(GuestLinkRecord))


class LinkTables:
    """Reads and writes of ``guest_links``; mixed into the DuckDB backend."""

    def _query(
        self, sql: str, params: list[object] | dict[str, object] | None = None
    ) -> pd.DataFrame:
        raise NotImplementedError  # provided by the backend

    def _transaction(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        raise NotImplementedError  # provided by the backend

    def link_candidates(self, connection: str | None, first: date, last: date) -> pd.DataFrame:
        """Reservations of ``connection`` the service holds (acknowledged, not cancelled) with
        a check-in from ``first`` to ``last`` (both included), soonest check-in first, with
        when their links were last fetched (``fetched_at``, NaT: never).

        Columns: ``account_id, reservation_id, checkin, checkout, fetched_at``.
        """
        return self._query(
            """
            SELECT a.account_id, a.record_id AS reservation_id, a.checkin, a.checkout,
                   g.fetched_at
            FROM acknowledged AS a
            LEFT JOIN guest_links AS g
                ON g.account_id = a.account_id AND g.reservation_id = a.record_id
            WHERE a.entity = 'reservation' AND a.connection IS NOT DISTINCT FROM $connection
              AND a.status <> 'cancelled'
              AND coalesce(json_extract_string(a.payload, '$.status'), '') <> $cancelled
              AND a.checkin BETWEEN $first AND $last
            ORDER BY a.checkin, a.account_id, a.record_id
            """,
            {"connection": connection, "cancelled": CANCELLED, "first": first, "last": last},
        )

    def save_guest_links(self, links: Sequence[GuestLinkRecord]) -> None:
        """Insert or replace the links of each reservation, in one transaction."""
        if not links:
            return
        frame = pd.DataFrame([asdict(link) for link in links], columns=list(GUEST_LINK_COLUMNS))
        frame["checkin"] = pd.to_datetime(frame["checkin"])
        with self._transaction() as cursor:
            cursor.register("links_frame", frame)
            cursor.execute(
                f"""
                INSERT OR REPLACE INTO guest_links BY NAME
                SELECT * REPLACE (CAST(checkin AS DATE) AS checkin,
                                  CAST(fetched_at AS TIMESTAMP) AS fetched_at,
                                  CAST(message_has_attachment AS BOOLEAN) AS message_has_attachment,
                                  CAST(message_seen AS BOOLEAN) AS message_seen)
                FROM (SELECT {", ".join(GUEST_LINK_COLUMNS)} FROM links_frame)
                """
            )

    def guest_links(
        self, connection: str | None, first: date | None = None, last: date | None = None
    ) -> pd.DataFrame:
        """The links the snapshot holds for ``connection``'s reservations (the reservation
        still acknowledged, not cancelled), optionally only check-ins from ``first`` to
        ``last``; soonest check-in first. Columns: ``GUEST_LINK_COLUMNS``."""
        columns = ", ".join(f"g.{name}" for name in GUEST_LINK_COLUMNS)
        return self._query(
            f"""
            SELECT {columns}
            FROM guest_links AS g
            JOIN acknowledged AS a
                ON a.entity = 'reservation' AND a.account_id = g.account_id
               AND a.record_id = g.reservation_id
            WHERE a.connection IS NOT DISTINCT FROM $connection
              AND a.status <> 'cancelled'
              AND coalesce(json_extract_string(a.payload, '$.status'), '') <> $cancelled
              AND ($first IS NULL OR a.checkin >= $first)
              AND ($last IS NULL OR a.checkin <= $last)
            ORDER BY g.checkin, g.account_id, g.reservation_id
            """,
            {"connection": connection, "cancelled": CANCELLED, "first": first, "last": last},
        )
