"""Tables and queries of any database SQLAlchemy reaches, streamed in chunks.

PostgreSQL, MySQL/MariaDB and SQLite are read as Arrow (``arrow_sql``) when the read has no
bind parameters; every other database, a read with bind parameters, and a column the Arrow
reader cannot render exactly go through SQLAlchemy. Both give every value the same text.

The URL comes from the mapping (normally ``${PMS_DB_URL}``); it never appears in an error with
its password, and the password is registered as a secret (masked in every sink). An optional
cursor column makes a read incremental: the caller passes the largest value the last read saw
as ``since``, and every row of a key (``cursor_key``) that has a row with a cursor at least
``since`` is read, bound as a parameter (``connector.sources.cursors``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from connector.cursors import CursorValue
from connector.errors import SourceError
from connector.secrets import mask_text, register_secret
from connector.sources.arrow_sql import Unsupported, arrow_driver, read_arrow
from connector.sources.base import (
    ROW_COLUMN,
    SOURCE_COLUMN,
    Source,
    append_frames,
    create_text_table,
    quote_identifier,
    sql_literal,
    text_column_sql,
    text_frame,
)

_log = logging.getLogger(__name__)

SqlReader = Literal["auto", "sqlalchemy"]

KEYS_PER_READ = 10_000
"""Changed keys bound in one query where they are read first (MySQL, MariaDB)."""


def safe_url(url: str) -> str:
    """The URL with its password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


class SqlSource(Source):
    def __init__(
        self,
        name: str,
        url: str,
        *,
        table: str | None = None,
        query: str | None = None,
        params: dict[str, Any] | None = None,
        cursor: str | None = None,
        cursor_key: str | None = None,
        null_values: list[str] | tuple[str, ...] = ("",),
        chunk_size: int = 50_000,
        base_dir: Path | None = None,
        reader: SqlReader = "auto",
    ) -> None:
        super().__init__(name)
        if (table is None) == (query is None):
            raise SourceError("an sql input needs exactly one of table or query", source=name)
        self.url = _anchor_sqlite_path(url, base_dir) if base_dir else url
        _register_password(url)
        self.table = table
        self.query = query
        self.params = dict(params or {})
        self.cursor = cursor
        self.cursor_key = cursor_key
        # A cursor column of text (dates kept as text) is compared with a text: the
        # database compares values of one type only (columns() finds out).
        self.cursor_is_text = False
        self.null_values = set(null_values)
        self.chunk_size = chunk_size
        self.reader: SqlReader = reader
        self._engine: Engine | None = None

    def describe(self) -> str:
        return self.table or self.name

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            try:
                self._engine = sa.create_engine(self.url)
            except (ArgumentError, NoSuchModuleError) as error:
                raise SourceError(
                    f"cannot use database URL {safe_url(self.url)}: {error}", source=self.name
                ) from None
        return self._engine

    def _base_sql(self) -> str:
        if self.table is not None:
            preparer = self.engine.dialect.identifier_preparer
            return "SELECT * FROM " + ".".join(
                preparer.quote(part) for part in self.table.split(".")
            )
        return self.query.strip().rstrip(";")  # type: ignore[union-attr]

    def _select(self, since: Any, *, keys_only: bool = False) -> tuple[str, dict[str, Any]]:
        """The read of the rows (since a cursor value); ``keys_only``: the keys with a row
        changed since it."""
        sql = f"SELECT * FROM ({self._base_sql()}) AS pms_sync_input"
        params = dict(self.params)
        if since is not None:
            if self.cursor is None:
                raise SourceError("a since value needs a cursor column", source=self.name)
            quote = self.engine.dialect.identifier_preparer.quote
            column = quote(self.cursor)
            # >=: rows written in the same instant as the last read's largest value are read
            # again rather than missed; unchanged, they come to nothing in the diff.
            changed = f"pms_sync_changed.{column} >= :pms_sync_since"
            if keys_only:
                key = quote(self.cursor_key or self.cursor)
                sql = (
                    f"SELECT DISTINCT pms_sync_changed.{key} FROM ({self._base_sql()}) "
                    f"AS pms_sync_changed WHERE {changed} AND pms_sync_changed.{key} IS NOT NULL"
                )
            elif self.cursor_key is None:
                sql += f" WHERE pms_sync_input.{column} >= :pms_sync_since"
            else:
                # Every row of a key with a changed row: a record is built from all its rows.
                key = quote(self.cursor_key)
                sql += (
                    f" WHERE pms_sync_input.{key} IN (SELECT pms_sync_changed.{key} FROM "
                    f"({self._base_sql()}) AS pms_sync_changed WHERE {changed})"
                )
            if isinstance(since, CursorValue):
                since = since.bound(self.engine.url.get_backend_name(), text=self.cursor_is_text)
            params["pms_sync_since"] = since
        return sql, params

    def columns(self) -> list[str]:
        sql, params = self._select(None)
        try:
            with self.engine.connect() as connection:
                result = connection.execute(sa.text(f"{sql} WHERE 1 = 0"), params)
                names = list(result.keys())
                description = result.cursor.description if result.cursor is not None else None
        except SQLAlchemyError as error:
            raise SourceError(
                f"cannot query {safe_url(self.url)}: {_first_line(error)}", source=self.name
            ) from None
        for column in (self.cursor, self.cursor_key):
            if column is not None and column not in names:
                raise SourceError(
                    f"cursor column {column!r} is not among the columns {names}",
                    source=self.name,
                    field=column,
                )
        if self.cursor is not None and description:
            type_code = description[names.index(self.cursor)][1]
            self.cursor_is_text = _text_type(self.engine.url.get_backend_name(), type_code)
        return names

    def _frames(self, columns: list[str], since: Any) -> Iterator[tuple[str, pd.DataFrame]]:
        label = self.describe()
        try:
            with self.engine.connect() as connection:
                for statement, params in self._statements(connection, since):
                    result = connection.execution_options(stream_results=True).execute(
                        statement, params
                    )
                    while rows := result.fetchmany(self.chunk_size):
                        yield label, text_frame(rows, columns, self.null_values)
        except SQLAlchemyError as error:
            raise SourceError(
                f"cannot read from {safe_url(self.url)}: {_first_line(error)}", source=self.name
            ) from None

    def _statements(
        self, connection: sa.Connection, since: Any
    ) -> Iterator[tuple[sa.TextClause, dict[str, Any]]]:
        """The reads of the rows: one query, or where the changed keys are read first, one
        per ``KEYS_PER_READ`` of them."""
        sql, params = self._select(since)
        if since is None or self.cursor_key is None or not self._keys_first():
            yield sa.text(sql), params
            return
        quote = self.engine.dialect.identifier_preparer.quote
        key = quote(self.cursor_key)
        changed_sql, changed_params = self._select(since, keys_only=True)
        keys = [row[0] for row in connection.execute(sa.text(changed_sql), changed_params)]
        statement = sa.text(
            f"SELECT * FROM ({self._base_sql()}) AS pms_sync_input "
            f"WHERE pms_sync_input.{key} IN :pms_sync_keys"
        ).bindparams(sa.bindparam("pms_sync_keys", expanding=True))
        for start in range(0, len(keys), KEYS_PER_READ):
            yield statement, {**self.params, "pms_sync_keys": keys[start : start + KEYS_PER_READ]}

    def _keys_first(self) -> bool:
        # MySQL and MariaDB run `key IN (SELECT key …)` over TEXT columns as a nested loop
        # (they materialise no TEXT): the changed keys are read first, then their rows.
        return self.engine.url.get_backend_name() in ("mysql", "mariadb")

    def load_into(
        self, connection: duckdb.DuckDBPyConnection, table: str, since: Any = None
    ) -> int:
        columns = self.columns()
        if self.arrow_read(since):
            try:
                return self._load_arrow(connection, table, columns)
            except Unsupported as reason:
                # Read again from the start, the table made anew: slower, never different.
                _log.info("input %s read through SQLAlchemy: %s", self.name, mask_text(str(reason)))
        return append_frames(connection, table, columns, self._frames(columns, since))

    def arrow_read(self, since: Any = None) -> bool:
        """Whether a read of this input (with ``since``) starts on the Arrow reader: not when
        the mapping says ``reader: sqlalchemy``, the database has no Arrow reader here, or the
        read binds parameters (the Arrow drivers type them unlike SQLAlchemy's)."""
        if self.reader != "auto" or self.params or since is not None:
            return False
        return arrow_driver(self.engine.url) is not None

    def _load_arrow(
        self, connection: duckdb.DuckDBPyConnection, table: str, columns: list[str]
    ) -> int:
        """One INSERT over the stream of the Arrow reader's batches: DuckDB pulls them and
        makes blanks and null_values NULL on all its threads, and a failed read leaves the
        table empty, so the SQLAlchemy reader can start over."""
        sql, _ = self._select(None)
        quote = self.engine.dialect.identifier_preparer.quote
        create_text_table(connection, table, columns)
        failure: list[BaseException] = []
        try:
            with read_arrow(self.engine.url, sql, quote, columns, self.chunk_size) as batches:
                stream = _numbered(batches, len(columns), failure)
                connection.register("_pms_sync_arrow_rows", stream)
                try:
                    ((total,),) = connection.execute(
                        _insert_sql(table, len(columns), self.describe(), self.null_values)
                    ).fetchall()
                except duckdb.Error:
                    if not failure:
                        raise
                finally:
                    connection.unregister("_pms_sync_arrow_rows")
            if failure:
                raise failure[0]
        except (Unsupported, duckdb.Error):
            raise
        except Exception as error:
            # The SQLAlchemy reader tries, and reports its own error if it fails too.
            raise Unsupported(_first_text(error)) from None
        return int(total)

    def max_cursor(self, since: Any = None) -> Any:
        """The largest cursor value now in the source: what the caller passes as since next time."""
        if self.cursor is None:
            raise SourceError("this input has no cursor column", source=self.name)
        sql, params = self._select(since)
        column = self.engine.dialect.identifier_preparer.quote(self.cursor)
        with self.engine.connect() as connection:
            return connection.execute(
                sa.text(f"SELECT max({column}) FROM ({sql}) AS q"), params
            ).scalar()


# The DB-API type codes of text columns: PostgreSQL's type OIDs (text, varchar, bpchar,
# char, name), MySQL's field types (VARCHAR, VAR_STRING, STRING, and BLOB for TEXT).
_TEXT_TYPES = {"postgresql": {25, 1043, 1042, 18, 19}, "mysql": {15, 253, 254, 252}}
_TEXT_TYPES["mariadb"] = _TEXT_TYPES["mysql"]


def _text_type(backend: str, type_code: object) -> bool:
    """Whether a column of ``backend`` whose DB-API type code is ``type_code`` holds text."""
    if isinstance(type_code, str):
        return type_code.lower() in ("str", "text", "varchar", "string")
    return type_code in _TEXT_TYPES.get(backend, set())


def _register_password(url: str) -> None:
    """The URL's password is masked in every sink, wherever a driver might echo it."""
    try:
        password = make_url(url).password
    except ArgumentError:
        return
    if password:
        register_secret(str(password))


def _anchor_sqlite_path(url: str, base_dir: Path) -> str:
    """A relative SQLite file is relative to the mapping file, like every other path."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if database.startswith("file:") or Path(database).is_absolute():
        return url
    return parsed.set(database=str((base_dir / database).resolve())).render_as_string(
        hide_password=False
    )


def _numbered(batches: Iterator[list[Any]], width: int, failure: list[BaseException]) -> Any:
    """The text columns as one Arrow stream, with each row's number from 1; an error of the
    driver is kept in ``failure`` (DuckDB would report it as its own)."""
    import numpy as np
    import pyarrow as pa

    schema = pa.schema(
        [pa.field(f"c{index}", pa.large_string()) for index in range(width)]
        + [pa.field(ROW_COLUMN, pa.int64())]
    )

    def numbered() -> Iterator[Any]:
        start = 0
        try:
            for texts in batches:
                rows = len(texts[0])
                numbers = pa.array(np.arange(start + 1, start + 1 + rows, dtype=np.int64))
                arrays = [text.cast(pa.large_string()) for text in texts]
                yield pa.RecordBatch.from_arrays([*arrays, numbers], schema=schema)
                start += rows
        except BaseException as error:
            failure.append(error)
            raise

    return pa.RecordBatchReader.from_batches(schema, numbered())


def _insert_sql(table: str, width: int, label: str, null_values: set[str]) -> str:
    """The INSERT of ``_numbered``'s stream: the input's null_values and blank texts become
    NULL, as ``insert_frames`` makes them."""
    names = [f"c{index}" for index in range(width)]
    nulls = ", ".join(sql_literal(value) for value in sorted(null_values))
    inner = ", ".join(
        f"CASE WHEN {quote_identifier(name)} IN ({nulls}) THEN NULL "
        f"ELSE {quote_identifier(name)} END AS {quote_identifier(name)}"
        if nulls
        else quote_identifier(name)
        for name in names
    )
    outer = ", ".join(text_column_sql(name) for name in names)
    return (
        f"INSERT INTO {quote_identifier(table)} SELECT {outer}, "
        f"{sql_literal(label)} AS {SOURCE_COLUMN}, {ROW_COLUMN} "
        f"FROM (SELECT {inner}, {ROW_COLUMN} FROM _pms_sync_arrow_rows)"
    )


def _first_text(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _first_line(error: SQLAlchemyError) -> str:
    return str(getattr(error, "orig", None) or error).splitlines()[0]
