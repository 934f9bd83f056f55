"""Values as real PMS exports write them, mapped end to end: a value the export does not spell
unambiguously quarantines its record, naming file, row, field and value; it is never sent as
something else."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner
from mapping_helpers import (
    accommodation_mapping,
    map_bookings,
    map_units,
    payloads,
    write_mapping,
)

from connector.cli import main
from connector.errors import MappingError, SourceError
from connector.mapping import load_mapping, map_records
from connector.sandbox.testing import SandboxHandle

# Two-digit years ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("good", "short", "expression"),
    [
        ("01.06.2025", "01.06.25", {"column": "created", "format": "%d.%m.%Y"}),
        ("01.06.2025 14:30", "01.06.25 14:30", {"column": "created", "format": "%d.%m.%Y %H:%M"}),
        ("2025-06-01", "25-06-01", "created"),
        ("2025-06-01 14:30", "25-06-01 14:30", "created"),
    ],
)
def test_a_two_digit_year_where_four_are_expected_quarantines_the_record(
    tmp_path: Path, good: str, short: str, expression: object
) -> None:
    # DuckDB's %Y and its ISO cast read "25" as the year 25: the booking was sent as made on
    # 0025-06-01, and createdAt has no range check to catch it.
    rows = [{"booking": "b1", "created": good}, {"booking": "b2", "created": short}]

    batch = map_bookings(tmp_path, rows, {}, {"createdAt": expression})

    assert batch.records["record_id"].tolist() == ["b1"]
    assert payloads(batch)[0]["createdAt"].startswith("2025-06-01T")
    problem = batch.quarantine.iloc[0]
    assert (problem["record_id"], problem["rows"], problem["field"]) == ("b2", "2", "createdAt")
    assert problem["value"] == short
    assert problem["reason"].startswith("expected")


def test_a_list_of_formats_reads_four_and_two_digit_years_alike(tmp_path: Path) -> None:
    # The first format, %Y, took "03.07.25" for the year 25 and the second was never tried.
    rows = [
        {"booking": "b1", "arrival": "03.07.2025"},
        {"booking": "b2", "arrival": "03.07.25"},
        {"booking": "b3", "arrival": "3.7.25"},
    ]
    date = {"column": "arrival", "format": ["%d.%m.%Y", "%d.%m.%y"]}
    batch = map_bookings(
        tmp_path,
        rows,
        {"checkin": date, "checkout": {**date, "add_days": 2}},
        {"createdAt": date},
    )

    assert batch.quarantine.empty
    for payload in payloads(batch):
        assert payload["createdAt"] == "2025-07-03T00:00:00Z"
        assert payload["unitReservations"][0]["checkin"] == "2025-07-03"
        assert payload["unitReservations"][0]["checkout"] == "2025-07-05"


def test_a_year_spelt_with_four_digits_is_still_read_as_written(tmp_path: Path) -> None:
    # .NET and SQL Server exports write 0001-01-01 for "no date": that is what the PMS says.
    rows = [{"booking": "b1", "created": "0001-01-01"}]
    batch = map_bookings(tmp_path, rows, {}, {"createdAt": "created"})
    assert payloads(batch)[0]["createdAt"] == "0001-01-01T00:00:00Z"


def test_a_two_digit_year_column_is_no_date_of_the_first_century(tmp_path: Path) -> None:
    rows = [{"booking": "b1", "y": "2025"}, {"booking": "b2", "y": "25"}]
    created = {"date_parts": {"year": "y", "month": {"constant": 6}, "day": {"constant": 1}}}
    batch = map_bookings(tmp_path, rows, {}, {"createdAt": created})
    assert batch.records["record_id"].tolist() == ["b1"]
    problem = batch.quarantine.iloc[0]
    assert (problem["record_id"], problem["field"], problem["value"]) == (
        "b2",
        "createdAt",
        "25 6 1",
    )


# Decimal commas ------------------------------------------------------------------------------


def test_decimal_comma_numbers_with_thousands_points_are_read(tmp_path: Path) -> None:
    prices = ["1.234,50", "1.234.567,89", "1 234,50", "-1.234,5", "1.234", " 12,50 ", "99"]
    rows = [{"booking": f"b{index}", "price": price} for index, price in enumerate(prices)]
    batch = map_bookings(tmp_path, rows, {"price": {"column": "price", "decimal": ","}})
    assert batch.quarantine.empty
    assert [payload["unitReservations"][0]["price"] for payload in payloads(batch)] == [
        1234.5,
        1234567.89,
        1234.5,
        -1234.5,
        1234,
        12.5,
        99,
    ]


@pytest.mark.parametrize("price", ["12.50", "1,234.50", "1.2345"])
def test_a_point_that_groups_no_thousands_is_no_decimal_comma_number(
    tmp_path: Path, price: str
) -> None:
    # The points were dropped whatever they stood for: "12.50" in a decimal-comma column was
    # sent as 1250.0 and "1,234.50" as 1.2345.
    rows = [{"booking": "b1", "price": "12,50"}, {"booking": "b2", "price": price}]
    batch = map_bookings(tmp_path, rows, {"price": {"column": "price", "decimal": ","}})
    assert batch.records["record_id"].tolist() == ["b1"]
    problem = batch.quarantine.iloc[0]
    assert (problem["record_id"], problem["rows"]) == ("b2", "2")
    assert (problem["field"], problem["value"]) == ("unitReservations.price", price)
    assert problem["reason"].startswith("expected a number written with a decimal comma")


# Secrets in errors ---------------------------------------------------------------------------


def test_an_sql_member_of_a_door_code_failing_on_the_data_never_shows_the_code(
    tmp_path: Path,
) -> None:
    # DuckDB quotes the value a CAST failed on: the door code reached the error, the CLI's
    # output and every log of the run.
    rows = [
        {"unit_id": "u1", "door": "4711"},
        {"unit_id": "u2", "door": "door-SECRET-0815"},
    ]
    fields = {"doorCode": {"sql": "CAST(CAST(door AS INTEGER) AS VARCHAR)"}}
    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, rows, fields)
    message = str(raised.value)
    assert raised.value.member == "entities.accommodation.fields.doorCode.sql"
    assert "SECRET" not in message
    assert "Could not convert string '***'" in message and "TRY_CAST" in message


def test_an_sql_member_of_an_ordinary_field_still_shows_the_value_it_failed_on(
    tmp_path: Path,
) -> None:
    rows = [{"unit_id": "u1", "size": "big"}]
    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, rows, {"sizeSqM": {"sql": "CAST(size AS INTEGER)"}})
    assert "'big'" in str(raised.value)


# Header names --------------------------------------------------------------------------------


def test_a_column_renamed_as_a_repeat_of_an_earlier_one_is_named_in_the_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "units.csv").write_text("unit_id,Name,NAME\nu1,Flat,FLAT\n")
    document = accommodation_mapping({"name": "NAME"})
    with pytest.raises(MappingError) as raised:
        map_records(load_mapping(write_mapping(tmp_path, document)))
    assert "so this one is called 'NAME.1'" in str(raised.value)


@pytest.mark.parametrize("header", [" unit_id ", "Unit_ID", "UNIT_ID "])
def test_a_column_spelt_with_other_case_or_spaces_is_named_in_the_error(
    tmp_path: Path, header: str
) -> None:
    # The column list showed " unit_id " among the others, hard to tell from "unit_id".
    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, [{header: "u1"}], {})
    assert "unknown column 'unit_id' in input 'units'" in str(raised.value)
    assert f"the header has {header!r}: names must match exactly" in str(raised.value)


@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_a_header_read_as_one_column_names_the_delimiter_to_set(
    tmp_path: Path, delimiter: str
) -> None:
    (tmp_path / "units.csv").write_text(f"unit_id{delimiter}name\nu1{delimiter}Flat\n")
    mapping = load_mapping(write_mapping(tmp_path, accommodation_mapping({})))
    with pytest.raises(MappingError) as raised:
        map_records(mapping)
    message = str(raised.value)
    assert f"the header's column 'unit_id{delimiter}name'".replace("\t", "\\t") in message
    assert f"set the input's `delimiter:` to {json.dumps(delimiter)}" in message


# End to end: a Windows export and a workbook synced to the sandbox -------------------------

WINDOWS_EXPORT_MAPPING = """\
account: {constant: demo}
inputs:
  rooms: {path: rooms.xlsx}
  bookings: {path: bookings.csv, delimiter: ";", encoding: cp1252}
entities:
  accommodation:
    input: rooms
    fields:
      id: Zimmer
      name: Name
      street: {constant: Hauptstraße}
      streetNumber: {constant: "1"}
      city: {constant: München}
      country: {constant: DE}
      wifiName: {constant: net}
      wifiCode: {constant: wifi-code}
      doorCode: {constant: "4711"}
  reservation:
    input: bookings
    fields:
      id: Res
      status: {constant: CONFIRMED}
      createdAt: {column: Angelegt, format: ["%d.%m.%Y", "%d.%m.%y"]}
      primaryGuest: {firstName: Gast, lastName: GAST.1}  # GAST repeats Gast
      unitReservations:
        fields:
          id: Res
          unitId: Zimmer
          unitName: {template: "Zimmer {Zimmer}"}
          adults: {constant: 2}
          checkin: {column: Anreise, format: ["%d.%m.%Y", "%d.%m.%y"]}
          checkout: {column: Abreise, format: ["%d.%m.%Y", "%d.%m.%y"]}
          price: {column: Betrag, decimal: ","}
          currency: {constant: EUR}
"""


def test_a_windows_export_and_a_workbook_sync_their_values_as_the_pms_wrote_them(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    # Every shape at once, through the CLI and the service over a socket: rooms from a workbook
    # whose room numbers are formatted 000, bookings from a cp1252 file with CRLF, a header
    # naming "Gast" twice in two cases, decimal commas and two-digit years.
    book = openpyxl.Workbook()
    book.active.append(["Zimmer", "Name"])
    for number, name in [(7, "Süßes Zimmer"), (12, "Blick")]:
        book.active.append([number, name])
        book.active.cell(book.active.max_row, 1).number_format = "000"
    book.save(tmp_path / "rooms.xlsx")
    (tmp_path / "bookings.csv").write_bytes(
        "Res;Zimmer;Gast;GAST;Angelegt;Anreise;Abreise;Betrag\r\n"
        "4711;007;Jürgen;Groß;01.06.25;03.07.2025;06.07.25;1.234,50\r\n"
        "4712;012;Zoë;Weiß;01.06.2025;03.07.25;04.07.2025;99,5\r\n"
        "4713;012;Ann;Lee;01.06.2025;03.07.2025;04.07.2025;12.50\r\n".encode("cp1252")
    )
    (tmp_path / "mapping.yaml").write_text(WINDOWS_EXPORT_MAPPING, encoding="utf-8")
    env = {
        "PMS_SYNC_BASE_URL": clean_sandbox.base_url,
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "state" / "snapshot.duckdb"),
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_TOKENS_FILE": "",
    }

    result = CliRunner().invoke(main, ["sync", str(tmp_path / "mapping.yaml")], env=env)

    assert result.exit_code == 0, result.output
    assert "bookings.csv:3 reservation 4713 unitReservations.price" in result.output
    assert {record["id"] for record in clean_sandbox.records(entity="accommodation")} == {
        "007",
        "012",
    }
    stored = {r["id"]: r["resource"] for r in clean_sandbox.records(entity="reservation")}
    assert sorted(stored) == ["4711", "4712"]
    assert stored["4711"]["createdAt"] == "2025-06-01T00:00:00Z"
    assert stored["4711"]["primaryGuest"] == {"firstName": "Jürgen", "lastName": "Groß"}
    units = {key: resource["unitReservations"][0] for key, resource in stored.items()}
    assert (units["4711"]["unitId"], units["4711"]["checkout"]) == ("007", "2025-07-06")
    assert (units["4711"]["price"], units["4712"]["price"]) == (1234.5, 99.5)
    assert units["4712"]["checkin"] == "2025-07-03"


def test_a_utf8_export_declared_cp1252_is_named_as_such_not_as_an_unknown_column(
    tmp_path: Path,
) -> None:
    # Read as cp1252, the header "Straße" became "StraÃŸe": the run stopped on an unknown
    # column, hiding the encoding.
    (tmp_path / "units.csv").write_bytes("unit_id;Straße\nu1;Hauptstraße\n".encode())
    document = accommodation_mapping({"street": "Straße"})
    document["inputs"]["units"] |= {"delimiter": ";", "encoding": "cp1252"}
    with pytest.raises(SourceError) as raised:
        map_records(load_mapping(write_mapping(tmp_path, document)))
    assert str(raised.value).startswith(
        "units.csv is UTF-8, not cp1252: line 1 has 'ß', which cp1252 would read as 'ÃŸ'"
    )
