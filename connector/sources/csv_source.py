"""Delimited text exports: DuckDB's reader for the encodings it knows, pandas chunks otherwise."""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from connector.errors import SourceError
from connector.sources.base import (
    ROW_COLUMN,
    SOURCE_COLUMN,
    Source,
    append_frames,
    create_text_table,
    quote_identifier,
)
from connector.sources.files import resolve_files

CHUNK_ROWS = 100_000

_DUCKDB_ENCODINGS = {
    "utf_8": "utf-8",
    "utf_8_sig": "utf-8",
    "latin_1": "latin-1",
    "utf_16": "utf-16",
}
"""Python codec names DuckDB's CSV reader decodes itself (faster than pandas chunks)."""


class CsvSource(Source):
    def __init__(
        self,
        name: str,
        pattern: str,
        base_dir: Path,
        *,
        delimiter: str = ",",
        quote: str = '"',
        escape: str | None = None,
        encoding: str = "utf-8",
        header_row: int = 1,
        null_values: list[str] | tuple[str, ...] = ("",),
    ) -> None:
        super().__init__(name)
        self.pattern = pattern
        self.base_dir = base_dir
        self.delimiter = delimiter
        self.quote = quote
        self.escape = escape
        self.header_row = header_row
        self.null_values = list(null_values)
        try:
            self.codec = codecs.lookup(encoding).name.replace("-", "_")
        except LookupError:
            raise SourceError(f"unknown encoding {encoding!r}", source=name) from None
        self._files: list[Path] | None = None

    @property
    def files(self) -> list[Path]:
        if self._files is None:
            self._files = resolve_files(self.pattern, self.base_dir, self.name)
        return self._files

    def describe(self) -> str:
        return self.files[0].name if len(self.files) == 1 else self.pattern

    # ------------------------------------------------------------------ header only

    def columns(self) -> list[str]:
        headers = [self._header(path) for path in self.files]
        for path, header in zip(self.files[1:], headers[1:], strict=True):
            if header != headers[0]:
                raise SourceError(
                    f"{path.name} has columns {header}, unlike {self.files[0].name} {headers[0]}",
                    source=self.name,
                )
        return headers[0]

    def _header(self, path: Path) -> list[str]:
        try:
            frame = pd.read_csv(path, nrows=0, **self._pandas_options())
        except UnicodeError:
            raise self._undecodable(path) from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
            raise SourceError(
                f"cannot read the header of {path.name}: {error}", source=self.name
            ) from None
        return [str(column) for column in frame.columns]

    def _pandas_options(self) -> dict[str, Any]:
        return {
            "sep": self.delimiter,
            "quotechar": self.quote,
            "escapechar": self.escape,
            "encoding": "utf-8-sig" if self.codec == "utf_8" else self.codec,
            "header": self.header_row - 1,
            "dtype": str,
            "keep_default_na": False,
            "na_values": self.null_values,
            "skip_blank_lines": True,
        }

    # ------------------------------------------------------------------ rows

    def load_into(
        self, connection: duckdb.DuckDBPyConnection, table: str, since: Any = None
    ) -> int:
        columns = self.columns()
        if self.codec in _DUCKDB_ENCODINGS:
            return self._load_with_duckdb(connection, table, columns)
        return append_frames(connection, table, columns, self._pandas_chunks(columns))

    def _pandas_chunks(self, columns: list[str]) -> Iterator[tuple[str, pd.DataFrame]]:
        for path in self.files:
            try:
                reader = pd.read_csv(path, chunksize=CHUNK_ROWS, **self._pandas_options())
                with reader:
                    for chunk in reader:
                        yield path.name, chunk.astype(object).where(chunk.notna(), None)
            except UnicodeError:
                raise self._undecodable(path) from None
            except pd.errors.ParserError as error:
                raise self._malformed(path, error) from None

    def _load_with_duckdb(
        self, connection: duckdb.DuckDBPyConnection, table: str, columns: list[str]
    ) -> int:
        create_text_table(connection, table, columns)
        names = ", ".join(quote_identifier(column) for column in columns)
        total = 0
        for path in self.files:
            options = {
                "delim": self.delimiter,
                "quote": self.quote,
                "escape": self.escape or self.quote,
                "header": True,
                "skip": self.header_row - 1,
                "all_varchar": True,
                "nullstr": self.null_values,
                "encoding": _DUCKDB_ENCODINGS[self.codec],
                "names": columns,
            }
            arguments = ", ".join(f"{key} := ${key}" for key in options)
            try:
                # The staging table keeps file order in rowid, which becomes the row number.
                connection.execute(
                    f"CREATE OR REPLACE TEMP TABLE _pms_sync_stage AS "
                    f"SELECT * FROM read_csv($path, {arguments})",
                    {"path": str(path), **options},
                )
                connection.execute(
                    f"INSERT INTO {quote_identifier(table)} "
                    f"SELECT {names}, $label AS {SOURCE_COLUMN}, rowid + 1 AS {ROW_COLUMN} "
                    f"FROM _pms_sync_stage",
                    {"label": path.name},
                )
                total += connection.execute("SELECT count(*) FROM _pms_sync_stage").fetchone()[0]
            except duckdb.Error as error:
                raise self._malformed(path, error) from None
            finally:
                connection.execute("DROP TABLE IF EXISTS _pms_sync_stage")
        return total

    # ------------------------------------------------------------------ diagnosis
    # Only on the error path: the readers' own messages name a byte offset or a parser state;
    # the operator needs the row, and a hint of what to change.

    def _undecodable(self, path: Path) -> SourceError:
        with path.open("rb") as handle:
            for line_number, line in enumerate(handle, start=1):
                try:
                    line.decode(self.codec)
                except UnicodeError as error:
                    return SourceError(
                        f"{path.name} line {line_number} is not valid {self.codec} "
                        f"(byte {line[error.start : error.start + 1]!r}); set the input's "
                        f"`encoding:` (e.g. latin-1, cp1252) to the one the PMS writes",
                        source=self.name,
                        row=self._row_of(line_number),
                    )
        return SourceError(f"{path.name} is not valid {self.codec}", source=self.name)

    def _malformed(self, path: Path, error: Exception) -> SourceError:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        found = self._first_malformed_line(path)
        if found is None:
            return SourceError(f"cannot read {path.name}: {first_line}", source=self.name)
        line_number, problem = found
        return SourceError(
            f"{path.name} is not well-formed CSV at line {line_number}: {problem} (was the "
            f"export cut off or edited by hand?); nothing of this input was used",
            source=self.name,
            row=self._row_of(line_number),
        )

    def _first_malformed_line(self, path: Path) -> tuple[int, str] | None:
        with path.open(encoding=self.codec, errors="replace", newline="") as handle:
            reader = csv.reader(
                handle,
                delimiter=self.delimiter,
                quotechar=self.quote,
                escapechar=self.escape,
                strict=True,
            )
            width = None
            try:
                for fields in reader:
                    if reader.line_num <= self.header_row - 1 or not fields:
                        continue
                    if width is None:
                        width = len(fields)
                    elif len(fields) != width:
                        return reader.line_num, f"{len(fields)} fields where the header has {width}"
            except csv.Error as error:
                return reader.line_num, str(error)
        return None

    def _row_of(self, line_number: int) -> int | None:
        """The data row (1 = the first after the header) of a physical line, as quarantine
        entries count rows; None for the header itself."""
        row = line_number - self.header_row
        return row if row >= 1 else None
