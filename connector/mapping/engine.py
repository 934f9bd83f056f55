"""Running a mapping: read headers, compile and check, load inputs, run the SQL, validate.

Nothing is read before the mapping has been checked against the inputs' headers: an unknown
column, join key or SQL expression fails fast, naming the mapping file, line and member.
User SQL (``sql:`` expressions and conditions) only ever runs on DuckDB connections whose file
and network access is disabled and whose configuration is locked.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeAlias

import duckdb
import pandas as pd
import pyarrow as pa

from connector.contract import Entity
from connector.cursors import CursorValue, ReadMode, SourceRead
from connector.duckdb_memory import memory_named, open_duckdb, out_of_memory
from connector.duckdb_memory import slice_rows as run_slice_rows
from connector.errors import ExportIncompleteError, MappingError
from connector.mapping import sql_functions
from connector.mapping.checks import placeholders
from connector.mapping.compiler import (
    RECORDS_IN_SLICE,
    ROWS_TO_MAP,
    VALIDATED_BEFORE,
    Compiler,
    EntityQuery,
)
from connector.mapping.fingerprints import (
    FingerprintReader,
    FingerprintSplit,
    carried_records,
    mapped_fingerprints,
    read_stored,
    split_by_fingerprint,
)
from connector.mapping.model import Mapping
from connector.mapping.scope_sql import lookup_text, table_name
from connector.mapping.status_vocabulary import status_fix
from connector.mapping.validation import RecordValidator
from connector.records import DateWindow, MappedRecords, status_findings
from connector.secrets import MASK, is_sensitive
from connector.sources import Source, SqlSource, open_source
from connector.sources.base import (
    ROW_COLUMN,
    SOURCE_COLUMN,
    create_text_table,
    quote_identifier,
    sql_literal,
)
from connector.sources.cursors import largest_cursor
from connector.sources.files import FileState

ValidatedPayloads: TypeAlias = pa.Table | Callable[[pa.Array | None], pa.Table | None]
"""The MD5s of payloads known valid (column ``payload_md5``), or how to read them when needed,
given the ids of the records to map (None: all): a run whose every record is carried over by
fingerprint reads none, one that maps 1 % of them reads theirs."""


BATCH_ROWS = 25_000
"""Records validated per batch: bounds the query's output held in Python at once besides the
accepted records (each batch and its copy); smaller batches cost no time until they are tiny
(BENCHMARKS.md)."""


IN_MEMORY_INPUT_BYTES = 64 * 1024 * 1024
"""Inputs up to this size in all (file inputs read as they are) are loaded into an in-memory
DuckDB; larger ones, and inputs whose size is not known before reading (a database query, a
workbook), into a database file (``engine_database``)."""

_log = logging.getLogger(__name__)


def engine_database(sources: AbcMapping[str, Source], folder: Path) -> str:
    """Where the engine's DuckDB keeps the loaded inputs: ``:memory:`` for small inputs, else a
    file in ``folder``.

    Written to a file, DuckDB stores a loaded input compressed and may drop its blocks from
    memory and read them back instead of spilling them: less memory for a little more time to
    load. Below a few tens of MB the memory saved is small and the write still costs, so small
    inputs stay in memory (BENCHMARKS.md).
    """
    total = 0
    for source in sources.values():
        size = source.size_bytes()
        if size is None:
            return str(folder / "engine.duckdb")
        total += size
    return ":memory:" if total <= IN_MEMORY_INPUT_BYTES else str(folder / "engine.duckdb")


def _lock_down(connection: duckdb.DuckDBPyConnection, readable: Iterable[Path] = ()) -> None:
    paths = [str(path) for path in readable]
    if paths:
        # Inputs read in place stay readable, and no other file: the mapping's SQL reads
        # those through their views anyway.
        connection.execute(f"SET allowed_paths = {sql_literal(paths)}")
    connection.execute("SET enable_external_access = false")
    connection.execute("SET lock_configuration = true")


def _create_lookups(connection: duckdb.DuckDBPyConnection, mapping: Mapping) -> None:
    for name, values in mapping.lookups.items():
        table = f"lookup_{name}"
        connection.execute(
            f"CREATE OR REPLACE TABLE {quote_identifier(table)} (key VARCHAR, value VARCHAR)"
        )
        rows = [(str(key), lookup_text(value)) for key, value in values.items()]
        if rows:
            connection.executemany(f"INSERT INTO {quote_identifier(table)} VALUES (?, ?)", rows)


@dataclass
class PreparedMapping:
    """A mapping checked against its inputs' headers, with its SQL ready to run."""

    mapping: Mapping
    sources: dict[str, Source]
    headers: dict[str, list[str]]
    queries: dict[Entity, EntityQuery]

    @property
    def inputs_used(self) -> list[str]:
        return sorted(self.sources)


def prepare(mapping: Mapping, entities: Iterable[Entity] | None = None) -> PreparedMapping:
    """Read every input's header, compile the mapping and check its SQL on zero rows."""
    to_fill_in = placeholders(mapping)
    if to_fill_in:
        # A file `pms-sync init` wrote: nothing is read or mapped before every placeholder is
        # replaced, so a guessed value can never reach the service.
        raise MappingError.listing(to_fill_in, "members to fill in")
    chosen = [Entity(entity) for entity in entities] if entities is not None else None
    selected = [entity for entity in mapping.entities.keys() if chosen is None or entity in chosen]  # noqa: SIM118
    sources = {
        name: open_source(name, spec, mapping.base_dir) for name, spec in mapping.inputs.items()
    }
    for name, source in sources.items():
        if isinstance(source, SqlSource) and source.cursor is not None:
            source.cursor_key = mapping.cursor_key(name)
    needed = _inputs_needed(mapping, selected)
    headers = {name: sources[name].columns() for name in needed}
    compiler = Compiler(mapping, headers)
    queries = {entity: compiler.entity_query(entity) for entity in selected}
    compiler.check_columns()

    # User SQL and the compiled queries are bound on empty tables, on a locked connection.
    with duckdb.connect(":memory:") as check:
        sql_functions.install(check)
        _create_lookups(check, mapping)
        for name, columns in headers.items():
            create_text_table(check, table_name(name), columns)
        _lock_down(check)
        for item in compiler.user_sql:
            try:
                statements = duckdb.extract_statements(f"SELECT ({item.sql})")
            except duckdb.Error as error:
                raise compiler.error(
                    f"invalid SQL expression: {_first_line(error)}", item.member
                ) from None
            if len(statements) != 1:
                raise compiler.error("an SQL expression must be one expression", item.member)
        for query in queries.values():
            try:
                check.execute(query.sql).fetchall()
            except duckdb.Error as error:
                raise _sql_error(
                    check, mapping, query, error, "the mapping's SQL does not run"
                ) from None
    return PreparedMapping(mapping, {name: sources[name] for name in needed}, headers, queries)


def _inputs_needed(mapping: Mapping, entities: list[Entity]) -> list[str]:
    names: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("input"), str) and value["input"] in mapping.inputs:
                names.add(value["input"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for entity in entities:
        walk(mapping.entities[entity].model_dump(by_alias=True))
    return sorted(names)


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0]


def _sql_error(
    connection: duckdb.DuckDBPyConnection,
    mapping: Mapping,
    query: EntityQuery,
    error: duckdb.Error,
    what: str,
    *,
    on_data: bool = False,
) -> MappingError:
    """The error of an entity query that failed, naming the ``sql:`` members that fail.

    Only user SQL can fail to bind or fail on a value: each ``sql:`` member of the entity is
    run alone over its own rows (on the data when the query failed on the data), and every one
    that fails is named with its line. Only when none fails alone is the entity named.

    DuckDB quotes the value a conversion failed on: kept for an ordinary member (it tells the
    operator what to TRY_CAST), masked for a door, Wi-Fi or building code or contact data, and
    for the entity as a whole, where the value may come from any column.
    """
    failing = []
    ordered = sorted(query.user_sql, key=lambda item: mapping.line_of(item.member) or 0)
    for item in ordered:
        try:
            # max() forces every row's value to be computed; nothing is fetched but one row.
            connection.execute(
                f"SELECT max(length(CAST(({item.sql}) AS VARCHAR))) FROM {item.from_sql}"
            ).fetchall()
        except duckdb.Error as own_error:
            reason = _first_line(own_error)
            if on_data and any(is_sensitive(str(part)) for part in item.member):
                reason = _masked_literals(reason)
            failing.append(_member_error(mapping, f"{what}: {reason}", item.member))
    if failing:
        return MappingError.listing(failing, "sql: members fail")
    reason = _masked_literals(_first_line(error)) if on_data else _first_line(error)
    return _member_error(mapping, f"{what}: {reason}", ("entities", query.entity.value))


_QUOTED_LITERAL = re.compile(r"'(?:[^']|'')*'")


def _masked_literals(message: str) -> str:
    """A DuckDB message with every quoted value masked ('4711' → '***')."""
    return _QUOTED_LITERAL.sub(f"'{MASK}'", message)


def _failed_on_data(
    connection: duckdb.DuckDBPyConnection,
    mapping: Mapping,
    query: EntityQuery,
    error: duckdb.Error,
) -> MappingError:
    """Only user SQL can fail on data (a CAST of an unexpected value): name it."""
    return _sql_error(
        connection,
        mapping,
        query,
        error,
        "the mapping's SQL failed on the data (use TRY_CAST in sql: expressions)",
        on_data=True,
    )


def _member_error(mapping: Mapping, message: str, member: tuple[str | int, ...]) -> MappingError:
    return MappingError(
        message,
        file=str(mapping.source_file) if mapping.source_file else None,
        line=mapping.line_of(member),
        member=".".join(str(part) for part in member),
    )


def map_records(
    mapping: Mapping,
    *,
    entities: Iterable[Entity] | None = None,
    window: DateWindow | None = None,
    since: AbcMapping[str, Any] | None = None,
    validated: ValidatedPayloads | None = None,
    fingerprints: FingerprintReader | None = None,
    accounts: Collection[str] | None = None,
    slice_rows: int | None = None,
) -> dict[Entity, MappedRecords]:
    """Map the inputs of ``mapping`` to validated records and quarantine, per entity.

    ``window`` keeps reservations whose earliest check-in lies in [start, end) (records whose
    check-in could not be read stay, so their problems are reported). ``since`` gives, per SQL
    input name, the last cursor value already synced: only newer rows are read. ``validated``
    holds the MD5s (column ``payload_md5``) of canonical payloads already known valid under
    the current contract (``connector.snapshot.validated_payloads``), or a function that reads
    them, called only when some record is mapped, with the ids of the records to map (None:
    every record of the export): records with one of them are not validated again.
    ``fingerprints`` reads the source fingerprints of earlier runs: records whose rows are
    unchanged are carried over unmapped (``connector.mapping.fingerprints``).
    ``accounts`` (as the export names them) maps only the rows of these accounts' records
    where the entity allows it (``account_filter`` of each batch says whether it did); the
    caller still keeps only their records (``MappedRecords.of_accounts``).
    ``slice_rows``: rows of an entity mapped at once, from the run's settings (None: the
    run's setting as the environment gives it, ``connector.duckdb_memory.slice_rows``).
    """
    prepared = prepare(mapping, entities)
    return run_prepared(
        prepared,
        window=window,
        since=since,
        validated=validated,
        fingerprints=fingerprints,
        accounts=accounts,
        slice_rows=slice_rows,
    )


def run_prepared(
    prepared: PreparedMapping,
    *,
    window: DateWindow | None = None,
    since: AbcMapping[str, Any] | None = None,
    validated: ValidatedPayloads | None = None,
    fingerprints: FingerprintReader | None = None,
    accounts: Collection[str] | None = None,
    slice_rows: int | None = None,
) -> dict[Entity, MappedRecords]:
    since = dict(since or {})
    unknown = set(since) - set(prepared.sources)
    if unknown:
        raise MappingError(f"since names inputs the mapping does not use: {sorted(unknown)}")
    scope = frozenset(str(account) for account in accounts) if accounts is not None else None
    per_slice = slice_rows if slice_rows is not None else run_slice_rows()
    batches = _mapped(prepared, window, since, validated, fingerprints, scope, per_slice)
    reservations = batches.get(Entity.RESERVATION)
    if reservations is not None:
        reservations.status_fix = status_fix(
            prepared.mapping, status_findings(reservations.quarantine)
        )
    return batches


def _mapped(
    prepared: PreparedMapping,
    window: DateWindow | None,
    since: dict[str, Any],
    validated: ValidatedPayloads | None,
    fingerprints: FingerprintReader | None,
    accounts: frozenset[str] | None,
    slice_rows: int,
) -> dict[Entity, MappedRecords]:
    mapped = partial(_run, prepared, window, since, validated, fingerprints, accounts, slice_rows)
    if fingerprints is not None:
        try:
            return mapped(read_in_place=True)
        except _InPlaceReadFailed:
            pass  # loaded instead, an input's problem is found and named as on every run
    return mapped(read_in_place=False)


class _InPlaceReadFailed(Exception):
    """A query over an input read in place failed: the run starts again, loading it."""


@dataclass(frozen=True)
class _InPlace:
    """An input read where it is, through a view, and its file as the run found it."""

    name: str
    path: Path
    found: FileState

    def check_unchanged(self) -> None:
        try:
            same = FileState.of(self.path) == self.found
        except OSError:
            same = False
        if not same:
            # The fingerprints, the rows to map and their documents came from different
            # reads of the file: kept, they could pair a record's rows with another version.
            raise ExportIncompleteError(
                f"{self.path.name} changed while this run was reading it: nothing of this "
                "run was used; run again once the export is written",
                source=self.name,
            )


def _may_read_in_place(prepared: PreparedMapping, since: dict[str, Any]) -> set[str]:
    """The inputs a fingerprinted run may read where they are instead of loading them: the
    own input of fingerprinted entities only (a joined input is read whole by every query that
    joins it, and its content is hashed into the mapping fingerprint).

    A run whose records are mostly carried over by fingerprint reads each row once, to hash
    it: loading the export into the engine's file first would cost more than the rest of such
    a run.
    """
    joined = {name for query in prepared.queries.values() for name in query.joined_inputs}
    own = {query.input_name for query in prepared.queries.values() if query.fingerprintable}
    # A database is never read in place: loaded with the others, its read is recorded.
    tables = {name for name, source in prepared.sources.items() if isinstance(source, SqlSource)}
    return own - joined - set(since) - tables


def _read_in_place(
    connection: duckdb.DuckDBPyConnection, prepared: PreparedMapping, names: Iterable[str]
) -> dict[str, _InPlace]:
    """Make each of ``names`` a view over its file; those DuckDB cannot read so (or whose
    reader refuses the file on sight, say mixed line endings) are loaded instead."""
    chosen: dict[str, _InPlace] = {}
    for name in sorted(names):
        source, table = prepared.sources[name], table_name(name)
        try:
            path = source.scan_in_place(connection, table)
        except duckdb.Error:
            connection.execute(f"DROP VIEW IF EXISTS {quote_identifier(table)}")
            path = None
        if path is None:
            source.load_into(connection, table)
        else:
            chosen[name] = _InPlace(name, path, FileState.of(path))
    return chosen


def _run(
    prepared: PreparedMapping,
    window: DateWindow | None,
    since: dict[str, Any],
    validated: ValidatedPayloads | None,
    fingerprints: FingerprintReader | None,
    accounts: frozenset[str] | None,
    slice_rows: int,
    *,
    read_in_place: bool,
) -> dict[Entity, MappedRecords]:
    finishing: list[_Mapped] = []
    # Spill files, and the engine's database when it is a file, go to a private temporary
    # folder (0700, removed with the run), not into the working directory.
    with (
        tempfile.TemporaryDirectory(prefix="pms-sync-duckdb-") as spill,
        open_duckdb(
            engine_database(prepared.sources, Path(spill)), temp_directory=spill
        ) as connection,
    ):
        # Nothing reads the records in the order the queries produce them (the quarantine is
        # sorted, the plan orders its changes): DuckDB need not buffer results to keep it.
        connection.execute("SET preserve_insertion_order = false")
        with memory_named("setting up the mapping engine (reference tables, lookups)"):
            sql_functions.install(connection)
            _create_lookups(connection, prepared.mapping)
        if accounts is not None:
            connection.register(RUN_ACCOUNTS, pa.table({"account": sorted(accounts)}))
        may_read_in_place = _may_read_in_place(prepared, since) if read_in_place else set()
        in_place: dict[str, _InPlace] = {}

        def failed(query: EntityQuery, error: duckdb.Error) -> Exception:
            if isinstance(error, duckdb.OutOfMemoryException):
                # Not the data's fault, and loading the input instead would need more memory.
                return out_of_memory(f"mapping the {query.entity.value} entity")
            if in_place:
                return _InPlaceReadFailed()
            return _failed_on_data(connection, prepared.mapping, query, error)

        reads: dict[str, SourceRead] = {}
        for name, source in prepared.sources.items():
            if name not in may_read_in_place:
                with memory_named(_reading(prepared, name)):
                    rows = source.load_into(connection, table_name(name), since=since.get(name))
                if isinstance(source, SqlSource) and source.cursor is not None:
                    reads[name] = _read_of(connection, name, source, rows, since.get(name))
        # Stored fingerprints are read before the lock-down: a DuckDB snapshot is attached
        # read-only to this connection (one DuckDB instance, one memory limit), then detached.
        # An entity's own input is not read for it, only its joined inputs.
        fingerprinted: dict[Entity, str] = {}
        mapped_whole: set[str] = set()  # inputs of entities whose every record is mapped
        for entity, query in prepared.queries.items():
            if fingerprints is None or not query.fingerprintable:
                mapped_whole.add(query.input_name)
                continue
            try:
                fingerprinted[entity], stored = read_stored(
                    connection, prepared.mapping, query, fingerprints
                )
            except duckdb.Error as error:
                raise failed(query, error) from None
            if not stored:
                mapped_whole.add(query.input_name)
        # Such an input is loaded once rather than read again by each pass of the mapping query.
        for name in may_read_in_place & mapped_whole:
            with memory_named(_reading(prepared, name)):
                prepared.sources[name].load_into(connection, table_name(name))
        in_place = _read_in_place(connection, prepared, may_read_in_place - mapped_whole)
        _lock_down(connection, [item.path for item in in_place.values()])
        # Loaded when some record is mapped at all: for the records a fingerprinted entity
        # maps, or once for every record when an entity maps all of them.
        known: str | None = None
        known_for_all = False
        readers = Counter(query.input_name for query in prepared.queries.values())
        for entity, query in prepared.queries.items():
            sql = query.sql
            split: FingerprintSplit | None = None
            elsewhere = None
            pushed = accounts is not None and account_filter_allowed(query)
            if accounts is not None:
                _log.debug(
                    "%s: account filter %s",
                    entity.value,
                    "pushed into the mapping query" if pushed else "applied after mapping",
                )
            # The fingerprints and rows to map of the run's accounts only, when pushed.
            keyed = scoped_to_accounts(query) if pushed else query
            try:
                if window is not None and entity == Entity.RESERVATION:
                    elsewhere = _keys_outside(connection, query, window)
                if entity in fingerprinted:
                    # An input read in place that no other entity reads: only its rows to map.
                    split = split_by_fingerprint(
                        connection,
                        keyed,
                        fingerprinted[entity],
                        narrow=query.input_name in in_place and readers[query.input_name] == 1,
                    )
                    sql = sql.replace(ROWS_TO_MAP, split.rows_to_map(query))
                elif pushed:
                    sql = sql.replace(ROWS_TO_MAP, _account_rows(connection, keyed))
            except duckdb.Error as error:
                raise failed(query, error) from None
            if not known_for_all and (split is None or len(split.mapped)):
                # The split's keys are never blank (blank ones are mapped and quarantined).
                ids = None if split is None else pa.array(split.mapped["record_id"])
                with memory_named(f"mapping the {entity.value} entity"):
                    known = _load_validated(connection, validated, ids)
                known_for_all = ids is None
            sql = sql.replace(VALIDATED_BEFORE, known or VALIDATED_BEFORE)
            parameters: list[Any] = []
            if window is not None and entity == Entity.RESERVATION:
                sql = (
                    f"SELECT * FROM ({sql}) AS mapped WHERE checkin IS NULL "
                    "OR (checkin >= ? AND checkin < ?)"
                )
                parameters = [window.start, window.end]
            validator = RecordValidator(entity, query.volatile, hash_in_python=query.hash_in_python)
            try:
                if split is None or not split.nothing_to_map:
                    rows = _rows_to_map(connection, query, split, pushed)
                    for sliced in sliced_queries(connection, sql, query, rows, slice_rows):
                        _validate_batches(connection, sliced, parameters, validator)
                if query.unitless_sql:
                    validator.add_unitless(connection.sql(query.unitless_sql).to_arrow_table())
            except duckdb.Error as error:
                raise failed(query, error) from None
            filtered = None if accounts is None else ("pushed" if pushed else "after_mapping")
            own = (reads[query.input_name],) if query.input_name in reads else ()
            finishing.append(_Mapped(entity, validator, split, elsewhere, filtered, own))
        for item in in_place.values():
            item.check_unchanged()
    # The records are put together once the engine's database is closed: its memory (the
    # loaded inputs, the query's hash tables) is given back before the documents, kept
    # compressed while the queries ran, are expanded.
    return {mapped.entity: mapped.result(window) for mapped in finishing}


MAX_SLICES = 256
"""Slices of one entity at most, however small ``slice_rows`` is set (a test's tiny slices)."""


def slice_count(rows: int, slice_rows: int) -> int:
    """How many slices an entity of ``rows`` rows is mapped in, ``slice_rows`` at a time."""
    return max(1, min(MAX_SLICES, -(-rows // slice_rows)))


def sliced_queries(
    connection: duckdb.DuckDBPyConnection, sql: str, query: EntityQuery, rows: int, slice_rows: int
) -> list[str]:
    """The entity query ``sql`` once per slice of its records, so DuckDB groups a record's
    rows and holds its documents for one slice at a time (the list aggregates it groups with
    cannot spill). A slice is a hash partition of the record key, read once from the key
    columns alone: each record is whole in exactly one slice. An entity whose documents read
    other rows than their own is mapped whole."""
    slices = slice_count(rows, slice_rows)
    if slices == 1 or not account_filter_allowed(query):
        return [sql]
    connection.execute(
        f"CREATE OR REPLACE TEMP TABLE {SLICES_TABLE} AS "
        f"SELECT {SOURCE_COLUMN}, {ROW_COLUMN}, "
        f"coalesce(hash(account_id, record_id) % {slices}, 0) AS slice "
        f"FROM ({query.key_rows_sql}) AS k"
    )
    return [
        sql.replace(
            RECORDS_IN_SLICE,
            f"EXISTS (SELECT 1 FROM {SLICES_TABLE} AS s "
            f"WHERE s.{SOURCE_COLUMN} = {query.row_alias}.{SOURCE_COLUMN} "
            f"AND s.{ROW_COLUMN} = {query.row_alias}.{ROW_COLUMN} AND s.slice = {index})",
        )
        for index in range(slices)
    ]


def _rows_to_map(
    connection: duckdb.DuckDBPyConnection,
    query: EntityQuery,
    split: FingerprintSplit | None,
    pushed: bool,
) -> int:
    """About how many rows the entity's query maps: what its slices are counted from."""
    if split is not None:
        return len(split.mapped)
    table = ACCOUNT_ROWS_TABLE if pushed else quote_identifier(table_name(query.input_name))
    ((found,),) = connection.execute(f"SELECT count(*) FROM {table}").fetchall()
    return int(found)


# Each row's slice (by its record's key) while an entity is mapped in slices.
SLICES_TABLE = "pms_sync_slices"

# The accounts of a run of some accounts, registered on the engine's connection.
RUN_ACCOUNTS = "pms_sync_run_accounts"
ACCOUNT_ROWS_TABLE = "pms_sync_account_rows"


def account_filter_allowed(query: EntityQuery) -> bool:
    """Whether the rows of some accounts' records can be mapped alone: a record's document
    depends on its own rows only (the condition of source fingerprints), so leaving other
    accounts' rows out changes none of them. The account itself may be any expression, a
    lookup or a join's column: each row's account is computed before mapping, as the keys
    of the fingerprints are."""
    return query.fingerprintable and bool(query.key_rows_sql)


def scoped_to_accounts(query: EntityQuery) -> EntityQuery:
    """``query`` whose key rows are those of the run's accounts only (``RUN_ACCOUNTS``)."""

    def scoped(sql: str) -> str:
        return (
            f"SELECT * FROM ({sql}) AS of_accounts "
            f"WHERE account_id IN (SELECT account FROM {RUN_ACCOUNTS})"
        )

    return replace(
        query,
        key_rows_sql=scoped(query.key_rows_sql),
        narrow_rows_sql=scoped(query.narrow_rows_sql) if query.narrow_rows_sql else "",
    )


def _account_rows(connection: duckdb.DuckDBPyConnection, keyed: EntityQuery) -> str:
    """Keep the positions of the run's accounts' rows in a temporary table (one read of the
    keys, no document built); return the SQL that keeps the entity query to them."""
    connection.execute(
        f"CREATE OR REPLACE TEMP TABLE {ACCOUNT_ROWS_TABLE} AS "
        f"SELECT {SOURCE_COLUMN}, {ROW_COLUMN} FROM ({keyed.key_rows_sql}) AS k"
    )
    return (
        f"EXISTS (SELECT 1 FROM {ACCOUNT_ROWS_TABLE} AS a "
        f"WHERE a.{SOURCE_COLUMN} = {keyed.row_alias}.{SOURCE_COLUMN} "
        f"AND a.{ROW_COLUMN} = {keyed.row_alias}.{ROW_COLUMN})"
    )


def _reading(prepared: PreparedMapping, name: str) -> str:
    """What loading an input is, as an out-of-memory error names it: its columns count, a
    very wide file costs DuckDB memory per column whatever its rows."""
    return f"reading {prepared.sources[name].describe()} ({len(prepared.headers[name]):,} columns)"


@dataclass
class _Mapped:
    """What an entity's query left to put together into its records."""

    entity: Entity
    validator: RecordValidator
    split: FingerprintSplit | None
    elsewhere: pd.DataFrame | None
    account_filter: str | None = None
    reads: tuple[SourceRead, ...] = ()

    def result(self, window: DateWindow | None) -> MappedRecords:
        result = self.validator.result()
        result.account_filter = self.account_filter
        result.reads = self.reads
        if self.elsewhere is not None:
            result.present_elsewhere = self.elsewhere
        split = self.split
        if split is not None:
            result.fingerprints = mapped_fingerprints(split.mapped, result.records)
            result.mapping_fingerprint = split.mapping_fingerprint
            carried = carried_records(split.unchanged, window)
            result.carried = len(carried)
            if len(carried):
                result.records = _with_carried(result.records, carried)
        return result


def _read_of(
    connection: duckdb.DuckDBPyConnection,
    name: str,
    source: SqlSource,
    rows: int,
    since: Any,
) -> SourceRead:
    """How ``source`` was read, with the largest cursor value among the rows loaded."""
    assert source.cursor is not None
    return SourceRead(
        input=name,
        mode=ReadMode.FULL if since is None else ReadMode.INCREMENTAL,
        rows=rows,
        since=since if isinstance(since, CursorValue) else None,
        upto=largest_cursor(
            connection, table_name(name), source.cursor, text=source.cursor_is_text
        ),
        key=source.cursor_key,
    )


def _with_carried(records: pd.DataFrame, carried: pd.DataFrame) -> pd.DataFrame:
    """The mapped records followed by the carried ones, text left in Arrow memory.

    pandas gives a column of an empty frame a say in the concatenated dtype: the mapped
    records' empty object columns would turn every carried key and hash into a Python string.
    """
    if not len(records):
        return carried
    return pd.concat([records.astype(carried.dtypes.to_dict()), carried], ignore_index=True)


def _keys_outside(
    connection: duckdb.DuckDBPyConnection, query: EntityQuery, window: DateWindow
) -> pd.DataFrame:
    """Keys of the export's records whose check-in lies outside ``window``.

    The window limits what a run maps and sends, not what the export holds: a stay that moved
    to another month, or an invalid row there, is still in the export and must not read as
    gone from it (the window's reconciliation would cancel it).
    """
    return connection.execute(
        f"SELECT account_id, record_id FROM ({query.keys_sql}) AS keys "
        "WHERE checkin IS NOT NULL AND NOT (checkin >= ? AND checkin < ?)",
        [window.start, window.end],
    ).df()


def _load_validated(
    connection: duckdb.DuckDBPyConnection,
    validated: ValidatedPayloads | None,
    record_ids: pa.Array | None,
) -> str:
    """Load the validated payloads' MD5s (of the records ``record_ids`` when the function that
    reads them can narrow them); return the SQL that tells a payload is one of them."""
    if callable(validated):
        validated = validated(record_ids)
    if validated is None or not validated.num_rows:
        return VALIDATED_BEFORE
    connection.register("validated_arrow", validated)
    try:
        connection.execute(
            "CREATE OR REPLACE TABLE validated_payloads AS "
            "SELECT DISTINCT payload_md5 FROM validated_arrow"
        )
    finally:
        connection.unregister("validated_arrow")
    return "(md5(payload) IN (SELECT payload_md5 FROM validated_payloads))"


def _validate_batches(
    connection: duckdb.DuckDBPyConnection,
    sql: str,
    parameters: list[Any],
    validator: RecordValidator,
) -> None:
    reader = connection.sql(sql, params=parameters or None).to_arrow_reader(BATCH_ROWS)
    try:
        for batch in reader:
            validator.add(batch)
    except OSError as error:
        # The reader raises what DuckDB raised as Arrow's error: told apart by its message.
        if str(error).startswith(_OUT_OF_MEMORY):
            raise duckdb.OutOfMemoryException(str(error)) from None
        raise


_OUT_OF_MEMORY = "Out of Memory Error"
