"""The PostgreSQL snapshot backend: the same tables as the DuckDB file, written by many runs.

PostgreSQL stores; DuckDB computes. The set-based decisions (the diff, the re-send selection,
the stays in units) are the DuckDB backend's SQL run on an in-memory DuckDB into which the
rows they need are pulled: hashes, owners and dates, never whole payloads, and only of the
accounts the request concerns. The payloads a decision hands back (a record to cancel, a
record to re-send) are then read by key. Everything else is plain SQL on PostgreSQL, written
by this module (docs/decisions.md, "A PostgreSQL snapshot").

The schema is ``connector.snapshot._migrations.MIGRATIONS``, the one list both backends apply
(``statements_for`` adapts a type name). Writes commit one transaction per call, like the
DuckDB file: acknowledgements are durable as they arrive. Locks are per scope
(``connector.snapshot._locks``), not per database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, fields
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, cast

import duckdb
import pandas as pd
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.pool import NullPool

from connector.contract import CANCELLED, CONTRACT_FINGERPRINT, Entity
from connector.duckdb_memory import open_duckdb
from connector.errors import SnapshotError
from connector.records import FINGERPRINT_COLUMNS
from connector.snapshot._accounts import DiscoveredAccount, PropertyStatusRecord, discovered_of
from connector.snapshot._duckdb import DuckDBSnapshot
from connector.snapshot._events import RECEIVED_EVENT_COLUMNS, IncomingEvent
from connector.snapshot._fingerprints import STORED_SQL, connection_key
from connector.snapshot._links import GUEST_LINK_COLUMNS, GuestLinkRecord
from connector.snapshot._location import shown_location, sqlalchemy_url
from connector.snapshot._locks import HOLDERS_TABLE_SQL, LockScope, ScopeLocks
from connector.snapshot._migrations import MIGRATIONS, migrate, statements_for
from connector.snapshot._model import (
    DiffRequest,
    DiffResult,
    DriftEvent,
    PossiblyStored,
    ReconciliationPass,
    RecordStatus,
    Refusal,
    ResendRequest,
    ResendResult,
    RunRecord,
    UnitStaysRequest,
)
from connector.snapshot._portable import PortableReads
from connector.snapshot._rate_ledger import PostgresRateLedger

# The migrations' lock, one per schema (PostgreSQL's advisory locks are database-wide): two
# runs opening a fresh schema at once must not both create the tables, and a run migrating
# one schema must not hold up the snapshots in other schemas of the same database.
_MIGRATION_LOCK_SQL = (
    "SELECT pg_advisory_xact_lock(hashtextextended("
    "'pms_sync migrations ' || current_database() || '.' || current_schema(), 0))"
)

# PostgreSQL type OIDs whose frames take the dtypes DuckDB gives the same columns.
_DATES = {1082, 1114, 1184}
_INTEGERS = {20: "int64", 21: "int32", 23: "int32"}
_FLOATS = {700, 701}  # numeric stays Decimal: fingerprints sum 64-bit hashes exactly
_BOOLEAN = 16

# The acknowledged columns a decision needs: everything but the payload, which stands in as
# the one member the SQL reads from it (its status).

_DECISION_COLUMNS = """
    account_id, entity, record_id, content_hash,
    json_build_object('status', CAST(payload AS json) -> 'status')::text AS payload,
    checkin, checkout, status, acknowledged_at, request_id, connection, payload_md5,
    validated_with
"""


class PostgresSnapshot(PortableReads):
    """A snapshot held in a PostgreSQL database (or the schema a URL's search_path names)."""

    def __init__(self, connection: sa.Connection, location: str, *, read_only: bool) -> None:
        self._connection = connection
        self.location = location
        self.read_only = read_only

    @classmethod
    @contextmanager
    def open(
        cls,
        url: str,
        *,
        lock_timeout: float = 0.0,
        read_only: bool = False,
        scope: LockScope | None = None,
    ) -> Iterator[PostgresSnapshot]:
        """Connect, migrate, and (to write) take the scope's locks, waiting ``lock_timeout``.

        ``read_only`` writes no row: the store lives in one transaction that is rolled back
        at the end, and it takes no scope lock. A schema without the latest steps is migrated
        first, in its own committed transaction as a writer would: migrated inside the read
        transaction, it held the migrations' lock (and the new tables) until the end, so a
        second reader of the same thread (fingerprints, then validated payloads) waited on
        the first forever.
        """
        shown = shown_location(url)
        engine = sa.create_engine(
            sqlalchemy_url(url),
            poolclass=NullPool,
            connect_args={"connect_timeout": 10, "application_name": "pms-sync"},
        )
        sa.event.listen(engine, "connect", _utc_session)
        try:
            connection = engine.connect()
        except sa.exc.SQLAlchemyError as error:
            engine.dispose()
            raise SnapshotError(
                f"cannot open the snapshot {shown}: {_first_line(error)}"
            ) from error
        locks: ScopeLocks | None = None
        lock_session: sa.Connection | None = None
        try:
            if read_only:
                # The migration commits on its own: its advisory lock is held to the end of its
                # transaction, and a reader kept open while the same run opens the snapshot
                # again (the fingerprint reader during the mapping) would wait on itself.
                with connection.begin():
                    missing = _missing_steps(connection)
                if missing:
                    with connection.begin():
                        _migrate(connection)
                connection.begin()
            else:
                with connection.begin():
                    _migrate(connection)
                lock_session = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                locks = ScopeLocks(lock_session, scope, shown)
                locks.acquire(lock_timeout)
            yield cls(connection, shown, read_only=read_only)
        except sa.exc.SQLAlchemyError as error:
            raise SnapshotError(f"cannot use the snapshot {shown}: {_first_line(error)}") from error
        finally:
            if connection.in_transaction():
                connection.rollback()
            connection.close()
            if lock_session is not None:
                if locks is not None:
                    locks.release()
                lock_session.close()
            engine.dispose()

    # -- set-based decisions, computed by the DuckDB backend's SQL in memory ---------------

    def diff(self, request: DiffRequest) -> DiffResult:
        accounts = _accounts_of(request.records, request.quarantined, request.present_elsewhere)
        accounts |= set(request.scope_accounts)
        entity = str(request.entity)
        with self._scratch() as memory:
            self._pull_decision_rows(memory, request.entity, accounts)
            for table in ("dead_letters", "possibly_stored"):
                _load(
                    memory,
                    table,
                    self._query(
                        f"SELECT * FROM {table} WHERE entity = :entity "
                        "AND account_id = ANY(:accounts)",
                        {"entity": entity, "accounts": sorted(accounts)},
                    ),
                )
            result = DuckDBSnapshot(memory, self.location, read_only=True).diff(request)
        return _with_payloads(result, self.payloads_of(request.entity, _retired_keys(result)))

    def mark_validated(self, entity: Entity, records: pd.DataFrame) -> None:
        records = records.loc[records["payload"].notna(), ["account_id", "record_id", "payload"]]
        if not len(records):
            return
        # Usually none is stale (the contract changed since their acknowledgement): only those
        # are compared with the incoming payloads.
        stale = self._query(
            "SELECT account_id, record_id, payload_md5 FROM acknowledged WHERE entity = :entity "
            "AND validated_with IS DISTINCT FROM :contract AND payload_md5 IS NOT NULL "
            "AND account_id = ANY(:accounts)",
            {
                "entity": str(entity),
                "contract": CONTRACT_FINGERPRINT,
                "accounts": sorted(_accounts_of(records)),
            },
        )
        if not len(stale):
            return
        with open_duckdb(":memory:") as memory:
            memory.register("incoming_frame", records)
            memory.register("stale_frame", stale)
            keys = memory.execute(
                "SELECT s.account_id, s.record_id FROM stale_frame AS s "
                "JOIN incoming_frame AS i USING (account_id, record_id) "
                "WHERE s.payload_md5 = md5(i.payload)"
            ).fetchall()
        if keys:
            self._mark_validated(entity, [(str(account), str(record)) for account, record in keys])

    def unit_stays(self, request: UnitStaysRequest) -> pd.DataFrame:
        accounts = sorted(set(request.units["account_id"].astype(str)))
        with self._scratch() as memory:
            _load(
                memory,
                "acknowledged",
                self._query(
                    "SELECT * FROM acknowledged WHERE entity = 'reservation' "
                    "AND status <> 'cancelled' AND checkout >= :today "
                    "AND account_id = ANY(:accounts)",
                    {"today": request.today, "accounts": accounts},
                ),
            )
            _load(
                memory,
                "possibly_stored",
                self._query(
                    "SELECT * FROM possibly_stored WHERE entity = 'reservation' "
                    "AND checkout >= :today AND account_id = ANY(:accounts)",
                    {"today": request.today, "accounts": accounts},
                ),
            )
            return DuckDBSnapshot(memory, self.location, read_only=True).unit_stays(request)

    def resend(self, request: ResendRequest) -> ResendResult:
        accounts = sorted(_accounts_of(request.records) | set(request.scope_accounts))
        entity = str(request.entity)
        with self._scratch() as memory:
            self._pull_decision_rows(memory, request.entity, accounts)
            _load(
                memory,
                "drift",
                self._query(
                    "SELECT * FROM drift WHERE entity = :entity AND healed_at IS NULL "
                    "AND account_id = ANY(:accounts)",
                    {"entity": entity, "accounts": accounts},
                ),
            )
            _load(memory, "runs", self._query("SELECT * FROM runs WHERE NOT dry_run"))
            found = DuckDBSnapshot(memory, self.location, read_only=True).resend(request)
        keys = list(zip(found.rows["account_id"], found.rows["record_id"], strict=True))
        payloads = self.payloads_of(request.entity, keys)
        rows = found.rows.assign(payload=[payloads.get(key) for key in keys])
        return ResendResult(rows=rows, eligible=found.eligible)

    # -- writes ---------------------------------------------------------------------------

    def record_acknowledgements(self, acknowledgements: pa.Table) -> None:
        if not acknowledgements.num_rows:
            return
        rows = _latest_per_key(
            [
                ack
                | {
                    "payload_md5": hashlib.md5(ack["payload"].encode()).hexdigest(),
                    "validated_with": CONTRACT_FINGERPRINT,
                }
                for ack in acknowledgements.to_pylist()
            ]
        )
        with self._transaction() as connection:
            _upsert(connection, "acknowledged", rows, ("account_id", "entity", "record_id"))
            keys = _key_arrays(rows)
            for table in ("dead_letters", "possibly_stored"):
                connection.execute(
                    sa.text(
                        f"DELETE FROM {table} AS d USING unnest(CAST(:accounts AS text[]), CAST(:entities AS text[]), CAST(:records AS text[])) "
                        "AS a(account_id, entity, record_id) WHERE d.account_id = a.account_id "
                        "AND d.entity = a.entity AND d.record_id = a.record_id"
                    ),
                    keys,
                )

    def record_possibly_stored(self, changes: Sequence[PossiblyStored]) -> None:
        if not changes:
            return
        rows = _latest_per_key([_row(change) for change in changes])
        with self._transaction() as connection:
            _upsert(connection, "possibly_stored", rows, ("account_id", "entity", "record_id"))

    def mark_in_flight(self, changes: Sequence[PossiblyStored]) -> None:
        if not changes:
            return
        rows = _latest_per_key([_row(change) for change in changes])
        with self._transaction() as connection:
            _upsert(
                connection,
                "possibly_stored",
                rows,
                ("account_id", "entity", "record_id"),
                replace=False,
            )

    def clear_in_flight(self, in_flight: str, keep: Collection[tuple[str, str, str]]) -> None:
        kept = sorted(keep)
        with self._transaction() as connection:
            connection.execute(
                sa.text(
                    "DELETE FROM possibly_stored AS p WHERE in_flight = :token AND NOT EXISTS ("
                    "SELECT 1 FROM unnest(CAST(:accounts AS text[]), CAST(:entities AS text[]), "
                    "CAST(:records AS text[])) AS k(account_id, entity, record_id) "
                    "WHERE k.account_id = p.account_id AND k.entity = p.entity "
                    "AND k.record_id = p.record_id)"
                ),
                {
                    "token": in_flight,
                    "accounts": [key[0] for key in kept],
                    "entities": [key[1] for key in kept],
                    "records": [key[2] for key in kept],
                },
            )

    def adopt(self, entity: Entity, records: pd.DataFrame, connection: str | None) -> int:
        if not len(records):
            return 0
        frame = records.loc[:, ["account_id", "record_id"]].astype(str)
        with self._transaction() as session:
            result = session.execute(
                sa.text(
                    "UPDATE acknowledged AS k SET connection = :owner "
                    "FROM unnest(CAST(:accounts AS text[]), CAST(:records AS text[])) AS i(account_id, record_id) "
                    "WHERE k.entity = :entity AND k.account_id = i.account_id "
                    "AND k.record_id = i.record_id "
                    "AND k.connection IS DISTINCT FROM CAST(:owner AS VARCHAR)"
                ),
                {
                    "owner": connection,
                    "entity": str(entity),
                    "accounts": frame["account_id"].tolist(),
                    "records": frame["record_id"].tolist(),
                },
            )
        return int(result.rowcount or 0)

    def limiter_history(self, key: str) -> list[float]:
        rows = self._query(
            "SELECT sent_at FROM rate_limit_log WHERE limiter_key = :key ORDER BY sent_at",
            {"key": key},
        )
        return [float(t) for t in rows["sent_at"]]

    def rate_ledger(self) -> PostgresRateLedger:
        """The rate-limit log concurrent runs share, on a connection of its own (close it)."""
        return PostgresRateLedger(self._connection.engine.connect())

    def save_limiter_history(self, key: str, sent_at: Sequence[float]) -> None:
        with self._transaction() as connection:
            connection.execute(
                sa.text("DELETE FROM rate_limit_log WHERE limiter_key = :key"), {"key": key}
            )
            connection.execute(
                sa.text("INSERT INTO rate_limit_log SELECT :key, unnest(CAST(:sent AS float8[]))"),
                {"key": key, "sent": [float(t) for t in sent_at]},
            )

    def record_refusals(self, refusals: Sequence[Refusal]) -> None:
        if not refusals:
            return
        rows = [
            {
                "account_id": r.account_id,
                "entity": str(r.entity),
                "record_id": r.record_id,
                "content_hash": r.content_hash,
                "http_status": r.http_status,
                "message": r.message,
                "attempts": 1,
                "first_seen": r.seen_at,
                "last_seen": r.seen_at,
                "request_id": r.request_id,
            }
            for r in refusals
        ]
        table = sa.table("dead_letters", *(sa.column(name) for name in rows[0]))
        insert = pg_insert(table)
        upsert = insert.on_conflict_do_update(
            index_elements=["account_id", "entity", "record_id"],
            set_={
                "content_hash": insert.excluded.content_hash,
                "http_status": insert.excluded.http_status,
                "message": insert.excluded.message,
                "attempts": table.c.attempts + 1,
                "last_seen": insert.excluded.last_seen,
                "request_id": insert.excluded.request_id,
            },
        )
        with self._transaction() as connection:
            # One statement per refusal: a record refused twice in one batch counts twice.
            for row in rows:
                connection.execute(upsert, row)

    def record_run(self, run: RunRecord) -> None:
        row = {
            "run_id": run.run_id,
            "mapping": run.mapping,
            "accounts": ",".join(run.accounts),
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "duration_s": run.duration_s,
            "dry_run": run.dry_run,
            "requests": run.requests,
            "status": run.status,
            "connection": run.connection,
        }
        with self._transaction() as connection:
            _upsert(connection, "runs", [row], ("run_id",))
            if run.counts:
                counts = [
                    {"run_id": run.run_id, **asdict(item), "entity": str(item.entity)}
                    for item in run.counts
                ]
                _upsert(connection, "run_counts", counts, ("run_id", "account_id", "entity"))

    # -- drift and reconciliation passes --------------------------------------------------

    def record_drift(self, events: Sequence[DriftEvent]) -> None:
        if not events:
            return
        heals = [e for e in events if e.kind is None]
        found = _latest_per_key(
            [
                {
                    "account_id": e.account_id,
                    "entity": str(e.entity),
                    "record_id": e.record_id,
                    "kind": e.kind,
                    "detail": e.detail,
                    "found_at": e.at,
                    "request_id": e.request_id,
                    "healed_at": e.at if e.healed else None,
                }
                for e in events
                if e.kind is not None
            ]
        )
        with self._transaction() as connection:
            if heals:
                connection.execute(
                    sa.text(
                        "UPDATE drift AS d SET healed_at = h.at "
                        "FROM unnest(CAST(:accounts AS text[]), CAST(:entities AS text[]), CAST(:records AS text[]), CAST(:ats AS timestamp[])) "
                        "AS h(account_id, entity, record_id, at) "
                        "WHERE d.account_id = h.account_id AND d.entity = h.entity "
                        "AND d.record_id = h.record_id AND d.healed_at IS NULL"
                    ),
                    _key_arrays([_row(e) for e in heals]) | {"ats": [e.at for e in heals]},
                )
            if found:
                _upsert(connection, "drift", found, ("account_id", "entity", "record_id"))

    def open_drift(self, entity: Entity | None = None) -> pd.DataFrame:
        return self._query(
            "SELECT d.account_id, d.entity, d.record_id, d.kind, d.detail, d.found_at, "
            "d.request_id, a.checkin FROM drift AS d "
            "LEFT JOIN acknowledged AS a USING (account_id, entity, record_id) "
            "WHERE d.healed_at IS NULL "
            "AND (CAST(:entity AS VARCHAR) IS NULL OR d.entity = :entity) "
            "ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
            {"entity": None if entity is None else str(entity)},
        )

    def reconciliation_pass(
        self, connection: str | None, entity: Entity
    ) -> ReconciliationPass | None:
        rows = self._query(
            "SELECT started_at, finished_at FROM reconciliation_passes "
            "WHERE connection = :owner AND entity = :entity ORDER BY started_at DESC LIMIT 1",
            {"owner": connection or "", "entity": str(entity)},
        )
        if rows.empty:
            return None
        finished = rows["finished_at"].iloc[0]
        return ReconciliationPass(
            connection,
            entity,
            pd.Timestamp(rows["started_at"].iloc[0]).to_pydatetime(),
            None if pd.isna(finished) else pd.Timestamp(finished).to_pydatetime(),
        )

    def start_reconciliation(
        self, connection: str | None, entity: Entity, at: datetime
    ) -> ReconciliationPass:
        with self._transaction() as session:
            session.execute(
                sa.text("INSERT INTO reconciliation_passes VALUES (:owner, :entity, :at, NULL)"),
                {"owner": connection or "", "entity": str(entity), "at": at},
            )
        return ReconciliationPass(connection, entity, at)

    def finish_reconciliation(self, found: ReconciliationPass, at: datetime) -> None:
        with self._transaction() as session:
            session.execute(
                sa.text(
                    "UPDATE reconciliation_passes SET finished_at = :at WHERE connection = :owner "
                    "AND entity = :entity AND started_at = :started"
                ),
                {
                    "at": at,
                    "owner": found.connection or "",
                    "entity": str(found.entity),
                    "started": found.started_at,
                },
            )

    # -- reads ----------------------------------------------------------------------------

    def acknowledged(self, entity: Entity | None = None) -> pd.DataFrame:
        return self._query(
            "SELECT * FROM acknowledged "
            "WHERE CAST(:entity AS VARCHAR) IS NULL OR entity = :entity "
            "ORDER BY account_id, entity, record_id",
            {"entity": None if entity is None else str(entity)},
        )

    def run_counts(self, run_id: str | None = None) -> pd.DataFrame:
        return self._query(
            "SELECT * FROM run_counts WHERE CAST(:run AS VARCHAR) IS NULL OR run_id = :run "
            "ORDER BY run_id, account_id, entity",
            {"run": run_id},
        )

    def status_of(self, account_id: str, entity: Entity, record_id: str) -> RecordStatus | None:
        rows = self._query(
            "SELECT status FROM acknowledged WHERE account_id = :account AND entity = :entity "
            "AND record_id = :record",
            {"account": account_id, "entity": str(entity), "record": record_id},
        )
        return RecordStatus(rows["status"].iloc[0]) if len(rows) else None

    def active_counts(self, entity: Entity) -> dict[str, int]:
        rows = self._query(
            "SELECT account_id, count(*) AS n FROM acknowledged "
            "WHERE entity = :entity AND status = 'active' GROUP BY account_id",
            {"entity": str(entity)},
        )
        return {str(a): int(n) for a, n in zip(rows["account_id"], rows["n"], strict=True)}

    def payloads_of(
        self, entity: Entity, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        wanted = sorted(set(keys))
        rows = self._query(
            "SELECT a.account_id, a.record_id, a.payload FROM acknowledged AS a "
            "JOIN unnest(CAST(:accounts AS text[]), CAST(:records AS text[])) AS w(account_id, record_id) "
            "USING (account_id, record_id) WHERE a.entity = :entity",
            {
                "entity": str(entity),
                "accounts": [str(account) for account, _ in wanted],
                "records": [str(record) for _, record in wanted],
            },
        )
        return {
            (str(account), str(record)): payload
            for account, record, payload in rows.itertuples(index=False)
        }

    def unacknowledged_dead_letters(self, entity: Entity) -> pd.DataFrame:
        return self._query(
            "SELECT d.account_id, d.record_id, d.http_status, d.message FROM dead_letters AS d "
            "WHERE d.entity = :entity AND NOT EXISTS (SELECT 1 FROM acknowledged AS a "
            "WHERE a.account_id = d.account_id AND a.entity = d.entity "
            "AND a.record_id = d.record_id) ORDER BY 1, 2, 3, 4",
            {"entity": str(entity)},
        )

    def fingerprint(self, accounts: Sequence[str]) -> str:
        row = self._query(
            """
            SELECT
                (SELECT count(*) FROM acknowledged WHERE account_id = ANY(:accounts)) AS a,
                (SELECT coalesce(sum(hashtextextended(concat_ws(chr(31), account_id, entity,
                        record_id, content_hash, status), 0)), 0)
                 FROM acknowledged WHERE account_id = ANY(:accounts)) AS b,
                (SELECT count(*) FROM dead_letters WHERE account_id = ANY(:accounts)) AS c,
                (SELECT coalesce(sum(hashtextextended(concat_ws(chr(31), account_id, entity,
                        record_id, content_hash), 0)), 0)
                 FROM dead_letters WHERE account_id = ANY(:accounts)) AS d
            """,
            {"accounts": sorted(set(accounts))},
        )
        return "-".join(str(int(part)) for part in row.iloc[0])

    # -- the Open API: discovered accounts and property status (migration 8) -------------

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
        rows = [
            {"client_key": client_key, **{f.name: getattr(a, f.name) for f in fields(a)}}
            for a in accounts
        ]
        with self._transaction() as connection:
            _upsert(connection, "discovered_accounts", rows, ("client_key", "external_id"))

    def forget_discovered_accounts(self, client_key: str, external_ids: Collection[str]) -> None:
        if not external_ids:
            return
        with self._transaction() as connection:
            connection.execute(
                sa.text(
                    "DELETE FROM discovered_accounts WHERE client_key = :key "
                    "AND external_id = ANY(:ids)"
                ),
                {"key": client_key, "ids": sorted(external_ids)},
            )

    def record_property_statuses(self, records: Sequence[PropertyStatusRecord]) -> None:
        if not records:
            return
        rows = [_row(record) | {"status": str(record.status)} for record in records]
        with self._transaction() as connection:
            _upsert(connection, "property_status", rows, ("account_id",))

    def accounts_of_connection(self, connection: str | None) -> pd.DataFrame:
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
        columns = ["account_id", "stays", "last_checkout"]
        if not accounts:
            return pd.DataFrame(columns=columns)
        found = self._query(
            """
            SELECT account_id, count(*) AS stays, max(checkout) AS last_checkout
            FROM acknowledged
            WHERE entity = 'reservation' AND account_id = ANY(:accounts)
              AND status <> 'cancelled' AND checkout >= :today
              AND coalesce(CAST(payload AS json) ->> 'status', '') <> :cancelled
            GROUP BY account_id ORDER BY account_id
            """,
            {"accounts": sorted(accounts), "today": today, "cancelled": CANCELLED},
        )
        found["last_checkout"] = pd.to_datetime(found["last_checkout"]).dt.date
        return found.loc[:, columns]

    def deactivated_units(self, accounts: Collection[str]) -> pd.DataFrame:
        if not accounts:
            return pd.DataFrame(columns=["account_id", "record_id", "payload", "content_hash"])
        return self._query(
            "SELECT account_id, record_id, payload, content_hash FROM acknowledged "
            "WHERE entity = 'accommodation' AND status = 'deactivated' "
            "AND account_id = ANY(:accounts) ORDER BY account_id, record_id",
            {"accounts": sorted(accounts)},
        )

    # -- guest links and received events (migration 10) -----------------------------------

    def link_candidates(self, connection: str | None, first: date, last: date) -> pd.DataFrame:
        return self._query(
            """
            SELECT a.account_id, a.record_id AS reservation_id, a.checkin, a.checkout,
                   g.fetched_at
            FROM acknowledged AS a
            LEFT JOIN guest_links AS g
                ON g.account_id = a.account_id AND g.reservation_id = a.record_id
            WHERE a.entity = 'reservation'
              AND a.connection IS NOT DISTINCT FROM CAST(:connection AS VARCHAR)
              AND a.status <> 'cancelled'
              AND coalesce(CAST(a.payload AS json) ->> 'status', '') <> :cancelled
              AND a.checkin BETWEEN :first AND :last
            ORDER BY a.checkin, a.account_id, a.record_id
            """,
            {"connection": connection, "cancelled": CANCELLED, "first": first, "last": last},
        )

    def save_guest_links(self, links: Sequence[GuestLinkRecord]) -> None:
        if not links:
            return
        rows = _latest_per_key(
            [asdict(link) for link in links], keys=("account_id", "reservation_id")
        )
        with self._transaction() as connection:
            _upsert(connection, "guest_links", rows, ("account_id", "reservation_id"))

    def guest_links(
        self, connection: str | None, first: date | None = None, last: date | None = None
    ) -> pd.DataFrame:
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
              AND coalesce(CAST(a.payload AS json) ->> 'status', '') <> :cancelled
              AND (CAST(:first AS DATE) IS NULL OR a.checkin >= :first)
              AND (CAST(:last AS DATE) IS NULL OR a.checkin <= :last)
            ORDER BY g.checkin, g.account_id, g.reservation_id
            """,
            {"connection": connection, "cancelled": CANCELLED, "first": first, "last": last},
        )

    def record_events(self, deliveries: Sequence[IncomingEvent]) -> list[bool]:
        if not deliveries:
            return []
        fresh: list[bool] = []
        with self._transaction() as connection:
            # Writers of one events table take turns: ``seq`` is the order of arrival.
            connection.execute(sa.text("LOCK TABLE received_events IN EXCLUSIVE MODE"))
            seq = int(
                connection.execute(
                    sa.text("SELECT coalesce(max(seq), 0) FROM received_events")
                ).scalar_one()
            )
            for item in deliveries:
                known = connection.execute(
                    sa.text(
                        "UPDATE received_events SET deliveries = deliveries + 1, "
                        "last_received_at = greatest(last_received_at, :at) "
                        "WHERE connection = :connection AND event_key = :key RETURNING seq"
                    ),
                    {"at": item.received_at, "connection": item.connection, "key": item.event_key},
                ).all()
                if known:
                    fresh.append(False)
                    continue
                seq += 1
                connection.execute(
                    sa.text(
                        "INSERT INTO received_events VALUES (:connection, :event_key, :seq, "
                        ":account_id, :event, :resource, :received_at, :received_at, 1)"
                    ),
                    _row(item) | {"seq": seq},
                )
                fresh.append(True)
        return fresh

    def received_events(
        self, connection: str | None = None, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> pd.DataFrame:
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
        found = self._query(
            "SELECT coalesce(max(seq), 0) AS seq FROM received_events "
            "WHERE CAST(:connection AS VARCHAR) IS NULL OR connection = :connection",
            {"connection": connection},
        )
        return int(found["seq"].iloc[0])

    # -- source fingerprints (connector.snapshot._fingerprints) ----------------------------

    def stored_fingerprints(
        self, connection: str | None, entity: Entity, mapping_fingerprint: str
    ) -> pa.Table:
        found = self._query(
            STORED_SQL,
            {
                "connection": connection_key(connection),
                "owner": connection,
                "entity": str(entity),
                "mapping_fingerprint": mapping_fingerprint,
            },
        )
        table = pa.Table.from_pandas(found.loc[:, list(FINGERPRINT_COLUMNS)], preserve_index=False)
        # The dates as DuckDB's backend hands them (date32), without pandas' metadata.
        dates = {"checkin", "checkout"}
        schema = pa.schema(
            [pa.field(f.name, pa.date32() if f.name in dates else f.type) for f in table.schema]
        )
        return table.cast(schema)

    def record_fingerprints(
        self,
        connection: str | None,
        entity: Entity,
        mapping_fingerprint: str,
        mapped: pd.DataFrame,
    ) -> int:
        key = connection_key(connection)
        with self._transaction() as database:
            database.execute(
                sa.text(
                    "DELETE FROM source_fingerprints WHERE connection = :connection "
                    "AND entity = :entity AND mapping_fingerprint <> :mapping_fingerprint"
                ),
                {
                    "connection": key,
                    "entity": str(entity),
                    "mapping_fingerprint": mapping_fingerprint,
                },
            )
            if not len(mapped):
                return 0
            mapped = mapped.drop_duplicates(["source_account", "record_id"])
            database.execute(
                sa.text(
                    "DELETE FROM source_fingerprints AS f USING "
                    "unnest(CAST(:accounts AS text[]), CAST(:records AS text[])) AS m(a, r) "
                    "WHERE f.connection = :connection AND f.entity = :entity "
                    "AND f.source_account = m.a AND f.record_id = m.r"
                ),
                {
                    "connection": key,
                    "entity": str(entity),
                    "accounts": mapped["source_account"].astype(str).tolist(),
                    "records": mapped["record_id"].astype(str).tolist(),
                },
            )
            held = _frame(
                database.execute(
                    sa.text(
                        "SELECT account_id, record_id, content_hash FROM acknowledged "
                        "WHERE entity = :entity AND status = 'active' "
                        "AND connection IS NOT DISTINCT FROM CAST(:owner AS VARCHAR) "
                        "AND account_id = ANY(:accounts)"
                    ),
                    {
                        "entity": str(entity),
                        "owner": connection,
                        "accounts": sorted(set(mapped["account_id"].dropna().astype(str))),
                    },
                )
            )
            kept = mapped.dropna(subset=["content_hash", "account_id"]).merge(
                held, on=["account_id", "record_id", "content_hash"]
            )
            rows = [
                {
                    "connection": key,
                    "entity": str(entity),
                    "source_account": str(row.source_account),
                    "record_id": str(row.record_id),
                    "account_id": str(row.account_id),
                    "fingerprint": int(row.fingerprint),
                    "mapping_fingerprint": mapping_fingerprint,
                    "content_hash": str(row.content_hash),
                }
                for row in kept.itertuples(index=False)
            ]
            if rows:
                _upsert(
                    database,
                    "source_fingerprints",
                    rows,
                    ("connection", "entity", "source_account", "record_id"),
                )
        return len(rows)

    # -- the cache of payloads known valid ------------------------------------------------

    def validated_payloads(self, record_ids: pa.Array | None = None) -> pa.Table:
        """MD5s of the acknowledged payloads the current contract validated (of the records
        ``record_ids`` only, when given)."""
        among = "" if record_ids is None else " AND record_id = ANY(CAST(:ids AS text[]))"
        found = self._query(
            "SELECT DISTINCT payload_md5 FROM acknowledged "
            "WHERE validated_with = :contract AND payload_md5 IS NOT NULL" + among,
            {"contract": CONTRACT_FINGERPRINT}
            | ({} if record_ids is None else {"ids": record_ids.to_pylist()}),
        )
        return pa.Table.from_pandas(found, preserve_index=False)

    # -- helpers --------------------------------------------------------------------------

    def _query(self, sql: str, params: Mapping[str, object] | None = None) -> pd.DataFrame:
        with self._reading() as connection:
            result = connection.execute(sa.text(sql), dict(params or {}))
            return _frame(result)

    @contextmanager
    def _reading(self) -> Iterator[sa.Connection]:
        if self._connection.in_transaction():  # read-only: the store's one transaction
            yield self._connection
            return
        with self._connection.begin():
            yield self._connection

    @contextmanager
    def _transaction(self) -> Iterator[sa.Connection]:
        if self.read_only:
            raise SnapshotError(
                f"the snapshot {self.location} is open read-only (a plan writes nothing)"
            )
        try:
            with self._connection.begin():
                yield self._connection
        except sa.exc.SQLAlchemyError as error:
            raise SnapshotError(
                f"cannot write the snapshot {self.location}: {_first_line(error)}"
            ) from error

    @contextmanager
    def _scratch(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB with the snapshot's schema, for one decision (under the run's
        one DuckDB memory limit)."""
        memory = open_duckdb(":memory:")
        try:
            migrate(memory)
            yield memory
        finally:
            memory.close()

    def _pull_decision_rows(
        self, memory: duckdb.DuckDBPyConnection, entity: Entity, accounts: Collection[str]
    ) -> None:
        """The acknowledged records of ``accounts`` a decision reads: no payloads."""
        _load(
            memory,
            "acknowledged",
            self._query(
                f"SELECT {_DECISION_COLUMNS} FROM acknowledged "
                "WHERE entity = :entity AND account_id = ANY(:accounts)",
                {"entity": str(entity), "accounts": sorted(accounts)},
            ),
        )

    def _mark_validated(self, entity: Entity, keys: Sequence[tuple[str, str]]) -> None:
        with self._transaction() as connection:
            connection.execute(
                sa.text(
                    "UPDATE acknowledged AS a SET validated_with = :contract "
                    "FROM unnest(CAST(:accounts AS text[]), CAST(:records AS text[])) AS i(account_id, record_id) "
                    "WHERE a.entity = :entity AND a.account_id = i.account_id "
                    "AND a.record_id = i.record_id"
                ),
                {
                    "contract": CONTRACT_FINGERPRINT,
                    "entity": str(entity),
                    "accounts": [account for account, _ in keys],
                    "records": [record for _, record in keys],
                },
            )


# -- schema -------------------------------------------------------------------------------


def _missing_steps(connection: sa.Connection) -> bool:
    exists = connection.execute(
        sa.text("SELECT to_regclass('schema_migrations') IS NOT NULL")
    ).scalar_one()
    if not exists:
        return True
    seen = set(connection.execute(sa.text("SELECT version FROM schema_migrations")).scalars())
    return not seen >= {step.version for step in MIGRATIONS}


def _migrate(connection: sa.Connection) -> None:
    """Apply the steps the database has not seen (the shared list), one run at a time."""
    connection.execute(sa.text(_MIGRATION_LOCK_SQL))
    connection.execute(
        sa.text(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version     INTEGER PRIMARY KEY,
                description VARCHAR NOT NULL,
                applied_at  TIMESTAMP NOT NULL
            )
            """
        )
    )
    seen = set(connection.execute(sa.text("SELECT version FROM schema_migrations")).scalars())
    for step in MIGRATIONS:
        if step.version in seen:
            continue
        for statement in statements_for(step, "postgresql"):
            connection.exec_driver_sql(statement)
        connection.execute(
            sa.text("INSERT INTO schema_migrations VALUES (:version, :description, :at)"),
            {
                "version": step.version,
                "description": step.description,
                "at": datetime.now(UTC).replace(tzinfo=None),
            },
        )
    connection.execute(sa.text(HOLDERS_TABLE_SQL))


def _utc_session(dbapi_connection: Any, _record: object) -> None:
    # Timestamps are naive UTC throughout pms-sync; the session must not shift them.
    cursor = dbapi_connection.cursor()
    cursor.execute("SET TIME ZONE 'UTC'")
    cursor.close()
    dbapi_connection.commit()


# -- frames -------------------------------------------------------------------------------


def _frame(result: sa.CursorResult[Any]) -> pd.DataFrame:
    """A result as DuckDB's ``.df()`` would give it: datetime64[us] dates, int32 integers,
    object strings, so both backends hand the same frames to their callers."""
    description = result.cursor.description if result.cursor is not None else None
    columns = list(result.keys())
    rows = result.all()
    frame = pd.DataFrame.from_records(rows, columns=columns, coerce_float=True)
    if description is None:
        return frame
    for position, column in enumerate(description):
        # PEP 249: a description row is (name, type_code, ...); psycopg's type_code is an OID.
        frame.isetitem(position, _typed(frame.iloc[:, position], cast(int, column[1])))
    return frame


def _typed(values: pd.Series, oid: int) -> pd.Series:
    if oid in _DATES:
        return pd.to_datetime(values).astype("datetime64[us]")
    if oid in _INTEGERS:
        dtype = _INTEGERS[oid]
        return values.astype(dtype if values.notna().all() else dtype.capitalize())
    if oid in _FLOATS:
        return values.astype("float64")
    if oid == _BOOLEAN:
        return values.astype("bool" if values.notna().all() else "boolean")
    return values.astype(object).where(values.notna(), None)


def _load(memory: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    if not len(frame):
        return
    memory.register("pulled_frame", frame)
    memory.execute(f"INSERT INTO {table} BY NAME SELECT * FROM pulled_frame")
    memory.unregister("pulled_frame")


def _accounts_of(*frames: pd.DataFrame) -> set[str]:
    found: set[str] = set()
    for frame in frames:
        if len(frame) and "account_id" in frame:
            found |= {str(a) for a in frame["account_id"].dropna().unique()}
    return found


def _retired_keys(result: DiffResult) -> list[tuple[str, str]]:
    """Records the diff retires (gone from the export): their payload is the acknowledged one."""
    gone = result.changes[result.changes["action"].isin(["deactivate", "cancel"])]
    return list(zip(gone["account_id"].astype(str), gone["record_id"].astype(str), strict=True))


def _with_payloads(result: DiffResult, payloads: dict[tuple[str, str], str]) -> DiffResult:
    if not payloads:
        return result
    changes = result.changes.copy()
    keys = zip(changes["account_id"].astype(str), changes["record_id"].astype(str), strict=True)
    changes["payload"] = [
        payloads.get(key, payload) for key, payload in zip(keys, changes["payload"], strict=True)
    ]
    return DiffResult(
        changes=changes, counts=result.counts, counts_by_checkin=result.counts_by_checkin
    )


# -- rows ---------------------------------------------------------------------------------


def _row(item: object) -> dict[str, object]:
    """A flat dataclass as a row: enums as their values."""
    row = {f.name: getattr(item, f.name) for f in fields(item)}  # type: ignore[arg-type]
    if "entity" in row:
        row["entity"] = str(row["entity"])
    if "status" in row and isinstance(row["status"], RecordStatus):
        row["status"] = str(row["status"])
    return row


def _latest_per_key(
    rows: list[dict[str, object]], keys: Sequence[str] = ("account_id", "entity", "record_id")
) -> list[dict[str, object]]:
    """One row per key, the last one (one upsert statement may not touch a row twice)."""
    return list({tuple(row[k] for k in keys): row for row in rows}.values())


def _key_arrays(rows: Sequence[Mapping[str, object]]) -> dict[str, list[object]]:
    return {
        "accounts": [row["account_id"] for row in rows],
        "entities": [row["entity"] for row in rows],
        "records": [row["record_id"] for row in rows],
    }


def _upsert(
    connection: sa.Connection,
    table: str,
    rows: Sequence[Mapping[str, object]],
    keys: Sequence[str],
    *,
    replace: bool = True,
) -> None:
    """Insert the rows, replacing those with the same key (DuckDB's INSERT OR REPLACE), or
    keeping them (``replace`` False: INSERT OR IGNORE)."""
    columns = list(rows[0])
    target = sa.table(table, *(sa.column(name) for name in columns))
    insert = pg_insert(target)
    if not replace:
        connection.execute(insert.on_conflict_do_nothing(index_elements=list(keys)), list(rows))
        return
    replaced = {name: insert.excluded[name] for name in columns if name not in keys}
    connection.execute(
        insert.on_conflict_do_update(index_elements=list(keys), set_=replaced), list(rows)
    )


def _first_line(error: Exception) -> str:
    return str(getattr(error, "orig", None) or error).strip().splitlines()[0]


# -- the backend's entries (connector.snapshot._backends) -----------------------------------


@contextmanager
def open_store(
    location: str | Path,
    *,
    lock_timeout: float = 0.0,
    read_only: bool = False,
    scope: LockScope | None = None,
) -> Iterator[PostgresSnapshot]:
    with PostgresSnapshot.open(
        str(location), lock_timeout=lock_timeout, read_only=read_only, scope=scope
    ) as store:
        yield store


def validated_payloads(location: str | Path, record_ids: pa.Array | None = None) -> pa.Table | None:
    try:
        with PostgresSnapshot.open(str(location), read_only=True) as database:
            return database.validated_payloads(record_ids)
    except SnapshotError:
        return None  # the run validates every record, which is only slower


@contextmanager
def fingerprint_reader(
    location: str | Path, connection: str | None
) -> Iterator[Callable[[Entity, str], pa.Table | None]]:
    """Reads the database's stored fingerprints (nothing when it does not answer)."""
    with ExitStack() as stack:
        try:
            database = stack.enter_context(PostgresSnapshot.open(str(location), read_only=True))
        except SnapshotError:
            yield lambda entity, fingerprint: None
            return
        yield lambda entity, fingerprint: database.stored_fingerprints(
            connection, entity, fingerprint
        )
