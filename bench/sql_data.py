"""The benchmark's export as database tables: ``python -m bench.sql_data --size N``.

Each CSV file of the export (and of its 1 %-changed twin) becomes a table of text columns in
the local PostgreSQL (a schema per export) and MariaDB (a database per export), loaded by the
servers' own bulk loaders; the mappings are the CSV ones with ``type: sql`` inputs. Reused when
the tables already hold the export's rows.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from bench.data import Dataset, prepare

POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
MARIADB_URL = os.environ.get("BENCH_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
TABLES = ("rooms", "room_types", "bookings")
DATABASES = ("postgresql", "mariadb")


@dataclass(frozen=True)
class SqlDataset:
    """The mappings reading one export from a database: as it is, and 1 % changed (also with
    an incremental cursor on the bookings; ``since`` is the export's largest update time)."""

    database: str
    mapping: Path
    changed_mapping: Path
    incremental_mapping: Path
    url: str
    base_table: str  # the export's bookings table, as the mapping names it


def _namespace(dataset: Dataset, variant: str) -> str:
    return f"pms_bench_{dataset.size}_{variant}"


def _header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def _loaded(connection: sa.Connection, folder: Path, namespace: str, bookings: str) -> bool:
    """Whether the schema or database already holds every table and all the export's bookings."""
    expected = sum(1 for _ in (folder / "bookings.csv").open("rb")) - 1
    present = connection.execute(
        sa.text("SELECT count(*) FROM information_schema.tables WHERE table_schema = :s"),
        {"s": namespace},
    ).scalar()
    if present != len(TABLES):
        return False
    return connection.execute(sa.text(f"SELECT count(*) FROM {bookings}")).scalar() == expected


def _load_postgres(folder: Path, schema: str) -> str:
    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as connection:
        if _loaded(connection, folder, schema, f'"{schema}".bookings'):
            return schema
        connection.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        raw = connection.connection.driver_connection
        assert raw is not None
        for table in TABLES:
            path = folder / f"{table}.csv"
            columns = ", ".join(f'"{column}" TEXT' for column in _header(path))
            connection.execute(sa.text(f'CREATE TABLE "{schema}"."{table}" ({columns})'))
            with (
                raw.cursor() as cursor,
                cursor.copy(
                    f'COPY "{schema}"."{table}" FROM STDIN (FORMAT csv, HEADER true)'
                ) as copy,
                path.open("rb") as handle,
            ):
                while block := handle.read(1 << 20):
                    copy.write(block)
        connection.execute(sa.text(f'ANALYZE "{schema}".bookings'))
    engine.dispose()
    return schema


def _load_mariadb(folder: Path, database: str) -> str:
    engine = sa.create_engine(MARIADB_URL, connect_args={"local_infile": True})
    with engine.begin() as connection:
        if _loaded(connection, folder, database, f"`{database}`.bookings"):
            return database
        connection.execute(sa.text(f"DROP DATABASE IF EXISTS `{database}`"))
        connection.execute(sa.text(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4"))
        for table in TABLES:
            path = folder / f"{table}.csv"
            columns = ", ".join(f"`{column}` TEXT" for column in _header(path))
            connection.execute(sa.text(f"CREATE TABLE `{database}`.`{table}` ({columns})"))
            connection.exec_driver_sql(
                f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE `{database}`.`{table}` "
                "CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' "
                "LINES TERMINATED BY '\\n' IGNORE 1 LINES"
            )
    engine.dispose()
    return database


def _mapping(csv_mapping: Path, target: Path, url: str, namespace: str) -> Path:
    """The CSV mapping with each ``{type: csv, path: data/T.csv}`` input read from table T."""
    text = csv_mapping.read_text(encoding="utf-8")
    text = re.sub(
        r"\{type: csv, path: data/(\w+)\.csv\}",
        lambda found: f'{{type: sql, url: "{url}", table: {namespace}.{found.group(1)}}}',
        text,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def prepare_sql(dataset: Dataset, database: str) -> SqlDataset:
    """Load (or reuse) ``dataset`` into ``database`` (postgresql or mariadb)."""
    mappings = []
    for variant, home in (("base", dataset.base), ("changed", dataset.changed)):
        namespace = _namespace(dataset, variant)
        if database == "postgresql":
            _load_postgres(home / "data", namespace)
            url = POSTGRES_URL
        else:
            _load_mariadb(home / "data", namespace)
            url = MARIADB_URL
        target = home.parent / f"{database}-{variant}" / "mapping.yaml"
        mappings.append(_mapping(home / "mapping.yaml", target, url, namespace))
    incremental = mappings[1].parent.parent / f"{database}-incremental" / "mapping.yaml"
    return SqlDataset(
        database,
        mappings[0],
        mappings[1],
        _with_cursor(mappings[1], incremental),
        url,
        f"{_namespace(dataset, 'base')}.bookings",
    )


def _with_cursor(mapping: Path, target: Path) -> Path:
    """The mapping with its bookings read since a cursor: every row of a booking one of
    whose rows has a later ``modified_at``."""
    text = re.sub(
        r"(\{type: sql, url: \S+, table: \S+\.bookings)\}",
        r"\1, cursor: {column: modified_at, key: booking_no}}",
        mapping.read_text(encoding="utf-8"),
    )
    assert "cursor:" in text, "the bookings input was not found"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def largest_update(url: str, table: str) -> str:
    """The export's largest ``modified_at``: where a run after it reads from."""
    engine = sa.create_engine(url)
    quote = engine.dialect.identifier_preparer.quote
    name = ".".join(quote(part) for part in table.split("."))
    with engine.connect() as connection:
        value = connection.execute(sa.text(f"SELECT max(modified_at) FROM {name}")).scalar()
    engine.dispose()
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_data", description=__doc__)
    parser.add_argument("--size", type=int, action="append", required=True)
    arguments = parser.parse_args()
    for size in arguments.size:
        dataset = prepare(size)
        for database in DATABASES:
            print(prepare_sql(dataset, database))


if __name__ == "__main__":
    main()
