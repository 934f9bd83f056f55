"""Delimited text exports: DuckDB's reader for the encodings it knows, pandas chunks otherwise.

Clean files take DuckDB's reader alone. When DuckDB refuses a file, a scan in Python
(connector.sources.csv_structure) finds the line and the cause; a file whose only oddity is
mixed line endings is then read by pandas, which takes CR, LF and CRLF alike. pandas pads
short rows without a word, so its input is scanned before it is read.
"""

from __future__ import annotations

import codecs
import functools
import re
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
    create_text_table,
    distinct_columns,
    insert_frames,
    quote_identifier,
    sql_literal,
    text_column_sql,
)
from connector.sources.csv_structure import CsvStructure, scan_csv
from connector.sources.files import resolve_files
from connector.sources.limits import MAX_LINE, Limit

CHUNK_ROWS = 100_000

_DUCKDB_ENCODINGS = {
    "utf_8": "utf-8",
    "utf_8_sig": "utf-8",
    "latin_1": "latin-1",
    "utf_16": "utf-16",
}
"""Python codec names DuckDB's CSV reader decodes itself (faster than pandas chunks)."""

_DUCKDB_LINE_TOO_LONG = re.compile(r"Maximum line size of \d+ bytes exceeded")

_BYTE_ORDER_MARKS: tuple[tuple[bytes, str, str], ...] = (
    # (mark, the encoding it announces, the prefix of the codec names that read it); UTF-32's
    # little-endian mark begins with UTF-16's, so it is looked for first.
    (codecs.BOM_UTF32_LE, "UTF-32", "utf_32"),
    (codecs.BOM_UTF32_BE, "UTF-32", "utf_32"),
    (codecs.BOM_UTF8, "UTF-8", "utf_8"),
    (codecs.BOM_UTF16_LE, "UTF-16", "utf_16"),
    (codecs.BOM_UTF16_BE, "UTF-16", "utf_16"),
)
"""Byte order marks a file may start with: it is then written in that encoding, whatever the
input says."""

_LATIN_1_CODECS = frozenset({"latin_1", "iso8859_1"})
"""Python's names of latin-1 (codecs.lookup("latin-1").name is "iso8859-1")."""

_C1_CONTROL = re.compile(rb"[\x80-\x9f]")
"""Bytes latin-1 decodes as C1 control characters, which no export means: Windows exports
(cp1252) write them for the euro sign, typographic quotes and dashes, the ellipsis."""

_BEYOND_ASCII = re.compile(r"[^\x00-\x7f]")

_SCAN_CHUNK_BYTES = 1 << 20


@functools.cache
def _single_byte(codec: str) -> bool:
    """Whether every byte is one character of ``codec`` (cp1252, latin-1, iso8859-15, …)."""
    if codec.startswith("utf"):
        return False
    try:
        return len(bytes(range(256)).decode(codec, errors="replace")) == 256
    except LookupError:
        return False


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
        max_line_mb: int | None = None,
    ) -> None:
        super().__init__(name)
        self.pattern = pattern
        self.base_dir = base_dir
        self.delimiter = delimiter
        self.quote = quote
        self.escape = escape
        self.header_row = header_row
        self.null_values = list(null_values)
        self.encoding = encoding
        try:
            self.codec = codecs.lookup(encoding).name.replace("-", "_")
        except LookupError:
            raise SourceError(f"unknown encoding {encoding!r}", source=name) from None
        self.max_line: Limit = MAX_LINE.resolve(max_line_mb)
        self._files: list[Path] | None = None
        self._encoding_checked: set[Path] = set()

    @property
    def files(self) -> list[Path]:
        if self._files is None:
            self._files = resolve_files(self.pattern, self.base_dir, self.name)
        return self._files

    def size_bytes(self) -> int | None:
        return sum(path.stat().st_size for path in self.files)

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
        self._refuse_other_encoding(path)
        try:
            frame = pd.read_csv(path, nrows=0, **self._pandas_options())
        except UnicodeError:
            raise self._undecodable(path) from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
            raise SourceError(
                f"cannot read the header of {path.name}: {error}", source=self.name
            ) from None
        return distinct_columns([str(column) for column in frame.columns])

    def _refuse_other_encoding(self, path: Path) -> None:
        """Refuse a file whose bytes show it is not in the input's encoding, once per file and
        before its header is read: a header read in the wrong encoding would otherwise stop
        the run as an unknown column ('StraÃŸe'), hiding the cause."""
        if path in self._encoding_checked:
            return
        self._refuse_other_byte_order_mark(path)
        if _single_byte(self.codec):
            self._refuse_text_read_otherwise(path)
        self._encoding_checked.add(path)

    def _refuse_other_byte_order_mark(self, path: Path) -> None:
        """A file that starts with the byte order mark of another encoding than the input's.

        A single-byte encoding decodes any byte: a UTF-8 file read as cp1252 or latin-1 (a PMS
        update that switched its exports to UTF-8) was read without a word, its first column
        named 'ï»¿id' and every 'é' sent as 'Ã©'. The mark says which encoding it is."""
        with path.open("rb") as handle:
            start = handle.read(4)
        for mark, encoding, codec_prefix in _BYTE_ORDER_MARKS:
            if start.startswith(mark):
                if not self.codec.startswith(codec_prefix):
                    raise SourceError(
                        f"{path.name} starts with the byte order mark of {encoding}, but the "
                        f"input's encoding is {self.encoding}: the file is {encoding} and would be "
                        f"read as garbled text; set the input's `encoding:` to "
                        f"{encoding.lower()}; nothing of this input was used",
                        source=self.name,
                    )
                return

    def _refuse_text_read_otherwise(self, path: Path) -> None:
        """A single-byte input (cp1252, latin-1…) whose file is text of another encoding, which
        such an encoding decodes without an error, since it decodes any byte. One read of the
        file looks for both:

        - UTF-8 with letters beyond ASCII: a PMS that now writes UTF-8 while the mapping says
          cp1252 had every "ü" sent as "Ã¼". Text in a single-byte encoding is practically
          never valid UTF-8 once it has such letters, which is how `pms-sync init` tells the
          two apart too. It is decided first: UTF-8's own bytes include 0x80 to 0x9F.
        - for latin-1, a byte it decodes as a C1 control character: a cp1252 export declared
          latin-1 (the usual name for "Western European") had "12 €" sent as "12 \\x80"."""
        utf8: codecs.IncrementalDecoder | None = codecs.getincrementaldecoder("utf-8")()
        controls = self.codec in _LATIN_1_CODECS
        letter: tuple[int, str] | None = None  # the line and the first letter beyond ASCII
        control: tuple[int, bytes] | None = None  # the line and the first C1 control byte
        line_feeds = 0
        with path.open("rb") as handle:
            while chunk := handle.read(_SCAN_CHUNK_BYTES):
                if utf8 is not None:
                    try:
                        text = utf8.decode(chunk)
                    except UnicodeDecodeError:
                        utf8 = None  # not UTF-8: the declared encoding may well be right
                    else:
                        # (A letter whose bytes the chunk cuts is in the next chunk's text.)
                        found = None if letter else _BEYOND_ASCII.search(text)
                        if found:
                            letter = (
                                line_feeds + text.count("\n", 0, found.start()) + 1,
                                found.group(),
                            )
                if controls and control is None and (byte := _C1_CONTROL.search(chunk)):
                    control = (line_feeds + chunk.count(b"\n", 0, byte.start()) + 1, byte.group())
                if utf8 is None and (control is not None or not controls):
                    break  # decided: not UTF-8, and a control byte found or none looked for
                line_feeds += chunk.count(b"\n")
        if utf8 is not None and letter is not None:
            try:
                utf8.decode(b"", final=True)
            except UnicodeDecodeError:
                utf8 = None
        if utf8 is not None and letter is not None:
            line, character = letter
            misread = character.encode("utf-8").decode(self.codec, errors="replace")
            raise self._refused_at(
                line,
                f"{path.name} is UTF-8, not {self.encoding}: line {line} has {character!r}, "
                f"which {self.encoding} would read as {misread!r}; set the input's `encoding:` "
                "to utf-8; nothing of this input was used",
            )
        if control is not None:
            line, byte_found = control
            character = byte_found.decode("cp1252", errors="replace")
            meant = (
                f"where Windows exports (cp1252) write {character!r}; set the input's "
                f"`encoding:` to cp1252"
                if character != "\ufffd"
                else "so the file is in another encoding; set the input's `encoding:` to it"
            )
            raise self._refused_at(
                line,
                f"{path.name} line {line} has the byte {byte_found!r}, a control character in "
                f"{self.encoding}, {meant}; nothing of this input was used",
            )

    def _pandas_options(self) -> dict[str, Any]:
        return {
            "sep": self.delimiter,
            "quotechar": self.quote,
            "escapechar": self.escape,
            "encoding": "utf-8-sig" if self.codec == "utf_8" else self.codec,
            # Lines above the header are skipped by line, as DuckDB's reader skips them:
            # pandas' own header= counts rows without the blank lines (a title, a blank line,
            # then the header would put the header one row off).
            "skiprows": self.header_row - 1,
            "header": 0,
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
        if len(self.files) == 1 and self.codec in _DUCKDB_ENCODINGS:
            loaded = self._load_once(connection, table, columns, self.files[0])
            if loaded is not None:
                return loaded
        create_text_table(connection, table, columns)
        total = 0
        for path in self.files:
            if self.codec in _DUCKDB_ENCODINGS:
                total += self._load_with_duckdb(connection, table, columns, path)
            else:
                self._refuse_if_malformed(self._scan(path))
                total += insert_frames(connection, table, columns, self._pandas_chunks(path))
        return total

    def _pandas_chunks(self, path: Path) -> Iterator[tuple[str, pd.DataFrame]]:
        try:
            reader = pd.read_csv(path, chunksize=CHUNK_ROWS, **self._pandas_options())
            with reader:
                for chunk in reader:
                    yield path.name, chunk.astype(object).where(chunk.notna(), None)
        except UnicodeError:
            raise self._undecodable(path) from None
        except pd.errors.ParserError as error:
            raise self._malformed(path, error) from None

    def _load_once(
        self, connection: duckdb.DuckDBPyConnection, table: str, columns: list[str], path: Path
    ) -> int | None:
        """One file read straight into its table, the row number read off the table's rowid
        (file order) by a view: the rows are written once. None when DuckDB's reader refuses
        the file; the general path then reads or diagnoses it."""
        rows = quote_identifier(f"{table}__rows")
        try:
            connection.execute(
                f"CREATE OR REPLACE TABLE {rows} AS {self._select_file(path, columns)}"
            )
        except duckdb.OutOfMemoryException:
            raise  # the run's memory, not the file: the caller names the limit and the step
        except duckdb.Error:
            connection.execute(f"DROP TABLE IF EXISTS {rows}")
            return None
        connection.execute(
            f"CREATE OR REPLACE VIEW {quote_identifier(table)} AS "
            f"SELECT *, rowid + 1 AS {ROW_COLUMN} FROM {rows}"
        )
        return int(connection.execute(f"SELECT count(*) FROM {rows}").fetchall()[0][0])

    def scan_in_place(self, connection: duckdb.DuckDBPyConnection, table: str) -> Path | None:
        # The row number is the row's position in the file, as the loaded table's rowid
        # gives it (DuckDB keeps a single file's order through a window with an empty OVER).
        if len(self.files) != 1 or self.codec not in _DUCKDB_ENCODINGS:
            return None
        path = self.files[0].resolve()
        # Buffers of two rows' worth, not DuckDB's sixteen (several per thread in flight): a
        # lower peak at no cost in time.
        select = self._select_file(path, self.columns(), buffer_size=2 * self.max_line.bytes)
        connection.execute(
            f"CREATE OR REPLACE VIEW {quote_identifier(table)} AS "
            f"SELECT *, row_number() OVER () AS {ROW_COLUMN} FROM ({select})"
        )
        return path

    def _select_file(self, path: Path, columns: list[str], **options: Any) -> str:
        """SELECT of the file's columns and its name as ``_src``, read by DuckDB with this
        input's options (``options`` added), as literals: a view cannot take parameters."""
        names = ", ".join(text_column_sql(column) for column in columns)
        settings = self._duckdb_options(columns) | options
        arguments = ", ".join(f"{key} := {sql_literal(value)}" for key, value in settings.items())
        return (
            f"SELECT {names}, CAST({sql_literal(path.name)} AS VARCHAR) AS {SOURCE_COLUMN} "
            f"FROM read_csv({sql_literal(str(path))}, {arguments})"
        )

    def _duckdb_options(self, columns: list[str]) -> dict[str, Any]:
        return {
            "delim": self.delimiter,
            "quote": self.quote,
            "escape": self.escape or self.quote,
            "header": True,
            "skip": self.header_row - 1,
            "all_varchar": True,
            "nullstr": self.null_values,
            "encoding": _DUCKDB_ENCODINGS[self.codec],
            "names": columns,
            "max_line_size": self.max_line.bytes,
        }

    def _load_with_duckdb(
        self, connection: duckdb.DuckDBPyConnection, table: str, columns: list[str], path: Path
    ) -> int:
        try:
            # Read once, straight into the table: the row number is the row's position in the
            # file (DuckDB keeps a single file's order through a window with an empty OVER).
            ((inserted,),) = connection.execute(
                f"INSERT INTO {quote_identifier(table)} SELECT *, row_number() OVER () "
                f"FROM ({self._select_file(path, columns)})"
            ).fetchall()
            return int(inserted)
        except duckdb.OutOfMemoryException:
            raise
        except duckdb.Error as error:
            refused = error
        return self._load_refused_by_duckdb(connection, table, columns, path, refused)

    def _load_refused_by_duckdb(
        self,
        connection: duckdb.DuckDBPyConnection,
        table: str,
        columns: list[str],
        path: Path,
        error: duckdb.Error,
    ) -> int:
        """A file DuckDB's strict reader refused: read correctly when its only oddity is mixed
        line endings (every row whole, whichever of CR, LF or CRLF ends it), refused otherwise."""
        undecodable = self._first_undecodable_line(path)
        if undecodable is not None:
            raise undecodable
        structure = self._scan(path)
        self._refuse_if_malformed(structure)
        if not structure.mixed_line_endings:
            raise self._unexplained(path, error)
        read = insert_frames(connection, table, columns, self._pandas_chunks(path))
        if read != structure.rows:
            # Two readers disagreeing on a file means neither can be trusted with it.
            raise SourceError(
                f"{path.name} has mixed line endings and its rows could not be counted alike "
                f"by two readers ({structure.rows} and {read}); convert its line endings (e.g. "
                f"dos2unix) and run again; nothing of this input was used",
                source=self.name,
            )
        return read

    # ------------------------------------------------------------------ diagnosis
    # Only on the error path: the readers' own messages name a byte offset or a parser state;
    # the operator needs the row, and a hint of what to change.

    def _undecodable(self, path: Path) -> SourceError:
        found = self._first_undecodable_line(path)
        if found is None:
            return SourceError(f"{path.name} is not valid {self.codec}", source=self.name)
        return found

    def _first_undecodable_line(self, path: Path) -> SourceError | None:
        # Incremental, so that a character whose bytes a line split cuts (UTF-16) still decodes.
        decoder = codecs.getincrementaldecoder(self.codec)()
        with path.open("rb") as handle:
            for line_number, line in enumerate(handle, start=1):
                try:
                    decoder.decode(line)
                except UnicodeError as error:
                    # A decode error names the byte; UTF-16 without a BOM only says so.
                    found = (
                        f"byte {error.object[error.start : error.start + 1]!r}"
                        if isinstance(error, UnicodeDecodeError)
                        else str(error)
                    )
                    return self._refused_at(
                        line_number,
                        f"{path.name} line {line_number} is not valid {self.codec} "
                        f"({found}); set the input's "
                        f"`encoding:` (e.g. latin-1, cp1252) to the one the PMS writes",
                    )
        return None

    def _scan(self, path: Path) -> CsvStructure:
        options = self._pandas_options()
        return scan_csv(
            path,
            encoding=options["encoding"],
            delimiter=self.delimiter,
            quote=self.quote,
            escape=self.escape,
            header_row=self.header_row,
            max_row=self.max_line,
        )

    def _refuse_if_malformed(self, structure: CsvStructure) -> None:
        if structure.malformed is not None:
            raise SourceError(
                f"{structure.malformed.message}; nothing of this input was used",
                source=self.name,
                row=structure.malformed.row,
            )

    def _malformed(self, path: Path, error: Exception) -> SourceError:
        self._refuse_if_malformed(self._scan(path))
        return self._unexplained(path, error)

    def _unexplained(self, path: Path, error: Exception) -> SourceError:
        """A reader's refusal the scan cannot place. Only the first line of the reader's
        message is kept: DuckDB quotes the offending row, which may hold a door code."""
        text = str(error).strip()
        if _DUCKDB_LINE_TOO_LONG.search(text):
            # DuckDB counts a row a little differently (its line break included).
            return SourceError(
                f"{path.name} has a row at about the limit of {self.max_line.describe()} for "
                f"one row; {self.max_line.advice()}; nothing of this input was used",
                source=self.name,
            )
        first_line = text.splitlines()[0] if text else repr(error)
        return SourceError(f"cannot read {path.name}: {first_line}", source=self.name)

    def _refused_at(self, line_number: int, message: str) -> SourceError:
        """The error of this input at a physical line of one of its files."""
        return SourceError(message, source=self.name, row=self._row_of(line_number))

    def _row_of(self, line_number: int) -> int | None:
        """The data row (1 = the first after the header) of a physical line, as quarantine
        entries count rows; None for the header itself."""
        row = line_number - self.header_row
        return row if row >= 1 else None
