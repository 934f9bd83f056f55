"""The DuckDB snapshot backend: one file per deployment, one writing process at a time.

Locking: DuckDB itself lets one process open a file read-write. The store opens its
connection for the whole run (a run reads the diff and then writes acknowledgements
continuously, so opening per write would only add races) and turns DuckDB's lock conflict
into :class:`SnapshotLockedError` naming the file. ``lock_timeout`` waits for the other
process to finish instead of failing at once. Dagster serialises runs on one file too.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from connector.contract import CANCELLED, CONTRACT_FINGERPRINT, AccommodationStatus, Entity
from connector.documents import DocumentArray
from connector.duckdb_memory import open_duckdb, out_of_memory
from connector.errors import SnapshotError, SnapshotLockedError
from connector.private_files import PRIVATE_FILE_MODE, private_dir
from connector.records import RECORD_COLUMNS, counts_by_text, empty_records
from connector.snapshot import _fingerprints, _resend
from connector.snapshot._cursors import StoredCursor
from connector.snapshot._locks import LockScope
from connector.snapshot._migrations import MIGRATIONS, migrate
from connector.snapshot._model import (
    DiffRequest,
    DiffResult,
    ResendRequest,
    ResendResult,
    UnitStaysRequest,
)
from connector.snapshot._operations import SnapshotOperations
from connector.snapshot._primitives import Params, Rows

VALIDATED_PAYLOADS_SINCE = 6
"""The schema version that records which contract validated each payload."""
CURSORS_SINCE = 14
"""The migration that created ``source_cursors``."""

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock")

CHECKPOINT_THRESHOLD = "256MB"
"""The write-ahead log a writable snapshot grows before DuckDB checkpoints it (DuckDB: 16MB).

A checkpoint costs more the larger the snapshot, so fewer of them keep a large first run's
recording fast (docs/decisions.md, "The snapshot's checkpoints"). Commits are as durable (the log is synced
at each); a process killed mid-run leaves up to this much log for the next open to replay;
closing the snapshot checkpoints what is left."""

# Incoming records full-outer-joined with what the service acknowledged and what it refused
# (each side of the outer join a statement: _DIFF_SIDES). Each row gets its action; rows
# without one (missing and left alone) drop, and so do unchanged skips, which are only
# counted (incoming minus every other present row): a nightly run with nothing changed moves
# no documents out of DuckDB. A known record that is
# not among the incoming ones is only "missing" when the export holds no row of it at all:
# an invalid (quarantined) record is kept as acknowledged, one outside the window is left to
# its own window, and an account with rows whose id is unknown reconciles nothing.
# No payload is read here: the records a policy would retire (deactivate, cancel) come out with
# ``retiring`` set, and _RETIRED_SQL reads their last payload, which decides whether they are
# retired already (status INACTIVE or CANCELLED): reading every acknowledged payload to find
# the few records gone from the export would hold them all in DuckDB's memory.
# Nor is an incoming payload: a record to send comes out with its position in the incoming
# frame (``source_row``), and _with_payloads takes the documents once the rows are decided, so
# a first run's documents never pass through DuckDB's result, masks and sort.
_DIFF_SQL = """
WITH incoming AS NOT MATERIALIZED (
    SELECT account_id, record_id, _row, content_hash,
           CAST(checkin AS DATE) AS checkin, CAST(checkout AS DATE) AS checkout
    FROM incoming_frame
    WHERE $only_ids_all OR list_contains($only_ids, record_id)
),
-- Payloads stay out of the join of what is incoming with what is known: only the records
-- missing from the export need theirs (to be cancelled or deactivated).
known AS NOT MATERIALIZED (
    SELECT account_id, record_id, content_hash, checkin, checkout, status, connection
    FROM acknowledged WHERE entity = $entity
),
-- A change whose answer was lost may be stored: gone from the export, it is retired like an
-- acknowledged record (as active: a lost retirement is re-sent until acknowledged).
possibly AS (
    SELECT p.account_id, p.record_id, p.content_hash, p.checkin, p.checkout,
           'active' AS status, p.connection, true AS possibly
    FROM possibly_stored AS p ANTI JOIN known AS k USING (account_id, record_id)
    WHERE p.entity = $entity AND p.payload IS NOT NULL
),
-- Only where a policy retires missing records, or to keep a quarantined record's last
-- version, is a record missing from the export looked at.
missing AS (
    SELECT k.account_id, k.record_id, k.content_hash, k.checkin, k.checkout, k.status,
           k.connection, k.possibly
    FROM (SELECT *, false AS possibly FROM known UNION ALL BY NAME SELECT * FROM possibly) AS k
    ANTI JOIN incoming AS i USING (account_id, record_id)
    WHERE $only_ids_all AND ($on_missing <> 'ignore' OR EXISTS (
        SELECT 1 FROM elsewhere_frame AS q
        WHERE q.quarantined AND q.account_id = k.account_id AND q.record_id = k.record_id))
),
refused AS (
    SELECT account_id, record_id, content_hash FROM dead_letters WHERE entity = $entity
),
elsewhere AS (
    SELECT account_id, record_id, bool_or(quarantined) AS quarantined
    FROM elsewhere_frame GROUP BY account_id, record_id
),
-- The incoming records that can be anything but an unchanged skip: only these are joined
-- with all they need. Finding them needs the known keys and hashes alone, where joining every
-- incoming record with every column it needs would hold those columns for every record.
to_decide AS (
    SELECT i.* FROM incoming AS i
    WHERE $full_resync OR NOT $only_ids_all
       OR NOT EXISTS (SELECT 1 FROM known AS k WHERE k.account_id = i.account_id
                      AND k.record_id = i.record_id AND k.content_hash = i.content_hash)
       OR EXISTS (SELECT 1 FROM refused AS r WHERE r.account_id = i.account_id
                  AND r.record_id = i.record_id)
),
sides AS ({sides}),
joined AS (
    SELECT s.*,
        r.content_hash AS refused_hash,
        e.record_id IS NOT NULL AS in_export, coalesce(e.quarantined, false) AS quarantined,
        $full_resync OR NOT $only_ids_all AS forced
    FROM sides AS s
    LEFT JOIN refused AS r ON r.account_id = s.account_id AND r.record_id = s.record_id
    LEFT JOIN elsewhere AS e ON e.account_id = s.account_id AND e.record_id = s.record_id
),
decided AS (
    SELECT *,
        CASE
            WHEN present AND refused_hash = new_hash AND NOT forced THEN 'skip'
            WHEN present AND NOT known THEN 'create'
            WHEN present AND (old_hash <> new_hash OR forced) THEN 'update'
            WHEN present THEN 'skip'
            WHEN NOT $only_ids_all THEN NULL
            -- In the export but invalid: the service keeps the last acknowledged version.
            WHEN quarantined THEN 'skip'
            WHEN in_export OR NOT list_contains($scope_accounts, account_id) THEN NULL
            -- Another connection's record (several mappings may write to one account).
            WHEN owner IS DISTINCT FROM $connection THEN NULL
            WHEN NOT (
                ($on_missing = 'deactivate' AND old_status <> 'deactivated')
                OR
                ($on_missing = 'cancel_future'
                 AND checkin >= $today
                 AND ($window_start IS NULL OR (checkin >= $window_start AND checkin < $window_end))
                 AND old_status <> 'cancelled')
            ) THEN NULL
            WHEN $all_unidentified OR list_contains($unidentified, account_id) THEN 'skip'
            WHEN $on_missing = 'deactivate' THEN 'deactivate'
            ELSE 'cancel'
        END AS action,
        CASE
            WHEN present AND refused_hash = new_hash AND NOT forced THEN 'dead_lettered'
            WHEN present AND NOT known THEN 'new'
            WHEN present AND old_hash <> new_hash THEN 'changed'
            WHEN present AND forced THEN 'forced'
            WHEN present THEN 'unchanged'
            WHEN quarantined THEN 'quarantined'
            WHEN $all_unidentified OR list_contains($unidentified, account_id)
                THEN 'unidentified_rows'
            WHEN possibly THEN 'possibly_stored_gone'
            ELSE 'missing_from_export'
        END AS reason
    FROM joined
)
SELECT account_id, record_id, action, reason,
       CASE WHEN present AND action <> 'skip' THEN new_row END AS source_row,
       CASE WHEN present THEN new_hash ELSE old_hash END AS content_hash,
       checkin, checkout, present,
       NOT present
           AND reason IN ('missing_from_export', 'unidentified_rows', 'possibly_stored_gone')
           AS retiring
FROM decided
WHERE action IS NOT NULL AND reason <> 'unchanged'
"""

# The two sides of the diff, each a statement of its own: run together, the hash tables of
# both joins (the incoming records' keys, the known records' keys and hashes) would be held
# at once.
_PRESENT_SIDE = """
    SELECT true AS present, i.account_id, i.record_id,
           i._row AS new_row, i.content_hash AS new_hash,
           coalesce(i.checkin, k.checkin) AS checkin, coalesce(i.checkout, k.checkout) AS checkout,
           k.record_id IS NOT NULL AS known, k.content_hash AS old_hash,
           k.status AS old_status, k.connection AS owner, false AS possibly
    FROM to_decide AS i LEFT JOIN known AS k USING (account_id, record_id)
"""
_MISSING_SIDE = """
    SELECT false AS present, account_id, record_id, NULL::BIGINT AS new_row,
           NULL::VARCHAR AS new_hash, checkin, checkout, true AS known,
           content_hash AS old_hash, status AS old_status, connection AS owner, possibly
    FROM missing
"""
_DIFF_SIDES = tuple(_DIFF_SQL.replace("{sides}", side) for side in (_PRESENT_SIDE, _MISSING_SIDE))

# The records the diff would retire, with their last payload: those whose last acknowledged
# payload already says INACTIVE (deactivate) or CANCELLED (cancel) are retired already and drop
# out. A possibly stored record (never acknowledged) is retired until a retirement is.
_RETIRED_SQL = """
WITH last_sent AS (
    SELECT account_id, record_id, payload, false AS possibly
    FROM acknowledged WHERE entity = $entity
    UNION ALL
    SELECT p.account_id, p.record_id, p.payload, true AS possibly
    FROM possibly_stored AS p
    WHERE p.entity = $entity AND p.payload IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM acknowledged AS k WHERE k.entity = $entity
          AND k.account_id = p.account_id AND k.record_id = p.record_id)
)
SELECT r.account_id, r.record_id, r.action, r.reason,
       CASE WHEN r.action = 'skip' THEN NULL ELSE a.payload END AS payload,
       r.content_hash, r.checkin, r.checkout, r.present
FROM retiring_frame AS r
JOIN last_sent AS a ON a.account_id = r.account_id AND a.record_id = r.record_id
WHERE a.possibly OR coalesce(json_extract_string(a.payload, '$.status'), '')
      <> CASE WHEN $on_missing = 'deactivate' THEN $inactive ELSE $cancelled END
"""

# Guests staying in a unit from today on, per unit a plan would deactivate: the reservations
# the service holds (acknowledged, not cancelled), each replaced by this run's version when it
# has one, minus those the same plan cancels.
_UNIT_STAYS_SQL = """
WITH candidates AS (
    SELECT DISTINCT account_id, record_id AS unit_id FROM units_frame
),
held AS (
    SELECT a.account_id, a.record_id, a.payload FROM acknowledged AS a
    SEMI JOIN (SELECT DISTINCT account_id FROM candidates) AS c USING (account_id)
    WHERE a.entity = 'reservation' AND a.status <> 'cancelled' AND a.checkout >= $today
    UNION ALL
    -- A stay whose answer was lost may be held by the service: it protects its unit too.
    SELECT p.account_id, p.record_id, p.payload FROM possibly_stored AS p
    SEMI JOIN (SELECT DISTINCT account_id FROM candidates) AS c USING (account_id)
    WHERE p.entity = 'reservation' AND p.payload IS NOT NULL AND p.checkout >= $today
      AND NOT EXISTS (SELECT 1 FROM acknowledged AS a WHERE a.entity = 'reservation'
                      AND a.account_id = p.account_id AND a.record_id = p.record_id)
),
reservations AS (
    SELECT * FROM held ANTI JOIN incoming_frame USING (account_id, record_id)
    UNION ALL
    SELECT account_id, record_id, payload FROM incoming_frame
    WHERE CAST(checkout AS DATE) >= $today
),
stays AS (
    SELECT account_id, record_id,
           unnest(from_json(json_extract(payload, '$.unitReservations'),
                            '[{"unitId": "VARCHAR", "checkout": "VARCHAR"}]')) AS unit
    FROM reservations ANTI JOIN cancelled_frame USING (account_id, record_id)
    WHERE coalesce(json_extract_string(payload, '$.status'), '') <> $cancelled
)
SELECT s.account_id, s.unit.unitId AS unit_id, count(DISTINCT s.record_id) AS stays,
       max(TRY_CAST(s.unit.checkout AS DATE)) AS last_checkout
FROM stays AS s
JOIN candidates AS c ON c.account_id = s.account_id AND c.unit_id = s.unit.unitId
WHERE TRY_CAST(s.unit.checkout AS DATE) >= $today
GROUP BY ALL
ORDER BY ALL
"""


class DuckDBSnapshot(SnapshotOperations):
    """A snapshot held in one DuckDB file: the primitives of ``SnapshotOperations``, and the
    set-based decisions (diff, stays in units, re-sends) both backends compute here."""

    def __init__(
        self, connection: duckdb.DuckDBPyConnection, location: str, *, read_only: bool = False
    ) -> None:
        self._connection = connection
        self.location = location
        self.read_only = read_only

    @classmethod
    @contextmanager
    def open(
        cls, path: str | Path, *, lock_timeout: float = 0.0, read_only: bool = False
    ) -> Iterator[DuckDBSnapshot]:
        """Open (creating parents and the file if needed) and migrate to the latest schema.

        ``read_only`` opens nothing for writing (``pms-sync plan``): a missing file reads as an
        empty snapshot and is not created, a file of an older schema is migrated in memory.
        """
        file = Path(path).expanduser()
        if read_only:
            connection = _connect_read_only(file, lock_timeout)
        else:
            try:
                private_dir(file.parent)
            except OSError as error:
                raise SnapshotError(
                    f"cannot create the snapshot folder {file.parent}: {error}"
                ) from error
            connection = _connect(file, lock_timeout)
            _keep_private(file)
            _migrate(connection, file)
        try:
            yield cls(connection, str(file), read_only=read_only)
        finally:
            connection.close()

    # -- diff -----------------------------------------------------------------------------

    def diff(self, request: DiffRequest) -> DiffResult:
        frame = request.records if len(request.records) else empty_records()
        frame = frame.loc[:, list(RECORD_COLUMNS)]
        window = request.window
        params = {
            "entity": str(request.entity),
            "full_resync": request.full_resync,
            "only_ids_all": request.only_ids is None,
            "only_ids": sorted(request.only_ids or ()),
            "scope_accounts": sorted(request.scope_accounts),
            "on_missing": str(request.on_missing),
            "today": request.today,
            "window_start": window.start if window else None,
            "window_end": window.end if window else None,
            "connection": request.connection,
            "unidentified": sorted(request.unidentified_accounts),
            "all_unidentified": request.all_unidentified,
        }
        cursor = self._connection.cursor()
        try:
            cursor.register("incoming_frame", frame.assign(_row=np.arange(len(frame))))
            cursor.register("elsewhere_frame", _elsewhere_frame(request))
            _refuse_duplicates(cursor, request.entity)
            sides = [cursor.execute(sql, params).df() for sql in _DIFF_SIDES]
            found = [side for side in sides if len(side)]
            rows = pd.concat(found, ignore_index=True) if len(found) > 1 else (found or sides)[0]
            decided = _with_retired(cursor, rows, params)
        finally:
            cursor.close()
        return _diff_result(frame, decided, request.by_checkin)

    def mark_validated(self, entity: Entity, records: pd.DataFrame) -> None:
        if not len(records):
            return
        with self._transaction() as cursor:
            cursor.register(
                "validated_frame", records.loc[:, ["account_id", "record_id", "payload"]]
            )
            cursor.execute(
                """
                UPDATE acknowledged AS a SET validated_with = $contract
                FROM validated_frame AS i
                WHERE a.entity = $entity AND a.validated_with IS DISTINCT FROM $contract
                  AND i.payload IS NOT NULL
                  AND a.account_id = i.account_id AND a.record_id = i.record_id
                  AND a.payload = i.payload
                """,
                {"contract": CONTRACT_FINGERPRINT, "entity": str(entity)},
            )

    def unit_stays(self, request: UnitStaysRequest) -> pd.DataFrame:
        columns = ["account_id", "unit_id", "stays", "last_checkout"]
        if not len(request.units):
            return pd.DataFrame(columns=columns)
        incoming = request.incoming if request.incoming is not None else empty_records()
        cursor = self._connection.cursor()
        try:
            cursor.register("units_frame", request.units.loc[:, ["account_id", "record_id"]])
            # Records carried over by fingerprint (no payload) are what the service holds:
            # their acknowledged version stands for them.
            cursor.register(
                "incoming_frame",
                incoming.loc[
                    incoming["payload"].notna(), ["account_id", "record_id", "payload", "checkout"]
                ],
            )
            cursor.register(
                "cancelled_frame", request.cancelled.loc[:, ["account_id", "record_id"]]
            )
            found = cursor.execute(
                _UNIT_STAYS_SQL, {"today": request.today, "cancelled": CANCELLED}
            ).df()
        finally:
            cursor.close()
        found["last_checkout"] = pd.to_datetime(found["last_checkout"]).dt.date
        return found.loc[:, columns]

    # -- re-sends, drift and reconciliation passes (connector/snapshot/_resend.py) ----------

    def resend(self, request: ResendRequest) -> ResendResult:
        cursor = self._connection.cursor()
        try:
            return _resend.resend(cursor, request)
        finally:
            cursor.close()

    # -- helpers --------------------------------------------------------------------------

    def _query(self, sql: str, params: Params | None = None) -> pd.DataFrame:
        text, values = _duckdb_sql(sql, params)
        cursor = self._connection.cursor()
        try:
            return cursor.execute(text, values).df()
        finally:
            cursor.close()

    def _arrow(self, sql: str, params: Params | None = None, rows: Rows | None = None) -> pa.Table:
        text, values = _duckdb_sql(sql.replace("{rows}", "batch"), params)
        cursor = self._connection.cursor()
        try:
            if rows is not None:
                cursor.register("batch", rows)
            return cursor.sql(text, params=values).to_arrow_table()
        finally:
            cursor.close()

    def _execute(
        self,
        session: duckdb.DuckDBPyConnection,
        sql: str,
        params: Params | None = None,
        rows: Rows | None = None,
    ) -> int:
        found = self._fetch(session, sql, params, rows)
        return int(found[0][0]) if found else 0

    def _fetch(
        self,
        session: duckdb.DuckDBPyConnection,
        sql: str,
        params: Params | None = None,
        rows: Rows | None = None,
    ) -> list[tuple[Any, ...]]:
        text, values = _duckdb_sql(sql.replace("{rows}", "batch"), params)
        if rows is None:
            return session.execute(text, values).fetchall()
        # Registered as it is: DuckDB scans a frame or an Arrow table without converting it.
        session.register("batch", rows)
        try:
            return session.execute(text, values).fetchall()
        finally:
            # A failed statement aborts the transaction, and unregistering in it fails too:
            # the statement's error is the one to report.
            with contextlib.suppress(duckdb.TransactionException):
                session.unregister("batch")

    def _json_text(self, document: str, member: str) -> str:
        return f"json_extract_string({document}, '$.{member}')"

    def _row_hash(self, columns: str) -> str:
        return f"hash({columns})"

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if self.read_only:
            raise SnapshotError(
                f"the snapshot {self.location} is open read-only (a plan writes nothing)"
            )
        cursor = self._connection.cursor()
        cursor.execute("BEGIN TRANSACTION")
        try:
            yield cursor
            cursor.execute("COMMIT")
            # DuckDB (re)creates its write-ahead log with the umask's mode at the first write
            # after a checkpoint; it holds the same door codes as the file.
            _keep_private(Path(self.location))
        except duckdb.OutOfMemoryException:
            _rollback(cursor)
            raise out_of_memory(f"writing the snapshot {self.location}") from None
        except duckdb.Error as error:
            _rollback(cursor)
            raise SnapshotError(f"cannot write the snapshot {self.location}: {error}") from error
        except BaseException:
            _rollback(cursor)
            raise
        finally:
            cursor.close()


def _diff_result(
    incoming: pd.DataFrame, decided: pd.DataFrame, by_checkin: bool = False
) -> DiffResult:
    counts = decided.groupby(["account_id", "action", "reason"], as_index=False).size()
    counts = counts.rename(columns={"size": "n"})
    unchanged = _unchanged_counts(incoming, decided)
    counts = pd.concat([counts, unchanged], ignore_index=True)
    counts = counts[counts["n"] > 0].sort_values(["account_id", "action", "reason"])
    changes = decided[decided["action"] != "skip"].drop(columns=["present"])
    return DiffResult(
        changes=_with_payloads(changes, incoming),
        counts=counts.reset_index(drop=True),
        counts_by_checkin=_counts_by_checkin(incoming, decided) if by_checkin else None,
    )


_DIFF_COLUMNS = (
    "account_id",
    "record_id",
    "action",
    "reason",
    "payload",
    "content_hash",
    "checkin",
    "checkout",
)


def _with_payloads(changes: pd.DataFrame, incoming: pd.DataFrame) -> pd.DataFrame:
    """The changes with their documents, in the export's order (``source_row``), then the
    retired records by key with the last payload _RETIRED_SQL gave them.

    The documents stay the incoming frame's own: the column holds their positions
    (connector.documents), so a first run's plan does not copy the export's documents. When
    most records are unchanged, the few documents sent are copied instead, so that the plan
    does not keep the whole export's alive after the records are gone.
    """
    if "source_row" not in changes:  # only retired records
        changes = changes.assign(source_row=pd.Series(pd.NA, index=changes.index, dtype="Int64"))
    sending = changes["source_row"].notna()
    sent = changes.loc[sending].sort_values("source_row")
    retired = changes.loc[~sending].sort_values(["account_id", "record_id"])
    documents = _arrow_text(incoming["payload"])
    rows = sent["source_row"].to_numpy(dtype=np.int64)
    chunks = list(documents.chunks)
    if 2 * len(rows) < len(documents):
        chunks = [DocumentArray.over(chunks, rows).arrow()]
        rows = np.arange(len(rows), dtype=np.int64)
    kept = sum(len(chunk) for chunk in chunks)
    if len(retired):
        chunks += _arrow_text(retired["payload"]).chunks
    positions = np.concatenate([rows, kept + np.arange(len(retired), dtype=np.int64)])
    rows_in_order = pd.concat([sent, retired], ignore_index=True)
    payloads = DocumentArray.over(chunks, positions)
    return rows_in_order.assign(payload=payloads).loc[:, list(_DIFF_COLUMNS)]


def _arrow_text(column: pd.Series) -> pa.ChunkedArray:
    """A text column as Arrow: its own buffers when it is Arrow-backed (no copy)."""
    values = pa.array(column, type=pa.large_string(), from_pandas=True)
    if isinstance(values, pa.ChunkedArray):
        return values
    return pa.chunked_array([values], type=pa.large_string())


def _with_retired(
    cursor: duckdb.DuckDBPyConnection, decided: pd.DataFrame, params: dict[str, object]
) -> pd.DataFrame:
    """The diff's rows, the records to retire checked against (and given) their last payload."""
    retiring = decided["retiring"].astype(bool)
    kept = decided.loc[~retiring].drop(columns=["retiring"])
    if not retiring.any():
        return kept
    cursor.register(
        "retiring_frame", decided.loc[retiring].drop(columns=["retiring", "source_row"])
    )
    try:
        retired = cursor.execute(
            _RETIRED_SQL,
            {
                "entity": params["entity"],
                "on_missing": params["on_missing"],
                "inactive": str(AccommodationStatus.INACTIVE),
                "cancelled": CANCELLED,
            },
        ).df()
    finally:
        cursor.unregister("retiring_frame")
    return pd.concat([kept, retired], ignore_index=True) if len(kept) else retired


def _counts_by_checkin(incoming: pd.DataFrame, decided: pd.DataFrame) -> pd.DataFrame:
    """Every action per account and check-in day: the decided rows, and the unchanged skips
    (incoming records that got no other action), like ``counts`` one day at a time."""
    keys = ["account_id", "action", "reason", "checkin"]
    days = decided.assign(checkin=pd.to_datetime(decided["checkin"]))
    counts = days.groupby(keys, as_index=False, dropna=False).size().rename(columns={"size": "n"})
    present = days.loc[days["present"].astype(bool), ["account_id", "checkin"]]
    incoming_days = incoming.loc[:, ["account_id", "checkin"]].assign(
        account_id=incoming["account_id"].astype(str), checkin=pd.to_datetime(incoming["checkin"])
    )
    total = incoming_days.groupby(["account_id", "checkin"], dropna=False).size()
    taken = present.groupby(["account_id", "checkin"], dropna=False).size()
    unchanged = total.sub(taken, fill_value=0).astype("int64").rename("n").reset_index()
    unchanged = unchanged.assign(action="skip", reason="unchanged")
    counts = pd.concat([counts, unchanged.loc[:, [*keys, "n"]]], ignore_index=True)
    return counts[counts["n"] > 0].reset_index(drop=True)


def _elsewhere_frame(request: DiffRequest) -> pd.DataFrame:
    """The keys of the export outside ``records``, flagged when they are quarantined."""
    frames = [
        _identified(keys).assign(quarantined=flag)
        for keys, flag in ((request.quarantined, True), (request.present_elsewhere, False))
        if len(keys)
    ]
    if not frames:
        return pd.DataFrame(
            {
                "account_id": pd.Series(dtype="object"),
                "record_id": pd.Series(dtype="object"),
                "quarantined": pd.Series(dtype="bool"),
            }
        )
    return pd.concat(frames, ignore_index=True)


def _identified(keys: pd.DataFrame) -> pd.DataFrame:
    """Keys whose account and id are both known (the others cannot match a record)."""
    frame = keys.loc[:, ["account_id", "record_id"]]
    known = frame.notna().all(axis=1)
    frame = frame.loc[known].astype(str)
    return frame[(frame["account_id"].str.strip() != "") & (frame["record_id"].str.strip() != "")]


def _unchanged_counts(incoming: pd.DataFrame, decided: pd.DataFrame) -> pd.DataFrame:
    """Per account: incoming records that got no other action are unchanged skips."""
    total = counts_by_text(incoming["account_id"])
    present = decided.loc[decided["present"].astype(bool), "account_id"].value_counts()
    unchanged = total.sub(present, fill_value=0).astype("int64")
    return pd.DataFrame(
        {
            "account_id": unchanged.index.astype(str),
            "action": "skip",
            "reason": "unchanged",
            "n": unchanged.to_numpy(),
        }
    )


def _refuse_duplicates(cursor: duckdb.DuckDBPyConnection, entity: Entity) -> None:
    # Two records with one id would make the diff ambiguous and send one of them twice.
    # Grouping on a 64-bit hash first keeps the common case (no duplicate) cheap.
    suspects = cursor.execute(
        "SELECT count(*) FROM (SELECT hash(account_id, record_id) AS h FROM incoming_frame "
        "GROUP BY h HAVING count(*) > 1)"
    ).fetchone()
    if not suspects or not suspects[0]:
        return
    duplicates = cursor.execute(
        "SELECT account_id, record_id FROM incoming_frame GROUP BY ALL HAVING count(*) > 1 "
        "ORDER BY ALL LIMIT 5"
    ).fetchall()
    if duplicates:
        listed = ", ".join(f"{account}/{record}" for account, record in duplicates)
        raise SnapshotError(
            f"the {entity} records hold the same id more than once ({listed}); "
            f"each (account, id) must appear once per run"
        )


_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def _duckdb_sql(sql: str, params: Params | None) -> tuple[str, dict[str, object]]:
    """The shared SQL's ``:name`` parameters as DuckDB's ``$name``, given only those used."""
    used = set(_PARAMETER.findall(sql))
    return _PARAMETER.sub(r"$\1", sql), {k: v for k, v in (params or {}).items() if k in used}


def _rollback(cursor: duckdb.DuckDBPyConnection) -> None:
    # A failed COMMIT (a full disk) has already ended the transaction: a ROLLBACK would raise
    # "no transaction is active" and hide the error that says what went wrong.
    with contextlib.suppress(duckdb.Error):
        cursor.execute("ROLLBACK")


def _keep_private(file: Path) -> None:
    """The snapshot file and its write-ahead log readable by their owner only (0600)."""
    for path in (file, file.with_name(file.name + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mode & 0o077:
                os.chmod(path, PRIVATE_FILE_MODE)


def _connect(
    file: Path, lock_timeout: float, *, read_only: bool = False
) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + lock_timeout
    while True:
        try:
            if read_only:
                return open_duckdb(str(file), read_only=True)
            if file.exists():
                return open_duckdb(str(file), checkpoint_threshold=CHECKPOINT_THRESHOLD)
            # A new file is created 0600 from its first byte: DuckDB takes the umask's mode.
            previous = os.umask(0o077)
            try:
                return open_duckdb(str(file), checkpoint_threshold=CHECKPOINT_THRESHOLD)
            finally:
                os.umask(previous)
        except duckdb.IOException as error:
            if not any(marker in str(error) for marker in _LOCK_MARKERS):
                raise SnapshotError(f"cannot open the snapshot {file}: {error}") from error
            if time.monotonic() >= deadline:
                waited = f" after waiting {lock_timeout:g} s" if lock_timeout > 0 else ""
                raise SnapshotLockedError(
                    f"the snapshot {file} is in use by another pms-sync process"
                    f"{_holder(str(error))}{waited} (DuckDB allows one writer per file); wait "
                    f"for that run to finish (--wait SECONDS), or point "
                    f"--snapshot/PMS_SYNC_SNAPSHOT at another file or a PostgreSQL database"
                ) from error
            time.sleep(0.2)
        except duckdb.Error as error:
            raise SnapshotError(f"cannot open the snapshot {file}: {error}") from error


_HOLDER = re.compile(r"held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")


def _holder(message: str) -> str:
    """`` (pid N, program)`` from DuckDB's lock conflict, which names the holding process."""
    found = _HOLDER.search(message)
    return f" (pid {found['pid']}, {found['program']})" if found else ""


def _connect_read_only(file: Path, lock_timeout: float) -> duckdb.DuckDBPyConnection:
    """A connection that can read the snapshot and write nothing to disk.

    The file itself when its schema is the latest; otherwise an in-memory copy, which the
    caller migrates. No file: an empty in-memory database.
    """
    if not file.exists():
        memory = open_duckdb(":memory:")
        _migrate(memory, file)
        return memory
    connection = _connect(file, lock_timeout, read_only=True)
    try:
        seen = {
            int(row[0])
            for row in connection.execute("SELECT version FROM schema_migrations").fetchall()
        }
    except duckdb.CatalogException:
        seen = set()
    except duckdb.Error as error:
        connection.close()
        raise SnapshotError(f"cannot read the snapshot {file}: {error}") from error
    if seen >= {step.version for step in MIGRATIONS}:
        return connection
    connection.close()
    memory = open_duckdb(":memory:")
    try:
        memory.execute("ATTACH ? AS on_disk (READ_ONLY)", [str(file)])
        memory.execute("COPY FROM DATABASE on_disk TO memory")
        memory.execute("DETACH on_disk")
    except duckdb.Error as error:
        memory.close()
        raise SnapshotError(f"cannot read the snapshot {file}: {error}") from error
    _migrate(memory, file)
    return memory


def _migrate(connection: duckdb.DuckDBPyConnection, file: Path) -> None:
    try:
        migrate(connection)
    except duckdb.Error as error:
        connection.close()
        raise SnapshotError(f"cannot migrate the snapshot {file}: {error}") from error


@contextmanager
def open_store(
    location: str | Path,
    *,
    lock_timeout: float = 0.0,
    read_only: bool = False,
    scope: LockScope | None = None,
) -> Iterator[DuckDBSnapshot]:
    """The file's store (one writer whatever the ``scope``)."""
    with DuckDBSnapshot.open(location, lock_timeout=lock_timeout, read_only=read_only) as store:
        yield store


@contextmanager
def fingerprint_reader(
    location: str | Path, connection: str | None
) -> Iterator[_fingerprints.FileReader]:
    """Reads the file's stored fingerprints, a short-lived read-only connection per entity."""
    reader = _fingerprints.FileReader(location, connection)
    try:
        yield reader
    finally:
        reader.close()


def source_cursors(path: str | Path, connection: str | None) -> dict[tuple[str, str], StoredCursor]:
    """The incremental cursors a snapshot file keeps, through a read-only connection of its
    own; none when there is no file yet, its schema predates them, or another process is
    writing it (the run then reads its inputs in full)."""
    file = Path(path).expanduser()
    if not file.exists():
        return {}
    try:
        with open_duckdb(str(file), read_only=True) as db:
            versions = {
                v for (v,) in db.execute("SELECT version FROM schema_migrations").fetchall()
            }
            if CURSORS_SINCE not in versions:
                return {}
            return DuckDBSnapshot(db, str(file), read_only=True).source_cursors(connection)
    except duckdb.Error:
        return {}


def validated_payloads(path: str | Path, record_ids: pa.Array | None = None) -> pa.Table | None:
    """MD5s of the payloads a snapshot file knows valid under the current contract; with
    ``record_ids``, of those records' payloads only (the records a run maps).

    Read through a separate read-only connection before a run opens the snapshot. None when
    there is nothing to read: no file yet, a schema before this cache, or a file another
    process is writing (the run then validates every record, which is only slower).
    """
    file = Path(path).expanduser()
    if not file.exists():
        return None
    try:
        with open_duckdb(str(file), read_only=True) as connection:
            (version,) = connection.sql("SELECT max(version) FROM schema_migrations").fetchall()[0]
            if (version or 0) < VALIDATED_PAYLOADS_SINCE:
                return None
            store = DuckDBSnapshot(connection, str(file), read_only=True)
            return store.validated_payloads(record_ids)
    except duckdb.Error:
        return None
