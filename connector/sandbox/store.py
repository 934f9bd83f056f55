"""The sandbox's persistence: one SQLite file (WAL) holding stored records, issued access tokens
and outgoing-webhook configurations, so that all of them survive a restart. The file holds door
codes and tokens: it is owner-only (0600), in a folder created 0700.

One connection serves every request, guarded by a lock: the requests of one server are handled
on one event loop and each does at most one short transaction, so a pool would only add cost.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from connector.canonical import canonical_json
from connector.errors import PmsSyncError
from connector.private_files import PRIVATE_FILE_MODE, ensure_private_file

DATABASE_FILE = "sandbox.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    account_id TEXT NOT NULL,
    entity TEXT NOT NULL,
    id TEXT NOT NULL,
    service_id TEXT NOT NULL UNIQUE,
    payload TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    writes INTEGER NOT NULL,
    last_event TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (account_id, entity, id)
);
CREATE TABLE IF NOT EXISTS access_tokens (
    token TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    account_ids TEXT NOT NULL,
    account_level INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS properties (
    account_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS webhooks (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    config TEXT NOT NULL,
    created_seq INTEGER NOT NULL
);
"""

# Service ids of stored records are derived, not random, so that they are stable across a
# reset and a restart and the same (account, entity, id) always has the same service id.
_SERVICE_ID_NAMESPACE = uuid.UUID("1f0e5c1e-6d7a-4bd2-9a38-3f3c3a2b9b51")


class StoreError(PmsSyncError):
    """The sandbox's data file cannot be opened or written."""


class WriteOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class StoredRecord:
    account_id: str
    entity: str
    id: str
    service_id: str
    payload: str
    first_seq: int
    last_seq: int
    writes: int
    last_event: str
    created_at: str
    updated_at: str
    property_status: str = "ACTIVE"  # of the record's account (PUT /properties/{account id})

    def as_json(self) -> dict[str, Any]:
        return {
            "accountId": self.account_id,
            "entity": self.entity,
            "id": self.id,
            "serviceId": self.service_id,
            "resource": json.loads(self.payload),
            "firstSeq": self.first_seq,
            "lastSeq": self.last_seq,
            "writes": self.writes,
            "lastEvent": self.last_event,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "propertyStatus": self.property_status,
        }


@dataclass(frozen=True, slots=True)
class AccessToken:
    token: str
    client_id: str
    account_ids: tuple[str, ...]
    account_level: bool
    expires_at: float


def service_id_of(account_id: str, entity: str, record_id: str) -> str:
    return uuid.uuid5(_SERVICE_ID_NAMESPACE, f"{account_id}\x1f{entity}\x1f{record_id}").hex


def _add_previous_payload(db: sqlite3.Connection) -> None:
    """The version a record had before its last saving sync write (``revert``); added to a
    data file written before the column existed."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(records)")}
    if "previous_payload" not in columns:
        db.execute("ALTER TABLE records ADD COLUMN previous_payload TEXT")


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_patch(merged.get(key), value)
    return merged


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_RECORD_COLUMNS = (
    "account_id, entity, id, service_id, payload, first_seq, last_seq, writes, last_event, "
    "created_at, updated_at"
)
# Stored records as read: the columns plus the status of their account's property.
_RECORD_SELECT = (
    "SELECT records.account_id, entity, id, service_id, payload, first_seq, last_seq, writes,"
    " last_event, created_at, records.updated_at, coalesce(properties.status, 'ACTIVE')"
    " FROM records LEFT JOIN properties USING (account_id)"
)


class SandboxStore:
    """Records, access tokens and webhook configurations in ``<data_path>/sandbox.sqlite3``."""

    def __init__(self, data_path: Path) -> None:
        self.path = data_path / DATABASE_FILE
        try:
            # Door codes and tokens: the file (and the journals SQLite gives its mode) 0600.
            ensure_private_file(self.path)
            for journal in ("-wal", "-shm", "-journal"):
                leftover = self.path.with_name(self.path.name + journal)
                if leftover.exists():
                    leftover.chmod(PRIVATE_FILE_MODE)
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode survives a crash of the process (only an OS crash can lose the
            # last transactions), which is what a stand-in needs, at a fraction of FULL's cost.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            _add_previous_payload(self._db)
            self._db.commit()
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"cannot open the sandbox data file {self.path}: {error}") from None
        self._lock = threading.Lock()
        (last_seq,) = self._db.execute(
            "SELECT max(coalesce((SELECT max(last_seq) FROM records), 0),"
            " coalesce((SELECT max(created_seq) FROM webhooks), 0))"
        ).fetchone()
        self._seq = int(last_seq)
        (webhooks,) = self._db.execute("SELECT count(*) FROM webhooks").fetchone()
        # Read on every created reservation (outgoing events): kept in memory, not queried.
        self.has_webhooks = bool(webhooks)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -- sync records -------------------------------------------------------------------------

    def upsert(
        self, account_id: str, entity: str, record_id: str, payload: str, event: str
    ) -> WriteOutcome:
        """Store a resource whatever the event says; identical content is skipped, not written."""
        with self._lock:
            row = self._db.execute(
                "SELECT payload FROM records WHERE account_id = ? AND entity = ? AND id = ?",
                (account_id, entity, record_id),
            ).fetchone()
            if row is not None and row[0] == payload:
                return WriteOutcome.SKIPPED
            seq = self._next_seq()
            now = _now()
            with self._db:
                self._db.execute(
                    "INSERT INTO records (" + _RECORD_COLUMNS + ")"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)"
                    " ON CONFLICT (account_id, entity, id) DO UPDATE SET"
                    " previous_payload = records.payload,"
                    " payload = excluded.payload, last_seq = excluded.last_seq,"
                    " writes = records.writes + 1, last_event = excluded.last_event,"
                    " updated_at = excluded.updated_at",
                    (
                        account_id,
                        entity,
                        record_id,
                        service_id_of(account_id, entity, record_id),
                        payload,
                        seq,
                        seq,
                        event,
                        now,
                        now,
                    ),
                )
            return WriteOutcome.CREATED if row is None else WriteOutcome.UPDATED

    @staticmethod
    def _filter(account_id: str | None, entity: str | None) -> tuple[str, list[str]]:
        clauses, params = [], []
        if account_id is not None:
            clauses.append("account_id = ?")
            params.append(account_id)
        if entity is not None:
            clauses.append("entity = ?")
            params.append(entity)
        return (f" WHERE {' AND '.join(clauses)}" if clauses else ""), params

    def records(
        self,
        account_id: str | None = None,
        entity: str | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[StoredRecord]:
        """Stored records, oldest first; ``limit``/``offset`` page through large stores."""
        where, params = self._filter(account_id, entity)
        where = where.replace("account_id = ?", "records.account_id = ?")
        with self._lock:
            rows = self._db.execute(
                f"{_RECORD_SELECT}{where} ORDER BY first_seq LIMIT ? OFFSET ?",
                (*params, -1 if limit is None else limit, offset),
            ).fetchall()
        return [StoredRecord(*row) for row in rows]

    def count(self, account_id: str | None = None, entity: str | None = None) -> int:
        where, params = self._filter(account_id, entity)
        with self._lock:
            (total,) = self._db.execute(f"SELECT count(*) FROM records{where}", params).fetchone()
        return int(total)

    def find_records(
        self, account_ids: tuple[str, ...], entity: str, key: str
    ) -> list[StoredRecord]:
        """Records of these accounts whose external id or service id is ``key``."""
        marks = ", ".join("?" for _ in account_ids)
        with self._lock:
            rows = self._db.execute(
                f"{_RECORD_SELECT} WHERE entity = ?"
                f" AND records.account_id IN ({marks}) AND (id = ? OR service_id = ?)"
                " ORDER BY first_seq",
                (entity, *account_ids, key, key),
            ).fetchall()
        return [StoredRecord(*row) for row in rows]

    def set_accommodation_status(
        self, target: StoredRecord, status: str, *, include_sub_units: bool
    ) -> int:
        """Set the status of an accommodation (and of its sub-units); the number of sub-units.

        Sub-units are the other accommodations of the same account sharing the target's room
        type (roomType.id, else roomType.code); a unit without a room type has none.
        """
        with self._lock, self._db:
            targets = [target.id]
            if include_sub_units:
                room_type = json.loads(target.payload).get("roomType") or {}
                member, value = (
                    ("$.roomType.id", room_type.get("id"))
                    if room_type.get("id")
                    else ("$.roomType.code", room_type.get("code"))
                )
                if value:
                    rows = self._db.execute(
                        "SELECT id FROM records WHERE account_id = ? AND entity = ? AND id != ?"
                        " AND json_extract(payload, ?) = ?",
                        (target.account_id, target.entity, target.id, member, value),
                    ).fetchall()
                    targets += [row[0] for row in rows]
            now = _now()
            for record_id in targets:
                (payload,) = self._db.execute(
                    "SELECT payload FROM records WHERE account_id = ? AND entity = ? AND id = ?",
                    (target.account_id, target.entity, record_id),
                ).fetchone()
                resource = json.loads(payload)
                resource["status"] = status
                # A status change made through the Open API is the service's own change, not a
                # sync write: the payload changes (so a later sync of the old content is an
                # update), the sync bookkeeping (sequence, writes, last event) does not.
                self._db.execute(
                    "UPDATE records SET payload = ?, updated_at = ?"
                    " WHERE account_id = ? AND entity = ? AND id = ?",
                    (canonical_json(resource), now, target.account_id, target.entity, record_id),
                )
        return len(targets) - 1

    def set_property_status(self, account_id: str, status: str, *, include_sub_units: bool) -> int:
        """Set the status of an account's property (and of all its units); the number of units.

        The property is the account (a hotel); its sub-units are all of its accommodations.
        Like a unit's status change, the units' stored resources get the status, their sync
        bookkeeping does not change.
        """
        with self._lock, self._db:
            now = _now()
            self._db.execute(
                "INSERT INTO properties VALUES (?, ?, ?) ON CONFLICT (account_id) DO UPDATE SET"
                " status = excluded.status, updated_at = excluded.updated_at",
                (account_id, status, now),
            )
            if not include_sub_units:
                return 0
            rows = self._db.execute(
                "SELECT id, payload FROM records WHERE account_id = ? AND entity = 'accommodation'",
                (account_id,),
            ).fetchall()
            for record_id, payload in rows:
                resource = json.loads(payload)
                resource["status"] = status
                self._db.execute(
                    "UPDATE records SET payload = ?, updated_at = ?"
                    " WHERE account_id = ? AND entity = 'accommodation' AND id = ?",
                    (canonical_json(resource), now, account_id, record_id),
                )
        return len(rows)

    def property_statuses(self) -> dict[str, str]:
        """Account id → status of every property whose status was ever set."""
        with self._lock:
            rows = self._db.execute(
                "SELECT account_id, status FROM properties ORDER BY account_id"
            ).fetchall()
        return {account_id: status for account_id, status in rows}

    # -- drift: what staff or a restore do to stored records (docs/sandbox.md, "Drift") -------

    def edit(
        self, account_id: str, entity: str, ids: list[str], changes: dict[str, Any]
    ) -> list[str]:
        """Merge ``changes`` into each stored resource (RFC 7386: null removes a member), as
        staff editing the record in the service's interface would; the ids edited.

        Not a sync write: the sync bookkeeping (sequence, writes, last event) stays.
        """
        edited: list[str] = []
        now = _now()
        with self._lock, self._db:
            for record_id in ids:
                row = self._db.execute(
                    "SELECT payload FROM records WHERE account_id = ? AND entity = ? AND id = ?",
                    (account_id, entity, record_id),
                ).fetchone()
                if row is None:
                    continue
                resource = _merge_patch(json.loads(row[0]), changes)
                resource["id"] = record_id  # a record keeps its id
                self._db.execute(
                    "UPDATE records SET payload = ?, updated_at = ?"
                    " WHERE account_id = ? AND entity = ? AND id = ?",
                    (canonical_json(resource), now, account_id, entity, record_id),
                )
                edited.append(record_id)
        return edited

    def delete(self, account_id: str, entity: str, ids: list[str]) -> list[str]:
        """Forget these records, as staff deleting them would; the ids deleted."""
        deleted: list[str] = []
        with self._lock, self._db:
            for record_id in ids:
                cursor = self._db.execute(
                    "DELETE FROM records WHERE account_id = ? AND entity = ? AND id = ?",
                    (account_id, entity, record_id),
                )
                if cursor.rowcount:
                    deleted.append(record_id)
        return deleted

    def revert(
        self, account_id: str, entity: str, ids: list[str] | None, since_seq: int | None
    ) -> list[str]:
        """Undo the last saving sync write of each record, as a restore from a backup taken
        before it would: an update's previous version comes back, a record whose only write
        was its creation disappears. ``ids`` and/or every record written after ``since_seq``.
        One version back only: a record reverted once has no earlier version left."""
        clauses: list[str] = ["account_id = ?", "entity = ?"]
        params: list[object] = [account_id, entity]
        if ids is not None:
            clauses.append(f"id IN ({', '.join('?' for _ in ids)})")
            params += ids
        if since_seq is not None:
            clauses.append("last_seq > ?")
            params.append(since_seq)
        reverted: list[str] = []
        now = _now()
        with self._lock, self._db:
            rows = self._db.execute(
                f"SELECT id, previous_payload FROM records WHERE {' AND '.join(clauses)}"
                " ORDER BY first_seq",
                params,
            ).fetchall()
            for record_id, previous in rows:
                if previous is None:
                    self._db.execute(
                        "DELETE FROM records WHERE account_id = ? AND entity = ? AND id = ?",
                        (account_id, entity, record_id),
                    )
                else:
                    self._db.execute(
                        "UPDATE records SET payload = ?, previous_payload = NULL, updated_at = ?"
                        " WHERE account_id = ? AND entity = ? AND id = ?",
                        (previous, now, account_id, entity, record_id),
                    )
                reverted.append(record_id)
        return reverted

    # -- access tokens ------------------------------------------------------------------------

    def save_access_token(self, token: AccessToken) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO access_tokens VALUES (?, ?, ?, ?, ?)",
                (
                    token.token,
                    token.client_id,
                    json.dumps(list(token.account_ids)),
                    int(token.account_level),
                    token.expires_at,
                ),
            )

    def access_token(self, token: str) -> AccessToken | None:
        with self._lock:
            row = self._db.execute(
                "SELECT token, client_id, account_ids, account_level, expires_at"
                " FROM access_tokens WHERE token = ?",
                (token,),
            ).fetchone()
        if row is None:
            return None
        return AccessToken(row[0], row[1], tuple(json.loads(row[2])), bool(row[3]), row[4])

    def account_level_token(
        self, client_id: str, account_id: str, now: float
    ) -> AccessToken | None:
        """A still valid account-level token issued to this client for this account."""
        with self._lock:
            row = self._db.execute(
                "SELECT token, client_id, account_ids, account_level, expires_at"
                " FROM access_tokens WHERE client_id = ? AND account_level = 1"
                " AND account_ids = ? AND expires_at > ? ORDER BY expires_at DESC LIMIT 1",
                (client_id, json.dumps([account_id]), now),
            ).fetchone()
        if row is None:
            return None
        return AccessToken(row[0], row[1], tuple(json.loads(row[2])), True, row[4])

    def forget_expired_tokens(self, now: float) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM access_tokens WHERE expires_at <= ?", (now,))

    # -- outgoing-webhook configurations ------------------------------------------------------

    def create_webhook(self, owner: str, config: dict[str, Any]) -> str:
        # 24 hex digits, the shape of the identifiers named _id that such services return.
        webhook_id = uuid.uuid4().hex[:24]
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO webhooks VALUES (?, ?, ?, ?)",
                (webhook_id, owner, json.dumps(config), self._next_seq()),
            )
            self.has_webhooks = True
        return webhook_id

    def webhooks(self, owner: str) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, config FROM webhooks WHERE owner = ? ORDER BY created_seq", (owner,)
            ).fetchall()
        return [(row[0], json.loads(row[1])) for row in rows]

    def webhook(self, owner: str, webhook_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT config FROM webhooks WHERE owner = ? AND id = ?", (owner, webhook_id)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def replace_webhook(self, owner: str, webhook_id: str, config: dict[str, Any]) -> bool:
        with self._lock, self._db:
            cursor = self._db.execute(
                "UPDATE webhooks SET config = ? WHERE owner = ? AND id = ?",
                (json.dumps(config), owner, webhook_id),
            )
        return cursor.rowcount == 1

    def delete_webhook(self, owner: str, webhook_id: str) -> bool:
        with self._lock, self._db:
            cursor = self._db.execute(
                "DELETE FROM webhooks WHERE owner = ? AND id = ?", (owner, webhook_id)
            )
            (left,) = self._db.execute("SELECT count(*) FROM webhooks").fetchone()
            self.has_webhooks = bool(left)
        return cursor.rowcount == 1

    # -- admin --------------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget records, webhook configurations and property statuses; issued access tokens
        stay valid."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM records")
            self._db.execute("DELETE FROM webhooks")
            self._db.execute("DELETE FROM properties")
            self.has_webhooks = False
        # The sequence is not rewound: within a server's life it only ever grows.

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT entity, count(*) FROM records GROUP BY entity"
            ).fetchall()
        return {entity: count for entity, count in rows}
