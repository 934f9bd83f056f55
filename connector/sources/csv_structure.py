"""The structure of a delimited file as Python's csv module reads it, row by row: the line each
row starts on, its fields, the line break that ends it and its size.

Two readers need it. DuckDB's reader refuses a file whose line endings are mixed (a lone CR
among LFs, CRLF and LF after a BOM) with "Error when sniffing file" and no line: on that error
path this scan tells a file whose rows are all whole, which is then read correctly, from one
with a stray line break inside an unquoted value, which is refused with its line and column.
pandas, the reader of the other encodings, pads a short row with empty values and takes a
stray CR for a line break without a word: its input is scanned first.

Lines are counted by line feed, as ``grep -n``, ``sed -n`` and ``wc -l`` count them; a lone CR
does not start a new line. Data rows are counted as the readers number them: 1 is the first row
after the header, blank lines are not rows.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from connector.sources.limits import Limit, size_text

BREAK_NAMES = {"\r": "carriage return (\\r)", "\n": "line feed (\\n)", "\r\n": "CRLF"}
UTF8_MAX_BYTES_PER_CHARACTER = 4
CUT_OFF_HINT = "(was the export cut off or edited by hand?)"


@dataclass(frozen=True)
class MalformedRow:
    """The first row that cannot be read as the header says, and why."""

    line: int  # the line the problem is on
    row: int | None  # its data row, None for the header
    message: str  # the whole sentence, file name and advice included


@dataclass(frozen=True)
class CsvStructure:
    rows: int  # data rows up to the first malformed one (all of them when there is none)
    line_endings: frozenset[str]  # the line breaks that end rows: "\n", "\r\n", "\r"
    malformed: MalformedRow | None

    @property
    def mixed_line_endings(self) -> bool:
        return len(self.line_endings) > 1


class _Lines:
    """The file's lines as csv.reader wants them (any of LF, CRLF, CR ends one, kept), with
    the count of line feeds read so far, the characters of the current row and its ending."""

    def __init__(self, handle: TextIO) -> None:
        self._handle = handle
        self.line_feeds = 0
        self.row_size = 0
        self.ending = ""

    def __iter__(self) -> Iterator[str]:
        for line in self._handle:
            self.row_size += len(line)
            last = line[-1:]
            if last == "\n":
                self.line_feeds += 1
                self.ending = "\r\n" if line[-2:-1] == "\r" else "\n"
            else:
                self.ending = last if last == "\r" else ""
            yield line


def scan_csv(
    path: Path,
    *,
    encoding: str,
    delimiter: str,
    quote: str,
    escape: str | None,
    header_row: int,
    max_row: Limit,
) -> CsvStructure:
    """Read ``path`` with Python's csv module and stop at the first row that is not whole."""
    name = path.name
    # The csv module refuses fields above a process-wide limit (128 KiB by default) with its own
    # number in the message; raise it to ours, so the limit quoted is the one in force. It only
    # ever grows, so another input's scan running alongside is never cut shorter.
    csv.field_size_limit(max(csv.field_size_limit(), max_row.bytes + 1))
    with path.open(encoding=encoding, errors="replace", newline="") as handle:
        lines = _Lines(handle)
        reader = csv.reader(
            lines, delimiter=delimiter, quotechar=quote, escapechar=escape, strict=True
        )
        header: list[str] | None = None
        endings: set[str] = set()  # the endings of whole rows (and the header)
        rows = 0
        suspect_break: tuple[str, int] | None = None  # a row before ended by an odd break
        while True:
            start_line = lines.line_feeds + 1
            lines.row_size = 0
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                if str(error).startswith("field larger than field limit"):
                    return _found(rows, endings, _too_long(name, start_line, rows + 1, max_row))
                return _found(
                    rows,
                    endings,
                    MalformedRow(
                        start_line,
                        rows + 1 if header is not None else None,
                        f"{name} is not well-formed CSV at line {start_line}: {error} "
                        f"{CUT_OFF_HINT}",
                    ),
                )
            if reader.line_num <= header_row - 1 or not fields:
                continue  # the lines above the header, and blank lines, are not rows
            size = _utf8_size(lines.row_size, fields, max_row.bytes)
            if size > max_row.bytes:
                row = rows + 1 if header is not None else None
                return _found(rows, endings, _too_long(name, start_line, row, max_row, size))
            ending = lines.ending
            if header is None:
                header = fields
                if ending:
                    endings.add(ending)
                continue
            row = rows + 1
            if len(fields) == len(header):
                rows = row
                odd = ending == "\r" or (bool(ending) and ending not in endings)
                suspect_break = (ending, row) if odd else None
                if ending:
                    endings.add(ending)
                continue
            break_line = lines.line_feeds + (0 if ending.endswith("\n") else 1)
            if len(fields) < len(header) and ending and (ending == "\r" or ending not in endings):
                malformed = MalformedRow(
                    break_line,
                    row,
                    f"{name} is not well-formed CSV at line {break_line}: a "
                    f"{BREAK_NAMES[ending]} inside the unquoted value of column "
                    f"{header[len(fields) - 1]!r} splits the row ({len(fields)} fields where "
                    f"the header has {len(header)}). {_stray_advice(ending)}",
                )
            elif suspect_break is not None:
                previous_ending, previous_row = suspect_break
                malformed = MalformedRow(
                    start_line,
                    previous_row,
                    f"{name} is not well-formed CSV at line {start_line}: "
                    f"{len(fields)} fields where the header has {len(header)} after a "
                    f"{BREAK_NAMES[previous_ending]} that ended the row before: a stray "
                    f"{_escaped(previous_ending)} inside the unquoted value of column "
                    f"{header[-1]!r}? {_stray_advice(previous_ending)}",
                )
            else:
                malformed = MalformedRow(
                    start_line,
                    row,
                    f"{name} is not well-formed CSV at line {start_line}: {len(fields)} fields "
                    f"where the header has {len(header)} {CUT_OFF_HINT}",
                )
            return _found(rows, endings, malformed)
    return CsvStructure(rows, frozenset(endings), None)


def _found(rows: int, endings: set[str], malformed: MalformedRow) -> CsvStructure:
    return CsvStructure(rows, frozenset(endings), malformed)


def _utf8_size(characters: int, fields: list[str], limit: int) -> int:
    """The row's size in bytes of UTF-8 text, as DuckDB holds it; counted exactly only when
    its characters alone cannot tell that it is within ``limit``."""
    if characters * UTF8_MAX_BYTES_PER_CHARACTER <= limit:
        return characters
    return characters + sum(len(field.encode("utf-8", "replace")) - len(field) for field in fields)


def _too_long(
    name: str, line: int, row: int | None, limit: Limit, size: int | None = None
) -> MalformedRow:
    found = "a value longer than" if size is None else f"a row of {size_text(size)}, over"
    return MalformedRow(
        line,
        row,
        f"{name} line {line} starts {found} the limit of {limit.describe()} for one row; "
        f"{limit.advice()}",
    )


def _stray_advice(ending: str) -> str:
    return (
        f"Remove the stray {_escaped(ending)} from the export, or have the PMS quote values "
        f"that contain line breaks (inside quotes it is read as data)"
    )


def _escaped(ending: str) -> str:
    return ending.replace("\r", "\\r").replace("\n", "\\n")
