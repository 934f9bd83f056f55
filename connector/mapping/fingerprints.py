"""Source fingerprints: map only the records whose source rows changed since the last run.

A record's **source fingerprint** combines the hashes of the raw rows of the entity's own
input that make it (the loaded text of every column) with their count. The **mapping
fingerprint** covers everything else that shapes a document: the entity's compiled SQL (the
expanded mapping, inlined lookups, reference joins), every lookup, the whole content of the
inputs it joins, the contract, pms-sync's and DuckDB's versions. After a run, the snapshot
keeps each record's source fingerprint with the content hash the service acknowledged
(``connector.snapshot``). The next run compares: a record whose rows hash the same, under
the same mapping fingerprint, whose acknowledged version is still the one mapped from them,
is carried over without mapping or validation; only the others (changed, new, quarantined
last time, refused, reconciled) are mapped. docs/decisions.md says why this is safe.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Protocol

import duckdb
import pandas as pd
import pyarrow as pa

from connector.contract import CONTRACT_FINGERPRINT, Entity
from connector.mapping.compiler import ROW_HASH, EntityQuery, row_hash_sql
from connector.mapping.model import Mapping
from connector.mapping.scope_sql import table_name
from connector.records import DateWindow
from connector.sources.base import META_COLUMNS, ROW_COLUMN, SOURCE_COLUMN, quote_identifier

STORED_COLUMNS: tuple[str, ...] = (
    "source_account",  # the account member's value as mapped (an external id, or the id)
    "record_id",
    "fingerprint",  # BIGINT
    "account_id",  # the service account the record was acknowledged under
    "content_hash",  # what the service acknowledged, mapped from these rows
    "checkin",
    "checkout",
)
"""Columns of what a :class:`FingerprintReader` returns: one row per record whose
acknowledged version is the one its fingerprinted rows mapped to."""

MAPPED_COLUMNS: tuple[str, ...] = (
    "source_account",
    "account_id",  # the same as source_account until external ids are resolved
    "record_id",
    "fingerprint",
    "content_hash",  # None: the record was quarantined in this run
)
"""Columns of :attr:`connector.records.MappedRecords.fingerprints`: the records this run
mapped, whose fingerprints the snapshot keeps once the run has sent them."""


class FingerprintReader(Protocol):
    """Where a run finds the fingerprints of its last runs (the snapshot, read-only).

    A reader may also offer ``copy_into(connection, table, entity, mapping_fingerprint) ->
    bool``: the same rows written straight into a table of the engine's connection (a DuckDB
    file attached read-only), without a second DuckDB instance or an Arrow copy in Python;
    False when it cannot, and the call is used instead.
    """

    def __call__(self, entity: Entity, mapping_fingerprint: str) -> pa.Table | None:
        """STORED_COLUMNS of the records fingerprinted under ``mapping_fingerprint``."""
        ...


def _pms_sync_version() -> str:
    try:
        return version("pms-sync")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "source"


def mapping_fingerprint(
    connection: duckdb.DuckDBPyConnection, mapping: Mapping, query: EntityQuery
) -> str:
    """The fingerprint of everything but the entity's own rows that shapes its records."""
    digest = hashlib.sha256()
    parts = {
        "sql": query.sql,
        "lookups": mapping.lookups,
        "contract": CONTRACT_FINGERPRINT,
        "pms_sync": _pms_sync_version(),
        # DuckDB's hash() is only stable within one release.
        "duckdb": duckdb.__version__,
        "joined": {name: table_fingerprint(connection, name) for name in query.joined_inputs},
    }
    digest.update(json.dumps(parts, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _row_hash(connection: duckdb.DuckDBPyConnection, table: str, alias: str) -> str:
    columns = [
        name
        for (name,) in connection.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position",
            [table],
        ).fetchall()
        if name not in META_COLUMNS
    ]
    return row_hash_sql(alias, columns)


def table_fingerprint(connection: duckdb.DuckDBPyConnection, input_name: str) -> str:
    """The whole content of a loaded input, whatever its row order."""
    table = table_name(input_name)
    ((found,),) = connection.execute(
        f"SELECT CAST(sum(CAST({_row_hash(connection, table, 't')} AS HUGEINT)) AS VARCHAR) "
        f"|| ':' || count(*) FROM {quote_identifier(table)} AS t"
    ).fetchall()
    return str(found)


def stored_table(entity: Entity) -> str:
    """The engine's temporary table of the fingerprints an entity's last runs stored."""
    return f"fingerprints_stored_{entity.value}"


def read_stored(
    connection: duckdb.DuckDBPyConnection,
    mapping: Mapping,
    query: EntityQuery,
    stored: FingerprintReader,
) -> str:
    """The entity's mapping fingerprint; its stored fingerprints copied into ``stored_table``.

    Runs before the engine's connection is locked down (no user SQL runs here: the mapping
    fingerprint hashes the loaded inputs as they are), since attaching the snapshot needs
    file access, which the mapping's own SQL never gets: the snapshot is detached again before.
    """
    fingerprint = mapping_fingerprint(connection, mapping, query)
    table = stored_table(query.entity)
    copy_into = getattr(stored, "copy_into", None)
    if copy_into is not None and copy_into(connection, table, query.entity, fingerprint):
        return fingerprint
    known = stored(query.entity, fingerprint)
    if known is None or not known.num_rows:
        known = pa.table(
            {
                name: pa.array([], type=pa.int64() if name == "fingerprint" else pa.string())
                for name in STORED_COLUMNS
            }
        )
    connection.register("fingerprints_stored", known)
    try:
        connection.execute(
            f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM fingerprints_stored"
        )
    finally:
        connection.unregister("fingerprints_stored")
    return fingerprint


@dataclass(frozen=True)
class FingerprintSplit:
    """What the stored fingerprints leave to map, and what they carry over."""

    mapping_fingerprint: str
    unchanged: pd.DataFrame  # RECORD_COLUMNS of the records carried over (no payload)
    mapped: pd.DataFrame  # source_account, record_id, fingerprint of the records to map
    nothing_to_map: bool  # every row belongs to a carried record: the mapping query is skipped

    def rows_to_map(self, query: EntityQuery) -> str:
        """The SQL that replaces ``ROWS_TO_MAP`` in the entity query's row filter."""
        return ROWS_LEFT_OUT_SQL.format(alias=query.row_alias)


_ARROW_TEXT = {
    pa.string(): pd.ArrowDtype(pa.large_string()),
    pa.large_string(): pd.ArrowDtype(pa.large_string()),
}

# The rows of carried-over records, left out of the mapping (a temporary table per entity).
ROWS_LEFT_OUT = "fingerprint_rows_left_out"
ROWS_LEFT_OUT_SQL = (
    f"NOT EXISTS (SELECT 1 FROM {ROWS_LEFT_OUT} AS left_out "
    f"WHERE left_out.{SOURCE_COLUMN} = {{alias}}.{SOURCE_COLUMN} "
    f"AND left_out.{ROW_COLUMN} = {{alias}}.{ROW_COLUMN})"
)


def split_by_fingerprint(
    connection: duckdb.DuckDBPyConnection, query: EntityQuery, fingerprint: str
) -> FingerprintSplit:
    """Fingerprint the entity's records and compare them with what the snapshot keeps
    (``read_stored`` copied it, under the mapping fingerprint ``fingerprint``).

    Leaves the temporary table ``ROWS_LEFT_OUT`` on ``connection``: the rows of the records
    carried over, which the entity query then leaves out. Rows whose account or id is blank
    are never left out (they are quarantined every time).
    """
    stored = stored_table(query.entity)
    connection.execute(f"CREATE OR REPLACE TEMP TABLE fingerprint_key_rows AS {query.key_rows_sql}")
    # A record's fingerprint: the sum of its rows' hashes (order-free, duplicates count) and
    # their number, hashed to one BIGINT (the top bit dropped so every backend can keep it).
    connection.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE fingerprint_records AS
        SELECT account_id AS source_account, record_id,
               CAST(hash(sum(CAST({ROW_HASH} AS HUGEINT)), count(*)) >> 1 AS BIGINT)
                   AS fingerprint
        FROM fingerprint_key_rows
        WHERE account_id IS NOT NULL AND record_id IS NOT NULL
        GROUP BY account_id, record_id
        """
    )
    connection.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE fingerprint_unchanged AS
        SELECT s.source_account, s.record_id, s.fingerprint, s.account_id, s.content_hash,
               CAST(s.checkin AS DATE) AS checkin, CAST(s.checkout AS DATE) AS checkout
        FROM fingerprint_records AS f
        JOIN {stored} AS s
          ON s.source_account = f.source_account AND s.record_id = f.record_id
         AND s.fingerprint = f.fingerprint
        """
    )
    connection.execute(f"DROP TABLE {stored}")
    # Rows of no carried record (changed, new, or without a key): none on a nightly run with
    # nothing changed, which then needs no table of the rows left out (1.2M rows at 1M).
    ((rows_to_map,),) = connection.execute(
        """
        SELECT count(*) FROM fingerprint_key_rows AS k ANTI JOIN fingerprint_unchanged AS u
          ON u.source_account = k.account_id AND u.record_id = k.record_id
        """
    ).fetchall()
    connection.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {ROWS_LEFT_OUT} AS
        SELECT k.{SOURCE_COLUMN}, k.{ROW_COLUMN} FROM fingerprint_key_rows AS k
        SEMI JOIN fingerprint_unchanged AS u
          ON u.source_account = k.account_id AND u.record_id = k.record_id
        WHERE $rows_to_map > 0
        """,
        {"rows_to_map": rows_to_map},
    )
    # The carried records, as the records frame has them: no payload, the acknowledged hash.
    unchanged_table = connection.sql(
        """
        SELECT source_account AS account_id, record_id, NULL::VARCHAR AS payload, content_hash,
               CAST(checkin AS TIMESTAMP_NS) AS checkin, CAST(checkout AS TIMESTAMP_NS) AS checkout,
               '' AS source_rows
        FROM fingerprint_unchanged
        """
    ).to_arrow_table()
    # Text stays in Arrow memory, as the validator leaves the mapped records' text.
    unchanged = unchanged_table.to_pandas(types_mapper=_ARROW_TEXT.get, date_as_object=False)
    mapped = connection.sql(
        "SELECT * FROM fingerprint_records ANTI JOIN fingerprint_unchanged "
        "USING (source_account, record_id)"
    ).df()
    connection.execute("DROP TABLE fingerprint_key_rows")
    connection.execute("DROP TABLE fingerprint_records")
    connection.execute("DROP TABLE fingerprint_unchanged")
    return FingerprintSplit(fingerprint, unchanged, mapped, rows_to_map == 0)


def mapped_fingerprints(mapped: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """MAPPED_COLUMNS: each mapped record's fingerprint with the content hash it mapped to
    (None when the record was quarantined)."""
    hashes = records.loc[:, ["account_id", "record_id", "content_hash"]].rename(
        columns={"account_id": "source_account"}
    )
    frame = mapped.merge(hashes, on=["source_account", "record_id"], how="left")
    frame["account_id"] = frame["source_account"]
    frame["content_hash"] = (
        frame["content_hash"].astype(object).where(frame["content_hash"].notna(), None)
    )
    return frame.loc[:, list(MAPPED_COLUMNS)]


def carried_records(unchanged: pd.DataFrame, window: DateWindow | None) -> pd.DataFrame:
    """RECORD_COLUMNS of the records carried over (those within ``window``): no payload, the
    acknowledged content hash and stay dates, the account as mapped (resolved later like
    every record's)."""
    if window is None or not len(unchanged):
        return unchanged
    checkin = unchanged["checkin"]
    inside = checkin.isna() | (
        (checkin >= pd.Timestamp(window.start)) & (checkin < pd.Timestamp(window.end))
    )
    return unchanged.loc[inside].reset_index(drop=True)
