"""Delimited text exports: DuckDB's reader for the encodings it knows, pandas chunks otherwise."""

from __future__ import annotations

import codecs
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
        except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
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
            except (UnicodeDecodeError, pd.errors.ParserError) as error:
                raise SourceError(f"cannot read {path.name}: {error}", source=self.name) from None

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
                raise SourceError(f"cannot read {path.name}: {error}", source=self.name) from None
            finally:
                connection.execute("DROP TABLE IF EXISTS _pms_sync_stage")
        return total
