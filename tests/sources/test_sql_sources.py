"""SQL inputs over real connections: SQLite, PostgreSQL and MariaDB.

The server tests skip with the reason when the server does not answer, except under CI=true,
where a missing server is a failure. Each run loads the sample schema into its own PostgreSQL
schema / MariaDB database and drops it afterwards, so parallel runs never collide.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
import sqlalchemy as sa

from connector.contract import Entity
from connector.cursors import CursorKind, CursorValue
from connector.errors import MappingError, SourceError
from connector.mapping import load_mapping, map_records
from connector.sources import SqlSource
from connector.sources.cursors import largest_cursor
from tests.servers import mariadb_database, postgres_schema_url

EXAMPLE = Path(__file__).parents[2] / "mappings" / "sql_pms"
SQLITE_URL = f"sqlite:///{EXAMPLE / 'pms.sqlite'}"


def _generator():
    spec = importlib.util.spec_from_file_location("sql_pms_generate", EXAMPLE / "generate.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _load_sample(engine: sa.Engine) -> None:
    generator = _generator()
    sql = generator.for_dialect((EXAMPLE / "pms.sql").read_text(), engine.dialect.name)
    with engine.begin() as connection:
        for statement in generator.statements(sql):
            connection.execute(sa.text(statement))


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with postgres_schema_url("pms_sync_test") as url:
        _load_sample(sa.create_engine(url))
        yield url


@pytest.fixture(scope="module")
def mariadb_url() -> Iterator[str]:
    with mariadb_database("pms_sync_test") as url:
        _load_sample(sa.create_engine(url))
        yield url


def read(source: SqlSource, since: object = None) -> list[tuple[object, ...]]:
    with duckdb.connect() as connection:
        source.load_into(connection, "t", since=since)
        return connection.execute("SELECT * FROM t ORDER BY _row").fetchall()


def mapped(url: str, monkeypatch: pytest.MonkeyPatch) -> dict[Entity, list[str]]:
    monkeypatch.setenv("PMS_DB_URL", url)
    batches = map_records(load_mapping(EXAMPLE / "mapping.yaml"))
    for batch in batches.values():
        assert batch.quarantine.empty, batch.quarantine.to_string()
    return {entity: sorted(batch.records["payload"]) for entity, batch in batches.items()}


# ------------------------------------------------------------------------------- SQLite


def test_a_table_is_read_with_every_value_as_text() -> None:
    rows = read(SqlSource("units", SQLITE_URL, table="units"))
    assert len(rows) == 12
    first = rows[0]
    assert first[:4] == ("1", "1", "101", "Apartment 101")
    assert first[-2:] == ("units", 1)


def test_a_query_takes_bound_parameters() -> None:
    source = SqlSource(
        "stays",
        SQLITE_URL,
        query="SELECT id, adults FROM stays WHERE adults >= :minimum",
        params={"minimum": 3},
    )
    assert source.columns() == ["id", "adults"]
    assert {row[1] for row in read(source)} == {"3"}


def test_a_cursor_reads_only_rows_at_or_after_since() -> None:
    source = SqlSource("units", SQLITE_URL, table="units", cursor="updated_at")
    everything = read(source)
    newer = read(source, since="2025-01-01 08:00:00")
    assert len(everything) == 12
    # The boundary row is read again: unchanged, the diff makes it a skip.
    assert [row[0] for row in newer] == ["8", "9", "10", "11", "12"]
    assert source.max_cursor() == "2025-01-01 12:00:00"


def test_an_unknown_cursor_column_is_an_error_before_reading() -> None:
    with pytest.raises(SourceError, match="cursor column"):
        SqlSource("units", SQLITE_URL, table="units", cursor="changed").columns()


def test_an_unreachable_database_is_reported_without_its_password(tmp_path: Path) -> None:
    source = SqlSource("units", "postgresql+psycopg://pms:hunter2@127.0.0.1:1/db", table="units")
    with pytest.raises(SourceError) as raised:
        source.columns()
    assert "hunter2" not in str(raised.value)
    assert raised.value.source == "units"


def test_since_passed_to_map_records_reaches_the_cursor(tmp_path: Path) -> None:
    (tmp_path / "units.yaml").write_text(
        "account: {constant: demo}\n"
        f"inputs: {{units: {{type: sql, url: '{SQLITE_URL}', table: units, cursor: updated_at}}}}\n"
        "entities:\n"
        "  accommodation:\n"
        "    input: units\n"
        "    full_export: false\n"
        "    fields: {id: id, name: name, street: name, streetNumber: id, country: {constant: PL},\n"
        "             city: name, wifiName: name, wifiCode: name, doorCode: name}\n"
    )
    mapping = load_mapping(tmp_path / "units.yaml")
    batch = map_records(mapping, since={"units": datetime(2025, 1, 1, 10)})[Entity.ACCOMMODATION]
    assert sorted(batch.records["record_id"]) == ["10", "11", "12"]
    with pytest.raises(MappingError, match="since"):
        map_records(mapping, since={"rooms": 1})


def test_the_sql_example_reads_the_bundled_sqlite_file_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PMS_DB_URL", raising=False)
    records = mapped(SQLITE_URL, monkeypatch)
    assert len(records[Entity.ACCOMMODATION]) == 11  # the inactive unit is filtered out
    assert len(records[Entity.RESERVATION]) == 40
    multi_unit = [json.loads(p) for p in records[Entity.RESERVATION]]
    assert any(len(p["unitReservations"]) == 2 for p in multi_unit)


# --------------------------------------------------------------------- real servers


@pytest.mark.postgres
def test_postgresql_holding_the_same_schema_maps_to_the_same_records(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert mapped(postgres_url, monkeypatch) == mapped(SQLITE_URL, monkeypatch)


@pytest.mark.postgres
def test_postgresql_cursor_and_parameters_work_over_a_real_connection(postgres_url: str) -> None:
    source = SqlSource("units", postgres_url, table="units", cursor="updated_at", chunk_size=5)
    newer = read(source, since=datetime(2025, 1, 1, 8))
    assert [row[0] for row in newer] == ["8", "9", "10", "11", "12"]
    assert newer[0][-1] == 1


@pytest.mark.mariadb
def test_mariadb_holding_the_same_schema_maps_to_the_same_records(
    mariadb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert mapped(mariadb_url, monkeypatch) == mapped(SQLITE_URL, monkeypatch)


@pytest.mark.mariadb
def test_mariadb_times_and_decimals_arrive_as_text(mariadb_url: str) -> None:
    source = SqlSource(
        "stays",
        mariadb_url,
        query="SELECT eta, amount FROM stays WHERE eta IS NOT NULL ORDER BY id",
    )
    first = read(source)[0]
    assert first[0].count(":") == 2  # TIME arrives as H:MM:SS text
    assert "." in first[1]


def test_a_postgresql_source_that_disappears_mid_read_is_a_source_error_naming_the_input(
    postgres_url: str,
) -> None:
    # The server ends its own session while the rows of the 5th chunk are being produced: a
    # real connection loss mid-stream, after earlier chunks were already loaded.
    query = (
        "SELECT n::text AS booking_no, "
        "CASE WHEN n = 4500 THEN pg_terminate_backend(pg_backend_pid())::int ELSE 0 END "
        "AS marker FROM generate_series(1, 10000) AS n"
    )
    source = SqlSource("bookings", postgres_url, query=query, chunk_size=1000)
    connection = duckdb.connect()

    with pytest.raises(SourceError) as caught:
        source.load_into(connection, "bookings")

    message = str(caught.value)
    assert caught.value.source == "bookings"
    assert "cannot read from postgresql" in message
    assert "input bookings" in message


@pytest.mark.postgres
def test_a_cursor_column_of_text_is_compared_as_text() -> None:
    # Times kept as text (an export loaded as is): the value read is bound back as text.
    with postgres_schema_url("pms_sync_text_cursor") as url:
        engine = sa.create_engine(url)
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE t (id INTEGER, at TEXT)"))
            connection.execute(
                sa.text(
                    "INSERT INTO t VALUES (1, '2026-01-01T09:00:00Z'), "
                    "(2, '2026-01-01T10:00:00Z'), (3, '2026-01-01T11:00:00Z')"
                )
            )
        engine.dispose()
        source = SqlSource("t", url, table="t", cursor="at")
        with duckdb.connect() as connection:
            source.load_into(connection, "t")
            largest = largest_cursor(connection, "t", "at", text=source.cursor_is_text)
        assert source.cursor_is_text and largest == CursorValue(
            "2026-01-01T11:00:00Z", CursorKind.TEXT
        )
        since = CursorValue("2026-01-01T10:00:00Z", CursorKind.TIMESTAMPTZ)
        assert [row[0] for row in read(source, since=since)] == ["2", "3"]
