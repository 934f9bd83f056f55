"""Rows written back to the PMS: upserted into a table of its database (SQLite, PostgreSQL)
or written whole to a CSV/Parquet file readable by its owner only."""

from __future__ import annotations

import contextlib
import re
import stat
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from connector.mapping.loop_sections import Destination
from connector.writeback import WriteBackError, write_back
from tests.loop.loop_samples import table_rows
from tests.servers import mariadb_database, postgres_schema

TYPES = {"checkin": "date", "seen": "boolean", "fetched_at": "timestamp"}


def links(*guest_apps: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "reservation_id": [f"B{n}" for n in range(len(guest_apps))],
            "guest_app": list(guest_apps),
            "checkin": [date(2025, 3, 1 + n) for n in range(len(guest_apps))],
            "seen": [True] + [None] * (len(guest_apps) - 1),
            "fetched_at": [datetime(2025, 2, 1, 8, 0)] * len(guest_apps),
        }
    )


def test_a_missing_sqlite_table_is_created_and_rows_are_upserted_by_reservation(
    tmp_path: Path,
) -> None:
    destination = Destination(sql={"url": f"sqlite:///{tmp_path}/pms.db", "table": "links"})
    write_back(links("a", "b"), destination, base_dir=tmp_path, key=["reservation_id"])

    result = write_back(
        links("a2", "b", "c"), destination, base_dir=tmp_path, key=["reservation_id"]
    )

    rows = table_rows(f"sqlite:///{tmp_path}/pms.db", "links")
    assert sorted((r["reservation_id"], r["guest_app"]) for r in rows) == [
        ("B0", "a2"),
        ("B1", "b"),
        ("B2", "c"),
    ]
    assert (result.rows, result.created) == (3, False)


def test_a_relative_sqlite_path_is_relative_to_the_mapping_folder(tmp_path: Path) -> None:
    destination = Destination(sql={"url": "sqlite:///pms.db", "table": "links"})

    write_back(links("a"), destination, base_dir=tmp_path, key=["reservation_id"])

    assert [r["guest_app"] for r in table_rows(f"sqlite:///{tmp_path}/pms.db", "links")] == ["a"]


@pytest.mark.postgres
def test_postgres_table_is_created_typed_and_upserted(tmp_path: Path) -> None:
    with postgres_schema() as (url, schema):
        destination = Destination(sql={"url": url, "table": "guest_links", "schema": schema})
        write_back(
            links("a", "b"),
            destination,
            base_dir=tmp_path,
            key=["reservation_id"],
            column_types=TYPES,
        )

        write_back(
            links("a2"), destination, base_dir=tmp_path, key=["reservation_id"], column_types=TYPES
        )

        rows = sorted(table_rows(url, "guest_links", schema), key=lambda r: r["reservation_id"])
        assert [(r["reservation_id"], r["guest_app"]) for r in rows] == [("B0", "a2"), ("B1", "b")]
        assert rows[0]["checkin"] == date(2025, 3, 1) and rows[0]["seen"] is True
        engine = sa.create_engine(url)
        columns = {c["name"]: c for c in sa.inspect(engine).get_columns("guest_links", schema)}
        engine.dispose()
        assert isinstance(columns["fetched_at"]["type"], sa.DateTime)
        assert isinstance(columns["seen"]["type"], sa.Boolean)


def test_an_existing_table_without_a_column_is_refused_naming_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/pms.db"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE links (reservation_id TEXT PRIMARY KEY)"))
    engine.dispose()
    destination = Destination(sql={"url": url, "table": "links"})

    with pytest.raises(WriteBackError, match=r"without the column\(s\) \['guest_app'"):
        write_back(links("a"), destination, base_dir=tmp_path, key=["reservation_id"])


def test_a_database_password_never_appears_in_the_error(tmp_path: Path) -> None:
    destination = Destination(
        sql={"url": "postgresql+psycopg://pms:hunter2-secret@127.0.0.1:1/pms", "table": "t"}
    )

    with pytest.raises(WriteBackError) as raised:
        write_back(links("a"), destination, base_dir=tmp_path, key=["reservation_id"])

    assert "hunter2-secret" not in str(raised.value)
    assert "127.0.0.1:1/pms" in str(raised.value)


@pytest.mark.parametrize("name", ["links.csv", "links.parquet"])
def test_a_file_is_rewritten_whole_and_readable_by_its_owner_only(
    tmp_path: Path, name: str
) -> None:
    destination = Destination(file=f"out/{name}")
    write_back(links("a", "b"), destination, base_dir=tmp_path, key=["reservation_id"])

    write_back(links("c"), destination, base_dir=tmp_path, key=["reservation_id"])

    path = tmp_path / "out" / name
    read = pd.read_csv(path) if name.endswith(".csv") else pd.read_parquet(path)
    assert read["guest_app"].tolist() == ["c"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"file": "links.xlsx"}, "expected a name ending in .csv or .parquet"),
        ({}, "either `sql: {url, table}` or `file: PATH`"),
        ({"file": "a.csv", "sql": {"url": "sqlite://", "table": "t"}}, "either"),
    ],
)
def test_a_destination_is_one_table_or_one_csv_or_parquet_file(given: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Destination.model_validate(given)


LINK_KEY = ["account_id", "reservation_id"]


def two_hotels(*guest_apps: str) -> pd.DataFrame:
    """Reservation R1 of hotel acc-1 and R1 of hotel acc-2 (ids are unique per account)."""
    return pd.DataFrame(
        {
            "reservation_id": ["R1", "R1"],
            "account_id": ["acc-1", "acc-2"],
            "guest_app": list(guest_apps),
            "checkin": [date(2025, 3, 1)] * 2,
            "fetched_at": [datetime(2025, 2, 1, 8, 0)] * 2,
        }
    )


@contextlib.contextmanager
def database(kind: str, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    """(url, schema) of an empty database of ``kind``."""
    if kind == "postgresql":
        with postgres_schema() as (url, schema):
            yield url, schema
    elif kind == "mariadb":
        with mariadb_database() as url:
            yield url, None
    else:
        yield f"sqlite:///{tmp_path}/pms.db", None


DATABASES = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mariadb", marks=pytest.mark.mariadb),
]


@pytest.mark.parametrize("kind", DATABASES)
def test_one_reservation_id_of_two_hotels_is_two_rows(kind: str, tmp_path: Path) -> None:
    with database(kind, tmp_path) as (url, schema):
        destination = Destination(sql={"url": url, "table": "guest_links", "schema": schema})
        write_back(two_hotels("a", "b"), destination, base_dir=tmp_path, key=LINK_KEY)

        result = write_back(two_hotels("a2", "b"), destination, base_dir=tmp_path, key=LINK_KEY)

        rows = table_rows(url, "guest_links", schema)
        assert sorted((r["account_id"], r["reservation_id"], r["guest_app"]) for r in rows) == [
            ("acc-1", "R1", "a2"),
            ("acc-2", "R1", "b"),
        ]
        assert result.rows == len(rows)


@pytest.mark.parametrize("kind", DATABASES)
def test_a_table_keyed_by_reservation_alone_is_refused_with_the_statement_that_rekeys_it(
    kind: str, tmp_path: Path
) -> None:
    with database(kind, tmp_path) as (url, schema):
        destination = Destination(sql={"url": url, "table": "guest_links", "schema": schema})
        # The table an earlier version created: keyed by the reservation id alone.
        write_back(two_hotels("a", "b")[:1], destination, base_dir=tmp_path, key=["reservation_id"])

        with pytest.raises(WriteBackError) as raised:
            write_back(two_hotels("a", "b"), destination, base_dir=tmp_path, key=LINK_KEY)

        message = str(raised.value)
        assert (
            "table guest_links is keyed by (reservation_id), but rows are written by "
            "(account_id, reservation_id): rows differing in account_id alone would overwrite "
            "each other. Give it that primary key (" in message
        )
        assert len(table_rows(url, "guest_links", schema)) == 1  # nothing written
        if kind == "sqlite":
            assert "sqlite cannot change a primary key in place" in message
            return
        # The statement advised re-keys the table, its rows kept; then both hotels fit.
        statement = re.search(r"primary key \((ALTER TABLE .+?)\), write to", message)
        assert statement is not None, message
        engine = sa.create_engine(url)
        with engine.begin() as connection:
            connection.execute(sa.text(statement.group(1)))
        engine.dispose()
        result = write_back(two_hotels("a", "b"), destination, base_dir=tmp_path, key=LINK_KEY)
        assert result.rows == len(table_rows(url, "guest_links", schema)) == 2


def test_rows_sharing_their_key_are_refused_instead_of_overwriting_each_other(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/pms.db"
    destination = Destination(sql={"url": url, "table": "guest_links", "key": ["reservation_id"]})

    with pytest.raises(WriteBackError, match=r"2 rows share their key \(reservation_id\)"):
        write_back(two_hotels("a", "b"), destination, base_dir=tmp_path, key=LINK_KEY)

    engine = sa.create_engine(url)
    assert not sa.inspect(engine).has_table("guest_links")
    engine.dispose()


def test_a_table_without_a_key_is_refused_naming_the_key_it_needs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/pms.db"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "CREATE TABLE links (reservation_id TEXT, account_id TEXT, guest_app TEXT, "
                "checkin DATE, fetched_at TIMESTAMP)"
            )
        )
    engine.dispose()
    destination = Destination(sql={"url": url, "table": "links"})

    with pytest.raises(WriteBackError, match=r"has no primary or unique key on \(account_id, "):
        write_back(two_hotels("a", "b"), destination, base_dir=tmp_path, key=LINK_KEY)
