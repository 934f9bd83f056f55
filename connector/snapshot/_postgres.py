"""The PostgreSQL snapshot backend: the same tables as the DuckDB file, written by many runs.

PostgreSQL stores; DuckDB computes. The set-based decisions (the diff, the re-send selection,
the stays in units) are the DuckDB backend's SQL run on an in-memory DuckDB into which the
rows they need are pulled: hashes, owners and dates, never whole payloads, and only of the
accounts the request concerns. The payloads a decision hands back (a record to cancel, a
record to re-send) are then read by key. Every other operation is the shared SQL of
``connector.snapshot._operations`` on this module's primitives (docs/decisions.md, "A
PostgreSQL snapshot").

The schema is ``connector.snapshot._migrations.MIGRATIONS``, the one list both backends apply
(``statements_for`` adapts a type name). Writes commit one transaction per call, like the
DuckDB file: acknowledgements are durable as they arrive. Locks are per scope
(``connector.snapshot._locks``), not per database.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, cast

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from connector.contract import CONTRACT_FINGERPRINT, Entity
from connector.documents import DocumentArray
from connector.duckdb_memory import open_duckdb
from connector.errors import SnapshotError
from connector.snapshot._cursors import StoredCursor
from connector.snapshot._duckdb import DuckDBSnapshot
from connector.snapshot._location import shown_location, sqlalchemy_url
from connector.snapshot._locks import HOLDERS_TABLE_SQL, LockScope, ScopeLocks
from connector.snapshot._migrations import MIGRATIONS, migrate, statements_for
from connector.snapshot._model import (
    DiffRequest,
    DiffResult,
    ResendRequest,
    ResendResult,
    UnitStaysRequest,
)
from connector.snapshot._operations import SnapshotOperations
from connector.snapshot._primitives import Params, Rows
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
_ARROW_TYPES = {1082: pa.date32(), 1114: pa.timestamp("us"), 20: pa.int64(), 23: pa.int32()}

# The acknowledged columns a decision needs: everything but the payload, which stands in as
# the one member the SQL reads from it (its status).

_DECISION_COLUMNS = """
    account_id, entity, record_id, content_hash,
    json_build_object('status', CAST(payload AS json) -> 'status')::text AS payload,
    checkin, checkout, status, acknowledged_at, request_id, connection, payload_md5,
    validated_with
"""


class PostgresSnapshot(SnapshotOperations):
    """A snapshot held in a PostgreSQL database (or the schema a URL's search_path names): the
    primitives of ``SnapshotOperations``, and the decisions' rows pulled into DuckDB."""

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

    def rate_ledger(self) -> PostgresRateLedger:
        """The rate-limit log concurrent runs share, on a connection of its own (close it)."""
        return PostgresRateLedger(self._connection.engine.connect())

    # -- helpers --------------------------------------------------------------------------

    def _query(self, sql: str, params: Params | None = None) -> pd.DataFrame:
        with self._reading() as connection:
            result = connection.execute(sa.text(sql), dict(params or {}))
            return _frame(result)

    def _arrow(self, sql: str, params: Params | None = None, rows: Rows | None = None) -> pa.Table:
        with self._reading() as connection:
            result = self._run(connection, sql, params, rows)
            description = result.cursor.description if result.cursor is not None else ()
            rows = result.all()
        return pa.table(
            {
                str(column[0]): pa.array(
                    [row[position] for row in rows],
                    type=_ARROW_TYPES.get(cast(int, column[1]), pa.string()),
                )
                for position, column in enumerate(description or ())
            }
        )

    def _execute(
        self,
        session: sa.Connection,
        sql: str,
        params: Params | None = None,
        rows: Rows | None = None,
    ) -> int:
        return int(self._run(session, sql, params, rows).rowcount or 0)

    def _fetch(
        self,
        session: sa.Connection,
        sql: str,
        params: Params | None = None,
        rows: Rows | None = None,
    ) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._run(session, sql, params, rows).all()]

    def _run(
        self, session: sa.Connection, sql: str, params: Params | None, rows: Rows | None
    ) -> sa.CursorResult[Any]:
        values = dict(params or {})
        if rows is not None:
            # The batch goes as one text array per column, unnested into rows: one statement
            # whatever its size; the SQL casts the columns that are not text.
            source, arrays = _unnested(rows)
            sql = sql.replace("{rows}", source)
            values |= arrays
        return session.execute(sa.text(sql), values)

    def _json_text(self, document: str, member: str) -> str:
        return f"(CAST({document} AS json) ->> '{member}')"

    def _row_hash(self, columns: str) -> str:
        return f"hashtextextended(concat_ws(chr(31), {columns}), 0)"

    def _lock_events(self, session: sa.Connection) -> None:
        session.execute(sa.text("LOCK TABLE received_events IN EXCLUSIVE MODE"))

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
        with self._transaction() as session:
            self._execute(
                session,
                "UPDATE acknowledged AS a SET validated_with = :contract FROM {rows} "
                "WHERE a.entity = :entity AND a.account_id = batch.account_id "
                "AND a.record_id = batch.record_id",
                {"contract": CONTRACT_FINGERPRINT, "entity": str(entity)},
                pd.DataFrame(list(keys), columns=["account_id", "record_id"]),
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
    changes["payload"] = DocumentArray.of_text(
        [payloads.get(key, payload) for key, payload in zip(keys, changes["payload"], strict=True)]
    )
    return DiffResult(
        changes=changes, counts=result.counts, counts_by_checkin=result.counts_by_checkin
    )


# -- batches ------------------------------------------------------------------------------


def _unnested(rows: Rows) -> tuple[str, dict[str, list[str | None]]]:
    """``unnest(…) AS batch(columns)`` over one text array parameter per column."""
    columns = list(rows.column_names if isinstance(rows, pa.Table) else rows.columns)
    arrays: dict[str, list[str | None]] = {}
    for position, name in enumerate(columns):
        values = (
            rows.column(name).to_pylist() if isinstance(rows, pa.Table) else rows[name].tolist()
        )
        arrays[f"batch_{position}"] = [_text(value) for value in values]
    unnested = ", ".join(f"CAST(:batch_{position} AS text[])" for position in range(len(columns)))
    aliases = ", ".join(f'"{name}"' for name in columns)
    return f"unnest({unnested}) AS batch({aliases})", arrays


def _text(value: object) -> str | None:
    """A value as the text PostgreSQL casts back to its column's type."""
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


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


def source_cursors(
    location: str | Path, connection: str | None
) -> dict[tuple[str, str], StoredCursor]:
    try:
        with PostgresSnapshot.open(str(location), read_only=True) as database:
            return database.source_cursors(connection)
    except SnapshotError:
        return {}  # the run reads its inputs in full


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
