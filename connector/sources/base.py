"""What every input has in common: its columns known before any row is read, and a load of its
rows, in bounded chunks, into a DuckDB table whose values are all text.

Every loaded table carries two more columns: ``_src`` (the file, table or query the row came
from, as shown to users) and ``_row`` (the 1-based data row number in that source), so that a
quarantined record can point back to the exact lines of the export.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

SOURCE_COLUMN = "_src"
ROW_COLUMN = "_row"
META_COLUMNS: tuple[str, ...] = (SOURCE_COLUMN, ROW_COLUMN)


def quote_identifier(name: str) -> str:
    """A DuckDB identifier for any column name, quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def distinct_columns(header: Sequence[str]) -> list[str]:
    """Column names DuckDB can hold side by side, the way pandas names a CSV's columns: an
    empty name becomes ``Unnamed: <index>`` and a repeated one ``name.1``, ``name.2``…

    DuckDB matches identifiers without case, so ``Name`` after ``name`` (or a column called
    ``_row``) is a repeat too: kept as it is, it stopped the run with DuckDB's own "already
    exists". The first column of a name keeps it; only the later ones are renamed."""
    taken = {column.casefold() for column in META_COLUMNS}
    names: list[str] = []
    for index, column in enumerate(header):
        name = column if column != "" else f"Unnamed: {index}"
        candidate, repeat = name, 0
        while candidate.casefold() in taken:
            repeat += 1
            candidate = f"{name}.{repeat}"
        taken.add(candidate.casefold())
        names.append(candidate)
    return names


class Source(abc.ABC):
    """One named input of a mapping."""

    def __init__(self, name: str) -> None:
        self.name = name

    @abc.abstractmethod
    def columns(self) -> list[str]:
        """The column names, read from the header (or a zero-row query) only."""

    @abc.abstractmethod
    def load_into(
        self, connection: duckdb.DuckDBPyConnection, table: str, since: Any = None
    ) -> int:
        """Create ``table`` with every row (text values plus _src and _row); returns the row count."""

    def describe(self) -> str:
        return self.name

    def size_bytes(self) -> int | None:
        """The text the input holds, in bytes, when known before reading it (files read as
        they are); None otherwise (a query, a compressed workbook)."""
        return None

    def scan_in_place(self, connection: duckdb.DuckDBPyConnection, table: str) -> Path | None:
        """Make ``table`` a view that reads the input where it is, with the columns
        ``load_into`` gives it, and return the file it reads; None when this input cannot be
        read in place (only a single file DuckDB's reader decodes can), and nothing is made.

        Every query of the view reads the file again: the caller makes sure it did not change
        in between (``connector.mapping.engine``)."""
        return None


def sql_literal(value: str | bool | int | list[str]) -> str:
    """A DuckDB literal of ``value``: where a statement cannot take parameters (a view)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(sql_literal(item) for item in value) + "]"
    return "'" + value.replace("'", "''") + "'"


BLANKS = " \t\n\r\f\v\u00a0"
"""The characters a text made only of is blank: missing, in every source."""


def text_column_sql(column: str) -> str:
    """The select-list entry of a text column, blank text read as missing: a CSV's empty
    field, an XLSX cell of spaces and a database's '' are the same missing value. Plain SQL
    over the column, so that it costs a scan, not a Python call per value."""
    quoted = quote_identifier(column)
    # Only a text that starts with a blank (or is empty: '' < '!') can be blank; the byte
    # comparison spares the regular expression nearly every value.
    blank = (
        f"({quoted} < '!' OR starts_with({quoted}, {sql_literal(BLANKS[-1])})) "
        f"AND regexp_full_match({quoted}, {sql_literal('[' + BLANKS + ']*')})"
    )
    return f"CASE WHEN {blank} THEN NULL ELSE {quoted} END AS {quoted}"


def create_text_table(
    connection: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str]
) -> None:
    definitions = ", ".join(f"{quote_identifier(column)} VARCHAR" for column in columns)
    connection.execute(
        f"CREATE OR REPLACE TABLE {quote_identifier(table)} "
        f"({definitions}, {SOURCE_COLUMN} VARCHAR, {ROW_COLUMN} BIGINT)"
    )


def append_frames(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    frames: Iterable[tuple[str, pd.DataFrame]],
) -> int:
    """Create ``table`` and append text frames chunk by chunk, numbering rows per source label
    from 1."""
    create_text_table(connection, table, columns)
    return insert_frames(connection, table, columns, frames)


def insert_frames(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    frames: Iterable[tuple[str, pd.DataFrame]],
) -> int:
    """Append text frames to an existing ``table``, numbering rows per source label from 1."""
    counts: dict[str, int] = {}
    total = 0
    for label, frame in frames:
        start = counts.get(label, 0)
        numbers = frame.pop(ROW_COLUMN) if ROW_COLUMN in frame.columns else None
        chunk = frame.copy()
        chunk.columns = list(columns)
        chunk[SOURCE_COLUMN] = label
        if numbers is None:
            chunk[ROW_COLUMN] = range(start + 1, start + 1 + len(chunk))
            counts[label] = start + len(chunk)
        else:
            # The source numbered its rows itself (it skipped blank ones).
            chunk[ROW_COLUMN] = numbers.to_numpy()
        total += len(chunk)
        texts = ", ".join(text_column_sql(column) for column in columns)
        connection.register("_pms_sync_chunk", chunk)
        try:
            connection.execute(
                f"INSERT INTO {quote_identifier(table)} "
                f"SELECT {texts}, {SOURCE_COLUMN}, {ROW_COLUMN} FROM _pms_sync_chunk"
            )
        finally:
            connection.unregister("_pms_sync_chunk")
    return total


def text_frame(
    rows: Sequence[Sequence[Any]], columns: Sequence[str], null_values: set[str]
) -> pd.DataFrame:
    """A frame of text values (None for missing) from Python rows of any cell types."""
    data = {
        column: [to_text(row[index] if index < len(row) else None, null_values) for row in rows]
        for index, column in enumerate(columns)
    }
    return pd.DataFrame(data, columns=list(columns), dtype=object)


def to_text(value: Any, null_values: set[str] | frozenset[str] = frozenset()) -> str | None:
    """The text form of a cell: what a CSV export of the same value would contain; None when
    that text is one of ``null_values``, as a CSV reader reads it."""
    text = _text_form(value)
    return None if text is None or text in null_values else text


def _text_form(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value != value:  # NaN
        return None
    if hasattr(value, "isoformat"):
        try:
            return value.isoformat(sep=" ")  # datetime
        except TypeError:
            return value.isoformat()  # date, time
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def chunked(rows: Iterator[Sequence[Any]], size: int) -> Iterator[list[Sequence[Any]]]:
    batch: list[Sequence[Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
