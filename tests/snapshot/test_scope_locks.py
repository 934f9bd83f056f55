"""Writers of a PostgreSQL snapshot exclude each other per scope, not per database; a DuckDB
file keeps its one writer. A refusal names the holder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from connector.errors import SnapshotLockedError
from connector.snapshot import LockScope, Snapshot


def _scope(connection: str | None, *accounts: str, whole: bool = False) -> LockScope:
    return LockScope(connection, frozenset(accounts), whole_connection=whole)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (_scope("north", "A"), _scope("south", "A")),  # other connections
        (_scope("north", "A"), _scope("north", "B")),  # other accounts of one connection
        (_scope("north", whole=True), _scope("south", "A", "B")),
    ],
    ids=["connections", "accounts", "a-whole-connection-and-another"],
)
def test_writers_of_different_scopes_hold_a_postgresql_snapshot_at_once(
    postgres_snapshot_url: str, first: LockScope, second: LockScope
) -> None:
    with (
        Snapshot.open(postgres_snapshot_url, scope=first) as one,
        Snapshot.open(postgres_snapshot_url, scope=second) as other,
    ):
        one.save_limiter_history("one", [1.0])
        other.save_limiter_history("other", [2.0])

        assert (one.limiter_history("other"), other.limiter_history("one")) == ([2.0], [1.0])


@pytest.mark.parametrize(
    ("held", "wanted", "named"),
    [
        (_scope("north", "A", "B"), _scope("north", "B"), "connection 'north', account 'B'"),
        (_scope("north", "A"), _scope("north", whole=True), "connection 'north'"),
        (_scope("north", whole=True), _scope("north", "C"), "connection 'north'"),
        (None, _scope("south", "A"), "the whole snapshot"),
        (_scope("south", "A"), None, "the whole snapshot"),
    ],
    ids=["one-account", "connection-over-account", "account-under-connection", "all", "tool"],
)
def test_a_writer_of_an_overlapping_scope_is_refused_with_the_holder_named(
    postgres_snapshot_url: str, held: LockScope | None, wanted: LockScope | None, named: str
) -> None:
    with (
        Snapshot.open(postgres_snapshot_url, scope=held),
        pytest.raises(SnapshotLockedError) as refused,
        Snapshot.open(postgres_snapshot_url, scope=wanted, lock_timeout=0.3),
    ):
        pass  # pragma: no cover - the open must fail

    message = str(refused.value)
    assert message.startswith(named)
    assert f"pid {os.getpid()} on {socket.gethostname()}" in message
    assert "after waiting 0.3 s" in message and "--wait SECONDS" in message


def test_a_scope_is_free_again_once_its_writer_closed(postgres_snapshot_url: str) -> None:
    scope = _scope("north", "A")
    with Snapshot.open(postgres_snapshot_url, scope=scope) as first:
        first.save_limiter_history("k", [1.0])
    with Snapshot.open(postgres_snapshot_url, scope=scope) as second:
        assert second.limiter_history("k") == [1.0]


def test_a_duckdb_file_keeps_one_writer_whatever_the_scopes(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.duckdb"
    # DuckDB locks a file per process: another process asks for another scope.
    probe = (
        "import sys\n"
        "from connector.snapshot import LockScope, Snapshot\n"
        "with Snapshot.open(sys.argv[1], scope=LockScope('south', frozenset({'B'}))):\n"
        "    pass\n"
    )
    with Snapshot.open(path, scope=_scope("north", "A")):
        other = subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=False
        )

    assert other.returncode != 0
    assert "SnapshotLockedError" in other.stderr
    assert f"in use by another pms-sync process (pid {os.getpid()}" in other.stderr


def test_a_reader_left_open_on_a_new_postgresql_schema_lets_its_own_run_open_it_again(
    postgres_snapshot_url: str,
) -> None:
    """The fingerprint reader stays open while the mapping opens the snapshot again; on a
    schema not yet migrated, the reader's migration must not keep its lock for its lifetime."""
    import threading

    from connector.snapshot._postgres import PostgresSnapshot

    opened: list[str] = []

    def open_again() -> None:
        with PostgresSnapshot.open(postgres_snapshot_url, read_only=True):
            opened.append("reader")
        with Snapshot.open(postgres_snapshot_url, scope=_scope("north", "A")):
            opened.append("writer")

    with PostgresSnapshot.open(postgres_snapshot_url, read_only=True):
        second = threading.Thread(target=open_again, daemon=True)
        second.start()
        second.join(timeout=30)
        assert opened == ["reader", "writer"], "a second open waited on the first reader"
