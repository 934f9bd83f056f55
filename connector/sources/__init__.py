"""Inputs of a mapping (CSV, XLSX, SQL) read into DuckDB tables of text, in chunks."""

from __future__ import annotations

from pathlib import Path

from connector.sources.base import META_COLUMNS, ROW_COLUMN, SOURCE_COLUMN, Source
from connector.sources.csv_source import CsvSource
from connector.sources.sql_source import SqlSource, safe_url
from connector.sources.xlsx_source import XlsxSource

__all__ = [
    "META_COLUMNS",
    "ROW_COLUMN",
    "SOURCE_COLUMN",
    "CsvSource",
    "Source",
    "SqlSource",
    "XlsxSource",
    "open_source",
    "safe_url",
]


def open_source(name: str, spec: object, base_dir: Path) -> Source:
    """The source an input spec of a mapping (connector.mapping.model) describes."""
    from connector.mapping.model import CsvInput, SqlInput, XlsxInput

    if isinstance(spec, CsvInput):
        return CsvSource(
            name,
            spec.path,
            base_dir,
            delimiter=spec.delimiter,
            quote=spec.quote,
            escape=spec.escape,
            encoding=spec.encoding,
            header_row=spec.header_row,
            null_values=spec.missing_texts,
            max_line_mb=spec.max_line_mb,
        )
    if isinstance(spec, XlsxInput):
        return XlsxSource(
            name,
            spec.path,
            base_dir,
            sheet=spec.sheet,
            header_row=spec.header_row,
            null_values=spec.missing_texts,
            max_uncompressed_mb=spec.max_uncompressed_mb,
            max_compression_ratio=spec.max_compression_ratio,
        )
    if isinstance(spec, SqlInput):
        return SqlSource(
            name,
            spec.url,
            table=spec.table,
            query=spec.query,
            params=spec.params,
            cursor=spec.cursor_column,
            cursor_key=spec.cursor_key,
            null_values=spec.missing_texts,
            chunk_size=spec.chunk_size,
            base_dir=base_dir,
            reader=spec.reader,
        )
    raise TypeError(f"unknown input spec {type(spec).__name__}")
