"""The snapshot file: created on demand, migrated forward, written once per answer, locked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from connector.contract import Entity
from connector.errors import SnapshotLockedError
from connector.snapshot import (
    MIGRATIONS,
    Refusal,
    RunCounts,
    RunRecord,
    Snapshot,
    SnapshotStore,
    migrate,
)


def test_opening_creates_the_file_and_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "snapshot.duckdb"

    with Snapshot.open(path) as snapshot:
        assert snapshot.acknowledged().empty

    assert path.is_file()


def test_a_fresh_snapshot_and_its_write_ahead_log_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "snapshot.duckdb"
    previous = os.umask(0o022)  # the usual default: 0644 files, 0755 folders
    try:
        with Snapshot.open(path) as snapshot:
            snapshot.record_refusals([_refusal("R1")])
            wal = path.with_name(path.name + ".wal")
            modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (path, wal) if p.exists()}
    finally:
        os.umask(previous)

    assert modes == {name: "0o600" for name in modes} and path.name in modes
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_read_only_open_plans_against_an_empty_snapshot_and_creates_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "snapshot.duckdb"

    with Snapshot.open(path, read_only=True) as snapshot:
        empty = snapshot.acknowledged().empty

    assert empty and not path.parent.exists()


def test_a_read_only_open_of_an_older_schema_migrates_in_memory_and_leaves_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as connection:
        migrate(connection, MIGRATIONS[:1])
    before = path.read_bytes()

    with Snapshot.open(path, read_only=True) as snapshot:
        latest = snapshot.fingerprint(["demo"])

    assert latest and path.read_bytes() == before


def _refusal(record_id: str) -> Refusal:
    return Refusal(
        account_id="demo",
        entity=Entity.ACCOMMODATION,
        record_id=record_id,
        content_hash="h",
        http_status=400,
        message="refused",
        seen_at=datetime(2026, 1, 1),
        request_id=None,
    )


def test_a_version_1_file_opens_after_the_upgrade_to_version_2_with_its_data(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.duckdb"
    connection = duckdb.connect(str(path))
    migrate(connection, MIGRATIONS[:1])  # the file as pms-sync with schema v1 left it
    connection.execute(
        "INSERT INTO acknowledged VALUES ('acc', 'accommodation', 'U1', 'h1', '{}', NULL, NULL, "
        "'active', TIMESTAMP '2026-01-01 00:00:00', 'req-1')"
    )
    connection.close()

    with Snapshot.open(path) as snapshot:
        assert snapshot.acknowledged()["record_id"].tolist() == ["U1"]
        assert snapshot.runs().empty  # the v2 table exists now

    versions = duckdb.connect(str(path)).execute(
        "SELECT version FROM schema_migrations ORDER BY version"
    )
    assert [row[0] for row in versions.fetchall()] == [step.version for step in MIGRATIONS]


def test_repeated_refusal_counts_attempts_and_keeps_first_seen(snapshot: SnapshotStore) -> None:
    first, second = datetime(2026, 1, 1, 8), datetime(2026, 1, 2, 8)
    for seen, message in ((first, "bad date"), (second, "still a bad date")):
        snapshot.record_refusals(
            [Refusal("acc", Entity.RESERVATION, "R1", "h", 400, message, seen, "req")]
        )

    letter = snapshot.dead_letters().iloc[0]

    assert (letter.attempts, letter.message) == (2, "still a bad date")
    assert (letter.first_seen, letter.last_seen) == (first, second)


def test_run_history_keeps_counts_per_account_and_entity(snapshot: SnapshotStore) -> None:
    start, end = datetime(2026, 1, 1, 8), datetime(2026, 1, 1, 8, 0, 3)
    snapshot.record_run(
        RunRecord(
            "run-1",
            "hotel.yaml",
            ("acc",),
            start,
            end,
            False,
            7,
            "succeeded",
            (
                RunCounts(
                    "acc", Entity.RESERVATION, extracted=10, create=7, acknowledged=7, requests=7
                ),
            ),
        )
    )

    run = snapshot.runs().iloc[0]
    counts = snapshot.run_counts("run-1").iloc[0]

    assert (run.duration_s, run.requests) == (3.0, 7)
    assert (counts.extracted, counts.create, counts.acknowledged) == (10, 7, 7)


def test_a_second_process_gets_a_clear_locked_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "busy.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import duckdb, sys, time
                connection = duckdb.connect({str(path)!r})
                print("ready", flush=True)
                sys.stdin.readline()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(SnapshotLockedError, match=str(path)), Snapshot.open(path):
            pass
    finally:
        holder.communicate("\n", timeout=10)
