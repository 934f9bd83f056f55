"""The same export read from every kind of source maps to byte-identical payloads.

One small bookings export, with empty and whitespace-only texts, NULLs and a MySQL zero date,
is written as a CSV file, an XLSX workbook and a table of SQLite, PostgreSQL and MariaDB, then
mapped with mappings that differ only in their input. The server tests skip with the reason
when the server does not answer, except under CI=true, where a missing server is a failure.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import openpyxl
import pytest
import sqlalchemy as sa

from connector.contract import Entity
from connector.errors import MappingError
from connector.mapping import load_mapping, map_records
from connector.sources import SqlSource, open_source
from tests.servers import mariadb_database, postgres_schema_url

ZERO_DATE = "0000-00-00 00:00:00"
COLUMNS = (
    "code",
    "status",
    "created_at",
    "updated_at",
    "first_name",
    "last_name",
    "email",
    "arrival",
    "departure",
    "unit",
    "adults",
)
ROWS: list[tuple[str | int | None, ...]] = [
    ("R1", "confirmed", "2025-01-02 10:30:00", "2025-01-03 08:00:00", "Anna", "Nowak",
     "anna@example.com", "2025-03-01", "2025-03-04", "U1", 2),
    ("R2", "", "2025-01-02 11:00:00", ZERO_DATE, "Ben", "", "  ",
     "2025-03-02", "2025-03-05", "U2", 1),
    ("R3", " \t ", "2025-01-02 12:00:00", None, "Cleo", None, "",
     "2025-03-03", "2025-03-06", "U1", 3),
]  # fmt: skip

ENTITIES = """\
entities:
  reservation:
    input: bookings
    fields:
      id: code
      status: {column: status, default: confirmed}
      createdAt: created_at
      updatedAt: updated_at
      primaryGuest:
        firstName: first_name
        lastName: last_name
        email: email
      unitReservations:
        fields:
          id: code
          unitId: unit
          unitName: unit
          checkin: arrival
          checkout: departure
          adults: adults
"""

SQL_INPUT = 'type: sql, url: "${ALIKE_DB_URL}", table: bookings'

# The column types each database would hold the export in; SQLite and PostgreSQL cannot hold
# a zero date, so there the PMS wrote it as text.
TYPES = {
    "sqlite": {"created_at": "TEXT", "updated_at": "TEXT", "arrival": "TEXT", "departure": "TEXT"},
    "postgresql": {
        "created_at": "TIMESTAMP",
        "updated_at": "VARCHAR(30)",
        "arrival": "DATE",
        "departure": "DATE",
    },
    "mysql": {
        "created_at": "DATETIME",
        "updated_at": "DATETIME",
        "arrival": "DATE",
        "departure": "DATE",
    },
}


def _create_bookings(url: str) -> None:
    engine = sa.create_engine(url)
    types = TYPES[engine.dialect.name]
    definitions = ", ".join(
        f"{column} {types.get(column, 'INTEGER' if column == 'adults' else 'VARCHAR(40)')}"
        for column in COLUMNS
    )
    placeholders = ", ".join(f":{column}" for column in COLUMNS)
    with engine.begin() as connection:
        if engine.dialect.name == "mysql":
            # A PMS on MySQL writes zero dates; the strict session default would refuse one.
            connection.execute(sa.text("SET SESSION sql_mode = ''"))
        connection.execute(sa.text(f"CREATE TABLE bookings ({definitions})"))
        connection.execute(
            sa.text(f"INSERT INTO bookings VALUES ({placeholders})"),
            [dict(zip(COLUMNS, row, strict=True)) for row in ROWS],
        )
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'pms.sqlite'}"
    _create_bookings(url)
    return url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with postgres_schema_url("pms_sync_alike") as url:
        _create_bookings(url)
        yield url


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    with mariadb_database("pms_sync_alike") as url:
        _create_bookings(url)
        yield url


def _as_text(value: str | int | None) -> str:
    return "" if value is None else str(value)


def _input(kind: str, folder: Path, request: pytest.FixtureRequest) -> str:
    """The input spec of the export as ``kind``, its file or table written."""
    if kind == "csv":
        with (folder / "bookings.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows([[_as_text(value) for value in row] for row in ROWS])
        return "type: csv, path: bookings.csv"
    if kind == "xlsx":
        workbook = openpyxl.Workbook()
        sheet = workbook.active
        sheet.append(COLUMNS)
        for row in ROWS:
            sheet.append(list(row))
        workbook.save(folder / "bookings.xlsx")
        return "type: xlsx, path: bookings.xlsx"
    fixture = {"sqlite": "sqlite_url", "postgresql": "postgres_url", "mariadb": "mariadb_url"}
    request.getfixturevalue("monkeypatch").setenv(
        "ALIKE_DB_URL", request.getfixturevalue(fixture[kind])
    )
    return SQL_INPUT


def _payloads(kind: str, folder: Path, request: pytest.FixtureRequest) -> list[str]:
    folder.mkdir()
    mapping = folder / "mapping.yaml"
    spec = f'{{{_input(kind, folder, request)}, null_values: ["{ZERO_DATE}"]}}'
    mapping.write_text(f"account: {{constant: demo}}\ninputs:\n  bookings: {spec}\n{ENTITIES}")
    batch = map_records(load_mapping(mapping))[Entity.RESERVATION]
    assert batch.quarantine.empty, batch.quarantine.to_string()
    return sorted(batch.records["payload"])


@pytest.mark.parametrize(
    "kind",
    [
        "csv",
        "xlsx",
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ],
)
def test_the_same_export_maps_to_byte_identical_payloads_from_every_source(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    payloads = _payloads(kind, tmp_path / kind, request)
    reference = payloads if kind == "csv" else _payloads("csv", tmp_path / "csv", request)

    assert [payload.encode() for payload in payloads] == [p.encode() for p in reference]
    first, second, third = (json.loads(payload) for payload in payloads)
    assert [first["status"], second["status"], third["status"]] == ["confirmed"] * 3
    assert first["primaryGuest"] == {
        "firstName": "Anna",
        "lastName": "Nowak",
        "email": "anna@example.com",
    }
    # Empty and whitespace-only texts are missing: the members are left out.
    assert second["primaryGuest"] == {"firstName": "Ben"}
    assert third["primaryGuest"] == {"firstName": "Cleo"}
    # The zero date is one of the input's null_values; the NULL is missing too.
    assert "updatedAt" in first
    assert "updatedAt" not in second
    assert "updatedAt" not in third


def test_a_database_reads_blank_text_and_its_null_values_as_missing(sqlite_url: str) -> None:
    source = SqlSource(
        "bookings",
        sqlite_url,
        query="SELECT code, status, updated_at, last_name FROM bookings ORDER BY code",
        null_values=["", ZERO_DATE],
    )
    with duckdb.connect() as connection:
        source.load_into(connection, "t")
        rows = connection.execute("SELECT * EXCLUDE (_src) FROM t ORDER BY _row").fetchall()
    assert rows == [
        ("R1", "confirmed", "2025-01-03 08:00:00", "Nowak", 1),
        ("R2", None, None, None, 2),
        ("R3", None, None, None, 3),
    ]


INJECTION = "R1' OR '1'='1"


def _query_mapping(folder: Path, query_input: str) -> Path:
    mapping = folder / "mapping.yaml"
    mapping.write_text(f"account: {{constant: demo}}\n{query_input}\n{ENTITIES}")
    return mapping


def _rows_read(mapping: Path) -> int:
    loaded = load_mapping(mapping)
    source = open_source("bookings", loaded.inputs["bookings"], mapping.parent)
    with duckdb.connect() as connection:
        return source.load_into(connection, "t")


@pytest.mark.parametrize(
    "database",
    [
        "sqlite_url",
        pytest.param("postgres_url", marks=pytest.mark.postgres),
        pytest.param("mariadb_url", marks=pytest.mark.mariadb),
    ],
)
def test_a_value_reaches_the_query_as_a_bind_parameter_never_as_sql_text(
    database: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALIKE_DB_URL", request.getfixturevalue(database))
    monkeypatch.setenv("ALIKE_CODE", INJECTION)
    bound = _query_mapping(
        tmp_path,
        "inputs:\n"
        "  bookings:\n"
        "    type: sql\n"
        '    url: "${ALIKE_DB_URL}"\n'
        "    query: SELECT * FROM bookings WHERE code = :code\n"
        '    params: {code: "${ALIKE_CODE}"}',
    )
    assert _rows_read(bound) == 0  # the whole value is one code, which no row has
    monkeypatch.setenv("ALIKE_CODE", "R1")
    assert _rows_read(bound) == 1

    monkeypatch.setenv("ALIKE_CODE", INJECTION)
    pasted = _query_mapping(
        tmp_path,
        "inputs:\n"
        "  bookings:\n"
        "    type: sql\n"
        '    url: "${ALIKE_DB_URL}"\n'
        "    query: SELECT * FROM bookings WHERE code = '${ALIKE_CODE}'",
    )
    with pytest.raises(MappingError):
        _rows_read(pasted)  # pasted, the value would have read every row


def test_a_reference_in_query_text_is_refused_at_load_showing_the_params_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOTEL_CODE", "BER")
    mapping = _query_mapping(
        tmp_path,
        "inputs:\n"
        "  bookings:\n"
        "    type: sql\n"
        "    url: sqlite:///pms.sqlite\n"
        "    query: |\n"
        "      SELECT * FROM bookings\n"
        "      WHERE hotel = '${HOTEL_CODE}'",
    )
    with pytest.raises(MappingError) as refused:
        load_mapping(mapping)
    message = str(refused.value)
    assert "inputs.bookings.query" in message
    assert "mapping.yaml:6:" in message
    shown = ':hotel_code in the query and give its value in params: {hotel_code: "${HOTEL_CODE}"}'
    assert shown in message
    assert "BER" not in message


@pytest.mark.parametrize(
    ("query_and_params", "said"),
    [
        (
            "query: SELECT * FROM bookings WHERE code = :code AND unit = :unit\n"
            "    params: {code: R1}",
            "the query's bind parameters :unit have no value; give them in params: {unit: ...}",
        ),
        (
            "query: SELECT * FROM bookings WHERE code = :code\n    params: {code: R1, unit: U1}",
            "params unit are not bind parameters of a query",
        ),
        ("table: bookings\n    params: {code: R1}", "params code are not bind parameters"),
    ],
)
def test_params_and_the_query_s_bind_parameters_must_match_at_load(
    tmp_path: Path, query_and_params: str, said: str
) -> None:
    mapping = _query_mapping(
        tmp_path,
        f"inputs:\n  bookings:\n    type: sql\n    url: sqlite:///pms.sqlite\n    {query_and_params}",
    )
    with pytest.raises(MappingError) as refused:
        load_mapping(mapping)
    assert said in str(refused.value)
    assert "inputs.bookings" in str(refused.value)
