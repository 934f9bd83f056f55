"""Who may write which part of a PostgreSQL snapshot at once: advisory locks per scope.

A DuckDB file has one writer (its file lock); a PostgreSQL snapshot serves several runs at
once as long as their scopes differ. The locks form a hierarchy, so that the coarser scope
excludes the finer ones beneath it and nothing else:

* the whole snapshot: a writer without a scope (a tool, a links run) takes it exclusively,
  every scoped run shares it;
* a connection (mapping name): a run of the whole connection (no accounts named, or a
  reconciliation pass, which is kept per connection) takes it exclusively, a run of some of
  its accounts shares it;
* an account of a connection: taken exclusively by the run that syncs it.

Session-level advisory locks end with the session, so a killed run never leaves one behind.
Each holder writes who it is (pid, host, start, command) into ``pms_sync_lock_holders``
keyed by its backend pid, so that a refused run can name the holder.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import sqlalchemy as sa

from connector.errors import SnapshotLockedError
from connector.secrets import mask_text

_RETRY_S = 0.25
_COMMAND_CHARS = 240

HOLDERS_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS pms_sync_lock_holders (
    backend_pid INTEGER PRIMARY KEY,   -- pg_backend_pid() of the holding session
    pid         INTEGER NOT NULL,      -- the pms-sync process
    host        VARCHAR NOT NULL,
    started_at  TIMESTAMP NOT NULL,    -- UTC
    command     VARCHAR NOT NULL,      -- its command line, secrets masked
    scope       VARCHAR NOT NULL
)
"""


@dataclass(frozen=True)
class LockScope:
    """What one run writes: a connection (None: runs without a mapping name) and the accounts
    it syncs (empty: the whole connection)."""

    connection: str | None
    accounts: frozenset[str] = field(default_factory=frozenset)
    whole_connection: bool = False  # e.g. a reconciliation pass, kept per connection

    def describe(self) -> str:
        name = f"connection {self.connection!r}" if self.connection else "the unnamed connection"
        if self.whole_connection or not self.accounts:
            return name
        return f"{name}, account(s) {', '.join(sorted(self.accounts))}"


@dataclass(frozen=True)
class _Lock:
    key: int
    shared: bool
    label: str


def _locks(scope: LockScope | None, namespace: str) -> list[_Lock]:
    """The locks a scope takes, coarsest first (one order for every run: no deadlock)."""

    def key(*parts: str) -> int:
        digest = hashlib.blake2b("\x1f".join((namespace, *parts)).encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big", signed=True)

    whole = _Lock(key("snapshot"), scope is not None, "the whole snapshot")
    if scope is None:
        return [whole]
    connection = scope.connection or ""
    account_wide = bool(scope.accounts) and not scope.whole_connection
    locks = [whole, _Lock(key("connection", connection), account_wide, scope.describe())]
    if account_wide:
        name = f"connection {connection!r}" if connection else "the unnamed connection"
        locks += [
            _Lock(key("account", connection, account), False, f"{name}, account {account!r}")
            for account in sorted(scope.accounts)
        ]
    return locks


class ScopeLocks:
    """The advisory locks of one session (one SQLAlchemy connection in autocommit)."""

    def __init__(self, connection: sa.Connection, scope: LockScope | None, shown: str) -> None:
        self._connection = connection
        self._scope = scope
        self._shown = shown
        namespace = connection.execute(
            sa.text("SELECT current_database() || '.' || current_schema()")
        ).scalar_one()
        self._locks = _locks(scope, str(namespace))
        self._held: list[_Lock] = []

    def acquire(self, wait_s: float) -> None:
        """Take every lock of the scope, waiting up to ``wait_s`` for a holder to finish."""
        deadline = time.monotonic() + wait_s
        while True:
            blocked = self._try_all()
            if blocked is None:
                self._register()
                return
            if time.monotonic() >= deadline:
                raise SnapshotLockedError(self._refusal(blocked, wait_s))
            time.sleep(_RETRY_S)

    def release(self) -> None:
        for lock in reversed(self._held):
            function = "pg_advisory_unlock_shared" if lock.shared else "pg_advisory_unlock"
            self._connection.execute(sa.text(f"SELECT {function}(:key)"), {"key": lock.key})
        if self._held:
            self._connection.execute(
                sa.text("DELETE FROM pms_sync_lock_holders WHERE backend_pid = pg_backend_pid()")
            )
        self._held = []

    def _try_all(self) -> _Lock | None:
        for lock in self._locks:
            function = "pg_try_advisory_lock_shared" if lock.shared else "pg_try_advisory_lock"
            taken = self._connection.execute(
                sa.text(f"SELECT {function}(:key)"), {"key": lock.key}
            ).scalar_one()
            if not taken:
                self.release()
                return lock
            self._held.append(lock)
        return None

    def _register(self) -> None:
        command = mask_text(" ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]))
        self._connection.execute(
            sa.text(
                """
                INSERT INTO pms_sync_lock_holders
                VALUES (pg_backend_pid(), :pid, :host, :started_at, :command, :scope)
                ON CONFLICT (backend_pid) DO UPDATE SET
                    pid = excluded.pid, host = excluded.host, started_at = excluded.started_at,
                    command = excluded.command, scope = excluded.scope
                """
            ),
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started_at": datetime.now(UTC).replace(tzinfo=None),
                "command": command[:_COMMAND_CHARS],
                "scope": self._scope.describe() if self._scope else "the whole snapshot",
            },
        )

    def _refusal(self, blocked: _Lock, waited_s: float) -> str:
        waited = f" after waiting {waited_s:g} s" if waited_s > 0 else ""
        holders = self._holders(blocked)
        held_by = "; ".join(holders) if holders else "another pms-sync run"
        return (
            f"{blocked.label} of the snapshot {self._shown} is being written by {held_by}"
            f"{waited}; wait for that run (--wait SECONDS) or sync another scope"
        )

    def _holders(self, blocked: _Lock) -> Sequence[str]:
        unsigned = blocked.key & 0xFFFFFFFFFFFFFFFF
        rows = self._connection.execute(
            sa.text(
                """
                SELECT h.pid, h.host, h.started_at, h.command, h.scope, a.pid AS backend,
                       a.application_name, a.backend_start
                FROM pg_locks AS l
                JOIN pg_stat_activity AS a ON a.pid = l.pid
                LEFT JOIN pms_sync_lock_holders AS h ON h.backend_pid = l.pid
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                  AND l.classid = CAST(:high AS bigint)::oid
                  AND l.objid = CAST(:low AS bigint)::oid
                  AND l.pid <> pg_backend_pid()
                ORDER BY a.backend_start
                """
            ),
            {"high": unsigned >> 32, "low": unsigned & 0xFFFFFFFF},
        ).all()
        shown = []
        for row in rows:
            if row.pid is None:
                shown.append(
                    f"database session {row.backend} ({row.application_name or 'no name'}, "
                    f"since {row.backend_start:%Y-%m-%d %H:%M:%S %Z})"
                )
                continue
            shown.append(
                f"pid {row.pid} on {row.host} since {row.started_at:%Y-%m-%d %H:%M:%S} UTC "
                f"({row.scope}; command: {row.command})"
            )
        return shown
