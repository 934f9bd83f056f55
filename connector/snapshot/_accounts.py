"""The snapshot's memory of the Open API: accounts discovered by external id (with their
account-level tokens) and the status pms-sync gave each property.

Kept apart from the records: a mixin of both backends, so the tables of migration 8 have
their SQL in one place.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum

import pandas as pd

from connector.contract import CANCELLED
from connector.secrets import MASK, checked_secret
from connector.snapshot._primitives import StorePrimitives, in_list, latest_per_key


@dataclass(frozen=True)
class DiscoveredAccount:
    """An account of an Open API client, found by its external id: the account id that sync
    requests carry, and the account-level token the lookup handed out, with its expiry."""

    external_id: str
    account_id: str
    name: str
    token: str
    expires_at: float  # epoch seconds
    fetched_at: float  # epoch seconds

    def __post_init__(self) -> None:
        # Masked in every sink from the moment it is known; sent in a header, so checked.
        token = checked_secret(
            self.token, f"the account token of external id {self.external_id!r} (Open API)"
        )
        object.__setattr__(self, "token", token or "")

    def __repr__(self) -> str:  # never print a token
        return (
            f"DiscoveredAccount(external_id={self.external_id!r}, account_id={self.account_id!r},"
            f" name={self.name!r}, token={MASK!r}, expires_at={self.expires_at})"
        )

    @property
    def lifetime_s(self) -> float:
        """The lifetime the token had when it was fetched."""
        return max(self.expires_at - self.fetched_at, 0.0)

    def expires_in(self, now: float | None = None) -> float:
        return self.expires_at - (time.time() if now is None else now)

    def due(self, now: float | None = None, *, margin_s: float) -> bool:
        """Whether the token should be renewed before its next use: less than ``margin_s``
        (the setting ``open_api.renew_margin``; at most a quarter of its lifetime, so a
        short-lived token is not renewed at once) is left."""
        margin = min(margin_s, self.lifetime_s / 4)
        return self.expires_in(now) <= margin


class PropertyState(StrEnum):
    ACTIVE = "active"
    INACTIVE = "inactive"


@dataclass(frozen=True)
class PropertyStatusRecord:
    """What pms-sync last told the service about one property (an account)."""

    account_id: str
    status: PropertyState
    update_sub_units: bool
    changed_at: datetime
    request_id: str | None = None
    connection: str | None = None


def discovered_of(rows: pd.DataFrame) -> list[DiscoveredAccount]:
    """Rows of ``discovered_accounts`` as the accounts they hold (either backend's frame)."""
    return [
        DiscoveredAccount(
            external_id=str(row.external_id),
            account_id=str(row.account_id),
            name=str(row.name),
            token=str(row.token),
            expires_at=float(row.expires_at),
            fetched_at=float(row.fetched_at),
        )
        for row in rows.itertuples(index=False)
    ]


class AccountTables(StorePrimitives):
    """Reads and writes of ``discovered_accounts`` and ``property_status`` (migration 8), on
    either backend (``connector.snapshot._primitives``)."""

    # -- discovered accounts --------------------------------------------------------------

    def discovered_accounts(self, client_key: str) -> list[DiscoveredAccount]:
        rows = self._query(
            "SELECT external_id, account_id, name, token, expires_at, fetched_at "
            "FROM discovered_accounts WHERE client_key = :key ORDER BY external_id",
            {"key": client_key},
        )
        return discovered_of(rows)

    def save_discovered_accounts(
        self, client_key: str, accounts: Sequence[DiscoveredAccount]
    ) -> None:
        if not accounts:
            return
        frame = pd.DataFrame(
            {
                "external_id": [a.external_id for a in accounts],
                "account_id": [a.account_id for a in accounts],
                "name": [a.name for a in accounts],
                "token": [a.token for a in accounts],
                "expires_at": [float(a.expires_at) for a in accounts],
                "fetched_at": [float(a.fetched_at) for a in accounts],
            }
        )
        with self._transaction() as session:
            self._execute(
                session,
                """
                INSERT INTO discovered_accounts
                SELECT :key, external_id, account_id, name, token,
                       CAST(expires_at AS DOUBLE PRECISION), CAST(fetched_at AS DOUBLE PRECISION)
                FROM {rows}
                ON CONFLICT (client_key, external_id) DO UPDATE SET
                    account_id = excluded.account_id, name = excluded.name,
                    token = excluded.token, expires_at = excluded.expires_at,
                    fetched_at = excluded.fetched_at
                """,
                {"key": client_key},
                latest_per_key(frame, ("external_id",)),
            )

    def forget_discovered_accounts(self, client_key: str, external_ids: Collection[str]) -> None:
        """Drop entries a lookup no longer finds (the account left the client's scope)."""
        if not external_ids:
            return
        with self._transaction() as session:
            self._execute(
                session,
                "DELETE FROM discovered_accounts WHERE client_key = :key AND "
                + in_list("external_id", "ids"),
                {"key": client_key, "ids": sorted(external_ids)},
            )

    # -- property status ------------------------------------------------------------------

    def record_property_statuses(self, records: Sequence[PropertyStatusRecord]) -> None:
        if not records:
            return
        frame = pd.DataFrame(
            {
                "account_id": [r.account_id for r in records],
                "status": [str(r.status) for r in records],
                "update_sub_units": [r.update_sub_units for r in records],
                "changed_at": [r.changed_at for r in records],
                "request_id": [r.request_id for r in records],
                "connection": [r.connection for r in records],
            }
        )
        with self._transaction() as session:
            self._execute(
                session,
                """
                INSERT INTO property_status
                SELECT account_id, status, CAST(update_sub_units AS BOOLEAN),
                       CAST(changed_at AS TIMESTAMP), request_id, connection
                FROM {rows}
                ON CONFLICT (account_id) DO UPDATE SET
                    status = excluded.status, update_sub_units = excluded.update_sub_units,
                    changed_at = excluded.changed_at, request_id = excluded.request_id,
                    connection = excluded.connection
                """,
                rows=latest_per_key(frame, ("account_id",)),
            )

    def accounts_of_connection(self, connection: str | None) -> pd.DataFrame:
        """Per account with accommodations this connection owns: ``units`` (acknowledged, not
        deactivated) and ``shared`` (active units of the account another connection owns)."""
        return self._query(
            """
            SELECT account_id,
                   count(*) FILTER (WHERE connection IS NOT DISTINCT FROM CAST(:c AS VARCHAR)
                                    AND status <> 'deactivated') AS units,
                   count(*) FILTER (WHERE connection IS DISTINCT FROM CAST(:c AS VARCHAR)
                                    AND status <> 'deactivated') AS shared
            FROM acknowledged
            WHERE entity = 'accommodation'
            GROUP BY account_id
            HAVING count(*) FILTER (WHERE connection IS NOT DISTINCT FROM CAST(:c AS VARCHAR)) > 0
            ORDER BY account_id
            """,
            {"c": connection},
        )

    def account_stays(self, accounts: Collection[str], today: date) -> pd.DataFrame:
        """Per account of ``accounts``: reservations the service holds (acknowledged, not
        cancelled) with a stay ending today or later, and the last check-out."""
        columns = ["account_id", "stays", "last_checkout"]
        if not accounts:
            return pd.DataFrame(columns=columns)
        found = self._query(
            f"""
            SELECT account_id, count(*) AS stays, max(checkout) AS last_checkout
            FROM acknowledged
            WHERE entity = 'reservation' AND {in_list("account_id", "accounts")}
              AND status <> 'cancelled' AND checkout >= :today
              AND coalesce({self._json_text("payload", "status")}, '') <> :cancelled
            GROUP BY account_id ORDER BY account_id
            """,
            {"accounts": sorted(accounts), "today": today, "cancelled": CANCELLED},
        )
        found["last_checkout"] = pd.to_datetime(found["last_checkout"]).dt.date
        return found.loc[:, columns]

    def deactivated_units(self, accounts: Collection[str]) -> pd.DataFrame:
        """Acknowledged accommodations of ``accounts`` that pms-sync deactivated, with the
        payload it sent (``account_id, record_id, payload, content_hash``)."""
        if not accounts:
            return pd.DataFrame(columns=["account_id", "record_id", "payload", "content_hash"])
        return self._query(
            "SELECT account_id, record_id, payload, content_hash FROM acknowledged "
            "WHERE entity = 'accommodation' AND status = 'deactivated' AND "
            + in_list("account_id", "accounts")
            + " ORDER BY account_id, record_id",
            {"accounts": sorted(accounts)},
        )
