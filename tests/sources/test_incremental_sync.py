"""Incremental reads end to end: `pms-sync sync` of SQL inputs with a cursor against the
sandbox over real sockets, on SQLite and on the local PostgreSQL and MariaDB.

A run after the first reads only the rows changed since the last acknowledged run (every row
of a booking with a changed row), sends exactly their changes, and never takes a row it did
not read for a deletion; a full read (the interval elapsed, or --full-read) reconciles
deletions. A run whose push fails, or that is killed mid-push, leaves the cursor where it
was: the next run reads the same rows again and sends them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from connector.sandbox.testing import SandboxHandle, running_sandbox
from connector.snapshot import Snapshot
from tests.servers import mariadb_database, postgres_schema_url
from tests.sources.incremental_pms import START, load, write_mapping

REPOSITORY = Path(__file__).resolve().parents[2]


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    with running_sandbox(tmp_path_factory.mktemp("sandbox")) as handle:
        yield handle


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    if request.param == "sqlite":
        engine = load(f"sqlite:///{tmp_path / 'pms.sqlite'}")
        yield engine
        engine.dispose()
        return
    opened = postgres_schema_url if request.param == "postgresql" else mariadb_database
    with opened("pms_sync_incremental") as url:
        engine = load(url)
        yield engine
        engine.dispose()


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = load(f"sqlite:///{tmp_path / 'pms.sqlite'}")
    yield engine
    engine.dispose()


# -- helpers ----------------------------------------------------------------------------------


def _environment(sandbox: SandboxHandle, state: Path, **more: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPOSITORY),
        "PMS_SYNC_BASE_URL": sandbox.base_url,
        "PMS_SYNC_SNAPSHOT": str(state / "snapshot.duckdb"),
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_MAX_ATTEMPTS": "1",
        **more,
    }


CLI = [sys.executable, "-c", "from connector.cli import main; main()"]


def _sync(mapping: Path, sandbox: SandboxHandle, *options: str, **env: str) -> dict[str, Any]:
    """``pms-sync sync MAPPING --json`` in a process of its own; its report."""
    done = subprocess.run(
        [*CLI, "sync", str(mapping), "--json", *options],
        env=_environment(sandbox, mapping.parent, **env),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=mapping.parent,
    )
    assert done.stdout, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _reads(report: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {read["input"]: (read["mode"], read["rows"]) for read in report["reads"]}


def _stored(sandbox: SandboxHandle, entity: str) -> dict[str, dict[str, Any]]:
    return {record["id"]: record["resource"] for record in sandbox.records("demo", entity)}


def _cursors(mapping: Path) -> dict[str, str | None]:
    with Snapshot.open(mapping.parent / "snapshot.duckdb", read_only=True) as snapshot:
        return {
            name: cursor.value.text if cursor.value else None
            for (name, _), cursor in snapshot.source_cursors("incremental").items()
        }


def _execute(engine: sa.Engine, sql: str, **params: Any) -> None:
    with engine.begin() as connection:
        connection.execute(sa.text(sql), params)


# -- the behaviour ----------------------------------------------------------------------------


def test_an_incremental_run_sends_exactly_the_changes_and_a_full_read_finds_deletions(
    database: sa.Engine, sandbox: SandboxHandle, tmp_path: Path
) -> None:
    sandbox.reset()
    mapping = write_mapping(tmp_path, database.url.render_as_string(hide_password=False))

    first = _sync(mapping, sandbox)
    assert first["status"] == "succeeded", first
    assert _reads(first) == {"units": ("full", 6), "bookings": ("full", 5)}
    assert first["counts"]["create"] == 6 + 4 and first["cursors_committed"] is True

    later = START + timedelta(days=1)
    # Edits, an insert, one room of a two-room booking, and a deletion of each entity.
    _execute(
        database,
        "UPDATE units SET name = 'Flat 2 renamed', updated_at = :at WHERE id = 2",
        at=later,
    )
    _execute(database, "INSERT INTO units VALUES (7, 'Flat 7', :at)", at=later)
    _execute(database, "DELETE FROM units WHERE id = 6")
    _execute(
        database, "UPDATE bookings SET adults = 4, updated_at = :at WHERE row_id = 3", at=later
    )
    _execute(
        database,
        "INSERT INTO bookings VALUES (6, 'B5', 1, '2030-10-01', '2030-10-03', 2, :at)",
        at=later,
    )
    _execute(database, "DELETE FROM bookings WHERE booking_ref = 'B4'")

    second = _sync(mapping, sandbox)
    assert second["status"] == "succeeded", second
    # The rows at or after the last run's largest value (unit 6 and booking B4 had it, and
    # are gone): units 2 and 7; both rows of booking B2, whose second room changed, and B5.
    assert _reads(second) == {"units": ("incremental", 2), "bookings": ("incremental", 3)}
    assert second["counts"]["create"] == 2 and second["counts"]["update"] == 2, second
    assert second["counts"]["deactivate"] == 0 and second["counts"]["cancel"] == 0
    assert second["requests"] == 4
    units, bookings = _stored(sandbox, "accommodation"), _stored(sandbox, "reservation")
    assert units["2"]["name"] == "Flat 2 renamed" and units["6"]["status"] == "ACTIVE"
    # The two-room booking was rebuilt from both its rows, not from the changed one alone.
    assert sorted(u["adults"] for u in bookings["B2"]["unitReservations"]) == [1, 4]
    assert bookings["B4"]["status"] == "CONFIRMED" and "B5" in bookings

    nothing = _sync(mapping, sandbox)
    assert nothing["requests"] == 0 and _reads(nothing)["units"][0] == "incremental"

    full = _sync(mapping, sandbox, "--full-read")
    assert _reads(full) == {"units": ("full", 6), "bookings": ("full", 5)}
    assert full["counts"]["deactivate"] == 1 and full["counts"]["cancel"] == 1, full
    assert full["requests"] == 2
    assert _stored(sandbox, "accommodation")["6"]["status"] == "INACTIVE"
    assert _stored(sandbox, "reservation")["B4"]["status"] == "CANCELLED"


def test_the_full_read_interval_elapsed_reads_in_full(
    sqlite_database: sa.Engine, sandbox: SandboxHandle, tmp_path: Path
) -> None:
    sandbox.reset()
    mapping = write_mapping(tmp_path, sqlite_database.url.render_as_string(hide_password=False))
    _sync(mapping, sandbox)
    _execute(sqlite_database, "DELETE FROM units WHERE id = 6")  # no stays in it

    kept = _sync(mapping, sandbox, "--full-read-interval", "7d")
    assert _reads(kept)["units"][0] == "incremental" and kept["counts"]["deactivate"] == 0

    # The last full read is older than the interval: this run reads in full.
    time.sleep(2.5)
    elapsed = _sync(mapping, sandbox, PMS_SYNC_FULL_READ_INTERVAL="2s")
    assert _reads(elapsed)["units"] == ("full", 5)
    assert elapsed["counts"]["deactivate"] == 1
    assert "interval" in next(r["reason"] for r in elapsed["reads"] if r["input"] == "units")


def test_a_failed_push_leaves_the_cursor_and_the_next_run_sends_the_change(
    sqlite_database: sa.Engine, sandbox: SandboxHandle, tmp_path: Path
) -> None:
    sandbox.reset()
    mapping = write_mapping(tmp_path, sqlite_database.url.render_as_string(hide_password=False))
    _sync(mapping, sandbox)
    before = _cursors(mapping)

    later = START + timedelta(days=2)
    _execute(
        sqlite_database,
        "UPDATE units SET name = 'Flat 1 new', updated_at = :at WHERE id = 1",
        at=later,
    )
    sandbox.set_faults(error_rate=1.0)
    try:
        failed = _sync(mapping, sandbox)
    finally:
        sandbox.set_faults(error_rate=0.0)
    assert failed["outcomes"]["pending"] == 1 and failed["cursors_committed"] is False
    assert _cursors(mapping) == before

    again = _sync(mapping, sandbox)
    assert _reads(again)["units"][0] == "incremental"
    assert again["counts"]["update"] == 1 and again["outcomes"]["acknowledged"] == 1
    assert _stored(sandbox, "accommodation")["1"]["name"] == "Flat 1 new"
    assert _cursors(mapping)["units"] == later.isoformat(sep=" ")


def test_a_run_killed_mid_push_leaves_the_cursor_and_the_next_run_sends_the_changes(
    sqlite_database: sa.Engine, sandbox: SandboxHandle, tmp_path: Path
) -> None:
    sandbox.reset()
    mapping = write_mapping(tmp_path, sqlite_database.url.render_as_string(hide_password=False))
    _sync(mapping, sandbox)
    before = _cursors(mapping)

    later = START + timedelta(days=3)
    _execute(
        sqlite_database, "UPDATE units SET name = name || ' (new)', updated_at = :at", at=later
    )
    sandbox.set_faults(latency_ms=400)
    try:
        process = subprocess.Popen(
            [*CLI, "sync", str(mapping), "--json", "--concurrency", "1"],
            env=_environment(sandbox, tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        try:
            # Killed once the first update is stored: the rest are not sent yet.
            deadline = time.monotonic() + 120
            while not _renamed(sandbox) and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            process.wait(timeout=30)
    finally:
        sandbox.set_faults(latency_ms=0)
    assert process.returncode == -signal.SIGKILL
    stored = len(_renamed(sandbox))
    assert 0 < stored < 6
    assert _cursors(mapping) == before

    again = _sync(mapping, sandbox)
    assert _reads(again)["units"] == ("incremental", 6)
    assert len(_renamed(sandbox)) == 6
    # What the killed run had sent is not sent again, unless its answer was lost in the kill.
    assert 6 - stored <= again["outcomes"]["acknowledged"] <= 6 - stored + 1
    assert _cursors(mapping)["units"] == later.isoformat(sep=" ")


def _renamed(sandbox: SandboxHandle) -> list[str]:
    return [i for i, unit in _stored(sandbox, "accommodation").items() if "(new)" in unit["name"]]
