"""Every operation of the snapshot store written once, for both backends.

The backend (``_duckdb.DuckDBSnapshot``, ``_postgres.PostgresSnapshot``) provides the
primitives of ``connector.snapshot._primitives``; the tables of the Open API, guest links,
received events and drift have their operations in their own modules (mixins gathered here).
The set-based decisions (the diff, the re-send selection, the stays in units) are DuckDB's
(``_duckdb.py``, ``_resend.py``); a PostgreSQL snapshot runs them on the rows it pulls.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from connector.contract import CONTRACT_FINGERPRINT, Entity
from connector.snapshot._accounts import AccountTables, PropertyState, PropertyStatusRecord
from connector.snapshot._cursors import CursorTables
from connector.snapshot._events import EventTables
from connector.snapshot._fingerprints import STORED_SQL, connection_key
from connector.snapshot._links import LinkTables
from connector.snapshot._model import PossiblyStored, RecordStatus, Refusal, RunRecord
from connector.snapshot._primitives import Params, Rows, in_list, latest_per_key
from connector.snapshot._resend import DriftTables

KEY = ("account_id", "entity", "record_id")

# Acknowledged records replace their earlier version and clear their dead letter and any
# possibly-stored mark. The batch is the push's own (Arrow on DuckDB: scanned, not copied).
_ACKNOWLEDGE_SQL = """
INSERT INTO acknowledged (account_id, entity, record_id, content_hash, payload, checkin,
                          checkout, status, acknowledged_at, request_id, connection,
                          payload_md5, validated_with)
SELECT account_id, entity, record_id, content_hash, payload,
       CAST(checkin AS DATE), CAST(checkout AS DATE), status,
       CAST(acknowledged_at AS TIMESTAMP), request_id, CAST(connection AS VARCHAR),
       md5(payload), :contract
FROM {rows}
ON CONFLICT (account_id, entity, record_id) DO UPDATE SET
    content_hash = excluded.content_hash, payload = excluded.payload,
    checkin = excluded.checkin, checkout = excluded.checkout,
    status = excluded.status, acknowledged_at = excluded.acknowledged_at,
    request_id = excluded.request_id, connection = excluded.connection,
    payload_md5 = excluded.payload_md5, validated_with = excluded.validated_with
"""

_POSSIBLY_STORED_SQL = """
INSERT INTO possibly_stored (account_id, entity, record_id, content_hash, request_id, seen_at,
                             payload, checkin, checkout, status, connection, in_flight)
SELECT account_id, entity, record_id, content_hash, CAST(request_id AS VARCHAR),
       CAST(seen_at AS TIMESTAMP), CAST(payload AS VARCHAR), CAST(checkin AS DATE),
       CAST(checkout AS DATE), CAST(status AS VARCHAR), CAST(connection AS VARCHAR),
       CAST(in_flight AS VARCHAR)
FROM {rows}
ON CONFLICT (account_id, entity, record_id) DO
"""
_REPLACE_POSSIBLY_STORED = """UPDATE SET
    content_hash = excluded.content_hash, request_id = excluded.request_id,
    seen_at = excluded.seen_at, payload = excluded.payload, checkin = excluded.checkin,
    checkout = excluded.checkout, status = excluded.status, connection = excluded.connection,
    in_flight = excluded.in_flight
"""


class SnapshotOperations(AccountTables, LinkTables, EventTables, DriftTables, CursorTables):
    """The store's reads and writes on top of a backend's primitives."""

    # -- acknowledgements, refusals, possibly stored changes ------------------------------

    def record_acknowledgements(self, acknowledgements: pa.Table) -> None:
        if not acknowledgements.num_rows:
            return
        rows = _latest_acknowledgements(acknowledgements)
        with self._transaction() as session:
            self._execute(session, _ACKNOWLEDGE_SQL, {"contract": CONTRACT_FINGERPRINT}, rows)
            for table in ("dead_letters", "possibly_stored"):
                # Usually empty: the join against the batch costs more than asking.
                if not self._fetch(session, f"SELECT 1 FROM {table} LIMIT 1"):
                    continue
                self._execute(
                    session,
                    f"DELETE FROM {table} AS d USING {{rows}} "
                    "WHERE d.account_id = batch.account_id AND d.entity = batch.entity "
                    "AND d.record_id = batch.record_id",
                    rows=_keys_of(rows),
                )

    def record_refusals(self, refusals: Sequence[Refusal]) -> None:
        if not refusals:
            return
        # Each refusal is one refused request: a record refused twice in the batch counts two
        # attempts, its last refusal giving the message.
        letters: dict[tuple[str, str, str], tuple[Refusal, int, datetime]] = {}
        for refusal in refusals:
            key = (refusal.account_id, str(refusal.entity), refusal.record_id)
            _, attempts, first_seen = letters.get(key, (refusal, 0, refusal.seen_at))
            letters[key] = (refusal, attempts + 1, first_seen)
        frame = _frame_of([last for last, _, _ in letters.values()], Refusal).assign(
            attempts=[attempts for _, attempts, _ in letters.values()],
            first_seen=[first_seen for _, _, first_seen in letters.values()],
        )
        with self._transaction() as session:
            self._execute(
                session,
                """
                INSERT INTO dead_letters
                SELECT account_id, entity, record_id, content_hash,
                       CAST(http_status AS INTEGER), message, CAST(attempts AS INTEGER),
                       CAST(first_seen AS TIMESTAMP), CAST(seen_at AS TIMESTAMP), request_id
                FROM {rows}
                ON CONFLICT (account_id, entity, record_id) DO UPDATE SET
                    content_hash = excluded.content_hash, http_status = excluded.http_status,
                    message = excluded.message,
                    attempts = dead_letters.attempts + excluded.attempts,
                    last_seen = excluded.last_seen, request_id = excluded.request_id
                """,
                rows=frame,
            )

    def record_possibly_stored(self, changes: Sequence[PossiblyStored]) -> None:
        self._write_possibly_stored(changes, _REPLACE_POSSIBLY_STORED)

    def mark_in_flight(self, changes: Sequence[PossiblyStored]) -> None:
        # A write-ahead mark never replaces what an answer already recorded.
        self._write_possibly_stored(changes, "NOTHING")

    def _write_possibly_stored(self, changes: Sequence[PossiblyStored], conflict: str) -> None:
        if not changes:
            return
        # The last change of each record (one statement may not touch a row twice).
        latest = {(c.account_id, c.entity, c.record_id): c for c in changes}
        frame = _frame_of(list(latest.values()), PossiblyStored)
        with self._transaction() as session:
            self._execute(session, _POSSIBLY_STORED_SQL + conflict, rows=frame)

    def clear_in_flight(self, in_flight: str, keep: Collection[tuple[str, str, str]]) -> None:
        kept = pd.DataFrame(sorted(keep), columns=list(KEY), dtype=object)
        with self._transaction() as session:
            self._execute(
                session,
                "DELETE FROM possibly_stored AS p WHERE in_flight = :token AND NOT EXISTS ("
                "SELECT 1 FROM {rows} WHERE batch.account_id = p.account_id "
                "AND batch.entity = p.entity AND batch.record_id = p.record_id)",
                {"token": in_flight},
                kept,
            )

    def adopt(self, entity: Entity, records: pd.DataFrame, connection: str | None) -> int:
        if not len(records):
            return 0
        frame = records.loc[:, ["account_id", "record_id"]].astype(str)
        with self._transaction() as session:
            return self._execute(
                session,
                "UPDATE acknowledged AS k SET connection = :owner FROM {rows} "
                "WHERE k.entity = :entity AND k.account_id = batch.account_id "
                "AND k.record_id = batch.record_id "
                "AND k.connection IS DISTINCT FROM CAST(:owner AS VARCHAR)",
                {"owner": connection, "entity": str(entity)},
                frame,
            )

    # -- the rate-limit log and the run history -------------------------------------------

    def limiter_history(self, key: str) -> list[float]:
        rows = self._query(
            "SELECT sent_at FROM rate_limit_log WHERE limiter_key = :key ORDER BY sent_at",
            {"key": key},
        )
        return [float(t) for t in rows["sent_at"]]

    def save_limiter_history(self, key: str, sent_at: Sequence[float]) -> None:
        frame = pd.DataFrame({"sent_at": [float(t) for t in sent_at]}, dtype="float64")
        with self._transaction() as session:
            self._execute(
                session, "DELETE FROM rate_limit_log WHERE limiter_key = :key", {"key": key}
            )
            if len(frame):
                self._execute(
                    session,
                    "INSERT INTO rate_limit_log "
                    "SELECT :key, CAST(sent_at AS DOUBLE PRECISION) FROM {rows}",
                    {"key": key},
                    frame,
                )

    def record_run(self, run: RunRecord) -> None:
        row = pd.DataFrame(
            [
                {
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
            ]
        )
        with self._transaction() as session:
            self._execute(
                session,
                """
                INSERT INTO runs (run_id, mapping, accounts, started_at, finished_at, duration_s,
                                  dry_run, requests, status, connection)
                SELECT run_id, mapping, accounts, CAST(started_at AS TIMESTAMP),
                       CAST(finished_at AS TIMESTAMP), CAST(duration_s AS DOUBLE PRECISION),
                       CAST(dry_run AS BOOLEAN), CAST(requests AS INTEGER), status,
                       CAST(connection AS VARCHAR)
                FROM {rows}
                ON CONFLICT (run_id) DO UPDATE SET
                    mapping = excluded.mapping, accounts = excluded.accounts,
                    started_at = excluded.started_at, finished_at = excluded.finished_at,
                    duration_s = excluded.duration_s, dry_run = excluded.dry_run,
                    requests = excluded.requests, status = excluded.status,
                    connection = excluded.connection
                """,
                rows=row,
            )
            if run.counts:
                counts = pd.DataFrame([asdict(item) for item in run.counts])
                counts["entity"] = counts["entity"].astype(str)
                counts.insert(0, "run_id", run.run_id)
                counts = latest_per_key(counts, ("run_id", "account_id", "entity"))
                numbers = [c for c in counts.columns if c not in ("run_id", "account_id", "entity")]
                listed = ", ".join(_quoted(c) for c in counts.columns)
                self._execute(
                    session,
                    f"INSERT INTO run_counts ({listed}) SELECT run_id, account_id, entity, "
                    + ", ".join(f"CAST({_quoted(c)} AS INTEGER)" for c in numbers)
                    + " FROM {rows} ON CONFLICT (run_id, account_id, entity) DO UPDATE SET "
                    + ", ".join(f"{_quoted(c)} = excluded.{_quoted(c)}" for c in numbers),
                    rows=counts,
                )

    # -- reads ----------------------------------------------------------------------------

    def acknowledged(self, entity: Entity | None = None) -> pd.DataFrame:
        return self._query(
            "SELECT * FROM acknowledged "
            "WHERE CAST(:entity AS VARCHAR) IS NULL OR entity = :entity "
            "ORDER BY account_id, entity, record_id",
            {"entity": None if entity is None else str(entity)},
        )

    def dead_letters(self) -> pd.DataFrame:
        return self._query("SELECT * FROM dead_letters ORDER BY account_id, entity, record_id")

    def possibly_stored(self) -> dict[tuple[str, str, str], str]:
        rows = self._query(
            "SELECT account_id, entity, record_id, content_hash FROM possibly_stored"
        )
        return {
            (str(account), str(entity), str(record)): str(digest)
            for account, entity, record, digest in rows.itertuples(index=False)
        }

    def runs(self) -> pd.DataFrame:
        return self._query("SELECT * FROM runs ORDER BY started_at")

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

    def property_statuses(self) -> dict[str, PropertyStatusRecord]:
        rows = self._query("SELECT * FROM property_status ORDER BY account_id")
        return {
            str(row.account_id): PropertyStatusRecord(
                account_id=str(row.account_id),
                status=PropertyState(str(row.status)),
                update_sub_units=bool(row.update_sub_units),
                changed_at=pd.Timestamp(row.changed_at).to_pydatetime(),
                request_id=None if pd.isna(row.request_id) else str(row.request_id),
                connection=None if pd.isna(row.connection) else str(row.connection),
            )
            for row in rows.itertuples(index=False)
        }

    # -- reads of the safety rails (docs/safety-rails.md) ---------------------------------

    def active_counts(self, entity: Entity) -> dict[str, int]:
        """Per account: acknowledged records the service holds as active (not deactivated or
        cancelled by the connector), the base of the mass-change guard's share."""
        rows = self._query(
            "SELECT account_id, count(*) AS n FROM acknowledged "
            "WHERE entity = :entity AND status = 'active' GROUP BY account_id",
            {"entity": str(entity)},
        )
        return {str(a): int(n) for a, n in zip(rows["account_id"], rows["n"], strict=True)}

    def payloads_of(
        self, entity: Entity, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The last acknowledged payload of each (account, record id) asked for."""
        if not keys:
            return {}
        wanted = sorted({(str(account), str(record)) for account, record in keys})
        rows = self._query(
            "SELECT a.account_id, a.record_id, a.payload FROM acknowledged AS a "
            "JOIN (SELECT unnest(CAST(:accounts AS VARCHAR[])) AS account_id, "
            "unnest(CAST(:records AS VARCHAR[])) AS record_id) AS w "
            "ON w.account_id = a.account_id AND w.record_id = a.record_id "
            "WHERE a.entity = :entity",
            {
                "entity": str(entity),
                "accounts": [account for account, _ in wanted],
                "records": [record for _, record in wanted],
            },
        )
        return {
            (str(account), str(record)): payload
            for account, record, payload in rows.itertuples(index=False)
        }

    def unacknowledged_dead_letters(self, entity: Entity) -> pd.DataFrame:
        """Dead letters of records the service never acknowledged: it does not hold them."""
        return self._query(
            "SELECT d.account_id, d.record_id, d.http_status, d.message FROM dead_letters AS d "
            "WHERE d.entity = :entity AND NOT EXISTS (SELECT 1 FROM acknowledged AS a "
            "WHERE a.account_id = d.account_id AND a.entity = d.entity "
            "AND a.record_id = d.record_id) ORDER BY 1, 2, 3, 4",
            {"entity": str(entity)},
        )

    def fingerprint(self, accounts: Sequence[str]) -> str:
        """A digest of what the snapshot holds for these accounts: acknowledged records (hash
        and status) and dead letters. Any acknowledgement or refusal changes it; a plan made
        against one fingerprint is only applied against the same one (of the same backend:
        each hashes with its own function)."""
        among = in_list("account_id", "accounts")
        acknowledged = self._row_hash("account_id, entity, record_id, content_hash, status")
        refused = self._row_hash("account_id, entity, record_id, content_hash")
        row = self._query(
            f"""
            SELECT
                (SELECT count(*) FROM acknowledged WHERE {among}) AS a,
                (SELECT CAST(coalesce(sum({acknowledged}), 0) AS VARCHAR)
                 FROM acknowledged WHERE {among}) AS b,
                (SELECT count(*) FROM dead_letters WHERE {among}) AS c,
                (SELECT CAST(coalesce(sum({refused}), 0) AS VARCHAR)
                 FROM dead_letters WHERE {among}) AS d
            """,
            {"accounts": sorted(set(accounts))},
        )
        # The sums as text: 64-bit hashes summed exceed what a frame's numbers hold exactly.
        return "-".join(str(part) for part in row.iloc[0])

    # -- the cache of payloads known valid -----------------------------------------------

    def validated_payloads(self, record_ids: pa.Array | None = None) -> pa.Table:
        """MD5s of the acknowledged payloads the current contract validated (of the records
        ``record_ids`` only, when given)."""
        sql = (
            "SELECT DISTINCT payload_md5 FROM acknowledged "
            "WHERE validated_with = :contract AND payload_md5 IS NOT NULL"
        )
        if record_ids is None:
            return self._arrow(sql, {"contract": CONTRACT_FINGERPRINT})
        return self._arrow(
            sql + " AND record_id IN (SELECT record_id FROM {rows})",
            {"contract": CONTRACT_FINGERPRINT},
            pa.table({"record_id": record_ids}),
        )

    # -- source fingerprints (connector.snapshot._fingerprints) ---------------------------

    def stored_fingerprints(
        self, connection: str | None, entity: Entity, mapping_fingerprint: str
    ) -> pa.Table:
        return self._arrow(
            STORED_SQL,
            {
                "connection": connection_key(connection),
                "owner": connection,
                "entity": str(entity),
                "mapping_fingerprint": mapping_fingerprint,
            },
        )

    def record_fingerprints(
        self,
        connection: str | None,
        entity: Entity,
        mapping_fingerprint: str,
        mapped: pd.DataFrame,
    ) -> int:
        """Keep the fingerprints of ``mapped`` (MAPPED_COLUMNS) whose content the service now
        holds; forget those of the other mapped records (quarantined, refused, unsent) and every
        fingerprint of an older mapping. Returns how many are kept."""
        params = {
            "connection": connection_key(connection),
            "owner": connection,
            "entity": str(entity),
            "mapping_fingerprint": mapping_fingerprint,
        }
        with self._transaction() as session:
            self._execute(
                session,
                "DELETE FROM source_fingerprints WHERE connection = :connection "
                "AND entity = :entity AND mapping_fingerprint <> :mapping_fingerprint",
                params,
            )
            if not len(mapped):
                return 0
            rows = mapped.loc[
                :, ["source_account", "account_id", "record_id", "fingerprint", "content_hash"]
            ]
            return sum(self._keep_fingerprints(session, params, part) for part in _key_parts(rows))

    def _keep_fingerprints(self, session: Any, params: Params, rows: pd.DataFrame) -> int:
        self._execute(
            session,
            "DELETE FROM source_fingerprints AS f USING {rows} "
            "WHERE f.connection = :connection AND f.entity = :entity "
            "AND f.source_account = batch.source_account AND f.record_id = batch.record_id",
            params,
            rows,
        )
        return self._execute(
            session,
            """
            INSERT INTO source_fingerprints
            SELECT DISTINCT ON (batch.source_account, batch.record_id)
                   :connection, :entity, batch.source_account, batch.record_id,
                   batch.account_id, CAST(batch.fingerprint AS BIGINT),
                   :mapping_fingerprint, batch.content_hash
            FROM {rows}
            JOIN acknowledged AS a
              ON a.account_id = batch.account_id AND a.entity = :entity
             AND a.record_id = batch.record_id AND a.content_hash = batch.content_hash
             AND a.status = 'active'
             AND a.connection IS NOT DISTINCT FROM CAST(:owner AS VARCHAR)
            """,
            params,
            rows,
        )


FINGERPRINTS_AT_ONCE = 1_000_000
"""Fingerprints kept per statement: the de-duplicating join of a whole large export at once
runs out of DuckDB's memory limit."""


def _key_parts(rows: pd.DataFrame) -> list[pd.DataFrame]:
    """``rows`` in parts of about :data:`FINGERPRINTS_AT_ONCE`, by a hash of the record key:
    the rows of one key are in one part, so each part is de-duplicated whole."""
    parts = -(-len(rows) // FINGERPRINTS_AT_ONCE)
    if parts <= 1:
        return [rows]
    keys = rows.loc[:, ["source_account", "record_id"]].astype(str)
    part = pd.util.hash_pandas_object(keys, index=False).to_numpy() % parts
    return [rows.loc[part == index] for index in range(parts)]


def _latest_acknowledgements(acknowledgements: pa.Table) -> pa.Table:
    """The last row of each key (one statement may not touch a row twice); the table itself
    when no key repeats, the push's usual batch."""
    if pc.count_distinct(acknowledgements.column("record_id")).as_py() == acknowledgements.num_rows:
        return acknowledgements  # no id repeats, so no key does (cheap: one column hashed)
    keys = list(KEY)
    last = (
        acknowledgements.select(keys)
        .append_column("_n", pa.array(range(acknowledgements.num_rows), pa.int64()))
        .group_by(keys, use_threads=False)
        .aggregate([("_n", "max")])
    )
    if last.num_rows == acknowledgements.num_rows:
        return acknowledgements
    return acknowledgements.take(last.column("_n_max"))


def _keys_of(rows: Rows) -> Rows:
    if isinstance(rows, pa.Table):
        return rows.select(list(KEY))
    return rows.loc[:, list(KEY)]


def _frame_of(rows: Sequence[Refusal] | Sequence[PossiblyStored], kind: type) -> pd.DataFrame:
    """One column per field of the flat dataclass ``kind``, enums as text. ``asdict``
    deep-copies every member of every row; the commits of a push run on a thread that shares
    the GIL with the event loop, so the Python they cost is kept small."""
    frame = pd.DataFrame({f.name: [getattr(row, f.name) for row in rows] for f in fields(kind)})
    frame["entity"] = frame["entity"].astype(str)
    return frame


def _quoted(column: str) -> str:
    return f'"{column}"' if column in ("create", "update") else column
