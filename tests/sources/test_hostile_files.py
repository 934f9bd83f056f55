"""Real exports as they arrive: stray carriage returns and mixed line endings, oversized rows,
workbooks that are zip bombs or not workbooks at all. Each is either read correctly or refused
with the file, the line (or archive member) and, for a limit, the limit in force and how to
raise it. Both CSV readers are exercised: DuckDB's (UTF-8) and pandas' (cp1252).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import duckdb
import openpyxl
import pytest

from connector.errors import SourceError
from connector.sources import CsvSource, XlsxSource
from connector.sources.limits import MIB
from tests.sources.workbooks import inflating_workbook

READERS = pytest.mark.parametrize("encoding", ["utf-8", "cp1252"], ids=["duckdb", "pandas"])


def load(source: CsvSource | XlsxSource) -> list[tuple[object, ...]]:
    with duckdb.connect() as connection:
        source.load_into(connection, "t")
        return connection.execute("SELECT * FROM t ORDER BY _src, _row").fetchall()


def csv_source(folder: Path, content: bytes, encoding: str, **options: object) -> CsvSource:
    (folder / "units.csv").write_bytes(content)
    return CsvSource("units", "units.csv", folder, encoding=encoding, **options)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- line endings


@READERS
def test_a_stray_cr_inside_an_unquoted_value_is_refused_naming_line_row_and_column(
    tmp_path: Path, encoding: str
) -> None:
    source = csv_source(
        tmp_path, b"id,name,city\n1,Ann,Berlin\n2,Bo\rb,Paris\n3,Cy,Rome\n", encoding
    )

    with pytest.raises(SourceError) as raised:
        load(source)

    message = str(raised.value)
    assert message.startswith(
        "units.csv is not well-formed CSV at line 3: a carriage return (\\r) inside the "
        "unquoted value of column 'name' splits the row (2 fields where the header has 3). "
        "Remove the stray \\r from the export"
    )
    assert message.endswith("nothing of this input was used (input units, row 2)")
    assert raised.value.row == 2


@READERS
def test_a_stray_cr_inside_the_last_column_is_refused_at_its_line(
    tmp_path: Path, encoding: str
) -> None:
    source = csv_source(
        tmp_path, b"id,name,city\n1,Ann,Berlin\n2,Bob,Par\ris\n3,Cy,Rome\n", encoding
    )

    with pytest.raises(SourceError) as raised:
        load(source)

    assert str(raised.value).startswith(
        "units.csv is not well-formed CSV at line 3: 1 fields where the header has 3 after a "
        "carriage return (\\r) that ended the row before: a stray \\r inside the unquoted value "
        "of column 'city'?"
    )
    assert raised.value.row == 2


@READERS
def test_a_lone_cr_line_ending_among_lf_endings_ends_its_row(tmp_path: Path, encoding: str) -> None:
    source = csv_source(tmp_path, b"id,name,city\n1,Ann,Berlin\r2,Bob,Paris\n3,Cy,Rome\n", encoding)

    assert load(source) == [
        ("1", "Ann", "Berlin", "units.csv", 1),
        ("2", "Bob", "Paris", "units.csv", 2),
        ("3", "Cy", "Rome", "units.csv", 3),
    ]


def test_a_bom_with_crlf_and_lf_endings_reads_like_a_clean_file(tmp_path: Path) -> None:
    mixed = b"\xef\xbb\xbfid,name,city\r\n1,Ann,Berlin\r\n2,Bob,NULL\n\n3,Cy,Rome\n"
    source = csv_source(tmp_path, mixed, "utf-8", null_values=["NULL"])
    (tmp_path / "clean.csv").write_bytes(b"id,name,city\n1,Ann,Berlin\n2,Bob,NULL\n\n3,Cy,Rome\n")
    clean = CsvSource("units", "clean.csv", tmp_path, null_values=["NULL"])

    assert source.columns() == ["id", "name", "city"]
    assert (
        load(source)
        == [(*row[:3], "units.csv", row[4]) for row in load(clean)]
        == [
            ("1", "Ann", "Berlin", "units.csv", 1),
            ("2", "Bob", None, "units.csv", 2),
            ("3", "Cy", "Rome", "units.csv", 3),
        ]
    )


@READERS
@pytest.mark.parametrize(
    "text",
    [
        b'id,note\n1,"one\rtwo"\n2,"a\r\nb"\n3,plain\n',
        # Mixed endings besides (a lone CR ends row 2): the path after DuckDB's refusal.
        b'id,note\r\n1,"one\rtwo"\n2,"a\r\nb"\r3,plain\n',
    ],
    ids=["lf", "mixed"],
)
def test_a_cr_inside_a_quoted_value_is_kept_as_data(
    tmp_path: Path, encoding: str, text: bytes
) -> None:
    rows = load(csv_source(tmp_path, text, encoding))

    assert rows == [
        ("1", "one\rtwo", "units.csv", 1),
        ("2", "a\r\nb", "units.csv", 2),
        ("3", "plain", "units.csv", 3),
    ]


@READERS
def test_a_short_row_is_refused_by_both_readers_not_padded(tmp_path: Path, encoding: str) -> None:
    # pandas on its own fills the missing city with an empty value.
    source = csv_source(tmp_path, b"id,name,city\n1,Ann,Berlin\n2,Bob\n", encoding)

    with pytest.raises(
        SourceError,
        match=r"units.csv is not well-formed CSV at line 3: 2 fields where the header has 3 "
        r"\(was the export cut off or edited by hand\?\).*\(input units, row 2\)",
    ):
        load(source)


# ----------------------------------------------------------------------------- row size


def one_big_cell(size: int) -> bytes:
    return b"id,note,city\n1,small,Berlin\n2," + b"x" * size + b",Paris\n3,small,Rome\n"


@READERS
def test_a_row_over_the_configured_limit_is_refused_quoting_that_limit(
    tmp_path: Path, encoding: str
) -> None:
    source = csv_source(tmp_path, one_big_cell(MIB + 1000), encoding, max_line_mb=1)

    with pytest.raises(SourceError) as raised:
        load(source)

    message = str(raised.value)
    assert message.startswith("units.csv line 3 starts ")
    assert "the limit of 1 MiB (the input's `max_line_mb`) for one row" in message
    assert "raise the limit with `max_line_mb:` on the input in the mapping" in message
    assert "PMS_SYNC_CSV_MAX_LINE_MB" in message
    assert raised.value.row == 2


@READERS
def test_a_row_within_the_configured_limit_is_read_whole(tmp_path: Path, encoding: str) -> None:
    source = csv_source(tmp_path, one_big_cell(MIB + 1000), encoding, max_line_mb=2)

    rows = load(source)

    assert len(rows[1][1]) == MIB + 1000
    assert [row[0] for row in rows] == ["1", "2", "3"]


@READERS
def test_without_a_setting_the_default_limit_is_the_one_quoted(
    tmp_path: Path, encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PMS_SYNC_CSV_MAX_LINE_MB", raising=False)
    source = csv_source(tmp_path, one_big_cell(2 * MIB + 1000), encoding)

    with pytest.raises(SourceError, match=r"the limit of 2 MiB \(the default\) for one row"):
        load(source)


def test_the_environment_variable_sets_the_limit_of_inputs_without_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMS_SYNC_CSV_MAX_LINE_MB", "1")
    source = csv_source(tmp_path, one_big_cell(MIB + 1000), "utf-8")

    with pytest.raises(
        SourceError, match=r"the limit of 1 MiB \(PMS_SYNC_CSV_MAX_LINE_MB\) for one row"
    ):
        load(source)


# ----------------------------------------------------------------------------- xlsx archives


def test_an_xlsx_member_beyond_the_ratio_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    inflating_workbook(tmp_path / "units.xlsx", 3 * MIB)
    source = XlsxSource("units", "units.xlsx", tmp_path, max_uncompressed_mb=1024)

    with pytest.raises(SourceError) as raised:
        source.columns()

    message = str(raised.value)
    assert message.startswith(
        "units.xlsx was not opened: its member xl/worksheets/sheet1.xml expands from "
    )
    assert "to 3.0 MiB (ratio " in message
    assert "beyond the limit of 100:1 (the default); a sheet compresses about 10:1" in message
    assert "`max_compression_ratio:` on the input" in message
    assert "PMS_SYNC_XLSX_MAX_COMPRESSION_RATIO" in message
    assert raised.value.source == "units"


def test_an_xlsx_beyond_the_size_limit_is_refused_naming_its_largest_member(
    tmp_path: Path,
) -> None:
    inflating_workbook(tmp_path / "units.xlsx", 3 * MIB)
    source = XlsxSource(
        "units", "units.xlsx", tmp_path, max_uncompressed_mb=2, max_compression_ratio=100_000
    )

    with pytest.raises(SourceError) as raised:
        load(source)

    message = str(raised.value)
    assert message.startswith("units.xlsx was not opened: it expands from ")
    assert "(its largest member xl/worksheets/sheet1.xml: 3.0 MiB)" in message
    assert "beyond the limit of 2 MiB (the input's `max_uncompressed_mb`)" in message
    assert "PMS_SYNC_XLSX_MAX_UNCOMPRESSED_MB" in message


def test_the_same_workbook_within_raised_limits_is_read(tmp_path: Path) -> None:
    inflating_workbook(tmp_path / "units.xlsx", 3 * MIB // 2)
    source = XlsxSource(
        "units", "units.xlsx", tmp_path, max_uncompressed_mb=2, max_compression_ratio=100_000
    )

    rows = load(source)

    assert source.columns() == ["id"]
    assert rows[0] == ("U1", "units.xlsx", 1) and len(rows) > 20_000


def test_the_environment_variables_set_the_limits_of_workbooks_without_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inflating_workbook(tmp_path / "units.xlsx", 3 * MIB // 2)
    monkeypatch.setenv("PMS_SYNC_XLSX_MAX_COMPRESSION_RATIO", "100000")
    monkeypatch.setenv("PMS_SYNC_XLSX_MAX_UNCOMPRESSED_MB", "1")

    with pytest.raises(
        SourceError, match=r"beyond the limit of 1 MiB \(PMS_SYNC_XLSX_MAX_UNCOMPRESSED_MB\)"
    ):
        XlsxSource("units", "units.xlsx", tmp_path).columns()


@pytest.mark.parametrize(
    ("name", "damage", "expected"),
    [
        (
            "not a zip at all",
            lambda path: path.write_bytes(b"id,name\n1,Ann\n"),
            r"units.xlsx is not an Excel workbook \(.xlsx\): not a readable zip archive .*"
            r"is it cut off, an old .xls, or another format renamed\?",
        ),
        (
            "cut off",
            lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2]),
            r"units.xlsx is not an Excel workbook \(.xlsx\): not a readable zip archive",
        ),
        (
            "a zip of something else",
            lambda path: zipfile.ZipFile(path, "w").close(),
            r"units.xlsx is a zip archive but not an Excel workbook \(.xlsx\): it has no "
            r"\[Content_Types\].xml",
        ),
    ],
)
def test_a_file_that_is_not_a_workbook_is_refused_with_what_it_is(
    tmp_path: Path, name: str, damage, expected: str
) -> None:
    path = tmp_path / "units.xlsx"
    book = openpyxl.Workbook()
    book.active.append(["id"])
    book.active.append(["U1"])
    book.save(path)
    damage(path)

    with pytest.raises(SourceError, match=expected) as raised:
        XlsxSource("units", "units.xlsx", tmp_path).columns()
    assert raised.value.source == "units", name


def test_limits_set_in_the_mapping_reach_the_readers(tmp_path: Path) -> None:
    from connector.mapping import load_mapping
    from connector.sources import open_source

    (tmp_path / "mapping.yaml").write_text(
        "account: {constant: demo}\n"
        "inputs:\n"
        "  units: {path: units.xlsx, max_uncompressed_mb: 3, max_compression_ratio: 50}\n"
        "  stays: {path: stays.csv, max_line_mb: 7}\n"
        "entities:\n"
        "  accommodation:\n"
        "    input: units\n"
        "    fields: {id: id, name: id, street: id, streetNumber: id, country: {constant: DE},\n"
        "             city: id, postalCode: id, wifiName: id, wifiCode: id, doorCode: id}\n"
    )
    mapping = load_mapping(tmp_path / "mapping.yaml")

    units = open_source("units", mapping.inputs["units"], tmp_path)
    stays = open_source("stays", mapping.inputs["stays"], tmp_path)

    assert isinstance(units, XlsxSource) and isinstance(stays, CsvSource)
    assert units.max_uncompressed.describe() == "3 MiB (the input's `max_uncompressed_mb`)"
    assert units.max_ratio.describe() == "50:1 (the input's `max_compression_ratio`)"
    assert stays.max_line.describe() == "7 MiB (the input's `max_line_mb`)"


def test_a_byte_outside_the_encoding_deep_in_a_file_is_named_by_its_line(tmp_path: Path) -> None:
    rows = b"".join(b"%d,Ann,Berlin\n" % number for number in range(1, 100_001))
    source = csv_source(tmp_path, b"id,name,city\n" + rows + b"0,J\xfcrgen,Paris\n", "utf-8")

    with pytest.raises(SourceError) as raised:
        load(source)

    assert str(raised.value).startswith(
        "units.csv line 100002 is not valid utf_8 (byte b'\\xfc'); set the input's `encoding:`"
    )
    assert raised.value.row == 100_001
