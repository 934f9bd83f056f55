"""Excel workbooks (.xlsx), read row by row in read-only mode so large sheets stay cheap, once
their archive is known to expand within the limits in force (connector.sources.xlsx_archive)."""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from connector.errors import SourceError
from connector.sources.base import (
    ROW_COLUMN,
    Source,
    append_frames,
    chunked,
    distinct_columns,
    text_frame,
    to_text,
)
from connector.sources.files import resolve_files
from connector.sources.limits import MAX_COMPRESSION_RATIO, MAX_UNCOMPRESSED, Limit
from connector.sources.xlsx_archive import check_xlsx_archive

CHUNK_ROWS = 50_000

_ZERO_PADDED = re.compile(r"0+")
"""A number format of zeros only ("000"): Excel shows 7 as 007, as a room or an id is written."""


def _cell_value(cell: Any) -> Any:
    """The cell's value, a whole number in a zero-padded format as the text Excel shows.

    The sheet holds 7 for a room Excel shows, and a CSV export of it writes, as 007: read as
    7, it became another unit than the 007 of the bookings file. Other formats (dates,
    decimals, currencies) are left to the mapping's conversions, which read the value itself.
    Reading the cells' formats costs no more than their values (openpyxl reads the styles
    either way)."""
    value = cell.value
    number_format = cell.number_format
    if (
        number_format
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value < 9e15  # beyond, a float's whole number has digits Excel never shows
        and value == int(value)
        and _ZERO_PADDED.fullmatch(number_format)
    ):
        return str(int(value)).zfill(len(number_format))
    return value


class XlsxSource(Source):
    def __init__(
        self,
        name: str,
        pattern: str,
        base_dir: Path,
        *,
        sheet: str | None = None,
        header_row: int = 1,
        null_values: list[str] | tuple[str, ...] = ("",),
        max_uncompressed_mb: int | None = None,
        max_compression_ratio: int | None = None,
    ) -> None:
        super().__init__(name)
        self.pattern = pattern
        self.base_dir = base_dir
        self.sheet = sheet
        self.header_row = header_row
        self.null_values = set(null_values)
        self.max_uncompressed: Limit = MAX_UNCOMPRESSED.resolve(max_uncompressed_mb)
        self.max_ratio: Limit = MAX_COMPRESSION_RATIO.resolve(max_compression_ratio)

    def describe(self) -> str:
        files = resolve_files(self.pattern, self.base_dir, self.name)
        return files[0].name if len(files) == 1 else self.pattern

    def _rows(self, path: Path) -> Iterator[tuple[Any, ...]]:
        check_xlsx_archive(
            path,
            input_name=self.name,
            max_uncompressed=self.max_uncompressed,
            max_ratio=self.max_ratio,
        )
        # Imported here: a run without a workbook input does not pay for importing openpyxl.
        import openpyxl

        try:
            workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
        except Exception as error:  # openpyxl raises several unrelated types for a bad file
            raise SourceError(f"cannot open {path.name}: {error}", source=self.name) from None
        try:
            if self.sheet is None:
                worksheet = workbook.worksheets[0]
            elif self.sheet in workbook.sheetnames:
                worksheet = workbook[self.sheet]
            else:
                raise SourceError(
                    f"{path.name} has no sheet {self.sheet!r} (sheets: {workbook.sheetnames})",
                    source=self.name,
                )
            try:
                for row in worksheet.iter_rows(min_row=self.header_row):
                    yield tuple(_cell_value(cell) for cell in row)
            except (zipfile.BadZipFile, zlib.error, EOFError, SyntaxError) as error:
                # A member whose data is damaged (bad CRC, cut-off stream) or not XML fails
                # only when its rows are read. (XML parse errors derive from SyntaxError.)
                raise SourceError(
                    f"{path.name} is damaged: its sheet cannot be read ({error}); export it again",
                    source=self.name,
                ) from None
        finally:
            workbook.close()

    def _header_of(self, path: Path) -> list[str]:
        for row in self._rows(path):
            header = [to_text(cell) or "" for cell in row]
            while header and header[-1] == "":
                header.pop()
            return distinct_columns(header)
        raise SourceError(f"{path.name} has no header row {self.header_row}", source=self.name)

    def columns(self) -> list[str]:
        files = resolve_files(self.pattern, self.base_dir, self.name)
        headers = [self._header_of(path) for path in files]
        if any(header != headers[0] for header in headers[1:]):
            raise SourceError("the matched workbooks have different columns", source=self.name)
        return headers[0]

    def load_into(
        self, connection: duckdb.DuckDBPyConnection, table: str, since: Any = None
    ) -> int:
        columns = self.columns()
        return append_frames(connection, table, columns, self._frames(columns))

    def _frames(self, columns: list[str]) -> Iterator[tuple[str, pd.DataFrame]]:
        for path in resolve_files(self.pattern, self.base_dir, self.name):
            rows = self._rows(path)
            next(rows, None)  # the header
            # Blank rows are skipped but still counted, so row numbers match what Excel shows.
            numbered = (
                (*row[: len(columns)], number)
                for number, row in enumerate(rows, start=1)
                if any(cell not in (None, "") for cell in row)
            )
            for batch in chunked(numbered, CHUNK_ROWS):
                frame = text_frame([row[:-1] for row in batch], columns, self.null_values)
                frame[ROW_COLUMN] = [row[-1] for row in batch]
                yield path.name, frame
