"""``pms-sync events write MAPPING``, run as cron runs it: the events the receiver stored (posted
to it over HTTP) are written to the mapping's destinations (SQLite, PostgreSQL, MariaDB, a
file), each destination only the events it does not hold yet, its cursor moved only after the
write succeeded."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from connector.snapshot import Snapshot
from tests.loop.loop_samples import (
    RECEIVER_SECRET,
    arrivals,
    run_command,
    run_plain,
    running_receiver,
    table_rows,
    write_connection,
)
from tests.servers import mariadb_database, postgres_schema

HEADERS = {"X-Receiver-Secret": RECEIVER_SECRET}


def post_events(store: Path, *references: str, event: str = "guestLinkOpenedCheckIn") -> None:
    """One event per reference, each posted twice (the second a redelivery)."""
    with running_receiver(store) as receiver:
        for reference in references:
            for _ in range(2):
                httpx.post(
                    f"{receiver.base_url}/events/hotel",
                    json={
                        "accountId": "demo",
                        "event": event,
                        "resource": {"externalId": reference},
                    },
                    headers=HEADERS,
                ).raise_for_status()


def connection(tmp_path: Path, destination: str) -> Path:
    """The hotel connection writing its events to ``destination`` (YAML flow mapping or list)."""
    return write_connection(
        tmp_path / "hotel", arrivals([1]), f"events:\n  destination: {destination}\n"
    )


def write(tmp_path: Path, mapping: Path, **env: str) -> tuple[int, dict, str]:
    return run_command(
        "events", "write", str(mapping), "--events", str(tmp_path / "events.duckdb"), **env
    )


@contextlib.contextmanager
def sql_destination(kind: str, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    """A database to write to: (URL, schema)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'pms.sqlite'}", None
    elif kind == "postgresql":
        with postgres_schema() as (url, schema):
            yield url, schema
    else:
        with mariadb_database() as url:
            yield url, None


DATABASES = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mariadb", marks=pytest.mark.mariadb),
]


@pytest.mark.parametrize("kind", DATABASES)
def test_writing_twice_writes_each_event_once_and_a_later_event_next_time(
    tmp_path: Path, kind: str
) -> None:
    store = tmp_path / "events.duckdb"
    post_events(store, "B1", "B2")
    with sql_destination(kind, tmp_path) as (url, schema):
        where = f"url: '{url}', table: pms_events" + (f", schema: {schema}" if schema else "")
        mapping = connection(tmp_path, f"{{sql: {{{where}}}}}")

        first = write(tmp_path, mapping)
        again = write(tmp_path, mapping)
        post_events(store, "B3")
        later = write(tmp_path, mapping)
        rows = table_rows(url, "pms_events", schema)

    assert first[0] == 0, first[2]
    assert (first[1]["received"], first[1]["written"], first[1]["redeliveries"]) == (2, 2, 2)
    assert first[1]["by_event"] == {"guestLinkOpenedCheckIn": 2}
    assert (again[0], again[1]["received"], again[1]["written"]) == (0, 0, 0)
    assert (later[0], later[1]["received"], later[1]["written"]) == (0, 1, 1)
    # seq is the order of the last delivery: each event's redelivery took the next one.
    assert (later[1]["after_seq"], later[1]["upto_seq"]) == (4, 6)
    references = sorted(row["resource"] for row in rows)
    assert references == [f'{{"externalId":"B{n}"}}' for n in (1, 2, 3)]
    assert [row["deliveries"] for row in sorted(rows, key=lambda r: r["seq"])] == [2, 2, 2]


def test_nothing_received_yet_writes_nothing_and_succeeds(tmp_path: Path) -> None:
    mapping = connection(tmp_path, "{file: out/events.csv}")

    code, document, _ = write(tmp_path, mapping)

    assert (code, document["status"], document["received"], document["written"]) == (
        0,
        "ok",
        0,
        0,
    )
    assert not (tmp_path / "events.duckdb").exists()
    assert not (tmp_path / "hotel" / "out" / "events.csv").exists()


def test_a_mapping_without_an_events_destination_is_refused(tmp_path: Path) -> None:
    mapping = write_connection(tmp_path / "hotel", arrivals([1]))

    code, document, stderr = write(tmp_path, mapping)

    assert (code, document["status"], document["exit_code"]) == (1, "error", 1)
    assert "no `events: destination:`" in document["error"] and "error:" in stderr


def test_a_destination_that_fails_keeps_its_events_for_the_next_run(tmp_path: Path) -> None:
    store = tmp_path / "events.duckdb"
    post_events(store, "B1", "B2")
    # The table's folder does not exist yet: SQLite cannot create the file.
    mapping = connection(
        tmp_path,
        "[{file: out/events.csv}, {sql: {url: 'sqlite:///db/pms.sqlite', table: pms_events}}]",
    )

    failed = write(tmp_path, mapping)
    (tmp_path / "hotel" / "db").mkdir()
    fixed = write(tmp_path, mapping)
    quiet = write(tmp_path, mapping)

    code, document, stderr = failed
    assert (code, document["status"], document["exit_code"]) == (3, "incomplete", 3)
    to_file, to_table = document["write_back"]
    assert (to_file["rows"], to_file["upto_seq"], to_file["error"]) == (2, 4, None)
    assert (to_table["rows"], to_table["upto_seq"]) == (0, 0)
    assert "unable to open database file" in to_table["error"]
    assert "write-back failed:" in stderr
    # The file had its events: only the table gets them, all of them, once.
    assert fixed[0] == 0, fixed[2]
    assert [(w["after_seq"], w["upto_seq"], w["rows"]) for w in fixed[1]["write_back"]] == [
        (4, 4, 0),
        (0, 4, 2),
    ]
    rows = table_rows(f"sqlite:///{tmp_path / 'hotel' / 'db' / 'pms.sqlite'}", "pms_events")
    assert sorted(row["seq"] for row in rows) == [2, 4]
    assert (quiet[0], quiet[1]["written"]) == (0, 0)


def test_a_crash_before_the_cursor_is_saved_writes_the_events_again_harmlessly(
    tmp_path: Path,
) -> None:
    store = tmp_path / "events.duckdb"
    post_events(store, "B1", "B2")
    mapping = connection(tmp_path, "{sql: {url: 'sqlite:///pms.sqlite', table: pms_events}}")
    assert write(tmp_path, mapping)[0] == 0
    # As if the process had died after the table's commit, before the cursor's.
    with duckdb.connect(str(store)) as database:
        database.execute("DELETE FROM event_write_cursors")

    code, document, _ = write(tmp_path, mapping)

    rows = table_rows(f"sqlite:///{tmp_path / 'hotel' / 'pms.sqlite'}", "pms_events")
    assert (code, document["written"]) == (0, 2)
    assert sorted(row["seq"] for row in rows) == [2, 4]


def test_a_refused_password_is_never_shown(tmp_path: Path) -> None:
    post_events(tmp_path / "events.duckdb", "B1")
    secret = "pms-db-password-0123"
    mapping = connection(tmp_path, "{sql: {url: '${PMS_DB_URL}', table: pms_events}}")
    url = f"postgresql+psycopg://pms:{secret}@127.0.0.1:9/pms"  # nothing listens on port 9

    code, document, stderr = write(tmp_path, mapping, PMS_DB_URL=url)
    plain = run_plain(
        "events", "write", str(mapping), "--events", str(tmp_path / "events.duckdb"), PMS_DB_URL=url
    )

    assert (code, document["status"]) == (3, "incomplete")
    assert "pms:***@127.0.0.1:9/pms" in document["write_back"][0]["destination"]
    assert secret not in str(document) + stderr
    assert plain.returncode == 3 and "not written to postgresql+psycopg://pms:***@" in plain.stdout
    assert secret not in plain.stdout + plain.stderr
    with Snapshot.open(tmp_path / "events.duckdb", read_only=True) as events:
        assert events.event_write_cursors("hotel") == {}
