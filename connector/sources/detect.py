"""What a delimited export looks like, guessed from its first lines: encoding, delimiter,
header line, columns and a sample of rows (for ``pms-sync init``).

The guess is checked by reading the file back the way a mapping input would
(:class:`connector.sources.CsvSource`), so what it reports is what the mapping will read.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from connector.errors import SourceError

SAMPLE_BYTES = 256 * 1024
SAMPLE_ROWS = 200
DELIMITERS = (",", ";", "\t", "|")


@dataclass(frozen=True)
class CsvLayout:
    """An export's layout as a CSV input of a mapping states it."""

    encoding: str  # utf-8, utf-16, cp1252 or latin-1
    delimiter: str
    header_row: int  # line of the header (1 = the first line)
    columns: list[str]
    rows: list[list[str]]  # the first data rows, as text


def detect_encoding(sample: bytes) -> str:
    """utf-16 or utf-8 by their byte order mark, else utf-8 if the bytes decode as UTF-8,
    else cp1252 (Windows exports), else latin-1 (which decodes any byte)."""
    if sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        # final=False: a character cut by the end of the sample is no error.
        decoder.decode(sample, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        sample.decode("cp1252")
        return "cp1252"
    except UnicodeDecodeError:
        return "latin-1"


def _decoded(sample: bytes, encoding: str) -> str:
    text = codecs.getincrementaldecoder(encoding)(errors="replace").decode(sample, final=False)
    return text.removeprefix("\ufeff")


def _delimiter(lines: list[str]) -> str:
    """The candidate that splits the lines into the most fields the most consistently."""
    try:
        return csv.Sniffer().sniff("\n".join(lines[:50]), delimiters="".join(DELIMITERS)).delimiter
    except csv.Error:
        pass
    best, best_score = ",", -1.0
    for candidate in DELIMITERS:
        counts = Counter(len(row) for row in csv.reader(lines, delimiter=candidate))
        width, rows = counts.most_common(1)[0] if counts else (1, 0)
        score = rows * (width - 1)
        if width > 1 and score > best_score:
            best, best_score = candidate, score
    return best


def _is_header(row: list[str], width: int) -> bool:
    """A header has the table's width and a name in every cell, few of them numbers."""
    cells = [cell.strip() for cell in row]
    if len(cells) != width or not all(cells):
        return False
    numbers = sum(1 for cell in cells if cell.replace(".", "", 1).replace("-", "", 1).isdigit())
    return numbers <= len(cells) // 4


def detect_csv(path: Path) -> CsvLayout:
    """The layout of the delimited export at ``path``."""
    try:
        with path.open("rb") as handle:
            sample = handle.read(SAMPLE_BYTES)
    except OSError as error:
        raise SourceError(f"cannot read {path}: {error}", source=path.name) from None
    if not sample.strip():
        raise SourceError(f"{path.name} is empty", source=path.name)
    encoding = detect_encoding(sample)
    text = _decoded(sample, encoding)
    lines = text.splitlines()
    if len(sample) == SAMPLE_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line of a cut sample may be cut too
    delimiter = _delimiter([line for line in lines if line.strip()])
    rows = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter))
    widths = Counter(len(row) for row in rows if any(cell.strip() for cell in row))
    width = widths.most_common(1)[0][0]
    header_index = next(
        (index for index, row in enumerate(rows) if _is_header(row, width)),
        next(index for index, row in enumerate(rows) if len(row) == width),
    )
    columns = [cell.strip() for cell in rows[header_index]]
    data = [row for row in rows[header_index + 1 :] if any(cell.strip() for cell in row)]
    # csv.reader rows are physical lines here unless a quoted value spans lines; count the
    # lines up to the header in the text itself.
    header_line = _line_of_row(lines, delimiter, header_index)
    return CsvLayout(encoding, delimiter, header_line, columns, data[:SAMPLE_ROWS])


def _line_of_row(lines: list[str], delimiter: str, index: int) -> int:
    """The 1-based line on which csv row ``index`` starts (quoted line breaks counted)."""
    reader = csv.reader(lines, delimiter=delimiter)
    for row_index, _row in enumerate(reader):
        if row_index == index:
            return reader.line_num
    return index + 1
