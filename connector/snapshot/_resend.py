"""Re-sends of acknowledged records: which records are eligible, which ones a run re-sends
(open drift, a reconciliation pass's remainder, the rolling refresh's share; computed by
DuckDB), and the bookkeeping of drift and reconciliation passes (migration 9, either backend).
docs/drift.md explains why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime

import duckdb
import pandas as pd

from connector.contract import Entity
from connector.records import RECORD_COLUMNS, empty_records
from connector.snapshot._model import (
    DriftEvent,
    ReconciliationPass,
    ResendRequest,
    ResendResult,
)
from connector.snapshot._primitives import StorePrimitives, latest_per_key

RESEND_COLUMNS: tuple[str, ...] = (
    "account_id",
    "record_id",
    "reason",  # drifted | reconcile | refresh
    "payload",  # the acknowledged payload: what the service should hold
    "content_hash",
    "status",  # the snapshot's RecordStatus, kept by the re-send's acknowledgement
    "checkin",
    "checkout",
)

# The records a run may re-send: the acknowledged ones this run's export holds unchanged, and
# the ones the connector retired that no form of the export holds any more. Past stays only
# when asked. The CTE is shared by the count (the refresh share's base) and the selection.
_ELIGIBLE_CTE = """
WITH eligible AS (
    SELECT k.account_id, k.record_id, k.payload, k.content_hash, k.status,
           k.checkin, k.checkout, k.acknowledged_at
    FROM acknowledged AS k
    LEFT JOIN incoming_frame AS i USING (account_id, record_id)
    WHERE k.entity = $entity
      AND ($include_past OR k.checkout IS NULL OR k.checkout >= $today)
      AND (
        i.content_hash = k.content_hash
        OR (
            i.record_id IS NULL
            AND k.status <> 'active'
            AND k.connection IS NOT DISTINCT FROM $connection
            AND list_contains($scope_accounts, k.account_id)
            AND ($window_start IS NULL
                 OR (k.checkin >= $window_start AND k.checkin < $window_end))
            AND NOT EXISTS (
                SELECT 1 FROM elsewhere_frame AS e
                WHERE e.account_id = k.account_id AND e.record_id = k.record_id
            )
        )
      )
)
"""

# Open drift first (always), then either the reconciliation pass's records acknowledged before
# it started, or the refresh's share. The refresh takes the oldest cohort first (the records a
# run acknowledged share the start of that run: an ASOF join on the run history), within it
# units, then arrivals within the horizon soonest first, then later stays, then past ones.
_SELECT_SQL = (
    _ELIGIBLE_CTE
    + """,
candidates AS (
    SELECT * FROM eligible ANTI JOIN sending_frame USING (account_id, record_id)
),
marked AS (
    SELECT account_id, record_id FROM drift WHERE entity = $entity AND healed_at IS NULL
),
run_starts AS (
    SELECT DISTINCT started_at FROM runs WHERE NOT dry_run
),
ranked AS (
    SELECT c.*,
        m.record_id IS NOT NULL AS drifted,
        r.started_at AS cohort,
        CASE
            WHEN $entity = 'accommodation' THEN 0
            WHEN c.checkout >= $today AND c.checkin < $horizon_end THEN 1
            WHEN c.checkout >= $today THEN 2
            ELSE 3
        END AS urgency_rank
    FROM candidates AS c
    LEFT JOIN marked AS m USING (account_id, record_id)
    ASOF LEFT JOIN run_starts AS r ON c.acknowledged_at >= r.started_at
),
ordered AS (
    SELECT *,
        row_number() OVER (
            PARTITION BY drifted
            ORDER BY cohort NULLS FIRST, urgency_rank, checkin NULLS FIRST, acknowledged_at,
                     account_id, record_id
        ) AS position
    FROM ranked
)
SELECT account_id, record_id,
       CASE WHEN drifted THEN 'drifted' WHEN $reconciling THEN 'reconcile' ELSE 'refresh' END
           AS reason,
       payload, content_hash, status, checkin, checkout
FROM ordered
WHERE drifted
   OR ($reconciling AND acknowledged_at < $since)
   OR (NOT $reconciling AND position <= $refresh_limit)
ORDER BY drifted DESC, position
"""
)


def resend(cursor: duckdb.DuckDBPyConnection, request: ResendRequest) -> ResendResult:
    """The rows ``request`` asks to re-send; nothing is queried when nothing can be asked."""
    reconciling = request.reconcile_since is not None
    refreshing = request.refresh_share > 0 and not reconciling
    if not (refreshing or reconciling or _open_drift_count(cursor, request.entity)):
        return ResendResult(rows=_empty_rows(), eligible=0)
    records = request.records if len(request.records) else empty_records()
    window = request.window if request.entity == Entity.RESERVATION else None
    horizon_end = pd.Timestamp(request.today) + pd.Timedelta(days=request.horizon_days + 1)
    params: dict[str, object] = {
        "entity": str(request.entity),
        "include_past": request.include_past_stays,
        "today": request.today,
        "connection": request.connection,
        "scope_accounts": sorted(request.scope_accounts),
        "window_start": window.start if window else None,
        "window_end": window.end if window else None,
    }
    cursor.register("incoming_frame", records.loc[:, list(RECORD_COLUMNS)])
    cursor.register("elsewhere_frame", _keys(request.present_elsewhere))
    cursor.register("sending_frame", _keys(request.sending))
    [(eligible,)] = cursor.execute(
        _ELIGIBLE_CTE + "SELECT count(*) FROM eligible", params
    ).fetchall()
    limit = 0
    if refreshing:
        limit = math.ceil(request.refresh_share * int(eligible) - 1e-9)
        if request.refresh_max is not None:
            limit = min(limit, request.refresh_max)
    rows = cursor.execute(
        _SELECT_SQL,
        params
        | {
            "horizon_end": horizon_end.date(),
            "reconciling": reconciling,
            "since": request.reconcile_since,
            "refresh_limit": limit,
        },
    ).df()
    return ResendResult(rows=rows.loc[:, list(RESEND_COLUMNS)], eligible=int(eligible))


def _open_drift_count(cursor: duckdb.DuckDBPyConnection, entity: Entity) -> int:
    rows = cursor.execute(
        "SELECT count(*) FROM drift WHERE entity = ? AND healed_at IS NULL", [str(entity)]
    ).fetchall()  # fetched to the end: DuckDB refuses other work on an unfinished result
    return int(rows[0][0]) if rows else 0


def _keys(frame: pd.DataFrame) -> pd.DataFrame:
    if not len(frame):
        return pd.DataFrame(
            {"account_id": pd.Series(dtype="object"), "record_id": pd.Series(dtype="object")}
        )
    return frame.loc[:, ["account_id", "record_id"]].astype(str).drop_duplicates()


def _empty_rows() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in RESEND_COLUMNS})


class DriftTables(StorePrimitives):
    """Drift found and healed, and reconciliation passes (migration 9), on either backend."""

    def record_drift(self, events: Sequence[DriftEvent]) -> None:
        """Heal open drift, then record the drift found (replacing a record's earlier one)."""
        if not events:
            return
        frame = pd.DataFrame(
            {f.name: [getattr(e, f.name) for e in events] for f in fields(DriftEvent)}
        ).rename(columns={"at": "seen_at"})
        frame["entity"] = frame["entity"].astype(str)
        heals = frame[frame["kind"].isna()]
        found = latest_per_key(frame[frame["kind"].notna()], ("account_id", "entity", "record_id"))
        with self._transaction() as session:
            if len(heals):
                self._execute(
                    session,
                    """
                    UPDATE drift AS d SET healed_at = CAST(batch.seen_at AS TIMESTAMP)
                    FROM {rows}
                    WHERE d.account_id = batch.account_id AND d.entity = batch.entity
                      AND d.record_id = batch.record_id AND d.healed_at IS NULL
                    """,
                    rows=heals.loc[:, ["account_id", "entity", "record_id", "seen_at"]],
                )
            if len(found):
                self._execute(
                    session,
                    """
                    INSERT INTO drift
                    SELECT account_id, entity, record_id, kind, detail,
                           CAST(seen_at AS TIMESTAMP), request_id,
                           CASE WHEN CAST(healed AS BOOLEAN) THEN CAST(seen_at AS TIMESTAMP) END
                    FROM {rows}
                    ON CONFLICT (account_id, entity, record_id) DO UPDATE SET
                        kind = excluded.kind, detail = excluded.detail,
                        found_at = excluded.found_at, request_id = excluded.request_id,
                        healed_at = excluded.healed_at
                    """,
                    rows=found,
                )

    def open_drift(self, entity: Entity | None = None) -> pd.DataFrame:
        """Open drift: account_id, entity, record_id, kind, detail, found_at, request_id."""
        return self._query(
            "SELECT d.account_id, d.entity, d.record_id, d.kind, d.detail, d.found_at, "
            "d.request_id, a.checkin FROM drift AS d "
            "LEFT JOIN acknowledged AS a USING (account_id, entity, record_id) "
            "WHERE d.healed_at IS NULL "
            "AND (CAST(:entity AS VARCHAR) IS NULL OR d.entity = :entity) "
            "ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
            {"entity": None if entity is None else str(entity)},
        )

    # -- reconciliation passes ------------------------------------------------------------

    def reconciliation_pass(
        self, connection: str | None, entity: Entity
    ) -> ReconciliationPass | None:
        rows = self._query(
            "SELECT started_at, finished_at FROM reconciliation_passes "
            "WHERE connection = :owner AND entity = :entity ORDER BY started_at DESC LIMIT 1",
            {"owner": _owner(connection), "entity": str(entity)},
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
            self._execute(
                session,
                "INSERT INTO reconciliation_passes VALUES (:owner, :entity, :at, NULL)",
                {"owner": _owner(connection), "entity": str(entity), "at": at},
            )
        return ReconciliationPass(connection, entity, at)

    def finish_reconciliation(self, found: ReconciliationPass, at: datetime) -> None:
        with self._transaction() as session:
            self._execute(
                session,
                "UPDATE reconciliation_passes SET finished_at = :at WHERE connection = :owner "
                "AND entity = :entity AND started_at = :started",
                {
                    "at": at,
                    "owner": _owner(found.connection),
                    "entity": str(found.entity),
                    "started": found.started_at,
                },
            )


def _owner(connection: str | None) -> str:
    return connection or ""  # a key column cannot be NULL: '' is the unnamed connection
