"""The snapshot's memory of guest links (migration 10): per reservation the guest-app, chat
and online check-in links the Open API gave, the metadata of the chat's last message, and when
they were fetched.

A mixin of both backends, like ``_accounts.py``, so the SQL of the table is in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from datetime import date, datetime

import pandas as pd

from connector.contract import CANCELLED
from connector.snapshot._primitives import StorePrimitives, latest_per_key


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


_COLUMN_TYPES = {
    "checkin": "DATE",
    "fetched_at": "TIMESTAMP",
    "message_has_attachment": "BOOLEAN",
    "message_seen": "BOOLEAN",
}


class LinkTables(StorePrimitives):
    """Reads and writes of ``guest_links``, on either backend."""

    def link_candidates(self, connection: str | None, first: date, last: date) -> pd.DataFrame:
        """Reservations of ``connection`` the service holds (acknowledged, not cancelled) with
        a check-in from ``first`` to ``last`` (both included), soonest check-in first, with
        when their links were last fetched (``fetched_at``, NaT: never).

        Columns: ``account_id, reservation_id, checkin, checkout, fetched_at``.
        """
        return self._query(
            f"""
            SELECT a.account_id, a.record_id AS reservation_id, a.checkin, a.checkout,
                   g.fetched_at
            FROM acknowledged AS a
            LEFT JOIN guest_links AS g
                ON g.account_id = a.account_id AND g.reservation_id = a.record_id
            WHERE a.entity = 'reservation'
              AND a.connection IS NOT DISTINCT FROM CAST(:connection AS VARCHAR)
              AND a.status <> 'cancelled'
              AND coalesce({self._json_text("a.payload", "status")}, '') <> :cancelled
              AND a.checkin BETWEEN :first AND :last
            ORDER BY a.checkin, a.account_id, a.record_id
            """,
            {"connection": connection, "cancelled": CANCELLED, "first": first, "last": last},
        )

    def save_guest_links(self, links: Sequence[GuestLinkRecord]) -> None:
        """Insert or replace the links of each reservation, in one transaction."""
        if not links:
            return
        frame = pd.DataFrame([asdict(link) for link in links], columns=list(GUEST_LINK_COLUMNS))
        selected = ", ".join(
            f"CAST({name} AS {_COLUMN_TYPES[name]})" if name in _COLUMN_TYPES else name
            for name in GUEST_LINK_COLUMNS
        )
        keys = ("account_id", "reservation_id")
        replaced = ", ".join(
            f"{name} = excluded.{name}" for name in GUEST_LINK_COLUMNS if name not in keys
        )
        with self._transaction() as session:
            self._execute(
                session,
                f"INSERT INTO guest_links ({', '.join(GUEST_LINK_COLUMNS)}) "
                f"SELECT {selected} FROM {{rows}} "
                f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {replaced}",
                rows=latest_per_key(frame, keys),
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
            WHERE a.connection IS NOT DISTINCT FROM CAST(:connection AS VARCHAR)
              AND a.status <> 'cancelled'
              AND coalesce({self._json_text("a.payload", "status")}, '') <> :cancelled
              AND (CAST(:first AS DATE) IS NULL OR a.checkin >= :first)
              AND (CAST(:last AS DATE) IS NULL OR a.checkin <= :last)
            ORDER BY g.checkin, g.account_id, g.reservation_id
            """,
            {"connection": connection, "cancelled": CANCELLED, "first": first, "last": last},
        )
