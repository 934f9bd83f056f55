"""Fixtures of the snapshot and plan tests: a fresh snapshot per test, on each backend (a
DuckDB file, a PostgreSQL schema: ``snapshot_location`` in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.snapshot import Snapshot, SnapshotStore


@pytest.fixture
def snapshot_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "snapshot.duckdb"


@pytest.fixture
def snapshot(snapshot_location: str | Path) -> Iterator[SnapshotStore]:
    with Snapshot.open(snapshot_location) as store:
        yield store
