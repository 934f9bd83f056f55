"""Ways of reading a database table into DuckDB, in interleaved rounds:
``python -m bench.sql_readers --size N [--rounds R]``.

The candidates for pms-sync's SQL reader, each reading the benchmark's bookings table (text
columns, bench/sql_data.py) into a DuckDB table in a fresh process: SQLAlchemy (the
fallback), ADBC, connectorx and, for PostgreSQL, ``COPY … TO STDOUT`` read by DuckDB's CSV
reader. The machine is shared: compare within a round, the order rotating each round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.data import ROOT, prepare
from bench.sql_data import MARIADB_URL, POSTGRES_URL, prepare_sql

NULLS = {"", "NULL", "null", "N/A", "n/a"}  # a mapping's default null_values
CANDIDATES = {
    "postgresql": ("sqlalchemy", "adbc", "connectorx", "copy"),
    "mariadb": ("sqlalchemy", "connectorx"),
    "sqlite": ("sqlalchemy", "adbc", "connectorx"),
}


def _url(database: str, size: int) -> tuple[str, str]:
    """The SQLAlchemy URL and the bookings table of ``database``."""
    if database == "postgresql":
        return POSTGRES_URL, f"pms_bench_{size}_base.bookings"
    if database == "mariadb":
        return MARIADB_URL, f"pms_bench_{size}_base.bookings"
    return f"sqlite:///{_sqlite_file(size)}", "bookings"


def _sqlite_file(size: int) -> Path:
    dataset = prepare(size)
    path = dataset.base.parent / "bookings.sqlite"
    if not path.exists():
        import csv

        with (dataset.base / "data" / "bookings.csv").open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader)
            partial = path.with_suffix(".partial")
            partial.unlink(missing_ok=True)
            with sqlite3.connect(partial) as db:
                columns = ", ".join(f'"{name}" TEXT' for name in header)
                db.execute(f"CREATE TABLE bookings ({columns})")
                marks = ", ".join("?" for _ in header)
                db.executemany(f"INSERT INTO bookings VALUES ({marks})", reader)
            partial.rename(path)
    return path


def read_once(database: str, candidate: str, size: int) -> dict[str, Any]:
    """One read in this process: seconds, rows, and this process's peak memory."""
    import duckdb

    from connector.sources import SqlSource

    url, table = _url(database, size)
    started, cpu = time.perf_counter(), time.process_time()
    with duckdb.connect() as connection:
        if candidate in ("sqlalchemy", "adbc") or (
            candidate == "connectorx" and database == "mariadb"
        ):
            # pms-sync's own reader: SQLAlchemy forced, else its Arrow reader for the database.
            reader = "sqlalchemy" if candidate == "sqlalchemy" else "auto"
            rows = SqlSource("bookings", url, table=table, reader=reader).load_into(connection, "t")
        elif candidate == "connectorx":
            # connectorx's batches through pms-sync's own insert (blank texts made NULL).
            import connectorx as cx

            from connector.sources.base import create_text_table
            from connector.sources.sql_source import _insert_sql, _numbered

            uri = (
                url.replace("postgresql+psycopg", "postgresql")
                if database == "postgresql"
                else f"sqlite://{_sqlite_file(size)}"
            )
            stream = cx.read_sql(
                uri, f"SELECT * FROM {table}", return_type="arrow_stream", batch_size=50_000
            )
            width = len(stream.schema)
            create_text_table(connection, "t", [f"c{index}" for index in range(width)])
            batches = (batch.columns for batch in stream)
            connection.register("_pms_sync_arrow_rows", _numbered(batches, width, []))
            connection.execute(_insert_sql("t", width, "bookings", NULLS))
            rows = connection.execute("SELECT count(*) FROM t").fetchone()[0]  # type: ignore[index]
        else:  # copy: PostgreSQL's CSV text, read by DuckDB's CSV reader as CSV inputs are
            import psycopg

            from connector.sources.base import text_column_sql

            with tempfile.NamedTemporaryFile(suffix=".csv") as spool:
                with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as pg:
                    cursor = pg.cursor()
                    with cursor.copy(
                        f"COPY (SELECT * FROM {table}) TO STDOUT (FORMAT csv, HEADER true)"
                    ) as copy:
                        for block in copy:
                            spool.write(block)
                spool.flush()
                names = [
                    row[0]
                    for row in connection.execute(
                        f"DESCRIBE SELECT * FROM read_csv('{spool.name}', all_varchar=true)"
                    ).fetchall()
                ]
                texts = ", ".join(text_column_sql(name) for name in names)
                nulls = ", ".join(f"'{value}'" for value in sorted(NULLS))
                connection.execute(
                    f"CREATE TABLE t AS SELECT {texts}, row_number() OVER () AS _row FROM "
                    f"read_csv('{spool.name}', all_varchar=true, nullstr=[{nulls}])"
                )
            rows = connection.execute("SELECT count(*) FROM t").fetchone()[0]  # type: ignore[index]
    return {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "rows": rows,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure(size: int, rounds: int, databases: list[str]) -> dict[str, Any]:
    dataset = prepare(size)
    for database in databases:
        if database != "sqlite":
            prepare_sql(dataset, database)
        else:
            _sqlite_file(size)
    results: dict[str, Any] = {}
    for database in databases:
        candidates = list(CANDIDATES[database])
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in candidates}
        for index in range(rounds):
            order = candidates[index % len(candidates) :] + candidates[: index % len(candidates)]
            for candidate in order:
                completed = subprocess.run(
                    [
                        *(sys.executable, "-m", "bench.sql_readers", "--once", database),
                        *(candidate, "--size", str(size)),
                    ],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    env={**os.environ},
                    check=True,
                )
                run = json.loads(completed.stdout.strip().splitlines()[-1])
                run["load"] = os.getloadavg()[0]
                runs[candidate].append(run)
                print(f"[readers] {database} {candidate} {run['seconds']:.1f} s", file=sys.stderr)
        results[database] = {
            name: {
                "seconds": statistics.median(run["seconds"] for run in done),
                "cpu_seconds": statistics.median(run["cpu_seconds"] for run in done),
                "peak_rss_mb": statistics.median(run["peak_rss_mb"] for run in done),
                "rows": done[0]["rows"],
                "runs": done,
            }
            for name, done in runs.items()
        }
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        "| database | reader | seconds (median) | CPU s | peak MB | ÷ SQLAlchemy |",
        "|---|---|---|---|---|---|",
    ]
    for database, readers in results.items():
        base = readers["sqlalchemy"]["seconds"]
        for name, figures in readers.items():
            lines.append(
                f"| {database} | {name} | {figures['seconds']:.2f} | "
                f"{figures['cpu_seconds']:.2f} | {figures['peak_rss_mb']:.0f} | "
                f"{figures['seconds'] / base:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_readers", description=__doc__)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--databases", default="postgresql,mariadb,sqlite")
    parser.add_argument("--once", nargs=2, metavar=("DATABASE", "READER"))
    parser.add_argument("--out", type=Path, default=None)
    arguments = parser.parse_args()
    if arguments.once:
        print(json.dumps(read_once(*arguments.once, arguments.size)))
        return
    results = measure(arguments.size, arguments.rounds, arguments.databases.split(","))
    if arguments.out:
        arguments.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
