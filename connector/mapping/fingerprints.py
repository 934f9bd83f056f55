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
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from connector.contract import CONTRACT_FINGERPRINT, Entity
from connector.duckdb_memory import open_duckdb
from connector.mapping.compiler import INPUT_ROW, ROW_HASH, EntityQuery, row_hash_sql
from connector.mapping.model import Mapping
from connector.mapping.scope_sql import table_name
from connector.records import FINGERPRINT_COLUMNS, RECORD_COLUMNS, DateWindow
from connector.sources.base import META_COLUMNS, ROW_COLUMN, SOURCE_COLUMN, quote_identifier

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

    A reader may also offer ``read_attached(connection, entity, mapping_fingerprint) ->
    pa.Table | None``: the same rows read by the engine's own connection (a DuckDB file
    attached read-only), without a second DuckDB instance; None when it cannot, and the call
    is used instead.
    """

    def __call__(self, entity: Entity, mapping_fingerprint: str, /) -> pa.Table | None:
        """FINGERPRINT_COLUMNS of the records fingerprinted under ``mapping_fingerprint``."""
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
    """The name the fingerprints an entity's last runs stored go by on the engine's connection
    (an Arrow table registered there until the split)."""
    return f"fingerprints_stored_{entity.value}"


def read_stored(
    connection: duckdb.DuckDBPyConnection,
    mapping: Mapping,
    query: EntityQuery,
    stored: FingerprintReader,
) -> tuple[str, int]:
    """The entity's mapping fingerprint and how many records the snapshot keeps a fingerprint
    of under it; those registered as ``stored_table``.

    Runs before the engine's connection is locked down (no user SQL runs here: the mapping
    fingerprint hashes the loaded inputs as they are), since attaching the snapshot needs
    file access, which the mapping's own SQL never gets: the snapshot is detached again before.
    The rows stay an Arrow table, smaller than a DuckDB table of them in memory and faster
    than one written compressed.
    """
    fingerprint = mapping_fingerprint(connection, mapping, query)
    read_attached = getattr(stored, "read_attached", None)
    known = read_attached(connection, query.entity, fingerprint) if read_attached else None
    if known is None:
        known = stored(query.entity, fingerprint)
    if known is None or not known.num_rows:
        known = pa.table(
            {
                name: pa.array([], type=pa.int64() if name == "fingerprint" else pa.string())
                for name in FINGERPRINT_COLUMNS
            }
        )
    connection.register(stored_table(query.entity), known.select(list(FINGERPRINT_COLUMNS)))
    return fingerprint, known.num_rows


@dataclass(frozen=True)
class FingerprintSplit:
    """What the stored fingerprints leave to map, and what they carry over."""

    mapping_fingerprint: str
    unchanged: pd.DataFrame  # RECORD_COLUMNS of the records carried over (no payload)
    mapped: pd.DataFrame  # source_account, record_id, fingerprint of the records to map
    nothing_to_map: bool  # every row belongs to a carried record: the mapping query is skipped
    # Every row left in the entity's input is one to map: it holds only them (``narrow``), or
    # no record is carried over.
    narrowed: bool = False

    def rows_to_map(self, query: EntityQuery) -> str:
        """The SQL that replaces ``ROWS_TO_MAP`` in the entity query's row filter."""
        if self.nothing_to_map:  # no table of the rows to map: every row is carried
            return "false"
        if self.narrowed:  # every row left in the input is one to map
            return "true"
        return ROWS_TO_MAP_SQL.format(alias=query.row_alias)


_ARROW_TEXT = {
    pa.string(): pd.ArrowDtype(pa.large_string()),
    pa.large_string(): pd.ArrowDtype(pa.large_string()),
}

# The rows of the records to map (changed, new, or without a key), a temporary table per
# entity: usually few (12,000 rows of 1.2M with 1 % changed), so the entity query semi-joins a
# small table rather than anti-joining the rows of every carried record.
ROWS_TO_MAP_TABLE = "fingerprint_rows_to_map"
ROWS_TO_MAP_SQL = (
    f"EXISTS (SELECT 1 FROM {ROWS_TO_MAP_TABLE} AS to_map "
    f"WHERE to_map.{SOURCE_COLUMN} = {{alias}}.{SOURCE_COLUMN} "
    f"AND to_map.{ROW_COLUMN} = {{alias}}.{ROW_COLUMN})"
)


def split_by_fingerprint(
    connection: duckdb.DuckDBPyConnection,
    query: EntityQuery,
    fingerprint: str,
    *,
    narrow: bool = False,
) -> FingerprintSplit:
    """Fingerprint the entity's records and compare them with what the snapshot keeps
    (``read_stored`` registered it, under the mapping fingerprint ``fingerprint``).

    When some row is to be mapped, leaves on ``connection`` the rows of the records not
    carried over, to which the entity query keeps: with ``narrow`` (the entity's input is
    read by its query alone), the input itself is replaced by them (``narrow_input``); else
    the temporary table ``ROWS_TO_MAP_TABLE`` holds their positions.
    Rows whose account or id is blank are always mapped (they are quarantined every time).
    """
    stored = stored_table(query.entity)
    # A record's fingerprint: the sum of its rows' hashes (order-free, duplicates count) and
    # their number, hashed to one BIGINT (the top bit dropped so every backend can keep it).
    # Rows with a blank account or id are grouped too: they count among the rows to map.
    # One join says of every record whether it is carried over, and gives a carried record
    # as the records frame has it (no payload, the acknowledged hash and stay): no table of
    # the records in DuckDB, one pass over what the snapshot keeps.
    compared = connection.sql(
        f"""
        WITH fingerprinted AS (
            SELECT account_id AS source_account, record_id,
                   CAST(hash(sum(CAST({ROW_HASH} AS HUGEINT)), count(*)) >> 1 AS BIGINT)
                       AS fingerprint,
                   count(*) AS row_count
            FROM ({query.key_rows_sql}) AS key_rows
            GROUP BY account_id, record_id
        )
        SELECT f.source_account AS account_id, f.record_id, NULL::VARCHAR AS payload,
               s.content_hash, CAST(CAST(s.checkin AS DATE) AS TIMESTAMP_NS) AS checkin,
               CAST(CAST(s.checkout AS DATE) AS TIMESTAMP_NS) AS checkout, '' AS source_rows,
               f.fingerprint, f.row_count, s.record_id IS NOT NULL AS carried
        FROM fingerprinted AS f
        LEFT JOIN {stored} AS s
          ON s.source_account = f.source_account AND s.record_id = f.record_id
         AND s.fingerprint = f.fingerprint
        """
    ).to_arrow_table()
    connection.unregister(stored)
    carried = compared["carried"]
    to_map = pc.invert(carried)
    # Rows of no carried record (changed, new, or without a key): none on a nightly run with
    # nothing changed, which then needs no table of the rows' keys.
    rows_to_map = pc.sum(pc.filter(compared["row_count"], to_map)).as_py() or 0
    records = compared.select(list(RECORD_COLUMNS))
    if rows_to_map:
        records = records.filter(carried)
    # Text stays in Arrow memory, as the validator leaves the mapped records' text.
    unchanged = records.to_pandas(types_mapper=_ARROW_TEXT.get, date_as_object=False)
    keyed = pc.and_(
        to_map, pc.and_(compared["account_id"].is_valid(), compared["record_id"].is_valid())
    )
    mapped_keys = (
        compared.filter(keyed)
        .select(["account_id", "record_id", "fingerprint"])
        .rename_columns(["source_account", "record_id", "fingerprint"])
    )
    # Nothing carried (a first run, a new mapping): every row is one to map, and a table of
    # them would only cost the entity query a join over the whole export.
    everything = rows_to_map > 0 and not pc.any(carried).as_py()
    del compared, records
    if rows_to_map and not everything:
        connection.register("fingerprint_mapped", mapped_keys)
        try:
            if narrow:
                narrow_input(connection, query)
            else:
                connection.execute(
                    f"CREATE OR REPLACE TEMP TABLE {ROWS_TO_MAP_TABLE} AS "
                    f"SELECT k.{SOURCE_COLUMN}, k.{ROW_COLUMN} {_TO_MAP.format(query.key_rows_sql)}"
                )
        finally:
            connection.unregister("fingerprint_mapped")
    mapped = mapped_keys.to_pandas()
    return FingerprintSplit(
        fingerprint,
        unchanged,
        mapped,
        rows_to_map == 0,
        narrowed=(narrow and rows_to_map > 0) or everything,
    )


# The key rows ``k`` (of the SQL formatted in) of the records to map, ``fingerprint_mapped``
# registered: a row with a blank account or id matches no record, it is always mapped. A join
# on the few keys to map, not a correlated EXISTS, which DuckDB plans by materialising every
# row of ``k`` first (1.2M rows, each with its input row when narrowing).
_TO_MAP = (
    "FROM ({}) AS k LEFT JOIN fingerprint_mapped AS m "
    "ON m.source_account = k.account_id AND m.record_id = k.record_id "
    "WHERE k.account_id IS NULL OR k.record_id IS NULL OR m.record_id IS NOT NULL"
)


def narrow_input(connection: duckdb.DuckDBPyConnection, query: EntityQuery) -> None:
    """Replace the entity's input, on ``connection``, by the rows of the records to map.

    The mapping query reads its input more than once (records of one row, of several), each
    time the whole file when it is read in place: the few rows a nightly run maps are kept
    in a table instead, in one read of the input that also tells each row's record
    (``narrow_rows_sql``), rather than one read for the rows' keys and another for the rows.
    """
    table = table_name(query.input_name)
    rows = quote_identifier(f"{table}__to_map")
    connection.execute(
        f"CREATE OR REPLACE TABLE {rows} AS SELECT {INPUT_ROW}.* "
        f"{_TO_MAP.format(query.narrow_rows_sql)}"
    )
    connection.execute(f"CREATE OR REPLACE VIEW {quote_identifier(table)} AS SELECT * FROM {rows}")


def mapped_fingerprints(mapped: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """MAPPED_COLUMNS: each mapped record's fingerprint with the content hash it mapped to
    (null when the record was quarantined)."""
    # Joined by DuckDB: a first run maps every record, and DuckDB's join on two text keys is
    # faster than pandas' merge or Arrow's hash join.
    keys = mapped.loc[:, ["source_account", "record_id", "fingerprint"]]
    with open_duckdb(":memory:") as connection:
        connection.register("mapped", keys.assign(position=np.arange(len(keys))))
        connection.register("hashes", records.loc[:, ["account_id", "record_id", "content_hash"]])
        joined = connection.sql(
            """
            SELECT m.source_account, m.source_account AS account_id, m.record_id,
                   m.fingerprint, h.content_hash
            FROM mapped AS m
            LEFT JOIN hashes AS h
              ON h.account_id = m.source_account AND h.record_id = m.record_id
            ORDER BY m.position
            """
        ).to_arrow_table()
    return joined.to_pandas(types_mapper=_ARROW_TEXT.get)


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
