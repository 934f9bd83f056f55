"""The Arrow reader and the SQLAlchemy reader give every value of a table the same text.

One table per database, with NULLs, empty and blank texts, decimals (one below 1e-6, which
Python writes with an exponent), dates, timestamps with and without a time zone and a
fraction, and text beyond ASCII, is loaded by both readers and mapped by both: the loaded
rows and the payloads must be identical, byte for byte. The server tests skip with the
reason when the server does not answer, except under CI=true, where a missing server is a
failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import sqlalchemy as sa

from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.sources import SqlSource
from tests.servers import mariadb_database, postgres_schema_url

NAMES = "Zoë Ärger-Łukasiewicz 日本 🏨"

# Per database: the table's columns and its rows, written as SQL literals so each database
# parses them itself (a time zone offset, a fraction, a zero date).
TABLES = {
    "sqlite": (
        "id INTEGER, code TEXT, name TEXT, note TEXT, price TEXT, day TEXT, at TEXT, "
        "at_tz TEXT, adults INTEGER, data BLOB",
        [
            f"1, 'R1', '{NAMES}', 'late', '12.50', '2025-03-01', '2025-01-02 10:30:00', "
            "'2025-01-02 10:30:00+02:00', 2, X'6869'",
            "2, 'R2', '', '   ', '0.0000001', '2025-03-02', '2025-01-02 10:30:00.123', "
            "'2025-06-02T10:30:00Z', 1, NULL",
            "3, 'R3', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
        ],
    ),
    "postgresql": (
        "id INTEGER, code TEXT, name TEXT, note VARCHAR(40), price NUMERIC(10, 2), "
        "amount NUMERIC, ratio DOUBLE PRECISION, small REAL, day DATE, at TIMESTAMP, "
        "at_tz TIMESTAMPTZ, eta TIME, paid BOOLEAN, big BIGINT, data JSONB, ref UUID, "
        "raw BYTEA, adults SMALLINT",
        [
            f"1, 'R1', '{NAMES}', 'late', 12.50, 3.14159, 1.5, 0.1, '2025-03-01', "
            "'2025-01-02 10:30:00', '2025-01-02 10:30:00+02', '10:30:00', true, "
            "9007199254740993, '{\"a\": [1, \"ü\"]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
            "'\\x6869', 2",
            "2, 'R2', '', '   ', -0.01, 0.0000001, 1e-5, 1e20, '0001-01-01', "
            "'2025-01-02 10:30:00.123', '2025-06-02 10:30:00.5+00', '10:30:00.25', false, "
            "-1, 'null', NULL, NULL, 1",
            "3, 'R3', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
            "NULL, NULL, NULL, NULL",
        ],
    ),
    "mysql": (
        "id INT, code VARCHAR(10), name VARCHAR(80), note TEXT, price DECIMAL(10, 2), "
        "tiny DECIMAL(20, 12), ratio DOUBLE, small FLOAT, day DATE, at DATETIME, "
        "at_ms DATETIME(3), at_tz TIMESTAMP NULL, eta TIME, paid TINYINT(1), big BIGINT, "
        "data JSON, adults SMALLINT",
        [
            f"1, 'R1', '{NAMES}', 'late', 12.50, 3.14159, 1.5, 0.1, '2025-03-01', "
            "'2025-01-02 10:30:00', '2025-01-02 10:30:00.5', '2025-01-02 10:30:00', "
            "'10:30:00', 1, 9007199254740993, '{\"a\": [1, \"ü\"]}', 2",
            "2, 'R2', '', '   ', -0.01, 0.0000001, 1e-5, 1e20, '0000-00-00', "
            "'0000-00-00 00:00:00', '2025-01-02 10:30:00.000', '2025-06-02 10:30:00', "
            "'-25:00:00', 0, -1, 'null', 1",
            "3, 'R3', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
            "NULL, NULL, NULL",
        ],
    ),
}


def _create(url: str) -> None:
    engine = sa.create_engine(url)
    columns, rows = TABLES[engine.dialect.name]
    suffix = " CHARACTER SET utf8mb4" if engine.dialect.name == "mysql" else ""
    with engine.begin() as connection:
        if engine.dialect.name == "mysql":
            # A PMS on MySQL writes zero dates; the strict session default would refuse one.
            connection.execute(sa.text("SET SESSION sql_mode = ''"))
        connection.execute(sa.text(f"CREATE TABLE stays ({columns}){suffix}"))
        for row in rows:
            # Literal SQL on purpose: the database, not a driver, parses each value.
            connection.exec_driver_sql(
                f"INSERT INTO stays VALUES ({row})".replace("%", "%%")
                if engine.dialect.name != "sqlite"
                else f"INSERT INTO stays VALUES ({row})"
            )
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'pms.sqlite'}"
    _create(url)
    return url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    # A session zone other than UTC: a timestamptz is written in it by both readers.
    with postgres_schema_url("pms_sync_arrow", "-ctimezone=Europe/Warsaw") as url:
        _create(url)
        yield url


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    with mariadb_database("pms_sync_arrow") as url:
        _create(url)
        yield url


DATABASES = [
    "sqlite_url",
    pytest.param("postgres_url", marks=pytest.mark.postgres),
    pytest.param("mariadb_url", marks=pytest.mark.mariadb),
]


def _rows(source: SqlSource, arrow: bool) -> list[tuple[object, ...]]:
    with duckdb.connect() as connection:
        if arrow:
            # The Arrow reader itself, never its fallback.
            source._load_arrow(connection, "t", source.columns())
        else:
            source.load_into(connection, "t")
        return connection.execute("SELECT * FROM t ORDER BY _row").fetchall()


@pytest.mark.parametrize("database", DATABASES)
def test_the_arrow_reader_loads_the_same_text_as_the_sqlalchemy_reader(
    database: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(database)
    arrow = SqlSource("stays", url, table="stays", chunk_size=2)
    assert arrow.arrow_read()
    fallback = SqlSource("stays", url, table="stays", chunk_size=2, reader="sqlalchemy")
    assert not fallback.arrow_read()

    rows = _rows(arrow, arrow=True)

    assert rows == _rows(fallback, arrow=False)
    assert [row[-1] for row in rows] == [1, 2, 3]  # numbered across chunks
    assert rows[0][2] == NAMES
    assert rows[1][2:4] == (None, None)  # '' and '   ' are missing
    assert all(value is None for value in rows[2][2:-3])


MAPPING = """\
account: {{constant: demo}}
inputs:
  stays: {{type: sql, url: "{url}", table: stays, reader: {reader}}}
entities:
  reservation:
    input: stays
    fields:
      id: code
      status: {{column: note, default: confirmed}}
      createdAt: at
      updatedAt: at_tz
      primaryGuest:
        firstName: name
        lastName: {{column: note, default: "-"}}
      unitReservations:
        fields:
          id: code
          unitId: id
          unitName: code
          checkin: {{column: day, default: "2025-01-01"}}
          checkout: {{constant: "2030-01-01"}}
          adults: adults
"""


@pytest.mark.parametrize("database", DATABASES)
def test_both_readers_map_a_table_to_byte_identical_payloads(
    database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue(database)
    payloads = {}
    for reader in ("auto", "sqlalchemy"):
        mapping = tmp_path / f"{reader}.yaml"
        mapping.write_text(MAPPING.format(url=url, reader=reader), encoding="utf-8")
        batch = map_records(load_mapping(mapping))[Entity.RESERVATION]
        payloads[reader] = sorted(batch.records["payload"]) + sorted(
            batch.quarantine.astype(str).to_numpy().ravel().tolist()
        )
    assert [p.encode() for p in payloads["auto"]] == [p.encode() for p in payloads["sqlalchemy"]]
    assert any(NAMES in payload for payload in payloads["auto"])


def test_a_sqlite_column_of_mixed_storage_classes_is_read_through_sqlalchemy(
    tmp_path: Path,
) -> None:
    # ADBC types a column by its first rows; sqlite3 gives each value its own class.
    url = f"sqlite:///{tmp_path / 'mixed.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE t (a, b REAL)"))
        connection.execute(
            sa.text("INSERT INTO t VALUES (:a, :b)"),
            [{"a": 1, "b": 2}, {"a": "x", "b": 2.5}, {"a": 2.0, "b": None}],
        )
    engine.dispose()
    auto = SqlSource("t", url, table="t", chunk_size=1)
    fallback = SqlSource("t", url, table="t", reader="sqlalchemy")
    with duckdb.connect() as connection:
        auto.load_into(connection, "t")
        loaded = connection.execute("SELECT a, b, _row FROM t ORDER BY _row").fetchall()
    assert loaded == [("1", "2.0", 1), ("x", "2.5", 2), ("2.0", None, 3)]
    assert loaded == [row[:2] + row[-1:] for row in _rows(fallback, arrow=False)]


def test_a_read_with_bind_parameters_goes_through_sqlalchemy(sqlite_url: str) -> None:
    source = SqlSource(
        "stays", sqlite_url, query="SELECT * FROM stays WHERE id >= :low", params={"low": 2}
    )
    assert not source.arrow_read()
    assert not SqlSource("stays", sqlite_url, table="stays", cursor="at").arrow_read("2025")
    assert [row[0] for row in _rows(source, arrow=False)] == ["2", "3"]
